/* test_tune_search.c — the adaptive sweep's rules against curves with a
** known answer: an oracle measures each point with the queue model of a
** hand-made "truth" (no clock, no loader), and the sweep's knee must match
** the exhaustive knee of the same truth to one worker, or be within 2% of
** its throughput (issue 13's bar for bench/knee.sh, checked exactly here).
** The oracle can also hand the sweep a model that is wrong by a share, so
** that the rules are checked against a model that errs as a real one does. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stoke.h"
#include "test_util.h"
#include "tune/tune.h"

#define MS 1000000LL

typedef struct truth {
  stoke_model m;      /* the truth at any W, K */
  int k1_waits;       /* the truth at prefetch 1 is 10% slower and waits
                         (a spread the model misses) */
  double model_bias;  /* the model handed to the sweep: t_d x (1 + bias) */
  unsigned calls;     /* points measured */
  unsigned max_w;     /* the most workers measured */
} truth;

static void fill_point(const stoke_model *m, stoke_tune_point *p) {
  stoke_tune_point q;
  assert_int_equal(stoke__tune_predicted_point(m, p->n_workers, p->prefetch,
                                               p->host_bytes, &q),
                   0);
  p->samples_per_s = q.samples_per_s;
  p->wait_ratio = q.wait_ratio;
  p->verdict = q.verdict;
  p->status = STOKE_TUNE_MEASURED;
  p->steps = 16;
  p->samples = 16 * p->batch_size;
}

static void fill_truth(const truth *t, stoke_tune_point *p) {
  fill_point(&t->m, p);
  if (t->k1_waits && p->prefetch == 1 && p->n_workers > 0) {
    p->samples_per_s *= 0.9;
    p->wait_ratio += 0.12;
    p->verdict = STOKE_VERDICT_STARVING;
  }
}

static int oracle_measure(void *user, const stoke_tune_config *c,
                          stoke_tune_point *p, stoke_model *m,
                          int *have_model) {
  (void)c;
  truth *t = user;
  assert_int_equal(p->status, STOKE_TUNE_PENDING);
  fill_truth(t, p);
  t->calls++;
  if (p->n_workers > t->max_w) t->max_w = p->n_workers;
  *m = t->m;
  m->n_workers = p->n_workers;
  m->prefetch = p->prefetch;
  m->t_d_ns = (int64_t)((double)m->t_d_ns * (1 + t->model_bias));
  m->t_io_ns = (int64_t)((double)m->t_io_ns * (1 + t->model_bias));
  m->t_cpu_ns = (int64_t)((double)m->t_cpu_ns * (1 + t->model_bias));
  *have_model = 1;
  return 0;
}

/* A truth of B samples of cpu + io ms each against a step of tc ms. */
static truth make_truth(size_t b, double cpu_ms, double io_ms, double tc_ms) {
  truth t;
  memset(&t, 0, sizeof t);
  t.m.struct_size = sizeof t.m;
  t.m.batch_size = b;
  t.m.cores = stoke__online_cpus();
  t.m.t_cpu_ns = (int64_t)(cpu_ms * MS);
  t.m.t_io_ns = (int64_t)(io_ms * MS);
  t.m.t_d_ns = t.m.t_cpu_ns + t.m.t_io_ns;
  t.m.stage_ns[STOKE_STAGE_READ] = t.m.t_d_ns;
  t.m.t_c_ns = (int64_t)(tc_ms * MS);
  t.m.chunk = 1;
  t.m.n_batches = 16;
  t.m.run_delay_frac = -1;
  t.m.n_workers = 1;
  t.m.prefetch = 1;
  return t;
}

static stoke_source *tensor_source(void) {
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = STOKE_SYNTH_TENSOR;
  sc.n_samples = 512;
  sc.ndim = 1;
  sc.shape[0] = 16;
  stoke_source *src = NULL;
  assert_int_equal(stoke_source_create_synthetic(&sc, &src), 0);
  return src;
}

static void dummy_step(void *user, stoke_batch *b) {
  (void)user;
  (void)b;
}

static void config(stoke_tune_config *tc, stoke_source *src, size_t b,
                   unsigned max_workers) {
  stoke_tune_config_init(tc);
  tc->base.source = src;
  tc->base.batch_size = b;
  tc->max_workers = max_workers;
  tc->step = dummy_step;
}

/* The exhaustive knee: every W in [0, top] x the default depths, measured
** by the truth, through the one knee rule. */
static stoke_tune_point exhaustive_knee(const truth *t,
                                        const stoke_tune_config *tc,
                                        unsigned top) {
  static const unsigned ks[] = {1, 2, 4};
  size_t n = (size_t)(top + 1) * 3;
  stoke_tune_point *all = calloc(n, sizeof *all);
  assert_non_null(all);
  for (unsigned w = 0; w <= top; w++)
    for (size_t j = 0; j < 3; j++) {
      stoke_tune_point *p = &all[w * 3 + j];
      p->n_workers = w;
      p->prefetch = ks[j];
      p->batch_size = t->m.batch_size;
      stoke_config lc = tc->base;
      lc.n_workers = w;
      lc.prefetch = ks[j];
      stoke_host_ledger g;
      g.struct_size = sizeof g;
      assert_int_equal(stoke_host_ledger_compute(&lc, &g), 0);
      p->host_bytes = g.total_bytes;
      fill_truth(t, p);
    }
  stoke_tune_knee k;
  assert_int_equal(stoke_tune_knee_find(all, n, STOKE_TUNE_TOLERANCE, 1, &k),
                   0);
  stoke_tune_point out = all[k.index];
  free(all);
  return out;
}

typedef struct swept {
  stoke_tune_point knee;
  size_t n, measured, skipped;
} swept;

static swept sweep(truth *t, const stoke_tune_config *tc,
                   stoke_tune_point *pts, size_t cap) {
  stoke__tune_oracle o = {oracle_measure, t};
  swept s;
  memset(&s, 0, sizeof s);
  assert_int_equal(stoke__tune_search(tc, &o, pts, cap, &s.n), 0);
  assert_true(s.n > 0 && s.n <= cap);
  for (size_t i = 0; i < s.n; i++) {
    s.measured += pts[i].status == STOKE_TUNE_MEASURED;
    if (pts[i].status == STOKE_TUNE_SKIPPED) {
      s.skipped++;
      /* A skip says why, with the model's number. */
      assert_non_null(strstr(pts[i].note, "model:"));
      assert_true(pts[i].predicted_samples_per_s > 0);
    } else {
      assert_true(pts[i].note[0] != '\0');
    }
  }
  if (getenv("SEARCH_DEBUG"))
    for (size_t i = 0; i < s.n; i++)
      fprintf(stderr, "  %zu: W %u K %u st %d %.1f/s wait %.3f v %d %s\n", i,
              pts[i].n_workers, pts[i].prefetch, pts[i].status,
              pts[i].samples_per_s, pts[i].wait_ratio, pts[i].verdict,
              pts[i].note);
  assert_int_equal(s.measured, t->calls);
  stoke_tune_knee k;
  assert_int_equal(
      stoke_tune_knee_find(pts, s.n, STOKE_TUNE_TOLERANCE, 1, &k), 0);
  s.knee = pts[k.index];
  return s;
}

/* Within one worker of the exhaustive knee, or within 2% of its
** throughput. */
static void assert_knee_matches(const stoke_tune_point *got,
                                const stoke_tune_point *want) {
  unsigned d = got->n_workers > want->n_workers
                   ? got->n_workers - want->n_workers
                   : want->n_workers - got->n_workers;
  if (d <= 1) return;
  double r = got->samples_per_s / want->samples_per_s;
  if (r < 0.98 || r > 1.02)
    fail_msg("knee at %u workers (%.1f samples/s), exhaustive knee at %u "
             "(%.1f samples/s)",
             got->n_workers, got->samples_per_s, want->n_workers,
             want->samples_per_s);
}

static void check_scenario_k1(double cpu_ms, double io_ms, double tc_ms,
                              double bias, int k1_waits, unsigned top,
                              swept *out, stoke_tune_point *ex_out) {
  stoke_source *src = tensor_source();
  stoke_tune_config tc;
  config(&tc, src, 32, top);
  truth t = make_truth(32, cpu_ms, io_ms, tc_ms);
  t.model_bias = bias;
  t.k1_waits = k1_waits;
  size_t cap = stoke__tune_search_bound(&tc);
  stoke_tune_point *pts = calloc(cap, sizeof *pts);
  assert_non_null(pts);
  swept s = sweep(&t, &tc, pts, cap);
  stoke_tune_point ex = exhaustive_knee(&t, &tc, top);
  assert_knee_matches(&s.knee, &ex);
  /* Far fewer points than the exhaustive sweep. */
  assert_true(s.measured < (size_t)(top + 1) * 3 / 2);
  if (out) *out = s;
  if (ex_out) *ex_out = ex;
  free(pts);
  stoke_source_destroy(src);
}

static void check_scenario(double cpu_ms, double io_ms, double tc_ms,
                           double bias, unsigned top, swept *out,
                           stoke_tune_point *ex_out) {
  check_scenario_k1(cpu_ms, io_ms, tc_ms, bias, 0, top, out, ex_out);
}

/* The model says deeper prefetch buys nothing, but the run at prefetch 1
** waits where the model predicted busy (a spread it missed, as in
** bench/knee.sh's mixed scenario): the deeper depths are measured, not
** skipped, and the knee is found at prefetch 2. */
static void test_model_blind_to_a_spread(void **state) {
  (void)state;
  swept s;
  stoke_tune_point ex;
  check_scenario_k1(0.3, 4, 8, 0, 1, 64, &s, &ex);
  assert_true(ex.prefetch > 1);
  assert_true(s.knee.prefetch > 1);
  /* No rung whose prefetch-1 run contradicted the model had its deeper
  ** depths skipped. */
  stoke_source *src = tensor_source();
  stoke_tune_config tc;
  config(&tc, src, 32, 64);
  truth t = make_truth(32, 0.3, 4, 8);
  t.k1_waits = 1;
  size_t cap = stoke__tune_search_bound(&tc);
  stoke_tune_point *pts = calloc(cap, sizeof *pts);
  assert_non_null(pts);
  s = sweep(&t, &tc, pts, cap);
  for (size_t i = 0; i < s.n; i++) {
    const stoke_tune_point *p = &pts[i];
    if (p->status != STOKE_TUNE_SKIPPED || p->prefetch == 1) continue;
    for (size_t j = 0; j < s.n; j++) {
      const stoke_tune_point *q = &pts[j];
      if (q->n_workers != p->n_workers || q->prefetch != 1 ||
          q->status != STOKE_TUNE_MEASURED)
        continue;
      stoke_tune_point pred;
      assert_int_equal(stoke__tune_predicted_point(&t.m, q->n_workers, 1, 0,
                                                   &pred), 0);
      if ((pred.verdict == STOKE_VERDICT_BUSY) !=
          (q->verdict == STOKE_VERDICT_BUSY))
        fail_msg("%u workers, prefetch %u skipped though the model missed "
                 "prefetch 1's verdict", p->n_workers, p->prefetch);
    }
  }
  free(pts);
  stoke_source_destroy(src);
}

/* Issue 13's defect: 32 samples of 5 ms of waiting against a 12 ms step
** need about 14 workers on any machine; the old ladder stopped at 8. */
static void test_waiting_follows_past_the_cores(void **state) {
  (void)state;
  swept s;
  stoke_tune_point ex;
  check_scenario(0.05, 5, 12, 0, 64, &s, &ex);
  assert_true(ex.n_workers >= 13 && ex.n_workers <= 16);
  assert_true(s.knee.n_workers >= 13 && s.knee.n_workers <= 16);
  assert_true(s.knee.verdict == STOKE_VERDICT_BUSY);
  /* The model skipped some points and said so. */
  assert_true(s.skipped > 0);
}

/* Further still: 64 x 10 ms of waiting against 5 ms needs ~128 workers. */
static void test_waiting_far_above(void **state) {
  (void)state;
  swept s;
  stoke_tune_point ex;
  check_scenario(0.02, 10, 5, 0, 256, &s, &ex);
  assert_true(ex.n_workers >= 60);
  assert_true(s.knee.n_workers >= 60);
}

/* A CPU-bound stage stops near the cores: no ladder to the top. */
static void test_cpu_bound_stops_at_the_cores(void **state) {
  (void)state;
  stoke_source *src = tensor_source();
  stoke_tune_config tc;
  config(&tc, src, 32, 0); /* the top: STOKE_TUNE_MAX_WORKERS */
  truth t = make_truth(32, 2, 0.01, 1);
  size_t cap = stoke__tune_search_bound(&tc);
  stoke_tune_point *pts = calloc(cap, sizeof *pts);
  assert_non_null(pts);
  swept s = sweep(&t, &tc, pts, cap);
  unsigned cores = stoke__online_cpus();
  assert_true(t.max_w <= 4 * cores);
  stoke_tune_point ex = exhaustive_knee(&t, &tc, 4 * cores);
  assert_knee_matches(&s.knee, &ex);
  free(pts);
  stoke_source_destroy(src);
}

/* Mixed: a CPU-burning decode and a waiting read. */
static void test_mixed(void **state) {
  (void)state;
  check_scenario(0.3, 4, 8, 0, 128, NULL, NULL);
}

/* A model 15% wrong either way still finds the knee: the bisection
** measures, the model only guides and skips what is far off. */
static void test_model_error(void **state) {
  (void)state;
  check_scenario(0.05, 5, 12, 0.15, 64, NULL, NULL);
  check_scenario(0.05, 5, 12, -0.15, 64, NULL, NULL);
  check_scenario(0.3, 4, 8, 0.15, 128, NULL, NULL);
}

/* The memory budget caps the ladder: no point over it runs. */
static void test_memory_caps_the_ladder(void **state) {
  (void)state;
  stoke_source *src = tensor_source();
  stoke_tune_config tc;
  config(&tc, src, 32, 64);
  stoke_config lc = tc.base;
  lc.n_workers = 6;
  lc.prefetch = 1;
  stoke_host_ledger g;
  g.struct_size = sizeof g;
  assert_int_equal(stoke_host_ledger_compute(&lc, &g), 0);
  tc.base.mem_budget_bytes = g.total_bytes;
  truth t = make_truth(32, 0.05, 5, 12);
  size_t cap = stoke__tune_search_bound(&tc);
  stoke_tune_point *pts = calloc(cap, sizeof *pts);
  assert_non_null(pts);
  swept s = sweep(&t, &tc, pts, cap);
  assert_true(t.max_w <= 6);
  for (size_t i = 0; i < s.n; i++)
    if (pts[i].status == STOKE_TUNE_MEASURED)
      assert_true(pts[i].host_bytes <= tc.base.mem_budget_bytes);
  /* The rung at the memory top was measured: 6 workers. */
  assert_int_equal(t.max_w, 6);
  free(pts);
  stoke_source_destroy(src);
}

/* Progress may stop it; the points before stay recorded. */
static int stop_at_3(void *user, size_t i, size_t n,
                     const stoke_tune_point *p) {
  (void)user;
  (void)n;
  return p->status != STOKE_TUNE_PENDING && i == 2;
}

static void test_progress_stops(void **state) {
  (void)state;
  stoke_source *src = tensor_source();
  stoke_tune_config tc;
  config(&tc, src, 32, 64);
  tc.progress = stop_at_3;
  truth t = make_truth(32, 0.05, 5, 12);
  size_t cap = stoke__tune_search_bound(&tc);
  stoke_tune_point *pts = calloc(cap, sizeof *pts);
  assert_non_null(pts);
  stoke__tune_oracle o = {oracle_measure, &t};
  size_t n = 0;
  assert_int_equal(stoke__tune_search(&tc, &o, pts, cap, &n), 0);
  assert_int_equal(n, 3);
  free(pts);
  stoke_source_destroy(src);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_waiting_follows_past_the_cores),
      cmocka_unit_test(test_waiting_far_above),
      cmocka_unit_test(test_cpu_bound_stops_at_the_cores),
      cmocka_unit_test(test_mixed),
      cmocka_unit_test(test_model_error),
      cmocka_unit_test(test_model_blind_to_a_spread),
      cmocka_unit_test(test_memory_caps_the_ladder),
      cmocka_unit_test(test_progress_stops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
