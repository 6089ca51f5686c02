/* test_oom.c — every allocation failure of a loader surfaces as
** STOKE_ENOMEM, leaks nothing (LeakSanitizer checks under ASan) and leaves
** nothing half-built: fail allocation n for n = 1, 2, ... until create and
** one epoch succeed. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "stoke.h"
#include "test_util.h"

typedef struct failing_alloc {
  atomic_long calls;  /* allocations so far */
  long fail_at;       /* the one to fail (1-based); 0 = never */
  atomic_long faults; /* failures injected */
  atomic_long live;   /* outstanding blocks */
} failing_alloc;

static void *fa_alloc(void *user, size_t n) {
  failing_alloc *fa = user;
  long k = atomic_fetch_add(&fa->calls, 1) + 1;
  if (fa->fail_at && k == fa->fail_at) {
    atomic_fetch_add(&fa->faults, 1);
    return NULL;
  }
  void *p = malloc(n);
  if (p) atomic_fetch_add(&fa->live, 1);
  return p;
}

static void fa_free(void *user, void *p) {
  failing_alloc *fa = user;
  atomic_fetch_sub(&fa->live, 1);
  free(p);
}

static int run_epoch(stoke_loader *l) {
  stoke_batch *b;
  int rc;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) stoke_batch_release(b);
  return rc == STOKE_END ? 0 : rc;
}

static void oom_loop(unsigned workers) {
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = STOKE_SYNTH_TENSOR;
  sc.n_samples = 40;
  stoke_source *src;
  assert_int_equal(stoke_source_create_synthetic(&sc, &src), 0);
  int clean_runs = 0;
  for (long n = 1; n < 10000; n++) {
    failing_alloc fa = {.fail_at = n};
    stoke_allocator a = {fa_alloc, fa_free, &fa};
    stoke_config cfg;
    stoke_config_init(&cfg);
    cfg.source = src;
    cfg.batch_size = 8;
    cfg.n_workers = workers;
    cfg.warmup_epochs = 1; /* exercise the epoch-record growth too */
    cfg.alloc = &a;
    stoke_loader *l = NULL;
    int rc = stoke_loader_create(&cfg, &l);
    if (rc != 0) {
      assert_null(l); /* a failed create hands out nothing */
      assert_true(strstr(stoke_errmsg(NULL), "memory") != NULL);
    }
    if (rc == 0) rc = run_epoch(l);
    if (rc == 0) rc = run_epoch(l);
    if (rc == 0) {
      stoke_stats st = {.struct_size = sizeof st};
      rc = stoke_loader_stats(l, &st);
    }
    long faults = atomic_load(&fa.faults);
    stoke_loader_destroy(l);
    assert_int_equal(atomic_load(&fa.live), 0); /* nothing leaked */
    if (faults == 0) {
      assert_int_equal(rc, 0);
      clean_runs++;
      break;
    }
    if (rc != 0) assert_int_equal(rc, STOKE_ENOMEM);
  }
  assert_int_equal(clean_runs, 1);
  stoke_source_destroy(src);
}

static void test_oom_inline(void **state) {
  (void)state;
  oom_loop(0);
}

static void test_oom_workers(void **state) {
  (void)state;
  oom_loop(3);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_oom_inline),
      cmocka_unit_test(test_oom_workers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
