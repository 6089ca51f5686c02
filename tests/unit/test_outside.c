/* test_outside.c — the machine's other load in windows (stats/outside.c),
** driven with made-up readings (stoke__outside_start_at / _tick_at /
** _stats_at), so that nothing depends on what the machine does meanwhile:
**   - a run that measures 0.1 s, shorter than one whole window, has two
**     windows, and a load that moved between them is said (the truth
**     grid's points measure 0.03-0.3 s: before, none was ever marked);
**   - the windows grow to their whole length (0.05, 0.05, 0.1, 0.2, 0.4,
**     0.5 s);
**   - the tail after the last closed window counts from 50 ms up to the
**     open window's length, and not past it (the steps stopped);
**   - the run delay's sign (this process's threads waiting for a core):
**     a busy loop beside workers on full cores, whose other load moves
**     too little, is said by it; a loader's own high but steady delay, or
**     one that rises with its own running, is not; a window whose threads
**     changed is not compared;
** and, on this kernel, the real reading: two threads pinned to one core
** wait for each other. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "stats/outside.h"

#define MS 1000000LL

/* The state of a made-up machine: its busy CPU time grows by `load`
** cores (this process none) as the time goes on. */
typedef struct machine {
  stoke__outside_reading r;
} machine;

/* Advance the machine by ms milliseconds with `load` other cores busy. */
static const stoke__outside_reading *run(machine *m, int64_t ms,
                                         double load) {
  m->r.t_ns += ms * MS;
  m->r.busy_ns += (int64_t)((double)(ms * MS) * load);
  return &m->r;
}

/* The same with this process's threads running `run` cores and waiting
** for a core `delay` cores' worth (the other load as `load`). */
static const stoke__outside_reading *run_sched(machine *m, int64_t ms,
                                               double load, double on_core,
                                               double delay) {
  double ns = (double)(ms * MS);
  m->r.sched_run_ns += (int64_t)(ns * on_core);
  m->r.sched_delay_ns += (int64_t)(ns * delay);
  /* The machine's busy time counts this process's running too; its CPU
  ** clock is its threads' running. */
  m->r.busy_ns += (int64_t)(ns * on_core);
  m->r.self_ns += (int64_t)(ns * on_core);
  return run(m, ms, load);
}

static void start(stoke__outside *o, machine *m) {
  memset(o, 0, sizeof *o);
  memset(m, 0, sizeof *m);
  m->r.t_ns = 1000 * MS; /* any start */
  m->r.precise = true;    /* as from /proc/uptime: the tail's too */
  m->r.sched_threads = 6; /* the same threads throughout */
  m->r.sched_ids = 0x5eed;
  stoke__outside_start_at(o, &m->r);
  assert_true(o->on);
}

static stoke_stats stats(const stoke__outside *o,
                         const stoke__outside_reading *now) {
  stoke_stats st;
  memset(&st, 0, sizeof st);
  stoke__outside_stats_at(o, 2, now, &st);
  return st;
}

/* A grid point: 0.1 s of steps every 1 ms, a busy loop (one core) on for
** the second half. */
static void test_short_run_is_marked(void **state) {
  (void)state;
  stoke__outside o;
  machine m;
  start(&o, &m);
  for (int i = 0; i < 100; i++)
    stoke__outside_tick_at(&o, run(&m, 1, i < 50 ? 0.05 : 1.0));
  stoke_stats st = stats(&o, NULL);
  assert_int_equal(st.outside_windows, 2);
  assert_true(st.outside_min_cores < 0.1);
  assert_true(st.outside_max_cores > 0.95);
  assert_true(st.outside_moved);
  assert_true(st.outside_shift_frac > 0.4);
  /* The same without the busy loop: two windows, no move. */
  start(&o, &m);
  for (int i = 0; i < 100; i++) stoke__outside_tick_at(&o, run(&m, 1, 0.05));
  st = stats(&o, NULL);
  assert_int_equal(st.outside_windows, 2);
  assert_false(st.outside_moved);
  assert_true(st.outside_shift_frac == 0);
}

/* The windows close at 0.05, 0.1, 0.2, 0.4, 0.8, 1.3, 1.8, 2.3 s. */
static void test_windows_grow_to_their_length(void **state) {
  (void)state;
  stoke__outside o;
  machine m;
  start(&o, &m);
  const int64_t closes[] = {50, 100, 200, 400, 800, 1300, 1800, 2300};
  size_t next = 0;
  for (int64_t t = 10; t <= 2400; t += 10) {
    stoke__outside_tick_at(&o, run(&m, 10, 0.5));
    uint64_t n = stoke__counter_get(&o.windows);
    if (next < 8 && t == closes[next]) next++;
    assert_int_equal(n, next);
  }
  assert_int_equal(next, 8);
  assert_int_equal(o.want_ns, STOKE__OUTSIDE_WINDOW_NS);
  stoke_stats st = stats(&o, NULL);
  assert_true(st.outside_window_s == 0.5);
  assert_true(st.outside_mean_cores > 0.49 && st.outside_mean_cores < 0.51);
}

/* Windows closed at 0.05, 0.1, 0.2 and 0.4 s with no other load; a busy loop
** from 0.4 s: the tail says it from 50 ms on, until the open window's
** length (0.4 s), and not once the steps stopped past it. */
static void test_tail_counts(void **state) {
  (void)state;
  stoke__outside o;
  machine m;
  start(&o, &m);
  for (int i = 0; i < 40; i++) stoke__outside_tick_at(&o, run(&m, 10, 0));
  assert_int_equal(stoke__counter_get(&o.windows), 4);
  machine at = m;
  stoke_stats st = stats(&o, run(&at, 30, 1.0)); /* a 30 ms tail: none */
  assert_int_equal(st.outside_windows, 4);
  assert_false(st.outside_moved);
  st = stats(&o, run(&at, 40, 1.0)); /* 70 ms */
  assert_int_equal(st.outside_windows, 5);
  assert_true(st.outside_max_cores > 0.95);
  assert_true(st.outside_moved);
  /* The mean weighs the tail by its 70 ms of the 470. */
  assert_true(st.outside_mean_cores > 0.14 && st.outside_mean_cores < 0.16);
  st = stats(&o, run(&at, 400, 1.0)); /* 470 ms > 400: stale */
  assert_int_equal(st.outside_windows, 4);
  assert_false(st.outside_moved);
  /* Without a reading, no tail. */
  st = stats(&o, NULL);
  assert_int_equal(st.outside_windows, 4);
}

/* /proc/stat unreadable at the start, or later: nothing, or what was
** measured until then, and never a tail. */
static void test_unreadable(void **state) {
  (void)state;
  stoke__outside o;
  machine m;
  memset(&o, 0, sizeof o);
  memset(&m, 0, sizeof m);
  stoke__outside_start_at(&o, NULL);
  assert_false(o.on);
  stoke__outside_tick_at(&o, run(&m, 200, 1));
  stoke_stats st = stats(&o, run(&m, 60, 1));
  assert_int_equal(st.outside_windows, 0);
  start(&o, &m);
  stoke__outside_tick_at(&o, run(&m, 100, 0.2));
  stoke__outside_tick_at(&o, NULL);
  assert_false(o.on);
  st = stats(&o, run(&m, 60, 1));
  assert_int_equal(st.outside_windows, 1);
  assert_false(st.outside_moved);
}

/* 0.1 s of steps every 1 ms, as in test_short_run_is_marked, with the
** loader's threads running and waiting as given for each half. */
static stoke_stats halves(double load0, double run0, double delay0,
                          double load1, double run1, double delay1) {
  stoke__outside o;
  machine m;
  start(&o, &m);
  for (int i = 0; i < 100; i++)
    stoke__outside_tick_at(&o, i < 50 ? run_sched(&m, 1, load0, run0, delay0)
                                      : run_sched(&m, 1, load1, run1, delay1));
  return stats(&o, NULL);
}

/* Beside 4 CPU-bound workers on 2 cores, a busy loop gets a fifth of
** them: the other load moves 0.4 cores (under 0.5), the workers run 0.4
** less and wait 0.4 more.  Said, by the delay alone, with the shift. */
static void test_delay_moved_is_marked(void **state) {
  (void)state;
  stoke_stats st = halves(0.02, 2.0, 2.0, 0.42, 1.6, 2.4);
  assert_int_equal(st.outside_windows, 2);
  assert_int_equal(st.outside_delay_windows, 2);
  assert_false(st.outside_other_moved);
  assert_true(st.outside_delay_moved);
  assert_true(st.outside_moved);
  assert_true(st.outside_delay_min_cores > 1.99 &&
              st.outside_delay_min_cores < 2.01);
  assert_true(st.outside_delay_max_cores > 2.39 &&
              st.outside_delay_max_cores < 2.41);
  assert_true(st.outside_taken_cores > 0.39 && st.outside_taken_cores < 0.41);
  /* 0.4 of the 2 cores the threads ran: a fifth. */
  assert_true(st.outside_shift_frac > 0.19 && st.outside_shift_frac < 0.21);
  /* The loop going again is the same move the other way. */
  st = halves(0.42, 1.6, 2.4, 0.02, 2.0, 2.0);
  assert_true(st.outside_delay_moved);
  assert_false(st.outside_other_moved);
  /* A loop that took 0.2 cores: under the threshold. */
  st = halves(0.02, 2.0, 2.0, 0.22, 1.8, 2.2);
  assert_false(st.outside_delay_moved);
  assert_false(st.outside_moved);
  assert_true(st.outside_shift_frac == 0);
}

/* A loader that oversubscribes its own cores waits a lot: steadily (8
** workers on 2 cores), or more as more of its own threads are runnable,
** its running as much on full cores or more where cores were idle.
** None of it is another job's. */
static void test_own_delay_is_not_marked(void **state) {
  (void)state;
  stoke_stats st = halves(0.02, 2.0, 6.0, 0.02, 2.0, 6.0);
  assert_int_equal(st.outside_delay_windows, 2);
  assert_true(st.outside_delay_min_cores > 5.9);
  assert_false(st.outside_delay_moved);
  assert_false(st.outside_moved);
  assert_true(st.outside_taken_cores == 0);
  st = halves(0.02, 2.0, 1.0, 0.02, 2.0, 3.0); /* full: runs as much */
  assert_false(st.outside_delay_moved);
  assert_true(st.outside_taken_cores == 0);
  st = halves(0.02, 1.0, 0.1, 0.02, 2.0, 2.0); /* idle cores: runs more */
  assert_false(st.outside_delay_moved);
  assert_false(st.outside_moved);
}

/* Neither moved: nothing said; both: both said, the larger shift kept. */
static void test_neither_and_both(void **state) {
  (void)state;
  stoke_stats st = halves(0.05, 1.2, 0.05, 0.1, 1.25, 0.08);
  assert_false(st.outside_other_moved);
  assert_false(st.outside_delay_moved);
  assert_false(st.outside_moved);
  assert_true(st.outside_shift_frac == 0);
  /* 2 workers on 2 cores, then a loop at a third of them: 0.67 cores. */
  st = halves(0.02, 2.0, 0.0, 0.69, 1.33, 0.67);
  assert_true(st.outside_other_moved);
  assert_true(st.outside_delay_moved);
  assert_true(st.outside_moved);
  /* Other: 0.67 over the 1.98 cores the run had; delay: 0.67 over 2. */
  assert_true(st.outside_shift_frac > 0.33 && st.outside_shift_frac < 0.35);
}

/* A window whose two readings saw different threads (one started or
** ended) is no window of the delay's, nor is one without schedstat; the
** other load's windows go on. */
static void test_delay_needs_the_same_threads(void **state) {
  (void)state;
  stoke__outside o;
  machine m;
  start(&o, &m);
  for (int i = 0; i < 50; i++)
    stoke__outside_tick_at(&o, run_sched(&m, 1, 0.02, 2.0, 2.0));
  /* A thread ended: the set's ids and the sums drop. */
  m.r.sched_ids = 0xbeef;
  m.r.sched_delay_ns -= 900 * MS;
  for (int i = 0; i < 50; i++)
    stoke__outside_tick_at(&o, run_sched(&m, 1, 0.02, 2.0, 2.0));
  stoke_stats st = stats(&o, NULL);
  assert_int_equal(st.outside_windows, 2);
  assert_int_equal(st.outside_delay_windows, 1);
  assert_false(st.outside_delay_moved);
  /* Without schedstat: no delay windows at all. */
  memset(&o, 0, sizeof o);
  memset(&m, 0, sizeof m);
  m.r.t_ns = 1000 * MS;
  m.r.precise = true;
  m.r.sched_threads = -1;
  stoke__outside_start_at(&o, &m.r);
  for (int i = 0; i < 100; i++)
    stoke__outside_tick_at(&o, run_sched(&m, 1, 0.02, 2.0, i < 50 ? 0 : 2));
  st = stats(&o, NULL);
  assert_int_equal(st.outside_windows, 2);
  assert_int_equal(st.outside_delay_windows, 0);
  assert_false(st.outside_moved);
}

/* The tail counts for the delay too: windows at full cores, then 70 ms
** of a loop taking 0.4 of them. */
static void test_delay_tail(void **state) {
  (void)state;
  stoke__outside o;
  machine m;
  start(&o, &m);
  for (int i = 0; i < 40; i++)
    stoke__outside_tick_at(&o, run_sched(&m, 10, 0.02, 2.0, 2.0));
  machine at = m;
  stoke_stats st = stats(&o, run_sched(&at, 70, 0.42, 1.6, 2.4));
  assert_int_equal(st.outside_delay_windows, 5);
  assert_true(st.outside_delay_moved);
  st = stats(&o, NULL);
  assert_int_equal(st.outside_delay_windows, 4);
  assert_false(st.outside_delay_moved);
}

/* ---- the real reading, on this kernel ---------------------------------- */

typedef struct spinner {
  int cpu;
  atomic_int *go, *done;
} spinner;

/* Pinned to one core: wait for go, burn 100 ms of CPU, say so, and wait
** for go to say stop, so that the two readings see the same threads. */
static void *spin_main(void *arg) {
  spinner *s = arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(s->cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    atomic_fetch_add(s->done, 100); /* the caller fails */
    return NULL;
  }
  while (atomic_load(s->go) == 0) stoke__sleep_ns(MS);
  stoke__spin_cpu_ns(100 * MS);
  atomic_fetch_add(s->done, 1);
  while (atomic_load(s->go) == 1) stoke__sleep_ns(MS);
  return NULL;
}

static void test_real_delay_grows(void **state) {
  (void)state;
  stoke__outside_reading r0, r1, r2;
  if (stoke__outside_read_sched(&r0) != 0) skip(); /* no schedstat here */
  assert_true(r0.sched_threads >= 1);
  assert_true(r0.sched_run_ns >= 0 && r0.sched_delay_ns >= 0);
  cpu_set_t mine;
  assert_int_equal(sched_getaffinity(0, sizeof mine, &mine), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &mine)) cpu++;
  atomic_int go = 0, done = 0;
  spinner sp = {cpu, &go, &done};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&th[i], NULL, spin_main, &sp), 0);
  stoke__sleep_ns(20 * MS); /* both pinned and waiting */
  /* The other load's reading leaves the threads unknown (the live
  ** autotuner's readings need none); they are read where asked for. */
  assert_int_equal(stoke__outside_read(&r0), 0);
  assert_int_equal(r0.sched_threads, -1);
  assert_int_equal(stoke__outside_read_sched(&r0), 0);
  atomic_store(&go, 1);
  while (atomic_load(&done) < 2) stoke__sleep_ns(MS);
  assert_int_equal(stoke__outside_read(&r1), 0);
  assert_int_equal(stoke__outside_read_sched(&r1), 0);
  assert_true(r1.sched_threads >= 3); /* this one and the two */
  atomic_store(&go, 2);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  assert_int_equal(atomic_load(&done), 2);
  double delay, run;
  assert_true(stoke__outside_sched_cores(&r0, &r1, &delay, &run));
  double wall = (double)(r1.t_ns - r0.t_ns);
  /* 200 ms of CPU on one core: one thread waits while the other runs,
  ** 100 ms in all at least (half that allowed for the clocks' reads). */
  assert_true(run * wall >= 190.0 * MS);
  assert_true(delay * wall >= 50.0 * MS);
  assert_true(r1.sched_delay_ns >= r0.sched_delay_ns);
  /* The two threads ended: another set, not compared. */
  assert_int_equal(stoke__outside_read(&r2), 0);
  assert_int_equal(stoke__outside_read_sched(&r2), 0);
  assert_false(stoke__outside_sched_cores(&r1, &r2, &delay, &run));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_short_run_is_marked),
      cmocka_unit_test(test_windows_grow_to_their_length),
      cmocka_unit_test(test_tail_counts),
      cmocka_unit_test(test_unreadable),
      cmocka_unit_test(test_delay_moved_is_marked),
      cmocka_unit_test(test_own_delay_is_not_marked),
      cmocka_unit_test(test_neither_and_both),
      cmocka_unit_test(test_delay_needs_the_same_threads),
      cmocka_unit_test(test_delay_tail),
      cmocka_unit_test(test_real_delay_grows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
