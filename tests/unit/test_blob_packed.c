/* test_blob_packed.c — packed shards: the streaming writer
** (src/storage/pack_writer.c) and the mmap reader (src/storage/packed.c).
**
** Round trips across several small shards, then damaged copies of a shard
** (truncated, bad magic, index past the end, overlapping entries, a sample
** past the data, a flipped sample byte), patched with their CRCs fixed up
** where needed so that the check under test is the one that fires. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/blob.h"
#include "blob_fixtures.h"
#include "test_util.h"

static char errbuf[1024];

/* Files in dir (not . and ..); *tmp counts those ending in .tmp. */
static int count_files(const char *dir, int *tmp) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  *tmp = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    n++;
    size_t k = strlen(e->d_name);
    if (k > 4 && !strcmp(e->d_name + k - 4, ".tmp")) (*tmp)++;
  }
  closedir(d);
  return n;
}

/* Sample i: a deterministic length and content behind JPEG or PNG magic. */
#define N_SAMPLES 60
static size_t sample_len(size_t i) { return 1 + (i * 7919) % 997; }
static int sample_format(size_t i) {
  return i % 3 == 0 ? STOKE__BLOB_PNG : STOKE__BLOB_JPEG;
}
static void sample_bytes(size_t i, uint8_t *b) {
  size_t n = sample_len(i);
  uint64_t x = i * 0x9E3779B97F4A7C15ull + 1;
  for (size_t k = 0; k < n; k++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b[k] = (uint8_t)x;
  }
  static const uint8_t png[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  static const uint8_t jpg[3] = {0xff, 0xd8, 0xff};
  if (sample_format(i) == STOKE__BLOB_PNG)
    memcpy(b, png, STOKE__MIN(n, 8));
  else
    memcpy(b, jpg, STOKE__MIN(n, 3));
}
static int64_t sample_label(size_t i) { return (int64_t)(i % 7) - 1; }

/* Add sample i to w: its bytes and format, `label`, width i, height 2i. */
static void add_sample(stoke__pack_writer *w, size_t i, int64_t label) {
  uint8_t b[1024];
  sample_bytes(i, b);
  int rc = stoke__pack_writer_add(w, b, sample_len(i), label, (uint32_t)i,
                                  (uint32_t)(2 * i), sample_format(i),
                                  errbuf, sizeof errbuf);
  if (rc) fail_msg("add %zu: %s", i, errbuf);
}

/* Read sample i of s and check that its bytes are those added; returns
** them (inside the mapping). */
static const uint8_t *expect_sample(stoke__blobset *s, size_t i) {
  const uint8_t *p;
  size_t n;
  int rc = stoke__blobset_read(s, i, NULL, &p, &n, errbuf, sizeof errbuf);
  if (rc) fail_msg("read %zu: %s", i, errbuf);
  uint8_t b[1024];
  sample_bytes(i, b);
  assert_int_equal(n, sample_len(i));
  assert_memory_equal(p, b, n);
  return p;
}

/* Write N_SAMPLES to dir/pack-*.stoke with small shards. */
static size_t write_pack(const char *dir, uint64_t shard_bytes,
                         uint32_t align) {
  char prefix[4096];
  snprintf(prefix, sizeof prefix, "%s/pack", dir);
  stoke__pack_writer *w = NULL;
  int rc = stoke__pack_writer_create(prefix, shard_bytes, align, NULL, NULL, &w,
                                     errbuf, sizeof errbuf);
  if (rc) fail_msg("create: %s", errbuf);
  for (size_t i = 0; i < N_SAMPLES; i++) add_sample(w, i, sample_label(i));
  size_t n_shards = 0;
  rc = stoke__pack_writer_finish(w, &n_shards, errbuf, sizeof errbuf);
  if (rc) fail_msg("finish: %s", errbuf);
  for (size_t k = 0; k < n_shards; k++) {
    const char *p = stoke__pack_writer_shard_path(w, k);
    char want[4200];
    snprintf(want, sizeof want, "%s-%05zu.stoke", prefix, k);
    assert_string_equal(p, want);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
  }
  assert_null(stoke__pack_writer_shard_path(w, n_shards));
  /* Finished: no more samples. */
  const uint8_t b[1] = {0};
  assert_int_equal(stoke__pack_writer_add(w, b, 1, 0, 0, 0, 0, errbuf,
                                          sizeof errbuf), STOKE_EBADSTATE);
  stoke__pack_writer_destroy(w);
  int tmp;
  assert_int_equal(count_files(dir, &tmp), (int)n_shards);
  assert_int_equal(tmp, 0);
  return n_shards;
}

static stoke__blobset *open_spec(const char *spec, unsigned flags) {
  stoke__blobset *s = NULL;
  const char *specs[1] = {spec};
  int rc = stoke__blobset_open_packed(specs, 1, flags, NULL, NULL, &s, errbuf,
                                      sizeof errbuf);
  if (rc) fail_msg("open %s: %s", spec, errbuf);
  return s;
}

static void check_all(stoke__blobset *s, uint32_t align) {
  assert_int_equal(stoke__blobset_n_samples(s), N_SAMPLES);
  for (size_t i = 0; i < N_SAMPLES; i++) {
    const uint8_t *p = expect_sample(s, i);
    assert_int_equal((uintptr_t)p % align, 0);
    assert_int_equal(stoke__blobset_label(s, i), sample_label(i));
    assert_int_equal(stoke__blobset_format(s, i), sample_format(i));
    uint32_t w, h;
    stoke__blobset_dims(s, i, &w, &h);
    assert_int_equal(w, i);
    assert_int_equal(h, 2 * i);
  }
}

static void test_round_trip(void **state) {
  (void)state;
  char *dir = make_tmp();
  size_t n_shards = write_pack(dir, 8192, 0);
  assert_true(n_shards >= 3);
  /* Every shard within the target (each sample is far below it). */
  for (size_t k = 0; k < n_shards; k++) {
    char p[4200];
    struct stat st;
    snprintf(p, sizeof p, "%s/pack-%05zu.stoke", dir, k);
    assert_int_equal(stat(p, &st), 0);
    assert_true(st.st_size <= 8192);
  }
  char spec[4200];
  snprintf(spec, sizeof spec, "%s/pack-*.stoke", dir);
  stoke__blobset *s = open_spec(spec, STOKE__PACK_VERIFY_CRC);
  assert_string_equal(stoke__blobset_kind(s), "packed");
  check_all(s, 64);
  assert_int_equal(stoke__blobset_n_classes(s), 0);
  assert_int_equal(stoke__blobset_n_skipped(s), 0);
  char d[1024];
  stoke__blobset_describe(s, 0, d, sizeof d);
  assert_non_null(strstr(d, "pack-00000.stoke sample 0 at offset 4096"));
  /* The last sample lives in the last shard, at a local index. */
  stoke__blobset_describe(s, N_SAMPLES - 1, d, sizeof d);
  char last[64];
  snprintf(last, sizeof last, "pack-%05zu.stoke sample ", n_shards - 1);
  assert_non_null(strstr(d, last));
  const uint8_t *p;
  size_t n;
  assert_int_equal(stoke__blobset_read(s, N_SAMPLES, NULL, &p, &n, errbuf,
                                       sizeof errbuf), STOKE_EINVAL);
  stoke__blobset_close(s);

  /* The same through a brace pattern. */
  snprintf(spec, sizeof spec, "%s/pack-{00000..%05zu}.stoke", dir,
           n_shards - 1);
  s = open_spec(spec, 0);
  check_all(s, 64);
  stoke__blobset_close(s);
  rm_rf(dir);
  free(dir);

  /* Page alignment, one big shard. */
  dir = make_tmp();
  assert_int_equal(write_pack(dir, 1u << 30, 4096), 1);
  snprintf(spec, sizeof spec, "%s/pack-00000.stoke", dir);
  s = open_spec(spec, STOKE__PACK_VERIFY_CRC);
  check_all(s, 4096);
  stoke__blobset_close(s);
  rm_rf(dir);
  free(dir);
}

/* ---- concurrent reads ---------------------------------------------------- */

typedef struct reader_arg {
  stoke__blobset *s;
  unsigned seed;
  atomic_int *bad;
} reader_arg;

static void *reader_main(void *p) {
  reader_arg *a = p;
  stoke__blob_reader r;
  stoke__blob_reader_init(&r, NULL);
  char e[256];
  uint8_t b[1024];
  for (unsigned k = 0; k < 3000; k++) {
    size_t i = (a->seed * 13 + k * 7) % N_SAMPLES;
    sample_bytes(i, b);
    const uint8_t *q;
    size_t len;
    if (stoke__blobset_read(a->s, i, &r, &q, &len, e, sizeof e) != 0 ||
        len != sample_len(i) || memcmp(q, b, len) != 0 ||
        stoke__blobset_label(a->s, i) != sample_label(i))
      atomic_fetch_add(a->bad, 1);
  }
  stoke__blob_reader_free(&r);
  return NULL;
}

static void test_concurrent(void **state) {
  (void)state;
  char *dir = make_tmp();
  write_pack(dir, 8192, 0);
  char spec[4200];
  snprintf(spec, sizeof spec, "%s/pack-*.stoke", dir);
  stoke__blobset *s = open_spec(spec, STOKE__PACK_VERIFY_CRC);
  atomic_int bad = 0;
  pthread_t th[4];
  reader_arg args[4];
  for (unsigned t = 0; t < 4; t++) {
    args[t] = (reader_arg){s, t, &bad};
    assert_int_equal(pthread_create(&th[t], NULL, reader_main, &args[t]), 0);
  }
  for (unsigned t = 0; t < 4; t++) pthread_join(th[t], NULL);
  assert_int_equal(atomic_load(&bad), 0);
  stoke__blobset_close(s);
  rm_rf(dir);
  free(dir);
}

/* ---- damaged shards ------------------------------------------------------ */

typedef struct file {
  uint8_t *b;
  size_t n;
} file;

static file load(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  file r = {NULL, (size_t)ftell(f)};
  fseek(f, 0, SEEK_SET);
  r.b = malloc(r.n);
  assert_int_equal(fread(r.b, 1, r.n, f), r.n);
  fclose(f);
  return r;
}

static void save(const char *path, const uint8_t *b, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, n, f), n);
  fclose(f);
}

static void fix_header_crc(uint8_t *b) {
  stoke__put_le32(b + 60, stoke__crc32(0, b, 60));
}

static void fix_index_crc(uint8_t *b, size_t size) {
  uint64_t index_off = stoke__le64(b + 32), n = stoke__le64(b + 16);
  stoke__put_le32(b + size - 32 + 16,
                  stoke__crc32(0, b + index_off, n * STOKE__PACK_ENTRY));
}

/* Open path and expect STOKE_EFORMAT with all of the needles. */
static void expect_bad(const char *path, const char *n1, const char *n2) {
  stoke__blobset *s = (stoke__blobset *)1;
  const char *specs[1] = {path};
  int rc = stoke__blobset_open_packed(specs, 1, 0, NULL, NULL, &s, errbuf,
                                      sizeof errbuf);
  if (rc != STOKE_EFORMAT)
    fail_msg("%s: got %d, want STOKE_EFORMAT (%s)", path, rc, errbuf);
  assert_null(s);
  const char *base = strrchr(path, '/') + 1;
  if (!strstr(errbuf, base)) fail_msg("\"%s\" lacks %s", errbuf, base);
  if (n1 && !strstr(errbuf, n1)) fail_msg("\"%s\" lacks \"%s\"", errbuf, n1);
  if (n2 && !strstr(errbuf, n2)) fail_msg("\"%s\" lacks \"%s\"", errbuf, n2);
}

static void test_damaged(void **state) {
  (void)state;
  char *dir = make_tmp();
  write_pack(dir, 8192, 0);
  char src[4200], p[4200];
  snprintf(src, sizeof src, "%s/pack-00000.stoke", dir);
  file f = load(src);
  uint8_t *c = malloc(f.n);
  size_t n_entries = stoke__le64(f.b + 16);
  assert_true(n_entries >= 3);
  uint64_t index_off = stoke__le64(f.b + 32);

  /* Truncated anywhere: by a few bytes, in the index, in the data. */
  size_t cuts[] = {f.n - 1, f.n - 32, index_off + 20, 5000, 100, 10};
  for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
    snprintf(p, sizeof p, "%s/cut%zu.bin", dir, k);
    save(p, f.b, cuts[k]);
    expect_bad(p, cuts[k] < 96 ? "too small" : "truncated", NULL);
  }

  /* Bad magic. */
  memcpy(c, f.b, f.n);
  c[0] = 'X';
  snprintf(p, sizeof p, "%s/magic.bin", dir);
  save(p, c, f.n);
  expect_bad(p, "bad magic", NULL);

  /* A damaged header (CRC not fixed). */
  memcpy(c, f.b, f.n);
  c[20] ^= 1;
  snprintf(p, sizeof p, "%s/hdr.bin", dir);
  save(p, c, f.n);
  expect_bad(p, "header CRC-32", NULL);

  /* The index past the end of the file. */
  memcpy(c, f.b, f.n);
  stoke__put_le64(c + 32, f.n + 4096);
  fix_header_crc(c);
  snprintf(p, sizeof p, "%s/index.bin", dir);
  save(p, c, f.n);
  expect_bad(p, "runs past the end", NULL);

  /* More entries than the file can hold. */
  memcpy(c, f.b, f.n);
  stoke__put_le64(c + 16, (uint64_t)1 << 60);
  fix_header_crc(c);
  snprintf(p, sizeof p, "%s/count.bin", dir);
  save(p, c, f.n);
  expect_bad(p, "runs past the end", NULL);

  /* Entry 1 overlapping entry 0. */
  memcpy(c, f.b, f.n);
  uint8_t *e0 = c + index_off, *e1 = e0 + STOKE__PACK_ENTRY;
  memcpy(e1, e0, 8);
  fix_index_crc(c, f.n);
  snprintf(p, sizeof p, "%s/overlap.bin", dir);
  save(p, c, f.n);
  expect_bad(p, "entry 1", "overlaps");

  /* Entries out of order. */
  memcpy(c, f.b, f.n);
  e0 = c + index_off;
  e1 = e0 + STOKE__PACK_ENTRY;
  uint8_t tmp[STOKE__PACK_ENTRY];
  memcpy(tmp, e0, sizeof tmp);
  memcpy(e0, e1, sizeof tmp);
  memcpy(e1, tmp, sizeof tmp);
  fix_index_crc(c, f.n);
  snprintf(p, sizeof p, "%s/order.bin", dir);
  save(p, c, f.n);
  expect_bad(p, "entry 1", "sorted");

  /* The last sample running into the index. */
  memcpy(c, f.b, f.n);
  uint8_t *el = c + index_off + (n_entries - 1) * STOKE__PACK_ENTRY;
  stoke__put_le64(el + 8, stoke__le64(el + 8) + 4096);
  fix_index_crc(c, f.n);
  snprintf(p, sizeof p, "%s/past.bin", dir);
  save(p, c, f.n);
  char entry[32];
  snprintf(entry, sizeof entry, "entry %zu", n_entries - 1);
  expect_bad(p, entry, "past the data");

  /* The last sample 1 GiB away (its length unchanged, still aligned): an
  ** offset past the index, which only the offset's own bound refuses
  ** (index_off - off would wrap); a read would land outside the map. */
  memcpy(c, f.b, f.n);
  el = c + index_off + (n_entries - 1) * STOKE__PACK_ENTRY;
  stoke__put_le64(el, stoke__le64(el) + ((uint64_t)1 << 30));
  fix_index_crc(c, f.n);
  snprintf(p, sizeof p, "%s/far.bin", dir);
  save(p, c, f.n);
  expect_bad(p, entry, "past the data");

  /* A damaged index (CRC not fixed). */
  memcpy(c, f.b, f.n);
  c[index_off + 17] ^= 1;
  snprintf(p, sizeof p, "%s/icrc.bin", dir);
  save(p, c, f.n);
  expect_bad(p, "index CRC-32", NULL);

  /* A flipped sample byte: found on read only when asked. */
  memcpy(c, f.b, f.n);
  uint64_t off1 = stoke__le64(c + index_off + STOKE__PACK_ENTRY);
  c[off1] ^= 0xff;
  snprintf(p, sizeof p, "%s/data.bin", dir);
  save(p, c, f.n);
  stoke__blobset *s = open_spec(p, 0);
  const uint8_t *q;
  size_t n;
  assert_int_equal(stoke__blobset_read(s, 1, NULL, &q, &n, errbuf,
                                       sizeof errbuf), 0);
  stoke__blobset_close(s);
  s = open_spec(p, STOKE__PACK_VERIFY_CRC);
  assert_int_equal(stoke__blobset_read(s, 0, NULL, &q, &n, errbuf,
                                       sizeof errbuf), 0);
  assert_int_equal(stoke__blobset_read(s, 1, NULL, &q, &n, errbuf,
                                       sizeof errbuf), STOKE_EFORMAT);
  assert_non_null(strstr(errbuf, "data.bin sample 1"));
  assert_non_null(strstr(errbuf, "CRC-32 mismatch"));
  stoke__blobset_close(s);

  free(c);
  free(f.b);
  rm_rf(dir);
  free(dir);
}

/* ---- the writer's failure paths ------------------------------------------ */

/* A pack of N_SAMPLES with class names (label i % n_names) at
** dir/NAME-*.stoke; label_bump makes sample 5's label n_names + 3. */
static void write_named(const char *dir, const char *name,
                        const char *const *names, size_t n_names,
                        bool label_bump) {
  char prefix[4096];
  snprintf(prefix, sizeof prefix, "%s/%s", dir, name);
  stoke__pack_writer *w = NULL;
  assert_int_equal(stoke__pack_writer_create(prefix, 9000, 0, NULL, NULL, &w,
                                             errbuf, sizeof errbuf), 0);
  int rc = stoke__pack_writer_set_classes(w, names, n_names, errbuf,
                                          sizeof errbuf);
  if (rc) fail_msg("set_classes: %s", errbuf);
  for (size_t i = 0; i < N_SAMPLES; i++)
    add_sample(w, i, label_bump && i == 5 ? (int64_t)n_names + 3
                                          : (int64_t)(i % n_names));
  /* Too late for names now. */
  assert_int_equal(stoke__pack_writer_set_classes(w, names, n_names, errbuf,
                                                  sizeof errbuf),
                   STOKE_EBADSTATE);
  assert_int_equal(stoke__pack_writer_finish(w, NULL, errbuf, sizeof errbuf),
                   0);
  stoke__pack_writer_destroy(w);
}

/* Class names travel in every shard, and are checked like the rest. */
static void test_class_table(void **state) {
  (void)state;
  char *dir = make_tmp();
  static const char *const names[] = {"ant", "bee", "cat"};
  write_named(dir, "named", names, 3, false);
  char spec[4200], p[4200];
  snprintf(spec, sizeof spec, "%s/named-*.stoke", dir);
  stoke__blobset *s = open_spec(spec, 0);
  assert_int_equal(stoke__blobset_n_classes(s), 3);
  for (size_t c = 0; c < 3; c++)
    assert_string_equal(stoke__blobset_class_name(s, c), names[c]);
  /* The samples are where they always were. */
  for (size_t i = 0; i < N_SAMPLES; i++) {
    expect_sample(s, i);
    assert_int_equal(stoke__blobset_label(s, i), (int64_t)(i % 3));
  }
  stoke__blobset_close(s);

  /* Bad names are refused by the writer. */
  stoke__pack_writer *w = NULL;
  snprintf(p, sizeof p, "%s/never", dir);
  assert_int_equal(stoke__pack_writer_create(p, 9000, 0, NULL, NULL, &w, errbuf,
                                             sizeof errbuf), 0);
  static const char *const empty[] = {"a", ""};
  assert_int_equal(stoke__pack_writer_set_classes(w, empty, 2, errbuf,
                                                  sizeof errbuf),
                   STOKE_EINVAL);
  stoke__pack_writer_destroy(w);

  /* A damaged name, a label outside the classes, unknown flags. */
  snprintf(p, sizeof p, "%s/named-00000.stoke", dir);
  file f = load(p);
  uint8_t *c = malloc(f.n);
  memcpy(c, f.b, f.n);
  c[STOKE__PACK_HEADER + STOKE__PACK_CLASSES_HEAD + 1] ^= 0x20; /* "aNt" */
  snprintf(p, sizeof p, "%s/name.bin", dir);
  save(p, c, f.n);
  expect_bad(p, "class table CRC-32", NULL);
  memcpy(c, f.b, f.n);
  /* Bits 1 (resized) and 2 (source map) are known since 0.3; bit 3 not. */
  stoke__put_le32(c + 12, 9);
  stoke__put_le32(c + 60, stoke__crc32(0, c, 60));
  snprintf(p, sizeof p, "%s/flags.bin", dir);
  save(p, c, f.n);
  expect_bad(p, "unknown flags 00000009", NULL);
  memcpy(c, f.b, f.n);
  stoke__put_le32(c + 12, 3); /* resized, but no size recorded */
  stoke__put_le32(c + 60, stoke__crc32(0, c, 60));
  save(p, c, f.n);
  expect_bad(p, "max side 0", NULL);
  memcpy(c, f.b, f.n);
  stoke__put_le32(c + STOKE__PACK_HEADER, 4); /* says 4 names, holds 3 */
  snprintf(p, sizeof p, "%s/count.bin", dir);
  save(p, c, f.n);
  expect_bad(p, "says 4 classes and holds 3", NULL);
  free(c);
  free(f.b);
  write_named(dir, "bump", names, 3, true);
  snprintf(p, sizeof p, "%s/bump-00000.stoke", dir);
  expect_bad(p, "label 6 is not one of the 3 classes", NULL);

  /* Shards of two datasets with different classes do not mix. */
  static const char *const other[] = {"ant", "bee", "cow"};
  write_named(dir, "other", other, 3, false);
  char both[2][4200];
  snprintf(both[0], sizeof both[0], "%s/named-00000.stoke", dir);
  snprintf(both[1], sizeof both[1], "%s/other-00000.stoke", dir);
  const char *specs[2] = {both[0], both[1]};
  s = (stoke__blobset *)1;
  assert_int_equal(stoke__blobset_open_packed(specs, 2, 0, NULL, NULL, &s, errbuf,
                                              sizeof errbuf), STOKE_EFORMAT);
  assert_null(s);
  if (!strstr(errbuf, "different class tables")) fail_msg("%s", errbuf);
  rm_rf(dir);
  free(dir);
}

static void test_writer_abort(void **state) {
  (void)state;
  char *dir = make_tmp();
  char prefix[4200];
  snprintf(prefix, sizeof prefix, "%s/pack", dir);
  stoke__pack_writer *w = NULL;
  assert_int_equal(stoke__pack_writer_create(prefix, 4096 + 2048, 0, NULL, NULL,
                                             &w, errbuf, sizeof errbuf), 0);
  for (size_t i = 0; i < 20; i++) add_sample(w, i, 0);
  uint8_t b[1024];
  /* Midway: several shards begun, all still .tmp, none final. */
  int tmp, n = count_files(dir, &tmp);
  assert_true(n >= 2);
  assert_int_equal(tmp, n);
  /* Abandoned (as after an error in the caller): nothing is left. */
  stoke__pack_writer_destroy(w);
  assert_int_equal(count_files(dir, &tmp), 0);
  stoke__pack_writer_destroy(NULL);

  /* A write failing midway (a full disk, simulated by the file size
  ** limit): the add reports it naming the .tmp file, the writer is
  ** poisoned, and destroy leaves nothing. */
  struct rlimit old_lim, lim;
  assert_int_equal(getrlimit(RLIMIT_FSIZE, &old_lim), 0);
  lim = old_lim;
  lim.rlim_cur = 20000;
  void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
  assert_int_equal(stoke__pack_writer_create(prefix, 1 << 20, 0, NULL, NULL, &w,
                                             errbuf, sizeof errbuf), 0);
  int rc = 0;
  size_t added = 0;
  for (size_t i = 0; rc == 0 && i < 1000; i++) {
    sample_bytes(i % N_SAMPLES, b);
    rc = stoke__pack_writer_add(w, b, sample_len(i % N_SAMPLES), 0, 0, 0, 0,
                                errbuf, sizeof errbuf);
    if (rc == 0) added++;
  }
  assert_int_equal(setrlimit(RLIMIT_FSIZE, &old_lim), 0);
  signal(SIGXFSZ, old_sig);
  assert_int_equal(rc, STOKE_EIO);
  assert_true(added > 5);
  assert_non_null(strstr(errbuf, "pack-00000.stoke.tmp: write a sample"));
  assert_int_equal(count_files(dir, &tmp), 1);
  assert_int_equal(stoke__pack_writer_finish(w, NULL, errbuf, sizeof errbuf),
                   STOKE_EBADSTATE);
  stoke__pack_writer_destroy(w);
  assert_int_equal(count_files(dir, &tmp), 0);

  /* A folder that does not exist: the first add fails, poisons. */
  snprintf(prefix, sizeof prefix, "%s/nope/pack", dir);
  assert_int_equal(stoke__pack_writer_create(prefix, 1 << 20, 0, NULL, NULL, &w,
                                             errbuf, sizeof errbuf), 0);
  assert_int_equal(stoke__pack_writer_add(w, b, 10, 0, 0, 0, 0, errbuf,
                                          sizeof errbuf), STOKE_EIO);
  assert_non_null(strstr(errbuf, "nope/pack-00000.stoke.tmp"));
  assert_int_equal(stoke__pack_writer_add(w, b, 10, 0, 0, 0, 0, errbuf,
                                          sizeof errbuf), STOKE_EBADSTATE);
  assert_int_equal(stoke__pack_writer_finish(w, NULL, errbuf, sizeof errbuf),
                   STOKE_EBADSTATE);
  stoke__pack_writer_destroy(w);

  /* Bad arguments. */
  assert_int_equal(stoke__pack_writer_create(prefix, 1 << 20, 100, NULL, NULL, &w,
                                             errbuf, sizeof errbuf),
                   STOKE_EINVAL);
  assert_int_equal(stoke__pack_writer_create(prefix, 0, 0, NULL, NULL, &w, errbuf,
                                             sizeof errbuf), STOKE_EINVAL);
  assert_int_equal(stoke__pack_writer_create("", 1, 0, NULL, NULL, &w, errbuf,
                                             sizeof errbuf), STOKE_EINVAL);
  snprintf(prefix, sizeof prefix, "%s/pack", dir);
  assert_int_equal(stoke__pack_writer_create(prefix, 1 << 20, 0, NULL, NULL, &w,
                                             errbuf, sizeof errbuf), 0);
  assert_int_equal(stoke__pack_writer_add(w, b, 10, 0, 0, 0, 99, errbuf,
                                          sizeof errbuf), STOKE_EINVAL);
  /* A sample bigger than the shard size still gets a shard of its own. */
  stoke__pack_writer_destroy(w);
  assert_int_equal(stoke__pack_writer_create(prefix, 100, 0, NULL, NULL, &w,
                                             errbuf, sizeof errbuf), 0);
  for (size_t i = 0; i < 3; i++) add_sample(w, i, 5);
  size_t shards;
  assert_int_equal(stoke__pack_writer_finish(w, &shards, errbuf,
                                             sizeof errbuf), 0);
  assert_int_equal(shards, 3);
  stoke__pack_writer_destroy(w);
  char spec[4200];
  snprintf(spec, sizeof spec, "%s/pack-*.stoke", dir);
  stoke__blobset *s = open_spec(spec, STOKE__PACK_VERIFY_CRC);
  assert_int_equal(stoke__blobset_n_samples(s), 3);
  for (size_t i = 0; i < 3; i++) expect_sample(s, i);
  stoke__blobset_close(s);

  /* An empty dataset: finish writes nothing; an empty shard opens as an
  ** error (no sample). */
  rm_rf(dir);
  mkdir(dir, 0700);
  assert_int_equal(stoke__pack_writer_create(prefix, 100, 0, NULL, NULL, &w,
                                             errbuf, sizeof errbuf), 0);
  assert_int_equal(stoke__pack_writer_finish(w, &shards, errbuf,
                                             sizeof errbuf), 0);
  assert_int_equal(shards, 0);
  stoke__pack_writer_destroy(w);
  assert_int_equal(count_files(dir, &tmp), 0);
  rm_rf(dir);
  free(dir);
}



/* Write the N_SAMPLES under prefix again; the number of shards and of the
** earlier pack's shards that finish removed. */
static size_t repack(const char *prefix, uint64_t shard_bytes,
                     size_t *n_stale) {
  stoke__pack_writer *w = NULL;
  assert_int_equal(stoke__pack_writer_create(prefix, shard_bytes, 0, NULL, NULL,
                                             &w, errbuf, sizeof errbuf), 0);
  for (size_t i = 0; i < N_SAMPLES; i++) add_sample(w, i, sample_label(i));
  size_t n = 0;
  assert_int_equal(stoke__pack_writer_finish(w, &n, errbuf, sizeof errbuf),
                   0);
  *n_stale = stoke__pack_writer_n_stale(w);
  stoke__pack_writer_destroy(w);
  return n;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* Re-packing under a prefix that held more shards: the earlier pack's
** shards past the new last one are removed, so that a glob reads exactly
** the new dataset; files that are not this prefix's shards stay. */
static void test_repack_removes_stale(void **state) {
  (void)state;
  char *dir = make_tmp();
  char prefix[4200], spec[4200], path[4300];
  snprintf(prefix, sizeof prefix, "%s/pack", dir);
  snprintf(spec, sizeof spec, "%s/pack-*.stoke", dir);
  size_t stale;
  size_t n1 = repack(prefix, 4096, &stale);
  assert_true(n1 >= 4);
  assert_int_equal(stale, 0);

  /* Bystanders: another prefix's shard, and in the earlier pack's last
  ** place a file that is not a shard (no magic): the walk stops there. */
  snprintf(path, sizeof path, "%s/packx-00001.stoke", dir);
  write_file(path, "STOKEPK1 another prefix");
  snprintf(path, sizeof path, "%s-%05zu.stoke", prefix, n1 - 1);
  write_file(path, "not a shard");

  assert_int_equal(repack(prefix, UINT64_MAX, &stale), 1); /* one shard */
  assert_int_equal(stale, n1 - 2); /* 1 .. n1-2 */
  for (size_t k = 1; k + 1 < n1; k++) {
    snprintf(path, sizeof path, "%s-%05zu.stoke", prefix, k);
    assert_int_equal(access(path, F_OK), -1);
  }
  snprintf(path, sizeof path, "%s-%05zu.stoke", prefix, n1 - 1);
  assert_int_equal(access(path, F_OK), 0);
  snprintf(path, sizeof path, "%s/packx-00001.stoke", dir);
  assert_int_equal(access(path, F_OK), 0);
  unlink(path);
  snprintf(path, sizeof path, "%s-%05zu.stoke", prefix, n1 - 1);
  unlink(path);

  /* The new dataset is whole and alone under the prefix. */
  stoke__blobset *s = open_spec(spec, STOKE__PACK_VERIFY_CRC);
  check_all(s, 64);
  stoke__blobset_close(s);
  int tmp;
  assert_int_equal(count_files(dir, &tmp), 1);

  /* Packing into as many shards or more removes nothing. */
  assert_int_equal(repack(prefix, 4096, &stale), n1);
  assert_int_equal(stale, 0);
  rm_rf(dir);
  free(dir);
}

/* The writer and the reader under allocation failures: ENOMEM, nothing
** leaked, and a failed writer leaves no file behind. */
static void test_oom(void **state) {
  (void)state;
  char *dir = make_tmp();
  char prefix[4200], spec[4200];
  snprintf(prefix, sizeof prefix, "%s/pack", dir);
  snprintf(spec, sizeof spec, "%s/pack-*.stoke", dir);
  uint8_t b[1024];
  for (long k = 1;; k++) {
    failing f = {.fail_at = k};
    stoke_allocator a = {f_alloc, f_free, &f};
    stoke__pack_writer *w = NULL;
    int rc = stoke__pack_writer_create(prefix, 2048, 0, &a, NULL, &w, errbuf,
                                       sizeof errbuf);
    for (size_t i = 0; rc == 0 && i < 5; i++) {
      sample_bytes(i, b);
      rc = stoke__pack_writer_add(w, b, sample_len(i), 1, 0, 0, 0, errbuf,
                                  sizeof errbuf);
    }
    if (rc == 0) rc = stoke__pack_writer_finish(w, NULL, errbuf,
                                                sizeof errbuf);
    stoke__pack_writer_destroy(w);
    assert_int_equal(f.live, 0);
    int tmp, files = count_files(dir, &tmp);
    assert_int_equal(tmp, 0);
    if (f.faults == 0) {
      assert_int_equal(rc, 0);
      assert_true(files >= 2);
      break;
    }
    assert_int_equal(rc, STOKE_ENOMEM);
    assert_int_equal(files, 0);
  }
  const char *specs[1] = {spec};
  for (long k = 1;; k++) {
    failing f = {.fail_at = k};
    stoke_allocator a = {f_alloc, f_free, &f};
    stoke__blobset *s = (stoke__blobset *)1;
    int rc = stoke__blobset_open_packed(specs, 1, 0, &a, NULL, &s, errbuf,
                                        sizeof errbuf);
    if (f.faults == 0) {
      assert_int_equal(rc, 0);
      stoke__blobset_close(s);
      assert_int_equal(f.live, 0);
      break;
    }
    assert_int_equal(rc, STOKE_ENOMEM);
    assert_null(s);
    assert_int_equal(f.live, 0);
  }
  rm_rf(dir);
  free(dir);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_concurrent),
      cmocka_unit_test(test_damaged),
      cmocka_unit_test(test_class_table),
      cmocka_unit_test(test_writer_abort),
      cmocka_unit_test(test_repack_removes_stale),
      cmocka_unit_test(test_oom),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
