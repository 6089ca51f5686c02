/* test_cache.c — the packed cache (cache_dir) and the RAM cache
** (ram_cache_bytes).
**
** The packed cache: the first epoch reads the source and writes it, in the
** background, into packed shards under DIR/<key>/; once published, later
** epochs and later loaders read every sample from them, and the batches
** are those without the cache (the JPEG rewrite is lossless); folder and
** tar sources, a packed one refused; the key changes with a file's size or
** modification time (a folder's files and a tar shard), so a changed source is not read stale; a first epoch
** killed mid-write leaves its shard only as NAME.tmp, which the next open
** removes; a write that
** fails stops the caching, not the loader, and leaves no shard under a
** final name that is not complete, and no .tmp behind; a dead writer's
** .tmp files are removed by the next open; the disk budget stops it.
**
** The RAM cache: for a deterministic transform, the first samples by
** index (as many as the budget holds) are copied from RAM in later epochs,
** byte for byte what a fill makes; a random transform is refused; the
** ledger counts it and the memory budget is checked before it is
** allocated. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <glob.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <jpeglib.h>
#include <spng.h>

#include "decode_fixtures.h"
#include "fault.h"
#include "image_fixtures.h"
#include "test_util.h"
#include "pipeline/pipeline.h"
#include "storage/cache.h"

#define TF "random-resized-crop=16,flip,chw,u8"
#define SEED 9

static char root[64], folder[256], tarp[256], packp[256];

/* One epoch: every byte of every batch, hashed in order. */
static uint64_t epoch_hash(stoke_loader *l, size_t *n_batches) {
  uint64_t h = 1469598103934665603ull;
  stoke_batch *b;
  int rc;
  size_t k = 0;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    for (size_t f = 0; f < stoke_batch_n_fields(b); f++) {
      stoke_tensor t;
      TU_OK(stoke_batch_field(b, f, &t));
      const uint8_t *p = t.data;
      for (size_t i = 0; i < t.n_bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
    }
    k++;
    stoke_batch_release(b);
  }
  TU_RC_L(l, rc, STOKE_END);
  if (n_batches) *n_batches = k;
  return h;
}

static stoke_config cache_cfg(stoke_source *src, const char *dir) {
  stoke_config c = tu_config(src, 2, 2, 3);
  c.shuffle = 1;
  c.seed = SEED;
  c.cache_dir = dir;
  c.prefetch_next_epoch = 0; /* the epochs' reads are their own */
  return c;
}

/* Shard files under dir/<key>: complete ones (*.stoke) and leftovers. */
static size_t count(const char *dir, const char *pattern) {
  char p[512];
  snprintf(p, sizeof p, "%s/*/%s", dir, pattern);
  glob_t g;
  size_t n = glob(p, 0, NULL, &g) == 0 ? g.gl_pathc : 0;
  globfree(&g);
  return n;
}

/* Every complete shard opens and validates (a packed source over them). */
static size_t cached_samples_on_disk(const char *dir) {
  char p[512];
  snprintf(p, sizeof p, "%s/*/*.stoke", dir);
  stoke_source *s = NULL;
  if (stoke_source_create_images(p, NULL, &s) != 0) return 0;
  size_t n = stoke_source_n_samples(s);
  stoke_source_destroy(s);
  return n;
}

static void test_fill_then_read(void **state) {
  (void)state;
  const char *paths[] = {folder, tarp};
  for (int k = 0; k < 2; k++) {
    char dir[128];
    snprintf(dir, sizeof dir, "%s/cache%d/deep", root, k);
    stoke_source *src = tu_open_images(paths[k], TF);
    /* The same epochs without the cache. */
    stoke_config c0 = cache_cfg(src, NULL);
    stoke_loader *l0 = tu_loader(&c0);
    uint64_t want0 = epoch_hash(l0, NULL), want1 = epoch_hash(l0, NULL);
    stoke_loader_destroy(l0);

    stoke_config c = cache_cfg(src, dir);
    stoke_loader *l = tu_loader(&c);
    assert_int_equal(epoch_hash(l, NULL), want0);
    stoke_stats st = tu_stats(l);
    assert_int_equal(st.cache_hits, 0);
    /* The writer has published it all. */
    stoke__cache_sync(stoke__packcache_of(l));
    st = tu_stats(l);
    assert_int_equal(st.cache_samples, SMALL_DATASET_N);
    assert_int_equal(st.cache_written, SMALL_DATASET_N);
    TU_CHECK(st.cache_bytes > 0, "no bytes on disk");
    assert_int_equal(epoch_hash(l, NULL), want1);
    st = tu_stats(l);
    assert_int_equal(st.cache_hits, SMALL_DATASET_N);
    stoke_loader_destroy(l);
    assert_int_equal(count(dir, "*.tmp"), 0);
    assert_int_equal(cached_samples_on_disk(dir), SMALL_DATASET_N);

    /* A later loader reads the cache from its first epoch on. */
    l = tu_loader(&c);
    assert_int_equal(epoch_hash(l, NULL), want0);
    st = tu_stats(l);
    assert_int_equal(st.cache_hits, SMALL_DATASET_N);
    assert_int_equal(st.cache_written, 0);
    stoke_loader_destroy(l);
    stoke_source_destroy(src);
  }
  /* Packed shards are packed already. */
  stoke_source *p = tu_open_images(packp, TF);
  char dir[128];
  snprintf(dir, sizeof dir, "%s/cachep", root);
  stoke_config c = cache_cfg(p, dir);
  stoke_loader *l = NULL;
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "folder and tar");
  stoke_source_destroy(p);
}

/* The keys (folders) under a cache's dir. */
static size_t n_keys(const char *dir) {
  char p[512];
  snprintf(p, sizeof p, "%s/*", dir);
  glob_t g;
  size_t n = glob(p, GLOB_ONLYDIR, NULL, &g) == 0 ? g.gl_pathc : 0;
  globfree(&g);
  return n;
}

/* Touch a file: another key, so the old cache is not read. */
static void test_changed_source(void **state) {
  (void)state;
  char dir[128], file[400];
  snprintf(dir, sizeof dir, "%s/cache-changed", root);
  stoke_source *src = tu_open_images(folder, TF);
  stoke_config c = cache_cfg(src, dir);
  stoke_loader *l = tu_loader(&c);
  epoch_hash(l, NULL);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  snprintf(file, sizeof file, "%s/bee/b.jpg", folder);
  struct timespec t[2] = {{0, UTIME_OMIT}, {12345, 0}};
  assert_int_equal(utimensat(AT_FDCWD, file, t, 0), 0);
  src = tu_open_images(folder, TF);
  c = cache_cfg(src, dir);
  l = tu_loader(&c);
  epoch_hash(l, NULL);
  stoke_stats st = tu_stats(l);
  assert_int_equal(st.cache_hits, 0); /* nothing of the old key */
  stoke_loader_destroy(l);
  assert_int_equal(n_keys(dir), 2); /* the old and the new */
  stoke_source_destroy(src);
  /* A byte more (after the JPEG's end, which decoders ignore) with the
  ** modification time put back: the size alone gives a third key. */
  FILE *f = fopen(file, "ab");
  assert_non_null(f);
  assert_int_equal(fputc(0, f), 0);
  assert_int_equal(fclose(f), 0);
  t[1].tv_sec = 12345;
  assert_int_equal(utimensat(AT_FDCWD, file, t, 0), 0);
  src = tu_open_images(folder, TF);
  c = cache_cfg(src, dir);
  l = tu_loader(&c);
  epoch_hash(l, NULL);
  assert_int_equal(tu_stats(l).cache_hits, 0);
  stoke_loader_destroy(l);
  assert_int_equal(n_keys(dir), 3);
  stoke_source_destroy(src);
}

/* The tar half: a shard's modification time alone (same bytes, same size)
** gives another key, as a tar rewritten in place must not be read stale;
** the time put back finds the first key again. */
static void test_changed_tar(void **state) {
  (void)state;
  char dir[128];
  snprintf(dir, sizeof dir, "%s/cache-changed-tar", root);
  struct stat before;
  assert_int_equal(stat(tarp, &before), 0);
  stoke_source *src = tu_open_images(tarp, TF);
  stoke_config c = cache_cfg(src, dir);
  stoke_loader *l = tu_loader(&c);
  epoch_hash(l, NULL);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  assert_int_equal(n_keys(dir), 1);
  struct timespec t[2] = {{0, UTIME_OMIT}, {12345, 0}};
  assert_int_equal(utimensat(AT_FDCWD, tarp, t, 0), 0);
  src = tu_open_images(tarp, TF);
  c = cache_cfg(src, dir);
  l = tu_loader(&c);
  epoch_hash(l, NULL);
  assert_int_equal(tu_stats(l).cache_hits, 0); /* nothing of the old key */
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  assert_int_equal(n_keys(dir), 2);
  t[1] = before.st_mtim;
  assert_int_equal(utimensat(AT_FDCWD, tarp, t, 0), 0);
}

/* A first epoch killed while the writer has samples in its shard: the
** shard is only NAME.tmp (nothing under a final name), and the next open
** removes it and fills the cache afresh, with the same batches. */
static void test_interrupted(void **state) {
  (void)state;
  char dir[128];
  snprintf(dir, sizeof dir, "%s/cache-killed", root);
  stoke_source *src = tu_open_images(folder, TF);
  stoke_config c0 = cache_cfg(src, NULL);
  stoke_loader *l0 = tu_loader(&c0);
  uint64_t want0 = epoch_hash(l0, NULL);
  stoke_loader_destroy(l0);
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    /* One batch of the first epoch, then wait, mid-epoch, until the
    ** writer has appended samples to its shard (not published: only an
    ** epoch's end or a full shard publishes), and say so. */
    stoke_config c = cache_cfg(src, dir);
    stoke_loader *l = NULL;
    stoke_batch *b;
    if (stoke_loader_create(&c, &l) != 0 || stoke_loader_next(l, &b) != 0)
      _exit(2);
    stoke__cache_stats cs;
    for (int i = 0; i < 20000; i++) { /* up to 20 s */
      stoke__cache_stats_get(stoke__packcache_of(l), &cs);
      if (cs.written > 0) break;
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
    char ok = cs.written > 0 ? 'y' : 'n';
    if (write(ready[1], &ok, 1) != 1) _exit(3);
    for (;;) pause(); /* killed here, the loader alive */
  }
  close(ready[1]);
  char ok = 0;
  assert_int_equal(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  assert_int_equal(ok, 'y');
  assert_int_equal(kill(child, SIGKILL), 0);
  int status;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(count(dir, "*.stoke"), 0);
  assert_int_equal(count(dir, "*.stoke.tmp"), 1); /* the half-written one */
  stoke_config c = cache_cfg(src, dir);
  stoke_loader *l = tu_loader(&c);
  assert_int_equal(count(dir, "*.stoke.tmp"), 0); /* its writer is gone */
  assert_int_equal(epoch_hash(l, NULL), want0);
  assert_int_equal(tu_stats(l).cache_hits, 0);
  stoke_loader_destroy(l);
  assert_int_equal(count(dir, "*.tmp"), 0);
  assert_int_equal(cached_samples_on_disk(dir), SMALL_DATASET_N);
  stoke_source_destroy(src);
}

/* A write that fails: the loader reads on (the same batches), the cache
** says why, and nothing under a final name is incomplete. */
static void test_write_fault(void **state) {
  (void)state;
  stoke_source *src = tu_open_images(folder, TF);
  stoke_config c0 = cache_cfg(src, NULL);
  stoke_loader *l0 = tu_loader(&c0);
  uint64_t want0 = epoch_hash(l0, NULL), want1 = epoch_hash(l0, NULL);
  stoke_loader_destroy(l0);
  const unsigned masks[] = {FS_PWRITE, FS_FSYNC, FS_RENAME};
  for (size_t m = 0; m < 3; m++) {
    for (long at = 1; at <= 3; at++) {
      char dir[128];
      snprintf(dir, sizeof dir, "%s/cache-fault-%zu-%ld", root, m, at);
      fault_sys fs;
      fault_sys_init(&fs, masks[m], at, EIO, FAULT_FROM_THEN_ON);
      stoke_config c = cache_cfg(src, dir);
      stoke_loader *l = NULL;
      TU_OK(stoke__loader_create(&c, &fs.table, &l));
      assert_int_equal(epoch_hash(l, NULL), want0);
      stoke__cache_sync(stoke__packcache_of(l));
      assert_int_equal(epoch_hash(l, NULL), want1);
      stoke__cache_stats cs;
      stoke__cache_stats_get(stoke__packcache_of(l), &cs);
      /* Every cache write makes at least one call of each kind: the first
      ** always fails (later ones may not be reached). */
      if (at == 1)
        TU_CHECK(atomic_load(&fs.faults) > 0, "%s: no fault", dir);
      if (atomic_load(&fs.faults) > 0)
        TU_CONTAINS(cs.error, "pack writer");
      stoke_loader_destroy(l);
      assert_int_equal(count(dir, "*.tmp"), 0);
      /* Whatever has a final name is complete (it validates). */
      size_t on_disk = count(dir, "*.stoke");
      if (on_disk)
        TU_CHECK(cached_samples_on_disk(dir) > 0, "%s: a damaged shard", dir);
      assert_true(fault_sys_clean(&fs));
    }
  }
  stoke_source_destroy(src);
}

/* A dead writer's NAME.tmp goes at the next open; a live one's stays. */
static void test_orphans(void **state) {
  (void)state;
  char dir[128];
  snprintf(dir, sizeof dir, "%s/cache-orphans", root);
  stoke_source *src = tu_open_images(folder, TF);
  stoke_config c = cache_cfg(src, dir);
  stoke_loader *l = tu_loader(&c);
  char key[400];
  snprintf(key, sizeof key, "%s", stoke__cache_path(stoke__packcache_of(l)));
  stoke_loader_destroy(l);
  pid_t child = fork();
  if (child == 0) _exit(0);
  assert_true(child > 0);
  waitpid(child, NULL, 0); /* a pid that is gone */
  char dead[64], live[64];
  snprintf(dead, sizeof dead, "c-%ld-0000-00000.stoke.tmp", (long)child);
  snprintf(live, sizeof live, "c-%ld-0000-00000.stoke.tmp", (long)getppid());
  write_file(key, dead, "x", 1);
  write_file(key, live, "x", 1);
  l = tu_loader(&c);
  stoke_loader_destroy(l);
  char p[600];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s", key, dead);
  assert_int_not_equal(stat(p, &st), 0);
  snprintf(p, sizeof p, "%s/%s", key, live);
  assert_int_equal(stat(p, &st), 0);
  unlink(p);
  stoke_source_destroy(src);
}

/* The disk budget stops the writing; the loader is not affected. */
static void test_budget(void **state) {
  (void)state;
  char dir[128];
  snprintf(dir, sizeof dir, "%s/cache-budget", root);
  stoke_source *src = tu_open_images(folder, TF);
  stoke_config c = cache_cfg(src, dir);
  c.cache_max_bytes = 9000; /* a header page and about a sample */
  stoke_loader *l = tu_loader(&c);
  epoch_hash(l, NULL);
  stoke__cache_sync(stoke__packcache_of(l));
  stoke__cache_stats cs;
  stoke__cache_stats_get(stoke__packcache_of(l), &cs);
  assert_true(cs.full);
  TU_CHECK(cs.samples < SMALL_DATASET_N, "%zu samples in 9000 bytes",
           cs.samples);
  assert_string_equal(cs.error, "");
  TU_CHECK(cs.bytes <= 9000, "%llu bytes on disk",
           (unsigned long long)cs.bytes);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
}

/* ---- the RAM cache ---------------------------------------------------------- */

#define EVAL_TF "resize=20,center-crop=16,chw,f32"

static void test_ram_cache(void **state) {
  (void)state;
  stoke_source *src = tu_open_images(folder, EVAL_TF);
  stoke_config c0 = cache_cfg(src, NULL);
  stoke_loader *l0 = tu_loader(&c0);
  uint64_t want0 = epoch_hash(l0, NULL), want1 = epoch_hash(l0, NULL);
  stoke_loader_destroy(l0);
  stoke_config c = cache_cfg(src, NULL);
  c.ram_cache_bytes = STOKE_RAM_CACHE_ALL;
  stoke_loader *l = tu_loader(&c);
  assert_int_equal(epoch_hash(l, NULL), want0);
  assert_int_equal(tu_stats(l).ram_cache_hits, 0);
  assert_int_equal(epoch_hash(l, NULL), want1);
  assert_int_equal(tu_stats(l).ram_cache_hits, SMALL_DATASET_N);
  stoke_loader_destroy(l);
  /* Room for 3 samples: samples 0, 1, 2 are kept, whatever the timing. */
  size_t per = 3 * 16 * 16 * 4 + 8;
  c.ram_cache_bytes = 3 * per + per / 2;
  l = tu_loader(&c);
  assert_int_equal(stoke__ramcache_samples(l), 3);
  epoch_hash(l, NULL);
  epoch_hash(l, NULL);
  assert_int_equal(tu_stats(l).ram_cache_hits, 3);
  /* The ledger counts it. */
  stoke_host_ledger g;
  TU_OK(stoke_loader_ledger(l, &g));
  TU_CHECK(g.cache_bytes >= 3 * per, "cache term %llu",
           (unsigned long long)g.cache_bytes);
  assert_int_equal(stoke_loader_host_bytes(l), g.total_bytes);
  stoke_loader_destroy(l);
  /* Checked against the budget before it is allocated. */
  c.ram_cache_bytes = STOKE_RAM_CACHE_ALL;
  c.mem_budget_bytes = g.total_bytes - g.cache_bytes + per;
  l = NULL;
  TU_RC(stoke_loader_create(&c, &l), STOKE_EBUDGET);
  c.ram_cache_bytes = 0; /* the same budget holds the loader without it */
  l = tu_loader(&c);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  /* A random transform changes every epoch: refused. */
  src = tu_open_images(folder, TF);
  c = cache_cfg(src, NULL);
  c.ram_cache_bytes = STOKE_RAM_CACHE_ALL;
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "deterministic");
  stoke_source_destroy(src);
}

static int setup(void **state) {
  (void)state;
  tmp_root(root, "cache");
  small_dataset(root, folder, tarp, packp, sizeof folder);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  tmp_root_remove(root);
  return 0;
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fill_then_read),
      cmocka_unit_test(test_changed_source),
      cmocka_unit_test(test_changed_tar),
      cmocka_unit_test(test_interrupted),
      cmocka_unit_test(test_write_fault),
      cmocka_unit_test(test_orphans),
      cmocka_unit_test(test_budget),
      cmocka_unit_test(test_ram_cache),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
