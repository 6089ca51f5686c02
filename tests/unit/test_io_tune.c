/* test_io_tune.c — the live autotuner's io_concurrency rule
** (src/model/io_tune.c) on given windows: every decision is a pure
** function of the state and one window, so nothing here is timed. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "model/io_tune.h"

#define S 1000000000LL

/* One second of `steps` steps, waiting `wait` of it, with `in_flight`
** requests on average of `requests` started, `throttled` refused. */
static stoke__iot_window win(uint64_t steps, double wait, double in_flight,
                             uint64_t requests, uint64_t throttled) {
  stoke__iot_window w = {.steps = steps,
                         .wall_ns = S,
                         .wait_ns = (int64_t)(wait * S),
                         .requests = requests,
                         .throttled = throttled,
                         .busy_ns = (int64_t)(in_flight * S),
                         .workers = 2};
  return w;
}

static void test_latency_bound_doubles_then_keeps(void **state) {
  (void)state;
  stoke__iot_state st;
  stoke__iot_init(&st, 4);
  stoke__iot_decision d;
  stoke__iot_window w = win(10, 0.40, 3.9, 100, 0);
  stoke__iot_decide(&st, &w, &d);
  assert_int_equal(d.kind, STOKE__IOT_MORE);
  assert_int_equal(d.from, 4);
  assert_int_equal(d.to, 8);
  assert_non_null(strstr(d.reason, "latency-bound"));
  /* The window after it is not judged, whatever it says. */
  w = win(1, 0.9, 8, 100, 0);
  stoke__iot_decide(&st, &w, &d);
  assert_int_equal(d.kind, STOKE__IOT_NONE);
  /* Faster by more than 3%, still bound: kept, and doubled again. */
  w = win(15, 0.20, 7.5, 100, 0);
  stoke__iot_decide(&st, &w, &d);
  assert_int_equal(d.kind, STOKE__IOT_MORE);
  assert_int_equal(d.to, 16);
}

static void test_no_gain_rolls_back_and_closes(void **state) {
  (void)state;
  stoke__iot_state st;
  stoke__iot_init(&st, 8);
  stoke__iot_decision d;
  stoke__iot_window w = win(10, 0.30, 7.8, 100, 0);
  stoke__iot_decide(&st, &w, &d);
  assert_int_equal(d.to, 16);
  w = win(10, 0.30, 15, 100, 0);
  stoke__iot_decide(&st, &w, &d); /* settle */
  w = win(10, 0.30, 15.5, 100, 0); /* 10 steps/s again: no gain */
  stoke__iot_decide(&st, &w, &d);
  assert_int_equal(d.kind, STOKE__IOT_ROLLBACK);
  assert_int_equal(d.from, 16);
  assert_int_equal(d.to, 8);
  assert_int_equal(st.ceiling, 8);
  /* Closed: the same starving, bound window tries nothing more. */
  w = win(10, 0.30, 7.9, 100, 0);
  stoke__iot_decide(&st, &w, &d); /* settle */
  for (int i = 0; i < 5; i++) {
    stoke__iot_decide(&st, &w, &d);
    assert_int_equal(d.kind, STOKE__IOT_NONE);
    assert_int_equal(st.limit, 8);
  }
}

static void test_workers_moved_voids_the_trial(void **state) {
  (void)state;
  stoke__iot_state st;
  stoke__iot_init(&st, 2);
  stoke__iot_decision d;
  stoke__iot_window w = win(10, 0.5, 2, 50, 0);
  stoke__iot_decide(&st, &w, &d);
  assert_int_equal(d.to, 4);
  stoke__iot_decide(&st, &w, &d); /* settle */
  w = win(10, 0.5, 1.0, 50, 0);   /* no gain, but the workers moved */
  w.workers = 4;
  stoke__iot_decide(&st, &w, &d);
  assert_int_equal(d.kind, STOKE__IOT_NONE);
  assert_int_equal(st.limit, 4); /* kept, not judged */
  assert_int_equal(st.ceiling, STOKE_IO_CONCURRENCY_MAX);
}

static void test_throttled_halves(void **state) {
  (void)state;
  stoke__iot_state st;
  stoke__iot_init(&st, 16);
  stoke__iot_decision d;
  /* 5 of 100 refused, starving and bound too: throttling comes first. */
  stoke__iot_window w = win(10, 0.5, 16, 100, 5);
  stoke__iot_decide(&st, &w, &d);
  assert_int_equal(d.kind, STOKE__IOT_FEWER);
  assert_int_equal(d.to, 8);
  assert_int_equal(st.ceiling, 8);
  assert_non_null(strstr(d.reason, "429/503"));
  stoke__iot_decide(&st, &w, &d); /* settle */
  stoke__iot_decide(&st, &w, &d);
  assert_int_equal(d.to, 4);
  /* Too few requests to judge a share: nothing. */
  stoke__iot_init(&st, 16);
  w = win(10, 0.5, 1, 5, 1);
  stoke__iot_decide(&st, &w, &d);
  assert_int_not_equal(d.kind, STOKE__IOT_FEWER);
  /* Never below one, and never more while throttled. */
  stoke__iot_init(&st, 1);
  w = win(10, 0.5, 1, 100, 50);
  stoke__iot_decide(&st, &w, &d);
  assert_int_equal(d.kind, STOKE__IOT_NONE);
  assert_int_equal(st.limit, 1);
}

static void test_quiet_or_not_bound_keeps(void **state) {
  (void)state;
  stoke__iot_state st;
  stoke__iot_init(&st, 8);
  stoke__iot_decision d;
  stoke__iot_window w = win(10, 0.01, 8, 100, 0); /* quiet, bound */
  stoke__iot_decide(&st, &w, &d);
  assert_int_equal(d.kind, STOKE__IOT_NONE);
  w = win(10, 0.60, 2, 100, 0); /* starving, the limit does not bind */
  stoke__iot_decide(&st, &w, &d);
  assert_int_equal(d.kind, STOKE__IOT_NONE);
  assert_int_equal(st.limit, 8);
  w = win(0, 0.6, 8, 0, 0); /* no steps: nothing */
  stoke__iot_decide(&st, &w, &d);
  assert_int_equal(d.kind, STOKE__IOT_NONE);
  /* At the most the client takes: no grow. */
  stoke__iot_init(&st, STOKE_IO_CONCURRENCY_MAX);
  w = win(10, 0.6, STOKE_IO_CONCURRENCY_MAX, 100, 0);
  stoke__iot_decide(&st, &w, &d);
  assert_int_equal(d.kind, STOKE__IOT_NONE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_latency_bound_doubles_then_keeps),
      cmocka_unit_test(test_no_gain_rolls_back_and_closes),
      cmocka_unit_test(test_workers_moved_voids_the_trial),
      cmocka_unit_test(test_throttled_halves),
      cmocka_unit_test(test_quiet_or_not_bound_keeps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
