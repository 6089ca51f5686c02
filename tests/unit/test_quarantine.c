/* test_quarantine.c — stoke_config.quarantine_path (docs/quarantine.md).
**
**  - Every bad sample is appended to the file with where and why, under its
**    header (kind, sample count, fingerprint).
**  - Later epochs and later loaders do not read the samples it lists (the
**    fill is never called for them) and handle them by the policy at once:
**    skipped, replaced (a substitute is never a listed sample) or, under
**    FAIL, an error naming the file.
**  - A file made for another dataset, or that is no quarantine, is refused
**    at create; one edited by hand (an index per line) is read.  Another
**    dataset of the same kind, sample count and classes but other files is
**    told apart by the fingerprint alone, and refused too.
**  - stoke_source_fingerprint: the same for the same dataset, another for
**    another sample count, kind or class names.
*/
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <sys/stat.h>
#include <jpeglib.h>
#include <spng.h>

#include "decode_fixtures.h"
#include "image_fixtures.h"
#include "test_util.h"

static char g_dir[64];

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/stoke-quarantine-XXXXXX");
  return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void path_of(char *buf, size_t cap, const char *name) {
  snprintf(buf, cap, "%s/%s", g_dir, name);
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  static char buf[65536];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void spit(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static stoke_config q_config(stoke_source *src, unsigned W, int on_error,
                             const char *path) {
  stoke_config c = tu_config(src, W, 2, 4);
  c.shuffle = 1;
  c.seed = 3;
  c.on_error = on_error;
  c.max_failure_frac = 0;
  c.prefetch_next_epoch = 0; /* exact fill counts per epoch */
  c.quarantine_path = path;
  return c;
}

static int run_epoch_count(stoke_loader *l, size_t *samples) {
  stoke_batch *b;
  int rc;
  *samples = 0;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    *samples += stoke_batch_size(b);
    stoke_batch_release(b);
  }
  return rc;
}

static void test_records_then_skips_reading(void **state) {
  (void)state;
  const size_t N = 40;
  char path[128];
  path_of(path, sizeof path, "q1.txt");
  tu_cb *cb = tu_cb_new(N);
  uint8_t bad[40] = {0};
  bad[3] = bad[17] = 1;
  cb->fail_set = bad;
  cb->fail_cause = "broken\tjpeg\nheader";
  stoke_source *src = tu_cb_source(cb);
  for (unsigned W = 0; W <= 3; W += 3) {
    remove(path);
    stoke_config c = q_config(src, W, STOKE_ON_ERROR_SKIP, path);
    stoke_loader *l = tu_loader(&c);
    tu_cb_reset_calls(cb);
    size_t n;
    /* Epoch 0 meets the two bad samples and lists them. */
    TU_RC_L(l, run_epoch_count(l, &n), STOKE_END);
    assert_int_equal(n, N - 2);
    assert_int_equal(tu_cb_calls(cb, 0, 3), 1);
    char *text = read_text(path);
    assert_non_null(text);
    TU_CONTAINS(text, "stoke-quarantine 1\nkind callback\nsamples 40\n"
                      "fingerprint 0x");
    /* Tabs and line breaks of the reason became spaces. */
    TU_CONTAINS(text, "\n3\t\tbroken jpeg header (sample 3)\n");
    TU_CONTAINS(text, "\n17\t\tbroken jpeg header (sample 17)\n");
    /* Epoch 1: not read at all, skipped all the same. */
    TU_RC_L(l, run_epoch_count(l, &n), STOKE_END);
    assert_int_equal(n, N - 2);
    assert_int_equal(tu_cb_calls(cb, 1, 3), 0);
    assert_int_equal(tu_cb_calls(cb, 1, 17), 0);
    assert_int_equal(tu_cb_calls(cb, 1, 4), 1);
    tu_expect_bad_counts(l, 2, 2, 4, 0);
    stoke_failure f[STOKE_FAILURES_KEPT];
    size_t nf = stoke_loader_failures(l, f, STOKE_FAILURES_KEPT);
    assert_int_equal(nf, 4);
    assert_int_equal(f[3].quarantined, 1);
    TU_CONTAINS(f[3].reason, "listed in the quarantine");
    TU_CONTAINS(f[3].reason, path);
    stoke_loader_destroy(l);
    /* The file is not grown by listed samples: two entries. */
    text = read_text(path);
    size_t entries = 0;
    for (char *p = text; (p = strchr(p, '\n')); p++)
      if (p[1] >= '0' && p[1] <= '9') entries++;
    assert_int_equal(entries, 2);

    /* A later run: never reads them, from its first epoch. */
    l = tu_loader(&c);
    tu_cb_reset_calls(cb);
    TU_RC_L(l, run_epoch_count(l, &n), STOKE_END);
    assert_int_equal(n, N - 2);
    assert_int_equal(tu_cb_calls(cb, 0, 3), 0);
    assert_int_equal(tu_cb_calls(cb, 0, 17), 0);
    tu_expect_bad_counts(l, 0, 2, 2, 0);
    stoke_loader_destroy(l);
  }
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static void test_replace_never_picks_a_listed_sample(void **state) {
  (void)state;
  const size_t N = 24;
  char path[128];
  path_of(path, sizeof path, "q2.txt");
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  /* A hand-made list: half the samples, an index per line. */
  char text[1024];
  stoke_config c = q_config(src, 2, STOKE_ON_ERROR_REPLACE, path);
  int n = snprintf(text, sizeof text,
                   "stoke-quarantine 1\nkind callback\nsamples 24\n"
                   "fingerprint 0x%016llx\n",
                   (unsigned long long)stoke_source_fingerprint(src));
  for (size_t i = 0; i < N; i += 2)
    n += snprintf(text + n, sizeof text - (size_t)n, "%zu\n", i);
  spit(path, text);
  c.max_replace_tries = 64;
  stoke_loader *l = tu_loader(&c);
  tu_cb_reset_calls(cb);
  tu_epoch *e = tu_epoch_new();
  tu_epoch_ok(l, cb, e, 1);
  assert_int_equal(e->n_samples, N);
  for (size_t k = 0; k < N; k++)
    TU_CHECK(e->idx[k] % 2 == 1, "listed sample %zu delivered", e->idx[k]);
  for (size_t i = 0; i < N; i += 2) assert_int_equal(tu_cb_calls(cb, 0, i), 0);
  tu_expect_bad_counts(l, 0, 12, 0, 12);
  free(e);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static void test_fail_names_the_quarantine(void **state) {
  (void)state;
  char path[128];
  path_of(path, sizeof path, "q3.txt");
  tu_cb *cb = tu_cb_new(16);
  stoke_source *src = tu_cb_source(cb);
  char text[512];
  snprintf(text, sizeof text,
           "# made by hand\nstoke-quarantine 1\nkind callback\n"
           "samples 16\nfingerprint 0x%016llx\n5\twhere\twhy\n",
           (unsigned long long)stoke_source_fingerprint(src));
  spit(path, text);
  stoke_config c = q_config(src, 0, STOKE_ON_ERROR_FAIL, path);
  c.shuffle = 0;
  stoke_loader *l = tu_loader(&c);
  size_t n;
  TU_RC_L(l, run_epoch_count(l, &n), STOKE_ESAMPLE);
  TU_CONTAINS(stoke_errmsg(l), "sample 5 (epoch 0, batch 1) is listed in the "
                               "quarantine ");
  TU_CONTAINS(stoke_errmsg(l), path);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static void test_refused_for_another_dataset(void **state) {
  (void)state;
  char path[128];
  path_of(path, sizeof path, "q4.txt");
  remove(path);
  tu_cb *cb = tu_cb_new(16), *cb2 = tu_cb_new(17);
  stoke_source *src = tu_cb_source(cb), *other = tu_cb_source(cb2);
  stoke_config c = q_config(src, 0, STOKE_ON_ERROR_SKIP, path);
  stoke_loader *l = tu_loader(&c); /* creates the file with its header */
  stoke_loader_destroy(l);
  c.source = other;
  l = NULL;
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  assert_null(l);
  TU_CONTAINS(stoke_errmsg(NULL), "was made for another dataset (callback, "
                                  "16 samples");
  TU_CONTAINS(stoke_errmsg(NULL), "this one is callback, 17 samples");
  /* Not a quarantine at all. */
  spit(path, "hello\n");
  TU_RC(stoke_loader_create(&c, &l), STOKE_EFORMAT);
  TU_CONTAINS(stoke_errmsg(NULL), "expected 'stoke-quarantine 1' first");
  /* An index past the dataset. */
  char text[256];
  snprintf(text, sizeof text,
           "stoke-quarantine 1\nkind callback\nsamples 17\nfingerprint "
           "0x%016llx\n17\n",
           (unsigned long long)stoke_source_fingerprint(other));
  spit(path, text);
  TU_RC(stoke_loader_create(&c, &l), STOKE_EFORMAT);
  TU_CONTAINS(stoke_errmsg(NULL), "line 5: '17' is not a sample index below "
                                  "17");
  /* A path that cannot be created. */
  c.quarantine_path = "/nonexistent-dir/q.txt";
  TU_RC(stoke_loader_create(&c, &l), STOKE_EIO);
  TU_CONTAINS(stoke_errmsg(NULL), "/nonexistent-dir/q.txt");
  stoke_source_destroy(src);
  stoke_source_destroy(other);
  tu_cb_free(cb);
  tu_cb_free(cb2);
}

/* A folder dataset under root/name: classes ant and bee, two PNGs each,
** named <stem>0.png and <stem>1.png. */
static void two_class_folder(char *out, size_t cap, const char *root,
                             const char *name, const char *stem) {
  char d[512], file[64];
  mkdir_in(out, cap, root, name);
  const char *classes[] = {"ant", "bee"};
  for (int c = 0; c < 2; c++) {
    mkdir_in(d, sizeof d, out, classes[c]);
    for (int k = 0; k < 2; k++) {
      snprintf(file, sizeof file, "%s%d.png", stem, k);
      write_png(d, file, 8, 8, SPNG_COLOR_TYPE_GRAYSCALE, 8);
    }
  }
}

/* The two datasets agree on everything in the header but the fingerprint
** (kind "folder", 4 samples, classes ant and bee): only the fingerprint can
** refuse the second, whose indices name other files. */
static void test_refused_for_a_dataset_alike_but_for_its_files(void **state) {
  (void)state;
  char root[64], a[256], b[256], path[128];
  tmp_root(root, "qfp");
  two_class_folder(a, sizeof a, root, "a", "x");
  two_class_folder(b, sizeof b, root, "b", "y");
  path_of(path, sizeof path, "q-alike.txt");
  remove(path);
  stoke_source *sa = tu_open_images(a, "center-crop=8,u8");
  stoke_source *sb = tu_open_images(b, "center-crop=8,u8");
  assert_int_equal(stoke_source_n_samples(sa), stoke_source_n_samples(sb));
  assert_true(stoke_source_fingerprint(sa) != stoke_source_fingerprint(sb));
  stoke_config c = q_config(sa, 0, STOKE_ON_ERROR_SKIP, path);
  stoke_loader *l = tu_loader(&c); /* creates the file with its header */
  stoke_loader_destroy(l);
  /* The same dataset opens it again. */
  l = tu_loader(&c);
  stoke_loader_destroy(l);
  c.source = sb;
  l = NULL;
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  assert_null(l);
  char want[128];
  snprintf(want, sizeof want, "fingerprint 0x%016llx); this one is",
           (unsigned long long)stoke_source_fingerprint(sa));
  TU_CONTAINS(stoke_errmsg(NULL), want);
  snprintf(want, sizeof want, "4 samples, fingerprint 0x%016llx: use",
           (unsigned long long)stoke_source_fingerprint(sb));
  TU_CONTAINS(stoke_errmsg(NULL), want);
  stoke_source_destroy(sa);
  stoke_source_destroy(sb);
  assert_int_equal(tmp_root_remove(root), 0);
}

static void test_fingerprint(void **state) {
  (void)state;
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.n_samples = 50;
  stoke_source *a, *b, *c;
  TU_OK(stoke_source_create_synthetic(&sc, &a));
  TU_OK(stoke_source_create_synthetic(&sc, &b));
  sc.n_samples = 51;
  TU_OK(stoke_source_create_synthetic(&sc, &c));
  tu_cb *cb = tu_cb_new(50);
  stoke_source *d = tu_cb_source(cb);
  assert_true(stoke_source_fingerprint(a) == stoke_source_fingerprint(b));
  assert_true(stoke_source_fingerprint(a) != stoke_source_fingerprint(c));
  assert_true(stoke_source_fingerprint(a) != stoke_source_fingerprint(d));
  assert_true(stoke_source_fingerprint(NULL) == 0);
  stoke_source_destroy(a);
  stoke_source_destroy(b);
  stoke_source_destroy(c);
  stoke_source_destroy(d);
  tu_cb_free(cb);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_records_then_skips_reading),
      cmocka_unit_test(test_replace_never_picks_a_listed_sample),
      cmocka_unit_test(test_fail_names_the_quarantine),
      cmocka_unit_test(test_refused_for_another_dataset),
      cmocka_unit_test(test_refused_for_a_dataset_alike_but_for_its_files),
      cmocka_unit_test(test_fingerprint),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
