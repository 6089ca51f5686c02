/* test_pack_resize.c — stoke pack --max-side: images whose longer side is
** over max_side are resized at pack time (antialiased PIL bilinear, as the
** transforms) and stored as JPEGs of the quality asked, with restart cuts;
** the others are packed as without it.  Every shard's header records the
** size and the quality (flag RESIZED), stoke_source_pack_info reads them;
** shards without the flag read as before. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <jpeglib.h>
#include <spng.h>

#include "decode_fixtures.h"
#include "image_fixtures.h"
#include "test_util.h"
#include "decode/decode.h"
#include "transform/transform.h"

static char root[64], folder[256];

/* ant/big.jpg 300x200, ant/small.jpg 50x40, bee/big.png 120x160,
** bee/tall.jpg 100x260: sorted, samples 0..3. */
/* A smooth photograph-like image (three gradients), so that the check of
** the resize is not a check of JPEG's chroma subsampling on sharp edges. */
static void write_smooth(const char *dir, const char *name, uint32_t w,
                         uint32_t h) {
  uint8_t *px = malloc((size_t)w * h * 3), *buf;
  for (uint32_t y = 0; y < h; y++)
    for (uint32_t x = 0; x < w; x++) {
      uint8_t *q = px + ((size_t)y * w + x) * 3;
      q[0] = (uint8_t)(x * 255u / (w - 1));
      q[1] = (uint8_t)(y * 255u / (h - 1));
      q[2] = (uint8_t)(128 + 100 * sin((double)(x + y) / 40.0));
    }
  df_jpeg_opts rgb = {JCS_RGB, JCS_UNKNOWN, 95, 0, 2, 2, 0};
  size_t n;
  df_jpeg(px, w, h, &rgb, &buf, &n);
  write_file(dir, name, buf, n);
  free(px);
  free(buf);
}

static void make_folder(void) {
  char d[512];
  snprintf(folder, sizeof folder, "%s/train", root);
  assert_int_equal(mkdir(folder, 0755), 0);
  df_jpeg_opts rgb = {JCS_RGB, JCS_UNKNOWN, 95, 0, 2, 2, 0};
  mkdir_in(d, sizeof d, folder, "ant");
  write_smooth(d, "big.jpg", 300, 200);
  write_jpeg(d, "small.jpg", 50, 40, &rgb, 22);
  mkdir_in(d, sizeof d, folder, "bee");
  write_png(d, "big.png", 120, 160, SPNG_COLOR_TYPE_TRUECOLOR, 8);
  write_smooth(d, "tall.jpg", 100, 260);
}

static stoke_source *pack_and_open(unsigned max_side, int quality,
                                   const char *name, stoke_pack_result *res) {
  stoke_source *src = tu_open_images(folder, NULL);
  char prefix[160];
  snprintf(prefix, sizeof prefix, "%s/%s", root, name);
  stoke_pack_config pc;
  stoke_pack_config_init(&pc);
  pc.max_side = max_side;
  pc.quality = quality;
  pc.shard_bytes = 5000; /* several shards: each records it */
  TU_OK(stoke_pack(src, prefix, &pc, res));
  stoke_source_destroy(src);
  char glob[200];
  snprintf(glob, sizeof glob, "%s-*.stoke", prefix);
  return tu_open_images(glob, NULL);
}

/* PSNR of a against b (n bytes). */
static double psnr(const uint8_t *a, const uint8_t *b, size_t n) {
  double se = 0;
  for (size_t i = 0; i < n; i++) se += (double)(a[i] - b[i]) * (a[i] - b[i]);
  return se == 0 ? 99 : 10 * log10(255.0 * 255.0 * (double)n / se);
}

/* The resized sample's pixels against the original resized from full
** resolution with the same filter: close (a DCT-scaled decode and q90). */
static void check_pixels(stoke_source *orig, stoke_source *packed, size_t i,
                         uint32_t tw, uint32_t th, double min_db) {
  stoke__decoder *d;
  TU_OK(stoke__decoder_create(NULL, &d));
  char err[256];
  stoke_image_info oi, pi;
  TU_OK(stoke_source_probe(orig, i, &oi));
  TU_OK(stoke_source_probe(packed, i, &pi));
  assert_int_equal(pi.width, tw);
  assert_int_equal(pi.height, th);
  assert_int_equal(pi.format, STOKE_IMAGE_JPEG);
  assert_true(pi.restart_cuts);
  /* The original at full resolution, then PIL's bilinear to tw x th. */
  char where[512];
  stoke_source_describe(orig, i, where, sizeof where);
  size_t n;
  uint8_t *bytes = slurp(where, &n);
  stoke__image img;
  TU_CHECK(stoke__decode(d, bytes, n, NULL, &img, err, sizeof err) == 0,
           "%s", err);
  stoke__tf_spec spec = {.crop = STOKE__TF_CROP_CENTER, .out_w = (int)tw,
                         .out_h = (int)th, .layout = STOKE__TF_HWC,
                         .dtype = STOKE_U8};
  stoke__tf_plan plan = {.box_w = oi.width, .box_h = oi.height,
                         .clip_x1 = (int)oi.width, .clip_y1 = (int)oi.height,
                         .out_w = (int)tw, .out_h = (int)th};
  stoke__tf_image tfi = {.px = img.pixels, .w = (int)img.width,
                         .h = (int)img.height, .stride = img.stride,
                         .scale = 1};
  stoke__tf_scratch sc;
  stoke__tf_scratch_init(&sc, NULL);
  uint8_t *want = malloc((size_t)tw * th * 3);
  TU_OK(stoke__tf_apply(&spec, &plan, &tfi, &sc, want));
  stoke__tf_scratch_free(&sc);
  free(bytes);
  /* The packed sample, decoded whole. */
  stoke_source_describe(packed, i, where, sizeof where);
  char *at = strstr(where, " at offset ");
  assert_non_null(at);
  unsigned long long off = strtoull(at + 11, NULL, 10);
  *strstr(where, " sample ") = 0;
  size_t fn;
  uint8_t *file = slurp(where, &fn);
  TU_CHECK(stoke__decode(d, file + off, pi.bytes, NULL, &img, err,
                         sizeof err) == 0, "%s", err);
  double db = psnr(img.pixels, want, (size_t)tw * th * 3);
  TU_CHECK(db > min_db, "sample %zu: %.1f dB from the full-resolution resize",
           i, db);
  free(file);
  free(want);
  stoke__decoder_destroy(d);
}

static void test_resize(void **state) {
  (void)state;
  stoke_pack_result res;
  stoke_source *p = pack_and_open(64, 90, "r64", &res);
  assert_int_equal(res.n_samples, 4);
  assert_int_equal(res.n_resized, 3);
  stoke_pack_info info;
  TU_OK(stoke_source_pack_info(p, &info));
  assert_int_equal(info.max_side, 64);
  assert_int_equal(info.quality, 90);
  TU_CHECK(info.n_shards >= 2, "%zu shards", info.n_shards);
  assert_int_equal(info.n_resized, info.n_shards);
  assert_int_equal(info.mixed, 0);
  stoke_source *orig = tu_open_images(folder, NULL);
  check_pixels(orig, p, 0, 64, 43, 35); /* 300x200 */
  check_pixels(orig, p, 2, 48, 64, 25); /* the PNG (sharp edges), 120x160 */
  check_pixels(orig, p, 3, 25, 64, 35); /* 100x260 */
  /* Already smaller: kept as it is (losslessly rewritten). */
  stoke_image_info si;
  TU_OK(stoke_source_probe(p, 1, &si));
  assert_int_equal(si.width, 50);
  assert_int_equal(si.height, 40);
  /* Labels and classes as without the resize. */
  for (size_t i = 0; i < 4; i++)
    assert_int_equal(stoke_source_label(p, i), stoke_source_label(orig, i));
  /* The loader reads them, crops cut by their restart intervals. */
  char glob[200];
  snprintf(glob, sizeof glob, "%s/r64-*.stoke", root);
  stoke_source *pl =
      tu_open_images(glob, "random-resized-crop=32,flip,chw,u8");
  stoke_config c = tu_config(pl, 2, 1, 3);
  c.prefetch_next_epoch = 0; /* the statistics: this epoch's samples */
  stoke_loader *l = tu_loader(&c);
  stoke_batch *b;
  size_t seen = 0;
  int rc;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    seen += stoke_batch_size(b);
    stoke_batch_release(b);
  }
  TU_RC_L(l, rc, STOKE_END);
  assert_int_equal(seen, 4);
  /* The doctor's view of the stored images: sizes from their headers,
  ** and the side the transform keeps (2 x 32, in multiples of 128). */
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_loader_stats(l, &st));
  assert_int_equal(st.images, 4);
  assert_true(st.image_side_mean == (64 + 50 + 64 + 64) / 4.0);
  assert_true(st.image_pixels_mean ==
              (64.0 * 43 + 50 * 40 + 48 * 64 + 25 * 64) / 4);
  assert_int_equal(st.image_keep_side, 128);
  stoke_loader_destroy(l);
  stoke_source_destroy(pl);
  stoke_source_destroy(orig);
  stoke_source_destroy(p);
}

static void test_unresized_and_errors(void **state) {
  (void)state;
  stoke_pack_result res;
  stoke_source *p = pack_and_open(0, 90, "plain", &res);
  assert_int_equal(res.n_resized, 0);
  stoke_pack_info info;
  TU_OK(stoke_source_pack_info(p, &info));
  assert_int_equal(info.n_resized, 0);
  assert_int_equal(info.max_side, 0);
  stoke_source_destroy(p);
  /* Every image already smaller: nothing resized, no size recorded. */
  p = pack_and_open(1000, 80, "big", &res);
  assert_int_equal(res.n_resized, 0);
  TU_OK(stoke_source_pack_info(p, &info));
  assert_int_equal(info.max_side, 1000); /* the header says what was asked */
  stoke_source_destroy(p);
  stoke_source *src = tu_open_images(folder, NULL);
  stoke_pack_config pc;
  stoke_pack_config_init(&pc);
  pc.max_side = 64;
  pc.quality = 0;
  char prefix[160];
  snprintf(prefix, sizeof prefix, "%s/bad", root);
  TU_RC(stoke_pack(src, prefix, &pc, NULL), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "quality 0");
  TU_RC(stoke_source_pack_info(src, &info), STOKE_EINVAL);
  stoke_source_destroy(src);
}

static int setup(void **state) {
  (void)state;
  tmp_root(root, "resize");
  make_folder();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  tmp_root_remove(root);
  return 0;
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_resize),
      cmocka_unit_test(test_unresized_and_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
