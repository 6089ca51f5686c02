/* test_errors.c — every error path of the loader and the sources, on purpose.
**
** A bad sample fails next() with STOKE_ESAMPLE and a message naming the
** sample and its cause, then the loader is poisoned (STOKE_EBADSTATE, first
** message kept).  A stuck sample is reported (STOKE_ETIMEDOUT) while it is
** still stuck.  Bad configurations fail create with STOKE_EINVAL and a
** message naming the field.  Nothing hangs.
*/
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>

#include "test_util.h"

/* ---- codes ------------------------------------------------------------------ */

static void test_strerror(void **state) {
  (void)state;
#define CHECK_TEXT(name, value, text)                                         \
  assert_int_equal(STOKE_E##name, value);                                     \
  assert_string_equal(stoke_strerror(value), text);
  STOKE_ERRNO_MAP(CHECK_TEXT)
#undef CHECK_TEXT
  assert_string_equal(stoke_strerror(-14), "unknown error");
  assert_string_equal(stoke_strerror(-1000), "unknown error");
  assert_string_equal(stoke_strerror(42), "unknown error");
  assert_string_equal(stoke_strerror(INT32_MIN), "unknown error");
  assert_non_null(stoke_strerror(STOKE_OK));
  assert_non_null(stoke_strerror(STOKE_END));
  assert_string_equal(stoke_version(), STOKE_VERSION_STRING);
}

/* ---- bad samples ----------------------------------------------------------- */

static void fail_sample_37(unsigned W) {
  tu_cb *cb = tu_cb_new(100);
  cb->fail_index = 37;
  cb->fail_cause = "corrupt-header-xyzzy";
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = tu_config(src, W, 2, 8);
  stoke_loader *l = tu_loader(&c);
  assert_string_equal(stoke_errmsg(l), "");
  size_t delivered = 0;
  int rc;
  stoke_batch *b = NULL;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    const size_t *ix = stoke_batch_indices(b);
    for (size_t k = 0; k < stoke_batch_size(b); k++)
      TU_CHECK(ix[k] != 37, "W %u: the failed sample 37 was delivered", W);
    delivered++;
    stoke_batch_release(b);
  }
  /* Sample 37 is in batch 4 (sequential, batch 8): batches 0..3 at most. */
  TU_CHECK(delivered <= 4, "W %u: %zu batches delivered before the error", W,
           delivered);
  TU_RC_L(l, rc, STOKE_ESAMPLE);
  char first[1024];
  snprintf(first, sizeof first, "%s", stoke_errmsg(l));
  TU_CONTAINS(first, "37");
  TU_CONTAINS(first, "corrupt-header-xyzzy");
  /* Poisoned: every later call fails, the first message stays. */
  for (int i = 0; i < 3; i++) {
    b = (stoke_batch *)1;
    TU_RC_L(l, stoke_loader_next(l, &b), STOKE_EBADSTATE);
    assert_string_equal(stoke_errmsg(l), first);
  }
  TU_CHECK(atomic_load(&cb->bad) == 0, "fill saw bad state 0x%x",
           atomic_load(&cb->bad));
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static void test_fail_sample_w0(void **state) {
  (void)state;
  fail_sample_37(0);
}

static void test_fail_sample_workers(void **state) {
  (void)state;
  fail_sample_37(1);
  fail_sample_37(4);
  fail_sample_37(16);
}

/* Shuffled and out of order the failure is still reported and named. */
static void test_fail_sample_shuffled(void **state) {
  (void)state;
  for (int in_order = 0; in_order <= 1; in_order++) {
    tu_cb *cb = tu_cb_new(64);
    cb->fail_index = 37;
    cb->fail_cause = "bad-crc";
    stoke_source *src = tu_cb_source(cb);
    stoke_config c = tu_config(src, 3, 3, 4);
    c.shuffle = 1;
    c.seed = 99;
    c.in_order = in_order;
    stoke_loader *l = tu_loader(&c);
    stoke_batch *b;
    int rc;
    while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) stoke_batch_release(b);
    TU_RC_L(l, rc, STOKE_ESAMPLE);
    TU_CONTAINS(stoke_errmsg(l), "37");
    TU_CONTAINS(stoke_errmsg(l), "bad-crc");
    stoke_loader_destroy(l);
    stoke_source_destroy(src);
    tu_cb_free(cb);
  }
}

/* A fill that returns nonzero without stoke_sample_fail still fails the
** sample, and the message still names it. */
static int fill_fail_silently(void *user, stoke_sample *s) {
  (void)user;
  return stoke_sample_index(s) == 61 ? -5 : 0;
}

static void test_fail_without_message(void **state) {
  (void)state;
  static const int64_t one[1] = {1};
  stoke_field_desc f = tu_field("v", STOKE_U8, 1, one);
  for (unsigned W = 0; W <= 2; W += 2) {
    stoke_source *src = NULL;
    TU_OK(stoke_source_create_callback(80, 1, &f, fill_fail_silently, NULL,
                                       &src));
    stoke_config c = tu_config(src, W, 2, 10);
    stoke_loader *l = tu_loader(&c);
    stoke_batch *b;
    int rc;
    while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) stoke_batch_release(b);
    TU_RC_L(l, rc, STOKE_ESAMPLE);
    TU_CONTAINS(stoke_errmsg(l), "61");
    stoke_loader_destroy(l);
    stoke_source_destroy(src);
  }
}

/* ---- stuck samples ----------------------------------------------------------- */

/* Sample 23 waits (up to 10 s) until the test lets it go.  With a 1 s
** sample timeout, next() must return STOKE_ETIMEDOUT naming sample 23 while
** the sample is still stuck — not after it finishes.  The other samples
** take microseconds: 1 s keeps a worker that a loaded machine leaves off
** its core for a while from timing one of them out instead.  (W = 0 fills inside
** next() in the caller's thread, which cannot be interrupted; the timeout is
** tested with workers.) */
static void test_stuck_sample_times_out(void **state) {
  (void)state;
  const unsigned workers[] = {1, 4};
  for (size_t wi = 0; wi < 2; wi++) {
    tu_cb *cb = tu_cb_new(64);
    cb->stuck_index = 23;
    stoke_source *src = tu_cb_source(cb);
    stoke_config c = tu_config(src, workers[wi], 2, 4);
    c.sample_timeout_ms = 1000;
    stoke_loader *l = tu_loader(&c);
    stoke_batch *b;
    int rc;
    size_t delivered = 0;
    while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
      delivered++;
      stoke_batch_release(b);
    }
    int still_stuck = atomic_load(&cb->stuck);
    tu_cb_unstick(cb);
    TU_RC_L(l, rc, STOKE_ETIMEDOUT);
    TU_CHECK(still_stuck, "W %u: next() returned only after the stuck sample "
             "finished", workers[wi]);
    TU_CHECK(delivered <= 5, "W %u: %zu batches before the stuck one",
             workers[wi], delivered);
    char first[1024];
    snprintf(first, sizeof first, "%s", stoke_errmsg(l));
    TU_CONTAINS(first, "23");
    TU_RC_L(l, stoke_loader_next(l, &b), STOKE_EBADSTATE);
    assert_string_equal(stoke_errmsg(l), first);
    stoke_loader_destroy(l); /* waits for the stuck sample, now released */
    stoke_source_destroy(src);
    tu_cb_free(cb);
  }
}

/* A slow but not stuck sample (well under the timeout) is not an error. */
static void test_timeout_not_hit(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(24);
  cb->sleep_ns = 1000000; /* 1 ms against a 5 s timeout */
  cb->sleep_every = 5;
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = tu_config(src, 2, 2, 4);
  c.sample_timeout_ms = 5000;
  stoke_loader *l = tu_loader(&c);
  tu_epoch *e = tu_epoch_new();
  tu_epoch_ok(l, cb, e, 1);
  assert_int_equal(e->n_samples, 24);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
  free(e);
}

/* ---- bad configurations ------------------------------------------------------ */

static tu_cb *g_cb;
static stoke_source *g_src;

static int setup_src(void **state) {
  (void)state;
  g_cb = tu_cb_new(40);
  g_src = tu_cb_source(g_cb);
  return 0;
}

static int teardown_src(void **state) {
  (void)state;
  stoke_source_destroy(g_src);
  tu_cb_free(g_cb);
  return 0;
}

/* create(cfg) must fail with `want`, leave *out NULL, and stoke_errmsg(NULL)
** must contain `field`. */
static void expect_create_fails(const stoke_config *cfg, int want,
                                const char *field) {
  stoke_loader *l = (stoke_loader *)&l; /* not NULL: must be reset */
  int rc = stoke_loader_create(cfg, &l);
  if (rc == STOKE_OK) stoke_loader_destroy(l);
  TU_CHECK(rc == want, "create with bad %s: got %d %s, want %d %s", field, rc,
           tu_code_name(rc), want, tu_code_name(want));
  assert_null(l);
  const char *msg = stoke_errmsg(NULL);
  assert_non_null(msg);
  TU_CONTAINS(msg, field);
}

static void test_bad_configs(void **state) {
  (void)state;
  stoke_config c = tu_config(g_src, 2, 2, 8);
  stoke_config bad;

  bad = c;
  bad.source = NULL;
  expect_create_fails(&bad, STOKE_EINVAL, "source");
  bad = c;
  bad.batch_size = 0;
  expect_create_fails(&bad, STOKE_EINVAL, "batch_size");
  bad = c;
  bad.prefetch = 0;
  expect_create_fails(&bad, STOKE_EINVAL, "prefetch");
  bad = c;
  bad.world = 0;
  expect_create_fails(&bad, STOKE_EINVAL, "world");
  bad = c;
  bad.world = 3;
  bad.rank = 3;
  expect_create_fails(&bad, STOKE_EINVAL, "rank");
  bad = c;
  bad.rank = 1; /* world 1 */
  expect_create_fails(&bad, STOKE_EINVAL, "rank");
  bad = c;
  bad.struct_size = sizeof bad + 8;
  expect_create_fails(&bad, STOKE_EINVAL, "struct_size");
  bad = c;
  bad.struct_size = 0;
  expect_create_fails(&bad, STOKE_EINVAL, "struct_size");

  /* NULL out and NULL cfg. */
  int rc = stoke_loader_create(&c, NULL);
  TU_CHECK(rc == STOKE_EINVAL, "create(cfg, NULL): %d %s", rc,
           tu_code_name(rc));
  TU_CONTAINS(stoke_errmsg(NULL), "out");
  stoke_loader *l = (stoke_loader *)&l;
  rc = stoke_loader_create(NULL, &l);
  TU_CHECK(rc == STOKE_EINVAL, "create(NULL, out): %d %s", rc,
           tu_code_name(rc));
  assert_null(l);

  /* After all that, a good config still works. */
  l = tu_loader(&c);
  tu_epoch *e = tu_epoch_new();
  tu_epoch_ok(l, g_cb, e, 1);
  assert_int_equal(e->n_samples, 40);
  stoke_loader_destroy(l);
  free(e);
}

/* The thread-local message: another thread's failure does not change it. */
static void *fail_create_in_thread(void *arg) {
  stoke_config c = *(const stoke_config *)arg;
  c.batch_size = 0;
  stoke_loader *l = NULL;
  int rc = stoke_loader_create(&c, &l);
  return (void *)(intptr_t)(rc == STOKE_EINVAL &&
                            strstr(stoke_errmsg(NULL), "batch_size") != NULL);
}

static void test_errmsg_thread_local(void **state) {
  (void)state;
  stoke_config c = tu_config(g_src, 0, 1, 8);
  stoke_config bad = c;
  bad.prefetch = 0;
  expect_create_fails(&bad, STOKE_EINVAL, "prefetch");
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, fail_create_in_thread, &c), 0);
  void *ok = NULL;
  pthread_join(t, &ok);
  assert_true(ok != NULL);
  TU_CONTAINS(stoke_errmsg(NULL), "prefetch");
}

/* ---- memory budget ------------------------------------------------------------ */

static void test_budget(void **state) {
  (void)state;
  /* 4 KiB samples, batch 16: 64 KiB per batch slot, K + 1 = 3 slots. */
  static const int64_t big[1] = {4096};
  stoke_field_desc f = tu_field("blob", STOKE_U8, 1, big);
  static uint8_t data[64 * 4096];
  const void *d[1] = {data};
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_tensors(64, 1, &f, d, &src));
  stoke_config c = tu_config(src, 2, 2, 16);
  c.mem_budget_bytes = 1024;
  stoke_loader *l = (stoke_loader *)&l;
  int rc = stoke_loader_create(&c, &l);
  if (rc == STOKE_OK) stoke_loader_destroy(l);
  TU_CHECK(rc == STOKE_EBUDGET, "budget 1 KiB: got %d %s", rc,
           tu_code_name(rc));
  assert_null(l);
  /* The biggest term is the batch slots (3 x 64 KiB). */
  TU_CONTAINS(stoke_errmsg(NULL), "slot");

  /* Exactly what an unlimited loader reports is enough; half is not. */
  c.mem_budget_bytes = 0;
  l = tu_loader(&c);
  uint64_t need = stoke_loader_host_bytes(l);
  stoke_loader_destroy(l);
  TU_CHECK(need >= 3 * 16 * 4096, "host_bytes %llu < 3 slots of 64 KiB",
           (unsigned long long)need);
  c.mem_budget_bytes = need;
  rc = stoke_loader_create(&c, &l);
  TU_CHECK(rc == STOKE_OK, "budget = host_bytes (%llu): %d %s (%s)",
           (unsigned long long)need, rc, tu_code_name(rc), stoke_errmsg(NULL));
  stoke_loader_destroy(l);
  c.mem_budget_bytes = need / 2;
  l = (stoke_loader *)&l;
  rc = stoke_loader_create(&c, &l);
  if (rc == STOKE_OK) stoke_loader_destroy(l);
  TU_CHECK(rc == STOKE_EBUDGET, "budget = host_bytes / 2: %d %s", rc,
           tu_code_name(rc));
  assert_null(l);
  stoke_source_destroy(src);
}

/* ---- holding every slot ------------------------------------------------------- */

static void test_busy_when_all_slots_held(void **state) {
  (void)state;
  const unsigned workers[] = {0, 2};
  const unsigned prefetch[] = {1, 3};
  for (size_t wi = 0; wi < 2; wi++)
    for (size_t ki = 0; ki < 2; ki++) {
      unsigned W = workers[wi], K = prefetch[ki];
      stoke_config c = tu_config(g_src, W, K, 2); /* 20 batches */
      stoke_loader *l = tu_loader(&c);
      stoke_batch *held[8];
      for (unsigned i = 0; i < K + 1; i++) {
        held[i] = NULL;
        TU_RC_L(l, stoke_loader_next(l, &held[i]), STOKE_OK);
      }
      stoke_batch *b = NULL;
      TU_RC_L(l, stoke_loader_next(l, &b), STOKE_EBUSY);
      TU_RC_L(l, stoke_loader_next(l, &b), STOKE_EBUSY); /* again, no hang */
      /* Not fatal: give one back and carry on, in order. */
      stoke_batch_release(held[0]);
      TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
      TU_CHECK(stoke_batch_number(b) == K + 1,
               "W %u K %u: after EBUSY got batch %zu, want %u", W, K,
               stoke_batch_number(b), K + 1);
      tu_check_batch(b, g_cb, NULL);
      for (unsigned i = 1; i < K + 1; i++) {
        tu_check_batch(held[i], g_cb, NULL); /* still intact */
        stoke_batch_release(held[i]);
      }
      stoke_batch_release(b);
      size_t rest = 0;
      int rc;
      while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
        rest++;
        stoke_batch_release(b);
      }
      TU_RC_L(l, rc, STOKE_END);
      assert_int_equal(rest, 20 - (K + 2));
      stoke_loader_destroy(l);
    }
}

/* ---- set_epoch --------------------------------------------------------------- */

static void test_set_epoch_mid_epoch(void **state) {
  (void)state;
  stoke_config c = tu_config(g_src, 2, 2, 8);
  stoke_loader *l = tu_loader(&c);
  TU_OK(stoke_loader_set_epoch(l, 7)); /* before the first epoch: fine */
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  assert_int_equal(stoke_batch_epoch(b), 7);
  TU_RC_L(l, stoke_loader_set_epoch(l, 3), STOKE_EINVAL);
  stoke_batch_release(b);
  TU_RC_L(l, stoke_loader_set_epoch(l, 3), STOKE_EINVAL);
  /* The refused call changed nothing and did not poison the loader. */
  int rc;
  size_t n = 1;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    assert_int_equal(stoke_batch_epoch(b), 7);
    n++;
    stoke_batch_release(b);
  }
  TU_RC_L(l, rc, STOKE_END);
  assert_int_equal(n, 5);
  TU_OK(stoke_loader_set_epoch(l, 3)); /* between epochs: fine */
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  assert_int_equal(stoke_batch_epoch(b), 3);
  stoke_batch_release(b);
  stoke_loader_destroy(l);
}

/* ---- bad sources ---------------------------------------------------------------- */

static void expect_source_fails(int rc, stoke_source *src, const char *what,
                                const char *field) {
  if (rc == STOKE_OK) stoke_source_destroy(src);
  TU_CHECK(rc == STOKE_EINVAL, "source with %s: got %d %s, want EINVAL", what,
           rc, tu_code_name(rc));
  assert_null(src);
  if (field) TU_CONTAINS(stoke_errmsg(NULL), field);
}

static int fill_zero(void *user, stoke_sample *s) {
  (void)user;
  (void)s;
  return 0;
}

static void test_bad_sources(void **state) {
  (void)state;
  static const int64_t s2[2] = {2, 3}, neg[2] = {2, -3};
  static uint8_t buf[1024];
  const void *data[1] = {buf};
  const void *null_data[1] = {NULL};
  stoke_field_desc good = tu_field("v", STOKE_U8, 2, s2);
  stoke_field_desc f;
  stoke_source *src;
  int rc;

#define BOTH(desc, what, field)                                               \
  do {                                                                        \
    src = (stoke_source *)&src;                                               \
    rc = stoke_source_create_callback(10, 1, &(desc), fill_zero, NULL, &src); \
    expect_source_fails(rc, src, "callback " what, field);                    \
    src = (stoke_source *)&src;                                               \
    rc = stoke_source_create_tensors(10, 1, &(desc), data, &src);             \
    expect_source_fails(rc, src, "tensors " what, field);                     \
  } while (0)

  f = good;
  f.ndim = STOKE_MAX_DIMS + 1;
  BOTH(f, "ndim > STOKE_MAX_DIMS", "ndim");
  f = good;
  f.ndim = -1;
  BOTH(f, "ndim < 0", "ndim");
  f = tu_field("v", STOKE_U8, 2, neg);
  BOTH(f, "a negative dimension", "shape");
  f = good;
  f.dtype = 0;
  BOTH(f, "dtype 0", "dtype");
  f = good;
  f.dtype = 77;
  BOTH(f, "dtype 77", "dtype");
#undef BOTH

  /* Zero samples. */
  src = (stoke_source *)&src;
  rc = stoke_source_create_callback(0, 1, &good, fill_zero, NULL, &src);
  expect_source_fails(rc, src, "0 samples (callback)", "samples");
  src = (stoke_source *)&src;
  rc = stoke_source_create_tensors(0, 1, &good, data, &src);
  expect_source_fails(rc, src, "0 samples (tensors)", "samples");
  /* NULL data, NULL array, NULL fields, NULL fill, NULL out. */
  src = (stoke_source *)&src;
  rc = stoke_source_create_tensors(10, 1, &good, NULL, &src);
  expect_source_fails(rc, src, "NULL data", "data");
  src = (stoke_source *)&src;
  rc = stoke_source_create_tensors(10, 1, &good, null_data, &src);
  expect_source_fails(rc, src, "a NULL data[0]", "data");
  src = (stoke_source *)&src;
  rc = stoke_source_create_tensors(10, 1, NULL, data, &src);
  expect_source_fails(rc, src, "NULL fields", "fields");
  src = (stoke_source *)&src;
  rc = stoke_source_create_callback(10, 1, &good, NULL, NULL, &src);
  expect_source_fails(rc, src, "NULL fill", "fill");
  rc = stoke_source_create_callback(10, 1, &good, fill_zero, NULL, NULL);
  TU_CHECK(rc == STOKE_EINVAL, "callback with NULL out: %d", rc);
  rc = stoke_source_create_tensors(10, 1, &good, data, NULL);
  TU_CHECK(rc == STOKE_EINVAL, "tensors with NULL out: %d", rc);

  /* Synthetic: bad kind, dist, cost, classes, samples, ndim, struct_size. */
  stoke_synthetic_config sc, sb;
  stoke_synthetic_config_init(&sc);
  sc.ndim = 1;
  sc.shape[0] = 4;
#define SYN(mod, what, field)                                                 \
  do {                                                                        \
    sb = sc;                                                                  \
    mod;                                                                      \
    src = (stoke_source *)&src;                                               \
    rc = stoke_source_create_synthetic(&sb, &src);                            \
    expect_source_fails(rc, src, "synthetic " what, field);                   \
  } while (0)
  SYN(sb.kind = 0, "kind 0", "kind");
  SYN(sb.kind = 9, "kind 9", "kind");
  SYN(sb.dist = 0, "dist 0", "dist");
  SYN(sb.cost_ns = -1, "negative cost", "cost_ns");
  SYN(sb.n_classes = 0, "0 classes", "n_classes");
  SYN(sb.n_samples = 0, "0 samples", "samples");
  SYN(sb.ndim = STOKE_MAX_DIMS + 1, "ndim 9", "ndim");
  SYN(sb.shape[0] = -4, "negative shape", "shape");
  SYN(sb.struct_size = 0, "struct_size 0", "struct_size");
  SYN((sb.dist = STOKE_COST_LOGNORMAL, sb.sigma = -1.0), "negative sigma",
      "sigma");
#undef SYN
  src = (stoke_source *)&src;
  rc = stoke_source_create_synthetic(NULL, &src);
  expect_source_fails(rc, src, "NULL config", NULL);

  /* The good ones work. */
  src = NULL;
  TU_OK(stoke_source_create_tensors(10, 1, &good, data, &src));
  stoke_source_destroy(src);
  src = NULL;
  TU_OK(stoke_source_create_synthetic(&sc, &src));
  stoke_source_destroy(src);
}

/* ---- small query errors ------------------------------------------------------- */

static void test_query_errors(void **state) {
  (void)state;
  stoke_config c = tu_config(g_src, 1, 1, 8);
  stoke_loader *l = tu_loader(&c);
  stoke_epoch_stats es;
  TU_RC_L(l, stoke_loader_epoch_stats(l, 0, &es), STOKE_EINVAL);
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  stoke_tensor t;
  TU_RC_L(l, stoke_batch_field(b, 4, &t), STOKE_EINVAL);
  TU_RC_L(l, stoke_batch_field(b, (size_t)-1, &t), STOKE_EINVAL);
  stoke_batch_release(b);
  assert_string_equal(stoke_errmsg(l), "");
  stoke_loader_destroy(l);
  stoke_diagnosis d;
  TU_RC(stoke_diagnose(NULL, &d), STOKE_EINVAL);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strerror),
      cmocka_unit_test(test_fail_sample_w0),
      cmocka_unit_test(test_fail_sample_workers),
      cmocka_unit_test(test_fail_sample_shuffled),
      cmocka_unit_test(test_fail_without_message),
      cmocka_unit_test(test_stuck_sample_times_out),
      cmocka_unit_test(test_timeout_not_hit),
      cmocka_unit_test_setup_teardown(test_bad_configs, setup_src,
                                      teardown_src),
      cmocka_unit_test_setup_teardown(test_errmsg_thread_local, setup_src,
                                      teardown_src),
      cmocka_unit_test(test_budget),
      cmocka_unit_test_setup_teardown(test_busy_when_all_slots_held,
                                      setup_src, teardown_src),
      cmocka_unit_test_setup_teardown(test_set_epoch_mid_epoch, setup_src,
                                      teardown_src),
      cmocka_unit_test(test_bad_sources),
      cmocka_unit_test_setup_teardown(test_query_errors, setup_src,
                                      teardown_src),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
