/* test_verify.c — stoke_verify: every sample decoded whole, packed CRCs
** checked, the bad ones written as a quarantine the loader then uses.
**
**  - A JPEG cut short in its bottom rows decodes fine for a crop of its top
**    (the loader's region decode stops there) but not whole: verify finds
**    it, with the file's name and the decoder's reason.
**  - A packed sample with one byte changed in its JFIF header decodes the
**    same, so only its CRC-32 tells: verify finds it.
**  - The quarantine it writes is the format the loader reads (the same
**    fingerprint), and a loader with SKIP then never reads those samples.
**  - The same result whatever the thread count; progress reaches the total;
**    a progress callback that stops leaves the old quarantine in place.
*/
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "decode_fixtures.h"
#include "test_util.h"

static char g_root[64], g_data[128];

static void write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (n) assert_int_equal(fwrite(p, 1, n, f), n);
  fclose(f);
}

static char *find(char *hay, size_t n, const char *needle, size_t k) {
  for (size_t i = 0; i + k <= n; i++)
    if (memcmp(hay + i, needle, k) == 0) return hay + i;
  return NULL;
}

static char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  rewind(f);
  char *buf = malloc((size_t)len + 1);
  assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
  buf[len] = '\0';
  fclose(f);
  *n = (size_t)len;
  return buf;
}

/* n JPEGs of w x h named PREFIX<i>.jpg in dir (pattern seeds seed0 + i);
** the one at index cut, if any, named bottom.jpg and its last quarter cut
** off. */
static void write_jpegs(const char *dir, int n, uint32_t w, uint32_t h,
                        uint64_t seed0, const char *prefix, int cut) {
  for (int i = 0; i < n; i++) {
    uint8_t *px = df_pattern(w, h, seed0 + (uint64_t)i), *buf;
    size_t len;
    df_jpeg_rgb(px, w, h, 0, &buf, &len);
    char path[320];
    if (i == cut) {
      snprintf(path, sizeof path, "%s/bottom.jpg", dir);
      len = len * 3 / 4;
    } else {
      snprintf(path, sizeof path, "%s/%s%02d.jpg", dir, prefix, i);
    }
    write_file(path, buf, len);
    free(px);
    free(buf);
  }
}

/* data/a/: 12 good JPEGs and bottom.jpg, whose last quarter is cut off. */
static int setup(void **state) {
  (void)state;
  snprintf(g_root, sizeof g_root, "/tmp/stoke-verify-XXXXXX");
  if (!mkdtemp(g_root)) return -1;
  snprintf(g_data, sizeof g_data, "%s/data", g_root);
  mkdir(g_data, 0755);
  char cls[256];
  snprintf(cls, sizeof cls, "%s/a", g_data);
  mkdir(cls, 0755);
  write_jpegs(cls, 13, 96, 512, 1, "img", 6);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
  return system(cmd) == 0 ? 0 : -1;
}

typedef struct progress {
  size_t calls, last_done, total;
  size_t stop_at; /* 0: never */
} progress;

static int on_progress(void *user, size_t done, size_t total, size_t n_bad) {
  progress *p = user;
  (void)n_bad;
  TU_CHECK(done >= p->last_done && done <= total, "progress %zu of %zu after "
           "%zu", done, total, p->last_done);
  p->calls++;
  p->last_done = done;
  p->total = total;
  return p->stop_at && done >= p->stop_at;
}

static void test_finds_what_a_crop_misses(void **state) {
  (void)state;
  /* A center crop (rows 224 to 288 of 512): the loader's region decode
  ** stops before the damage. */
  stoke_source *src = tu_open_images(g_data, "center-crop=64,hwc,u8");
  stoke_config c = tu_config(src, 0, 1, 13);
  stoke_loader *l = tu_loader(&c);
  stoke_batch *b = NULL;
  int rc = stoke_loader_next(l, &b);
  stoke_batch_release(b);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  src = tu_open_images(g_data, NULL);
  char qpath[160];
  snprintf(qpath, sizeof qpath, "%s/q.txt", g_root);
  for (unsigned threads = 1; threads <= 4; threads += 3) {
    stoke_verify_config vc;
    stoke_verify_config_init(&vc);
    vc.n_threads = threads;
    vc.quarantine_path = qpath;
    progress p = {0};
    vc.progress = on_progress;
    vc.user = &p;
    stoke_verify_result res;
    TU_OK(stoke_verify(src, &vc, &res));
    assert_int_equal(res.n_samples, 13);
    assert_int_equal(res.n_bad, 1);
    assert_int_equal(res.n_listed, 1);
    assert_int_equal(res.stopped, 0);
    assert_true(res.bytes > 0);
    TU_CONTAINS(res.bad[0].where, "bottom.jpg");
    assert_true(res.bad[0].reason[0] != '\0');
    assert_true(p.calls >= 1);
    assert_int_equal(p.last_done, 13);
    /* The quarantine: what the loader reads. */
    size_t n;
    char *text = read_file(qpath, &n);
    TU_CONTAINS(text, "stoke-quarantine 1\nkind folder\nsamples 13\n");
    TU_CONTAINS(text, "bottom.jpg");
    free(text);
  }
  /* The crop loader did not fail; a loader using the quarantine skips the
  ** sample without reading it. */
  TU_CHECK(rc == STOKE_OK, "the crop loader failed: a weaker test then");
  stoke_config q = tu_config(src, 2, 2, 4);
  q.on_error = STOKE_ON_ERROR_SKIP;
  q.quarantine_path = qpath;
  q.prefetch_next_epoch = 0; /* one epoch's count */
  l = tu_loader(&q);
  size_t samples = 0;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    samples += stoke_batch_size(b);
    stoke_batch_release(b);
  }
  TU_RC_L(l, rc, STOKE_END);
  assert_int_equal(samples, 12);
  tu_expect_bad_counts(l, 0, 1, 1, 0);
  stoke_loader_destroy(l);

  /* Stopped early: the old quarantine (here one made by hand, listing
  ** another sample) stays as it was.  The stop comes from the progress
  ** callback on this thread, so on a loaded machine the one worker may
  ** finish all 13 samples first: then the file is the complete new one. */
  char old[256];
  snprintf(old, sizeof old,
           "stoke-quarantine 1\nkind folder\nsamples 13\nfingerprint "
           "0x%016llx\n0\tmarker\tby hand\n",
           (unsigned long long)stoke_source_fingerprint(src));
  write_file(qpath, old, strlen(old));
  stoke_verify_config vc;
  stoke_verify_config_init(&vc);
  vc.n_threads = 1;
  vc.quarantine_path = qpath;
  progress p = {.stop_at = 1};
  vc.progress = on_progress;
  vc.user = &p;
  stoke_verify_result res;
  TU_OK(stoke_verify(src, &vc, &res));
  size_t after_n;
  char *after = read_file(qpath, &after_n);
  if (res.stopped) {
    assert_true(res.n_samples < 13);
    assert_string_equal(after, old);
  } else {
    print_message("verify finished before its first progress call: the "
                  "complete result replaced the file\n");
    assert_int_equal(res.n_samples, 13);
    TU_CONTAINS(after, "bottom.jpg");
    assert_null(strstr(after, "marker"));
  }
  {
    char tmp[200];
    snprintf(tmp, sizeof tmp, "%s.tmp", qpath);
    struct stat st;
    TU_CHECK(stat(tmp, &st) != 0, "%s was left behind", tmp);
  }
  free(after);
  stoke_source_destroy(src);
}

static void test_packed_crc(void **state) {
  (void)state;
  /* Pack the good files only, then change one byte of a sample's JFIF
  ** header: it decodes the same, its CRC does not match. */
  char good[160], cls[200], prefix[160], shard[200];
  snprintf(good, sizeof good, "%s/good", g_root);
  mkdir(good, 0755);
  snprintf(cls, sizeof cls, "%s/a", good);
  mkdir(cls, 0755);
  write_jpegs(cls, 5, 64, 48, 20, "g", -1);
  snprintf(prefix, sizeof prefix, "%s/p", g_root);
  stoke_source *src = tu_open_images(good, NULL);
  stoke_pack_config pc;
  stoke_pack_config_init(&pc);
  pc.keep_bytes = 1;
  stoke_pack_result pr;
  TU_OK(stoke_pack(src, prefix, &pc, &pr));
  stoke_source_destroy(src);
  snprintf(shard, sizeof shard, "%s-00000.stoke", prefix);
  size_t n;
  char *bytes = read_file(shard, &n);
  /* The third sample's JFIF: the third "JFIF\0" in the shard. */
  char *at = bytes - 1;
  for (int k = 0; k < 3; k++) {
    at = find(at + 1, n - (size_t)(at + 1 - bytes), "JFIF", 5);
    assert_non_null(at);
  }
  at[9] ^= 0x01; /* X density: no decoder looks at it */
  write_file(shard, bytes, n);
  free(bytes);
  src = tu_open_images(shard, NULL);
  /* The loader (no CRC on its hot path) reads every sample fine. */
  stoke_config c = tu_config(src, 0, 1, 5);
  stoke_loader *l = tu_loader(&c);
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  stoke_batch_release(b);
  stoke_loader_destroy(l);
  stoke_verify_result res;
  TU_OK(stoke_verify(src, NULL, &res));
  assert_int_equal(res.n_samples, 5);
  assert_int_equal(res.n_bad, 1);
  assert_int_equal(res.bad[0].index, 2);
  TU_CONTAINS(res.bad[0].reason, "CRC-32 mismatch");
  stoke_source_destroy(src);
}

static void test_not_an_image_source(void **state) {
  (void)state;
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  stoke_source *src;
  TU_OK(stoke_source_create_synthetic(&sc, &src));
  stoke_verify_result res;
  TU_RC(stoke_verify(src, NULL, &res), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "only image sources can be verified");
  stoke_verify_config vc;
  stoke_verify_config_init(&vc);
  vc.struct_size = 1;
  TU_RC(stoke_verify(src, &vc, &res), STOKE_EINVAL);
  stoke_source_destroy(src);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_finds_what_a_crop_misses),
      cmocka_unit_test(test_packed_crc),
      cmocka_unit_test(test_not_an_image_source),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
