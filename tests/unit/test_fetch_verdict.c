/* test_fetch_verdict.c — the fetch stage's verdict (stoke_fetch_diagnose)
** on hand-made numbers, the ladder's rungs for a saturated link
** (stoke_advise), and the lines its advice makes. */
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

/* The same readers and the same step, told apart by what the requests
** spend their time on: the round trip (latency) or the body (bandwidth). */
static void test_bandwidth_bound(void **state) {
  (void)state;
  stoke_stats st = remote_run();
  st.fetch_body_frac = 0.9;
  stoke_fetch_diagnosis d;
  assert_int_equal(stoke_fetch_diagnose(&st, &d), 0);
  assert_int_equal(d.verdict, STOKE_FETCH_BANDWIDTH);
  assert_string_equal(stoke_fetch_verdict_name(d.verdict), "bandwidth-bound");
  /* 10 MB/s over 10 steps a second: 1 MB a step, 100 ms at that rate. */
  assert_true(d.bytes_per_step > 0.999e6 && d.bytes_per_step < 1.001e6);
  assert_true(d.link_step_ms > 99.9 && d.link_step_ms < 100.1);
  assert_true(d.body_frac > 0.89 && d.body_frac < 0.91);
  assert_int_equal(d.io_concurrency, 0); /* more in flight is no advice */
  /* At the threshold it is bandwidth; under it, the round trip. */
  st.fetch_body_frac = STOKE_FETCH_BODY_FRAC;
  assert_int_equal(stoke_fetch_diagnose(&st, &d), 0);
  assert_int_equal(d.verdict, STOKE_FETCH_BANDWIDTH);
  st.fetch_body_frac = 0.4;
  assert_int_equal(stoke_fetch_diagnose(&st, &d), 0);
  assert_int_equal(d.verdict, STOKE_FETCH_LATENCY);
}

static void test_idle_readers_are_not_bandwidth_bound(void **state) {
  (void)state;
  stoke_stats st = remote_run();
  st.fetch_body_frac = 0.9;
  st.fetch_in_flight = 2; /* half the readers idle: not the link */
  st.fetch_latency_p50_ms = 20;
  stoke_fetch_diagnosis d;
  assert_int_equal(stoke_fetch_diagnose(&st, &d), 0);
  assert_int_equal(d.verdict, STOKE_FETCH_NONE);
  st = remote_run();
  st.fetch_body_frac = 0.9;
  st.fetch_latency_p50_ms = 1; /* the fetch explains 10 ms of 100 */
  assert_int_equal(stoke_fetch_diagnose(&st, &d), 0);
  assert_int_equal(d.verdict, STOKE_FETCH_NONE);
  st = remote_run();
  st.fetch_body_frac = 0.9;
  st.fetch_throttled = 200; /* pushed back: throttled comes first */
  assert_int_equal(stoke_fetch_diagnose(&st, &d), 0);
  assert_int_equal(d.verdict, STOKE_FETCH_THROTTLED);
}

/* 100 steps of 100 ms (10 ms computing) on 4 workers, 4 samples a step,
** each one request of 100 KB taking 100 ms (p50), 95% of it receiving
** the body: 4 MB/s, 4 in flight.  Each sample's read is the fetch
** (100 ms), its decode 2 ms of CPU.  Stored images of 1024 px on the
** longer side, of which the transform needs 512. */
static stoke_stats saturated_run(void) {
  stoke_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  st.steps = 100;
  st.samples = 400;
  st.n_workers = 4;
  st.prefetch = 2;
  st.wait.count = st.compute.count = 100;
  st.wait.total_ns = 9000000000;
  st.wait.mean_ns = st.wait.p50_ns = st.wait.p95_ns = 90000000;
  st.wait.p99_ns = st.wait.max_ns = 90000000;
  st.compute.total_ns = 1000000000;
  st.compute.mean_ns = st.compute.p50_ns = st.compute.p95_ns = 10000000;
  st.compute.p99_ns = st.compute.max_ns = 10000000;
  st.wait_ratio = 0.9;
  st.queue_empty_frac = 1.0;
  stoke_dist *rd = &st.stage[STOKE_STAGE_READ];
  rd->count = 400;
  rd->total_ns = 400 * (int64_t)100000000;
  rd->mean_ns = rd->p50_ns = rd->p95_ns = rd->p99_ns = rd->max_ns = 100000000;
  stoke_dist *dd = &st.stage[STOKE_STAGE_DECODE];
  dd->count = 400;
  dd->total_ns = 400 * (int64_t)2000000;
  dd->mean_ns = dd->p50_ns = dd->p95_ns = dd->p99_ns = dd->max_ns = 2000000;
  st.worker_busy_ns = rd->total_ns + dd->total_ns;
  st.worker_cpu_ns = dd->total_ns;
  st.images = 400;
  st.image_side_mean = 1024;
  st.image_pixels_mean = 1024.0 * 768;
  st.image_keep_side = 512;
  st.fetch_remote = 1;
  st.fetch_requests = 400;
  st.fetch_bytes = 40000000;
  st.fetch_bytes_per_s = 4e6;
  st.fetch_latency_p50_ms = 100;
  st.fetch_latency_p95_ms = 110;
  st.fetch_in_flight = 4;
  st.fetch_body_frac = 0.95;
  st.io_concurrency = 8;
  return st;
}

static const stoke_advice *find(const stoke_advice *a, size_t n, int kind) {
  for (size_t i = 0; i < n; i++)
    if (a[i].kind == kind) return &a[i];
  return NULL;
}

static void test_bandwidth_advice(void **state) {
  (void)state;
  stoke_stats st = saturated_run();
  stoke_fetch_diagnosis d;
  assert_int_equal(stoke_fetch_diagnose(&st, &d), 0);
  assert_int_equal(d.verdict, STOKE_FETCH_BANDWIDTH);
  stoke_advice a[STOKE_MAX_ADVICE];
  size_t n = 0;
  assert_int_equal(stoke_advise(&st, NULL, 2, a, STOKE_MAX_ADVICE, &n), 0);
  assert_null(find(a, n, STOKE_ADVICE_IO_CONCURRENCY));
  /* More workers would be more requests sharing the same rate. */
  assert_null(find(a, n, STOKE_ADVICE_WORKERS));
  /* The cache: without the 100 ms read, 4 samples of 2 ms on 4 workers
  ** hide under the 10 ms step. */
  const stoke_advice *c = find(a, n, STOKE_ADVICE_REMOTE_CACHE);
  assert_non_null(c);
  assert_true(c->now_step_ns > 99000000 && c->now_step_ns < 101000000);
  assert_true(c->predicted_step_ns >= 10000000 &&
              c->predicted_step_ns < 15000000);
  assert_non_null(strstr(c->text, "bandwidth-bound"));
  assert_non_null(strstr(c->text, "--cache DIR"));
  assert_non_null(strstr(c->text, "95%"));
  assert_non_null(strstr(c->text, "4.0 MB/s for 100.0 KB a sample"));
  /* Pre-resized to 512 px a side: a quarter of the pixels, so a quarter
  ** of the 100 ms a step's bytes take at 4 MB/s. */
  const stoke_advice *p = NULL;
  for (size_t i = 0; i < n; i++)
    if (a[i].kind == STOKE_ADVICE_PRESIZE && strstr(a[i].text, "bandwidth"))
      p = &a[i];
  assert_non_null(p);
  assert_int_equal(p->max_side, 512);
  assert_true(p->predicted_step_ns > 24900000 &&
              p->predicted_step_ns < 25100000);
  assert_non_null(strstr(p->text, "--max-side 512"));
  assert_non_null(strstr(p->text, "25% of 100.0 KB a sample"));
  assert_non_null(strstr(p->text, "25.00 ms at 4.0 MB/s"));
  /* Images already no larger than the transform keeps: the cache only. */
  st.image_side_mean = 400;
  assert_int_equal(stoke_advise(&st, NULL, 2, a, STOKE_MAX_ADVICE, &n), 0);
  assert_non_null(find(a, n, STOKE_ADVICE_REMOTE_CACHE));
  for (size_t i = 0; i < n; i++)
    if (a[i].kind == STOKE_ADVICE_PRESIZE)
      assert_null(strstr(a[i].text, "bandwidth"));
  /* The same run waiting on round trips gets none of these. */
  st = saturated_run();
  st.fetch_body_frac = 0.05;
  assert_int_equal(stoke_advise(&st, NULL, 2, a, STOKE_MAX_ADVICE, &n), 0);
  assert_null(find(a, n, STOKE_ADVICE_REMOTE_CACHE));
  assert_non_null(find(a, n, STOKE_ADVICE_IO_CONCURRENCY));
  assert_non_null(find(a, n, STOKE_ADVICE_WORKERS)); /* the model's rung */
}

static void python_words(void *user, int setting, unsigned v,
                         unsigned workers, char *buf, size_t n) {
  (void)user;
  (void)workers;
  if (setting == STOKE_SETTING_IO_CONCURRENCY)
    snprintf(buf, n, "io_concurrency=%u", v);
  else if (setting == STOKE_SETTING_CACHE)
    snprintf(buf, n, "cache=DIR");
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

  a.kind = STOKE_ADVICE_REMOTE_CACHE;
  a.n_workers = 4;
  b.fetch_body_frac = 0.9;
  b.fetch_bytes_per_s = 2.5e6;
  b.fetch_bytes_per_sample = 12000;
  assert_int_equal(stoke_advice_format(&a, &b, NULL, line, sizeof line), 0);
  assert_non_null(strstr(line, "bandwidth-bound"));
  assert_non_null(strstr(line, "90%"));
  assert_non_null(strstr(line, "2.5 MB/s for 12.0 KB a sample"));
  assert_non_null(strstr(line, "--cache DIR"));
  assert_int_equal(stoke_advice_format(&a, &b, &w, line, sizeof line), 0);
  assert_non_null(strstr(line, "cache=DIR"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_latency_bound),
      cmocka_unit_test(test_idle_readers_are_not_latency_bound),
      cmocka_unit_test(test_latency_that_does_not_explain_the_wait),
      cmocka_unit_test(test_throttled),
      cmocka_unit_test(test_local_or_busy_runs_have_none),
      cmocka_unit_test(test_bandwidth_bound),
      cmocka_unit_test(test_idle_readers_are_not_bandwidth_bound),
      cmocka_unit_test(test_bandwidth_advice),
      cmocka_unit_test(test_advice_lines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
