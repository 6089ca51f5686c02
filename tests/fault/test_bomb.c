/* test_bomb.c — decompression bombs are refused before any large
** allocation, counting the decoding libraries' own allocations too.
**
** libjpeg-turbo allocates with malloc (its API takes no allocator), so the
** stoke allocator cannot see it; the process's malloc is watched instead:
**  - plain builds: LD_PRELOAD of malloc_count.so (set by CTest), which
**    records the largest request of anything in the process;
**  - ASan and TSan builds: the sanitizer's max_allocation_size_mb (set by
**    CTest with allocator_may_return_null), so any request over the bound
**    comes back NULL and the decode would fail with ENOMEM, not EFORMAT.
** Run by hand without either, it exits 77 (skipped).
**
** A positive control (a real progressive JPEG, whose whole-image DCT
** coefficients libjpeg buffers) shows the watch sees libjpeg's memory. */
#define _GNU_SOURCE /* RTLD_DEFAULT, mkdtemp */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/decode.h"
#include "decode_fixtures.h"
#include "image_fixtures.h"
#include "test_util.h"

/* The bound: what a refused bomb may allocate at most (libjpeg's tables
** and a few row buffers of a small image are far below it). */
#define BOUND ((size_t)16 << 20)

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#else
#define UNDER_SANITIZER 0
#endif

static size_t (*largest_fn)(void);
static void (*reset_fn)(void);

static void watch_reset(void) {
  if (reset_fn) reset_fn();
}
/* The largest request since the reset (0 under a sanitizer: there the
** bound is enforced by the allocator itself). */
static size_t watch_largest(void) { return largest_fn ? largest_fn() : 0; }

static char err[512];

static stoke__decoder *decoder(void) {
  stoke__decoder *d = NULL;
  assert_int_equal(stoke__decoder_create(NULL, &d), 0); /* default limits */
  return d;
}

/* data (a bomb) decoded whole and as a small crop: refused by max_pixels,
** with no request over BOUND. */
static void expect_refused(const uint8_t *data, size_t n, const char *dims) {
  stoke__decoder *d = decoder();
  stoke__decode_req crop = {0, 0, 64, 64, 32, 32, false};
  const stoke__decode_req *reqs[] = {NULL, &crop};
  for (int k = 0; k < 2; k++) {
    watch_reset();
    stoke__image img;
    int rc = stoke__decode(d, data, n, reqs[k], &img, err, sizeof err);
    size_t big = watch_largest();
    TU_CHECK(big <= BOUND, "%s%s: a %zu-byte request (%s)", dims,
             k ? " (crop)" : "", big, err);
    TU_CHECK(rc == STOKE_EFORMAT, "%s: rc %d: %s", dims, rc, err);
    TU_CONTAINS(err, dims);
    TU_CONTAINS(err, "exceeds max_pixels");
  }
  stoke__decoder_destroy(d);
}

static uint8_t *jpeg_of(uint32_t w, uint32_t h, int progressive,
                        size_t *n) {
  uint8_t *px = df_pattern(w, h, 5), *buf;
  df_jpeg_opts o = {JCS_RGB, JCS_UNKNOWN, 85, progressive, 2, 2, 0};
  df_jpeg(px, w, h, &o, &buf, n);
  free(px);
  return buf;
}

/* Patch the frame header's height and width (16 bits each). */
static void set_jpeg_dims(uint8_t *p, size_t n, uint16_t w, uint16_t h) {
  size_t sof = df_jpeg_sof(p, n);
  assert_true(sof > 0);
  p[sof + 5] = (uint8_t)(h >> 8);
  p[sof + 6] = (uint8_t)h;
  p[sof + 7] = (uint8_t)(w >> 8);
  p[sof + 8] = (uint8_t)w;
}

/* The control: decoding a real 2048x1536 progressive JPEG makes libjpeg
** buffer its coefficients, megabytes the watch must see. */
static void test_watch_sees_libjpeg(void **state) {
  (void)state;
  size_t n;
  uint8_t *p = jpeg_of(2048, 1536, 1, &n);
  stoke__decoder *d = decoder();
  stoke__decode_req crop = {100, 100, 300, 200, 0, 0, false};
  watch_reset();
  stoke__image img;
  TU_OK(stoke__decode(d, p, n, &crop, &img, err, sizeof err));
  if (!UNDER_SANITIZER)
    TU_CHECK(watch_largest() >= ((size_t)4 << 20),
             "the largest request was %zu bytes: libjpeg's memory unseen",
             watch_largest());
  stoke__decoder_destroy(d);
  free(p);
}

static void test_jpeg_bombs(void **state) {
  (void)state;
  size_t n;
  uint8_t *p = jpeg_of(64, 48, 0, &n);
  set_jpeg_dims(p, n, 60000, 60000); /* baseline: row buffers */
  expect_refused(p, n, "60000x60000");
  free(p);
  p = jpeg_of(64, 48, 1, &n);
  /* Progressive: libjpeg would buffer 30000 x 30000 coefficients (about
  ** 2.7 GB at 4:2:0) even for a crop; max_pixels is what stops it. */
  set_jpeg_dims(p, n, 30000, 30000);
  expect_refused(p, n, "30000x30000");
  free(p);
}

static void test_png_bomb(void **state) {
  (void)state;
  uint8_t gray[64] = {0}, *p;
  size_t n;
  assert_int_equal(df_png(gray, sizeof gray, 8, 8, SPNG_COLOR_TYPE_GRAYSCALE,
                          8, 0, NULL, NULL, &p, &n), 0);
  df_put_be32(p + 16, 65536);
  df_put_be32(p + 20, 65536);
  df_png_fix_crc(p, 8);
  expect_refused(p, n, "65536x65536");
  free(p);
}

/* Through a loader: the progressive bomb in an ImageFolder fails its
** sample by name, and nothing large was asked for on the way. */
static void test_bomb_through_loader(void **state) {
  (void)state;
  char root[64], cls[128];
  tmp_root(root, "bomb");
  snprintf(cls, sizeof cls, "%s/x", root);
  assert_int_equal(mkdir(cls, 0755), 0);
  size_t n;
  uint8_t *p = jpeg_of(64, 48, 1, &n);
  set_jpeg_dims(p, n, 30000, 30000);
  write_file(cls, "bomb.jpg", p, n);
  free(p);
  watch_reset();
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_images(root, NULL, &src));
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = 1;
  cfg.n_workers = 1;
  stoke_loader *l = NULL;
  TU_OK(stoke_loader_create(&cfg, &l));
  stoke_batch *b;
  int rc = stoke_loader_next(l, &b);
  /* The loader's own batch slots (1 x 3 x 224 x 224) are the largest. */
  TU_CHECK(watch_largest() <= BOUND, "a %zu-byte request (%s)",
           watch_largest(), stoke_errmsg(l));
  TU_RC_L(l, rc, STOKE_ESAMPLE);
  TU_CONTAINS(stoke_errmsg(l), "bomb.jpg");
  TU_CONTAINS(stoke_errmsg(l), "30000x30000 exceeds max_pixels");
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  assert_int_equal(tmp_root_remove(root), 0);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  largest_fn = (size_t (*)(void))dlsym(RTLD_DEFAULT,
                                       "stoke_test_malloc_largest");
  reset_fn = (void (*)(void))dlsym(RTLD_DEFAULT, "stoke_test_malloc_reset");
  if (!largest_fn && !UNDER_SANITIZER) {
    fprintf(stderr, "test_bomb: run it with LD_PRELOAD=malloc_count.so (as "
                    "ctest does)\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_watch_sees_libjpeg),
      cmocka_unit_test(test_jpeg_bombs),
      cmocka_unit_test(test_png_bomb),
      cmocka_unit_test(test_bomb_through_loader),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
