/* test_outside.c — the machine's other load in windows (stats/outside.c),
** driven with made-up readings (stoke__outside_start_at / _tick_at /
** _stats_at), so that nothing depends on what the machine does meanwhile:
**   - a run that measures 0.1 s, shorter than one whole window, has two
**     windows, and a load that moved between them is said (the truth
**     grid's points measure 0.03-0.3 s: before, none was ever marked);
**   - the windows grow to their whole length (0.05, 0.05, 0.1, 0.2, 0.4,
**     0.5 s);
**   - the tail after the last closed window counts from 50 ms up to the
**     open window's length, and not past it (the steps stopped). */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

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

static void start(stoke__outside *o, machine *m) {
  memset(o, 0, sizeof *o);
  memset(m, 0, sizeof *m);
  m->r.t_ns = 1000 * MS; /* any start */
  m->r.precise = true;    /* as from /proc/uptime: the tail's too */
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_short_run_is_marked),
      cmocka_unit_test(test_windows_grow_to_their_length),
      cmocka_unit_test(test_tail_counts),
      cmocka_unit_test(test_unreadable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
