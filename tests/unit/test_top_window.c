/* test_top_window.c — `stoke top`'s window (cli/top_window.c): two
** snapshots of one loader, the later minus the earlier, and the warm-up's
** end between them, when the totals start again from zero. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "test_util.h"

#define SEC 1000000000LL

/* A snapshot of a loader with 2 workers, taken at t seconds after its
** creation, whose totals say busy_s of the workers' time and steps
** measured steps. */
static stoke_live snap(double t, double busy_s, uint64_t steps) {
  stoke_live s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  s.kind = STOKE_LIVE_LOADER;
  s.created_ns = 5 * SEC;
  s.time_ns = s.created_ns + (int64_t)(t * 1e9);
  s.publishes = (uint64_t)(t * 10);
  s.stats.struct_size = sizeof s.stats;
  s.stats.n_workers = 2;
  s.stats.prefetch = 2;
  s.stats.worker_busy_ns = (int64_t)(busy_s * 1e9);
  s.stats.worker_cpu_ns = s.stats.worker_busy_ns;
  s.stats.steps = steps;
  s.stats.samples = 8 * steps;
  s.stats.wait.count = s.stats.compute.count = steps;
  s.stats.queue_depth_hist[0] = steps;
  s.wait_hist[3] = steps;
  return s;
}

static void assert_fracs_sane(const top_window *w) {
  assert_true(w->busy_frac >= 0 && w->busy_frac <= 1);
  assert_true(w->slot_wait_frac >= 0 && w->slot_wait_frac <= 1);
  assert_true(w->idle_frac >= 0 && w->idle_frac <= 1);
  assert_true(w->busy_frac + w->slot_wait_frac + w->idle_frac <= 1 + 1e-9);
}

/* Both in the steady state: the difference, over the time between them. */
static void test_the_window_is_the_difference(void **state) {
  (void)state;
  stoke_live then = snap(10, 4, 100), now = snap(12, 6, 150);
  top_window w;
  top_window_make(&now, &then, &w);
  assert_false(w.restarted);
  assert_true(w.seconds > 1.999 && w.seconds < 2.001);
  assert_int_equal(w.stats.steps, 50);
  assert_int_equal(w.stats.samples, 400);
  /* 2 s of workers' time over 2 s of 2 workers: half busy. */
  assert_true(w.busy_frac > 0.499 && w.busy_frac < 0.501);
  assert_fracs_sane(&w);
}

/* The warm-up ended after the first snapshot, and the second counts no
** measured step yet: its totals (the workers' time since the warm-up
** ended) are below the first's (since the loader began).  Before the fix
** only the steps were compared, 0 against 0, and top printed the
** difference: "busy -96%, idle 196%". */
static void test_the_warm_up_ends_before_the_first_measured_step(void **state) {
  (void)state;
  stoke_live then = snap(1.0, 1.9, 0), now = snap(1.2, 0.02, 0);
  top_window w;
  top_window_make(&now, &then, &w);
  assert_true(w.restarted);
  assert_int_equal(w.stats.worker_busy_ns, now.stats.worker_busy_ns);
  assert_fracs_sane(&w);
  /* Any one total that went down says the same. */
  stoke_live a = snap(1.0, 1, 0), b = snap(1.2, 1.2, 0);
  b.stats.stage[STOKE_STAGE_READ].count = 0;
  a.stats.stage[STOKE_STAGE_READ].count = 40;
  top_window_make(&b, &a, &w);
  assert_true(w.restarted);
  a = snap(1.0, 1, 0), b = snap(1.2, 1.2, 0);
  a.wait_hist[5] = 3;
  top_window_make(&b, &a, &w);
  assert_true(w.restarted);
}

/* Both inside the warm-up: the totals only grow, so it is a window like
** any other (not "since the warm-up"). */
static void test_inside_the_warm_up_totals_only_grow(void **state) {
  (void)state;
  stoke_live then = snap(0.5, 0.8, 0), now = snap(0.7, 1.1, 0);
  top_window w;
  top_window_make(&now, &then, &w);
  assert_false(w.restarted);
  assert_true(w.busy_frac > 0.74 && w.busy_frac < 0.76);
  assert_fracs_sane(&w);
}

/* One snapshot: since the warm-up, over the time since creation. */
static void test_one_snapshot_is_since_the_warm_up(void **state) {
  (void)state;
  stoke_live now = snap(4, 2, 30);
  top_window w;
  top_window_make(&now, &now, &w);
  assert_true(w.restarted);
  assert_int_equal(w.stats.steps, 30);
  assert_fracs_sane(&w);
}

/* The other load's line: not measured, steady, moved (with how far the
** figures may be off); within 79 columns on a large machine too.  And the
** fetch stage's, only over remote shards. */
static void test_outside_and_fetch_lines(void **state) {
  (void)state;
  stoke_live now = snap(4, 2, 30);
  top_window w;
  top_window_make(&now, &now, &w);
  char line[160];
  top_outside_line(&w.stats, 2, line, sizeof line);
  assert_string_equal(line, "other load: not measured yet (it is, from the "
                            "warm-up's end)");
  now.stats.outside_windows = 12;
  now.stats.outside_mean_cores = 0.12;
  now.stats.outside_min_cores = 0.04;
  now.stats.outside_max_cores = 0.2;
  top_window_make(&now, &now, &w);
  top_outside_line(&w.stats, 2, line, sizeof line);
  assert_string_equal(line, "other load: 0.1 of 2 cores (0.0-0.2 over 12 "
                            "windows): steady");
  now.stats.outside_moved = 1;
  now.stats.outside_max_cores = 1.04;
  now.stats.outside_shift_frac = 0.51;
  top_window_make(&now, &now, &w);
  top_outside_line(&w.stats, 2, line, sizeof line);
  assert_string_equal(line, "other load: 0.1 of 2 cores (0.0-1.0): moved, "
                            "figures off by up to 51%");
  now.stats.outside_delay_moved = 1; /* the run delay said it */
  top_window_make(&now, &now, &w);
  top_outside_line(&w.stats, 2, line, sizeof line);
  assert_string_equal(line, "other load: 0.1 of 2 cores (0.0-1.0): moved "
                            "(delay), off by up to 51%");
  now.stats.outside_mean_cores = 100.25;
  now.stats.outside_min_cores = 10.5;
  now.stats.outside_max_cores = 190.5;
  now.stats.outside_shift_frac = 1;
  top_outside_line(&now.stats, 256, line, sizeof line);
  assert_true(strlen(line) <= 79);

  assert_int_equal(top_fetch_line(&w.stats, line, sizeof line), 0);
  now.stats.fetch_remote = 1;
  now.stats.fetch_bytes_per_s = 12.3e6;
  now.stats.fetch_latency_p50_ms = 21.5;
  now.stats.fetch_latency_p95_ms = 80;
  now.stats.fetch_retries = 1;
  now.stats.fetch_throttled = 2;
  top_window_make(&now, &now, &w);
  assert_int_equal(top_fetch_line(&w.stats, line, sizeof line), 1);
  assert_string_equal(line, "fetch: 12.3 MB/s, p50 21.5 ms, p95 80 ms, 1 "
                            "retry, 2 throttled");
  now.stats.fetch_bytes_per_s = 1.5e9;
  now.stats.fetch_latency_p50_ms = 12345;
  now.stats.fetch_latency_p95_ms = 98765;
  now.stats.fetch_retries = 1234567;
  now.stats.fetch_throttled = 1234567;
  top_fetch_line(&now.stats, line, sizeof line);
  assert_string_equal(line, "fetch: 1.5 GB/s, p50 12.3 s, p95 98.8 s, "
                            "1234567 retries, 1234567 throttled");
  assert_true(strlen(line) <= 79);

  /* The remote cache's line: only with a cache; the counts are totals
  ** from the source's open, the same in every window. */
  strcpy(line, "untouched");
  assert_int_equal(top_rcache_line(&w.stats, line, sizeof line), 0);
  assert_string_equal(line, "untouched");
  now.stats.rcache_used = 1;
  now.stats.rcache_hits = 1;
  now.stats.rcache_bytes_cached = 850;
  now.stats.rcache_misses = 12;
  now.stats.rcache_bytes_fetched = 340500000;
  top_window_make(&now, &now, &w);
  assert_int_equal(top_rcache_line(&w.stats, line, sizeof line), 1);
  assert_string_equal(line, "cache: 1 hit (850 B), 12 fetched (340 MB)");
  now.stats.rcache_hits = 4000000000u;
  now.stats.rcache_bytes_cached = 1.5e15;
  now.stats.rcache_uncached = 4000000000u;
  now.stats.rcache_evicted = 4000000000u;
  top_rcache_line(&now.stats, line, sizeof line);
  /* Longer than a frame's row: the frame cuts it at 79 columns (add()). */
  assert_string_equal(line, "cache: 4000000000 hits (1.5 PB), 12 fetched "
                            "(340 MB), 4000000000 uncached, 4000000000 "
                            "evicted");
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_the_window_is_the_difference),
      cmocka_unit_test(test_the_warm_up_ends_before_the_first_measured_step),
      cmocka_unit_test(test_inside_the_warm_up_totals_only_grow),
      cmocka_unit_test(test_one_snapshot_is_since_the_warm_up),
      cmocka_unit_test(test_outside_and_fetch_lines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
