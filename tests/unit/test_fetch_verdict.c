/* test_fetch_verdict.c — the fetch stage's verdict (stoke_fetch_diagnose)
** on hand-made numbers, and the lines its advice makes. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "stoke.h"

/* 100 steps of 100 ms (10 ms computing, 90 ms waiting) on 4 workers, over
** remote shards: 4000 requests of 10 ms (p50) in 10 s, 4 in flight at
** once, io_concurrency 8.  So 40 requests a step, fetched 4 at a time:
** 100 ms a step, all of the step. */
static stoke_stats remote_run(void) {
  stoke_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  st.steps = 100;
  st.n_workers = 4;
  st.wait.total_ns = 9000000000;
  st.compute.total_ns = 1000000000;
  st.wait_ratio = 0.9;
  st.fetch_remote = 1;
  st.fetch_requests = 4000;
  st.fetch_bytes = 100000000;
  st.fetch_bytes_per_s = 1e7;
  st.fetch_latency_p50_ms = 10;
  st.fetch_latency_p95_ms = 20;
  st.fetch_in_flight = 4;
  st.io_concurrency = 8;
  return st;
}

static void test_latency_bound(void **state) {
  (void)state;
  stoke_stats st = remote_run();
  stoke_fetch_diagnosis d;
  assert_int_equal(stoke_fetch_diagnose(&st, &d), 0);
  assert_int_equal(d.verdict, STOKE_FETCH_LATENCY);
  assert_true(d.requests_per_step > 39.9 && d.requests_per_step < 40.1);
  assert_true(d.fetch_step_ms > 99.9 && d.fetch_step_ms < 100.1);
  /* 40 in flight fetch a step's requests in its 10 ms of computing. */
  assert_int_equal(d.io_concurrency, 40);
  assert_true(d.predicted_step_ms > 9.9 && d.predicted_step_ms < 10.1);
  assert_string_equal(stoke_fetch_verdict_name(d.verdict), "latency-bound");
}

static void test_idle_readers_are_not_latency_bound(void **state) {
  (void)state;
  stoke_stats st = remote_run();
  st.fetch_in_flight = 2; /* half the 4 readers idle: the fetch waits for
                             something else */
  st.fetch_latency_p50_ms = 20;
  stoke_fetch_diagnosis d;
  assert_int_equal(stoke_fetch_diagnose(&st, &d), 0);
  assert_int_equal(d.verdict, STOKE_FETCH_NONE);
}

static void test_latency_that_does_not_explain_the_wait(void **state) {
  (void)state;
  stoke_stats st = remote_run();
  st.fetch_latency_p50_ms = 1; /* 10 ms of a 100 ms step */
  stoke_fetch_diagnosis d;
  assert_int_equal(stoke_fetch_diagnose(&st, &d), 0);
  assert_int_equal(d.verdict, STOKE_FETCH_NONE);
}

static void test_throttled(void **state) {
  (void)state;
  stoke_stats st = remote_run();
  st.fetch_throttled = 200; /* 5% */
  stoke_fetch_diagnosis d;
  assert_int_equal(stoke_fetch_diagnose(&st, &d), 0);
  assert_int_equal(d.verdict, STOKE_FETCH_THROTTLED);
  assert_int_equal(d.io_concurrency, 4);
  assert_true(d.throttled_frac > 0.049 && d.throttled_frac < 0.051);
  st.fetch_throttled = 80; /* 2%: under the threshold, latency again */
  assert_int_equal(stoke_fetch_diagnose(&st, &d), 0);
  assert_int_equal(d.verdict, STOKE_FETCH_LATENCY);
}

static void test_local_or_busy_runs_have_none(void **state) {
  (void)state;
  stoke_stats st = remote_run();
  st.fetch_remote = 0;
  stoke_fetch_diagnosis d;
  assert_int_equal(stoke_fetch_diagnose(&st, &d), 0);
  assert_int_equal(d.verdict, STOKE_FETCH_NONE);
  st = remote_run();
  st.wait_ratio = 0.05; /* busy: nothing to win */
  assert_int_equal(stoke_fetch_diagnose(&st, &d), 0);
  assert_int_equal(d.verdict, STOKE_FETCH_NONE);
  assert_int_equal(stoke_fetch_diagnose(NULL, &d), STOKE_EINVAL);
}

static void python_words(void *user, int setting, unsigned v,
                         unsigned workers, char *buf, size_t n) {
  (void)user;
  (void)workers;
  if (setting == STOKE_SETTING_IO_CONCURRENCY)
    snprintf(buf, n, "io_concurrency=%u", v);
  else
    snprintf(buf, n, "num_workers=%u", v);
}

static void test_advice_lines(void **state) {
  (void)state;
  stoke_advice a;
  stoke_advice_basis b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  a.kind = STOKE_ADVICE_IO_CONCURRENCY;
  a.io_concurrency = 40;
  a.n_workers = 4;
  a.now_step_ns = 100000000;
  a.predicted_step_ns = 10000000;
  a.speedup = 10;
  b.run_workers = 4;
  b.fetch_latency_ms = 10;
  b.fetch_requests_per_step = 40;
  b.fetch_in_flight = 4;
  b.fetch_step_ms = 100;
  char line[512];
  assert_int_equal(stoke_advice_format(&a, &b, NULL, line, sizeof line), 0);
  assert_non_null(strstr(line, "latency-bound"));
  assert_non_null(strstr(line, "--io-concurrency 40"));
  assert_null(strstr(line, "-j ")); /* the workers stay */
  stoke_advice_words w = {python_words, NULL};
  assert_int_equal(stoke_advice_format(&a, &b, &w, line, sizeof line), 0);
  assert_non_null(strstr(line, "io_concurrency=40"));
  a.n_workers = 40; /* the workers were the fewer readers */
  assert_int_equal(stoke_advice_format(&a, &b, &w, line, sizeof line), 0);
  assert_non_null(strstr(line, "num_workers=40"));

  a.kind = STOKE_ADVICE_FEWER_CONNECTIONS;
  a.io_concurrency = 4;
  b.run_io_concurrency = 8;
  b.fetch_throttled_frac = 0.05;
  assert_int_equal(stoke_advice_format(&a, &b, NULL, line, sizeof line), 0);
  assert_non_null(strstr(line, "throttled"));
  assert_non_null(strstr(line, "5.0%"));
  assert_non_null(strstr(line, "--io-concurrency 4"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_latency_bound),
      cmocka_unit_test(test_idle_readers_are_not_latency_bound),
      cmocka_unit_test(test_latency_that_does_not_explain_the_wait),
      cmocka_unit_test(test_throttled),
      cmocka_unit_test(test_local_or_busy_runs_have_none),
      cmocka_unit_test(test_advice_lines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
