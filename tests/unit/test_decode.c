/* test_decode.c — src/decode/: sniffing, probing, JPEG region and scaled
** decoding (checked pixel for pixel against plain libjpeg), PNG formats,
** limits before allocation, and error messages for bad input, with the
** decoder reused after every error.  All fixtures are made here
** (decode_fixtures.h). */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/decode.h"
#include "decode_fixtures.h"
#include "test_util.h" /* TU_CHECK, TU_CONTAINS */


/* Decode and expect rc; on a mismatch show the message. */
#define DECODE_RC(d, p, n, req, img, want)                                    \
  do {                                                                        \
    int rc_ = stoke__decode((d), (p), (n), (req), (img), err, sizeof err);    \
    TU_CHECK(rc_ == (want), "decode: rc %d, want %d: \"%s\"", rc_, (want),    \
             err);                                                            \
  } while (0)

static char err[512];

/* ---- a good image, decoded after every bad one --------------------------- */

typedef struct fixture {
  uint8_t *src;            /* 333x257 pattern */
  uint8_t *jpg;            /* its JPEG (4:2:0, q90) */
  size_t jpg_n;
  uint8_t *ref[9];         /* ref[s]: libjpeg's full decode at 1/s */
  uint32_t ref_w[9], ref_h[9];
  uint8_t *png;            /* its PNG (RGB8) */
  size_t png_n;
} fixture;

static fixture fx;
#define FW 333
#define FH 257

static int setup(void **state) {
  (void)state;
  fx.src = df_pattern(FW, FH, 1);
  df_jpeg_rgb(fx.src, FW, FH, 0, &fx.jpg, &fx.jpg_n);
  for (unsigned s = 1; s <= 8; s *= 2)
    fx.ref[s] = df_ref_jpeg(fx.jpg, fx.jpg_n, s, &fx.ref_w[s], &fx.ref_h[s]);
  int e = df_png(fx.src, (size_t)FW * FH * 3, FW, FH,
                 SPNG_COLOR_TYPE_TRUECOLOR, 8, 0, NULL, NULL, &fx.png,
                 &fx.png_n);
  return e;
}

static int teardown(void **state) {
  (void)state;
  free(fx.src);
  free(fx.jpg);
  for (unsigned s = 1; s <= 8; s *= 2) free(fx.ref[s]);
  free(fx.png);
  return 0;
}

/* Every pixel of the window equals the reference decode at the same scale
** (ref is rw x rh RGB), and the window's mapping is consistent. */
static void check_window(const stoke__image *img, const uint8_t *ref,
                         uint32_t rw, uint32_t rh) {
  unsigned s = img->scale;
  TU_CHECK(img->channels == 3, "channels %u", img->channels);
  TU_CHECK(img->win_x % s == 0 && img->win_y % s == 0, "window %u,%u scale %u",
           img->win_x, img->win_y, s);
  uint32_t ox = img->win_x / s, oy = img->win_y / s;
  TU_CHECK(ox + img->width <= rw && oy + img->height <= rh,
           "window %ux%u at %u,%u outside %ux%u", img->width, img->height, ox,
           oy, rw, rh);
  for (uint32_t j = 0; j < img->height; j++) {
    const uint8_t *a = img->pixels + (size_t)j * img->stride;
    const uint8_t *b = ref + ((size_t)(oy + j) * rw + ox) * 3;
    if (memcmp(a, b, (size_t)img->width * 3) != 0) {
      uint32_t i = 0;
      while (memcmp(a + 3 * i, b + 3 * i, 3) == 0) i++;
      fail_msg("pixel (%u,%u) of window %ux%u at %u,%u (scale %u) differs: "
               "%u,%u,%u vs reference %u,%u,%u",
               i, j, img->width, img->height, ox, oy, s, a[3 * i],
               a[3 * i + 1], a[3 * i + 2], b[3 * i], b[3 * i + 1],
               b[3 * i + 2]);
    }
  }
}

/* The crop box req lies inside the window, at the stated coordinates. */
static void check_crop_mapping(const stoke__image *img,
                               const stoke__decode_req *r) {
  double s = img->scale;
  TU_CHECK(img->crop_x >= 0 && img->crop_y >= 0, "crop origin %g,%g",
           img->crop_x, img->crop_y);
  TU_CHECK(img->crop_x + img->crop_w <= img->width + 1e-9 &&
            img->crop_y + img->crop_h <= img->height + 1e-9,
           "crop %gx%g+%g+%g outside window %ux%u", img->crop_w, img->crop_h,
           img->crop_x, img->crop_y, img->width, img->height);
  TU_CHECK(img->win_x + img->crop_x * s == r->x &&
            img->win_y + img->crop_y * s == r->y,
           "crop origin maps to %g,%g, want %u,%u",
           img->win_x + img->crop_x * s, img->win_y + img->crop_y * s, r->x,
           r->y);
  TU_CHECK(img->crop_w * s == r->w && img->crop_h * s == r->h,
           "crop size %gx%g", img->crop_w * s, img->crop_h * s);
  TU_CHECK(img->win_x <= r->x && img->win_x + img->win_w >= r->x + r->w &&
            img->win_y <= r->y && img->win_y + img->win_h >= r->y + r->h,
           "full-res window %ux%u+%u+%u does not contain the crop",
           img->win_w, img->win_h, img->win_x, img->win_y);
}

/* The decoder still works: the fixture JPEG (a crop at 1/2) and PNG. */
static void check_good(stoke__decoder *d) {
  stoke__image img;
  stoke__decode_req r = {.x = 37, .y = 21, .w = 250, .h = 190,
                         .out_w = 100, .out_h = 90};
  DECODE_RC(d, fx.jpg, fx.jpg_n, &r, &img, 0);
  assert_int_equal(img.scale, 2);
  check_window(&img, fx.ref[2], fx.ref_w[2], fx.ref_h[2]);
  check_crop_mapping(&img, &r);
  DECODE_RC(d, fx.png, fx.png_n, NULL, &img, 0);
  assert_int_equal(img.info.format, STOKE__IMG_PNG);
  for (uint32_t j = 0; j < FH; j++)
    assert_memory_equal(img.pixels + j * img.stride,
                        fx.src + (size_t)j * FW * 3, (size_t)FW * 3);
}

static stoke__decoder *new_decoder(const stoke__decoder_opts *o) {
  stoke__decoder *d = NULL;
  assert_int_equal(stoke__decoder_create(o, &d), 0);
  assert_non_null(d);
  return d;
}

/* ---- sniffing and scale choice ------------------------------------------- */

static void test_sniff(void **state) {
  (void)state;
  assert_int_equal(stoke__decode_sniff(fx.jpg, fx.jpg_n), STOKE__IMG_JPEG);
  assert_int_equal(stoke__decode_sniff(fx.png, fx.png_n), STOKE__IMG_PNG);
  assert_int_equal(stoke__decode_sniff("", 0), STOKE__IMG_UNKNOWN);
  assert_int_equal(stoke__decode_sniff(NULL, 0), STOKE__IMG_UNKNOWN);
  assert_int_equal(stoke__decode_sniff(fx.png, 7), STOKE__IMG_UNKNOWN);
  assert_int_equal(stoke__decode_sniff("GIF89a", 6), STOKE__IMG_UNKNOWN);
  assert_string_equal(stoke__img_format_name(STOKE__IMG_JPEG), "JPEG");
}

static void test_pick_scale(void **state) {
  (void)state;
  assert_int_equal(stoke__decode_pick_scale(800, 600, 224, 224), 2);
  assert_int_equal(stoke__decode_pick_scale(1800, 1800, 224, 224), 8);
  assert_int_equal(stoke__decode_pick_scale(1791, 1800, 224, 224), 4);
  assert_int_equal(stoke__decode_pick_scale(1000, 1000, 224, 224), 4);
  assert_int_equal(stoke__decode_pick_scale(448, 448, 224, 224), 2);
  assert_int_equal(stoke__decode_pick_scale(447, 448, 224, 224), 1);
  assert_int_equal(stoke__decode_pick_scale(224, 224, 224, 224), 1);
  assert_int_equal(stoke__decode_pick_scale(100, 100, 224, 224), 1);
  assert_int_equal(stoke__decode_pick_scale(4000, 500, 224, 224), 2);
  assert_int_equal(stoke__decode_pick_scale(4000, 3000, 0, 0), 1);
  assert_int_equal(stoke__decode_pick_scale(4000, 3000, 1, 1), 8);
}

/* ---- probe --------------------------------------------------------------- */

static void test_probe(void **state) {
  (void)state;
  df_counting cnt = {0};
  stoke_allocator a = {df_counting_alloc, df_counting_free, &cnt};
  stoke__decoder_opts o;
  stoke__decoder_opts_init(&o);
  o.alloc = &a;
  stoke__decoder *d = new_decoder(&o);
  size_t calls0 = cnt.n_calls, live0 = cnt.live;
  stoke__img_info info;
  assert_int_equal(
      stoke__decode_probe(d, fx.jpg, fx.jpg_n, &info, err, sizeof err), 0);
  assert_int_equal(info.format, STOKE__IMG_JPEG);
  assert_int_equal(info.width, FW);
  assert_int_equal(info.height, FH);
  assert_int_equal(info.channels, 3);
  assert_false(info.progressive);
  assert_int_equal(
      stoke__decode_probe(d, fx.png, fx.png_n, &info, err, sizeof err), 0);
  assert_int_equal(info.format, STOKE__IMG_PNG);
  assert_int_equal(info.width, FW);
  assert_int_equal(info.channels, 3);
  assert_false(info.has_alpha);
  /* Header only: no pixel buffer.  libspng's context (through the same
  ** allocator) is made and freed inside the call. */
  assert_true(cnt.n_calls > calls0);
  assert_int_equal(cnt.live, live0);
  TU_CHECK(cnt.largest < (size_t)FW * FH, "probe allocated %zu bytes",
           cnt.largest);

  uint8_t gray[64 * 48], *j;
  size_t n;
  memset(gray, 99, sizeof gray);
  df_jpeg_opts go = {JCS_GRAYSCALE, JCS_UNKNOWN, 90, 1, 0, 0, 0};
  df_jpeg(gray, 64, 48, &go, &j, &n);
  assert_int_equal(stoke__decode_probe(d, j, n, &info, err, sizeof err), 0);
  assert_int_equal(info.channels, 1);
  assert_true(info.progressive);
  free(j);

  uint8_t ga[8 * 4 * 2];
  memset(ga, 7, sizeof ga);
  uint8_t *p;
  assert_int_equal(df_png(ga, sizeof ga, 8, 4,
                          SPNG_COLOR_TYPE_GRAYSCALE_ALPHA, 8, 0, NULL, NULL,
                          &p, &n),
                   0);
  assert_int_equal(stoke__decode_probe(d, p, n, &info, err, sizeof err), 0);
  assert_int_equal(info.channels, 2);
  assert_true(info.has_alpha);
  free(p);

  assert_int_equal(stoke__decode_probe(d, "nope", 4, &info, err, sizeof err),
                   STOKE_EFORMAT);
  TU_CONTAINS(err, "not an image");
  stoke__decoder_destroy(d);
  assert_int_equal(cnt.live, 0);
}

/* ---- JPEG ---------------------------------------------------------------- */

/* Full decodes equal plain libjpeg's exactly, and the source within JPEG's
** loss, for odd and tiny sizes, gray and progressive files. */
static void test_jpeg_full(void **state) {
  (void)state;
  static const uint32_t sz[][2] = {{1, 1}, {2, 3}, {16, 16}, {17, 9},
                                   {FW, FH}, {640, 480}};
  stoke__decoder *d = new_decoder(NULL);
  for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++)
    for (int kind = 0; kind < 3; kind++) { /* rgb, progressive, gray */
      uint32_t w = sz[i][0], h = sz[i][1];
      uint8_t *px = df_pattern(w, h, 7 + i), *j;
      size_t n;
      if (kind == 2) {
        for (size_t k = 0; k < (size_t)w * h; k++) px[k] = px[3 * k + 1];
        df_jpeg_opts o = {JCS_GRAYSCALE, JCS_UNKNOWN, 90, 0, 0, 0, 0};
        df_jpeg(px, w, h, &o, &j, &n);
      } else {
        df_jpeg_rgb(px, w, h, kind == 1, &j, &n);
      }
      uint32_t rw, rh;
      uint8_t *ref = df_ref_jpeg(j, n, 1, &rw, &rh);
      stoke__image img;
      DECODE_RC(d, j, n, NULL, &img, 0);
      assert_int_equal(img.width, w);
      assert_int_equal(img.height, h);
      assert_int_equal(img.scale, 1);
      assert_int_equal(img.info.progressive, kind == 1);
      check_window(&img, ref, rw, rh);
      /* Against the source: JPEG's loss at q90 is small on average. */
      uint64_t sum = 0;
      for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
          for (int c = 0; c < 3; c++) {
            int a = img.pixels[y * img.stride + 3 * x + c];
            int b = kind == 2 ? px[(size_t)y * w + x]
                              : px[((size_t)y * w + x) * 3 + c];
            sum += (uint64_t)(a > b ? a - b : b - a);
          }
      /* (Tiny images are all edge: 4:2:0 chroma spans the whole image.) */
      double mae = (double)sum / ((double)w * h * 3);
      TU_CHECK(mae < 6.0 || w < 16, "%ux%u kind %d: mean error %.2f", w, h,
               kind, mae);
      free(ref);
      free(j);
      free(px);
    }
  stoke__decoder_destroy(d);
}

/* Random crops at every scale, on 4:2:0, 4:2:2, 4:4:4, progressive and
** gray files: the window equals the same window of libjpeg's full decode
** at that scale, pixel for pixel, and contains the crop. */
/* Restart cuts (jpeg_rst.c) apply to baseline files whose restart
** interval divides the MCUs of a row: 517 px is 33 MCUs of 16 px or 65
** blocks of 8, 333 px is 21 or 42. */
static bool cuts_apply(const df_jpeg_opts *o, uint32_t W) {
  unsigned mcu = o->in == JCS_GRAYSCALE || o->h_samp == 1 ? 8 : 16;
  return o->restart && !o->progressive &&
         ((W + mcu - 1) / mcu) % o->restart == 0;
}

static void test_jpeg_region_exact(void **state) {
  (void)state;
  static const df_jpeg_opts kinds[] = {
      {JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 0},
      {JCS_RGB, JCS_UNKNOWN, 85, 0, 2, 1, 0},
      {JCS_RGB, JCS_UNKNOWN, 95, 0, 1, 1, 0},
      {JCS_RGB, JCS_UNKNOWN, 90, 1, 2, 2, 0},
      {JCS_RGB, JCS_UNKNOWN, 90, 1, 1, 1, 0},
      {JCS_GRAYSCALE, JCS_UNKNOWN, 90, 0, 0, 0, 0},
      /* With restart markers, as `stoke pack` writes them. */
      {JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 1},  /* 333: 21 MCUs, cut */
      {JCS_RGB, JCS_UNKNOWN, 85, 0, 2, 1, 3},  /* 517: 33 = 11 x 3, cut */
      {JCS_RGB, JCS_UNKNOWN, 95, 0, 1, 1, 2},  /* 333: 42 = 21 x 2, cut */
      {JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 2},  /* 517: 33 MCUs, no cut */
      {JCS_GRAYSCALE, JCS_UNKNOWN, 90, 0, 0, 0, 1}, /* 333: 42 blocks */
      {JCS_GRAYSCALE, JCS_UNKNOWN, 90, 0, 0, 0, 5}, /* 517: 65 = 13 x 5 */
  };
  stoke__decoder *d = new_decoder(NULL);
  uint64_t rng = 42;
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    uint32_t W = k % 2 ? 517 : FW, H = k % 2 ? 389 : FH;
    uint8_t *px = df_pattern(W, H, 100 + k), *j;
    size_t n;
    if (kinds[k].in == JCS_GRAYSCALE)
      for (size_t i = 0; i < (size_t)W * H; i++) px[i] = px[3 * i];
    df_jpeg(px, W, H, &kinds[k], &j, &n);
    uint8_t *ref[9];
    uint32_t rw[9], rh[9];
    for (unsigned s = 1; s <= 8; s *= 2)
      ref[s] = df_ref_jpeg(j, n, s, &rw[s], &rh[s]);
    unsigned seen = 0, cuts = 0;
    for (int t = 0; t < 60; t++) {
      stoke__decode_req r = {0};
      r.w = 1 + (uint32_t)(df_rng(&rng) % W);
      r.h = 1 + (uint32_t)(df_rng(&rng) % H);
      r.x = (uint32_t)(df_rng(&rng) % (W - r.w + 1));
      r.y = (uint32_t)(df_rng(&rng) % (H - r.h + 1));
      unsigned want = 1u << (df_rng(&rng) % 4);
      r.out_w = r.w / want ? r.w / want : 1;
      r.out_h = r.h / want ? r.h / want : 1;
      if (t == 0) r.x = r.y = 0, r.w = W, r.h = H; /* whole, at 1/want */
      if (t == 1) r.x = W - r.w, r.y = H - r.h;    /* bottom-right */
      stoke__image img;
      DECODE_RC(d, j, n, &r, &img, 0);
      unsigned s = stoke__decode_pick_scale(r.w, r.h, r.out_w, r.out_h);
      assert_int_equal(img.scale, s);
      seen |= s;
      TU_CHECK(img.width >= r.out_w && img.height >= r.out_h,
               "window %ux%u smaller than output %ux%u", img.width, img.height,
               r.out_w, r.out_h);
      check_window(&img, ref[s], rw[s], rh[s]);
      check_crop_mapping(&img, &r);
      cuts += img.restart_cut;
    }
    assert_int_equal(seen, 1 | 2 | 4 | 8);
    /* Most random crops leave whole rows or columns of intervals out. */
    if (cuts_apply(&kinds[k], W))
      TU_CHECK(cuts >= 40, "kind %zu: only %u of 60 decodes cut", k, cuts);
    else
      TU_CHECK(cuts == 0, "kind %zu: %u decodes cut", k, cuts);
    for (unsigned s = 1; s <= 8; s *= 2) free(ref[s]);
    free(j);
    free(px);
  }
  stoke__decoder_destroy(d);
}

/* A camera-sized image: crops pick the scale the brief names and still
** equal libjpeg's scaled decode; the decoded window is far smaller than the
** image. */
static void test_jpeg_large(void **state) {
  (void)state;
  const uint32_t W = 4000, H = 3000;
  uint8_t *px = df_pattern(W, H, 5), *j;
  size_t n;
  df_jpeg_rgb(px, W, H, 0, &j, &n);
  free(px);
  stoke__decoder *d = new_decoder(NULL);
  static const struct {
    stoke__decode_req r;
    unsigned scale;
  } cases[] = {
      {{1000, 700, 1800, 1800, 224, 224, false}, 8},
      {{1234, 567, 800, 600, 224, 224, false}, 2},
      {{0, 0, 4000, 3000, 224, 224, false}, 8},
      {{3100, 2100, 900, 900, 224, 224, false}, 4},
      {{10, 2990, 3990, 10, 0, 0, false}, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    unsigned s = cases[i].scale;
    uint32_t rw, rh;
    uint8_t *ref = df_ref_jpeg(j, n, s, &rw, &rh);
    stoke__image img;
    DECODE_RC(d, j, n, &cases[i].r, &img, 0);
    assert_int_equal(img.scale, s);
    check_window(&img, ref, rw, rh);
    check_crop_mapping(&img, &cases[i].r);
    /* Only the crop's rows, and columns to one iMCU left of it. */
    assert_true(img.win_h <= cases[i].r.h + 2 * s);
    assert_true(img.win_w <= cases[i].r.w + 16 * s + s);
    free(ref);
  }
  stoke__decoder_destroy(d);
  free(j);
}

/* CMYK and YCCK files (Adobe marker: inverted CMYK, as Photoshop writes)
** come out as RGB = C*K/255 of the stored values; crops and scales equal
** the same window of our own whole decode. */
static void test_jpeg_cmyk(void **state) {
  (void)state;
  const uint32_t W = 203, H = 150;
  uint8_t *rgb = df_pattern(W, H, 9);
  uint8_t *cmyk = malloc((size_t)W * H * 4);
  for (size_t i = 0; i < (size_t)W * H; i++) {
    cmyk[4 * i + 0] = rgb[3 * i + 0];
    cmyk[4 * i + 1] = rgb[3 * i + 1];
    cmyk[4 * i + 2] = rgb[3 * i + 2];
    cmyk[4 * i + 3] = (uint8_t)(255 - (i % W) / 4); /* K' from 255 to 205 */
  }
  stoke__decoder *d = new_decoder(NULL);
  for (int ycck = 0; ycck < 2; ycck++) {
    df_jpeg_opts o = {JCS_CMYK, ycck ? JCS_YCCK : JCS_UNKNOWN, 95, ycck, 0,
                      0, 0};
    uint8_t *j;
    size_t n;
    df_jpeg(cmyk, W, H, &o, &j, &n);
    stoke__img_info info;
    assert_int_equal(stoke__decode_probe(d, j, n, &info, err, sizeof err), 0);
    assert_int_equal(info.channels, 4);
    stoke__image img;
    DECODE_RC(d, j, n, NULL, &img, 0);
    assert_int_equal(img.channels, 3);
    assert_int_equal(img.stride, (size_t)W * 3);
    uint64_t sum = 0;
    int worst = 0;
    for (size_t i = 0; i < (size_t)W * H; i++)
      for (int c = 0; c < 3; c++) {
        int want = (cmyk[4 * i + c] * cmyk[4 * i + 3] + 127) / 255;
        int got = img.pixels[(i / W) * img.stride + (i % W) * 3 + c];
        int e = got > want ? got - want : want - got;
        sum += (uint64_t)e;
        if (e > worst) worst = e;
      }
    double mae = (double)sum / ((double)W * H * 3);
    TU_CHECK(mae < 6.0 && worst < 80, "cmyk: mean error %.2f, worst %d", mae,
             worst);
    /* Region and scale against our own whole decode at that scale. */
    for (unsigned s = 1; s <= 8; s *= 2) {
      stoke__decode_req whole = {0, 0, W, H, W / s, H / s, false};
      DECODE_RC(d, j, n, &whole, &img, 0);
      assert_int_equal(img.scale, s);
      size_t bytes = img.stride * img.height;
      uint8_t *full = malloc(bytes);
      memcpy(full, img.pixels, bytes);
      uint32_t fw = img.width, fh = img.height;
      stoke__decode_req r = {61, 37, 120, 100, 120 / s, 100 / s, false};
      DECODE_RC(d, j, n, &r, &img, 0);
      assert_int_equal(img.scale, s);
      check_window(&img, full, fw, fh);
      check_crop_mapping(&img, &r);
      free(full);
    }
    free(j);
  }
  stoke__decoder_destroy(d);
  free(cmyk);
  free(rgb);
}

/* ---- PNG ----------------------------------------------------------------- */

/* Every colour type and depth becomes the expected RGB8 (or RGBA8 when
** alpha is kept), exactly; a crop's rows are the whole image's rows. */
static void test_png_formats(void **state) {
  (void)state;
  const uint32_t W = 37, H = 23;
  size_t np = (size_t)W * H;
  uint8_t *src = df_pattern(W, H, 3);
  uint8_t *raw = malloc(np * 8), *want = malloc(np * 4);
  stoke__decoder *d = new_decoder(NULL);
  struct spng_plte plte = {0};
  struct spng_trns trns = {0};
  plte.n_entries = 16;
  for (unsigned i = 0; i < 16; i++) {
    plte.entries[i].red = (uint8_t)(i * 16);
    plte.entries[i].green = (uint8_t)(255 - i * 16);
    plte.entries[i].blue = (uint8_t)(i * 7);
    trns.type3_alpha[i] = (uint8_t)(i * 17);
  }
  trns.n_type3_entries = 16;
  enum { RGB8, RGBA8, G8, GA8, PAL, PAL_TRNS, RGB16, G16, RGB8_ADAM7, N };
  for (int f = 0; f < N; f++)
    for (int keep = 0; keep < 2; keep++) {
      uint8_t ct = 0, depth = 8, il = 0;
      bool alpha = false;
      size_t len = 0;
      for (size_t i = 0; i < np; i++) {
        const uint8_t *s = src + 3 * i;
        uint8_t a = (uint8_t)(i * 13), r = s[0], g = s[1], b = s[2];
        switch (f) {
        case RGB8:
        case RGB8_ADAM7:
          ct = SPNG_COLOR_TYPE_TRUECOLOR;
          memcpy(raw + 3 * i, s, 3);
          len = np * 3;
          il = f == RGB8_ADAM7;
          break;
        case RGBA8:
          ct = SPNG_COLOR_TYPE_TRUECOLOR_ALPHA;
          memcpy(raw + 4 * i, s, 3);
          raw[4 * i + 3] = a;
          len = np * 4;
          alpha = true;
          break;
        case G8:
          ct = SPNG_COLOR_TYPE_GRAYSCALE;
          raw[i] = r;
          g = b = r;
          len = np;
          break;
        case GA8:
          ct = SPNG_COLOR_TYPE_GRAYSCALE_ALPHA;
          raw[2 * i] = g;
          raw[2 * i + 1] = a;
          r = b = g;
          len = np * 2;
          alpha = true;
          break;
        case PAL:
        case PAL_TRNS: {
          ct = SPNG_COLOR_TYPE_INDEXED;
          uint8_t k = (uint8_t)((r / 16) ^ (b & 15));
          raw[i] = k;
          r = plte.entries[k].red;
          g = plte.entries[k].green;
          b = plte.entries[k].blue;
          a = trns.type3_alpha[k];
          len = np;
          alpha = f == PAL_TRNS;
          break;
        }
        case RGB16: {
          ct = SPNG_COLOR_TYPE_TRUECOLOR;
          depth = 16;
          uint16_t v[3] = {(uint16_t)(r << 8 | 0xff), (uint16_t)(g << 8),
                           (uint16_t)(b << 8 | 0x80)};
          memcpy(raw + 6 * i, v, 6);
          len = np * 6;
          break;
        }
        case G16: {
          ct = SPNG_COLOR_TYPE_GRAYSCALE;
          depth = 16;
          uint16_t v = (uint16_t)(g << 8 | 0x7f);
          memcpy(raw + 2 * i, &v, 2);
          r = b = g;
          len = np * 2;
          break;
        }
        }
        uint8_t *o = want + i * 4;
        o[0] = r, o[1] = g, o[2] = b, o[3] = a;
      }
      uint8_t *p;
      size_t n;
      int e = df_png(raw, len, W, H, ct, depth, il,
                     ct == SPNG_COLOR_TYPE_INDEXED ? &plte : NULL,
                     f == PAL_TRNS ? &trns : NULL, &p, &n);
      TU_CHECK(e == 0, "format %d: encode: %s", f, spng_strerror(e));
      stoke__decode_req whole = {0};
      whole.keep_alpha = keep;
      stoke__image img;
      DECODE_RC(d, p, n, &whole, &img, 0);
      unsigned ch = keep && alpha ? 4 : 3;
      TU_CHECK(img.channels == ch, "format %d keep %d: %u channels", f, keep,
               img.channels);
      assert_int_equal(img.info.has_alpha, alpha);
      assert_int_equal(img.info.progressive, f == RGB8_ADAM7);
      for (size_t i = 0; i < np; i++) {
        const uint8_t *got = img.pixels + (i / W) * img.stride + (i % W) * ch;
        TU_CHECK(memcmp(got, want + 4 * i, ch) == 0,
                 "format %d keep %d pixel %zu: %u,%u,%u vs %u,%u,%u", f, keep,
                 i, got[0], got[1], got[2], want[4 * i], want[4 * i + 1],
                 want[4 * i + 2]);
      }
      /* A crop: rows y..y+h, full width, the same pixels. */
      stoke__decode_req r = {5, 7, 20, 9, 10, 4, keep};
      DECODE_RC(d, p, n, &r, &img, 0);
      assert_int_equal(img.scale, 1);
      assert_int_equal(img.win_y, 7);
      assert_int_equal(img.height, 9);
      check_crop_mapping(&img, &r);
      for (uint32_t y = 0; y < img.height; y++)
        for (uint32_t x = 0; x < img.width; x++) {
          const uint8_t *got = img.pixels + y * img.stride + x * ch;
          size_t i = (size_t)(y + 7) * W + x;
          TU_CHECK(memcmp(got, want + 4 * i, ch) == 0, "crop pixel %u,%u", x,
                   y);
        }
      free(p);
    }
  stoke__decoder_destroy(d);
  free(want);
  free(raw);
  free(src);
}

/* The name never matters: PNG bytes (say, from "cat.jpg") decode as PNG. */
static void test_png_named_jpg(void **state) {
  (void)state;
  stoke__decoder *d = new_decoder(NULL);
  const char *name = "n01440764/cat.jpg";
  (void)name; /* the decoder is never told it */
  stoke__image img;
  DECODE_RC(d, fx.png, fx.png_n, NULL, &img, 0);
  assert_int_equal(img.info.format, STOKE__IMG_PNG);
  assert_memory_equal(img.pixels, fx.src, (size_t)FW * 3);
  stoke__decoder_destroy(d);
}

/* ---- bad input ----------------------------------------------------------- */

static void test_not_an_image(void **state) {
  (void)state;
  stoke__decoder *d = new_decoder(NULL);
  stoke__image img;
  DECODE_RC(d, "", 0, NULL, &img, STOKE_EFORMAT);
  TU_CONTAINS(err, "not an image: empty input (0 bytes)");
  check_good(d);
  const char *html = "<!DOCTYPE html><html>404</html>";
  DECODE_RC(d, html, strlen(html), NULL, &img, STOKE_EFORMAT);
  TU_CONTAINS(err, "not an image: starts with 3c 21 44 4f 43 54 59 50");
  TU_CONTAINS(err, "\"<!DOCTYP\"");
  check_good(d);
  uint64_t s = 9;
  uint8_t junk[4096];
  for (int t = 0; t < 20; t++) {
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)df_rng(&s);
    if (junk[0] == 0xff || junk[0] == 0x89) junk[0] = 0;
    DECODE_RC(d, junk, sizeof junk, NULL, &img, STOKE_EFORMAT);
    TU_CONTAINS(err, "not an image: starts with");
  }
  /* Garbage after a JPEG signature: libjpeg's words. */
  junk[0] = 0xff, junk[1] = 0xd8, junk[2] = 0xff;
  DECODE_RC(d, junk, sizeof junk, NULL, &img, STOKE_EFORMAT);
  TU_CONTAINS(err, "JPEG: ");
  check_good(d);
  DECODE_RC(d, NULL, 5, NULL, &img, STOKE_EINVAL);
  stoke__decode_req r = {300, 0, 100, 10, 0, 0, false};
  DECODE_RC(d, fx.jpg, fx.jpg_n, &r, &img, STOKE_EINVAL);
  TU_CONTAINS(err, "outside the 333x257 image");
  DECODE_RC(d, fx.png, fx.png_n, &r, &img, STOKE_EINVAL);
  TU_CONTAINS(err, "outside the 333x257 image");
  check_good(d);
  stoke__decoder_destroy(d);
}

static void test_jpeg_truncated(void **state) {
  (void)state;
  stoke__decoder *d = new_decoder(NULL);
  size_t scan = df_jpeg_scan_start(fx.jpg, fx.jpg_n);
  assert_true(scan > 0);
  size_t cuts[] = {3, 4, 20, 100, scan - 1, scan + 10, fx.jpg_n / 2,
                   fx.jpg_n * 3 / 4, fx.jpg_n - 10, fx.jpg_n - 2,
                   fx.jpg_n - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    stoke__image img;
    DECODE_RC(d, fx.jpg, cuts[i], NULL, &img, STOKE_EFORMAT);
    char want[64];
    snprintf(want, sizeof want, "premature end of data after %zu bytes",
             cuts[i]);
    TU_CONTAINS(err, "JPEG: ");
    TU_CONTAINS(err, want);
    if (cuts[i] > scan) TU_CONTAINS(err, "at row");
    assert_null(img.pixels);
    check_good(d);
  }
  /* Progressive: every scan is read up front, so any cut fails. */
  uint8_t *j;
  size_t n;
  df_jpeg_rgb(fx.src, FW, FH, 1, &j, &n);
  stoke__image img;
  DECODE_RC(d, j, n * 2 / 3, NULL, &img, STOKE_EFORMAT);
  TU_CONTAINS(err, "premature end of data");
  check_good(d);
  /* Tolerant mode: the partial image comes back with the warning counted. */
  stoke__decoder_opts o;
  stoke__decoder_opts_init(&o);
  o.warnings_fatal = false;
  stoke__decoder *t = new_decoder(&o);
  DECODE_RC(t, fx.jpg, fx.jpg_n / 2, NULL, &img, 0);
  assert_true(img.n_warnings >= 1);
  assert_int_equal(img.height, FH);
  DECODE_RC(t, fx.jpg, fx.jpg_n, NULL, &img, 0);
  assert_int_equal(img.n_warnings, 0);
  check_window(&img, fx.ref[1], fx.ref_w[1], fx.ref_h[1]);
  stoke__decoder_destroy(t);
  free(j);
  stoke__decoder_destroy(d);
}

/* Flipped bytes in the entropy-coded data must not come back as pixels. */
static void test_jpeg_corrupt(void **state) {
  (void)state;
  stoke__decoder *d = new_decoder(NULL);
  size_t scan = df_jpeg_scan_start(fx.jpg, fx.jpg_n);
  uint8_t *bad = malloc(fx.jpg_n);
  uint64_t s = 77;
  for (int t = 0; t < 20; t++) {
    memcpy(bad, fx.jpg, fx.jpg_n);
    /* A handful of random bytes in the scan, before the EOI. */
    for (int k = 0; k < 8; k++) {
      size_t at = scan + (size_t)(df_rng(&s) % (fx.jpg_n - 2 - scan));
      bad[at] ^= (uint8_t)(1 + df_rng(&s) % 255);
    }
    stoke__image img;
    DECODE_RC(d, bad, fx.jpg_n, NULL, &img, STOKE_EFORMAT);
    TU_CONTAINS(err, "JPEG: ");
    check_good(d);
  }
  /* A marker in the middle of the scan (a spliced file). */
  memcpy(bad, fx.jpg, fx.jpg_n);
  bad[fx.jpg_n / 2] = 0xff;
  bad[fx.jpg_n / 2 + 1] = 0xd9;
  stoke__image img;
  DECODE_RC(d, bad, fx.jpg_n, NULL, &img, STOKE_EFORMAT);
  TU_CONTAINS(err, "Corrupt JPEG data");
  check_good(d);
  free(bad);
  stoke__decoder_destroy(d);
}

static void test_png_truncated_and_crc(void **state) {
  (void)state;
  stoke__decoder *d = new_decoder(NULL);
  size_t idat = df_png_chunk(fx.png, fx.png_n, "IDAT");
  assert_true(idat > 0);
  size_t cuts[] = {8, 20, 33, idat + 4, idat + 100, fx.png_n / 2,
                   fx.png_n - 20};
  stoke__image img;
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    DECODE_RC(d, fx.png, cuts[i], NULL, &img, STOKE_EFORMAT);
    TU_CONTAINS(err, "PNG: ");
    check_good(d);
  }
  DECODE_RC(d, fx.png, fx.png_n / 2, NULL, &img, STOKE_EFORMAT);
  TU_CONTAINS(err, "premature end of data");
  /* Bad CRC of the image data (the data itself intact), and of the
  ** header. */
  uint8_t *bad = malloc(fx.png_n);
  memcpy(bad, fx.png, fx.png_n);
  bad[idat + 8 + df_be32(fx.png + idat) + 1] ^= 0x10;
  DECODE_RC(d, bad, fx.png_n, NULL, &img, STOKE_EFORMAT);
  TU_CONTAINS(err, "PNG: CRC error");
  check_good(d);
  memcpy(bad, fx.png, fx.png_n);
  bad[8 + 8 + 3] ^= 1; /* IHDR width, CRC not fixed */
  DECODE_RC(d, bad, fx.png_n, NULL, &img, STOKE_EFORMAT);
  TU_CONTAINS(err, "PNG: CRC error");
  check_good(d);
  /* Corrupt deflate data with a valid CRC. */
  memcpy(bad, fx.png, fx.png_n);
  for (int k = 0; k < 16; k++) bad[idat + 8 + 20 + k] ^= 0x5a;
  df_png_fix_crc(bad, idat);
  DECODE_RC(d, bad, fx.png_n, NULL, &img, STOKE_EFORMAT);
  TU_CONTAINS(err, "PNG: ");
  check_good(d);
  free(bad);
  stoke__decoder_destroy(d);
}

/* ---- limits -------------------------------------------------------------- */

/* A header claiming 65535x65535 is refused from the header, before any
** large allocation, by JPEG and PNG alike. */
static void test_huge_header(void **state) {
  (void)state;
  df_counting cnt = {0};
  cnt.refuse_over = (size_t)64 << 20;
  stoke_allocator a = {df_counting_alloc, df_counting_free, &cnt};
  stoke__decoder_opts o;
  stoke__decoder_opts_init(&o);
  o.alloc = &a;
  stoke__decoder *d = new_decoder(&o);

  uint8_t *bad = malloc(fx.jpg_n);
  memcpy(bad, fx.jpg, fx.jpg_n);
  size_t sof = df_jpeg_sof(bad, fx.jpg_n);
  assert_true(sof > 0);
  bad[sof + 5] = bad[sof + 6] = bad[sof + 7] = bad[sof + 8] = 0xff;
  stoke__image img;
  DECODE_RC(d, bad, fx.jpg_n, NULL, &img, STOKE_EFORMAT);
  assert_string_equal(err, "image 65535x65535 exceeds max_pixels 178956970");
  stoke__img_info info;
  assert_int_equal(stoke__decode_probe(d, bad, fx.jpg_n, &info, err,
                                       sizeof err),
                   STOKE_EFORMAT); /* libjpeg's own 65500 limit */
  check_good(d);

  /* No pixel limit: max_bytes stops it, still before allocating. */
  stoke__decoder_opts o2 = o;
  o2.max_pixels = 0;
  stoke__decoder *d2 = new_decoder(&o2);
  bad[sof + 5] = 0xea, bad[sof + 6] = 0x60; /* 60000 x ... */
  bad[sof + 7] = 0xea, bad[sof + 8] = 0x60; /* ... 60000 */
  DECODE_RC(d2, bad, fx.jpg_n, NULL, &img, STOKE_EFORMAT);
  TU_CONTAINS(err, "exceeds max_bytes 1.0 GiB");
  check_good(d2);
  stoke__decoder_destroy(d2);
  free(bad);

  bad = malloc(fx.png_n);
  memcpy(bad, fx.png, fx.png_n);
  df_put_be32(bad + 16, 65535);
  df_put_be32(bad + 20, 65535);
  df_png_fix_crc(bad, 8);
  DECODE_RC(d, bad, fx.png_n, NULL, &img, STOKE_EFORMAT);
  assert_string_equal(err, "image 65535x65535 exceeds max_pixels 178956970");
  assert_int_equal(img.info.width, 65535);
  check_good(d);
  /* 65536x65536 is 2^32 pixels: 0 if the product were taken in 32 bits.
  ** With no max_bytes, only max_pixels stands between it and a 12 GiB
  ** buffer. */
  df_put_be32(bad + 16, 65536);
  df_put_be32(bad + 20, 65536);
  df_png_fix_crc(bad, 8);
  stoke__decoder_opts o3 = o;
  o3.max_bytes = 0;
  stoke__decoder *d3 = new_decoder(&o3);
  DECODE_RC(d3, bad, fx.png_n, NULL, &img, STOKE_EFORMAT);
  assert_string_equal(err, "image 65536x65536 exceeds max_pixels 178956970");
  stoke__decode_req r1 = {0, 0, 16, 16, 0, 0, false};
  DECODE_RC(d3, bad, fx.png_n, &r1, &img, STOKE_EFORMAT); /* a small crop */
  assert_string_equal(err, "image 65536x65536 exceeds max_pixels 178956970");
  stoke__decoder_destroy(d3);
  free(bad);

  TU_CHECK(cnt.largest <= (size_t)1 << 20, "largest allocation %zu bytes",
           cnt.largest);
  stoke__decoder_destroy(d);
  assert_int_equal(cnt.live, 0);
}

/* max_bytes bounds the window, not the image: a small crop of an image
** whose full decode is over the limit still decodes. */
static void test_max_bytes(void **state) {
  (void)state;
  stoke__decoder_opts o;
  stoke__decoder_opts_init(&o);
  o.max_bytes = 64 * 1024;
  stoke__decoder *d = new_decoder(&o);
  stoke__image img;
  DECODE_RC(d, fx.jpg, fx.jpg_n, NULL, &img, STOKE_EFORMAT);
  TU_CONTAINS(err, "image 333x257: decoding 257 rows of 999 bytes exceeds "
                "max_bytes 64.0 KiB");
  DECODE_RC(d, fx.png, fx.png_n, NULL, &img, STOKE_EFORMAT);
  TU_CONTAINS(err, "exceeds max_bytes");
  stoke__decode_req r = {100, 100, 40, 40, 0, 0, false};
  DECODE_RC(d, fx.jpg, fx.jpg_n, &r, &img, 0);
  check_window(&img, fx.ref[1], fx.ref_w[1], fx.ref_h[1]);
  DECODE_RC(d, fx.png, fx.png_n, &r, &img, 0);
  /* The whole image at 1/8 fits, too. */
  stoke__decode_req s8 = {0, 0, FW, FH, 40, 32, false};
  DECODE_RC(d, fx.jpg, fx.jpg_n, &s8, &img, 0);
  assert_int_equal(img.scale, 8);
  check_window(&img, fx.ref[8], fx.ref_w[8], fx.ref_h[8]);
  o.max_pixels = 1000;
  stoke__decoder *d2 = new_decoder(&o);
  DECODE_RC(d2, fx.png, fx.png_n, &r, &img, STOKE_EFORMAT);
  assert_string_equal(err, "image 333x257 exceeds max_pixels 1000");
  DECODE_RC(d2, fx.jpg, fx.jpg_n, &r, &img, STOKE_EFORMAT);
  assert_string_equal(err, "image 333x257 exceeds max_pixels 1000");
  stoke__decoder_destroy(d2);
  o.max_pixels = 300; /* below the width: spng refuses the header itself */
  d2 = new_decoder(&o);
  DECODE_RC(d2, fx.png, fx.png_n, &r, &img, STOKE_EFORMAT);
  assert_string_equal(err, "PNG: width exceeds max_pixels 300");
  stoke__decoder_destroy(d2);
  stoke__decoder_destroy(d);
}

/* Allocation failures surface as STOKE_ENOMEM and leave the decoder
** usable; the buffer is reused once it is large enough. */
static void test_enomem(void **state) {
  (void)state;
  df_counting cnt = {0};
  stoke_allocator a = {df_counting_alloc, df_counting_free, &cnt};
  stoke__decoder_opts o;
  stoke__decoder_opts_init(&o);
  o.alloc = &a;
  cnt.fail_at = 1;
  stoke__decoder *d = NULL;
  assert_int_equal(stoke__decoder_create(&o, &d), STOKE_ENOMEM);
  assert_null(d);
  cnt.fail_at = 0;
  d = new_decoder(&o);
  cnt.fail_at = cnt.n_calls + 1;
  stoke__image img;
  DECODE_RC(d, fx.jpg, fx.jpg_n, NULL, &img, STOKE_ENOMEM);
  TU_CONTAINS(err, "out of memory");
  cnt.fail_at = cnt.n_calls + 1;
  DECODE_RC(d, fx.png, fx.png_n, NULL, &img, STOKE_ENOMEM);
  check_good(d);
  /* The pixel buffer is reused: what is allocated from now on is
  ** libspng's per-image working memory, far below the pixels' size. */
  cnt.largest = 0;
  size_t live = cnt.live;
  check_good(d);
  check_good(d);
  TU_CHECK(cnt.largest < (size_t)FW * FH * 3, "a %zu-byte allocation",
           cnt.largest);
  assert_int_equal(cnt.live, live);
  /* Every allocation of a PNG decode fails in turn, libspng's included
  ** (they go through the decoder's allocator): ENOMEM each time, nothing
  ** leaked, the decoder decodes the next image. */
  size_t k;
  for (k = 1; k < 1000; k++) {
    cnt.fail_at = cnt.n_calls + k;
    size_t before = cnt.live;
    int rc = stoke__decode(d, fx.png, fx.png_n, NULL, &img, err, sizeof err);
    bool hit = cnt.n_calls >= cnt.fail_at;
    cnt.fail_at = 0;
    assert_int_equal(cnt.live, before);
    if (!hit) {
      assert_int_equal(rc, 0);
      break;
    }
    TU_CHECK(rc == STOKE_ENOMEM, "allocation %zu: %d %s", k, rc, err);
    check_good(d);
  }
  TU_CHECK(k > 2, "a PNG decode made only %zu allocations", k - 1);
  stoke__decoder_destroy(d);
  stoke__decoder_destroy(NULL);
  assert_int_equal(cnt.live, 0);
}

/* ---- threads ------------------------------------------------------------- */

/* One decoder per thread, all decoding at once (no shared state: run under
** TSan).  Workers do not call cmocka; they count what went wrong. */
typedef struct worker {
  pthread_t th;
  unsigned id;
  int bad;          /* decodes that failed or differed */
  char msg[256];
} worker;

static void *worker_main(void *arg) {
  worker *w = arg;
  stoke__decoder *d = NULL;
  if (stoke__decoder_create(NULL, &d) != 0) {
    w->bad++;
    return NULL;
  }
  uint64_t s = w->id + 1;
  for (int t = 0; t < 40; t++) {
    stoke__image img;
    unsigned sc = 1u << (df_rng(&s) % 4);
    stoke__decode_req r = {(uint32_t)(df_rng(&s) % 100),
                           (uint32_t)(df_rng(&s) % 100), 200, 150,
                           200 / sc, 150 / sc, false};
    int rc = stoke__decode(d, fx.jpg, fx.jpg_n, &r, &img, w->msg,
                           sizeof w->msg);
    if (rc != 0 || img.scale != sc) {
      w->bad++;
      continue;
    }
    uint32_t ox = img.win_x / sc, oy = img.win_y / sc;
    for (uint32_t j = 0; j < img.height; j++)
      if (memcmp(img.pixels + j * img.stride,
                 fx.ref[sc] + ((size_t)(oy + j) * fx.ref_w[sc] + ox) * 3,
                 (size_t)img.width * 3) != 0) {
        w->bad++;
        break;
      }
    /* And a bad one in between: errors are per decoder, too. */
    if (stoke__decode(d, fx.jpg, fx.jpg_n / 2, NULL, &img, w->msg,
                      sizeof w->msg) != STOKE_EFORMAT)
      w->bad++;
    if (stoke__decode(d, fx.png, fx.png_n, &r, &img, w->msg,
                      sizeof w->msg) != 0)
      w->bad++;
  }
  stoke__decoder_destroy(d);
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  worker w[4];
  for (unsigned i = 0; i < 4; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].id = i;
    assert_int_equal(pthread_create(&w[i].th, NULL, worker_main, &w[i]), 0);
  }
  for (unsigned i = 0; i < 4; i++) {
    assert_int_equal(pthread_join(w[i].th, NULL), 0);
    TU_CHECK(w[i].bad == 0, "worker %u: %d bad decodes (last message \"%s\")",
             i, w[i].bad, w[i].msg);
  }
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sniff),
      cmocka_unit_test(test_pick_scale),
      cmocka_unit_test(test_probe),
      cmocka_unit_test(test_jpeg_full),
      cmocka_unit_test(test_jpeg_region_exact),
      cmocka_unit_test(test_jpeg_large),
      cmocka_unit_test(test_jpeg_cmyk),
      cmocka_unit_test(test_png_formats),
      cmocka_unit_test(test_png_named_jpg),
      cmocka_unit_test(test_not_an_image),
      cmocka_unit_test(test_jpeg_truncated),
      cmocka_unit_test(test_jpeg_corrupt),
      cmocka_unit_test(test_png_truncated_and_crc),
      cmocka_unit_test(test_huge_header),
      cmocka_unit_test(test_max_bytes),
      cmocka_unit_test(test_enomem),
      cmocka_unit_test(test_threads),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
