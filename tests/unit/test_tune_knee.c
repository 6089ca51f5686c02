/* test_tune_knee.c — one definition of the knee (src/model/knee.h): the
** model's knee to one worker equals the knee of every W predicted, and the
** doctor's advice proposes exactly that knee, so that advice and stoke
** tune, which share stoke_tune_knee_find and its tolerance, cannot
** contradict each other (issue 13: "-j 1 is enough" next to a tune that
** chose -j 2).  Arithmetic only: no clock. */
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
#include "model/knee.h"

#define MS 1000000LL

static stoke_model model(size_t b, double cpu_ms, double io_ms, double tc_ms,
                         double sigma) {
  stoke_model m;
  memset(&m, 0, sizeof m);
  m.struct_size = sizeof m;
  m.batch_size = b;
  m.cores = 2;
  m.t_cpu_ns = (int64_t)(cpu_ms * MS);
  m.t_io_ns = (int64_t)(io_ms * MS);
  m.t_d_ns = m.t_cpu_ns + m.t_io_ns;
  m.stage_ns[STOKE_STAGE_READ] = m.t_d_ns;
  m.t_c_ns = (int64_t)(tc_ms * MS);
  m.sigma = sigma;
  m.chunk = 1;
  m.n_batches = 16;
  m.run_delay_frac = -1;
  m.n_workers = 1;
  m.prefetch = 2;
  return m;
}

/* The knee of every W in [1, top], predicted. */
static unsigned exhaustive(const stoke_model *m, unsigned k, unsigned top) {
  stoke_tune_point *p = calloc(top, sizeof *p);
  assert_non_null(p);
  for (unsigned w = 1; w <= top; w++)
    assert_int_equal(stoke__tune_predicted_point(m, w, k, 0, &p[w - 1]), 0);
  stoke_tune_knee kn;
  assert_int_equal(
      stoke_tune_knee_find(p, top, STOKE_TUNE_TOLERANCE, 1, &kn), 0);
  unsigned w = p[kn.index].n_workers;
  free(p);
  return w;
}

static void test_model_knee_to_one_worker(void **state) {
  (void)state;
  const struct {
    size_t b;
    double cpu, io, tc, sigma;
  } cases[] = {
      {32, 0.05, 5, 12, 0},  /* waiting: ~14 workers */
      {8, 0.1, 0.9, 2, 0},   /* waiting: ~4-5 */
      {16, 0.3, 4, 8, 0},    /* mixed */
      {32, 2, 0.01, 1, 0},   /* CPU-bound on 2 cores */
      {16, 0.05, 3, 5, 0.8}, /* waiting with a spread */
      {64, 0.02, 10, 5, 0},  /* waiting far above the cores */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    stoke_model m = model(cases[i].b, cases[i].cpu, cases[i].io, cases[i].tc,
                          cases[i].sigma);
    for (unsigned k = 1; k <= 4; k *= 2) {
      stoke_tune_point q;
      stoke_tune_knee kn;
      assert_int_equal(stoke_tune_knee_model(&m, k, 1, 200,
                                              STOKE_TUNE_TOLERANCE, &q, &kn),
                       0);
      unsigned want = exhaustive(&m, k, 200);
      if (q.n_workers != want)
        fail_msg("case %zu, prefetch %u: model knee %u, exhaustive %u", i, k,
                 q.n_workers, want);
      assert_true(kn.reason[0] != '\0');
    }
  }
  stoke_tune_point q;
  stoke_model m = model(8, 0, 1, 2, 0);
  assert_int_equal(
      stoke_tune_knee_model(&m, 1, 5, 4, STOKE_TUNE_TOLERANCE, &q, NULL),
      STOKE_EINVAL);
  assert_int_equal(
      stoke_tune_knee_model(NULL, 1, 1, 4, STOKE_TUNE_TOLERANCE, &q, NULL),
      STOKE_EINVAL);
}

#define snap tu_snap

/* The workers advice of a snapshot: its n_workers, or 0 when none. */
static unsigned advised_workers(const stoke_stats *st, int kind) {
  stoke_advice a[STOKE_MAX_ADVICE];
  size_t n = 0;
  assert_int_equal(stoke_advise(st, NULL, 2, a, STOKE_MAX_ADVICE, &n), 0);
  for (size_t i = 0; i < n; i++)
    if (a[i].kind == kind) return a[i].n_workers;
  return 0;
}

static unsigned knee_of_snapshot(const stoke_stats *st) {
  stoke_model m;
  assert_int_equal(stoke_model_init(&m, st, NULL, 2), 0);
  stoke_tune_point q;
  assert_int_equal(stoke_tune_knee_model(&m, st->prefetch, 1, 16,
                                          STOKE_TUNE_TOLERANCE, &q, NULL),
                   0);
  return q.n_workers;
}

/* Advice proposes the knee itself, to one worker: a starving run is told
** "-j <knee>", a busy run with more workers "-j <knee> is enough".  With
** the advice's old ladder of 1, 2, 3, 4, 6, 8, ... and its own 5%-of-the-
** step rule, the waiting cases whose knee is 5 or 7 were told 6 or 8. */
static void test_advice_is_the_knee(void **state) {
  (void)state;
  size_t odd = 0;
  for (int64_t td = 700 * 1000; td <= 1900 * 1000; td += 150 * 1000) {
    /* Starving at one worker: 8 samples of td waiting against 1 ms. */
    stoke_stats st = snap(1, 2, td, 0.02, 1 * MS, 0.6, 0.9);
    unsigned want = knee_of_snapshot(&st);
    unsigned got = advised_workers(&st, STOKE_ADVICE_WORKERS);
    if (want > 1 && got != want)
      fail_msg("t_d %.2f ms: advice -j %u, the knee %u", (double)td / MS, got,
               want);
    odd += want == 5 || want == 7;
    /* Busy with 16 workers: "-j <knee> is enough". */
    stoke_stats busy = snap(16, 2, td, 0.02, 1 * MS, 0.01, 0.05);
    want = knee_of_snapshot(&busy);
    got = advised_workers(&busy, STOKE_ADVICE_FEWER);
    if (want < 16 && got != want)
      fail_msg("busy, t_d %.2f ms: advice -j %u is enough, the knee %u",
               (double)td / MS, got, want);
  }
  assert_true(odd > 0); /* the grid reaches knees the old ladder skipped */
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_model_knee_to_one_worker),
      cmocka_unit_test(test_advice_is_the_knee),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
