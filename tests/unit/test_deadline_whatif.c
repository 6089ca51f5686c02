/* test_deadline_whatif.c — the deadline arithmetic (stoke_deadline_check)
** and the what-if's consumer step (stoke_model.consumer_delay_ns): a step
** stretched by this run's spinning workers is predicted without that
** stretch where there are no workers, and as measured at the run's own W;
** and the other work on the cores (stoke_model.external_cpu): a run whose
** workers queued for a core behind other threads is predicted, for more
** workers, with those threads still there.  Arithmetic only. */
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

/* Two spinning workers on 2 cores, 1 ms of CPU per sample, each waiting
** as long for a core as it ran (schedstat over the loader's window: run
** delay 1 per ns on a core): two other threads' worth of work shared the
** cores.  A 0.5 ms step: the producer is the bound. */
static stoke_stats loaded_snapshot(int64_t delay_per_sample) {
  int64_t t_d = 1 * MS + delay_per_sample;
  stoke_stats st = tu_snap(2, 2, t_d, (double)MS / (double)t_d, MS / 2,
                           0.9, 0.9);
  st.threads_active = 2;
  st.threads_run_ns = 800 * MS;
  st.threads_delay_ns = 800 * delay_per_sample;
  return st;
}

static void test_external_cpu(void **state) {
  (void)state;
  stoke_stats st = loaded_snapshot(1 * MS);
  stoke_model m;
  assert_int_equal(stoke_model_init(&m, &st, NULL, 2), 0);
  assert_true(m.run_delay_frac > 0.99 && m.run_delay_frac < 1.01);
  /* r P + P - n = 2 + 2 - 2. */
  assert_true(m.external_cpu > 1.9 && m.external_cpu < 2.1);
  assert_int_equal(m.t_cpu_ns, 1 * MS);
  assert_int_equal(m.t_io_ns, 0);
  m.n_batches = 100;
  /* At the run's own W: B t_d / W = 8 ms, as measured (the cores were not
  ** the workers' alone; a machine of our own would say 4 ms). */
  int64_t s2 = step(&m, 2, 2);
  assert_true(s2 > 76 * MS / 10 && s2 < 84 * MS / 10);
  /* 4 workers next to the same 2 threads' worth: 4 of 6 runnable threads
  ** on 2 cores, 8 ms x 2 cores x 6 / 8 ... = 6 ms a batch, not the 4 ms
  ** of 2 cores that are all theirs (issue 13, spin at W >= 4). */
  int64_t s4 = step(&m, 4, 2);
  assert_true(s4 > 57 * MS / 10 && s4 < 63 * MS / 10);
  int64_t s8 = step(&m, 8, 2);
  assert_true(s8 < s4 && s8 > 4 * MS);
  /* Editable: 0 predicts a machine of our own. */
  stoke_model quiet = m;
  quiet.external_cpu = 0;
  assert_true(step(&quiet, 4, 2) < 42 * MS / 10);
  /* A spinning consumer's core is already left out of the workers' cores:
  ** of the 2 threads' worth, 1 is then the consumer's. */
  stoke_model spin_step = m;
  spin_step.consumer_cpu = 1;
  stoke_prediction p;
  assert_int_equal(stoke_predict_step(&spin_step, 4, 2, &p), 0);
  assert_true(p.producer_batch_ns > 95 * MS / 10); /* 1 core, 4+1 threads:
                                                       8 x 1 ms x 5 / 4 */
  /* A quiet machine (a wake-up's wait, r = 0.01): next to nothing. */
  st = loaded_snapshot(MS / 100);
  assert_int_equal(stoke_model_init(&m, &st, NULL, 2), 0);
  assert_true(m.external_cpu < 0.05);
  /* Without the loader's window (live threads only) nothing is known. */
  st = loaded_snapshot(1 * MS);
  st.threads_active = 0;
  assert_int_equal(stoke_model_init(&m, &st, NULL, 2), 0);
  assert_true(m.external_cpu == 0);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_deadline),
      cmocka_unit_test(test_consumer_delay),
      cmocka_unit_test(test_external_cpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
