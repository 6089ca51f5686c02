/* test_trace.c — the per-thread span rings and their export. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "os/os.h"
#include "stats/stats.h"
#include "sampler/sampler.h"
#include "source/source.h"
#include "test_util.h"

static char *slurp(FILE *f) {
  fflush(f);
  long n = ftell(f);
  char *buf = calloc(1, (size_t)n + 1);
  rewind(f);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  return buf;
}

static void test_ring_keeps_the_latest(void **state) {
  (void)state;
  stoke__trace t;
  assert_int_equal(stoke__trace_init(&t, NULL, 4), 0);
  for (uint64_t i = 0; i < 10; i++)
    stoke__trace_push(&t, STOKE_STAGE_READ, (int64_t)(1000 * i), 500, i, 1);
  assert_int_equal(t.len, 4);
  assert_int_equal(t.dropped, 6);
  FILE *f = tmpfile();
  stoke__trace *tracks[] = {&t};
  const char *names[] = {"stoke-w0"};
  assert_int_equal(stoke__trace_write(f, tracks, names, 1, 0, NULL), 0);
  char *out = slurp(f);
  /* Samples 6..9 are kept, 0..5 dropped. */
  assert_non_null(strstr(out, "\"sample\":9"));
  assert_non_null(strstr(out, "\"sample\":6"));
  assert_null(strstr(out, "\"sample\":5}"));
  assert_non_null(strstr(out, "\"dropped_events\":6"));
  assert_non_null(strstr(out, "\"name\":\"stoke-w0\""));
  /* ts in microseconds from t0: event 9 at 9000 ns = 9.000 us */
  assert_non_null(strstr(out, "\"ts\":9.000,\"dur\":0.500"));
  free(out);
  fclose(f);
  stoke__trace_free(&t, NULL);
}

static void test_off_is_a_no_op(void **state) {
  (void)state;
  stoke__trace t;
  assert_int_equal(stoke__trace_init(&t, NULL, 0), 0);
  stoke__trace_push(&t, STOKE_STAGE_READ, 1, 1, 1, 1);
  stoke__trace_push(NULL, STOKE_STAGE_READ, 1, 1, 1, 1);
  assert_int_equal(t.len, 0);
  stoke__trace_free(&t, NULL);
}

static void test_loader_trace_api(void **state) {
  (void)state;
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = STOKE_SYNTH_TENSOR;
  sc.n_samples = 64;
  stoke_source *src;
  assert_int_equal(stoke_source_create_synthetic(&sc, &src), 0);
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = 16;
  cfg.n_workers = 2;
  stoke_loader *l;
  assert_int_equal(stoke_loader_create(&cfg, &l), 0);
  /* Tracing off: a clear error, not an empty file. */
  assert_int_equal(stoke_loader_write_trace(l, "/tmp/never.json"),
                   STOKE_EINVAL);
  assert_non_null(strstr(stoke_errmsg(l), "trace_events"));
  stoke_loader_destroy(l);

  cfg.trace_events = 256;
  assert_int_equal(stoke_loader_create(&cfg, &l), 0);
  stoke_batch *b;
  int n = 0;
  while (stoke_loader_next(l, &b) == STOKE_OK) {
    stoke_batch_release(b);
    n++;
  }
  assert_int_equal(n, 4);
  char path[] = "/tmp/stoke-trace-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(stoke_loader_write_trace(l, path), 0);
  FILE *f = fopen(path, "r");
  fseek(f, 0, SEEK_END);
  char *out = slurp(f);
  fclose(f);
  assert_non_null(strstr(out, "\"name\":\"consumer\""));
  assert_non_null(strstr(out, "\"name\":\"wait\""));
  assert_non_null(strstr(out, "\"name\":\"ready queue\""));
  /* Trace buffers are part of the host ledger. */
  assert_true(stoke_loader_host_bytes(l) >= 3 * 256 * 32);
  assert_int_equal(stoke_loader_write_trace(l, "/nonexistent-dir/x.json"),
                   STOKE_EIO);
  assert_non_null(strstr(stoke_errmsg(l), "/nonexistent-dir/x.json"));
  free(out);
  remove(path);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_keeps_the_latest),
      cmocka_unit_test(test_off_is_a_no_op),
      cmocka_unit_test(test_loader_trace_api),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
