/* test_wait_histogram.c — the public wait histogram agrees with the stats
** snapshot: same steps, buckets in order, and each percentile of the
** snapshot in the bucket that holds the ceil(q * steps)-th wait (so p99 of
** these 48 steps is in the top bucket, the worst step's). */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "stoke.h"
#include "test_util.h"

static void test_histogram_matches_stats(void **state) {
  (void)state;
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = STOKE_SYNTH_SLEEP;
  sc.cost_ns = 200000;
  sc.dist = STOKE_COST_EXP;
  sc.n_samples = 96;
  stoke_source *src;
  assert_int_equal(stoke_source_create_synthetic(&sc, &src), 0);
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = 4;
  cfg.n_workers = 2;
  cfg.warmup_epochs = 1;
  stoke_loader *l;
  assert_int_equal(stoke_loader_create(&cfg, &l), 0);
  /* Before any measured step: empty. */
  assert_int_equal(stoke_loader_wait_histogram(l, NULL, 0), 0);
  for (int e = 0; e < 3; e++) {
    stoke_batch *b;
    while (stoke_loader_next(l, &b) == STOKE_OK) stoke_batch_release(b);
  }
  size_t n = stoke_loader_wait_histogram(l, NULL, 0);
  assert_true(n > 0);
  stoke_hist_bucket *h = calloc(n, sizeof *h);
  assert_int_equal(stoke_loader_wait_histogram(l, h, n), n);
  stoke_stats st = {.struct_size = sizeof st};
  assert_int_equal(stoke_loader_stats(l, &st), 0);
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) {
    assert_true(h[i].count > 0);
    assert_true(h[i].hi_ns > h[i].lo_ns);
    if (i) assert_true(h[i].lo_ns >= h[i - 1].hi_ns);
    total += h[i].count;
  }
  assert_int_equal(total, st.steps); /* warm-up epoch left out */
  assert_int_equal(st.steps, 2 * 96 / 4);
  assert_true(st.wait.max_ns >= h[n - 1].lo_ns);
  assert_true(st.wait.max_ns < h[n - 1].hi_ns);
  /* Percentiles: the bucket of the ceil(q * steps)-th smallest wait, its
  ** midpoint clamped to the maximum. */
  static const struct {
    int per_cent;
    size_t off;
  } qs[] = {{50, offsetof(stoke_dist, p50_ns)},
            {95, offsetof(stoke_dist, p95_ns)},
            {99, offsetof(stoke_dist, p99_ns)}};
  for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
    int64_t p;
    memcpy(&p, (const char *)&st.wait + qs[k].off, sizeof p);
    uint64_t rank = (qs[k].per_cent * total + 99) / 100, seen = 0;
    size_t at = 0;
    while (seen + h[at].count < rank) seen += h[at++].count;
    TU_CHECK(p >= h[at].lo_ns && p < h[at].hi_ns && p <= st.wait.max_ns,
             "p%d %lld ns: the %llu-th of %llu waits is in bucket %zu "
             "[%lld, %lld)", qs[k].per_cent, (long long)p,
             (unsigned long long)rank, (unsigned long long)total, at,
             (long long)h[at].lo_ns, (long long)h[at].hi_ns);
  }
  /* Fewer than 100 steps: p99 is the worst step's bucket. */
  TU_CHECK(st.wait.p99_ns >= h[n - 1].lo_ns,
           "p99 %lld ns of %llu steps is below the worst step's bucket "
           "[%lld, %lld)", (long long)st.wait.p99_ns,
           (unsigned long long)st.steps, (long long)h[n - 1].lo_ns,
           (long long)h[n - 1].hi_ns);
  /* A short array gets the first buckets. */
  stoke_hist_bucket one;
  assert_int_equal(stoke_loader_wait_histogram(l, &one, 1), n);
  assert_int_equal(one.lo_ns, h[0].lo_ns);
  free(h);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_histogram_matches_stats),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
