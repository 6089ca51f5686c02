#define _GNU_SOURCE
/* test_export.c — the exporter's schedule (src/stats/export.c): the JSON
** lines that come due are written by the exporter's own thread, not the
** driving one, numbered by their steps and in order; an epoch's end writes
** the lines still due, then its own, before it returns; without the thread
** the driving thread writes them as they come due; the metrics file is
** rewritten on the exporter's timer with no step at all; a stoke_twoclock
** that exports runs a thread named stoke-export while it lives. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"
#include "os/os.h"
#include "stats/export.h"

static char dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "%s/stoke-export-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* What the fake owner's fill saw: how often, and from which thread. */
typedef struct owner {
  pthread_mutex_t mu;
  pthread_t driver;
  unsigned fills, fills_elsewhere;
  uint64_t steps; /* what the snapshot says */
} owner;

static void fake_fill(void *ctx, stoke_stats *out) {
  owner *o = ctx;
  pthread_mutex_lock(&o->mu);
  o->fills++;
  if (!pthread_equal(pthread_self(), o->driver)) o->fills_elsewhere++;
  out->steps = o->steps;
  out->n_workers = 3;
  pthread_mutex_unlock(&o->mu);
}

static unsigned fills_elsewhere(owner *o) {
  pthread_mutex_lock(&o->mu);
  unsigned n = o->fills_elsewhere;
  pthread_mutex_unlock(&o->mu);
  return n;
}

static void nap(void) {
  struct timespec ts = {0, 2000000};
  nanosleep(&ts, NULL);
}

/* Lines of kind "steps" and "epoch" in path, and the steps' numbers. */
static size_t read_lines(const char *path, char kinds[][8], uint64_t *step,
                         size_t cap) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[2048];
  size_t n = 0;
  while (n < cap && fgets(line, sizeof line, f)) {
    const char *k = strstr(line, "\"kind\":\"");
    assert_non_null(k);
    snprintf(kinds[n], 8, "%.5s", k + 8);
    const char *s = strstr(line, "\"step\":");
    step[n] = s ? strtoull(s + 7, NULL, 10) : 0;
    n++;
  }
  fclose(f);
  return n;
}

static size_t count_lines(const char *path) {
  char kinds[64][8];
  uint64_t step[64];
  return read_lines(path, kinds, step, 64);
}

static void init(stoke__exporter *e, owner *o, const char *jsonl,
                 const char *prom, int64_t every_ns, uint64_t every) {
  pthread_mutex_init(&o->mu, NULL);
  o->driver = pthread_self();
  stoke_stats zero;
  memset(&zero, 0, sizeof zero);
  zero.struct_size = sizeof zero;
  char err[256];
  TU_OK(stoke__exporter_init(e, NULL, prom, every_ns, jsonl, every, "t", 2,
                             &zero, fake_fill, o, err, sizeof err));
}

/* Lines come due every 10 steps: the thread writes them while the driving
** thread does nothing more; the epoch's line follows the lines due before
** it; the stop writes the rest. */
static void test_lines_on_the_exporters_thread(void **state) {
  (void)state;
  char jsonl[300];
  snprintf(jsonl, sizeof jsonl, "%s/a.jsonl", dir);
  stoke__exporter e;
  owner o = {0};
  init(&e, &o, jsonl, NULL, 0, 10);
  stoke__exporter_start(&e, NULL);
  for (int i = 0; i < 35; i++) stoke__exporter_step(&e);
  /* Hang guard only: the thread writes the 3 lines whenever it runs. */
  for (int i = 0; i < 15000 && count_lines(jsonl) < 3; i++) nap();
  assert_int_equal(count_lines(jsonl), 3);
  assert_true(fills_elsewhere(&o) >= 1);
  for (int i = 0; i < 25; i++) stoke__exporter_step(&e); /* 60 */
  stoke_epoch_stats rec = {0};
  rec.epoch = 0;
  rec.batches = 60;
  stoke__exporter_epoch(&e, &rec);
  char kinds[64][8];
  uint64_t step[64];
  size_t n = read_lines(jsonl, kinds, step, 64);
  assert_int_equal(n, 7); /* written before _epoch returned */
  for (size_t i = 0; i < 6; i++) {
    assert_string_equal(kinds[i], "steps");
    assert_int_equal(step[i], 10 * (i + 1));
  }
  assert_string_equal(kinds[6], "epoch");
  for (int i = 0; i < 25; i++) stoke__exporter_step(&e); /* 85 */
  stoke__exporter_stop(&e, NULL);
  n = read_lines(jsonl, kinds, step, 64);
  assert_int_equal(n, 9);
  assert_int_equal(step[7], 70);
  assert_int_equal(step[8], 80);
  stoke__exporter_free(&e, NULL);
  pthread_mutex_destroy(&o.mu);
}

/* Never started (no thread): each line is written by the step that made
** it due, on the driving thread. */
static void test_lines_without_the_thread(void **state) {
  (void)state;
  char jsonl[300], prom[300];
  snprintf(jsonl, sizeof jsonl, "%s/b.jsonl", dir);
  snprintf(prom, sizeof prom, "%s/b.prom", dir);
  stoke__exporter e;
  owner o = {0};
  init(&e, &o, jsonl, prom, 0, 4);
  for (int i = 0; i < 3; i++) stoke__exporter_step(&e);
  assert_int_equal(count_lines(jsonl), 0);
  stoke__exporter_step(&e);
  assert_int_equal(count_lines(jsonl), 1);
  for (int i = 0; i < 8; i++) stoke__exporter_step(&e);
  assert_int_equal(count_lines(jsonl), 3);
  assert_int_equal(fills_elsewhere(&o), 0);
  unsigned before = o.fills; /* no thread: nothing else fills */
  stoke__exporter_stop(&e, NULL);
  unsigned after = o.fills;
  assert_true(after > before); /* the stop's metrics took a snapshot */
  /* Idempotent: a second stop writes neither lines nor metrics, so it
  ** takes no snapshot at all. */
  stoke__exporter_stop(&e, NULL);
  assert_int_equal(o.fills, after);
  assert_int_equal(count_lines(jsonl), 3);
  stoke__exporter_free(&e, NULL);
  pthread_mutex_destroy(&o.mu);
}

/* The metrics follow the exporter's timer: rewritten with no step at all,
** and once more at the stop, with the owner's figures. */
static void test_metrics_on_the_timer(void **state) {
  (void)state;
  char prom[300];
  snprintf(prom, sizeof prom, "%s/m.prom", dir);
  stoke__exporter e;
  owner o = {0};
  o.steps = 42;
  init(&e, &o, NULL, prom, 1000000 /* 1 ms */, 0);
  stoke__exporter_start(&e, NULL);
  for (int i = 0; i < 15000 && fills_elsewhere(&o) < 3; i++) nap();
  assert_true(fills_elsewhere(&o) >= 3);
  stoke__exporter_stop(&e, NULL);
  FILE *f = fopen(prom, "r");
  assert_non_null(f);
  char text[8192];
  size_t got = fread(text, 1, sizeof text - 1, f);
  text[got] = 0;
  fclose(f);
  TU_CONTAINS(text, "stoke_steps_total{rank=\"2\",loader=\"t\"} 42\n");
  TU_CONTAINS(text, "stoke_workers{rank=\"2\",loader=\"t\"} 3\n");
  stoke__exporter_free(&e, NULL);
  pthread_mutex_destroy(&o.mu);
}

/* The metrics of a loader over remote shards on a machine whose other
** load moved: the fetch stage's counters and gauges and the other load,
** named by Prometheus' conventions (promtool, where installed, accepts
** them); without remote shards or a window of other load, none of them. */
static void test_metrics_fetch_and_outside(void **state) {
  (void)state;
  stoke_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  stoke__export_labels lb = {.rank = 0, .loader = "t"};
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  TU_OK(stoke__metrics_print(f, &st, &lb));
  fclose(f);
  assert_null(strstr(text, "stoke_fetch"));
  assert_null(strstr(text, "stoke_outside"));
  free(text);
  st.fetch_remote = 1;
  st.fetch_requests = 120;
  st.fetch_retries = 3;
  st.fetch_throttled = 2;
  st.fetch_bytes = 123456789;
  st.fetch_latency_p50_ms = 21.5;
  st.fetch_latency_p95_ms = 80;
  st.fetch_in_flight = 3.5;
  st.outside_windows = 9;
  st.outside_mean_cores = 0.75;
  st.outside_moved = 1;
  f = open_memstream(&text, &len);
  assert_non_null(f);
  TU_OK(stoke__metrics_print(f, &st, &lb));
  fclose(f);
  TU_CONTAINS(text, "stoke_fetch_requests_total{rank=\"0\",loader=\"t\"} 120\n");
  TU_CONTAINS(text, "stoke_fetch_retries_total{rank=\"0\",loader=\"t\"} 3\n");
  TU_CONTAINS(text, "stoke_fetch_throttled_total{rank=\"0\",loader=\"t\"} 2\n");
  TU_CONTAINS(text, "stoke_fetch_bytes_total{rank=\"0\",loader=\"t\"} 123456789\n");
  TU_CONTAINS(text, "stoke_fetch_latency_p50_seconds{rank=\"0\",loader=\"t\"} 0.0215\n");
  TU_CONTAINS(text, "stoke_fetch_latency_p95_seconds{rank=\"0\",loader=\"t\"} 0.08\n");
  TU_CONTAINS(text, "stoke_fetch_in_flight{rank=\"0\",loader=\"t\"} 3.5\n");
  TU_CONTAINS(text, "stoke_outside_load_cores{rank=\"0\",loader=\"t\"} 0.75\n");
  TU_CONTAINS(text, "stoke_outside_load_moved{rank=\"0\",loader=\"t\"} 1\n");
  assert_null(strstr(text, "stoke_remote_cache"));
  free(text);
  /* The remote cache's counters, only with a cache. */
  st.rcache_used = 1;
  st.rcache_hits = 7;
  st.rcache_misses = 2;
  st.rcache_uncached = 1;
  st.rcache_bytes_cached = 7000;
  st.rcache_bytes_fetched = 2000;
  st.rcache_evicted = 3;
  st.rcache_bytes_evicted = 3000;
  f = open_memstream(&text, &len);
  assert_non_null(f);
  TU_OK(stoke__metrics_print(f, &st, &lb));
  fclose(f);
  TU_CONTAINS(text, "# TYPE stoke_remote_cache_hits_total counter\n");
  TU_CONTAINS(text, "stoke_remote_cache_hits_total{rank=\"0\",loader=\"t\"} 7\n");
  TU_CONTAINS(text, "stoke_remote_cache_misses_total{rank=\"0\",loader=\"t\"} 2\n");
  TU_CONTAINS(text, "stoke_remote_cache_uncached_total{rank=\"0\",loader=\"t\"} 1\n");
  TU_CONTAINS(text, "stoke_remote_cache_hit_bytes_total{rank=\"0\",loader=\"t\"} 7000\n");
  TU_CONTAINS(text, "stoke_remote_cache_fetched_bytes_total{rank=\"0\",loader=\"t\"} 2000\n");
  TU_CONTAINS(text, "stoke_remote_cache_evictions_total{rank=\"0\",loader=\"t\"} 3\n");
  TU_CONTAINS(text, "stoke_remote_cache_evicted_bytes_total{rank=\"0\",loader=\"t\"} 3000\n");
  if (access("/usr/bin/promtool", X_OK) == 0) {
    char path[300], cmd[1024];
    snprintf(path, sizeof path, "%s/fetch.prom", dir);
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    fputs(text, out);
    fclose(out);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/promtool check metrics < '%s' > '%s.log' 2>&1", path,
             path);
    int rc = system(cmd);
    if (rc != 0) {
      snprintf(cmd, sizeof cmd, "cat '%s.log' >&2", path);
      (void)system(cmd);
    }
    assert_int_equal(rc, 0);
  }
  free(text);
}

/* Free without start or stop (a create that failed half way): nothing
** written past the first metrics, nothing leaked (LeakSanitizer). */
static void test_free_half_made(void **state) {
  (void)state;
  char jsonl[300], prom[300];
  snprintf(jsonl, sizeof jsonl, "%s/c.jsonl", dir);
  snprintf(prom, sizeof prom, "%s/c.prom", dir);
  stoke__exporter e;
  owner o = {0};
  init(&e, &o, jsonl, prom, 0, 1);
  stoke__exporter_start(&e, NULL);
  stoke__exporter_free(&e, NULL);
  assert_int_equal(count_lines(jsonl), 0);
  assert_int_equal(o.fills, 0);
  pthread_mutex_destroy(&o.mu);
}

/* A two-clock with JSON lines: its thread while it lives, none after; the
** lines of the steps, then the epoch's. */
static void test_twoclock_exports_from_its_thread(void **state) {
  (void)state;
  char jsonl[300];
  snprintf(jsonl, sizeof jsonl, "%s/d.jsonl", dir);
  stoke_twoclock_config cfg;
  stoke_twoclock_config_init(&cfg);
  cfg.warmup_epochs = 0;
  cfg.warmup_end_steps = 0;
  cfg.warmup_end_ns = 0;
  cfg.publish = STOKE_PUBLISH_OFF;
  cfg.log_jsonl_path = jsonl;
  cfg.log_every_steps = 5;
  stoke_twoclock *c;
  TU_OK(stoke_twoclock_create(&cfg, &c));
  /* The thread names itself once it runs: wait for it (a hang guard). */
  for (int i = 0; i < 15000 && tu_count_threads_now("stoke-export") == 0; i++)
    nap();
  assert_int_equal(tu_count_threads_now("stoke-export"), 1);
  for (int i = 0; i < 12; i++) {
    stoke_twoclock_enter(c);
    stoke_twoclock_leave(c, 2);
  }
  TU_OK(stoke_twoclock_end_epoch(c));
  char kinds[64][8];
  uint64_t step[64];
  size_t n = read_lines(jsonl, kinds, step, 64);
  assert_int_equal(n, 3);
  assert_int_equal(step[0], 5);
  assert_int_equal(step[1], 10);
  assert_string_equal(kinds[2], "epoch");
  stoke_twoclock_destroy(c);
  /* Joined, though /proc may list it a moment longer: the retrying census. */
  assert_int_equal(tu_count_threads("stoke-export"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_lines_on_the_exporters_thread,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_lines_without_the_thread, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_metrics_fetch_and_outside, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_metrics_on_the_timer, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_free_half_made, setup, teardown),
      cmocka_unit_test_setup_teardown(test_twoclock_exports_from_its_thread,
                                      setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
