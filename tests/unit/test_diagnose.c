/* test_diagnose.c — the verdict rules on hand-made snapshots. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "stoke.h"
#include "test_util.h"

static stoke_stats make(double wait_ratio, double empty, int64_t wait_p50,
                        int64_t wait_p99, int64_t compute_p50) {
  stoke_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  st.steps = 100;
  st.wait_ratio = wait_ratio;
  st.queue_empty_frac = empty;
  st.wait.p50_ns = wait_p50;
  st.wait.p99_ns = wait_p99;
  st.compute.p50_ns = compute_p50;
  st.n_workers = 4;
  return st;
}

static void test_verdicts(void **state) {
  (void)state;
  stoke_diagnosis d;
  stoke_stats busy = make(0.02, 0.01, 10000, 50000, 12000000);
  assert_int_equal(stoke_diagnose(&busy, &d), 0);
  assert_int_equal(d.verdict, STOKE_VERDICT_BUSY);
  assert_non_null(strstr(d.reason, "busy"));

  stoke_stats starving = make(0.95, 1.0, 150000000, 170000000, 100000);
  stoke_diagnose(&starving, &d);
  assert_int_equal(d.verdict, STOKE_VERDICT_STARVING);
  assert_non_null(strstr(d.reason, "100%"));

  stoke_stats inline_fill = make(0.95, 1.0, 150000000, 170000000, 100000);
  inline_fill.n_workers = 0;
  stoke_diagnose(&inline_fill, &d);
  assert_int_equal(d.verdict, STOKE_VERDICT_STARVING);
  assert_non_null(strstr(d.reason, "0 workers"));

  stoke_stats variance = make(0.30, 0.10, 10000, 80000000, 12000000);
  stoke_diagnose(&variance, &d);
  assert_int_equal(d.verdict, STOKE_VERDICT_VARIANCE);
  assert_true(d.tail_ratio > 5.0);

  stoke_stats few = make(0.9, 1.0, 1, 1, 1);
  few.steps = 1;
  stoke_diagnose(&few, &d);
  assert_int_equal(d.verdict, STOKE_VERDICT_UNKNOWN);
}

static void test_thresholds_are_the_documented_ones(void **state) {
  (void)state;
  stoke_diagnosis d;
  stoke_stats edge = make(STOKE_BUSY_WAIT_RATIO, 0.9, 1, 1, 1);
  stoke_diagnose(&edge, &d);
  assert_int_equal(d.verdict, STOKE_VERDICT_STARVING);
  stoke_stats under = make(STOKE_BUSY_WAIT_RATIO - 0.001, 0.9, 1, 1, 1);
  stoke_diagnose(&under, &d);
  assert_int_equal(d.verdict, STOKE_VERDICT_BUSY);
  assert_string_equal(stoke_verdict_name(STOKE_VERDICT_VARIANCE), "variance");
  assert_string_equal(stoke_verdict_name(42), "unknown");
  assert_int_equal(stoke_diagnose(NULL, &d), STOKE_EINVAL);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_verdicts),
      cmocka_unit_test(test_thresholds_are_the_documented_ones),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
