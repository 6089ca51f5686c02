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

/* The io_concurrency knee: the rule of stoke_tune_knee_find with the
** requests in flight as the cost, on hand-made points. */
static stoke_tune_point io_pt(unsigned io, double sps, int verdict) {
  stoke_tune_point p;
  memset(&p, 0, sizeof p);
  p.n_workers = 2;
  p.prefetch = 2;
  p.batch_size = 4;
  p.io_concurrency = io;
  p.status = STOKE_TUNE_MEASURED;
  p.samples_per_s = sps;
  p.verdict = verdict;
  return p;
}

static void test_io_knee(void **state) {
  (void)state;
  const int S = STOKE_VERDICT_STARVING, B = STOKE_VERDICT_BUSY;
  stoke_tune_knee k;
  /* Without a step: the fewest requests within 5% of the best (16). */
  stoke_tune_point a[] = {io_pt(1, 25, S), io_pt(2, 50, S), io_pt(4, 90, S),
                          io_pt(8, 170, S), io_pt(16, 236, S),
                          io_pt(32, 245, S), io_pt(64, 150, S)};
  assert_int_equal(stoke_tune_io_knee_find(a, 7, 0.05, 0, &k), 0);
  assert_int_equal(k.index, 4);
  assert_int_equal(k.best, 5);
  assert_int_equal(k.stall_removed, -1);
  assert_non_null(strstr(k.reason, "io_concurrency 16 (2 workers"));
  /* Exactly 95% is in: 8 at 95.0 of 100. */
  stoke_tune_point b[] = {io_pt(4, 80, S), io_pt(8, 95, S), io_pt(16, 100, S)};
  assert_int_equal(stoke_tune_io_knee_find(b, 3, 0.05, 0, &k), 0);
  assert_int_equal(k.index, 1);
  /* With a step: busy ones first, even when a starving one is cheaper
  ** and as fast. */
  stoke_tune_point c[] = {io_pt(2, 99, S), io_pt(4, 100, B), io_pt(8, 98, B)};
  assert_int_equal(stoke_tune_io_knee_find(c, 3, 0.05, 1, &k), 0);
  assert_int_equal(k.index, 1);
  assert_int_equal(k.stall_removed, 1);
  /* None busy: the cheapest of the fastest, stall not removed. */
  c[1].verdict = c[2].verdict = S;
  assert_int_equal(stoke_tune_io_knee_find(c, 3, 0.05, 1, &k), 0);
  assert_int_equal(k.index, 0);
  assert_int_equal(k.stall_removed, 0);
  /* Points of a local run (io_concurrency 0) and unmeasured ones are not
  ** candidates; none left is EINVAL. */
  stoke_tune_point d[] = {io_pt(0, 500, B), io_pt(4, 60, S), io_pt(8, 90, S)};
  d[2].status = STOKE_TUNE_PENDING;
  assert_int_equal(stoke_tune_io_knee_find(d, 3, 0.05, 1, &k), 0);
  assert_int_equal(k.index, 1);
  assert_int_equal(k.best, 1);
  d[1].io_concurrency = 0;
  assert_int_equal(stoke_tune_io_knee_find(d, 3, 0.05, 1, &k), STOKE_EINVAL);
  assert_int_equal(stoke_tune_io_knee_find(a, 7, 1.0, 0, &k), STOKE_EINVAL);
  assert_int_equal(stoke_tune_io_knee_find(NULL, 0, 0.05, 0, &k),
                   STOKE_EINVAL);
}

/* A source that reads nothing remotely while the loader runs (synthetic
** here; local or cached shards in use): the sweep measures its first
** point, says io_concurrency cannot matter, and stops; a bad config is
** refused before any source is made. */
static int made;

static int synthetic_at(void *user, unsigned io, stoke_source **out) {
  (void)user;
  (void)io;
  made++;
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.n_samples = 16;
  return stoke_source_create_synthetic(&sc, out);
}

static void test_io_sweep_not_remote(void **state) {
  (void)state;
  stoke_tune_config tc;
  stoke_tune_config_init(&tc);
  tc.base.batch_size = 4;
  stoke_tune_io_config c;
  stoke_tune_io_config_init(&c);
  c.tune = &tc;
  c.n_workers = 1;
  c.prefetch = 1;
  c.source = synthetic_at;
  assert_int_equal(stoke_tune_io_bound(&c), 7); /* 1, 2, ..., 64 */
  stoke_tune_point pts[7];
  size_t n = 99;
  made = 0;
  assert_int_equal(stoke_tune_io_sweep(&c, pts, 7, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(made, 1);
  assert_int_equal(pts[0].status, STOKE_TUNE_MEASURED);
  assert_int_equal(pts[0].io_concurrency, 0);
  assert_int_equal(pts[0].samples, 16);
  assert_non_null(strstr(pts[0].note, "io_concurrency cannot matter"));
  assert_int_equal(stoke_tune_io_sweep(&c, pts, 6, &n), STOKE_EINVAL);
  unsigned bad[] = {4, 65};
  c.values = bad;
  c.n_values = 2;
  assert_int_equal(stoke_tune_io_sweep(&c, pts, 7, &n), STOKE_EINVAL);
  assert_int_equal(stoke_tune_io_bound(&c), 0);
  c.values = NULL;
  c.prefetch = 0;
  assert_int_equal(stoke_tune_io_sweep(&c, pts, 7, &n), STOKE_EINVAL);
  c.prefetch = 1;
  c.source = NULL;
  assert_int_equal(stoke_tune_io_sweep(&c, pts, 7, &n), STOKE_EINVAL);
  assert_int_equal(made, 1);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_model_knee_to_one_worker),
      cmocka_unit_test(test_advice_is_the_knee),
      cmocka_unit_test(test_io_knee),
      cmocka_unit_test(test_io_sweep_not_remote),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
