/* test_syscall.c — I/O faults on every storage kind and on the pack: fail
** the n-th file call (of a class of calls) for n = 1, 2, ... until a run
** sees no fault, once or from then on, with each errno a filesystem gives:
**
**   EIO      any call               -> a clear error: the source or the
**                                      loader fails with a message naming
**                                      the file (and the offset, for a read)
**   ENOENT   open, stat, opendir    -> the same (a file removed meanwhile)
**   EINTR    open, pread, pwrite    -> retried: the run succeeds, the same
**   short    pread, pwrite          -> continued: the run succeeds, the same
**
** "The same": the epoch's batches (every byte, every index, in order) equal
** a run without faults; the pack's shards are byte-identical.  In every
** case nothing opened through the table stays open (descriptors, mappings,
** folders), the handles are destroyable, and the allocator's live count
** returns to zero.
**
** Bad-sample policies: a fault that fails a sample is reported under the
** default policy (stop).  A policy that replaces or skips bad samples gets
** its own row in `policies` below, with what it expects of a fault during
** the epoch. */
#define _GNU_SOURCE /* mkdtemp, glob */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_fixtures.h"
#include "fault.h"
#include "image_fixtures.h"
#include "pipeline/pipeline.h" /* stoke__loader_create */
#include "source/image.h"
#include "test_util.h"

static char root[64], folder[256], tarpath[256], packed[256];

typedef struct fault_kind {
  const char *name;
  int err;         /* errno, or FAULT_SHORT */
  unsigned mask;   /* the calls it may hit */
  bool retried;    /* the library retries it: the run must succeed */
} fault_kind;

static const fault_kind faults[] = {
    {"EIO", EIO, FS_ALL_IO, false},
    {"ENOENT", ENOENT, FS_OPEN | FS_STAT | FS_OPENDIR, false},
    {"EINTR", EINTR, FS_OPEN | FS_PREAD | FS_PWRITE, true},
    {"short", FAULT_SHORT, FS_PREAD | FS_PWRITE, true},
};

/* What a sample lost to a fault during an epoch becomes. */
typedef enum outcome { SAMPLE_FAILS_THE_EPOCH } outcome;
static const struct {
  const char *name;
  outcome fault_in_epoch;
} policies[] = {
    /* The default: the first bad sample stops the epoch (STOKE_ESAMPLE)
    ** with a message naming it.  When stoke_config gains on_error, a row
    ** {"replace", SAMPLE_REPLACED} here sets it in run_source and expects a
    ** full epoch whose batches hold substitutes where faults hit. */
    {"fail", SAMPLE_FAILS_THE_EPOCH},
};

/* ---- one run --------------------------------------------------------------- */

typedef struct run_result {
  int rc;              /* 0, or the first error */
  char msg[600];       /* its message */
  uint64_t hash;       /* of every batch of the epoch, in order */
  size_t batches;
  size_t n_skipped;    /* files the source listed as skipped */
} run_result;

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* Open path through sys, then one epoch with `workers` workers. */
static void run_source(const char *path, const stoke__sys *sys,
                       unsigned workers, const stoke_allocator *a,
                       run_result *r) {
  memset(r, 0, sizeof *r);
  r->hash = 0xcbf29ce484222325ull;
  stoke_image_config ic;
  stoke_image_config_init(&ic);
  ic.transform = "random-resized-crop=24,flip,chw,u8";
  ic.alloc = a;
  stoke_source *src = NULL;
  r->rc = stoke__source_create_images(path, &ic, sys, &src);
  if (r->rc != 0) {
    assert_null(src);
    snprintf(r->msg, sizeof r->msg, "%s", stoke_errmsg(NULL));
    return;
  }
  r->n_skipped = stoke_source_n_skipped(src);
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = 4;
  cfg.n_workers = workers;
  cfg.alloc = a;
  /* One epoch is run: workers prefetching the next one after its END
  ** would meet faults that no next() of this run can report. */
  cfg.prefetch_next_epoch = 0;
  stoke_loader *l = NULL;
  r->rc = stoke_loader_create(&cfg, &l);
  stoke_source_destroy(src); /* the loader keeps its own reference */
  if (r->rc != 0) {
    snprintf(r->msg, sizeof r->msg, "%s", stoke_errmsg(NULL));
    return;
  }
  stoke_batch *b;
  while ((r->rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    for (size_t f = 0; f < stoke_batch_n_fields(b); f++) {
      stoke_tensor t;
      assert_int_equal(stoke_batch_field(b, f, &t), 0);
      r->hash = fnv(r->hash, t.data, t.n_bytes);
    }
    r->hash = fnv(r->hash, stoke_batch_indices(b),
                  stoke_batch_size(b) * sizeof(size_t));
    r->batches++;
    stoke_batch_release(b);
  }
  if (r->rc == STOKE_END) r->rc = 0;
  else snprintf(r->msg, sizeof r->msg, "%s", stoke_errmsg(l));
  stoke_loader_destroy(l); /* also after an error */
}

/* An error a fault may cause: the code, and a message naming a file of the
** dataset (everything lives under root) and, for a failed read, where. */
static void check_error(const run_result *r, const char *what) {
  TU_CHECK(r->rc == STOKE_EIO || r->rc == STOKE_ESAMPLE ||
               r->rc == STOKE_EINVAL,
           "%s: %s: %s", what, tu_code_name(r->rc), r->msg);
  TU_CHECK(strstr(r->msg, root) != NULL, "%s: names no file: %s", what,
           r->msg);
  /* A failed read says where.  (Which call's failure is reported is not
  ** always the first fault's: with workers, another worker's failed open
  ** may poison the loader first.) */
  if (strstr(r->msg, ": read ") || strstr(r->msg, ": pread"))
    TU_CHECK(strstr(r->msg, "offset") != NULL, "%s: no offset: %s", what,
             r->msg);
}

/* Every fault kind, once and from then on, at every n, on one source. */
static void faults_on(const char *path) {
  run_result clean;
  run_source(path, NULL, 2, NULL, &clean);
  TU_CHECK(clean.rc == 0, "clean run: %s", clean.msg);
  assert_int_equal(clean.batches, (SMALL_DATASET_N + 3) / 4);
  for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++)
    for (size_t k = 0; k < sizeof faults / sizeof faults[0]; k++)
      for (int mode = FAULT_ONCE; mode <= FAULT_FROM_THEN_ON; mode++) {
        const fault_kind *fk = &faults[k];
        long errors = 0, n;
        for (n = 1; n < 10000; n++) {
          char what[300];
          snprintf(what, sizeof what, "%s, policy %s, %s %s at call %ld",
                   path, policies[p].name, fk->name,
                   mode == FAULT_ONCE ? "once" : "from then on", n);
          fault_sys fs;
          fault_sys_init(&fs, fk->mask, n, fk->err, mode);
          /* A pattern's shards need not exist as a path (the kind comes
          ** from the suffix when stat says ENOENT), and a dangling link in
          ** a folder is skipped and listed. */
          if (fk->err == ENOENT) fs.tolerated |= FS_STAT;
          failing fa = {0};
          stoke_allocator a = {f_alloc, f_free, &fa};
          run_result r;
          run_source(path, &fs.table, (unsigned)(n % 3), &a, &r);
          TU_CHECK(fault_sys_clean(&fs), "%s: left open: %ld fds, %ld maps, "
                   "%ld folders", what, (long)atomic_load(&fs.fds),
                   (long)atomic_load(&fs.maps), (long)atomic_load(&fs.dirs));
          TU_CHECK(atomic_load(&fa.live) == 0, "%s: %ld blocks leaked", what,
                   (long)atomic_load(&fa.live));
          if (atomic_load(&fs.faults) == 0) { /* past the last call */
            TU_CHECK(r.rc == 0 && r.hash == clean.hash, "%s: %s", what,
                     r.msg);
            break;
          }
          /* Only SAMPLE_FAILS_THE_EPOCH so far: a run that succeeds
          ** delivered exactly the clean epoch; one that fails says why; a
          ** fault outside the tolerated calls (closing what was read) is
          ** never silent; a retried one never fails the run. */
          if (r.rc == 0) {
            /* A link whose target is gone (ENOENT) is skipped and listed,
            ** as at any open: a smaller dataset, never a silent one. */
            TU_CHECK(r.hash == clean.hash || r.n_skipped > clean.n_skipped,
                     "%s: other batches", what);
            TU_CHECK(fk->retried || atomic_load(&fs.fatal) == 0,
                     "%s: the fault (call kind %d) went unreported", what,
                     atomic_load(&fs.first_kind));
          } else {
            TU_CHECK(!fk->retried, "%s: not retried: %s", what, r.msg);
            check_error(&r, what);
            errors++;
          }
        }
        /* Packed shards are mapped, not read: short reads have nothing to hit. */
        TU_CHECK(n > 1 || (path == packed && fk->err == FAULT_SHORT),
                 "%s on %s: no call", fk->name, path);
        if (!fk->retried)
          TU_CHECK(errors > 0, "%s on %s: no fault was an error", fk->name,
                   path);
      }
}

static void test_faults_folder(void **state) {
  (void)state;
  faults_on(folder);
}

static void test_faults_tar(void **state) {
  (void)state;
  faults_on(tarpath);
}

static void test_faults_packed(void **state) {
  (void)state;
  faults_on(packed);
}

/* ---- the pack ---------------------------------------------------------------- */

/* The shard files under <root>/out (and any .tmp), as one hash of their
** names and bytes; removed with `remove_them`. */
static size_t pack_files(uint64_t *hash, bool remove_them) {
  char pat[300];
  snprintf(pat, sizeof pat, "%s/out-*", root);
  glob_t g;
  size_t n = glob(pat, 0, NULL, &g) == 0 ? g.gl_pathc : 0;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t k = 0; k < n; k++) {
    size_t len;
    void *bytes = slurp(g.gl_pathv[k], &len);
    h = fnv(fnv(h, g.gl_pathv[k], strlen(g.gl_pathv[k])), bytes, len);
    free(bytes);
    if (remove_them) unlink(g.gl_pathv[k]);
  }
  globfree(&g);
  if (hash) *hash = h;
  return n;
}

static int pack_with(stoke_source *src, const stoke__sys *sys,
                     const stoke_allocator *a) {
  char prefix[300];
  snprintf(prefix, sizeof prefix, "%s/out", root);
  stoke_pack_config pc;
  stoke_pack_config_init(&pc);
  pc.shard_bytes = 6000;
  pc.n_threads = 2;
  pc.alloc = a;
  stoke_pack_result res;
  return stoke__pack(src, prefix, &pc, sys, &res);
}

/* The writer's calls (open, pwrite, fsync, close, rename, the folder's
** fsync) fail at every n: the pack completes with the same shards, or fails
** naming its file and leaves no shard behind. */
static void test_faults_pack(void **state) {
  (void)state;
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_images(folder, NULL, &src));
  uint64_t want;
  TU_OK(pack_with(src, NULL, NULL));
  size_t n_shards = pack_files(&want, true);
  assert_true(n_shards >= 2);
  for (size_t k = 0; k < sizeof faults / sizeof faults[0]; k++)
    for (int mode = FAULT_ONCE; mode <= FAULT_FROM_THEN_ON; mode++) {
      const fault_kind *fk = &faults[k];
      long n, errors = 0;
      for (n = 1; n < 10000; n++) {
        char what[200];
        snprintf(what, sizeof what, "pack, %s %s at call %ld", fk->name,
                 mode == FAULT_ONCE ? "once" : "from then on", n);
        fault_sys fs;
        fault_sys_init(&fs, fk->mask, n, fk->err, mode);
        /* The check that the output is not the source stats candidates:
        ** one it cannot stat is one it cannot be overwriting. */
        fs.tolerated |= FS_STAT;
        /* ENOENT on opening the shard after the last is how the search
        ** for an earlier pack's shards ends. */
        if (fk->err == ENOENT) fs.tolerated |= FS_OPEN;
        failing fa = {0};
        stoke_allocator a = {f_alloc, f_free, &fa};
        int rc = pack_with(src, &fs.table, &a);
        char msg[600];
        snprintf(msg, sizeof msg, "%s", stoke_errmsg(NULL));
        TU_CHECK(fault_sys_clean(&fs), "%s: %ld fds left open", what,
                 (long)atomic_load(&fs.fds));
        TU_CHECK(atomic_load(&fa.live) == 0, "%s: leaked", what);
        uint64_t got;
        size_t files = pack_files(&got, true);
        if (atomic_load(&fs.faults) == 0) {
          TU_CHECK(rc == 0 && got == want, "%s: %s", what, msg);
          break;
        }
        if (rc == 0) { /* tolerated: the same shards, or the fault is loud */
          TU_CHECK(got == want, "%s: other shards", what);
          TU_CHECK(fk->retried || atomic_load(&fs.fatal) == 0,
                   "%s: unreported (call kind %d)", what,
                   atomic_load(&fs.first_kind));
          continue;
        }
        TU_CHECK(!fk->retried, "%s: not retried: %s", what, msg);
        TU_CHECK(rc == STOKE_EIO, "%s: %s: %s", what, tu_code_name(rc), msg);
        TU_CHECK(strstr(msg, root) != NULL, "%s: names no file: %s", what,
                 msg);
        /* What fails after the renames (the folder's fsync, removing an
        ** earlier pack's shards) leaves complete shards, and says so. */
        if (strstr(msg, "shards are complete"))
          TU_CHECK(got == want, "%s: shards differ", what);
        else if (!(mode == FAULT_FROM_THEN_ON && (fk->mask & FS_UNLINK)))
          TU_CHECK(files == 0, "%s: %zu files left (%s)", what, files, msg);
        /* (A disk that fails every call from then on also fails the
        ** unlinks that would take the .tmp files away.) */
        errors++;
      }
      TU_CHECK(n > 1, "pack, %s: no call", fk->name);
      if (!fk->retried) TU_CHECK(errors > 0, "pack, %s: no error", fk->name);
    }
  stoke_source_destroy(src);
}

/* ---- threads ----------------------------------------------------------------- */

/* A worker that cannot start, at every index: create fails with
** STOKE_ETHREAD naming the worker, the workers already started are joined,
** nothing leaks; the next create works. */
static void test_thread_start_fails(void **state) {
  (void)state;
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = STOKE_SYNTH_TENSOR;
  sc.n_samples = 32;
  stoke_source *src;
  TU_OK(stoke_source_create_synthetic(&sc, &src));
  const unsigned W = 6;
  for (unsigned i = 0; i <= W; i++) {
    fault_sys fs;
    fault_sys_init(&fs, FS_THREAD, i + 1, EAGAIN, FAULT_ONCE);
    failing fa = {0};
    stoke_allocator a = {f_alloc, f_free, &fa};
    stoke_config cfg;
    stoke_config_init(&cfg);
    cfg.source = src;
    cfg.n_workers = W;
    cfg.alloc = &a;
    stoke_loader *l = NULL;
    int rc = stoke__loader_create(&cfg, &fs.table, &l);
    if (i == W) { /* past the last worker: no fault */
      assert_int_equal(atomic_load(&fs.faults), 0);
      TU_OK(rc);
      stoke_batch *b;
      while ((rc = stoke_loader_next(l, &b)) == STOKE_OK)
        stoke_batch_release(b);
      assert_int_equal(rc, STOKE_END);
    } else {
      assert_int_equal(rc, STOKE_ETHREAD);
      assert_null(l);
      char want[64];
      snprintf(want, sizeof want, "cannot start worker %u of %u", i, W);
      TU_CONTAINS(stoke_errmsg(NULL), want);
    }
    stoke_loader_destroy(l);
    assert_int_equal(atomic_load(&fa.live), 0);
  }
  stoke_source_destroy(src);
}

/* stoke_pack with a producer thread that cannot start: fewer threads, the
** same shards; none at all: STOKE_ETHREAD and no file. */
static void test_pack_thread_fails(void **state) {
  (void)state;
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_images(folder, NULL, &src));
  uint64_t want;
  TU_OK(pack_with(src, NULL, NULL));
  pack_files(&want, true);
  for (long i = 1; i <= 3; i++) {
    fault_sys fs;
    fault_sys_init(&fs, FS_THREAD, i, EAGAIN, FAULT_FROM_THEN_ON);
    int rc = pack_with(src, &fs.table, NULL);
    uint64_t got;
    size_t files = pack_files(&got, true);
    if (i == 1) {
      assert_int_equal(rc, STOKE_ETHREAD);
      TU_CONTAINS(stoke_errmsg(NULL), "cannot start a thread");
      assert_int_equal(files, 0);
    } else {
      TU_OK(rc);
      assert_true(got == want);
    }
  }
  stoke_source_destroy(src);
}

/* ---- a read that hangs ----------------------------------------------------- */

typedef struct destroyer {
  stoke_loader *l;
  atomic_int done;
} destroyer;

static void *destroy_main(void *p) {
  destroyer *d = p;
  stoke_loader_destroy(d->l);
  atomic_store(&d->done, 1);
  return NULL;
}

/* A read that never returns (a stuck network filesystem): next() reports
** STOKE_ETIMEDOUT naming the sample and its file while the read still
** hangs; destroy, called meanwhile, waits for it (no thread is abandoned
** with the loader freed under it: ASan would see the worker's writes) and
** returns once the read does. */
static void test_hung_read_times_out(void **state) {
  (void)state;
  fault_sys fs;
  fault_sys_init(&fs, FS_PREAD, 3, FAULT_BLOCK, FAULT_ONCE);
  stoke_source *src = NULL;
  /* The largest image declared, so that the open reads no header for the
  ** memory ledger (src/source/scratch.c) and the third read is a worker's. */
  stoke_image_config ic;
  stoke_image_config_init(&ic);
  ic.largest_width = 80;
  ic.largest_height = 64;
  TU_OK(stoke__source_create_images(folder, &ic, &fs.table, &src));
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = 2;
  cfg.n_workers = 2;
  /* Far above any sample that does not hang (a 80x64 image decodes in
  ** well under a millisecond, a few under TSan on a loaded machine), so
  ** that the sample that times out is the one whose read hangs: checked
  ** below by the hanging read still being held. */
  cfg.sample_timeout_ms = 2000;
  stoke_loader *l = NULL;
  TU_OK(stoke_loader_create(&cfg, &l));
  stoke_batch *b;
  int rc;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) stoke_batch_release(b);
  TU_RC_L(l, rc, STOKE_ETIMEDOUT);
  pthread_mutex_lock(&fs.mu);
  int hanging = fs.blocked;
  pthread_mutex_unlock(&fs.mu);
  TU_CHECK(hanging == 1, "next() returned after the read (%d hanging)",
           hanging);
  const char *msg = stoke_errmsg(l);
  TU_CONTAINS(msg, "over the sample timeout of 2000 ms");
  TU_CONTAINS(msg, folder); /* the sample's file */
  TU_CONTAINS(msg, "sample ");
  destroyer d = {l, 0};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, destroy_main, &d), 0);
  /* Give a wrong destroy (one that does not wait) time to return. */
  struct timespec nap = {0, 50 * 1000 * 1000};
  nanosleep(&nap, NULL);
  TU_CHECK(atomic_load(&d.done) == 0, "destroy returned while a worker "
           "was still inside the sample");
  fault_sys_unblock(&fs);
  pthread_join(t, NULL);
  assert_int_equal(atomic_load(&d.done), 1);
  stoke_source_destroy(src);
  assert_true(fault_sys_clean(&fs));
}

/* ---- set-up ------------------------------------------------------------------ */

static int setup(void **state) {
  (void)state;
  tmp_root(root, "sys");
  small_dataset(root, folder, tarpath, packed, sizeof folder);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  return tmp_root_remove(root);
}

int main(void) {
  /* A fault that made something wait forever must fail here, not after
  ** ctest's 600 s. */
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_faults_folder),
      cmocka_unit_test(test_faults_tar),
      cmocka_unit_test(test_faults_packed),
      cmocka_unit_test(test_faults_pack),
      cmocka_unit_test(test_thread_start_fails),
      cmocka_unit_test(test_pack_thread_fails),
      cmocka_unit_test(test_hung_read_times_out),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
