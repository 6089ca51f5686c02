/* test_image_source.c — image datasets through the whole engine: every
** storage kind (folder, tar, packed) feeds every transform; a batch is the
** same whatever the worker count and whatever the storage (the same sample
** index gets the same random crop); bad files fail with a message naming
** the file and the cause. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <spng.h>

#include "decode_fixtures.h"
#include "image_fixtures.h"
#include "test_util.h"
#include "stoke.h"

static char root[64];
static char folder[128];

/* cat: JPEGs of every kind; dog: PNGs of every kind (and one named .jpg);
** zebra: 4:4:4 JPEGs and a file that is not an image. */
static int setup(void **state) {
  (void)state;
  tmp_root(root, "img");
  mkdir_in(folder, sizeof folder, root, "train");
  char d[256];
  df_jpeg_opts rgb = {JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 0};
  df_jpeg_opts prog = {JCS_RGB, JCS_UNKNOWN, 85, 1, 2, 2, 0};
  df_jpeg_opts gray = {JCS_GRAYSCALE, JCS_UNKNOWN, 90, 0, 0, 0, 0};
  df_jpeg_opts cmyk = {JCS_CMYK, JCS_UNKNOWN, 90, 0, 0, 0, 0};
  df_jpeg_opts full = {JCS_RGB, JCS_UNKNOWN, 92, 0, 1, 1, 0};
  mkdir_in(d, sizeof d, folder, "cat");
  write_jpeg(d, "a.jpg", 333, 257, &rgb, 1);
  write_jpeg(d, "b.JPEG", 1, 1, &rgb, 2);
  write_jpeg(d, "c.jpg", 640, 480, &prog, 3);
  write_jpeg(d, "d.jpg", 200, 300, &gray, 4);
  write_jpeg(d, "e.jpg", 150, 120, &cmyk, 5);
  write_jpeg(d, "f.jpg", 1200, 900, &rgb, 6); /* DCT-scaled crops */
  mkdir_in(d, sizeof d, folder, "dog");
  write_png(d, "a.png", 90, 70, SPNG_COLOR_TYPE_TRUECOLOR, 8);
  write_png(d, "b.png", 64, 64, SPNG_COLOR_TYPE_INDEXED, 8);
  write_png(d, "c.png", 50, 80, SPNG_COLOR_TYPE_GRAYSCALE, 16);
  write_png(d, "d.png", 77, 33, SPNG_COLOR_TYPE_TRUECOLOR_ALPHA, 8);
  write_png(d, "fake.jpg", 40, 40, SPNG_COLOR_TYPE_TRUECOLOR, 8);
  mkdir_in(d, sizeof d, folder, "zebra");
  write_jpeg(d, "a.jpg", 100, 100, &full, 7);
  write_jpeg(d, "b.jpg", 480, 640, &full, 8);
  write_file(d, "README.txt", "not an image\n", 13);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  return tmp_root_remove(root);
}

enum { N_IMAGES = 13 };

/* One epoch with W workers: every batch's bytes concatenated, in order. */
static uint8_t *run_epoch(stoke_source *src, unsigned workers, size_t batch,
                          size_t *bytes, int64_t *labels) {
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = batch;
  cfg.n_workers = workers;
  cfg.shuffle = 1;
  cfg.seed = 7;
  stoke_loader *l;
  assert_int_equal(stoke_loader_create(&cfg, &l), 0);
  uint8_t *all = NULL;
  size_t n = 0, k = 0;
  stoke_batch *b;
  int rc;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    stoke_tensor img, lab;
    assert_int_equal(stoke_batch_field(b, 0, &img), 0);
    assert_int_equal(stoke_batch_field(b, 1, &lab), 0);
    all = realloc(all, n + img.n_bytes);
    memcpy(all + n, img.data, img.n_bytes);
    n += img.n_bytes;
    for (size_t i = 0; i < stoke_batch_size(b); i++)
      labels[k++] = ((const int64_t *)lab.data)[i] * 1000 +
                    (int64_t)stoke_batch_indices(b)[i];
    stoke_batch_release(b);
  }
  if (rc != STOKE_END) fail_msg("epoch failed: %s", stoke_errmsg(l));
  assert_int_equal(k, N_IMAGES);
  stoke_loader_destroy(l);
  *bytes = n;
  return all;
}

static void test_folder_listing(void **state) {
  (void)state;
  stoke_source *src = tu_open_images(folder, NULL);
  assert_string_equal(stoke_source_kind(src), "folder");
  assert_int_equal(stoke_source_n_samples(src), N_IMAGES);
  assert_int_equal(stoke_source_n_classes(src), 3);
  assert_string_equal(stoke_source_class_name(src, 0), "cat");
  assert_string_equal(stoke_source_class_name(src, 2), "zebra");
  assert_int_equal(stoke_source_label(src, 0), 0);
  assert_int_equal(stoke_source_label(src, N_IMAGES - 1), 2);
  assert_int_equal(stoke_source_n_skipped(src), 1);
  const char *why, *path = stoke_source_skipped(src, 0, &why);
  assert_non_null(strstr(path, "README.txt"));
  assert_non_null(why);
  /* The default transform: 3x224x224 u8 and an i64 label. */
  const stoke_field_desc *d = stoke_source_field(src, 0);
  assert_int_equal(d->dtype, STOKE_U8);
  assert_int_equal(d->shape[0], 3);
  assert_int_equal(d->shape[1], 224);
  stoke_image_info info;
  assert_int_equal(stoke_source_probe(src, 0, &info), 0);
  assert_int_equal(info.format, STOKE_IMAGE_JPEG);
  assert_int_equal(info.width, 333);
  assert_int_equal(info.height, 257);
  /* dog/fake.jpg holds PNG bytes: the format comes from the bytes. */
  assert_int_equal(stoke_source_probe(src, 10, &info), 0);
  assert_int_equal(info.format, STOKE_IMAGE_PNG);
  stoke_source_destroy(src);
}

/* Every transform through W = 0 and W = 3 gives identical epochs. */
static void test_transforms_and_worker_counts(void **state) {
  (void)state;
  static const char *const specs[] = {
      "random-resized-crop=64,flip,chw,u8",
      "resize=80,center-crop=64,normalize=imagenet,chw,f32",
      "random-resized-crop=48x40,hwc,f16",
  };
  static const size_t out_bytes[] = {3 * 64 * 64, 3 * 64 * 64 * 4,
                                     48 * 40 * 3 * 2};
  for (size_t t = 0; t < sizeof specs / sizeof specs[0]; t++) {
    stoke_source *src = tu_open_images(folder, specs[t]);
    int64_t l0[N_IMAGES], l3[N_IMAGES];
    size_t n0, n3;
    uint8_t *a = run_epoch(src, 0, 4, &n0, l0);
    uint8_t *b = run_epoch(src, 3, 4, &n3, l3);
    assert_int_equal(n0, N_IMAGES * out_bytes[t]);
    assert_int_equal(n0, n3);
    assert_memory_equal(a, b, n0);
    assert_memory_equal(l0, l3, sizeof l0);
    /* Not all zero: pixels were written. */
    size_t nz = 0;
    for (size_t i = 0; i < n0; i++) nz += a[i] != 0;
    assert_true(nz > n0 / 4);
    free(a);
    free(b);
    stoke_source_destroy(src);
  }
}

/* The same samples in the same index order give the same epoch from a
** folder, a tar shard and packed shards. */
static void test_three_storages_agree(void **state) {
  (void)state;
  const char *spec = "random-resized-crop=56,flip,normalize=imagenet,chw,f32";
  stoke_source *fsrc = tu_open_images(folder, spec);
  /* Pack it (small shards: several files). */
  char prefix[256], pattern[300];
  snprintf(prefix, sizeof prefix, "%s/packed", root);
  stoke_pack_config pc;
  stoke_pack_config_init(&pc);
  pc.shard_bytes = 20000;
  stoke_pack_result res;
  assert_int_equal(stoke_pack(fsrc, prefix, &pc, &res), 0);
  assert_int_equal(res.n_samples, N_IMAGES);
  assert_true(res.n_shards >= 2);
  /* Every JPEG is rewritten with restart markers but the CMYK one. */
  assert_int_equal(res.n_rewritten, 7);
  assert_int_equal(res.n_kept, 1);
  if (!strstr(res.first_kept, "e.jpg"))
    fail_msg("first kept: '%s'", res.first_kept);
  snprintf(pattern, sizeof pattern, "%s-*.stoke", prefix);
  stoke_source *psrc = tu_open_images(pattern, spec);
  assert_string_equal(stoke_source_kind(psrc), "packed");
  /* The folder's class names travel with the shards. */
  assert_int_equal(stoke_source_n_classes(psrc), stoke_source_n_classes(fsrc));
  for (size_t c = 0; c < stoke_source_n_classes(fsrc); c++)
    assert_string_equal(stoke_source_class_name(psrc, c),
                        stoke_source_class_name(fsrc, c));
  /* And once byte for byte. */
  char kprefix[256], kpattern[300];
  snprintf(kprefix, sizeof kprefix, "%s/kept", root);
  pc.keep_bytes = 1;
  assert_int_equal(stoke_pack(fsrc, kprefix, &pc, &res), 0);
  assert_int_equal(res.n_rewritten, 0);
  assert_int_equal(res.bytes, res.bytes_in);
  snprintf(kpattern, sizeof kpattern, "%s-*.stoke", kprefix);
  stoke_source *ksrc = tu_open_images(kpattern, spec);
  /* A tar of the same files, in index order, with .cls labels. */
  char tarpath[256];
  snprintf(tarpath, sizeof tarpath, "%s/train-0000.tar", root);
  tar_of_source(fsrc, tarpath);
  stoke_source *tsrc = tu_open_images(tarpath, spec);
  assert_string_equal(stoke_source_kind(tsrc), "tar");

  int64_t lf[N_IMAGES], lp[N_IMAGES], lt[N_IMAGES];
  size_t nf, np, nt;
  uint8_t *a = run_epoch(fsrc, 2, 5, &nf, lf);
  uint8_t *b = run_epoch(psrc, 2, 5, &np, lp);
  uint8_t *c = run_epoch(tsrc, 1, 5, &nt, lt);
  int64_t lk[N_IMAGES];
  size_t nk;
  uint8_t *k = run_epoch(ksrc, 3, 5, &nk, lk);
  assert_int_equal(nf, np);
  assert_int_equal(nf, nt);
  assert_int_equal(nf, nk);
  /* The rewritten JPEGs, decoded from restart cuts, give the same bytes. */
  assert_memory_equal(a, b, nf);
  assert_memory_equal(a, c, nf);
  assert_memory_equal(a, k, nf);
  assert_memory_equal(lf, lp, sizeof lf);
  assert_memory_equal(lf, lt, sizeof lf);
  assert_memory_equal(lf, lk, sizeof lf);
  free(a);
  free(b);
  free(c);
  free(k);
  stoke_source_destroy(fsrc);
  stoke_source_destroy(psrc);
  stoke_source_destroy(tsrc);
  stoke_source_destroy(ksrc);
}

static int stop_at_5(void *user, size_t done, size_t total, uint64_t bytes) {
  (void)user;
  (void)total;
  (void)bytes;
  return done >= 5;
}

/* Packing on 1 or 4 threads writes the same bytes; a progress callback
** that stops the pack leaves no shard behind. */
static void test_pack_threads(void **state) {
  (void)state;
  stoke_source *src = tu_open_images(folder, "random-resized-crop=32,chw,u8");
  stoke_pack_config pc;
  stoke_pack_config_init(&pc);
  pc.shard_bytes = 30000;
  char a[256], b[256];
  snprintf(a, sizeof a, "%s/t1", root);
  snprintf(b, sizeof b, "%s/t4", root);
  stoke_pack_result ra, rb;
  pc.n_threads = 1;
  assert_int_equal(stoke_pack(src, a, &pc, &ra), 0);
  pc.n_threads = 4;
  assert_int_equal(stoke_pack(src, b, &pc, &rb), 0);
  assert_int_equal(ra.n_shards, rb.n_shards);
  assert_true(ra.n_shards >= 2);
  assert_int_equal(ra.bytes, rb.bytes);
  assert_int_equal(ra.n_rewritten, rb.n_rewritten);
  assert_string_equal(ra.first_kept, rb.first_kept);
  for (size_t k = 0; k < ra.n_shards; k++) {
    char pa[300], pb[300];
    snprintf(pa, sizeof pa, "%s-%05zu.stoke", a, k);
    snprintf(pb, sizeof pb, "%s-%05zu.stoke", b, k);
    size_t na, nb;
    void *da = slurp(pa, &na), *db = slurp(pb, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(da, db, na);
    free(da);
    free(db);
  }
  char c[256], probe[300];
  snprintf(c, sizeof c, "%s/stopped", root);
  pc.progress = stop_at_5;
  assert_int_equal(stoke_pack(src, c, &pc, NULL), STOKE_EINVAL);
  if (!strstr(stoke_errmsg(NULL), "stopped after 5"))
    fail_msg("message: %s", stoke_errmsg(NULL));
  snprintf(probe, sizeof probe, "%s-00000.stoke", c);
  assert_int_equal(access(probe, F_OK), -1);
  snprintf(probe, sizeof probe, "%s-00000.stoke.tmp", c);
  assert_int_equal(access(probe, F_OK), -1);
  stoke_source_destroy(src);
}

/* Resident bytes (smaps "Rss") of this process's mappings of files whose
** path ends with `suffix`. */
static size_t mapped_rss(const char *suffix) {
  FILE *f = fopen("/proc/self/smaps", "r");
  assert_non_null(f);
  char line[4200];
  size_t total = 0, len = strlen(suffix);
  bool mine = false;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
      size_t n = strcspn(line, "\n");
      line[n] = '\0';
      mine = n >= len && strcmp(line + n - len, suffix) == 0;
    } else if (mine && strncmp(line, "Rss:", 4) == 0) {
      total += strtoul(line + 4, NULL, 10) * 1024;
    }
  }
  fclose(f);
  return total;
}

/* Packed shards are read through mmap; once samples are decoded (loader)
** or copied (stoke_pack of a packed source) their pages leave the resident
** set every 16 MiB, so neither grows with the dataset.  48 MiB of JPEGs:
** with the pages kept, the shard's mapping would hold them all. */
static void test_packed_pages_given_back(void **state) {
  (void)state;
  char dir[128], cls[160], a[160], b[160], spec[200];
  mkdir_in(dir, sizeof dir, root, "big");
  mkdir_in(cls, sizeof cls, dir, "noise");
  uint32_t w = 1024, h = 1024;
  uint8_t *px = malloc((size_t)w * h * 3), *jpg;
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < (size_t)w * h * 3; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    px[i] = (uint8_t)x;
  }
  df_jpeg_opts o = {JCS_RGB, JCS_UNKNOWN, 95, 0, 1, 1, 0};
  size_t n;
  df_jpeg(px, w, h, &o, &jpg, &n);
  free(px);
  size_t copies = (48u << 20) / n + 1;
  for (size_t k = 0; k < copies; k++) {
    char name[32];
    snprintf(name, sizeof name, "%03zu.jpg", k);
    write_file(cls, name, jpg, n);
  }
  free(jpg);
  stoke_source *folder_src = tu_open_images(dir, "random-resized-crop=16,chw,u8");
  stoke_pack_config pc;
  stoke_pack_config_init(&pc);
  pc.keep_bytes = 1;
  pc.shard_bytes = 0; /* one shard */
  snprintf(a, sizeof a, "%s/a", dir);
  assert_int_equal(stoke_pack(folder_src, a, &pc, NULL), 0);
  stoke_source_destroy(folder_src);

  snprintf(spec, sizeof spec, "%s-00000.stoke", a);
  stoke_source *src = tu_open_images(spec, "random-resized-crop=16,chw,u8");
  snprintf(b, sizeof b, "%s/b", dir);
  assert_int_equal(stoke_pack(src, b, &pc, NULL), 0);
  size_t rss = mapped_rss("/big/a-00000.stoke");
  TU_CHECK(rss < (28u << 20), "after stoke_pack the source's mapping holds "
           "%zu KiB of %zu", rss >> 10, (copies * n) >> 10);

  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = 8;
  cfg.n_workers = 2;
  stoke_loader *l;
  assert_int_equal(stoke_loader_create(&cfg, &l), 0);
  stoke_batch *bt;
  int rc;
  while ((rc = stoke_loader_next(l, &bt)) == STOKE_OK) stoke_batch_release(bt);
  assert_int_equal(rc, STOKE_END);
  rss = mapped_rss("/big/a-00000.stoke");
  TU_CHECK(rss < (28u << 20), "after an epoch the source's mapping holds "
           "%zu KiB of %zu", rss >> 10, (copies * n) >> 10);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
}

/* A JPEG whose restart intervals already tile its rows but are wider than
** the rewrite's is rewritten (its crops would cut coarsely); one with the
** rewrite's own intervals is kept as it is.  The pack asks the rewrite's
** test, not the decoder's "cuts at all". */
static void test_pack_wide_intervals(void **state) {
  (void)state;
  char dir[128], cls[160], prefix[160];
  mkdir_in(dir, sizeof dir, root, "wide");
  mkdir_in(cls, sizeof cls, dir, "only");
  df_jpeg_opts wide = {JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 4};   /* 64 px */
  df_jpeg_opts narrow = {JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 1}; /* 16 px */
  write_jpeg(cls, "a.jpg", 256, 96, &wide, 21);
  write_jpeg(cls, "b.jpg", 256, 96, &narrow, 22);
  stoke_source *src = tu_open_images(dir, "random-resized-crop=32,chw,u8");
  stoke_image_info info;
  for (size_t i = 0; i < 2; i++) { /* both cut, for the decoder */
    assert_int_equal(stoke_source_probe(src, i, &info), 0);
    assert_true(info.restart_cuts);
  }
  snprintf(prefix, sizeof prefix, "%s/p", dir);
  stoke_pack_result res;
  assert_int_equal(stoke_pack(src, prefix, NULL, &res), 0);
  assert_int_equal(res.n_rewritten, 1);
  assert_int_equal(res.n_ready, 1);
  assert_int_equal(res.n_kept, 0);
  stoke_source_destroy(src);
}

/* stoke_pack refuses a prefix whose shards are among the source's, however
** the prefix is spelled and wherever those shards come in the source, before
** writing anything; another prefix in the same folder is fine. */
static void test_pack_onto_source(void **state) {
  (void)state;
  stoke_source *src = tu_open_images(folder, "random-resized-crop=32,chw,u8");
  stoke_pack_config pc;
  stoke_pack_config_init(&pc);
  pc.keep_bytes = 1; /* fast: no rewrite */
  char dir[128], a[160], b[160], spec[200], b0[200];
  snprintf(dir, sizeof dir, "%s/onto", root);
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(a, sizeof a, "%s/a", dir);
  snprintf(b, sizeof b, "%s/b", dir);
  pc.shard_bytes = 30000;
  assert_int_equal(stoke_pack(src, a, &pc, NULL), 0);
  pc.shard_bytes = 0;
  assert_int_equal(stoke_pack(src, b, &pc, NULL), 0);
  stoke_source_destroy(src);

  snprintf(spec, sizeof spec, "%s/*-*.stoke", dir); /* a's shards, then b's */
  snprintf(b0, sizeof b0, "%s-00000.stoke", b);
  size_t n_before;
  void *before = slurp(b0, &n_before);
  stoke_source *packed = tu_open_images(spec, "random-resized-crop=32,chw,u8");
  char other[200];
  snprintf(other, sizeof other, "%s/../onto/./b", dir);
  assert_int_equal(stoke_pack(packed, other, &pc, NULL), STOKE_EINVAL);
  if (!strstr(stoke_errmsg(NULL), "is one of the shards being read") ||
      !strstr(stoke_errmsg(NULL), "b-00000.stoke"))
    fail_msg("message: %s", stoke_errmsg(NULL));
  size_t n_after;
  void *after = slurp(b0, &n_after);
  assert_int_equal(n_before, n_after);
  assert_memory_equal(before, after, n_before);
  free(before);
  free(after);

  char c[160];
  snprintf(c, sizeof c, "%s/c", dir);
  stoke_pack_result res;
  assert_int_equal(stoke_pack(packed, c, &pc, &res), 0);
  assert_int_equal(res.n_samples, stoke_source_n_samples(packed));
  stoke_source_destroy(packed);
}

/* A bad file fails its sample: next() names the file and the cause. */
static void expect_sample_error(const char *dir, const char *file,
                                const char *cause) {
  stoke_source *src = tu_open_images(dir, "random-resized-crop=32,chw,u8");
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = 2;
  cfg.n_workers = 2;
  stoke_loader *l;
  assert_int_equal(stoke_loader_create(&cfg, &l), 0);
  stoke_batch *b;
  int rc;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) stoke_batch_release(b);
  assert_int_equal(rc, STOKE_ESAMPLE);
  const char *msg = stoke_errmsg(l);
  if (!strstr(msg, file) || !strstr(msg, cause))
    fail_msg("message '%s' should name '%s' and '%s'", msg, file, cause);
  assert_int_equal(stoke_loader_next(l, &b), STOKE_EBADSTATE);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
}

static void test_bad_files(void **state) {
  (void)state;
  char bad[256], d[300];
  mkdir_in(bad, sizeof bad, root, "bad");
  snprintf(d, sizeof d, "%s/x", bad);
  assert_int_equal(mkdir(d, 0755), 0);
  df_jpeg_opts rgb = {JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 0};
  write_jpeg(d, "good.jpg", 64, 64, &rgb, 9);
  /* Truncated JPEG. */
  uint8_t *px = df_pattern(120, 90, 3), *buf;
  size_t n;
  df_jpeg_rgb(px, 120, 90, 0, &buf, &n);
  write_file(d, "trunc.jpg", buf, n / 2);
  expect_sample_error(bad, "trunc.jpg", "JPEG");
  remove(strcat(strcpy((char[512]){0}, d), "/trunc.jpg"));
  /* Zero bytes. */
  write_file(d, "empty.jpg", "", 0);
  expect_sample_error(bad, "empty.jpg", "empty");
  remove(strcat(strcpy((char[512]){0}, d), "/empty.jpg"));
  /* A header claiming 60000x60000 (a decompression bomb): refused by
  ** max_pixels before any big allocation, from the frame header alone. */
  size_t sof = df_jpeg_sof(buf, n);
  assert_true(sof > 0);
  buf[sof + 5] = 0xea;
  buf[sof + 6] = 0x60;
  buf[sof + 7] = 0xea;
  buf[sof + 8] = 0x60;
  write_file(d, "bomb.jpg", buf, n);
  expect_sample_error(bad, "bomb.jpg", "max_pixels");
  buf[sof + 5] = buf[sof + 6] = buf[sof + 7] = buf[sof + 8] = 0xff;
  write_file(d, "bomb.jpg", buf, n);
  expect_sample_error(bad, "bomb.jpg", "65535x65535 exceeds max_pixels");
  remove(strcat(strcpy((char[512]){0}, d), "/bomb.jpg"));
  free(px);
  free(buf);
  /* A PNG header claiming 65536x65536: 2^32 pixels, 0 in 32 bits, so only
  ** a 64-bit product refuses it by max_pixels (JPEG stops at 65535). */
  uint8_t gray[64] = {0};
  assert_int_equal(df_png(gray, sizeof gray, 8, 8, SPNG_COLOR_TYPE_GRAYSCALE,
                          8, 0, NULL, NULL, &buf, &n), 0);
  df_put_be32(buf + 16, 65536);
  df_put_be32(buf + 20, 65536);
  df_png_fix_crc(buf, 8);
  write_file(d, "bomb.png", buf, n);
  expect_sample_error(bad, "bomb.png", "65536x65536 exceeds max_pixels");
  remove(strcat(strcpy((char[512]){0}, d), "/bomb.png"));
  free(buf);
  /* An empty class folder fails the open, naming it. */
  char empty[320];
  snprintf(empty, sizeof empty, "%s/y", bad);
  assert_int_equal(mkdir(empty, 0755), 0);
  stoke_source *src = NULL;
  assert_true(stoke_source_create_images(bad, NULL, &src) < 0);
  assert_null(src);
  assert_non_null(strstr(stoke_errmsg(NULL), "y"));
}

static void test_bad_arguments(void **state) {
  (void)state;
  stoke_image_config ic;
  stoke_image_config_init(&ic);
  ic.transform = "random-resized-crop=224,rotate=3";
  stoke_source *src = NULL;
  assert_int_equal(stoke_source_create_images(folder, &ic, &src),
                   STOKE_EINVAL);
  assert_non_null(strstr(stoke_errmsg(NULL), "rotate"));
  assert_int_equal(stoke_source_create_images("/nonexistent/x.bin", NULL,
                                              &src),
                   STOKE_EINVAL);
  assert_non_null(strstr(stoke_errmsg(NULL), "/nonexistent/x.bin"));
  assert_true(stoke_source_create_images("/nonexistent-dir/a-*.stoke", NULL,
                                         &src) < 0);
  ic.struct_size = 3;
  assert_int_equal(stoke_source_create_images(folder, &ic, &src),
                   STOKE_EINVAL);
  /* Queries on a source that is not an image source. */
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  assert_int_equal(stoke_source_create_synthetic(&sc, &src), 0);
  assert_int_equal(stoke_source_n_classes(src), 0);
  assert_int_equal(stoke_source_label(src, 0), -1);
  stoke_image_info info;
  assert_int_equal(stoke_source_probe(src, 0, &info), STOKE_EINVAL);
  assert_int_equal(stoke_pack(src, "/tmp/x", NULL, NULL),
                   STOKE_EINVAL);
  stoke_source_destroy(src);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_folder_listing),
      cmocka_unit_test(test_transforms_and_worker_counts),
      cmocka_unit_test(test_three_storages_agree),
      cmocka_unit_test(test_pack_threads),
      cmocka_unit_test(test_pack_onto_source),
      cmocka_unit_test(test_pack_wide_intervals),
      cmocka_unit_test(test_packed_pages_given_back),
      cmocka_unit_test(test_bad_files),
      cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
