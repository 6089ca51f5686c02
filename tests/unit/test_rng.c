/* test_rng.c — the counter-based random streams.
**
** Every statistical check runs on fixed seeds, so it is deterministic: a
** bound either holds for this implementation or it never does.  The bounds
** are generous (many standard deviations) so that a correct generator passes
** whatever its exact bits.
*/
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "test_util.h"

static void test_same_stream_same_values(void **state) {
  (void)state;
  const uint64_t keys[][3] = {{0, 0, 0}, {1, 2, 3}, {UINT64_MAX, 7, 9},
                              {42, UINT64_MAX, UINT64_MAX}};
  for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
    stoke_rng a, b;
    stoke_rng_init(&a, keys[k][0], keys[k][1], keys[k][2]);
    stoke_rng_init(&b, keys[k][0], keys[k][1], keys[k][2]);
    uint64_t first = 0;
    int varies = 0;
    for (int i = 0; i < 1000; i++) {
      uint64_t x = stoke_rng_u64(&a), y = stoke_rng_u64(&b);
      TU_CHECK(x == y, "stream %zu draw %d: %llx != %llx", k, i,
               (unsigned long long)x, (unsigned long long)y);
      if (i == 0) first = x;
      else if (x != first) varies = 1;
    }
    TU_CHECK(varies, "stream %zu is constant", k);
  }
  /* A copy of the state continues identically (the layout is a value). */
  stoke_rng a, c;
  stoke_rng_init(&a, 5, 6, 7);
  for (int i = 0; i < 10; i++) (void)stoke_rng_u64(&a);
  c = a;
  for (int i = 0; i < 100; i++)
    assert_true(stoke_rng_u64(&a) == stoke_rng_u64(&c));
  /* Re-initialising restarts the stream. */
  stoke_rng_init(&a, 5, 6, 7);
  stoke_rng_init(&c, 5, 6, 7);
  uint64_t x0 = stoke_rng_u64(&a);
  (void)stoke_rng_u64(&a);
  stoke_rng_init(&a, 5, 6, 7);
  assert_true(stoke_rng_u64(&a) == x0);
  assert_true(stoke_rng_u64(&c) == x0);
}

/* Streams that differ in any of (seed, a, b), or with a and b swapped, share
** none of their first values. */
static void test_streams_differ(void **state) {
  (void)state;
  enum { S = 10, D = 64 };
  const uint64_t keys[S][3] = {
      {1, 2, 3}, {2, 2, 3}, {1, 3, 3}, {1, 2, 4},   {1, 3, 2},
      {0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {1, 0, 0},   {(uint64_t)1 << 32, 0, 0},
  };
  static uint64_t v[S][D];
  for (int s = 0; s < S; s++) {
    stoke_rng r;
    stoke_rng_init(&r, keys[s][0], keys[s][1], keys[s][2]);
    for (int i = 0; i < D; i++) v[s][i] = stoke_rng_u64(&r);
  }
  for (int s = 0; s < S; s++)
    for (int t = 0; t < S; t++)
      for (int i = 0; i < D; i++)
        for (int j = 0; j < D; j++) {
          if (s == t && i == j) continue;
          TU_CHECK(v[s][i] != v[t][j],
                   "stream %d draw %d equals stream %d draw %d", s, i, t, j);
        }
  /* Neighbouring sample streams of one epoch (the loader's use). */
  stoke_rng r0, r1;
  int same = 0;
  for (uint64_t idx = 0; idx < 1000; idx++) {
    stoke_rng_init(&r0, 9, 1, idx);
    stoke_rng_init(&r1, 9, 1, idx + 1);
    if (stoke_rng_u64(&r0) == stoke_rng_u64(&r1)) same++;
  }
  assert_int_equal(same, 0);
}

/* Each bit is set about half the time (n = 20000: sd of the share 0.0035). */
static void test_bits_balanced(void **state) {
  (void)state;
  enum { N = 20000 };
  unsigned ones[64] = {0};
  stoke_rng r;
  stoke_rng_init(&r, 123, 0, 0);
  for (int i = 0; i < N; i++) {
    uint64_t x = stoke_rng_u64(&r);
    for (int b = 0; b < 64; b++) ones[b] += (x >> b) & 1;
  }
  for (int b = 0; b < 64; b++)
    TU_CHECK(ones[b] > N * 0.46 && ones[b] < N * 0.54,
             "bit %d set in %u of %d draws", b, ones[b], N);
  /* Also across streams: the first value of stream (seed, epoch, i). */
  memset(ones, 0, sizeof ones);
  for (int i = 0; i < N; i++) {
    stoke_rng_init(&r, 0, 0, (uint64_t)i);
    uint64_t x = stoke_rng_u64(&r);
    for (int b = 0; b < 64; b++) ones[b] += (x >> b) & 1;
  }
  for (int b = 0; b < 64; b++)
    TU_CHECK(ones[b] > N * 0.46 && ones[b] < N * 0.54,
             "first draws of streams 0..N: bit %d set in %u", b, ones[b]);
}

static void test_uniform(void **state) {
  (void)state;
  enum { N = 100000, BINS = 20 };
  stoke_rng r;
  stoke_rng_init(&r, 7, 7, 7);
  double sum = 0, lo = 1, hi = 0;
  unsigned bins[BINS] = {0};
  for (int i = 0; i < N; i++) {
    double u = stoke_rng_uniform(&r);
    TU_CHECK(u >= 0.0 && u < 1.0, "uniform draw %d = %.17g", i, u);
    sum += u;
    if (u < lo) lo = u;
    if (u > hi) hi = u;
    bins[(int)(u * BINS)]++;
  }
  /* mean: sd = 0.29/sqrt(N) = 0.0009 */
  TU_CHECK(fabs(sum / N - 0.5) < 0.01, "mean %f", sum / N);
  TU_CHECK(lo < 0.001 && hi > 0.999, "range [%g, %g]", lo, hi);
  double chi = 0, exp_n = (double)N / BINS;
  for (int b = 0; b < BINS; b++)
    chi += (bins[b] - exp_n) * (bins[b] - exp_n) / exp_n;
  /* 19 degrees of freedom: mean 19, sd 6.2; 80 is far out of reach. */
  TU_CHECK(chi < 80, "chi-square %f over %d bins", chi, BINS);
  /* 53 bits: low bits of the mantissa vary too (not e.g. 32-bit floats). */
  int fine = 0;
  for (int i = 0; i < 1000; i++) {
    double u = stoke_rng_uniform(&r);
    double scaled = u * 4294967296.0; /* 2^32 */
    if (scaled != floor(scaled)) fine = 1;
  }
  TU_CHECK(fine, "uniform values have no bits below 2^-32");
}

static void test_below(void **state) {
  (void)state;
  stoke_rng r;
  stoke_rng_init(&r, 99, 0, 1);
  for (int i = 0; i < 1000; i++) assert_true(stoke_rng_below(&r, 1) == 0);

  const uint64_t ns[] = {2,      3,       10,       1000, 1u << 31,
                         3000000007ull, (uint64_t)1 << 63, UINT64_MAX};
  for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
    uint64_t most = 0;
    for (int i = 0; i < 20000; i++) {
      uint64_t x = stoke_rng_below(&r, ns[k]);
      TU_CHECK(x < ns[k], "below(%llu) gave %llu", (unsigned long long)ns[k],
               (unsigned long long)x);
      if (x > most) most = x;
    }
    /* The top half of the range is reached (it is not stuck low). */
    TU_CHECK(most >= ns[k] / 2, "below(%llu): max %llu",
             (unsigned long long)ns[k], (unsigned long long)most);
  }

  /* Roughly uniform: chi-square on 10 and 7 (7 does not divide 2^64). */
  const uint64_t cells[] = {10, 7};
  for (size_t k = 0; k < 2; k++) {
    enum { N = 100000 };
    unsigned cnt[10] = {0};
    for (int i = 0; i < N; i++) cnt[stoke_rng_below(&r, cells[k])]++;
    double e = (double)N / (double)cells[k], chi = 0;
    for (uint64_t c = 0; c < cells[k]; c++)
      chi += (cnt[c] - e) * (cnt[c] - e) / e;
    /* df <= 9: mean 9, sd 4.2; 50 is > 9 sd. */
    TU_CHECK(chi < 50, "below(%llu): chi-square %f",
             (unsigned long long)cells[k], chi);
  }

  /* Unbiased for n close to 2^64: with n = 3 * 2^62, naive modulo would put
  ** half of the draws in [0, 2^62); rejection puts a third there. */
  {
    uint64_t n = 3ull << 62, low = 0;
    enum { N = 30000 };
    for (int i = 0; i < N; i++)
      if (stoke_rng_below(&r, n) < (1ull << 62)) low++;
    TU_CHECK(fabs((double)low / N - 1.0 / 3.0) < 0.03,
             "below(3*2^62): share of [0, 2^62) is %f, want 1/3 (modulo "
             "bias gives 1/2)",
             (double)low / N);
  }
}

static void test_normal(void **state) {
  (void)state;
  enum { N = 100000 };
  stoke_rng r;
  stoke_rng_init(&r, 2024, 3, 4);
  double sum = 0, sq = 0, m4 = 0;
  unsigned beyond2 = 0, neg = 0;
  for (int i = 0; i < N; i++) {
    double z = stoke_rng_normal(&r);
    TU_CHECK(isfinite(z), "normal draw %d not finite", i);
    sum += z;
    sq += z * z;
    m4 += z * z * z * z;
    if (fabs(z) > 2) beyond2++;
    if (z < 0) neg++;
  }
  double mean = sum / N, var = sq / N - mean * mean;
  /* sd(mean) = 0.003, sd(var) = 0.0045 */
  TU_CHECK(fabs(mean) < 0.03, "normal mean %f", mean);
  TU_CHECK(fabs(var - 1) < 0.05, "normal variance %f", var);
  TU_CHECK(fabs(m4 / N - 3) < 0.3, "normal fourth moment %f (want 3)",
           m4 / N);
  /* P(|z| > 2) = 0.0455 */
  TU_CHECK(fabs((double)beyond2 / N - 0.0455) < 0.006, "P(|z|>2) = %f",
           (double)beyond2 / N);
  TU_CHECK(fabs((double)neg / N - 0.5) < 0.01, "P(z<0) = %f",
           (double)neg / N);
  /* Deterministic too. */
  stoke_rng a, b;
  stoke_rng_init(&a, 1, 1, 1);
  stoke_rng_init(&b, 1, 1, 1);
  for (int i = 0; i < 100; i++)
    assert_true(stoke_rng_normal(&a) == stoke_rng_normal(&b));
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_stream_same_values),
      cmocka_unit_test(test_streams_differ),
      cmocka_unit_test(test_bits_balanced),
      cmocka_unit_test(test_uniform),
      cmocka_unit_test(test_below),
      cmocka_unit_test(test_normal),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
