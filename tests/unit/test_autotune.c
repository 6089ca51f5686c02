/* test_autotune.c — the online autotuner's controller (src/model/autotune_controller.c)
** on synthetic clocks: every decision is a pure function of the state and
** one window of measurements, so nothing here is timed. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "core/core.h"
#include "os/os.h"
#include "stats/stats.h"
#include "sampler/sampler.h"
#include "source/source.h"
#include "model/autotune_controller.h"

#define MS 1000000LL
#define US 1000LL

static stoke__atc_limits limits(size_t batch, unsigned max_w, double budget) {
  stoke__atc_limits lim = {.batch_size = batch,
                          .max_workers = max_w,
                          .max_prefetch = 8,
                          .cpu_budget = budget,
                          .cores = 2};
  return lim;
}

/* A steady window at W workers: samples of sample_ns wall time, cpu_ns of
** it on a core; the consumer computes compute_ns per step and waits for
** whatever the producer is slower by (the queue model's steady state). */
static stoke__atc_window window(const stoke__atc_limits *lim, unsigned w,
                               int64_t sample_ns, int64_t cpu_ns,
                               int64_t compute_ns) {
  stoke__atc_window win = {0};
  win.steps = 12;
  double per_batch = (double)lim->batch_size * (double)sample_ns / w;
  double cpu_floor = (double)lim->batch_size * (double)cpu_ns / lim->cores;
  if (cpu_floor > per_batch) per_batch = cpu_floor;
  int64_t step = (int64_t)per_batch > compute_ns ? (int64_t)per_batch
                                                 : compute_ns;
  win.compute_ns = compute_ns * 12;
  win.wait_ns = (step - compute_ns) * 12;
  win.empty_steps = step > compute_ns ? 12 : 0;
  win.produced = 12 * lim->batch_size;
  win.busy_ns = (int64_t)win.produced * sample_ns;
  win.cpu_ns = (int64_t)win.produced * cpu_ns;
  win.wall_ns = step * 12;
  return win;
}

static stoke__atc_decision decide(stoke__atc_state *st,
                                 const stoke__atc_limits *lim,
                                 const stoke__atc_window *win) {
  stoke__atc_decision d;
  stoke__atc_decide(st, lim, win, &d);
  return d;
}

/* Run the steady model for n windows at whatever the controller chose;
** returns the number of changes it made. */
static int run(stoke__atc_state *st, const stoke__atc_limits *lim,
               int64_t sample_ns, int64_t cpu_ns, int64_t compute_ns, int n,
               int *kinds) {
  int changes = 0;
  for (int i = 0; i < n; i++) {
    stoke__atc_window win = window(lim, st->workers, sample_ns, cpu_ns,
                                  compute_ns);
    stoke__atc_decision d = decide(st, lim, &win);
    if (kinds) kinds[i] = d.kind;
    if (d.kind && d.kind != STOKE_AUTOTUNE_LIMIT &&
        d.kind != STOKE_AUTOTUNE_STEP)
      changes++;
  }
  return changes;
}

/* The case: 32 samples of 5 ms that wait, a 12 ms step: about 14
** workers remove the stall (160 / 12 = 13.3), far above 2 cores. */
static void test_waiting_samples_grow_past_cores(void **state) {
  (void)state;
  stoke__atc_limits lim = limits(32, 64, 2);
  stoke__atc_state st;
  stoke__atc_init(&st, &lim);
  assert_int_equal(st.workers, 1);
  assert_int_equal(st.prefetch, 2);
  stoke__atc_window win = window(&lim, 1, 5 * MS, 20 * US, 12 * MS);
  stoke__atc_decision d = decide(&st, &lim, &win);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_GROW);
  /* A grow is at most 8x: the model's 15 comes next. */
  assert_int_equal(d.to_workers, 8);
  assert_true(strstr(d.reason, "waiting") != NULL);
  /* The window after a change is discarded. */
  win = window(&lim, 8, 5 * MS, 20 * US, 12 * MS);
  d = decide(&st, &lim, &win);
  assert_int_equal(d.kind, 0);
  assert_int_equal(st.workers, 8);
  d = decide(&st, &lim, &win);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_GROW);
  assert_true(d.evaluated); /* 1 -> 8 was faster: kept */
  /* The 14: of a sample's 5 ms, 20 us are on a core, and 8
  ** workers on 2 cores stretch those 4x (model.c's max(1, A / P)), so
  ** t_cpu + t_io = 4.94 ms and 32 x 4.94 / 14 = 11.3 ms <= 0.95 x 12 (13
  ** make 12.2 ms): the fewest with 5% to spare. */
  assert_int_equal(d.to_workers, 14);
  assert_true(d.wait_predicted >= 0 && d.wait_predicted < 0.01);
  /* Then steady: at most one trial (one batch of prefetch less), no
  ** more. */
  int kinds[20];
  int changes = run(&st, &lim, 5 * MS, 20 * US, 12 * MS, 20, kinds);
  assert_true(changes <= 1);
  assert_int_equal(st.workers, 14);
}

/* A sample that burns a core: the CPU budget (2 cores) caps the workers
** at 2 whatever the wait; nothing left to try is said once, then quiet. */
static void test_cpu_bound_capped_by_budget(void **state) {
  (void)state;
  stoke__atc_limits lim = limits(32, 64, 2);
  stoke__atc_state st;
  stoke__atc_init(&st, &lim);
  stoke__atc_window win = window(&lim, 1, 1 * MS, 1 * MS, 10 * MS);
  stoke__atc_decision d = decide(&st, &lim, &win);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_GROW);
  assert_int_equal(d.to_workers, 2);
  int kinds[30];
  run(&st, &lim, 1 * MS, 1 * MS, 10 * MS, 30, kinds);
  assert_true(st.workers <= 2);
  int limits_seen = 0, late_changes = 0;
  for (int i = 0; i < 30; i++) {
    if (kinds[i] == STOKE_AUTOTUNE_LIMIT) limits_seen++;
    if (i >= 10 && kinds[i] && kinds[i] != STOKE_AUTOTUNE_LIMIT)
      late_changes++;
  }
  assert_int_equal(limits_seen, 1);
  assert_int_equal(late_changes, 0);
  /* No deeper prefetch was tried: the cores are the bound. */
  for (int i = 0; i < 30; i++)
    assert_int_not_equal(kinds[i], STOKE_AUTOTUNE_DEEPER);
}

/* Workers that wait do not count against the CPU budget: with 1 core of
** budget, sleeping samples still get their 15 workers; spinning ones get
** one. */
static void test_waiting_workers_outside_budget(void **state) {
  (void)state;
  stoke__atc_limits lim = limits(32, 64, 1);
  unsigned cap;
  stoke__atc_window win = window(&lim, 1, 5 * MS, 20 * US, 12 * MS);
  assert_int_equal(stoke__atc_workers_needed(&lim, &win, 0.10, &cap, NULL, NULL),
                   15);
  assert_true(cap >= 15);
  win = window(&lim, 1, 1 * MS, 1 * MS, 10 * MS);
  stoke__atc_workers_needed(&lim, &win, 0.10, &cap, NULL, NULL);
  assert_int_equal(cap, 1);
  stoke__atc_state st;
  stoke__atc_init(&st, &lim);
  /* No worker to add, and deeper prefetch cannot make up a short mean. */
  stoke__atc_decision d = decide(&st, &lim, &win);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_LIMIT);
  assert_true(strstr(d.reason, "CPU budget allows no more") != NULL);
}

/* A change that makes the step slower goes back to the last known-good,
** and that direction stays closed: no oscillation. */
static void test_rollback_when_slower(void **state) {
  (void)state;
  stoke__atc_limits lim = limits(32, 64, 2);
  stoke__atc_state st;
  stoke__atc_init(&st, &lim);
  stoke__atc_window win = window(&lim, 1, 5 * MS, 20 * US, 12 * MS);
  stoke__atc_decision d = decide(&st, &lim, &win);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_GROW);
  unsigned tried = d.to_workers;
  decide(&st, &lim, &win); /* settle */
  /* The 8 workers made it worse (e.g. they thrash a disk). */
  win.wait_ns *= 2;
  d = decide(&st, &lim, &win);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_ROLLBACK);
  assert_int_equal(d.from_workers, tried);
  assert_int_equal(d.to_workers, 1);
  assert_int_equal(st.workers, 1);
  assert_int_equal(st.rollbacks, 1);
  assert_true(strstr(d.reason, "last known-good") != NULL);
  /* Still waiting, but more workers are closed, and deeper prefetch
  ** cannot make up the mean: the limit, said once. */
  int kinds[12];
  win = window(&lim, 1, 5 * MS, 20 * US, 12 * MS);
  for (int i = 0; i < 12; i++) kinds[i] = decide(&st, &lim, &win).kind;
  for (int i = 0; i < 12; i++) assert_int_not_equal(kinds[i],
                                                    STOKE_AUTOTUNE_GROW);
  assert_int_equal(st.workers, 1);
}

/* The step changes: searching again, both ways: a slower step gives
** workers back, a faster one takes more.  One window of a moved step is
** noise; two in a row are a changed step. */
static void test_step_change_both_ways(void **state) {
  (void)state;
  stoke__atc_limits lim = limits(32, 64, 2);
  stoke__atc_state st;
  stoke__atc_init(&st, &lim);
  run(&st, &lim, 5 * MS, 20 * US, 12 * MS, 6, NULL);
  assert_int_equal(st.workers, 14);
  /* One slow window (a step woken late) changes nothing. */
  stoke__atc_window win = window(&lim, 14, 5 * MS, 20 * US, 30 * MS);
  stoke__atc_decision d = decide(&st, &lim, &win);
  assert_int_not_equal(d.kind, STOKE_AUTOTUNE_STEP);
  win = window(&lim, 14, 5 * MS, 20 * US, 12 * MS);
  d = decide(&st, &lim, &win);
  assert_int_not_equal(d.kind, STOKE_AUTOTUNE_STEP);
  /* Fatter model: 50 ms steps from now on. */
  int kinds[10];
  run(&st, &lim, 5 * MS, 20 * US, 50 * MS, 10, kinds);
  int steps = 0;
  for (int i = 0; i < 10; i++) steps += kinds[i] == STOKE_AUTOTUNE_STEP;
  assert_int_equal(steps, 1);
  /* 160 / 4 = 40 ms <= 0.8 x 50: 4 workers with 20% to spare. */
  assert_int_equal(st.workers, 4);
  /* Thinner again: 8 ms. */
  run(&st, &lim, 5 * MS, 20 * US, 8 * MS, 10, NULL);
  assert_true(st.workers >= 20 && st.workers <= 24);
}

/* A worker that queues for a core is not waiting on I/O: with the
** scheduler's run delay, CPU-bound samples on a busy machine stay within
** the CPU budget (their CPU clock alone would read half of them as
** waiting). */
static void test_run_delay_is_not_io(void **state) {
  (void)state;
  stoke__atc_limits lim = limits(16, 64, 2);
  /* 2 workers, 0.6 ms of wall per sample of which 0.3 ms on a core and
  ** 0.3 ms runnable, waiting for a core another process holds. */
  stoke__atc_window win = window(&lim, 2, 600 * US, 300 * US, 2 * MS);
  unsigned cap;
  stoke__atc_workers_needed(&lim, &win, 0.05, &cap, NULL, NULL);
  assert_true(cap >= 3); /* by the CPU clock: half the time off a core */
  win.sched_run_ns = win.cpu_ns;
  win.sched_delay_ns = win.cpu_ns;
  stoke__atc_workers_needed(&lim, &win, 0.05, &cap, NULL, NULL);
  assert_int_equal(cap, 2); /* by the scheduler: all of it CPU */
}

/* A shrink that brings the stall back is undone, and not tried again. */
static void test_shrink_rolled_back(void **state) {
  (void)state;
  stoke__atc_limits lim = limits(32, 64, 2);
  stoke__atc_state st;
  stoke__atc_init(&st, &lim);
  st.workers = st.good_workers = 10;
  /* The model thinks 4 suffice (samples of 1 ms, 12 ms step: 32 / 4 = 8
  ** ms <= 0.8 x 12)... */
  stoke__atc_window win = window(&lim, 10, 1 * MS, 20 * US, 12 * MS);
  stoke__atc_decision d = decide(&st, &lim, &win);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_SHRINK);
  assert_int_equal(d.to_workers, 4);
  decide(&st, &lim, &win); /* settle */
  /* ...but with 4 the consumer waits (the model was wrong). */
  stoke__atc_window bad = win;
  bad.wait_ns = bad.compute_ns / 2;
  d = decide(&st, &lim, &bad);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_ROLLBACK);
  assert_int_equal(d.to_workers, 10);
  assert_int_equal(st.floor_workers, 10);
  int kinds[10];
  for (int i = 0; i < 10; i++) kinds[i] = decide(&st, &lim, &win).kind;
  for (int i = 0; i < 10; i++)
    assert_int_not_equal(kinds[i], STOKE_AUTOTUNE_SHRINK);
  assert_int_equal(st.workers, 10);
}

/* The spread, not the mean: enough workers for the mean, a queue that is
** often not empty, and still waiting: deeper prefetch. */
static void test_variance_goes_deeper(void **state) {
  (void)state;
  stoke__atc_limits lim = limits(32, 64, 2);
  stoke__atc_state st;
  stoke__atc_init(&st, &lim);
  st.workers = st.good_workers = 16;
  stoke__atc_window win = window(&lim, 16, 5 * MS, 20 * US, 12 * MS);
  win.wait_ns = win.compute_ns / 5; /* 17% waiting */
  win.empty_steps = 2;
  stoke__atc_decision d = decide(&st, &lim, &win);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_DEEPER);
  assert_int_equal(d.to_prefetch, 3);
  assert_int_equal(d.to_workers, 16);
}

/* One window of a heavy-tailed cost reads well above the mean (bench/
** autotune.sh, lognormal: a window's samples took 1.41 ms against 1.0, and
** the controller grew 5 -> 6 workers, one past the knee).  The model is
** given the costs averaged over the recent windows: after steady windows
** at 1 ms, the same heavy window asks for deeper prefetch, not a worker;
** with no history it would grow. */
static void test_one_heavy_window_does_not_grow(void **state) {
  (void)state;
  stoke__atc_limits lim = limits(16, 64, 2);
  stoke__atc_window heavy = window(&lim, 5, 1410 * US, 20 * US, 4100 * US);
  heavy.empty_steps = 2; /* the queue mostly not empty: the spread */
  /* No history: 16 x 1.41 / 5 = 4.5 ms > 0.95 x 4.1: six workers. */
  stoke__atc_state fresh;
  stoke__atc_init(&fresh, &lim);
  fresh.workers = fresh.good_workers = 5;
  stoke__atc_decision d = decide(&fresh, &lim, &heavy);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_GROW);
  assert_int_equal(d.to_workers, 6);
  /* Steady windows at 1 ms first (quiet: 16 / 5 = 3.2 ms of a 4.1 ms step;
  ** prefetch held so that nothing else is tried). */
  stoke__atc_state st;
  stoke__atc_init(&st, &lim);
  st.workers = st.good_workers = 5;
  st.floor_prefetch = 2;
  for (int i = 0; i < 8; i++) {
    stoke__atc_window ok = window(&lim, 5, 1 * MS, 20 * US, 4100 * US);
    d = decide(&st, &lim, &ok);
    assert_int_equal(d.kind, 0);
  }
  d = decide(&st, &lim, &heavy);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_DEEPER);
  assert_int_equal(d.to_workers, 5);
  assert_int_equal(d.to_prefetch, 3);
}

/* Memory: the most workers and prefetch are the budget's, and the limit
** names it. */
static void test_limit_names_memory(void **state) {
  (void)state;
  stoke__atc_limits lim = limits(32, 4, 8);
  lim.max_prefetch = 2;
  lim.mem_note = "the memory budget (1.0 MiB) allows 4 workers";
  stoke__atc_state st;
  stoke__atc_init(&st, &lim);
  int kinds[12];
  run(&st, &lim, 5 * MS, 20 * US, 12 * MS, 12, kinds);
  assert_true(st.workers <= 4 && st.prefetch <= 2);
  stoke__atc_state st2;
  stoke__atc_init(&st2, &lim);
  st2.workers = st2.good_workers = 4;
  stoke__atc_window win = window(&lim, 4, 5 * MS, 20 * US, 12 * MS);
  stoke__atc_decision d = decide(&st2, &lim, &win);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_LIMIT);
  assert_true(strstr(d.reason, "memory budget") != NULL);
}

/* Same state and window, same decision. */
static void test_pure(void **state) {
  (void)state;
  stoke__atc_limits lim = limits(32, 64, 2);
  stoke__atc_state a, b;
  stoke__atc_init(&a, &lim);
  stoke__atc_init(&b, &lim);
  stoke__atc_window win = window(&lim, 1, 3 * MS, 100 * US, 7 * MS);
  stoke__atc_decision da = decide(&a, &lim, &win),
                     db = decide(&b, &lim, &win);
  assert_int_equal(da.kind, db.kind);
  assert_int_equal(da.to_workers, db.to_workers);
  assert_string_equal(da.reason, db.reason);
  assert_memory_equal(&a, &b, sizeof a);
  /* An empty window decides nothing. */
  stoke__atc_window none = {0};
  assert_int_equal(decide(&a, &lim, &none).kind, 0);
}

/* A fake ledger: 100 bytes a worker, 1000 a slot. */
static uint64_t fake_bytes(void *ctx, unsigned w, unsigned k) {
  (void)ctx;
  return 100u * w + 1000u * k;
}

/* Fitting a memory budget: fewer slots first (down to 2), then fewer
** threads (by 4 above 8), then one slot; no budget or room: unchanged. */
static void test_fit_memory(void **state) {
  (void)state;
  unsigned w = 64, k = 8;
  assert_false(stoke__atc_fit_memory(fake_bytes, NULL, 0, &w, &k));
  assert_false(stoke__atc_fit_memory(fake_bytes, NULL, 14400, &w, &k));
  assert_int_equal(w, 64);
  assert_int_equal(k, 8);
  /* 64 x 100 + 5 x 1000 = 11400 */
  assert_true(stoke__atc_fit_memory(fake_bytes, NULL, 11500, &w, &k));
  assert_int_equal(w, 64);
  assert_int_equal(k, 5);
  w = 64, k = 8;
  /* k 2: 2000 + 100 w <= 4000: w 20 (64, 60, ... by 4) */
  assert_true(stoke__atc_fit_memory(fake_bytes, NULL, 4000, &w, &k));
  assert_int_equal(k, 2);
  assert_int_equal(w, 20);
  w = 64, k = 8;
  /* Nothing with two slots fits: one worker, then one slot. */
  assert_true(stoke__atc_fit_memory(fake_bytes, NULL, 1200, &w, &k));
  assert_int_equal(w, 1);
  assert_int_equal(k, 1);
}

/* The window w with the machine's other load at `cores` beside it (and
** this process using one core: the machine is busier by the same). */
static stoke__atc_window loaded(stoke__atc_window w, double cores) {
  w.outside_on = true;
  w.outside_cores = cores;
  w.machine_cores = 1.0 + cores;
  return w;
}

/* A hog that comes and goes between a grow's before and after: the trial
** is not judged on the hog's window (which, judged, rolls it back: the
** control below), nothing grows while the load is away, the window on
** which it comes back is held too, and the next one at the decisions'
** load judges the trial.  The one record names the outside load. */
static void test_outside_load_holds_the_trial(void **state) {
  (void)state;
  stoke__atc_limits lim = limits(32, 64, 2);
  for (int control = 0; control < 2; control++) {
    stoke__atc_state st;
    stoke__atc_init(&st, &lim);
    stoke__atc_window one = window(&lim, 1, 5 * MS, 20 * US, 12 * MS);
    stoke__atc_window eight = window(&lim, 8, 5 * MS, 20 * US, 12 * MS);
    stoke__atc_window w = loaded(one, 0.1);
    stoke__atc_decision d = decide(&st, &lim, &w);
    assert_int_equal(d.kind, STOKE_AUTOTUNE_GROW);
    assert_int_equal(d.to_workers, 8);
    w = loaded(eight, 0.1);
    d = decide(&st, &lim, &w); /* settling */
    assert_int_equal(d.kind, 0);
    /* The trial's window: the hog took a core and the step is as slow
    ** as before the grow. */
    w = control ? one : loaded(one, 1.2);
    d = decide(&st, &lim, &w);
    if (control) {
      assert_int_equal(d.kind, STOKE_AUTOTUNE_ROLLBACK);
      continue;
    }
    assert_int_equal(d.kind, STOKE_AUTOTUNE_OUTSIDE);
    assert_false(d.evaluated);
    assert_int_equal(d.to_workers, 8);
    assert_non_null(strstr(d.reason, "other load moved 0.1 -> 1.2 cores"));
    assert_non_null(strstr(d.reason, "the grow to 8 workers"));
    assert_int_equal(st.pending, STOKE_AUTOTUNE_GROW);
    /* Still away, stalled: no grow, no rollback, no second record. */
    w = loaded(one, 1.3);
    d = decide(&st, &lim, &w);
    assert_int_equal(d.kind, 0);
    assert_int_equal(st.workers, 8);
    /* Back: that window may hold part of the move; held. */
    w = loaded(one, 0.3);
    d = decide(&st, &lim, &w);
    assert_int_equal(d.kind, 0);
    assert_false(d.evaluated);
    assert_int_equal(st.pending, STOKE_AUTOTUNE_GROW);
    /* At the decisions' load: judged (kept), and on as before. */
    w = loaded(eight, 0.1);
    d = decide(&st, &lim, &w);
    assert_true(d.evaluated);
    assert_int_equal(d.kind, STOKE_AUTOTUNE_GROW);
    assert_int_equal(d.to_workers, 14);
    assert_null(strstr(d.reason, "other load"));
  }
}

/* A load that moves and stays is the machine's: held for
** STOKE__ATC_OUTSIDE_SETTLE_NS of windows, then recorded and searched
** again at it; small moves, and others' use that moved only because this
** loader's did (the machine as busy), hold nothing. */
static void test_outside_load_that_stays(void **state) {
  (void)state;
  stoke__atc_limits lim = limits(32, 64, 2);
  stoke__atc_state st;
  stoke__atc_init(&st, &lim);
  stoke__atc_window w = loaded(window(&lim, 1, 5 * MS, 20 * US, 12 * MS), 0);
  stoke__atc_decision d = decide(&st, &lim, &w);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_GROW);
  stoke__atc_window eight = window(&lim, 8, 5 * MS, 20 * US, 12 * MS);
  w = loaded(eight, 0.2);
  d = decide(&st, &lim, &w); /* settling */
  /* A fifth of a core is no move.  Judged.  (Others' use that moved
  ** only because this loader's did: test_outside_load_on_a_full_machine.) */
  w = loaded(eight, 0.2);
  d = decide(&st, &lim, &w);
  assert_true(d.evaluated);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_GROW);
  assert_int_equal(d.to_workers, 14);
  stoke__atc_window f = window(&lim, 14, 5 * MS, 20 * US, 12 * MS);
  w = loaded(f, 0);
  d = decide(&st, &lim, &w); /* settling */
  /* A second job takes a core and keeps it; the windows stall (the
  ** 8-worker numbers). */
  int64_t held_ns = 0;
  int records = 0, i;
  for (i = 0; i < 100; i++) {
    w = loaded(eight, 1.0);
    d = decide(&st, &lim, &w);
    if (d.kind) {
      assert_int_equal(d.kind, STOKE_AUTOTUNE_OUTSIDE);
      if (++records == 2) break;
      assert_non_null(strstr(d.reason, "nothing decided on it"));
      assert_non_null(strstr(d.reason, "grow to 14 workers"));
      continue;
    }
    held_ns += w.wall_ns;
    assert_int_equal(st.workers, 14);
  }
  assert_int_equal(records, 2);
  /* Kept on the window whose time made the 3 s (the first away window
  ** starts the count). */
  assert_true(held_ns < STOKE__ATC_OUTSIDE_SETTLE_NS);
  assert_true(held_ns + w.wall_ns >= STOKE__ATC_OUTSIDE_SETTLE_NS);
  assert_non_null(strstr(d.reason, "0.0 -> 1.0 cores"));
  assert_non_null(strstr(d.reason, "searching again"));
  assert_int_equal(st.pending, 0);
  /* At the new level, decisions again. */
  w = loaded(eight, 1.1);
  d = decide(&st, &lim, &w);
  assert_true(d.kind == STOKE_AUTOTUNE_GROW ||
              d.kind == STOKE_AUTOTUNE_SHRINK ||
              d.kind == STOKE_AUTOTUNE_LIMIT ||
              d.kind == STOKE_AUTOTUNE_DEEPER);
}

/* The window w with others' use at `cores` on a machine kept full (both
** cores busy whatever they do: the whole machine cannot show a move). */
static stoke__atc_window full(stoke__atc_window w, double cores) {
  w.outside_on = true;
  w.outside_cores = cores;
  w.machine_cores = 2.0;
  return w;
}

/* bench/autotune.sh's spin-300us miss: a grow tried while a hog took the
** second core of a full machine.  Others' use rose while this loader took
** more (which a grow cannot cause): the trial is discarded, not rolled
** back, no ceiling is set, and the grow is tried again at the new load;
** the same trial disturbed a second time is judged (it may be the trial's
** own doing).  And the control: others' use rising while this loader gave
** cores back (a shrink) is the shrink's doing, judged. */
static void test_outside_load_on_a_full_machine(void **state) {
  (void)state;
  stoke__atc_limits lim = limits(32, 64, 2);
  stoke__atc_state st;
  stoke__atc_init(&st, &lim);
  stoke__atc_window one = window(&lim, 1, 5 * MS, 20 * US, 12 * MS);
  stoke__atc_window eight = window(&lim, 8, 5 * MS, 20 * US, 12 * MS);
  stoke__atc_window w = full(one, 0.0);
  stoke__atc_decision d = decide(&st, &lim, &w);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_GROW);
  assert_int_equal(d.to_workers, 8);
  w = full(eight, 0.0);
  decide(&st, &lim, &w); /* settling */
  /* The hog came: others' use 0 -> 0.7 cores, the machine as full, and
  ** the step as slow as before the grow. */
  w = full(one, 0.7);
  d = decide(&st, &lim, &w);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_OUTSIDE);
  assert_int_equal(d.to_workers, 1);
  assert_int_equal(st.workers, 1);
  assert_int_equal(st.rollbacks, 0);
  assert_int_equal(st.ceil_workers, 0);
  assert_int_equal(st.pending, 0);
  assert_non_null(strstr(d.reason, "the grow to 8 workers"));
  assert_non_null(strstr(d.reason, "0.0 -> 0.7 cores"));
  assert_non_null(strstr(d.reason, "discarded, to be tried again"));
  w = full(one, 0.7);
  d = decide(&st, &lim, &w); /* settling */
  assert_int_equal(d.kind, 0);
  /* Tried again, at the hog's load. */
  d = decide(&st, &lim, &w);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_GROW);
  assert_int_equal(d.to_workers, 8);
  w = full(eight, 0.7);
  decide(&st, &lim, &w); /* settling */
  /* Disturbed again the same way: judged this time (slower: rolled
  ** back, the direction closed). */
  w = full(one, 1.4);
  d = decide(&st, &lim, &w);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_ROLLBACK);
  assert_int_equal(st.ceil_workers, 1);

  /* The control: a shrink, after which others use the cores it freed. */
  stoke__atc_init(&st, &lim);
  st.workers = st.good_workers = 10;
  stoke__atc_window ten = window(&lim, 10, 1 * MS, 20 * US, 12 * MS);
  w = full(ten, 0.2);
  d = decide(&st, &lim, &w);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_SHRINK);
  assert_int_equal(d.to_workers, 4);
  decide(&st, &lim, &w); /* settle */
  w = full(ten, 0.9);
  w.wait_ns = w.compute_ns / 2; /* and the consumer waits */
  d = decide(&st, &lim, &w);
  assert_int_equal(d.kind, STOKE_AUTOTUNE_ROLLBACK);
  assert_int_equal(st.floor_workers, 10);
}

/* bench/autotune.sh's step-change miss: an outside hold must not hide the
** job's own step change.  While a second job holds a core (held, as in
** test_outside_load_that_stays), the step's compute goes from 50 ms to
** 12 ms (the other way from what a hog does to a step) or to 120 ms
** (slower than the hog can make it: twice a fair share, 1 + 2 x 1 / 2):
** the hold is lifted, the search starts again (at 12 ms the tuner grows
** at once).  A step the hog can explain (80 ms) leaves the hold on. */
static void test_own_step_change_lifts_the_hold(void **state) {
  (void)state;
  stoke__atc_limits lim = limits(32, 64, 2);
  const int64_t tcs[] = {12 * MS, 80 * MS, 120 * MS};
  for (int c = 0; c < 3; c++) {
    bool explained = c == 1;
    stoke__atc_state st;
    stoke__atc_init(&st, &lim);
    /* Settled at 4 workers on a 50 ms step (160 / 4 = 40 ms). */
    for (int i = 0; i < 12; i++) {
      stoke__atc_window w =
          loaded(window(&lim, st.workers, 5 * MS, 20 * US, 50 * MS), 0.0);
      decide(&st, &lim, &w);
    }
    assert_int_equal(st.workers, 4);
    assert_int_equal(st.pending, 0);
    /* A hog: held. */
    stoke__atc_window w =
        loaded(window(&lim, 4, 5 * MS, 20 * US, 50 * MS), 1.0);
    stoke__atc_decision d = decide(&st, &lim, &w);
    assert_int_equal(d.kind, STOKE_AUTOTUNE_OUTSIDE);
    int steps = 0, grows = 0;
    int64_t held_ns = 0;
    for (int i = 0; i < 3; i++) {
      w = loaded(window(&lim, st.workers, 5 * MS, 20 * US, tcs[c]), 1.0);
      d = decide(&st, &lim, &w);
      if (d.kind == STOKE_AUTOTUNE_STEP) {
        steps++;
        assert_int_equal(i, 1); /* the second window of the new step */
        assert_non_null(strstr(d.reason, "the hold is lifted"));
        assert_non_null(strstr(d.reason, "0.0 -> 1.0 cores"));
        assert_false(st.outside_away);
      }
      grows += d.kind == STOKE_AUTOTUNE_GROW;
      held_ns += w.wall_ns;
    }
    if (explained) {
      /* Shorter than the 3 s that settle a load at its new level. */
      assert_true(held_ns < STOKE__ATC_OUTSIDE_SETTLE_NS);
      assert_int_equal(steps, 0);
      assert_int_equal(grows, 0);
      assert_true(st.outside_away);
      assert_int_equal(st.workers, 4);
    } else {
      assert_int_equal(steps, 1);
      assert_int_equal(st.ref_compute_ns, tcs[c]);
    }
    if (c == 0) {
      assert_int_equal(grows, 1);
      assert_true(st.workers > 4);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fit_memory),
      cmocka_unit_test(test_waiting_samples_grow_past_cores),
      cmocka_unit_test(test_cpu_bound_capped_by_budget),
      cmocka_unit_test(test_waiting_workers_outside_budget),
      cmocka_unit_test(test_rollback_when_slower),
      cmocka_unit_test(test_step_change_both_ways),
      cmocka_unit_test(test_run_delay_is_not_io),
      cmocka_unit_test(test_shrink_rolled_back),
      cmocka_unit_test(test_variance_goes_deeper),
      cmocka_unit_test(test_one_heavy_window_does_not_grow),
      cmocka_unit_test(test_limit_names_memory),
      cmocka_unit_test(test_pure),
      cmocka_unit_test(test_outside_load_holds_the_trial),
      cmocka_unit_test(test_outside_load_that_stays),
      cmocka_unit_test(test_outside_load_on_a_full_machine),
      cmocka_unit_test(test_own_step_change_lifts_the_hold),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
