/* test_model_shape.c — the queue model draws per-sample costs from their
** measured shape (stoke_model.cost_q), so that rare, very long samples are
** predicted as the long waits they cause.
**
** The reference is an independent Monte Carlo in this file of the same
** loader with the true costs (2% of the samples 40x the rest): with at
** least as many workers as samples in flight and waiting samples, batch j
** is done the longest of its samples after its slot frees (batch j - S
** released, S = K + 1 slots), and the consumer takes the batches in order,
** each t_c.  The lognormal of the mean/median ratio, which the model used
** before, predicted the step 30% short on the truth grid. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "stoke.h"
#include "test_util.h"

#define MS 1000000.0
#define B 8
#define RARE_FRAC 0.02
#define RARE_FACTOR 40.0

/* Base cost so that the mean is 1 ms. */
static double base_ns(void) {
  return MS / (1.0 - RARE_FRAC + RARE_FRAC * RARE_FACTOR);
}

/* Mean step of the loader above with the true mixture, by Monte Carlo. */
static double reference_step(unsigned k, double tc) {
  enum { BATCHES = 20000, S_MAX = 16 };
  double release[S_MAX] = {0};
  unsigned s = k + 1;
  stoke_rng rng;
  stoke_rng_init(&rng, 12345, 0, 0);
  double free_at = 0, first = 0;
  for (int j = 0; j < BATCHES; j++) {
    double start = j >= (int)s ? release[j % s] : 0;
    double longest = 0;
    for (int i = 0; i < B; i++) {
      double c = stoke_rng_uniform(&rng) < RARE_FRAC ? RARE_FACTOR * base_ns()
                                                     : base_ns();
      if (c > longest) longest = c;
    }
    double done = start + longest;
    double got = done > free_at ? done : free_at;
    free_at = got + tc;
    release[j % s] = free_at;
    if (j == 100) first = free_at; /* past the start-up */
  }
  return (free_at - first) / (BATCHES - 101);
}

/* The snapshot of such a run: sleeping samples (no CPU), W workers, B = 8,
** the read stage's distribution as the log buckets would give it. */
static stoke_stats rare_snapshot(unsigned w, unsigned k, double tc) {
  stoke_stats st = tu_snap(w, k, (int64_t)MS, 0.0, (int64_t)tc, 0.3, 0.2);
  stoke_dist *r = &st.stage[STOKE_STAGE_READ];
  r->p50_ns = r->p95_ns = (int64_t)base_ns();
  r->p99_ns = r->max_ns = (int64_t)(RARE_FACTOR * base_ns());
  return st;
}

static void shape_is_the_measured_quantiles(void **state) {
  (void)state;
  stoke_stats st = rare_snapshot(8, 2, 2 * MS);
  stoke_model m;
  assert_int_equal(stoke_model_init(&m, &st, NULL, 2), 0);
  double b = base_ns() / MS;
  TU_CHECK(fabs(m.cost_q[0] - b) < 1e-3 && fabs(m.cost_q[1] - b) < 1e-3,
           "p50, p95 over the mean %.4f %.4f, want %.4f", m.cost_q[0],
           m.cost_q[1], b);
  TU_CHECK(fabs(m.cost_q[2] - RARE_FACTOR * b) < 1e-2 &&
               fabs(m.cost_q[3] - RARE_FACTOR * b) < 1e-2,
           "p99, max over the mean %.3f %.3f, want %.3f", m.cost_q[2],
           m.cost_q[3], RARE_FACTOR * b);
  /* A fixed cost has no shape. */
  stoke_stats f = tu_snap(8, 2, (int64_t)MS, 0.0, (int64_t)(2 * MS), 0, 0);
  assert_int_equal(stoke_model_init(&m, &f, NULL, 2), 0);
  for (int i = 0; i < 4; i++)
    TU_CHECK(m.cost_q[i] == 0, "fixed cost: cost_q[%d] = %f", i, m.cost_q[i]);
}

static void rare_long_samples_predicted_from_their_shape(void **state) {
  (void)state;
  const unsigned ks[] = {1, 2, 4};
  const double tcs[] = {1 * MS, 2 * MS, 4 * MS};
  for (size_t a = 0; a < 3; a++)
    for (size_t c = 0; c < 3; c++) {
      unsigned k = ks[a];
      double tc = tcs[c];
      stoke_stats st = rare_snapshot(16, k, tc);
      stoke_model m;
      assert_int_equal(stoke_model_init(&m, &st, NULL, 2), 0);
      m.n_batches = 16;
      stoke_prediction shape, logn;
      assert_int_equal(stoke_predict_step(&m, 16, k, &shape), 0);
      stoke_model l = m;
      memset(l.cost_q, 0, sizeof l.cost_q);
      assert_int_equal(stoke_predict_step(&l, 16, k, &logn), 0);
      double ref = reference_step(k, tc);
      double e_shape = (double)shape.step_ns / ref - 1;
      double e_logn = (double)logn.step_ns / ref - 1;
      print_message("K %u t_c %.0f ms: reference %.3f ms, shape %.3f ms "
                    "(%+.1f%%), lognormal %.3f ms (%+.1f%%)\n",
                    k, tc / MS, ref / MS, (double)shape.step_ns / MS,
                    100 * e_shape, (double)logn.step_ns / MS, 100 * e_logn);
      TU_CHECK(fabs(e_shape) <= 0.15,
               "K %u t_c %.0f ms: shape predicts %.3f ms, the reference "
               "%.3f ms", k, tc / MS, (double)shape.step_ns / MS, ref / MS);
      TU_CHECK(fabs(e_shape) < fabs(e_logn),
               "K %u t_c %.0f ms: the shape (%+.1f%%) is no nearer than the "
               "lognormal (%+.1f%%)", k, tc / MS, 100 * e_shape,
               100 * e_logn);
    }
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(shape_is_the_measured_quantiles),
      cmocka_unit_test(rare_long_samples_predicted_from_their_shape),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
