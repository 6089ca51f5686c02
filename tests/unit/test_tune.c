/* test_tune.c — the knee on hand-made tables, the device and host ledgers,
** the sweep grid and a tiny sweep with its stop rules. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "stoke.h"
#include "test_util.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static stoke_tune_point pt(unsigned w, unsigned k, uint64_t bytes, double tp,
                           int verdict) {
  stoke_tune_point p;
  memset(&p, 0, sizeof p);
  p.n_workers = w;
  p.prefetch = k;
  p.batch_size = 32;
  p.host_bytes = bytes;
  p.samples_per_s = tp;
  p.verdict = verdict;
  p.status = STOKE_TUNE_MEASURED;
  return p;
}

enum { B = STOKE_VERDICT_BUSY, S = STOKE_VERDICT_STARVING,
       V = STOKE_VERDICT_VARIANCE };

static size_t knee_of(const stoke_tune_point *p, size_t n, int consumer,
                      stoke_tune_knee *k) {
  assert_int_equal(stoke_tune_knee_find(p, n, STOKE_TUNE_TOLERANCE, consumer,
                                        k), 0);
  return k->index;
}

static void test_knee_plateau(void **state) {
  (void)state;
  /* Throughput saturates at 4 workers: 8 is 1% faster but not cheaper. */
  stoke_tune_point p[] = {pt(0, 2, 100, 200, S),  pt(1, 2, 110, 390, S),
                          pt(2, 2, 120, 760, S),  pt(4, 2, 140, 990, B),
                          pt(8, 2, 180, 1000, B)};
  stoke_tune_knee k;
  assert_int_equal(knee_of(p, N_OF(p), 1, &k), 3);
  assert_int_equal(k.best, 4);
  assert_int_equal(k.stall_removed, 1);
  assert_non_null(strstr(k.reason, "4 workers"));
}

static void test_knee_five_percent_rule(void **state) {
  (void)state;
  /* Exactly 95% of the best is in; just under is out. */
  stoke_tune_point in[] = {pt(2, 1, 100, 950, B), pt(4, 1, 100, 1000, B)};
  stoke_tune_knee k;
  assert_int_equal(knee_of(in, N_OF(in), 1, &k), 0);
  stoke_tune_point out[] = {pt(2, 1, 100, 949, B), pt(4, 1, 100, 1000, B)};
  assert_int_equal(knee_of(out, N_OF(out), 1, &k), 1);
  /* Tolerance 0: only the best itself. */
  assert_int_equal(stoke_tune_knee_find(in, N_OF(in), 0.0, 1, &k), 0);
  assert_int_equal(k.index, 1);
}

static void test_knee_non_monotonic(void **state) {
  (void)state;
  /* A dip at 4 workers (oversubscription) and a recovery at 8: the knee is
  ** the cheapest point as good as the best, wherever it sits. */
  stoke_tune_point p[] = {pt(0, 2, 100, 100, S), pt(1, 2, 100, 180, S),
                          pt(2, 2, 100, 300, B), pt(4, 2, 100, 240, V),
                          pt(8, 2, 100, 310, B)};
  stoke_tune_knee k;
  assert_int_equal(knee_of(p, N_OF(p), 1, &k), 2);
  assert_int_equal(k.best, 4);
}

static void test_knee_memory_tie_break(void **state) {
  (void)state;
  /* Same workers, all as fast: the one with the least host memory. */
  stoke_tune_point p[] = {pt(4, 4, 400, 1000, B), pt(4, 1, 100, 990, B),
                          pt(4, 2, 200, 1000, B)};
  stoke_tune_knee k;
  assert_int_equal(knee_of(p, N_OF(p), 1, &k), 1);
  assert_int_equal(k.best, 0); /* the first of the equally fastest */
}

static void test_knee_ties(void **state) {
  (void)state;
  /* Same workers and memory: the faster; a full tie: the earlier. */
  stoke_tune_point p[] = {pt(2, 2, 100, 980, B), pt(2, 2, 100, 1000, B)};
  stoke_tune_knee k;
  assert_int_equal(knee_of(p, N_OF(p), 1, &k), 1);
  stoke_tune_point q[] = {pt(2, 2, 100, 1000, B), pt(2, 2, 100, 1000, B)};
  assert_int_equal(knee_of(q, N_OF(q), 1, &k), 0);
  /* Fewer workers beats less memory. */
  stoke_tune_point r[] = {pt(4, 1, 100, 1000, B), pt(2, 4, 300, 1000, B)};
  assert_int_equal(knee_of(r, N_OF(r), 1, &k), 1);
}

static void test_knee_busy_preferred(void **state) {
  (void)state;
  /* 2 workers is within 5% but still waits 15% of the step: with a
  ** consumer the busy 4 workers win; without one, the cheaper 2. */
  stoke_tune_point p[] = {pt(2, 2, 100, 960, V), pt(4, 2, 100, 1000, B)};
  stoke_tune_knee k;
  assert_int_equal(knee_of(p, N_OF(p), 1, &k), 1);
  assert_int_equal(k.stall_removed, 1);
  assert_int_equal(knee_of(p, N_OF(p), 0, &k), 0);
  assert_int_equal(k.stall_removed, -1);
}

static void test_knee_no_point_busy(void **state) {
  (void)state;
  /* Nothing removes the stall: the best achievable, cheapest first.  A busy
  ** point far below the best does not count. */
  stoke_tune_point p[] = {pt(0, 2, 100, 300, B), pt(2, 2, 100, 800, S),
                          pt(4, 2, 100, 990, S), pt(8, 2, 100, 1000, S)};
  stoke_tune_knee k;
  assert_int_equal(knee_of(p, N_OF(p), 1, &k), 2);
  assert_int_equal(k.stall_removed, 0);
  assert_non_null(strstr(k.reason, "stall"));
}

static void test_knee_ignores_unmeasured(void **state) {
  (void)state;
  stoke_tune_point p[] = {pt(0, 1, 100, 5000, B), pt(2, 1, 100, 900, B),
                          pt(4, 1, 100, 1000, B)};
  p[0].status = STOKE_TUNE_OVER_BUDGET;
  stoke_tune_knee k;
  assert_int_equal(knee_of(p, N_OF(p), 1, &k), 2);
  p[1].status = p[2].status = STOKE_TUNE_PENDING;
  assert_int_equal(stoke_tune_knee_find(p, N_OF(p), 0.05, 1, &k),
                   STOKE_EINVAL);
  assert_int_equal(stoke_tune_knee_find(p, 0, 0.05, 1, &k), STOKE_EINVAL);
  assert_int_equal(stoke_tune_knee_find(p, 1, 1.0, 1, &k), STOKE_EINVAL);
  assert_int_equal(stoke_tune_knee_find(NULL, 1, 0.05, 1, &k), STOKE_EINVAL);
}

static void test_prefetch_factor(void **state) {
  (void)state;
  assert_int_equal(stoke_tune_prefetch_factor(0, 2), 0);
  assert_int_equal(stoke_tune_prefetch_factor(4, 2), 1);
  assert_int_equal(stoke_tune_prefetch_factor(4, 4), 1);
  assert_int_equal(stoke_tune_prefetch_factor(4, 5), 2);
  assert_int_equal(stoke_tune_prefetch_factor(1, 4), 4);
}

/* ---- device ledger -------------------------------------------------------- */

static stoke_device_ledger dev(double fixed, double per, double device,
                               double reserve, double unit) {
  stoke_device_ledger l;
  memset(&l, 0, sizeof l);
  l.fixed_bytes = (uint64_t)(fixed * unit + 0.5);
  l.per_sample_bytes = (uint64_t)(per * unit + 0.5);
  l.device_bytes = (uint64_t)(device * unit + 0.5);
  l.reserve_frac = reserve;
  return l;
}

static void test_device_seed003(void **state) {
  (void)state;
  /* 3.2 GB fixed, 0.34 GB per sample, 24 GB device, 10% reserve -> 54, in
  ** decimal or binary gigabytes alike. */
  stoke_device_ledger l = dev(3.2, 0.34, 24, 0.10, 1e9);
  assert_int_equal(stoke_device_ledger_compute(&l), 0);
  assert_int_equal(l.reserve_bytes, 2400000000u);
  assert_int_equal(l.usable_bytes, 21600000000u);
  assert_int_equal(l.max_microbatch, 54);
  assert_true(stoke_device_ledger_resident(&l, 54) <= l.usable_bytes);
  assert_true(stoke_device_ledger_resident(&l, 55) > l.usable_bytes);
  assert_int_equal(stoke_device_ledger_resident(&l, 54), 21560000000u);
  stoke_device_ledger g = dev(3.2, 0.34, 24, 0.10, 1073741824.0);
  assert_int_equal(stoke_device_ledger_compute(&g), 0);
  assert_int_equal(g.max_microbatch, 54);
  /* No reserve: (24 - 3.2) / 0.34 = 61.2. */
  stoke_device_ledger z = dev(3.2, 0.34, 24, 0.0, 1e9);
  assert_int_equal(stoke_device_ledger_compute(&z), 0);
  assert_int_equal(z.max_microbatch, 61);
  /* An exact fit counts: 4 + 2 x 8 = 20 = usable. */
  stoke_device_ledger e = dev(4, 8, 20, 0.0, 1.0);
  assert_int_equal(stoke_device_ledger_compute(&e), 0);
  assert_int_equal(e.max_microbatch, 2);
}

static void test_device_errors(void **state) {
  (void)state;
  stoke_device_ledger l = dev(22, 0.34, 24, 0.10, 1e9);
  assert_int_equal(stoke_device_ledger_compute(&l), STOKE_EBUDGET);
  assert_int_equal(l.max_microbatch, 0);
  assert_int_equal(l.usable_bytes, 21600000000u);
  assert_non_null(strstr(stoke_errmsg(NULL), "not even one sample"));
  l = dev(3.2, 0, 24, 0.10, 1e9);
  assert_int_equal(stoke_device_ledger_compute(&l), STOKE_EINVAL);
  l = dev(3.2, 0.34, 0, 0.10, 1e9);
  assert_int_equal(stoke_device_ledger_compute(&l), STOKE_EINVAL);
  l = dev(3.2, 0.34, 24, 1.0, 1e9);
  assert_int_equal(stoke_device_ledger_compute(&l), STOKE_EINVAL);
  l = dev(3.2, 0.34, 24, -0.1, 1e9);
  assert_int_equal(stoke_device_ledger_compute(&l), STOKE_EINVAL);
  assert_int_equal(stoke_device_ledger_compute(NULL), STOKE_EINVAL);
}

/* ---- host ledger ---------------------------------------------------------- */

static stoke_source *tensor_source(size_t n) {
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = STOKE_SYNTH_TENSOR;
  sc.n_samples = n;
  sc.ndim = 1;
  sc.shape[0] = 16;
  stoke_source *src = NULL;
  assert_int_equal(stoke_source_create_synthetic(&sc, &src), 0);
  return src;
}

static void test_host_ledger_matches_loader(void **state) {
  (void)state;
  stoke_source *src = tensor_source(100);
  const unsigned ws[] = {0, 1, 3};
  const unsigned ks[] = {1, 4};
  const size_t bs[] = {1, 7, 32};
  for (size_t a = 0; a < N_OF(ws); a++)
    for (size_t b = 0; b < N_OF(ks); b++)
      for (size_t c = 0; c < N_OF(bs); c++) {
        stoke_config cfg;
        stoke_config_init(&cfg);
        cfg.source = src;
        cfg.n_workers = ws[a];
        cfg.prefetch = ks[b];
        cfg.batch_size = bs[c];
        cfg.shuffle = 1;
        stoke_host_ledger g;
        g.struct_size = sizeof g;
        assert_int_equal(stoke_host_ledger_compute(&cfg, &g), 0);
        assert_int_equal(g.n_slots, ks[b] + 1);
        assert_int_equal(g.sample_bytes, 16 * 4 + 8);
        assert_int_equal(g.batch_bytes, bs[c] * (16 * 4 + 8));
        assert_int_equal(g.total_bytes,
                         g.slots_bytes + g.order_bytes + g.workers_bytes +
                             g.consumer_bytes + g.failures_bytes);
        stoke_loader *l = NULL;
        assert_int_equal(stoke_loader_create(&cfg, &l), 0);
        assert_int_equal(g.total_bytes, stoke_loader_host_bytes(l));
        stoke_host_ledger h;
        h.struct_size = sizeof h;
        assert_int_equal(stoke_loader_ledger(l, &h), 0);
        assert_memory_equal(&g, &h, sizeof g);
        stoke_loader_destroy(l);
      }
  stoke_source_destroy(src);
}

static void test_host_ledger_budget(void **state) {
  (void)state;
  stoke_source *src = tensor_source(100);
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.n_workers = 2;
  cfg.batch_size = 64;
  cfg.prefetch = 8;
  stoke_host_ledger g;
  g.struct_size = sizeof g;
  assert_int_equal(stoke_host_ledger_compute(&cfg, &g), 0);
  cfg.mem_budget_bytes = g.total_bytes;
  assert_int_equal(stoke_host_ledger_compute(&cfg, &g), 0);
  cfg.mem_budget_bytes = g.total_bytes - 1;
  assert_int_equal(stoke_host_ledger_compute(&cfg, &g), STOKE_EBUDGET);
  assert_int_equal(g.budget_bytes, cfg.mem_budget_bytes);
  assert_true(g.total_bytes > 0);
  /* The loader refuses the same configuration. */
  stoke_loader *l = NULL;
  assert_int_equal(stoke_loader_create(&cfg, &l), STOKE_EBUDGET);
  cfg.batch_size = 0;
  assert_int_equal(stoke_host_ledger_compute(&cfg, &g), STOKE_EINVAL);
  cfg.batch_size = 64;
  cfg.source = NULL;
  assert_int_equal(stoke_host_ledger_compute(&cfg, &g), STOKE_EINVAL);
  assert_int_equal(stoke_host_ledger_compute(NULL, &g), STOKE_EINVAL);
  stoke_source_destroy(src);
}

static void test_host_ledger_names_slots(void **state) {
  (void)state;
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.n_samples = 16; /* SLEEP: nothing held in memory */
  stoke_source *src = NULL;
  assert_int_equal(stoke_source_create_synthetic(&sc, &src), 0);
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = 256;
  cfg.n_workers = 1;
  cfg.mem_budget_bytes = 1 << 20;
  stoke_host_ledger g;
  g.struct_size = sizeof g;
  assert_int_equal(stoke_host_ledger_compute(&cfg, &g), STOKE_EBUDGET);
  assert_non_null(strstr(stoke_errmsg(NULL), "batch slots"));
  stoke_source_destroy(src);
}

/* ---- grid and sweep ------------------------------------------------------- */

static void test_grid(void **state) {
  (void)state;
  stoke_source *src = tensor_source(64);
  stoke_tune_config tc;
  stoke_tune_config_init(&tc);
  tc.base.source = src;
  tc.adaptive = 0; /* the fixed ladder; test_tune_search has the adaptive */
  tc.max_workers = 6;
  size_t n = 0;
  assert_int_equal(stoke_tune_grid(&tc, NULL, 0, &n), 0);
  assert_int_equal(n, 5 * 3); /* 0 1 2 4 6 x 1 2 4 */
  stoke_tune_point p[15];
  assert_int_equal(stoke_tune_grid(&tc, p, 14, &n), STOKE_EINVAL);
  assert_int_equal(stoke_tune_grid(&tc, p, 15, &n), 0);
  const unsigned want_w[] = {0, 1, 2, 4, 6};
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(p[i].n_workers, want_w[i / 3]);
    assert_int_equal(p[i].prefetch, 1u << (i % 3));
    assert_int_equal(p[i].status, STOKE_TUNE_PENDING);
    assert_true(p[i].host_bytes > 0);
  }
  /* A budget between prefetch 2 and 4 at one worker skips the deeper. */
  tc.max_workers = 1;
  const size_t bs[] = {8, 16};
  tc.batch_sizes = bs;
  tc.n_batch_sizes = 2;
  tc.base.mem_budget_bytes = p[4].host_bytes; /* W 1, K 2, batch 32 */
  assert_int_equal(stoke_tune_grid(&tc, p, 15, &n), 0);
  assert_int_equal(n, 2 * 2 * 3);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(p[i].batch_size, bs[i / 6]);
    assert_int_equal(p[i].status, p[i].host_bytes > tc.base.mem_budget_bytes
                                      ? STOKE_TUNE_OVER_BUDGET
                                      : STOKE_TUNE_PENDING);
  }
  /* Max 1: the ladder is 0, 1. */
  tc.batch_sizes = NULL;
  tc.base.mem_budget_bytes = 0;
  assert_int_equal(stoke_tune_grid(&tc, NULL, 0, &n), 0);
  assert_int_equal(n, 2 * 3);
  tc.struct_size = 0;
  assert_int_equal(stoke_tune_grid(&tc, NULL, 0, &n), STOKE_EINVAL);
  stoke_source_destroy(src);
}

typedef struct prog {
  size_t before, after, stop_after;
  int order_ok;
} prog;

static int on_progress(void *user, size_t i, size_t n, const stoke_tune_point *p) {
  prog *g = user;
  if (p->status == STOKE_TUNE_PENDING) {
    if (i != g->before) g->order_ok = 0;
    g->before++;
    return 0;
  }
  if (i + 1 != g->before || i >= n) g->order_ok = 0;
  g->after++;
  return g->after == g->stop_after;
}

static int steps_seen;
static void on_step(void *user, stoke_batch *b) {
  (void)user;
  if (b) steps_seen++;
}

static void test_sweep(void **state) {
  (void)state;
  stoke_source *src = tensor_source(64);
  stoke_tune_config tc;
  stoke_tune_config_init(&tc);
  tc.base.source = src;
  tc.base.batch_size = 8;
  const unsigned ws[] = {0, 2};
  const unsigned ks[] = {1, 2};
  tc.workers = ws;
  tc.n_workers = 2;
  tc.prefetch = ks;
  tc.n_prefetch = 2;
  tc.min_epochs = 2;
  tc.step = on_step;
  prog g = {0, 0, 0, 1};
  tc.progress = on_progress;
  tc.progress_user = &g;
  stoke_tune_point p[4];
  size_t done = 0;
  steps_seen = 0;
  assert_int_equal(stoke_tune_sweep(&tc, p, 4, &done), 0);
  assert_int_equal(done, 4);
  assert_int_equal(g.before, 4);
  assert_int_equal(g.after, 4);
  assert_true(g.order_ok);
  assert_int_equal(steps_seen, 4 * 3 * 8); /* warm-up + 2 epochs of 8 */
  for (size_t i = 0; i < 4; i++) {
    assert_int_equal(p[i].status, STOKE_TUNE_MEASURED);
    assert_int_equal(p[i].steps, 16);
    assert_int_equal(p[i].samples, 128);
    assert_true(p[i].samples_per_s > 0);
    assert_true(p[i].epoch_s > 0);
  }
  stoke_tune_knee k;
  assert_int_equal(stoke_tune_knee_find(p, 4, 0.05, 0, &k), 0);
  assert_true(k.index < 4);

  /* The progress callback stops after the second point. */
  g = (prog){0, 0, 2, 1};
  assert_int_equal(stoke_tune_sweep(&tc, p, 4, &done), 0);
  assert_int_equal(done, 2);
  assert_int_equal(p[2].status, STOKE_TUNE_PENDING);
  /* A set cancel flag runs nothing. */
  volatile int cancel = 1;
  tc.cancel = &cancel;
  g = (prog){0, 0, 0, 1};
  assert_int_equal(stoke_tune_sweep(&tc, p, 4, &done), 0);
  assert_int_equal(done, 0);
  assert_int_equal(g.before, 0);
  /* Too small an array. */
  cancel = 0;
  assert_int_equal(stoke_tune_sweep(&tc, p, 3, &done), STOKE_EINVAL);
  stoke_source_destroy(src);
}

static int fail_fill(void *user, stoke_sample *s) {
  (void)user;
  if (stoke_sample_index(s) == 5) return stoke_sample_fail(s, "bad bytes");
  return 0;
}

static void test_sweep_error(void **state) {
  (void)state;
  stoke_field_desc f = {"x", STOKE_U8, 1, {4}};
  stoke_source *src = NULL;
  assert_int_equal(
      stoke_source_create_callback(16, 1, &f, fail_fill, NULL, &src), 0);
  stoke_tune_config tc;
  stoke_tune_config_init(&tc);
  tc.base.source = src;
  tc.base.batch_size = 4;
  tc.max_workers = 1;
  stoke_tune_point p[16];
  size_t done = 9, n = 0;
  assert_int_equal(stoke_tune_grid(&tc, NULL, 0, &n), 0);
  assert_true(n <= 16);
  assert_int_equal(stoke_tune_sweep(&tc, p, n, &done), STOKE_ESAMPLE);
  assert_int_equal(done, 0);
  assert_non_null(strstr(stoke_errmsg(NULL), "bad bytes"));
  stoke_source_destroy(src);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_knee_plateau),
      cmocka_unit_test(test_knee_five_percent_rule),
      cmocka_unit_test(test_knee_non_monotonic),
      cmocka_unit_test(test_knee_memory_tie_break),
      cmocka_unit_test(test_knee_ties),
      cmocka_unit_test(test_knee_busy_preferred),
      cmocka_unit_test(test_knee_no_point_busy),
      cmocka_unit_test(test_knee_ignores_unmeasured),
      cmocka_unit_test(test_prefetch_factor),
      cmocka_unit_test(test_device_seed003),
      cmocka_unit_test(test_device_errors),
      cmocka_unit_test(test_host_ledger_matches_loader),
      cmocka_unit_test(test_host_ledger_budget),
      cmocka_unit_test(test_host_ledger_names_slots),
      cmocka_unit_test(test_grid),
      cmocka_unit_test(test_sweep),
      cmocka_unit_test(test_sweep_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
