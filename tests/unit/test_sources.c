/* test_sources.c — what sources report, and the synthetic cost model.
**
** stoke_source_synthetic_cost is a pure function and the ground truth of the
** diagnosis, so its distributions are checked on many indices of a fixed
** seed (deterministic; tolerances are several standard deviations wide).
*/
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "test_util.h"

static int fill_nothing(void *user, stoke_sample *s) {
  (void)user;
  (void)s;
  return 0;
}

static void test_dtypes(void **state) {
  (void)state;
  assert_int_equal(stoke_dtype_size(STOKE_U8), 1);
  assert_int_equal(stoke_dtype_size(STOKE_I32), 4);
  assert_int_equal(stoke_dtype_size(STOKE_I64), 8);
  assert_int_equal(stoke_dtype_size(STOKE_F16), 2);
  assert_int_equal(stoke_dtype_size(STOKE_F32), 4);
  assert_int_equal(stoke_dtype_size(STOKE_F64), 8);
  assert_int_equal(stoke_dtype_size(STOKE_I8), 1);
  assert_int_equal(stoke_dtype_size(STOKE_I16), 2);
  assert_int_equal(stoke_dtype_size(STOKE_BOOL), 1);
  assert_int_equal(stoke_dtype_size(STOKE_BF16), 2);
  assert_int_equal(stoke_dtype_size(0), 0);
  assert_int_equal(stoke_dtype_size(11), 0);
  assert_int_equal(stoke_dtype_size(-1), 0);
  assert_string_equal(stoke_dtype_name(STOKE_U8), "u8");
  assert_string_equal(stoke_dtype_name(STOKE_I32), "i32");
  assert_string_equal(stoke_dtype_name(STOKE_I64), "i64");
  assert_string_equal(stoke_dtype_name(STOKE_F16), "f16");
  assert_string_equal(stoke_dtype_name(STOKE_F32), "f32");
  assert_string_equal(stoke_dtype_name(STOKE_F64), "f64");
  assert_string_equal(stoke_dtype_name(STOKE_I8), "i8");
  assert_string_equal(stoke_dtype_name(STOKE_I16), "i16");
  assert_string_equal(stoke_dtype_name(STOKE_BOOL), "bool");
  assert_string_equal(stoke_dtype_name(STOKE_BF16), "bf16");
  assert_string_equal(stoke_dtype_name(11), "?");
  assert_string_equal(stoke_dtype_name(0), "?");
  assert_string_equal(stoke_dtype_name(99), "?");
}

/* Field descriptions come back as given, names copied (the caller's buffer
** may change after create). */
static void test_callback_source_reports(void **state) {
  (void)state;
  char name0[16], name1[16];
  strcpy(name0, "image");
  strcpy(name1, "label");
  static const int64_t img[3] = {3, 8, 5};
  stoke_field_desc f[2] = {tu_field(name0, STOKE_F32, 3, img),
                           tu_field(name1, STOKE_I64, 0, NULL)};
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_callback(17, 2, f, fill_nothing, NULL, &src));
  assert_non_null(src);
  strcpy(name0, "XXXXX");
  strcpy(name1, "YYYYY");
  assert_int_equal(stoke_source_n_samples(src), 17);
  assert_int_equal(stoke_source_n_fields(src), 2);
  const stoke_field_desc *d0 = stoke_source_field(src, 0);
  const stoke_field_desc *d1 = stoke_source_field(src, 1);
  assert_non_null(d0);
  assert_non_null(d1);
  assert_null(stoke_source_field(src, 2));
  assert_null(stoke_source_field(src, (size_t)-1));
  assert_string_equal(d0->name, "image");
  assert_string_equal(d1->name, "label");
  assert_int_equal(d0->dtype, STOKE_F32);
  assert_int_equal(d0->ndim, 3);
  assert_int_equal(d0->shape[0], 3);
  assert_int_equal(d0->shape[1], 8);
  assert_int_equal(d0->shape[2], 5);
  assert_int_equal(d1->dtype, STOKE_I64);
  assert_int_equal(d1->ndim, 0);
  /* Not a synthetic source: no cost. */
  assert_int_equal(stoke_source_synthetic_cost(src, 0, 0, 3), 0);
  stoke_source_destroy(src);
  stoke_source_destroy(NULL);
}

static void test_tensor_source_reports(void **state) {
  (void)state;
  static const int64_t s4[1] = {4};
  stoke_field_desc f[2] = {tu_field("a", STOKE_U8, 1, s4),
                           tu_field("b", STOKE_F64, 0, NULL)};
  uint8_t a[9 * 4];
  double b[9];
  const void *data[2] = {a, b};
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_tensors(9, 2, f, data, &src));
  assert_int_equal(stoke_source_n_samples(src), 9);
  assert_int_equal(stoke_source_n_fields(src), 2);
  assert_string_equal(stoke_source_field(src, 0)->name, "a");
  assert_int_equal(stoke_source_field(src, 0)->shape[0], 4);
  assert_int_equal(stoke_source_field(src, 1)->dtype, STOKE_F64);
  assert_null(stoke_source_field(src, 2));
  stoke_source_destroy(src);
}

static void test_synthetic_defaults(void **state) {
  (void)state;
  stoke_synthetic_config c;
  memset(&c, 0xcd, sizeof c);
  stoke_synthetic_config_init(&c);
  assert_int_equal(c.struct_size, sizeof c);
  assert_int_equal(c.kind, STOKE_SYNTH_SLEEP);
  assert_int_equal(c.cost_ns, 5000000);
  assert_int_equal(c.dist, STOKE_COST_FIXED);
  assert_true(c.sigma == 1.0);
  assert_int_equal(c.n_samples, 256);
  assert_int_equal(c.ndim, 3);
  assert_int_equal(c.shape[0], 3);
  assert_int_equal(c.shape[1], 32);
  assert_int_equal(c.shape[2], 32);
  assert_int_equal(c.n_classes, 2);
  assert_int_equal(c.seed, 0);

  stoke_source *src = NULL;
  TU_OK(stoke_source_create_synthetic(&c, &src));
  assert_int_equal(stoke_source_n_samples(src), 256);
  assert_int_equal(stoke_source_n_fields(src), 2);
  const stoke_field_desc *x = stoke_source_field(src, 0);
  const stoke_field_desc *y = stoke_source_field(src, 1);
  assert_non_null(x);
  assert_non_null(y);
  assert_string_equal(x->name, "x");
  assert_int_equal(x->dtype, STOKE_F32);
  assert_int_equal(x->ndim, 3);
  assert_int_equal(x->shape[0], 3);
  assert_int_equal(x->shape[1], 32);
  assert_int_equal(x->shape[2], 32);
  assert_string_equal(y->name, "y");
  assert_int_equal(y->dtype, STOKE_I64);
  assert_int_equal(y->ndim, 0);
  stoke_source_destroy(src);
}

static stoke_source *synth(int kind, int dist, int64_t cost, double sigma) {
  stoke_synthetic_config c;
  stoke_synthetic_config_init(&c);
  c.kind = kind;
  c.dist = dist;
  c.cost_ns = cost;
  c.sigma = sigma;
  c.n_samples = 100000;
  c.ndim = 1;
  c.shape[0] = 2;
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_synthetic(&c, &src));
  return src;
}

static void test_cost_fixed_and_pure(void **state) {
  (void)state;
  stoke_source *sl = synth(STOKE_SYNTH_SLEEP, STOKE_COST_FIXED, 1234567, 1.0);
  stoke_source *sp = synth(STOKE_SYNTH_SPIN, STOKE_COST_FIXED, 777, 1.0);
  stoke_source *te = synth(STOKE_SYNTH_TENSOR, STOKE_COST_FIXED, 1234567, 1.0);
  for (size_t i = 0; i < 5000; i += 7)
    for (uint64_t e = 0; e < 3; e++) {
      assert_int_equal(stoke_source_synthetic_cost(sl, e * 11, e, i), 1234567);
      assert_int_equal(stoke_source_synthetic_cost(sp, 5, e, i), 777);
      assert_int_equal(stoke_source_synthetic_cost(te, 5, e, i), 0);
    }
  stoke_source *ex = synth(STOKE_SYNTH_SLEEP, STOKE_COST_EXP, 1000000, 1.0);
  stoke_source *ex2 = synth(STOKE_SYNTH_SLEEP, STOKE_COST_EXP, 1000000, 1.0);
  int varies_i = 0, varies_e = 0, varies_s = 0;
  for (size_t i = 0; i < 2000; i++) {
    int64_t c = stoke_source_synthetic_cost(ex, 3, 1, i);
    /* Pure: the same arguments, again and on another equal source. */
    assert_int_equal(stoke_source_synthetic_cost(ex, 3, 1, i), c);
    assert_int_equal(stoke_source_synthetic_cost(ex2, 3, 1, i), c);
    TU_CHECK(c >= 0, "negative cost %lld", (long long)c);
    if (c != stoke_source_synthetic_cost(ex, 3, 1, i + 1)) varies_i = 1;
    if (c != stoke_source_synthetic_cost(ex, 3, 2, i)) varies_e = 1;
    if (c != stoke_source_synthetic_cost(ex, 4, 1, i)) varies_s = 1;
  }
  TU_CHECK(varies_i && varies_e && varies_s,
           "EXP cost does not vary with index %d / epoch %d / seed %d",
           varies_i, varies_e, varies_s);
  stoke_source_destroy(sl);
  stoke_source_destroy(sp);
  stoke_source_destroy(te);
  stoke_source_destroy(ex);
  stoke_source_destroy(ex2);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Costs of indices 0..n-1 of (seed, epoch), sorted; returns the mean. */
static double costs(stoke_source *src, int64_t *v, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; i++) {
    v[i] = stoke_source_synthetic_cost(src, 17, 2, i);
    TU_CHECK(v[i] >= 0, "negative cost at %zu", i);
    sum += (double)v[i];
  }
  qsort(v, n, sizeof *v, cmp_i64);
  return sum / (double)n;
}

static void test_cost_distributions(void **state) {
  (void)state;
  enum { N = 40000 };
  static int64_t ve[N], vl[N], vl2[N], vl05[N];
  const int64_t mean = 2000000; /* 2 ms */
  stoke_source *ex = synth(STOKE_SYNTH_SLEEP, STOKE_COST_EXP, mean, 1.0);
  stoke_source *ln = synth(STOKE_SYNTH_SPIN, STOKE_COST_LOGNORMAL, mean, 1.0);
  stoke_source *ln2 = synth(STOKE_SYNTH_SLEEP, STOKE_COST_LOGNORMAL, mean, 2.0);
  stoke_source *ln05 =
      synth(STOKE_SYNTH_SLEEP, STOKE_COST_LOGNORMAL, mean, 0.5);
  double me = costs(ex, ve, N), ml = costs(ln, vl, N);
  double ml2 = costs(ln2, vl2, N), ml05 = costs(ln05, vl05, N);
  /* EXP: sd of the mean = mean/sqrt(N) = 0.5%; allow 5%. */
  TU_CHECK(fabs(me / mean - 1) < 0.05, "EXP mean %.0f, want %lld", me,
           (long long)mean);
  /* EXP median = mean * ln 2. */
  TU_CHECK(fabs((double)ve[N / 2] / mean - log(2.0)) < 0.05,
           "EXP median %lld, want %.0f", (long long)ve[N / 2],
           mean * log(2.0));
  /* LOGNORMAL sigma 1: sd of the mean = sqrt(e - 1)/sqrt(N) = 0.7%; 7%.
  ** sigma 0.5: 0.3%. */
  TU_CHECK(fabs(ml / mean - 1) < 0.07, "LOGNORMAL(1) mean %.0f, want %lld",
           ml, (long long)mean);
  TU_CHECK(fabs(ml05 / mean - 1) < 0.05, "LOGNORMAL(0.5) mean %.0f", ml05);
  /* sigma 2 has sd of the mean 3.7%: only a loose check. */
  TU_CHECK(ml2 / mean > 0.6 && ml2 / mean < 1.4, "LOGNORMAL(2) mean %.0f",
           ml2);
  /* The median of a lognormal with mean m is m * exp(-sigma^2 / 2). */
  TU_CHECK(fabs((double)vl[N / 2] / mean - exp(-0.5)) < 0.05,
           "LOGNORMAL(1) median %lld, want %.0f", (long long)vl[N / 2],
           mean * exp(-0.5));
  /* Heavier tail: p99.9 of lognormal(1) is 13.3 means, of exp 6.9. */
  int64_t p999e = ve[N - N / 1000], p999l = vl[N - N / 1000];
  TU_CHECK(p999l > p999e, "LOGNORMAL p99.9 %lld not above EXP p99.9 %lld",
           (long long)p999l, (long long)p999e);
  TU_CHECK((double)p999l / mean > 9 && (double)p999l / mean < 19,
           "LOGNORMAL(1) p99.9 = %.1f means, want ~13.3",
           (double)p999l / mean);
  /* ... and the tail grows with sigma. */
  TU_CHECK(vl2[N - N / 100] > vl[N - N / 100] &&
               vl[N - N / 100] > vl05[N - N / 100],
           "p99 does not grow with sigma: %lld %lld %lld",
           (long long)vl05[N - N / 100], (long long)vl[N - N / 100],
           (long long)vl2[N - N / 100]);
  stoke_source_destroy(ex);
  stoke_source_destroy(ln);
  stoke_source_destroy(ln2);
  stoke_source_destroy(ln05);
}

/* "y" = index % n_classes, also for SLEEP with a tiny cost. */
static void test_synthetic_labels(void **state) {
  (void)state;
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = STOKE_SYNTH_SLEEP;
  sc.cost_ns = 1000; /* 1 us */
  sc.n_samples = 37;
  sc.ndim = 2;
  sc.shape[0] = 2;
  sc.shape[1] = 3;
  sc.n_classes = 5;
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_synthetic(&sc, &src));
  stoke_config c = tu_config(src, 2, 2, 6);
  c.shuffle = 1;
  c.seed = 3;
  stoke_loader *l = tu_loader(&c);
  stoke_batch *b;
  int rc;
  size_t total = 0;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    stoke_tensor tx, ty;
    TU_OK(stoke_batch_field(b, 0, &tx));
    TU_OK(stoke_batch_field(b, 1, &ty));
    size_t n = stoke_batch_size(b);
    assert_int_equal(tx.ndim, 3);
    assert_int_equal(tx.shape[1], 2);
    assert_int_equal(tx.shape[2], 3);
    assert_int_equal(tx.n_bytes, n * 6 * sizeof(float));
    const size_t *ix = stoke_batch_indices(b);
    const float *x = tx.data;
    for (size_t s = 0; s < n; s++) {
      TU_CHECK(((const int64_t *)ty.data)[s] == (int64_t)(ix[s] % 5),
               "y of sample %zu = %lld", ix[s],
               (long long)((const int64_t *)ty.data)[s]);
      for (int j = 0; j < 6; j++)
        TU_CHECK(isfinite(x[s * 6 + j]), "x not finite");
    }
    total += n;
    stoke_batch_release(b);
  }
  TU_RC_L(l, rc, STOKE_END);
  assert_int_equal(total, 37);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
}

/* A SLEEP source spends its cost: at W = 0 an epoch lasts at least the sum
** of stoke_source_synthetic_cost over its samples (a lower bound only), and
** the workers' busy time covers it too. */
static void test_synthetic_sleep_spends_cost(void **state) {
  (void)state;
  const int dists[] = {STOKE_COST_FIXED, STOKE_COST_EXP};
  for (size_t k = 0; k < 2; k++) {
    stoke_synthetic_config sc;
    stoke_synthetic_config_init(&sc);
    sc.kind = STOKE_SYNTH_SLEEP;
    sc.dist = dists[k];
    sc.cost_ns = 3000000; /* 3 ms */
    sc.n_samples = 24;
    sc.ndim = 1;
    sc.shape[0] = 2;
    stoke_source *src = NULL;
    TU_OK(stoke_source_create_synthetic(&sc, &src));
    stoke_config c = tu_config(src, 0, 1, 6);
    c.seed = 31;
    c.shuffle = 1;
    stoke_loader *l = tu_loader(&c);
    TU_OK(stoke_loader_set_epoch(l, 2));
    int64_t sum = 0;
    stoke_batch *b;
    int rc;
    int64_t t0 = tu_now_ns();
    while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
      const size_t *ix = stoke_batch_indices(b);
      for (size_t s = 0; s < stoke_batch_size(b); s++)
        sum += stoke_source_synthetic_cost(src, 31, 2, ix[s]);
      stoke_batch_release(b);
    }
    int64_t elapsed = tu_now_ns() - t0;
    TU_RC_L(l, rc, STOKE_END);
    if (dists[k] == STOKE_COST_FIXED) assert_int_equal(sum, 24 * 3000000);
    TU_CHECK(elapsed >= sum, "dist %d: the epoch took %lld ns, its samples "
             "cost %lld ns (with the loader's seed and epoch)", dists[k],
             (long long)elapsed, (long long)sum);
    stoke_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    TU_OK(stoke_loader_stats(l, &st));
    TU_CHECK(st.worker_busy_ns >= sum, "dist %d: worker_busy_ns %lld < the "
             "samples' cost %lld", dists[k], (long long)st.worker_busy_ns,
             (long long)sum);
    stoke_loader_destroy(l);
    stoke_source_destroy(src);
  }
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dtypes),
      cmocka_unit_test(test_callback_source_reports),
      cmocka_unit_test(test_tensor_source_reports),
      cmocka_unit_test(test_synthetic_defaults),
      cmocka_unit_test(test_cost_fixed_and_pure),
      cmocka_unit_test(test_cost_distributions),
      cmocka_unit_test(test_synthetic_labels),
      cmocka_unit_test(test_synthetic_sleep_spends_cost),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
