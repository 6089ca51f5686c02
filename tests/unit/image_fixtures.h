/* image_fixtures.h — image datasets written by the tests themselves
** (header-only; include after cmocka.h and decode_fixtures.h): files,
** JPEGs and PNGs from decode_fixtures' patterns, folders, WebDataset tar
** members, and a tar of an image source's files in index order. */
#ifndef STOKE_TEST_IMAGE_FIXTURES_H
#define STOKE_TEST_IMAGE_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A new folder "/tmp/stoke-<tag>-XXXXXX", its name in root (64 bytes). */
static inline void tmp_root(char root[64], const char *tag) {
  snprintf(root, 64, "/tmp/stoke-%.20s-XXXXXX", tag);
  assert_non_null(mkdtemp(root));
}

/* rm -rf root; 0 when it went. */
static inline int tmp_root_remove(const char *root) {
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd);
}

static inline void write_file(const char *dir, const char *name, const void *p,
                       size_t n) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (n) assert_int_equal(fwrite(p, 1, n, f), n);
  fclose(f);
}

static inline void write_jpeg(const char *dir, const char *name, uint32_t w,
                       uint32_t h, const df_jpeg_opts *o, uint64_t seed) {
  uint8_t *px = df_pattern(w, h, seed), *buf;
  size_t n;
  if (o->in == JCS_GRAYSCALE) { /* one channel: take the pattern's green */
    for (size_t i = 0; i < (size_t)w * h; i++) px[i] = px[3 * i + 1];
  } else if (o->in == JCS_CMYK) {
    uint8_t *cmyk = malloc((size_t)w * h * 4);
    for (size_t i = 0; i < (size_t)w * h; i++) {
      cmyk[4 * i] = px[3 * i];
      cmyk[4 * i + 1] = px[3 * i + 1];
      cmyk[4 * i + 2] = px[3 * i + 2];
      cmyk[4 * i + 3] = 30;
    }
    free(px);
    px = cmyk;
  }
  df_jpeg(px, w, h, o, &buf, &n);
  write_file(dir, name, buf, n);
  free(px);
  free(buf);
}

static inline void write_png(const char *dir, const char *name, uint32_t w,
                      uint32_t h, uint8_t color, uint8_t depth) {
  size_t ch = color == SPNG_COLOR_TYPE_TRUECOLOR ? 3
              : color == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA ? 4 : 1;
  size_t len = (size_t)w * h * ch * (depth / 8);
  uint8_t *px = malloc(len);
  for (size_t i = 0; i < len; i++) px[i] = (uint8_t)(i * 7 + i / 13);
  struct spng_plte plte = {.n_entries = 256};
  for (int i = 0; i < 256; i++) {
    plte.entries[i].red = (uint8_t)i;
    plte.entries[i].green = (uint8_t)(255 - i);
    plte.entries[i].blue = (uint8_t)(i * 3);
  }
  uint8_t *buf;
  size_t n;
  assert_int_equal(df_png(px, len, w, h, color, depth, 0,
                          color == SPNG_COLOR_TYPE_INDEXED ? &plte : NULL,
                          NULL, &buf, &n),
                   0);
  write_file(dir, name, buf, n);
  free(px);
  free(buf);
}

static inline void mkdir_in(char *out, size_t cap, const char *parent,
                     const char *name) {
  snprintf(out, cap, "%s/%s", parent, name);
  assert_int_equal(mkdir(out, 0755), 0);
}

/* A minimal ustar writer: WebDataset-style members key.ext. */
static inline void tar_member(FILE *f, const char *name, const void *p, size_t n) {
  unsigned char h[512] = {0};
  snprintf((char *)h, 100, "%s", name);
  snprintf((char *)h + 100, 8, "0000644");
  snprintf((char *)h + 108, 8, "0000000");
  snprintf((char *)h + 116, 8, "0000000");
  snprintf((char *)h + 124, 12, "%011lo", (unsigned long)n);
  snprintf((char *)h + 136, 12, "%011o", 0);
  h[156] = '0';
  memcpy(h + 257, "ustar", 6);
  memcpy(h + 263, "00", 2);
  memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (int i = 0; i < 512; i++) sum += h[i];
  snprintf((char *)h + 148, 8, "%06o", sum);
  fwrite(h, 1, 512, f);
  fwrite(p, 1, n, f);
  static const unsigned char zero[512];
  fwrite(zero, 1, (512 - n % 512) % 512, f);
}

static inline void *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  rewind(f);
  void *p = malloc(*n ? *n : 1);
  assert_int_equal(fread(p, 1, *n, f), *n);
  fclose(f);
  return p;
}

/* A tar shard at tarpath holding every sample of the folder source fsrc
** in index order: sNNN.jpg (the file's bytes, whatever its format) and
** sNNN.cls (its label). */
static inline void tar_of_source(stoke_source *fsrc, const char *tarpath) {
  FILE *tf = fopen(tarpath, "wb");
  assert_non_null(tf);
  for (size_t i = 0; i < stoke_source_n_samples(fsrc); i++) {
    char where[256], path[640], key[64];
    stoke_source_describe(fsrc, i, where, sizeof where);
    snprintf(path, sizeof path, "%s", where); /* a folder names the file */
    size_t n;
    if (access(path, R_OK) != 0) fail_msg("describe gave '%s'", where);
    void *p = slurp(path, &n);
    snprintf(key, sizeof key, "s%03zu.jpg", i);
    tar_member(tf, key, p, n);
    char cls[16];
    int len = snprintf(cls, sizeof cls, "%lld",
                       (long long)stoke_source_label(fsrc, i));
    snprintf(key, sizeof key, "s%03zu.cls", i);
    tar_member(tf, key, cls, (size_t)len);
    free(p);
  }
  static const unsigned char end[1024];
  fwrite(end, 1, sizeof end, tf);
  fclose(tf);
}

/* A small dataset in three storages under root (an existing folder):
** root/train/{ant,bee}/ with 4 JPEGs (two 4:2:0, a progressive one and a
** grayscale one), 2 PNGs, 24..80 px, and a symbolic link to one of them; root/train.tar, the same samples
** as tar_of_source writes them; root/pk-0000N.stoke, packed from the
** folder in shards of ~6 KB (several files).  The paths go to folder_out,
** tar_out and packed_out (a glob), each of cap bytes. */
static inline void small_dataset(const char *root, char *folder_out,
                                 char *tar_out, char *packed_out,
                                 size_t cap) {
  char d[512];
  snprintf(folder_out, cap, "%s/train", root);
  assert_int_equal(mkdir(folder_out, 0755), 0);
  df_jpeg_opts rgb = {JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 0};
  df_jpeg_opts prog = {JCS_RGB, JCS_UNKNOWN, 85, 1, 2, 2, 0};
  df_jpeg_opts gray = {JCS_GRAYSCALE, JCS_UNKNOWN, 90, 0, 0, 0, 0};
  mkdir_in(d, sizeof d, folder_out, "ant");
  write_jpeg(d, "a.jpg", 64, 48, &rgb, 11);
  write_jpeg(d, "b.jpg", 80, 40, &prog, 12);
  write_png(d, "c.png", 30, 24, SPNG_COLOR_TYPE_TRUECOLOR, 8);
  mkdir_in(d, sizeof d, folder_out, "bee");
  write_jpeg(d, "a.jpg", 40, 64, &gray, 13);
  write_jpeg(d, "b.jpg", 48, 48, &rgb, 14);
  write_png(d, "c.png", 32, 32, SPNG_COLOR_TYPE_GRAYSCALE, 8);
  /* A link, as datasets made of other datasets have: the folder reader
  ** stats it (followed, as torchvision does). */
  char link[600];
  snprintf(link, sizeof link, "%s/d.jpg", d);
  assert_int_equal(symlink("../ant/a.jpg", link), 0);
  stoke_source *src = NULL;
  if (stoke_source_create_images(folder_out, NULL, &src) != 0)
    fail_msg("open %s: %s", folder_out, stoke_errmsg(NULL));
  snprintf(tar_out, cap, "%s/train.tar", root);
  tar_of_source(src, tar_out);
  char prefix[160];
  snprintf(prefix, sizeof prefix, "%.150s/pk", root);
  stoke_pack_config pc;
  stoke_pack_config_init(&pc);
  pc.shard_bytes = 6000;
  stoke_pack_result res;
  if (stoke_pack(src, prefix, &pc, &res) != 0)
    fail_msg("pack %s: %s", prefix, stoke_errmsg(NULL));
  assert_true(res.n_shards >= 2);
  snprintf(packed_out, cap, "%.150s-*.stoke", prefix);
  stoke_source_destroy(src);
}
#define SMALL_DATASET_N 7

#endif /* STOKE_TEST_IMAGE_FIXTURES_H */
