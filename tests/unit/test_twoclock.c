#define _POSIX_C_SOURCE 200809L
/* test_twoclock.c — the two clocks around a loop stoke does not own: waits
** and computes land where they happened, warm-up is left out, the inferred
** queue drives the doctor's verdict, and the trace holds the spans. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "test_util.h"

#define MS 1000000LL

static stoke_twoclock *make(unsigned warmup, int64_t ready_ns,
                            size_t trace_events) {
  stoke_twoclock_config cfg;
  stoke_twoclock_config_init(&cfg);
  cfg.warmup_epochs = warmup;
  cfg.ready_wait_ns = ready_ns;
  cfg.trace_events = trace_events;
  stoke_twoclock *c = NULL;
  TU_OK(stoke_twoclock_create(&cfg, &c));
  return c;
}

/* One epoch of `steps` steps: wait_ns inside the "next", compute_ns after. */
static void run_epoch(stoke_twoclock *c, int steps, int64_t wait_ns,
                      int64_t compute_ns, size_t batch) {
  for (int i = 0; i < steps; i++) {
    stoke_twoclock_enter(c);
    tu_sleep_ns(wait_ns);
    stoke_twoclock_leave(c, batch);
    tu_sleep_ns(compute_ns);
  }
  stoke_twoclock_enter(c); /* the call that finds the end */
  TU_OK(stoke_twoclock_end_epoch(c));
}

static void test_defaults_and_errors(void **state) {
  (void)state;
  stoke_twoclock_config cfg;
  stoke_twoclock_config_init(&cfg);
  assert_int_equal(cfg.warmup_epochs, 1);
  assert_int_equal(cfg.ready_wait_ns, 2 * MS);
  assert_int_equal(cfg.round_steps, 0);
  assert_int_equal(cfg.n_workers, STOKE_WORKERS_AUTO);
  stoke_twoclock *c = NULL;
  cfg.struct_size = 3;
  TU_RC(stoke_twoclock_create(&cfg, &c), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "struct_size");
  assert_null(c);
  TU_RC(stoke_twoclock_create(NULL, NULL), STOKE_EINVAL);
  TU_OK(stoke_twoclock_create(NULL, &c)); /* NULL config: defaults */
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_twoclock_stats(c, &st));
  assert_int_equal(st.steps, 0);
  TU_RC(stoke_twoclock_write_trace(c, "/tmp/x.json"), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "tracing is off");
  /* end_epoch outside an epoch and leave without enter are no-ops. */
  TU_OK(stoke_twoclock_end_epoch(c));
  stoke_twoclock_leave(c, 4);
  assert_int_equal(stoke_twoclock_n_epoch_stats(c), 0);
  stoke_twoclock_destroy(c);
  stoke_twoclock_destroy(NULL);
}

/* A starving loop: every step waits 8 ms for 0.5 ms of compute. */
static void test_starving_loop(void **state) {
  (void)state;
  stoke_twoclock *c = make(1, MS, 0);
  run_epoch(c, 3, 2 * MS, 0, 32); /* warm-up: left out */
  run_epoch(c, 6, 8 * MS, MS / 2, 32);
  run_epoch(c, 6, 8 * MS, MS / 2, 16);
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_twoclock_stats(c, &st));
  assert_int_equal(st.steps, 12);
  assert_int_equal(st.samples, 6 * 32 + 6 * 16);
  assert_int_equal(st.epochs_done, 3);
  assert_true(st.wait.p50_ns >= 8 * MS);
  assert_true(st.compute.p50_ns >= MS / 2 && st.compute.p50_ns < 8 * MS);
  assert_true(st.wait_ratio > 0.5);
  assert_true(st.queue_empty_frac > 0.99); /* every step waited */
  assert_int_equal(st.n_workers, STOKE_WORKERS_AUTO);
  stoke_diagnosis d;
  TU_OK(stoke_diagnose(&st, &d));
  assert_int_equal(d.verdict, STOKE_VERDICT_STARVING);
  /* Epoch records: the warm-up one flagged, batches and samples counted,
  ** and the parts add up to no more than the wall time. */
  assert_int_equal(stoke_twoclock_n_epoch_stats(c), 3);
  stoke_epoch_stats e;
  TU_OK(stoke_twoclock_epoch_stats(c, 0, &e));
  assert_true(e.warmup);
  assert_int_equal(e.batches, 3);
  TU_OK(stoke_twoclock_epoch_stats(c, 2, &e));
  assert_false(e.warmup);
  assert_int_equal(e.epoch, 2);
  assert_int_equal(e.samples, 6 * 16);
  assert_true(e.wait_ns + e.compute_ns <= e.wall_ns);
  assert_true(e.wait_ns >= 6 * 8 * MS);
  TU_RC(stoke_twoclock_epoch_stats(c, 3, &e), STOKE_EINVAL);
  /* The histogram holds exactly the measured steps. */
  size_t nh = stoke_twoclock_wait_histogram(c, NULL, 0);
  stoke_hist_bucket *h = calloc(nh, sizeof *h);
  assert_int_equal(stoke_twoclock_wait_histogram(c, h, nh), nh);
  uint64_t total = 0;
  for (size_t i = 0; i < nh; i++) total += h[i].count;
  assert_int_equal(total, 12);
  free(h);
  stoke_twoclock_destroy(c);
}

/* A busy loop: the wait is tiny next to the step.  The spans are given
** (stoke_twoclock_record, as from another clock), so that the verdict is
** exact on a loaded machine: a sleep there can take far longer than asked,
** and a preempted enter/leave pair would read as a wait. */
static void test_busy_loop(void **state) {
  (void)state;
  stoke_twoclock *c = make(0, MS, 0);
  for (int i = 0; i < 8; i++)
    TU_OK(stoke_twoclock_record(c, MS / 20, 10 * MS, 8));
  TU_OK(stoke_twoclock_end_epoch(c));
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_twoclock_stats(c, &st));
  assert_int_equal(st.steps, 8);
  assert_true(st.wait_ratio < 0.05);
  stoke_diagnosis d;
  TU_OK(stoke_diagnose(&st, &d));
  assert_int_equal(d.verdict, STOKE_VERDICT_BUSY);
  stoke_twoclock_destroy(c);
}

/* Mostly ready, a few long waits: the doctor's variance verdict, since the
** inferred queue was empty at only those steps. */
static void test_variance_loop(void **state) {
  (void)state;
  stoke_twoclock *c = make(0, MS, 0);
  for (int i = 0; i < 20; i++) /* given spans: see test_busy_loop */
    TU_OK(stoke_twoclock_record(c, i % 10 == 9 ? 60 * MS : MS / 20, 3 * MS,
                                4));
  TU_OK(stoke_twoclock_end_epoch(c));
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_twoclock_stats(c, &st));
  assert_true(st.queue_empty_frac < 0.2);
  assert_true(st.wait_ratio > 0.3);
  stoke_diagnosis d;
  TU_OK(stoke_diagnose(&st, &d));
  assert_int_equal(d.verdict, STOKE_VERDICT_VARIANCE);
  stoke_twoclock_destroy(c);
}

/* Seed 000 at 4 workers, as PyTorch's DataLoader delivers it: each worker
** makes a whole batch, so one step in four waits 40 ms and the other three
** find a batch made beside it.  Step by step that reads as variance (the
** queue "empty" at 25% of calls); in rounds of 4, every round waited:
** starving, as the producer's mean rate (4 batches per 40 ms against a
** 3 ms step) says. */
static void seed000_rounds(stoke_twoclock *c) {
  for (int i = 0; i < 24; i++) /* given spans: see test_busy_loop */
    TU_OK(stoke_twoclock_record(c, i % 4 == 0 ? 40 * MS : MS / 20, 3 * MS,
                                32));
  TU_OK(stoke_twoclock_end_epoch(c));
}

static void test_rounds_of_batch_workers(void **state) {
  (void)state;
  stoke_twoclock_config cfg;
  stoke_twoclock_config_init(&cfg);
  cfg.warmup_epochs = 0;
  cfg.n_workers = 4;
  stoke_twoclock *step = NULL, *round = NULL;
  TU_OK(stoke_twoclock_create(&cfg, &step));
  cfg.round_steps = 4;
  TU_OK(stoke_twoclock_create(&cfg, &round));
  seed000_rounds(step);
  seed000_rounds(round);
  stoke_stats a = {.struct_size = sizeof a}, b = {.struct_size = sizeof b};
  TU_OK(stoke_twoclock_stats(step, &a));
  TU_OK(stoke_twoclock_stats(round, &b));
  assert_true(a.queue_empty_frac > 0.2 && a.queue_empty_frac < 0.3);
  assert_true(b.queue_empty_frac > 0.99);
  assert_int_equal(b.queue_depth_hist[0], 6); /* 24 steps, 6 rounds */
  assert_int_equal(b.steps, 24);
  stoke_diagnosis da, db;
  TU_OK(stoke_diagnose(&a, &da));
  TU_OK(stoke_diagnose(&b, &db));
  assert_int_equal(da.verdict, STOKE_VERDICT_VARIANCE);
  assert_int_equal(db.verdict, STOKE_VERDICT_STARVING);
  stoke_twoclock_destroy(step);
  stoke_twoclock_destroy(round);
}

/* Steps timed by another clock (CUDA events): counted as measured. */
static void test_record_other_clock(void **state) {
  (void)state;
  stoke_twoclock *c = make(1, MS, 0);
  for (int e = 0; e < 2; e++) {
    for (int i = 0; i < 10; i++)
      TU_OK(stoke_twoclock_record(c, e ? 4 * MS : 0, 10 * MS, 8));
    TU_OK(stoke_twoclock_end_epoch(c));
  }
  TU_RC(stoke_twoclock_record(c, -1, 0, 1), STOKE_EINVAL);
  TU_RC(stoke_twoclock_record(NULL, 0, 0, 1), STOKE_EINVAL);
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_twoclock_stats(c, &st));
  assert_int_equal(st.steps, 10); /* the warm-up epoch left out */
  assert_int_equal(st.samples, 80);
  assert_int_equal(st.wait.total_ns, 40 * MS);
  assert_int_equal(st.compute.total_ns, 100 * MS);
  assert_true(st.wait.p50_ns > 3 * MS && st.wait.p50_ns < 5 * MS);
  assert_true(st.queue_empty_frac > 0.99); /* every step waited 4 ms */
  stoke_epoch_stats es;
  TU_OK(stoke_twoclock_epoch_stats(c, 1, &es));
  assert_int_equal(es.wait_ns, 40 * MS);
  assert_int_equal(es.compute_ns, 100 * MS);
  assert_int_equal(es.batches, 10);
  stoke_twoclock_destroy(c);
}

/* Known zero workers: a waiting loop is starving whatever the queue. */
static void test_known_inline(void **state) {
  (void)state;
  stoke_twoclock_config cfg;
  stoke_twoclock_config_init(&cfg);
  cfg.warmup_epochs = 0;
  cfg.n_workers = 0;
  cfg.ready_wait_ns = 100 * MS; /* every wait "found a batch" */
  stoke_twoclock *c;
  TU_OK(stoke_twoclock_create(&cfg, &c));
  run_epoch(c, 6, 5 * MS, MS / 2, 4);
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_twoclock_stats(c, &st));
  assert_int_equal(st.n_workers, 0);
  assert_true(st.queue_empty_frac < 0.01);
  stoke_diagnosis d;
  TU_OK(stoke_diagnose(&st, &d));
  assert_int_equal(d.verdict, STOKE_VERDICT_STARVING);
  TU_CONTAINS(d.reason, "0 workers");
  stoke_twoclock_destroy(c);
}

/* The trace: one consumer track with a wait and a compute span per step. */
static void test_trace(void **state) {
  (void)state;
  stoke_twoclock *c = make(0, MS, 1024);
  run_epoch(c, 5, MS, MS, 2);
  char path[] = "/tmp/stoke-twoclock-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  TU_OK(stoke_twoclock_write_trace(c, path));
  FILE *f = fopen(path, "r");
  char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  unlink(path);
  int waits = 0, computes = 0;
  for (const char *p = buf; (p = strstr(p, "\"name\":\"wait\"")); p++) waits++;
  for (const char *p = buf; (p = strstr(p, "\"name\":\"compute\"")); p++)
    computes++;
  assert_int_equal(waits, 5);
  assert_int_equal(computes, 5);
  TU_CONTAINS(buf, "consumer (two clocks)");
  TU_RC(stoke_twoclock_write_trace(c, "/nonexistent/dir/t.json"), STOKE_EIO);
  TU_CONTAINS(stoke_errmsg(NULL), "/nonexistent/dir/t.json");
  stoke_twoclock_destroy(c);
}

/* Every allocation through the hooks, and all of it returned. */
/* The batch numbers of the spans named `name`, in the order written. */
static int span_batches(const char *json, const char *name, long *out,
                        int cap) {
  char key[64];
  snprintf(key, sizeof key, "\"name\":\"%s\"", name);
  int n = 0;
  for (const char *p = json; (p = strstr(p, key)); p++) {
    const char *b = strstr(p, "\"batch\":");
    assert_non_null(b);
    if (n < cap) out[n] = strtol(b + 8, NULL, 10);
    n++;
  }
  return n;
}

/* Step k's compute span carries k, as its wait span does (it carried
** k + 1: the step counter had moved on when the compute was traced). */
static void test_trace_spans_name_their_step(void **state) {
  (void)state;
  stoke_twoclock *c = make(0, MS, 1024);
  run_epoch(c, 4, 0, 0, 2);
  char path[] = "/tmp/stoke-twoclock-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  TU_OK(stoke_twoclock_write_trace(c, path));
  FILE *f = fopen(path, "r");
  char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  unlink(path);
  long waits[8], computes[8];
  assert_int_equal(span_batches(buf, "wait", waits, 8), 4);
  assert_int_equal(span_batches(buf, "compute", computes, 8), 4);
  for (int k = 0; k < 4; k++) {
    assert_int_equal(waits[k], k);
    assert_int_equal(computes[k], k);
  }
  stoke_twoclock_destroy(c);
}

static void test_allocator(void **state) {
  (void)state;
  tu_alloc_count count = {0};
  stoke_allocator a = {tu_count_alloc, tu_count_free, &count};
  stoke_twoclock_config cfg;
  stoke_twoclock_config_init(&cfg);
  cfg.alloc = &a;
  cfg.trace_events = 16;
  cfg.warmup_epochs = 0;
  stoke_twoclock *c;
  TU_OK(stoke_twoclock_create(&cfg, &c));
  for (int e = 0; e < 20; e++) run_epoch(c, 1, 0, 0, 1); /* grows records */
  assert_int_equal(stoke_twoclock_n_epoch_stats(c), 20);
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_twoclock_stats(c, &st));
  stoke_twoclock_destroy(c);
  assert_true(atomic_load(&count.allocs) > 0);
  assert_int_equal(atomic_load(&count.live), 0);
}

typedef struct failing {
  tu_alloc_count count;
  atomic_long left; /* allocations that succeed before one fails */
} failing;

static void *failing_alloc(void *user, size_t n) {
  failing *f = user;
  if (atomic_fetch_sub(&f->left, 1) <= 0) return NULL;
  return tu_count_alloc(&f->count, n);
}

static void failing_free(void *user, void *p) {
  tu_count_free(&((failing *)user)->count, p);
}

static void test_create_out_of_memory(void **state) {
  (void)state;
  int failed = 0;
  for (long n = 0; n < 10; n++) {
    failing f = {0};
    atomic_init(&f.left, n);
    stoke_allocator a = {failing_alloc, failing_free, &f};
    stoke_twoclock_config cfg;
    stoke_twoclock_config_init(&cfg);
    cfg.alloc = &a;
    cfg.trace_events = 16;
    stoke_twoclock *c = NULL;
    int rc = stoke_twoclock_create(&cfg, &c);
    if (rc == STOKE_OK) {
      stoke_twoclock_destroy(c);
    } else {
      assert_int_equal(rc, STOKE_ENOMEM);
      assert_null(c);
      failed++;
    }
    assert_int_equal(atomic_load(&f.count.live), 0);
  }
  assert_true(failed >= 3); /* clock, stats, trace ring, its events */
}

/* Steps without waiting, then the end of the epoch. */
static void quick_epoch(stoke_twoclock *c, int steps) {
  for (int i = 0; i < steps; i++) {
    stoke_twoclock_enter(c);
    stoke_twoclock_leave(c, 4);
  }
  stoke_twoclock_enter(c);
  TU_OK(stoke_twoclock_end_epoch(c));
}

static stoke_twoclock *make_early(unsigned warmup, size_t end_steps,
                                  int64_t end_ns) {
  stoke_twoclock_config cfg;
  stoke_twoclock_config_init(&cfg);
  cfg.warmup_epochs = warmup;
  cfg.warmup_end_steps = end_steps;
  cfg.warmup_end_ns = end_ns;
  stoke_twoclock *c = NULL;
  TU_OK(stoke_twoclock_create(&cfg, &c));
  return c;
}

static uint64_t measured_steps(const stoke_twoclock *c) {
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_twoclock_stats(c, &st));
  /* The cheap counter read agrees with the snapshot. */
  assert_int_equal(stoke_twoclock_measured_steps(c), st.steps);
  return st.steps;
}

static int epoch_warmup(const stoke_twoclock *c, size_t i) {
  stoke_epoch_stats e;
  TU_OK(stoke_twoclock_epoch_stats(c, i, &e));
  return e.warmup;
}

/* The default rule is the first epoch or 10 steps and 5 s; negative time
** is refused. */
static void test_warmup_end_defaults(void **state) {
  (void)state;
  stoke_twoclock_config cfg;
  stoke_twoclock_config_init(&cfg);
  assert_int_equal(cfg.warmup_end_steps, STOKE_WARMUP_END_STEPS);
  assert_int_equal(cfg.warmup_end_ns, STOKE_WARMUP_END_NS);
  assert_int_equal(STOKE_WARMUP_END_STEPS, 10);
  assert_int_equal(STOKE_WARMUP_END_NS, 5000000000LL);
  assert_int_equal(stoke_twoclock_measured_steps(NULL), 0);
  cfg.warmup_end_ns = -1;
  stoke_twoclock *c = NULL;
  TU_RC(stoke_twoclock_create(&cfg, &c), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "warmup_end_ns");
  assert_null(c);
}

/* A long warm-up epoch ends after its first warmup_end_steps steps (no
** time asked): the rest of it is measured, its record says the warm-up
** ended in it, and the next epoch is an ordinary measured one. */
static void test_warmup_ends_early_by_steps(void **state) {
  (void)state;
  stoke_twoclock *c = make_early(1, 10, 0);
  quick_epoch(c, 25);
  assert_int_equal(measured_steps(c), 15);
  assert_int_equal(epoch_warmup(c, 0), 2);
  quick_epoch(c, 5);
  assert_int_equal(measured_steps(c), 20);
  assert_int_equal(epoch_warmup(c, 1), 0);
  stoke_twoclock_destroy(c);
}

/* Steps alone do not end it while the time has not passed (an hour here):
** the warm-up epoch stays whole. */
static void test_warmup_early_end_needs_time(void **state) {
  (void)state;
  stoke_twoclock *c = make_early(1, 10, 3600 * 1000 * MS);
  quick_epoch(c, 25);
  assert_int_equal(measured_steps(c), 0);
  assert_int_equal(epoch_warmup(c, 0), 1);
  quick_epoch(c, 5);
  assert_int_equal(measured_steps(c), 5);
  stoke_twoclock_destroy(c);
}

/* Both 0: whole warm-up epochs, as before the early end existed; and an
** early end ends every warm-up epoch at once, not one at a time. */
static void test_warmup_whole_epochs_and_several(void **state) {
  (void)state;
  stoke_twoclock *c = make_early(1, 0, 0);
  quick_epoch(c, 25);
  assert_int_equal(measured_steps(c), 0);
  assert_int_equal(epoch_warmup(c, 0), 1);
  stoke_twoclock_destroy(c);
  c = make_early(3, 4, 0);
  quick_epoch(c, 6);
  assert_int_equal(measured_steps(c), 2);
  quick_epoch(c, 6);
  assert_int_equal(measured_steps(c), 8);
  assert_int_equal(epoch_warmup(c, 0), 2);
  assert_int_equal(epoch_warmup(c, 1), 0);
  stoke_twoclock_destroy(c);
  /* warmup_steps still apply after an early end. */
  stoke_twoclock_config cfg;
  stoke_twoclock_config_init(&cfg);
  cfg.warmup_end_steps = 4;
  cfg.warmup_end_ns = 0;
  cfg.warmup_steps = 3;
  TU_OK(stoke_twoclock_create(&cfg, &c));
  quick_epoch(c, 10);
  assert_int_equal(measured_steps(c), 3);
  stoke_twoclock_destroy(c);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_and_errors),
      cmocka_unit_test(test_starving_loop),
      cmocka_unit_test(test_busy_loop),
      cmocka_unit_test(test_variance_loop),
      cmocka_unit_test(test_known_inline),
      cmocka_unit_test(test_rounds_of_batch_workers),
      cmocka_unit_test(test_record_other_clock),
      cmocka_unit_test(test_trace),
      cmocka_unit_test(test_trace_spans_name_their_step),
      cmocka_unit_test(test_allocator),
      cmocka_unit_test(test_create_out_of_memory),
      cmocka_unit_test(test_warmup_end_defaults),
      cmocka_unit_test(test_warmup_ends_early_by_steps),
      cmocka_unit_test(test_warmup_early_end_needs_time),
      cmocka_unit_test(test_warmup_whole_epochs_and_several),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
