/* test_deadline_whatif.c — the deadline arithmetic (stoke_deadline_check)
** and the what-if's consumer step (stoke_model.consumer_delay_ns): a step
** stretched by this run's spinning workers is predicted without that
** stretch where there are no workers, and as measured at the run's own W.
** Arithmetic only. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "stoke.h"
#include "test_util.h"

#define MS 1000000LL

static void test_deadline(void **state) {
  (void)state;
  stoke_deadline d;
  /* 100 epochs of 4 min = 6.67 h in 8 h: fits even at +15%. */
  assert_int_equal(
      stoke_deadline_check(240000 * MS, 100, 8 * 3600000 * MS, 0.15, &d), 0);
  assert_int_equal(d.verdict, STOKE_DEADLINE_FITS);
  assert_int_equal(d.total_ns, 100 * 240000 * MS);
  assert_true(d.low_ns < d.total_ns && d.total_ns < d.high_ns);
  assert_true(d.epochs_in_window > 119.9 && d.epochs_in_window < 120.1);
  assert_string_equal(stoke_deadline_verdict_name(d.verdict), "fits");
  /* 115 epochs: 7.67 h, +15% is 8.8 h, -15% 6.5 h: uncertain. */
  assert_int_equal(
      stoke_deadline_check(240000 * MS, 115, 8 * 3600000 * MS, 0.15, &d), 0);
  assert_int_equal(d.verdict, STOKE_DEADLINE_UNCERTAIN);
  /* 200 epochs: 13.3 h, -15% still 11.3 h: misses. */
  assert_int_equal(
      stoke_deadline_check(240000 * MS, 200, 8 * 3600000 * MS, 0.15, &d), 0);
  assert_int_equal(d.verdict, STOKE_DEADLINE_MISSES);
  assert_string_equal(stoke_deadline_verdict_name(d.verdict), "misses");
  assert_int_equal(stoke_deadline_check(0, 1, 1, 0.1, &d), STOKE_EINVAL);
  assert_int_equal(stoke_deadline_check(1, 0, 1, 0.1, &d), STOKE_EINVAL);
  assert_int_equal(stoke_deadline_check(1, 1, 0, 0.1, &d), STOKE_EINVAL);
  assert_int_equal(stoke_deadline_check(1, 1, 1, 1.0, &d), STOKE_EINVAL);
  assert_int_equal(stoke_deadline_check(1, 1, 1, 0.1, NULL), STOKE_EINVAL);
}

static stoke_model spin_model(int64_t delay) {
  stoke_model m;
  memset(&m, 0, sizeof m);
  m.struct_size = sizeof m;
  m.batch_size = 8;
  m.cores = 2;
  m.t_cpu_ns = 1 * MS; /* CPU-bound samples: 2 workers hold both cores */
  m.t_d_ns = 1 * MS;
  m.stage_ns[STOKE_STAGE_READ] = m.t_d_ns;
  m.t_c_ns = 5 * MS; /* as measured: 1 ms of it waiting for a core */
  m.consumer_delay_ns = delay;
  m.chunk = 1;
  m.n_batches = 16;
  m.run_delay_frac = -1;
  m.n_workers = 2;
  m.prefetch = 2;
  return m;
}

static int64_t step(const stoke_model *m, unsigned w, unsigned k) {
  stoke_prediction p;
  assert_int_equal(stoke_predict_step(m, w, k, &p), 0);
  return p.step_ns;
}

static void test_consumer_delay(void **state) {
  (void)state;
  stoke_model with = spin_model(1 * MS), without = spin_model(0);
  /* At the run's own W and K: as measured. */
  assert_int_equal(step(&with, 2, 2), step(&without, 2, 2));
  /* No workers: nothing competes for a core; the step's own 4 ms. */
  assert_int_equal(step(&with, 0, 2), 8 * MS + 4 * MS);
  assert_int_equal(step(&without, 0, 2), 8 * MS + 5 * MS);
  /* One worker uses half of what two do: half the delay, 4.5 ms. */
  int64_t s1 = step(&with, 1, 2);
  assert_true(s1 < step(&without, 1, 2));
  /* Sleeping samples use no core: a delay that was not ours stays. */
  stoke_model io = spin_model(1 * MS);
  io.t_cpu_ns = 0;
  io.t_io_ns = 1 * MS;
  stoke_model io0 = io;
  io0.consumer_delay_ns = 0;
  assert_int_equal(step(&io, 4, 2), step(&io0, 4, 2));
  assert_int_equal(step(&io, 2, 2), step(&io0, 2, 2));
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_deadline),
      cmocka_unit_test(test_consumer_delay),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
