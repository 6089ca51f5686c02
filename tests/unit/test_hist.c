/* test_hist.c — log-bucket histograms: bucket layout, error bound,
** quantiles, merge and subtract. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "os/os.h"
#include "stats/stats.h"
#include "sampler/sampler.h"
#include "source/source.h"
#include "test_util.h"

static void test_buckets_are_monotonic_and_tight(void **state) {
  (void)state;
  size_t prev = 0;
  for (uint64_t v = 0; v < (1ULL << 40); v = v < 64 ? v + 1 : v + v / 7) {
    size_t b = stoke__hist_bucket_of(v);
    assert_true(b >= prev);
    assert_true(b < STOKE__HIST_BUCKETS);
    prev = b;
    uint64_t mid = stoke__hist_bucket_mid(b);
    /* The midpoint stands for v within 1/64 (1.6%), exactly below 32. */
    if (v < 32) {
      assert_int_equal(mid, v);
    } else {
      double err = ((double)mid - (double)v) / (double)v;
      assert_true(err <= 1.0 / 64 + 1e-12);
      assert_true(err >= -1.0 / 64 - 1e-12);
    }
  }
  /* Beyond the last octave everything lands in the last bucket. */
  assert_int_equal(stoke__hist_bucket_of(UINT64_MAX), STOKE__HIST_BUCKETS - 1);
}

static void test_quantiles_of_uniform(void **state) {
  (void)state;
  stoke__hist *h = calloc(1, sizeof *h);
  for (uint64_t v = 1; v <= 10000; v++) stoke__hist_add(h, v * 1000);
  stoke__hist_snap *s = calloc(1, sizeof *s);
  stoke__hist_read(h, s);
  assert_int_equal(s->count, 10000);
  assert_int_equal(s->max, 10000000);
  stoke_dist d;
  stoke__hist_dist(s, &d);
  assert_int_equal(d.mean_ns, 5000500);
  /* Within the bucket error of the exact quantiles. */
  assert_in_range(d.p50_ns, 5000000 * 0.984, 5000000 * 1.016);
  assert_in_range(d.p95_ns, 9500000 * 0.984, 9500000 * 1.016);
  assert_in_range(d.p99_ns, 9900000 * 0.984, 9900000 * 1.016);
  assert_int_equal(d.max_ns, 10000000);
  free(h);
  free(s);
}

static void test_quantile_of_a_long_tail(void **state) {
  (void)state;
  stoke__hist *h = calloc(1, sizeof *h);
  /* 98 fast steps and 2 very slow ones: p50 fast, p99 slow. */
  for (int i = 0; i < 98; i++) stoke__hist_add(h, 1000);
  stoke__hist_add(h, 50000000);
  stoke__hist_add(h, 60000000);
  stoke__hist_snap *s = calloc(1, sizeof *s);
  stoke__hist_read(h, s);
  assert_int_equal(stoke__hist_quantile(s, 0.5), 1000);
  assert_true(stoke__hist_quantile(s, 0.99) >= 49000000);
  assert_int_equal(stoke__hist_quantile(s, 1.0), 60000000);
  free(h);
  free(s);
}

static void test_empty_and_subtract(void **state) {
  (void)state;
  stoke__hist *h = calloc(1, sizeof *h);
  stoke__hist_snap *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
  stoke_dist d;
  stoke__hist_dist(a, &d);
  assert_int_equal(d.count, 0);
  assert_int_equal(d.p99_ns, 0);
  for (int i = 0; i < 10; i++) stoke__hist_add(h, 100);
  stoke__hist_read(h, b); /* baseline: ten values of 100 */
  for (int i = 0; i < 5; i++) stoke__hist_add(h, 7000);
  stoke__hist_read(h, a);
  stoke__hist_sub(a, b);
  assert_int_equal(a->count, 5);
  assert_int_equal(a->sum, 35000);
  assert_in_range(stoke__hist_quantile(a, 0.5), 7000 * 0.984, 7000 * 1.016);
  free(h);
  free(a);
  free(b);
}

static void test_bucket_ranges_tile(void **state) {
  (void)state;
  uint64_t prev_hi = 0;
  for (size_t b = 0; b < STOKE__HIST_BUCKETS; b++) {
    uint64_t lo, hi;
    stoke__hist_bucket_range(b, &lo, &hi);
    assert_int_equal(lo, prev_hi); /* no gap, no overlap */
    assert_true(hi > lo);
    assert_int_equal(stoke__hist_bucket_of(lo), b);
    assert_int_equal(stoke__hist_bucket_of(hi - 1), b);
    uint64_t mid = stoke__hist_bucket_mid(b);
    assert_true(mid >= lo && mid < hi);
    prev_hi = hi;
  }
}

static void test_counter_add(void **state) {
  (void)state;
  atomic_uint_least64_t c;
  atomic_init(&c, 0);
  stoke__counter_add(&c, 5);
  stoke__counter_add(&c, 7);
  assert_int_equal(stoke__counter_get(&c), 12);
}

/* The rank of a quantile rounds up: p99 of fewer than 100 values (and p95
** of fewer than 20) is the largest value, so one slow step in a short run
** is seen.  Without the round-up, floor(0.99 * n) of n < 100 values
** stopped one short of it. */
static void test_quantile_rank_rounds_up(void **state) {
  (void)state;
  stoke__hist_snap *s = calloc(1, sizeof *s);
  for (uint64_t n = 2; n < 100; n++) {
    memset(s, 0, sizeof *s);
    for (uint64_t i = 0; i + 1 < n; i++) {
      s->bucket[stoke__hist_bucket_of(1000)]++;
      s->sum += 1000;
    }
    s->bucket[stoke__hist_bucket_of(50000000)]++;
    s->sum += 50000000;
    s->count = n;
    s->max = 50000000;
    uint64_t p99 = stoke__hist_quantile(s, 0.99);
    if (p99 < 49000000)
      fail_msg("p99 of %llu values (one of them 50 ms) is %llu ns",
               (unsigned long long)n, (unsigned long long)p99);
    if (n < 20 && stoke__hist_quantile(s, 0.95) < 49000000)
      fail_msg("p95 of %llu values misses the slow one",
               (unsigned long long)n);
    /* And the median stays fast: the rank is not simply the top. */
    assert_int_equal(stoke__hist_quantile(s, 0.5), 1000);
    stoke_dist d;
    stoke__hist_dist(s, &d);
    assert_true(d.p99_ns >= 49000000);
  }
  /* At exactly 100 values, the 99th is fast: ceil(99.0) = 99. */
  memset(s, 0, sizeof *s);
  s->bucket[stoke__hist_bucket_of(1000)] = 99;
  s->bucket[stoke__hist_bucket_of(50000000)] = 1;
  s->count = 100;
  s->max = 50000000;
  assert_int_equal(stoke__hist_quantile(s, 0.99), 1000);
  free(s);
}

/* stoke__hist_add_shared from several threads at once (the HTTP client's
** latencies): no add is lost, and the maximum is the largest value. */
#define SHARED_THREADS 4
#define SHARED_ADDS 20000

static void *add_many(void *arg) {
  stoke__hist *h = arg;
  for (uint64_t i = 1; i <= SHARED_ADDS; i++) stoke__hist_add_shared(h, i);
  return NULL;
}

static void test_shared_adds_from_threads(void **state) {
  (void)state;
  stoke__hist *h = calloc(1, sizeof *h);
  stoke__hist_snap *s = calloc(1, sizeof *s);
  assert_non_null(h);
  assert_non_null(s);
  pthread_t t[SHARED_THREADS];
  for (int i = 0; i < SHARED_THREADS; i++)
    assert_int_equal(pthread_create(&t[i], NULL, add_many, h), 0);
  for (int i = 0; i < SHARED_THREADS; i++) pthread_join(t[i], NULL);
  stoke__hist_read(h, s);
  assert_int_equal(s->count, SHARED_THREADS * SHARED_ADDS);
  uint64_t per = (uint64_t)SHARED_ADDS * (SHARED_ADDS + 1) / 2;
  assert_int_equal(s->sum, SHARED_THREADS * per);
  assert_int_equal(s->max, SHARED_ADDS);
  uint64_t in_buckets = 0;
  for (size_t b = 0; b < STOKE__HIST_BUCKETS; b++) in_buckets += s->bucket[b];
  assert_int_equal(in_buckets, s->count);
  free(s);
  free(h);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_buckets_are_monotonic_and_tight),
      cmocka_unit_test(test_quantiles_of_uniform),
      cmocka_unit_test(test_quantile_of_a_long_tail),
      cmocka_unit_test(test_quantile_rank_rounds_up),
      cmocka_unit_test(test_empty_and_subtract),
      cmocka_unit_test(test_bucket_ranges_tile),
      cmocka_unit_test(test_counter_add),
      cmocka_unit_test(test_shared_adds_from_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
