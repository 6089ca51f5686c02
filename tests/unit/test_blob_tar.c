/* test_blob_tar.c — WebDataset tar shards (src/storage/tar.c) and path
** expansion (braces, globs).
**
** The tars are written here by hand, header by header (ustar with the
** prefix field, a GNU 'L' long name, a pax 'x' path), so every header form
** the reader accepts is exercised without a tar tool. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/blob.h"
#include "blob_fixtures.h"
#include "test_util.h"

static char errbuf[1024];

/* ---- a tar builder ------------------------------------------------------- */

typedef struct tarbuf {
  uint8_t *b;
  size_t n, cap;
} tarbuf;

static void tb_put(tarbuf *t, const void *p, size_t n) {
  if (t->n + n > t->cap) {
    t->cap = (t->n + n) * 2;
    t->b = realloc(t->b, t->cap);
    assert_non_null(t->b);
  }
  memcpy(t->b + t->n, p, n);
  t->n += n;
}

static void tb_pad(tarbuf *t) {
  static const uint8_t zero[512];
  if (t->n % 512) tb_put(t, zero, 512 - t->n % 512);
}

static int tb_old_gnu; /* write old GNU headers instead of ustar */

/* One header (+ data).  prefix may be NULL. */
static void tb_entry(tarbuf *t, const char *prefix, const char *name,
                     char type, const void *data, size_t n) {
  uint8_t h[512];
  memset(h, 0, sizeof h);
  assert_true(strlen(name) <= 100);
  memcpy(h, name, strlen(name));
  memcpy(h + 100, "0000644", 7);
  memcpy(h + 108, "0001750", 7);
  memcpy(h + 116, "0001750", 7);
  snprintf((char *)h + 124, 12, "%011zo", n);
  memcpy(h + 136, "14567305200", 11);
  h[156] = (uint8_t)type;
  if (tb_old_gnu) {
    /* Old GNU format: "ustar  \0", and times where ustar has its prefix. */
    memcpy(h + 257, "ustar  ", 8);
    memcpy(h + 345, "14567305200", 12);
  } else {
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
  }
  if (prefix) {
    assert_true(strlen(prefix) <= 155);
    memcpy(h + 345, prefix, strlen(prefix));
  }
  memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (int i = 0; i < 512; i++) sum += h[i];
  snprintf((char *)h + 148, 8, "%06o", sum);
  h[155] = ' ';
  tb_put(t, h, 512);
  if (n) tb_put(t, data, n);
  tb_pad(t);
}

static void tb_file(tarbuf *t, const char *name, const void *d, size_t n) {
  tb_entry(t, NULL, name, '0', d, n);
}

static void tb_text(tarbuf *t, const char *name, const char *s) {
  tb_file(t, name, s, strlen(s));
}

/* A long name through a GNU 'L' entry. */
static void tb_gnu_long(tarbuf *t, const char *name, const void *d,
                        size_t n) {
  tb_entry(t, NULL, "././@LongLink", 'L', name, strlen(name) + 1);
  char cut[101];
  snprintf(cut, sizeof cut, "%s", name); /* the first 100 bytes, as GNU */
  tb_entry(t, NULL, cut, '0', d, n);
}

/* A name through a pax 'x' record; the header's own name is a decoy. */
static void tb_pax(tarbuf *t, const char *name, const void *d, size_t n) {
  char rec[600];
  size_t body = strlen(" path=\n") + strlen(name), len = body + 1;
  while ((size_t)snprintf(NULL, 0, "%zu", len) + body != len) len++;
  snprintf(rec, sizeof rec, "%zu path=%s\n", len, name);
  assert_int_equal(strlen(rec), len);
  tb_entry(t, NULL, "PaxHeaders.0/decoy", 'x', rec, len);
  tb_entry(t, NULL, "decoy.bin", '0', d, n);
}

static void tb_end(tarbuf *t) {
  static const uint8_t zero[1024];
  tb_put(t, zero, sizeof zero);
}

static void tb_write(tarbuf *t, const char *path) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(t->b, 1, t->n, f), t->n);
  assert_int_equal(fclose(f), 0);
  free(t->b);
  memset(t, 0, sizeof *t);
}

/* The fake image of a key: magic, then the key's text. */
static size_t img(const char *key, int png, uint8_t *out) {
  static const uint8_t pm[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  static const uint8_t jm[3] = {0xff, 0xd8, 0xff};
  size_t m = png ? 8 : 3;
  memcpy(out, png ? pm : jm, m);
  memcpy(out + m, key, strlen(key));
  return m + strlen(key);
}

static char long_dir[141];

/* Expected samples, in order. */
typedef struct want {
  const char *key;
  const char *member; /* image member name */
  int png;
  int64_t label;
  int shard;
} want;

static want wants[6];

static void build_shards(const char *dir) {
  uint8_t b[600];
  char path[4096], name[300];
  memset(long_dir, 'd', 140);
  long_dir[140] = 0;
  tarbuf t = {0};

  /* shard 0: plain, label first, two incomplete samples, long names. */
  tb_file(&t, "a/0001.jpg", b, img("a/0001", 0, b));
  tb_text(&t, "a/0001.cls", "3\n");
  tb_text(&t, "a/0002.cls", " 7 ");
  tb_file(&t, "a/0002.png", b, img("a/0002", 1, b));
  tb_file(&t, "a/0003.jpg", b, img("a/0003", 0, b));      /* no label */
  tb_text(&t, "a/0004.txt", "caption");                   /* no image */
  tb_text(&t, "a/0004.cls", "4");
  snprintf(name, sizeof name, "%s/0005.jpg", long_dir);
  char key5[300];
  snprintf(key5, sizeof key5, "%s/0005", long_dir);
  tb_gnu_long(&t, name, b, img(key5, 0, b));
  tb_entry(&t, long_dir, "0005.cls", '0', "5", 1);        /* ustar prefix */
  tb_end(&t);
  snprintf(path, sizeof path, "%s/train-0000.tar", dir);
  tb_write(&t, path);

  /* shard 1: pax names, a folder entry, an extra field, upper case. */
  tb_entry(&t, NULL, "p/", '5', NULL, 0);
  tb_pax(&t, "p/0006.jpg", b, img("p/0006", 0, b));
  tb_file(&t, "p/0007.JPEG", b, img("p/0007", 0, b));
  tb_text(&t, "p/0007.json", "{}");
  tb_text(&t, "./p/0007.cls", "12");
  /* Not adjacent to its image (GNU tar without --sort=name does this). */
  tb_text(&t, "p/0006.CLS", "-2");
  tb_end(&t);
  snprintf(path, sizeof path, "%s/train-0001.tar", dir);
  tb_write(&t, path);

  /* shard 2: one sample; the key ends at the first dot of the basename. */
  tb_file(&t, "q.v2/0008.jpg", b, img("q.v2/0008", 0, b));
  tb_text(&t, "q.v2/README", "no field: ignored");
  tb_text(&t, "q.v2/.hidden", "no key: ignored");
  tb_old_gnu = 1;
  tb_text(&t, "q.v2/0008.cls", "0");
  tb_old_gnu = 0;
  tb_end(&t);
  snprintf(path, sizeof path, "%s/train-0002.tar", dir);
  tb_write(&t, path);

  static char member5[300];
  snprintf(member5, sizeof member5, "%s/0005.jpg", long_dir);
  static char k5[300];
  snprintf(k5, sizeof k5, "%s/0005", long_dir);
  want w[6] = {
      {"a/0001", "a/0001.jpg", 0, 3, 0},   {"a/0002", "a/0002.png", 1, 7, 0},
      {k5, member5, 0, 5, 0},              {"p/0006", "p/0006.jpg", 0, -2, 1},
      {"p/0007", "p/0007.JPEG", 0, 12, 1}, {"q.v2/0008", "q.v2/0008.jpg", 0,
                                            0, 2},
  };
  memcpy(wants, w, sizeof w);
}

static stoke__blobset *open_one(const char *spec) {
  stoke__blobset *s = NULL;
  const char *specs[1] = {spec};
  int rc = stoke__blobset_open_tar(specs, 1, NULL, NULL, &s, errbuf, sizeof errbuf);
  if (rc) fail_msg("open %s: %s", spec, errbuf);
  return s;
}

static int open_err(const char *spec) {
  stoke__blobset *s = NULL;
  const char *specs[1] = {spec};
  int rc = stoke__blobset_open_tar(specs, 1, NULL, NULL, &s, errbuf, sizeof errbuf);
  assert_null(s);
  return rc;
}

static void check_sample(stoke__blobset *s, stoke__blob_reader *r, size_t i) {
  const want *w = &wants[i];
  uint8_t b[600];
  size_t n = img(w->key, w->png, b);
  const uint8_t *p;
  size_t len;
  int rc = stoke__blobset_read(s, i, r, &p, &len, errbuf, sizeof errbuf);
  if (rc) fail_msg("read %zu: %s", i, errbuf);
  assert_int_equal(len, n);
  assert_memory_equal(p, b, n);
  assert_int_equal(stoke__blobset_label(s, i), w->label);
  assert_int_equal(stoke__blobset_format(s, i),
                   w->png ? STOKE__BLOB_PNG : STOKE__BLOB_JPEG);
  char d[1024], shard[32];
  stoke__blobset_describe(s, i, d, sizeof d);
  snprintf(shard, sizeof shard, "train-%04d.tar member ", w->shard);
  assert_non_null(strstr(d, shard));
  assert_non_null(strstr(d, w->member));
}

static void test_tar_grouping(void **state) {
  (void)state;
  char *dir = make_tmp();
  build_shards(dir);
  char spec[4096];
  snprintf(spec, sizeof spec, "%s/train-{0000..0002}.tar", dir);
  stoke__blobset *s = open_one(spec);
  assert_string_equal(stoke__blobset_kind(s), "tar");
  assert_int_equal(stoke__blobset_n_samples(s), 6);
  assert_int_equal(stoke__blobset_n_classes(s), 0);
  stoke__blob_reader r;
  stoke__blob_reader_init(&r, NULL);
  for (size_t i = 0; i < 6; i++) check_sample(s, &r, i);
  char d[1024];
  stoke__blobset_describe(s, 0, d, sizeof d);
  assert_non_null(strstr(d, "train-0000.tar member a/0001.jpg at offset 512"));

  assert_int_equal(stoke__blobset_n_skipped(s), 2);
  const char *why, *what = stoke__blobset_skipped(s, 0, &why);
  assert_non_null(strstr(what, "train-0000.tar: a/0003"));
  assert_string_equal(why, "no label (.cls)");
  what = stoke__blobset_skipped(s, 1, &why);
  assert_non_null(strstr(what, "train-0000.tar: a/0004"));
  assert_non_null(strstr(why, "no image"));
  stoke__blob_reader_free(&r);
  stoke__blobset_close(s);

  /* The same shards through a glob. */
  snprintf(spec, sizeof spec, "%s/train-*.tar", dir);
  s = open_one(spec);
  assert_int_equal(stoke__blobset_n_samples(s), 6);
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
  for (unsigned k = 0; k < 600; k++) {
    size_t i = (a->seed * 7 + k * 5) % 6;
    uint8_t b[600];
    size_t n = img(wants[i].key, wants[i].png, b);
    const uint8_t *q;
    size_t len;
    if (stoke__blobset_read(a->s, i, &r, &q, &len, e, sizeof e) != 0 ||
        len != n || memcmp(q, b, n) != 0)
      atomic_fetch_add(a->bad, 1);
  }
  stoke__blob_reader_free(&r);
  return NULL;
}

static void test_tar_concurrent(void **state) {
  (void)state;
  char *dir = make_tmp();
  build_shards(dir);
  char spec[4096];
  snprintf(spec, sizeof spec, "%s/train-{0000..0002}.tar", dir);
  stoke__blobset *s = open_one(spec);
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

static void test_tar_errors(void **state) {
  (void)state;
  char *dir = make_tmp();
  char path[4096];
  uint8_t b[600];
  tarbuf t = {0};

  /* Cut inside the second member's data. */
  tb_file(&t, "a/1.jpg", b, img("a/1", 0, b));
  tb_text(&t, "a/1.cls", "1");
  tb_file(&t, "a/2.jpg", b, 400);
  tb_end(&t);
  t.n = 1024 + 512 + 512 + 100;
  snprintf(path, sizeof path, "%s/cut.tar", dir);
  tb_write(&t, path);
  assert_int_equal(open_err(path), STOKE_EFORMAT);
  assert_non_null(strstr(errbuf, "cut.tar"));
  assert_non_null(strstr(errbuf, "truncated"));
  assert_non_null(strstr(errbuf, "offset 2048"));

  /* Cut at a member boundary: no end-of-archive marker. */
  tb_file(&t, "a/1.jpg", b, img("a/1", 0, b));
  tb_text(&t, "a/1.cls", "1");
  snprintf(path, sizeof path, "%s/noend.tar", dir);
  tb_write(&t, path);
  assert_int_equal(open_err(path), STOKE_EFORMAT);
  assert_non_null(strstr(errbuf, "end-of-archive"));
  assert_non_null(strstr(errbuf, "offset 2048"));

  /* Cut inside a header. */
  tb_file(&t, "a/1.jpg", b, img("a/1", 0, b));
  tb_text(&t, "a/1.cls", "1");
  t.n = 1024 + 300;
  snprintf(path, sizeof path, "%s/half.tar", dir);
  tb_write(&t, path);
  assert_int_equal(open_err(path), STOKE_EFORMAT);
  assert_non_null(strstr(errbuf, "header at offset 1024"));

  /* A flipped byte in the second header. */
  tb_file(&t, "a/1.jpg", b, img("a/1", 0, b));
  tb_text(&t, "a/1.cls", "1");
  tb_end(&t);
  t.b[1024 + 2] ^= 0x20;
  snprintf(path, sizeof path, "%s/sum.tar", dir);
  tb_write(&t, path);
  assert_int_equal(open_err(path), STOKE_EFORMAT);
  assert_non_null(strstr(errbuf, "sum.tar"));
  assert_non_null(strstr(errbuf, "checksum at offset 1024"));

  /* Not a tar at all. */
  snprintf(path, sizeof path, "%s/text.tar", dir);
  FILE *f = fopen(path, "wb");
  for (int i = 0; i < 100; i++) fputs("hello world ", f);
  fclose(f);
  assert_int_equal(open_err(path), STOKE_EFORMAT);
  assert_non_null(strstr(errbuf, "checksum at offset 0"));

  /* A label that is not an integer. */
  tb_file(&t, "a/1.jpg", b, img("a/1", 0, b));
  tb_text(&t, "a/1.cls", "dog");
  tb_end(&t);
  snprintf(path, sizeof path, "%s/cls.tar", dir);
  tb_write(&t, path);
  assert_int_equal(open_err(path), STOKE_EFORMAT);
  assert_non_null(strstr(errbuf, "a/1.cls"));
  assert_non_null(strstr(errbuf, "\"dog\" is not an integer"));

  /* No usable sample at all: an error naming why. */
  tb_file(&t, "a/1.webp", b, img("a/1", 0, b));
  tb_text(&t, "a/1.cls", "1");
  tb_end(&t);
  snprintf(path, sizeof path, "%s/webp.tar", dir);
  tb_write(&t, path);
  assert_int_equal(open_err(path), STOKE_EFORMAT);
  assert_non_null(strstr(errbuf, "unsupported image format .webp"));

  /* A missing shard. */
  snprintf(path, sizeof path, "%s/missing-{0..1}.tar", dir);
  assert_int_equal(open_err(path), STOKE_EIO);
  assert_non_null(strstr(errbuf, "missing-0.tar"));

  /* A read after the shard shrank. */
  tb_file(&t, "a/1.jpg", b, img("a/1", 0, b));
  tb_text(&t, "a/1.cls", "1");
  tb_end(&t);
  snprintf(path, sizeof path, "%s/shrink.tar", dir);
  tb_write(&t, path);
  stoke__blobset *s = open_one(path);
  assert_int_equal(truncate(path, 100), 0);
  stoke__blob_reader r;
  stoke__blob_reader_init(&r, NULL);
  const uint8_t *p;
  size_t n;
  assert_int_equal(stoke__blobset_read(s, 0, &r, &p, &n, errbuf,
                                       sizeof errbuf), STOKE_EIO);
  assert_non_null(strstr(errbuf, "shrink.tar member a/1.jpg"));
  assert_non_null(strstr(errbuf, "offset 512"));
  stoke__blob_reader_free(&r);
  stoke__blobset_close(s);
  rm_rf(dir);
  free(dir);
}

/* ---- path expansion ------------------------------------------------------ */

static void expect_expand(const char *spec, size_t n, const char *const *w) {
  char **paths;
  size_t got;
  const char *specs[1] = {spec};
  int rc = stoke__blob_expand(specs, 1, NULL, &paths, &got, errbuf,
                              sizeof errbuf);
  if (rc) fail_msg("expand %s: %s", spec, errbuf);
  assert_int_equal(got, n);
  for (size_t i = 0; i < n; i++) assert_string_equal(paths[i], w[i]);
  free(paths);
}

static void test_expand(void **state) {
  (void)state;
  expect_expand("x-{00..03}.tar", 4,
                (const char *[]){"x-00.tar", "x-01.tar", "x-02.tar",
                                 "x-03.tar"});
  expect_expand("s{0000..0002}", 3,
                (const char *[]){"s0000", "s0001", "s0002"});
  expect_expand("{9..11}", 3, (const char *[]){"9", "10", "11"});
  expect_expand("{08..10}", 3, (const char *[]){"08", "09", "10"});
  expect_expand("{3..1}", 3, (const char *[]){"3", "2", "1"});
  expect_expand("{a,b}{1..2}", 4, (const char *[]){"a1", "a2", "b1", "b2"});
  expect_expand("d/{x,y{0..1}}.t", 3,
                (const char *[]){"d/x.t", "d/y0.t", "d/y1.t"});
  expect_expand("plain.tar", 1, (const char *[]){"plain.tar"});
  expect_expand("{,b}c", 2, (const char *[]){"c", "bc"});

  char **paths;
  size_t n;
  const char *bad[] = {"x-{0..3.tar", "x-{abc}.tar", "x-{1..}.tar",
                       "{0..99999999}"};
  for (size_t k = 0; k < 4; k++) {
    assert_int_equal(stoke__blob_expand(&bad[k], 1, NULL, &paths, &n, errbuf,
                                        sizeof errbuf), STOKE_EINVAL);
    assert_null(paths);
    assert_non_null(strstr(errbuf, bad[k]));
  }
  const char *none[] = {"/nonexistent-stoke/*.tar"};
  assert_int_equal(stoke__blob_expand(none, 1, NULL, &paths, &n, errbuf,
                                      sizeof errbuf), STOKE_EINVAL);
  assert_non_null(strstr(errbuf, "matches no file"));
  assert_int_equal(stoke__blob_expand(none, 0, NULL, &paths, &n, errbuf,
                                      sizeof errbuf), STOKE_EINVAL);

  /* Several specs, in order; a glob is sorted. */
  char *dir = make_tmp();
  char p[4096];
  const char *names[] = {"b.tar", "a.tar", "c.tar"};
  for (int k = 0; k < 3; k++) {
    snprintf(p, sizeof p, "%s/%s", dir, names[k]);
    fclose(fopen(p, "wb"));
  }
  char g[4096];
  snprintf(g, sizeof g, "%s/*.tar", dir);
  const char *two[] = {"first", g};
  assert_int_equal(stoke__blob_expand(two, 2, NULL, &paths, &n, errbuf,
                                      sizeof errbuf), 0);
  assert_int_equal(n, 4);
  assert_string_equal(paths[0], "first");
  assert_non_null(strstr(paths[1], "/a.tar"));
  assert_non_null(strstr(paths[2], "/b.tar"));
  assert_non_null(strstr(paths[3], "/c.tar"));
  free(paths);
  rm_rf(dir);
  free(dir);
}

/* Paths taken literally (an S3 listing's keys, a set's own files): copied
** as they are, a brace and a glob character included; without the flag
** the same names are patterns. */
static void test_literal_paths(void **state) {
  (void)state;
  char **paths;
  size_t n;
  const char *names[] = {"s3://b/train-{a}.stoke", "x-{1..2}.tar", "y[*].tar"};
  assert_int_equal(stoke__blob_paths(names, 3, STOKE__BLOB_LITERAL, NULL,
                                     &paths, &n, errbuf, sizeof errbuf), 0);
  assert_int_equal(n, 3);
  for (size_t k = 0; k < 3; k++) assert_string_equal(paths[k], names[k]);
  free(paths);
  assert_int_equal(stoke__blob_paths(names, 1, 0, NULL, &paths, &n, errbuf,
                                     sizeof errbuf), STOKE_EINVAL);
  assert_non_null(strstr(errbuf, "is neither a list"));
  assert_int_equal(stoke__blob_paths(&names[1], 1, 0, NULL, &paths, &n,
                                     errbuf, sizeof errbuf), 0);
  assert_int_equal(n, 2); /* x-1.tar, x-2.tar */
  free(paths);
  const char *empty[] = {"a", ""};
  assert_int_equal(stoke__blob_paths(empty, 2, STOKE__BLOB_LITERAL, NULL,
                                     &paths, &n, errbuf, sizeof errbuf),
                   STOKE_EINVAL);
  assert_null(paths);
  assert_non_null(strstr(errbuf, "path 1 is empty"));
  /* A tar set refuses flags it does not know. */
  stoke__blobset *set = NULL;
  assert_int_equal(stoke__blobset_open_tar_ex(names, 1, 8, NULL, NULL, NULL,
                                              &set, errbuf, sizeof errbuf),
                   STOKE_EINVAL);
  assert_null(set);
}

static void test_tar_oom(void **state) {
  (void)state;
  char *dir = make_tmp();
  build_shards(dir);
  char spec[4096];
  snprintf(spec, sizeof spec, "%s/train-{0000..0002}.tar", dir);
  const char *specs[1] = {spec};
  for (long k = 1;; k++) {
    failing f = {.fail_at = k};
    stoke_allocator a = {f_alloc, f_free, &f};
    stoke__blobset *s = (stoke__blobset *)1;
    int rc = stoke__blobset_open_tar(specs, 1, &a, NULL, &s, errbuf,
                                     sizeof errbuf);
    if (f.faults == 0) {
      if (rc) fail_msg("open: %s", errbuf);
      f.fail_at = 0; /* reads below: no more faults */
      stoke__blob_reader r;
      stoke__blob_reader_init(&r, &a);
      const uint8_t *p;
      size_t n;
      assert_int_equal(stoke__blobset_read(s, 0, &r, &p, &n, errbuf,
                                           sizeof errbuf), 0);
      stoke__blob_reader_free(&r);
      stoke__blobset_close(s);
      assert_int_equal(f.live, 0);
      assert_true(k > 10);
      break;
    }
    if (rc == 0)
      stoke__blobset_close(s);
    else {
      assert_int_equal(rc, STOKE_ENOMEM);
      assert_null(s);
    }
    assert_int_equal(f.live, 0);
  }
  rm_rf(dir);
  free(dir);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expand),
      cmocka_unit_test(test_literal_paths),
      cmocka_unit_test(test_tar_grouping),
      cmocka_unit_test(test_tar_concurrent),
      cmocka_unit_test(test_tar_errors),
      cmocka_unit_test(test_tar_oom),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
