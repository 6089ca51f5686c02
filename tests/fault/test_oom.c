/* test_oom.c — every allocation failure surfaces as an error, leaks nothing
** (LeakSanitizer checks under ASan, the allocator's live count everywhere)
** and leaves nothing half-built: fail allocation n for n = 1, 2, ... until
** the whole operation runs clean.
**
**  - a loader over a synthetic source: create, two epochs, statistics;
**  - each image source (folder, tar, packed): open the source with the
**    failing allocator, then a loader with it, two epochs (the workers'
**    decoders and read buffers included);
**  - stoke_pack: readers, decoders, slots and the shard writer; a failed
**    pack leaves no file behind.
**
** A failure inside a worker's decode is a failed sample (STOKE_ESAMPLE)
** whose message says "out of memory"; anywhere else STOKE_ENOMEM. */
#define _GNU_SOURCE /* mkdtemp, glob */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_fixtures.h"
#include "fault.h"
#include "image_fixtures.h"
#include "source/image.h"
#include "test_util.h"

static int run_epoch(stoke_loader *l) {
  stoke_batch *b;
  int rc;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) stoke_batch_release(b);
  return rc == STOKE_END ? 0 : rc;
}

/* rc is what an allocation failure may give, with a message that says so. */
static void check_oom_rc(int rc, const char *msg) {
  if (rc == 0) return;
  TU_CHECK(rc == STOKE_ENOMEM || rc == STOKE_ESAMPLE,
           "got %s: %s", tu_code_name(rc), msg);
  TU_CHECK(strstr(msg, "memory") != NULL, "message: %s", msg);
}

/* Create a loader over src with allocator a, run two epochs and read the
** statistics.  Returns 0 or the first error; *l_out is the loader (NULL
** when create failed), for the caller to destroy. */
static int loader_run(stoke_source *src, unsigned workers,
                      const stoke_allocator *a, stoke_loader **l_out) {
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = 4;
  cfg.n_workers = workers;
  cfg.warmup_epochs = 1; /* exercise the epoch-record growth too */
  cfg.alloc = a;
  stoke_loader *l = NULL;
  int rc = stoke_loader_create(&cfg, &l);
  *l_out = l;
  if (rc != 0) {
    assert_null(l); /* a failed create hands out nothing */
    check_oom_rc(rc, stoke_errmsg(NULL));
    return rc;
  }
  if (rc == 0) rc = run_epoch(l);
  if (rc == 0) rc = run_epoch(l);
  if (rc != 0) {
    check_oom_rc(rc, stoke_errmsg(l));
    return rc;
  }
  stoke_stats st = {.struct_size = sizeof st};
  rc = stoke_loader_stats(l, &st); /* a const handle: no message to set */
  TU_CHECK(rc == 0 || rc == STOKE_ENOMEM, "stats: %s", tu_code_name(rc));
  return rc;
}

static void oom_synthetic(unsigned workers) {
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = STOKE_SYNTH_TENSOR;
  sc.n_samples = 40;
  stoke_source *src;
  assert_int_equal(stoke_source_create_synthetic(&sc, &src), 0);
  int clean_runs = 0;
  for (long n = 1; n < 10000; n++) {
    failing f = {.fail_at = n};
    stoke_allocator a = {f_alloc, f_free, &f};
    stoke_loader *l;
    int rc = loader_run(src, workers, &a, &l);
    long faults = atomic_load(&f.faults);
    stoke_loader_destroy(l);
    assert_int_equal(atomic_load(&f.live), 0); /* nothing leaked */
    if (faults == 0) {
      assert_int_equal(rc, 0);
      clean_runs++;
      break;
    }
  }
  assert_int_equal(clean_runs, 1);
  stoke_source_destroy(src);
}

static void test_oom_inline(void **state) {
  (void)state;
  oom_synthetic(0);
}

static void test_oom_workers(void **state) {
  (void)state;
  oom_synthetic(3);
}

/* ---- image sources and the pack ------------------------------------------ */

static char root[64], folder[256], tarpath[256], packed[256];

static int setup(void **state) {
  (void)state;
  tmp_root(root, "oom");
  small_dataset(root, folder, tarpath, packed, sizeof folder);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  return tmp_root_remove(root);
}

/* Open path with allocator a for the source and for a loader over it, two
** epochs; every n until one runs clean.  Returns the faults injected. */
static long oom_images(const char *path, unsigned workers) {
  long total = 0, n;
  for (n = 1; n < 100000; n++) {
    failing f = {.fail_at = n};
    stoke_allocator a = {f_alloc, f_free, &f};
    stoke_image_config ic;
    stoke_image_config_init(&ic);
    ic.transform = "random-resized-crop=24,flip,normalize=imagenet,chw,f32";
    ic.alloc = &a;
    stoke_source *src = NULL;
    int rc = stoke_source_create_images(path, &ic, &src);
    stoke_loader *l = NULL;
    if (rc != 0) {
      assert_null(src);
      check_oom_rc(rc, stoke_errmsg(NULL));
    } else {
      rc = loader_run(src, workers, &a, &l);
    }
    long faults = atomic_load(&f.faults);
    stoke_loader_destroy(l);  /* destroyable whatever failed */
    stoke_source_destroy(src);
    TU_CHECK(atomic_load(&f.live) == 0, "%s, n = %ld: %ld blocks leaked",
             path, n, (long)atomic_load(&f.live));
    total += faults;
    if (faults == 0) {
      TU_CHECK(rc == 0, "%s ran clean but failed: %s", path,
               stoke_errmsg(l));
      break;
    }
  }
  print_message("%s: %ld runs\n", path, n);
  TU_CHECK(n > 20, "%s: only %ld allocations: not through the hooks?", path,
           n);
  return total;
}

static void test_oom_folder(void **state) {
  (void)state;
  oom_images(folder, 2);
}

static void test_oom_tar(void **state) {
  (void)state;
  oom_images(tarpath, 0);
}

static void test_oom_packed(void **state) {
  (void)state;
  oom_images(packed, 2);
}

/* Files under the prefix "<root>/out" (a failed pack leaves none), removed
** with `remove_them`. */
static size_t pack_outputs(bool remove_them) {
  char pat[300];
  snprintf(pat, sizeof pat, "%s/out-*", root);
  glob_t g;
  size_t n = glob(pat, 0, NULL, &g) == 0 ? g.gl_pathc : 0;
  for (size_t k = 0; remove_them && k < n; k++) unlink(g.gl_pathv[k]);
  globfree(&g);
  return n;
}

static void test_oom_pack(void **state) {
  (void)state;
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_images(folder, NULL, &src));
  char prefix[300];
  snprintf(prefix, sizeof prefix, "%s/out", root);
  long n;
  for (n = 1; n < 100000; n++) {
    failing f = {.fail_at = n};
    stoke_allocator a = {f_alloc, f_free, &f};
    stoke_pack_config pc;
    stoke_pack_config_init(&pc);
    pc.shard_bytes = 6000;
    pc.n_threads = 2;
    pc.alloc = &a;
    stoke_pack_result res;
    int rc = stoke_pack(src, prefix, &pc, &res);
    long faults = atomic_load(&f.faults);
    assert_int_equal(atomic_load(&f.live), 0);
    if (faults == 0) {
      TU_CHECK(rc == 0, "ran clean but failed: %s", stoke_errmsg(NULL));
      assert_int_equal(res.n_samples, SMALL_DATASET_N);
      assert_int_equal(pack_outputs(true), res.n_shards);
      break;
    }
    check_oom_rc(rc, stoke_errmsg(NULL));
    /* A pack either completes (with fewer threads when one could not
    ** start) or leaves nothing: no shard, no .tmp. */
    if (rc != 0) TU_CHECK(pack_outputs(false) == 0, "n = %ld: files left", n);
    pack_outputs(true);
  }
  TU_CHECK(n > 20, "only %ld allocations", n);
  stoke_source_destroy(src);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_oom_inline),
      cmocka_unit_test(test_oom_workers),
      cmocka_unit_test(test_oom_folder),
      cmocka_unit_test(test_oom_tar),
      cmocka_unit_test(test_oom_packed),
      cmocka_unit_test(test_oom_pack),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
