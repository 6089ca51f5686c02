/* test_transform.c — src/transform/: the spec parser, planning from the
** per-sample stream, resampling, flip, layout, normalize and f16.
** Agreement with torchvision itself is tests/python's job. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transform/transform.h"
#include "test_util.h"

/* ---- helpers ----------------------------------------------------------- */

static stoke__tf_spec parse_ok(const char *text) {
  stoke__tf_spec s;
  int rc = stoke__tf_parse(text, &s);
  if (rc) fprintf(stderr, "parse '%s': %s\n", text, stoke__tls_error());
  assert_int_equal(rc, 0);
  return s;
}

/* A deterministic, non-trivial RGB8 image. */
static uint8_t *make_image(int w, int h, uint32_t seed) {
  uint8_t *px = malloc((size_t)w * h * 3);
  assert_non_null(px);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < 3; c++) {
        uint32_t v = (uint32_t)(x * (3 + c) + y * (5 - c)) + seed;
        v = v * 2654435761u;
        /* smooth ramps plus a little hash noise */
        int base = (x * 255 / (w > 1 ? w - 1 : 1) + y * 97 + c * 60) % 256;
        px[((size_t)y * w + x) * 3 + c] = (uint8_t)((base + (v >> 29)) % 256);
      }
  return px;
}

static stoke__tf_image full_image(const uint8_t *px, int w, int h) {
  stoke__tf_image img = {.px = px, .w = w, .h = h, .stride = 3 * (size_t)w,
                         .scale = 1.0};
  return img;
}

/* A plan for a fixed integer crop box (crop-then-resize semantics). */
static stoke__tf_plan box_plan(int x, int y, int w, int h, int ow, int oh) {
  stoke__tf_plan p;
  memset(&p, 0, sizeof p);
  p.box_x = p.clip_x0 = x;
  p.box_y = p.clip_y0 = y;
  p.box_w = w;
  p.box_h = h;
  p.clip_x1 = x + w;
  p.clip_y1 = y + h;
  p.out_w = ow;
  p.out_h = oh;
  return p;
}

/* The output is 64-byte aligned, as a batch slot is, so that rows whose
** width is a multiple of 8 take the streaming-store path and the others
** the plain one. */
static void *apply_ok(const stoke__tf_spec *spec, const stoke__tf_plan *p,
                      const stoke__tf_image *img, stoke__tf_scratch *s) {
  void *out = aligned_alloc(64, (stoke__tf_out_bytes(spec) + 63) / 64 * 64);
  assert_non_null(out);
  int rc = stoke__tf_apply(spec, p, img, s, out);
  if (rc) fprintf(stderr, "apply: %s\n", stoke__tls_error());
  assert_int_equal(rc, 0);
  return out;
}

/* ---- parsing ------------------------------------------------------------- */

static void test_parse_accepts(void **state) {
  (void)state;
  stoke__tf_spec s = parse_ok("random-resized-crop=224,flip,"
                              "normalize=imagenet,chw,f32");
  assert_int_equal(s.crop, STOKE__TF_CROP_RANDOM);
  assert_int_equal(s.out_h, 224);
  assert_int_equal(s.out_w, 224);
  assert_true(s.scale[0] == 0.08 && s.scale[1] == 1.0);
  assert_true(fabs(s.ratio[0] - 0.75) < 1e-12);
  assert_true(fabs(s.ratio[1] - 4.0 / 3.0) < 1e-12);
  assert_true(s.flip_p == 0.5);
  assert_true(s.normalize);
  assert_true(s.mean[0] == 0.485f && s.mean[1] == 0.456f &&
              s.mean[2] == 0.406f);
  assert_true(s.std[0] == 0.229f && s.std[1] == 0.224f && s.std[2] == 0.225f);
  assert_int_equal(s.layout, STOKE__TF_CHW);
  assert_int_equal(s.dtype, STOKE_F32);

  s = parse_ok("resize=256,center-crop=224,normalize=0.5/0.5,hwc,f16");
  assert_int_equal(s.crop, STOKE__TF_CROP_CENTER);
  assert_int_equal(s.resize, 256);
  assert_true(s.flip_p == 0);
  for (int c = 0; c < 3; c++)
    assert_true(s.mean[c] == 0.5f && s.std[c] == 0.5f);
  assert_int_equal(s.layout, STOKE__TF_HWC);
  assert_int_equal(s.dtype, STOKE_F16);

  /* Defaults: chw, u8; HxW sizes; options of random-resized-crop. */
  s = parse_ok("random-resized-crop=160x192:scale=0.25-0.5:ratio=1-2");
  assert_int_equal(s.out_h, 160);
  assert_int_equal(s.out_w, 192);
  assert_true(s.scale[0] == 0.25 && s.scale[1] == 0.5);
  assert_true(s.ratio[0] == 1.0 && s.ratio[1] == 2.0);
  assert_int_equal(s.layout, STOKE__TF_CHW);
  assert_int_equal(s.dtype, STOKE_U8);
  assert_false(s.normalize);

  /* Per-channel normalize, commas inside the token, then more tokens. */
  s = parse_ok("center-crop=32,normalize=0.1,0.2,0.3/0.4,0.5,0.6,flip=0.25,"
               "f32");
  assert_true(s.mean[0] == 0.1f && s.mean[2] == 0.3f);
  assert_true(s.std[0] == 0.4f && s.std[2] == 0.6f);
  assert_true(s.flip_p == 0.25);
  assert_int_equal(s.dtype, STOKE_F32);
  s = parse_ok("flip=1,center-crop=8x4");
  assert_true(s.flip_p == 1.0);
  assert_int_equal(s.out_h, 8);
  assert_int_equal(s.out_w, 4);
}

static void test_parse_rejects_and_names_the_token(void **state) {
  (void)state;
  static const struct {
    const char *spec;
    const char *want[2]; /* substrings of the message */
  } cases[] = {
      {"random-resized-crop=224,flip,rotate=3",
       {"unknown token 'rotate=3'", "position 29"}},
      {"random-resized-crop=0", {"size '0' must be positive", NULL}},
      {"center-crop=0x5", {"center-crop: size '0x5' must be positive", NULL}},
      {"random-resized-crop=abc", {"bad size 'abc'", "position 0"}},
      {"random-resized-crop=224:scale=0.5-0.1", {"'scale=0.5-0.1'", NULL}},
      {"random-resized-crop=224:scale=0-1", {"'scale=0-1'", NULL}},
      {"random-resized-crop=224:ratio=2", {"'ratio=2'", NULL}},
      {"random-resized-crop=224:zoom=2", {"unknown option 'zoom=2'", NULL}},
      {"center-crop=224,normalize=imagenet", {"normalize at position 16",
                                              "u8"}},
      {"center-crop=224,normalize=imagenet,u8", {"normalize", "u8"}},
      {"random-resized-crop=224,center-crop=224",
       {"second crop 'center-crop=224'", "position 24"}},
      {"center-crop=224,flip,flip", {"second flip", "position 21"}},
      {"center-crop=224,chw,hwc", {"second layout 'hwc'", NULL}},
      {"center-crop=224,f16,f32", {"second dtype 'f32'", NULL}},
      {"resize=256", {"no crop", NULL}},
      {"resize=256,random-resized-crop=224", {"resize at position 0",
                                              "random-resized-crop"}},
      {"center-crop=224,resize=256", {"resize at position 16", "after"}},
      {"resize=200,center-crop=224", {"resize=200", "smaller"}},
      {"resize=0,center-crop=1", {"resize: size '0'", NULL}},
      {"resize=2x3,center-crop=1", {"resize: bad size '2x3'", NULL}},
      {"center-crop=224,flip=2", {"flip: bad probability '2'", NULL}},
      {"center-crop=224,normalize=1,2/3,f32", {"normalize: bad value '1,2/3'",
                                               NULL}},
      {"center-crop=224,normalize=0.5/0,f32", {"std must be positive", NULL}},
      {"center-crop=224,normalize=rgb,f32", {"bad value 'rgb'",
                                             "position 16"}},
      {"center-crop=224,,f32", {"empty token at position 16", NULL}},
      {"center-crop=224,", {"empty token at position 16", NULL}},
      {"", {"empty spec", NULL}},
      {"center-crop", {"'center-crop' at position 0 needs a size", NULL}},
      {"center-crop=99999", {"bad size '99999'", NULL}},
      {"center-crop=4,CHW", {"unknown token 'CHW'", NULL}},
      {"center-crop=4,chw=1", {"unknown token 'chw=1'", NULL}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    stoke__tf_spec s;
    stoke__clear_tls_error();
    int rc = stoke__tf_parse(cases[i].spec, &s);
    const char *msg = stoke__tls_error();
    bool ok = rc == STOKE_EINVAL && strncmp(msg, "transform: ", 11) == 0;
    for (int k = 0; k < 2; k++)
      if (cases[i].want[k] && !strstr(msg, cases[i].want[k])) ok = false;
    if (!ok)
      fprintf(stderr, "spec '%s': rc %d, message '%s'\n", cases[i].spec, rc,
              msg);
    assert_true(ok);
  }
  assert_int_equal(stoke__tf_parse(NULL, &(stoke__tf_spec){0}), STOKE_EINVAL);
}

static void test_field_desc_shapes(void **state) {
  (void)state;
  stoke__tf_spec s = parse_ok("random-resized-crop=160x192,f32");
  stoke_field_desc d = {.name = "image"};
  stoke__tf_field_desc(&s, &d);
  assert_string_equal(d.name, "image");
  assert_int_equal(d.dtype, STOKE_F32);
  assert_int_equal(d.ndim, 3);
  assert_int_equal(d.shape[0], 3);
  assert_int_equal(d.shape[1], 160);
  assert_int_equal(d.shape[2], 192);
  assert_int_equal(stoke__tf_out_bytes(&s), 3 * 160 * 192 * 4);
  assert_int_equal(stoke__field_bytes(&d), stoke__tf_out_bytes(&s));

  s = parse_ok("center-crop=7x5,hwc");
  stoke__tf_field_desc(&s, &d);
  assert_int_equal(d.dtype, STOKE_U8);
  assert_int_equal(d.shape[0], 7);
  assert_int_equal(d.shape[1], 5);
  assert_int_equal(d.shape[2], 3);
  assert_int_equal(stoke__tf_out_bytes(&s), 7 * 5 * 3);

  s = parse_ok("center-crop=4,normalize=imagenet,f16");
  stoke__tf_field_desc(&s, &d);
  assert_int_equal(d.dtype, STOKE_F16);
  assert_int_equal(stoke__tf_out_bytes(&s), 3 * 4 * 4 * 2);
}

/* ---- planning ------------------------------------------------------------ */

static void check_rrc_bounds(const char *spec_text, int w, int h) {
  stoke__tf_spec s = parse_ok(spec_text);
  int fallbacks = 0, flips = 0;
  const int n = 5000;
  for (int i = 0; i < n; i++) {
    stoke_rng rng;
    stoke_rng_init(&rng, 42, 3, (uint64_t)i);
    stoke__tf_plan p;
    assert_int_equal(stoke__tf_plan_make(&s, w, h, &rng, &p), 0);
    /* Integer boxes inside the image; clip = box. */
    assert_true(p.box_x >= 0 && p.box_y >= 0);
    assert_true(p.box_w >= 1 && p.box_h >= 1);
    assert_true(p.box_x + p.box_w <= w && p.box_y + p.box_h <= h);
    assert_true(p.box_x == floor(p.box_x) && p.box_w == floor(p.box_w));
    assert_int_equal(p.clip_x0, (int)p.box_x);
    assert_int_equal(p.clip_x1, (int)(p.box_x + p.box_w));
    assert_int_equal(p.clip_y1, (int)(p.box_y + p.box_h));
    assert_int_equal(p.out_w, s.out_w);
    assert_int_equal(p.out_h, s.out_h);
    flips += p.flip;
    /* Within the bounds, allowing for rounding each side to an integer:
    ** the unrounded sides are within 0.5 of the rounded ones. */
    double area = (double)w * h;
    double lo = (p.box_w - 0.5) * (p.box_h - 0.5) / area;
    double hi = (p.box_w + 0.5) * (p.box_h + 0.5) / area;
    double rlo = (p.box_w - 0.5) / (p.box_h + 0.5);
    double rhi = (p.box_w + 0.5) / (p.box_h - 0.5);
    bool in_scale = hi >= s.scale[0] - 1e-12 && lo <= s.scale[1] + 1e-12;
    bool in_ratio = rhi >= s.ratio[0] - 1e-12 && rlo <= s.ratio[1] + 1e-12;
    if (!in_scale || !in_ratio) fallbacks++;
  }
  /* Fallbacks need 10 failed tries: on these images, never. */
  assert_int_equal(fallbacks, 0);
  if (s.flip_p == 0.5) assert_true(flips > n * 0.45 && flips < n * 0.55);
  if (s.flip_p == 0) assert_int_equal(flips, 0);
}

static void test_rrc_boxes_within_bounds(void **state) {
  (void)state;
  check_rrc_bounds("random-resized-crop=224,flip", 500, 375);
  check_rrc_bounds("random-resized-crop=224", 1920, 1080);
  check_rrc_bounds("random-resized-crop=64:scale=0.5-0.6:ratio=1-2,flip",
                   640, 640);
  check_rrc_bounds("random-resized-crop=32:scale=1-1:ratio=1-1", 200, 200);
}

static void test_rrc_fallback(void **state) {
  (void)state;
  stoke__tf_spec s = parse_ok("random-resized-crop=224");
  static const struct {
    int w, h, x, y, bw, bh;
  } cases[] = {
      /* 2000x10: every try is too tall; ratio clamped to 4/3: 13x10. */
      {2000, 10, 993, 0, 13, 10},
      /* 10x2000: clamped to 3/4: h = round(10 / 0.75) = 13. */
      {10, 2000, 0, 993, 10, 13},
      {1000, 3, 498, 0, 4, 3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (uint64_t k = 0; k < 50; k++) {
      stoke_rng rng;
      stoke_rng_init(&rng, 9, 0, k);
      stoke__tf_plan p;
      assert_int_equal(stoke__tf_plan_make(&s, cases[i].w, cases[i].h, &rng,
                                           &p), 0);
      assert_true(p.box_x == cases[i].x && p.box_y == cases[i].y);
      assert_true(p.box_w == cases[i].bw && p.box_h == cases[i].bh);
    }
  /* 1x1: the whole image, whether a try succeeds or the fallback runs. */
  for (uint64_t k = 0; k < 200; k++) {
    stoke_rng rng;
    stoke_rng_init(&rng, 1, 0, k);
    stoke__tf_plan p;
    assert_int_equal(stoke__tf_plan_make(&s, 1, 1, &rng, &p), 0);
    assert_true(p.box_x == 0 && p.box_y == 0 && p.box_w == 1 &&
                p.box_h == 1);
  }
}

static void test_plan_is_a_function_of_the_stream(void **state) {
  (void)state;
  stoke__tf_spec s = parse_ok("random-resized-crop=224,flip");
  int differ = 0;
  for (uint64_t i = 0; i < 100; i++) {
    stoke_rng a, b, c;
    stoke_rng_init(&a, 7, 2, i);
    stoke_rng_init(&b, 7, 2, i);
    stoke_rng_init(&c, 7, 2, i + 1000);
    stoke__tf_plan pa, pb, pc;
    assert_int_equal(stoke__tf_plan_make(&s, 640, 480, &a, &pa), 0);
    assert_int_equal(stoke__tf_plan_make(&s, 640, 480, &b, &pb), 0);
    assert_int_equal(stoke__tf_plan_make(&s, 640, 480, &c, &pc), 0);
    assert_memory_equal(&pa, &pb, sizeof pa);
    assert_true(a.counter == b.counter);
    differ += memcmp(&pa, &pc, sizeof pa) != 0;
  }
  assert_true(differ > 90);
}

static void test_plan_resize_center_crop(void **state) {
  (void)state;
  stoke__tf_spec s = parse_ok("resize=256,center-crop=224");
  stoke_rng rng;
  stoke_rng_init(&rng, 0, 0, 0);
  stoke__tf_plan p;
  /* 500x375 -> 341x256 (int(256 * 500 / 375)); crop top 16, left
  ** round(58.5) = 58 (half to even, as Python's round). */
  assert_int_equal(stoke__tf_plan_make(&s, 500, 375, &rng, &p), 0);
  assert_true(rng.counter == 0); /* deterministic: draws nothing */
  double sx = 500.0 / 341, sy = 375.0 / 256;
  assert_true(fabs(p.box_x - 58 * sx) < 1e-9);
  assert_true(fabs(p.box_y - 16 * sy) < 1e-9);
  assert_true(fabs(p.box_w - 224 * sx) < 1e-9);
  assert_true(fabs(p.box_h - 224 * sy) < 1e-9);
  assert_true(p.clip_x0 == 0 && p.clip_y0 == 0 && p.clip_x1 == 500 &&
              p.clip_y1 == 375);
  assert_false(p.flip);
  /* DCT hint: 224 of 328 source pixels: no scaling possible.  A 4000x3000
  ** image gives a box of ~2625 pixels for 224: 1/8 still covers it. */
  assert_int_equal(stoke__tf_plan_dct_denom(&p), 1);
  assert_int_equal(stoke__tf_plan_make(&s, 4000, 3000, &rng, &p), 0);
  assert_int_equal(stoke__tf_plan_dct_denom(&p), 8);

  /* center-crop alone: an integer box; an image smaller is refused. */
  s = parse_ok("center-crop=3x4");
  assert_int_equal(stoke__tf_plan_make(&s, 9, 6, &rng, &p), 0);
  assert_true(p.box_x == 2 && p.box_y == 2 && p.box_w == 4 && p.box_h == 3);
  assert_int_equal(stoke__tf_plan_make(&s, 3, 3, &rng, &p), STOKE_EINVAL);
  assert_non_null(strstr(stoke__tls_error(), "smaller than center-crop"));
  assert_int_equal(stoke__tf_plan_make(&s, 0, 3, &rng, &p), STOKE_EINVAL);
}

/* ---- f16 --------------------------------------------------------------- */

static float bits_f32(uint32_t b) {
  float f;
  memcpy(&f, &b, 4);
  return f;
}

static void test_f16_known_values(void **state) {
  (void)state;
  static const struct {
    float f;
    uint16_t h;
  } cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {0.5f, 0x3800},
      {65504.0f, 0x7bff},   /* largest half */
      {65519.0f, 0x7bff},   /* rounds down */
      {65520.0f, 0x7c00},   /* tie to even: inf */
      {1e6f, 0x7c00},
      {-1e6f, 0xfc00},
      {0x1p-14f, 0x0400},   /* smallest normal */
      {0x1p-24f, 0x0001},   /* smallest subnormal */
      {0x1p-25f, 0x0000},   /* tie between 0 and 2^-24: even is 0 */
      {0x1.8p-25f, 0x0001}, /* above the tie */
      {0x3p-25f, 0x0002},   /* 1.5 units: tie, to even 2 */
      {0x5p-25f, 0x0002},   /* 2.5 units: tie, to even 2 */
      {0x1p-26f, 0x0000},
      {0x1.ffcp-15f, 0x0400}, /* 1023.5 units: up into the normals */
      {1.0f + 0x1p-11f, 0x3c00}, /* tie: to even (down) */
      {1.0f + 0x3p-11f, 0x3c02}, /* tie: to even (up) */
      {1.0f + 0x1.2p-11f, 0x3c01}, /* just above the tie */
      {0.1f, 0x2e66},
      {-0.333333343f, 0xb555},
      {3.14159274f, 0x4248},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint16_t h = stoke__tf_f16(cases[i].f);
    if (h != cases[i].h)
      fprintf(stderr, "f16(%a) = 0x%04x, want 0x%04x\n", (double)cases[i].f,
              h, cases[i].h);
    assert_int_equal(h, cases[i].h);
  }
  assert_int_equal(stoke__tf_f16(bits_f32(0x7f800000u)), 0x7c00);
  assert_int_equal(stoke__tf_f16(bits_f32(0xff800000u)), 0xfc00);
  uint16_t nan = stoke__tf_f16(bits_f32(0x7fc00000u));
  assert_true((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff) != 0);
  /* Every half converts back to itself (exact values round-trip). */
  for (uint32_t h = 0; h < 0x7c00; h++) {
    uint32_t e = h >> 10, m = h & 0x3ff;
    float f = e ? ldexpf((float)(m | 0x400), (int)e - 25)
                : ldexpf((float)m, -24);
    assert_int_equal(stoke__tf_f16(f), h);
    assert_int_equal(stoke__tf_f16(-f), h | 0x8000);
  }
}

/* ---- apply ------------------------------------------------------------- */

static void test_identity_is_exact_and_layouts(void **state) {
  (void)state;
  const int w = 37, h = 23;
  uint8_t *px = make_image(w, h, 1);
  stoke__tf_image img = full_image(px, w, h);
  stoke__tf_scratch s;
  stoke__tf_scratch_init(&s, NULL);
  /* A 20x11 crop at (5, 9) at its own size: the same pixels, in HWC... */
  stoke__tf_spec hwc = parse_ok("center-crop=11x20,hwc");
  stoke__tf_plan p = box_plan(5, 9, 20, 11, 20, 11);
  uint8_t *out = apply_ok(&hwc, &p, &img, &s);
  for (int y = 0; y < 11; y++)
    assert_memory_equal(out + (size_t)y * 20 * 3,
                        px + ((size_t)(y + 9) * w + 5) * 3, 20 * 3);
  /* ...and in CHW. */
  stoke__tf_spec chw = parse_ok("center-crop=11x20");
  uint8_t *out2 = apply_ok(&chw, &p, &img, &s);
  for (int c = 0; c < 3; c++)
    for (int y = 0; y < 11; y++)
      for (int x = 0; x < 20; x++)
        assert_int_equal(out2[(size_t)c * 220 + y * 20 + x],
                         px[((size_t)(y + 9) * w + x + 5) * 3 + c]);
  /* The whole image through the planner's center-crop. */
  stoke__tf_spec all = parse_ok(("center-crop=23x37,hwc"));
  stoke_rng rng;
  stoke_rng_init(&rng, 0, 0, 0);
  assert_int_equal(stoke__tf_plan_make(&all, w, h, &rng, &p), 0);
  uint8_t *out3 = apply_ok(&all, &p, &img, &s);
  assert_memory_equal(out3, px, (size_t)w * h * 3);
  free(out);
  free(out2);
  free(out3);
  stoke__tf_scratch_free(&s);
  free(px);
}

static void test_flip_reverses_columns(void **state) {
  (void)state;
  const int w = 16, h = 9;
  uint8_t *px = make_image(w, h, 2);
  stoke__tf_image img = full_image(px, w, h);
  stoke__tf_scratch s;
  stoke__tf_scratch_init(&s, NULL);
  stoke__tf_spec spec = parse_ok("center-crop=9x16,flip=1,hwc");
  stoke_rng rng;
  stoke_rng_init(&rng, 0, 0, 0);
  stoke__tf_plan p;
  assert_int_equal(stoke__tf_plan_make(&spec, w, h, &rng, &p), 0);
  assert_true(p.flip); /* p = 1: always */
  uint8_t *out = apply_ok(&spec, &p, &img, &s);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      assert_memory_equal(out + ((size_t)y * w + x) * 3,
                          px + ((size_t)y * w + (w - 1 - x)) * 3, 3);
  /* Flip of a resampled output = resampled then mirrored, also in CHW. */
  stoke__tf_spec chw = parse_ok("center-crop=5x7,f32");
  stoke__tf_plan q = box_plan(1, 2, 13, 6, 7, 5);
  float *a = apply_ok(&chw, &q, &img, &s);
  q.flip = true;
  float *b = apply_ok(&chw, &q, &img, &s);
  for (int c = 0; c < 3; c++)
    for (int y = 0; y < 5; y++)
      for (int x = 0; x < 7; x++)
        assert_true(a[c * 35 + y * 7 + x] == b[c * 35 + y * 7 + 6 - x]);
  free(a);
  free(b);
  free(out);
  stoke__tf_scratch_free(&s);
  free(px);
}

static void test_normalize_values(void **state) {
  (void)state;
  /* A 4x4 image, one value per pixel and channel: at identity size every
  ** output is its value through (x/255 - mean) / std. */
  uint8_t px[4 * 4 * 3];
  for (int i = 0; i < 48; i++) px[i] = (uint8_t)(i * 5 + 3);
  px[0] = 0;
  px[47] = 255;
  stoke__tf_image img = full_image(px, 4, 4);
  stoke__tf_scratch s;
  stoke__tf_scratch_init(&s, NULL);
  stoke__tf_plan p = box_plan(0, 0, 4, 4, 4, 4);
  const float mean[3] = {0.485f, 0.456f, 0.406f};
  const float sd[3] = {0.229f, 0.224f, 0.225f};
  stoke__tf_spec f32 = parse_ok("center-crop=4,normalize=imagenet,f32");
  stoke__tf_spec f16 = parse_ok("center-crop=4,normalize=imagenet,f16");
  stoke__tf_spec raw = parse_ok("center-crop=4,hwc,f32");
  float *a = apply_ok(&f32, &p, &img, &s);
  uint16_t *b = apply_ok(&f16, &p, &img, &s);
  float *r = apply_ok(&raw, &p, &img, &s);
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < 16; i++) {
      uint8_t v = px[i * 3 + c];
      float want = ((float)v / 255.0f - mean[c]) / sd[c];
      assert_true(a[c * 16 + i] == want);
      assert_int_equal(b[c * 16 + i], stoke__tf_f16(want));
      assert_true(r[i * 3 + c] == (float)v / 255.0f);
    }
  assert_true(fabsf(a[0] - (-0.485f / 0.229f)) < 1e-6f);
  assert_true(fabsf(a[2 * 16 + 15] - (1.0f - 0.406f) / 0.225f) < 1e-6f);
  /* The table follows the spec when one scratch serves two specs. */
  stoke__tf_spec half = parse_ok("center-crop=4,normalize=0.5/0.5,hwc,f32");
  float *h = apply_ok(&half, &p, &img, &s);
  assert_true(h[0] == -1.0f && h[47] == 1.0f);
  free(a);
  free(b);
  free(r);
  free(h);
  stoke__tf_scratch_free(&s);
}

static void test_one_pixel_images(void **state) {
  (void)state;
  uint8_t px[3] = {12, 200, 77};
  stoke__tf_image img = full_image(px, 1, 1);
  stoke__tf_scratch s;
  stoke__tf_scratch_init(&s, NULL);
  stoke__tf_spec spec = parse_ok("random-resized-crop=5x7,flip,hwc");
  stoke_rng rng;
  stoke_rng_init(&rng, 3, 0, 0);
  stoke__tf_plan p;
  assert_int_equal(stoke__tf_plan_make(&spec, 1, 1, &rng, &p), 0);
  uint8_t *out = apply_ok(&spec, &p, &img, &s);
  for (int i = 0; i < 35; i++) assert_memory_equal(out + 3 * i, px, 3);
  /* And a 1x1 output from a large box: the mean, near enough. */
  uint8_t *big = malloc(64 * 64 * 3);
  for (int i = 0; i < 64 * 64 * 3; i++) big[i] = (uint8_t)(i % 3 ? 100 : 50);
  stoke__tf_image bimg = full_image(big, 64, 64);
  stoke__tf_spec one = parse_ok("center-crop=1,hwc");
  stoke__tf_plan q = box_plan(0, 0, 64, 64, 1, 1);
  uint8_t *o = apply_ok(&one, &q, &bimg, &s);
  assert_int_equal(o[0], 50);
  assert_int_equal(o[1], 100);
  assert_int_equal(o[2], 100);
  free(o);
  free(big);
  free(out);
  stoke__tf_scratch_free(&s);
}

static void test_large_shrink(void **state) {
  (void)state;
  /* 3000x2000 -> 224x150: constant stays constant exactly (weights sum to
  ** one), and a horizontal ramp stays monotonic. */
  const int w = 3000, h = 2000;
  uint8_t *px = malloc((size_t)w * h * 3);
  assert_non_null(px);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      uint8_t *q = px + ((size_t)y * w + x) * 3;
      q[0] = 173;
      q[1] = (uint8_t)(x * 255 / (w - 1));
      q[2] = (uint8_t)(y * 255 / (h - 1));
    }
  stoke__tf_image img = full_image(px, w, h);
  stoke__tf_scratch s;
  stoke__tf_scratch_init(&s, NULL);
  stoke__tf_spec spec = parse_ok("center-crop=150x224,hwc");
  stoke__tf_plan p = box_plan(0, 0, w, h, 224, 150);
  uint8_t *out = apply_ok(&spec, &p, &img, &s);
  for (int y = 0; y < 150; y++)
    for (int x = 0; x < 224; x++) {
      const uint8_t *o = out + ((size_t)y * 224 + x) * 3;
      assert_int_equal(o[0], 173);
      if (x) assert_true(o[1] >= o[-2]);
      /* Column x averages source columns around (x + 0.5) * w / 224. */
      double want = ((x + 0.5) * w / 224 - 0.5) * 255 / (w - 1);
      assert_true(fabs(o[1] - want) <= 1.5);
    }
  free(out);
  stoke__tf_scratch_free(&s);
  free(px);
}

/* A region of the image, and a "DCT-scaled" image (box-averaged 2x2), must
** resample the same full-resolution box as the full-size equivalent. */
static void test_region_and_scale_mapping(void **state) {
  (void)state;
  const int w = 64, h = 48;
  /* Smooth, so that the half-resolution result can be compared with the
  ** full-resolution one at the end. */
  uint8_t *px = malloc((size_t)w * h * 3);
  assert_non_null(px);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < 3; c++)
        px[((size_t)y * w + x) * 3 + c] = (uint8_t)(x * 2 + y + 30 * c);
  stoke__tf_scratch s;
  stoke__tf_scratch_init(&s, NULL);
  stoke__tf_spec spec = parse_ok("center-crop=13x17,hwc");
  stoke__tf_plan p = box_plan(9, 7, 41, 30, 17, 13);
  stoke__tf_image full = full_image(px, w, h);
  uint8_t *want = apply_ok(&spec, &p, &full, &s);

  /* Region [6, 55) x [4, 40) of the image, as a decoder would crop it. */
  stoke__tf_image reg = {.px = px + (4 * (size_t)w + 6) * 3, .w = 49,
                         .h = 36, .stride = 3 * (size_t)w, .x0 = 6, .y0 = 4,
                         .scale = 1};
  uint8_t *got = apply_ok(&spec, &p, &reg, &s);
  assert_memory_equal(got, want, stoke__tf_out_bytes(&spec));
  free(got);

  /* The image at 1/2, by 2x2 box averages. */
  const int hw = w / 2, hh = h / 2;
  uint8_t *half = malloc((size_t)hw * hh * 3);
  for (int y = 0; y < hh; y++)
    for (int x = 0; x < hw; x++)
      for (int c = 0; c < 3; c++) {
        int sum = 0;
        for (int dy = 0; dy < 2; dy++)
          for (int dx = 0; dx < 2; dx++)
            sum += px[((size_t)(2 * y + dy) * w + 2 * x + dx) * 3 + c];
        half[((size_t)y * hw + x) * 3 + c] = (uint8_t)((sum + 2) / 4);
      }
  /* Reference: the half image as if full resolution, the box halved (and
  ** fractional: 4.5, 3.5, 20.5 x 15), the clip window rounded outward. */
  stoke__tf_plan ph;
  memset(&ph, 0, sizeof ph);
  ph.box_x = 4.5;
  ph.box_y = 3.5;
  ph.box_w = 20.5;
  ph.box_h = 15;
  ph.clip_x0 = 4;
  ph.clip_y0 = 3;
  ph.clip_x1 = 25;
  ph.clip_y1 = 19;
  ph.out_w = 17;
  ph.out_h = 13;
  stoke__tf_image himg = full_image(half, hw, hh);
  uint8_t *ref = apply_ok(&spec, &ph, &himg, &s);
  /* The same pixels described as 1/2 scale of the full image... */
  himg.scale = 2;
  got = apply_ok(&spec, &p, &himg, &s);
  assert_memory_equal(got, ref, stoke__tf_out_bytes(&spec));
  free(got);
  /* ...and as a region of it at 1/2 scale: half-pixels [2, 30) x [1, 22),
  ** i.e. full-resolution origin (4, 2). */
  stoke__tf_image hreg = {.px = half + ((size_t)1 * hw + 2) * 3, .w = 28,
                          .h = 21, .stride = 3 * (size_t)hw, .x0 = 4,
                          .y0 = 2, .scale = 2};
  got = apply_ok(&spec, &p, &hreg, &s);
  assert_memory_equal(got, ref, stoke__tf_out_bytes(&spec));
  free(got);
  /* And close to the full-resolution result: the mapping puts the box in
  ** the same place (one source pixel off would be 1 to 3 off on average). */
  long diff = 0;
  for (size_t i = 0; i < stoke__tf_out_bytes(&spec); i++)
    diff += labs((long)ref[i] - (long)want[i]);
  assert_true(diff <= (long)stoke__tf_out_bytes(&spec));
  free(ref);
  free(half);
  free(want);
  stoke__tf_scratch_free(&s);
  free(px);
}

/* Decoding only stoke__tf_plan_window(), at full or half resolution, gives
** the output of the whole image at that resolution. */
static void test_plan_window_suffices(void **state) {
  (void)state;
  const int w = 500, h = 376;
  uint8_t *px = make_image(w, h, 9);
  uint8_t *half = malloc((size_t)(w / 2) * (h / 2) * 3);
  assert_non_null(half);
  for (int y = 0; y < h / 2; y++)
    for (int x = 0; x < w / 2; x++)
      for (int c = 0; c < 3; c++)
        half[((size_t)y * (w / 2) + x) * 3 + c] =
            px[((size_t)(2 * y) * w + 2 * x) * 3 + c];
  stoke__tf_scratch s;
  stoke__tf_scratch_init(&s, NULL);
  static const char *const specs[] = {
      "resize=160,center-crop=112,hwc", "random-resized-crop=48x40,hwc",
      "random-resized-crop=300,hwc"};
  for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
    stoke__tf_spec spec = parse_ok(specs[k]);
    for (uint64_t i = 0; i < 20; i++) {
      stoke_rng rng;
      stoke_rng_init(&rng, 11, 0, i);
      stoke__tf_plan p;
      assert_int_equal(stoke__tf_plan_make(&spec, w, h, &rng, &p), 0);
      for (int d = 1; d <= 2; d++) {
        const uint8_t *base = d == 1 ? px : half;
        int bw = w / d, bh = h / d;
        stoke__tf_image all = {.px = base, .w = bw, .h = bh,
                               .stride = 3 * (size_t)bw, .scale = d};
        uint8_t *want = apply_ok(&spec, &p, &all, &s);
        int win[4];
        stoke__tf_plan_window(&p, d, win);
        assert_true(win[0] % d == 0 && win[1] % d == 0);
        assert_true(win[0] <= p.box_x && win[2] >= p.box_x + p.box_w);
        int x0 = win[0] / d, y0 = win[1] / d;
        int x1 = STOKE__MIN(win[2] / d, bw), y1 = STOKE__MIN(win[3] / d, bh);
        stoke__tf_image reg = {.px = base + ((size_t)y0 * bw + x0) * 3,
                               .w = x1 - x0, .h = y1 - y0,
                               .stride = 3 * (size_t)bw, .x0 = win[0],
                               .y0 = win[1], .scale = d};
        if (spec.crop == STOKE__TF_CROP_CENTER)
          assert_true(reg.w < bw); /* the window is smaller than the image */
        uint8_t *got = apply_ok(&spec, &p, &reg, &s);
        assert_memory_equal(got, want, stoke__tf_out_bytes(&spec));
        free(got);
        free(want);
      }
    }
  }
  stoke__tf_scratch_free(&s);
  free(half);
  free(px);
}

static void test_apply_errors_and_scratch_reuse(void **state) {
  (void)state;
  const int w = 40, h = 30;
  uint8_t *px = make_image(w, h, 8);
  stoke__tf_scratch s;
  stoke__tf_scratch_init(&s, NULL);
  stoke__tf_spec spec = parse_ok("center-crop=10x12,hwc");
  uint8_t out[10 * 12 * 3];
  /* A region that misses part of the box. */
  stoke__tf_image reg = {.px = px, .w = 20, .h = 30, .stride = 3 * (size_t)w,
                         .scale = 1};
  stoke__tf_plan p = box_plan(10, 0, 30, 20, 12, 10);
  assert_int_equal(stoke__tf_apply(&spec, &p, &reg, &s, out), STOKE_EINVAL);
  assert_non_null(strstr(stoke__tls_error(), "does not cover"));
  /* A plan of another output size. */
  stoke__tf_image img = full_image(px, w, h);
  stoke__tf_plan q = box_plan(0, 0, 10, 10, 5, 5);
  assert_int_equal(stoke__tf_apply(&spec, &q, &img, &s, out), STOKE_EINVAL);
  /* Scratch grown by a big job and reused for a small one gives the same
  ** bytes as a fresh scratch. */
  stoke__tf_spec big = parse_ok("center-crop=200x300,hwc");
  stoke__tf_plan pb = box_plan(0, 0, w, h, 300, 200);
  free(apply_ok(&big, &pb, &img, &s));
  uint8_t *a = apply_ok(&spec, &p, &img, &s);
  stoke__tf_scratch fresh;
  stoke__tf_scratch_init(&fresh, NULL);
  uint8_t *b = apply_ok(&spec, &p, &img, &fresh);
  assert_memory_equal(a, b, sizeof out);
  free(a);
  free(b);
  stoke__tf_scratch_free(&fresh);
  stoke__tf_scratch_free(&s);
  stoke__tf_scratch_free(&s); /* twice: a no-op */
  free(px);
}

/* Every allocation failure surfaces as STOKE_ENOMEM and leaves the scratch
** usable and freeable. */
typedef struct fail_alloc {
  int left; /* allocations that succeed before failures begin */
} fail_alloc;

static void *fa_alloc(void *user, size_t n) {
  fail_alloc *f = user;
  if (f->left-- <= 0) return NULL;
  return malloc(n);
}
static void fa_free(void *user, void *p) {
  (void)user;
  free(p);
}

static void test_apply_out_of_memory(void **state) {
  (void)state;
  const int w = 20, h = 20;
  uint8_t *px = make_image(w, h, 4);
  stoke__tf_image img = full_image(px, w, h);
  stoke__tf_spec spec = parse_ok("center-crop=8,normalize=imagenet,f32");
  stoke__tf_plan p = box_plan(1, 1, 18, 17, 8, 8);
  float out[3 * 64];
  for (int n = 0;; n++) {
    fail_alloc f = {.left = n};
    stoke_allocator a = {fa_alloc, fa_free, &f};
    stoke__tf_scratch s;
    stoke__tf_scratch_init(&s, &a);
    int rc = stoke__tf_apply(&spec, &p, &img, &s, out);
    stoke__tf_scratch_free(&s);
    if (rc == 0) break;
    assert_int_equal(rc, STOKE_ENOMEM);
    assert_true(n < 10);
  }
  free(px);
}

/* ---- the vector paths against the scalar reference ----------------------
**
** Every instruction set the CPU has (stoke__tf_scratch.isa) must give the
** scalar passes' bytes: for random boxes, scales, shrinks and enlargements,
** flips, layouts and dtypes, on images allocated to the exact byte so that
** a read past the region shows under ASan. */

/* The output of spec for plan with each path up to the CPU's best, compared
** with the scalar one; returns how many paths were compared. */
static int check_paths(const stoke__tf_spec *spec, const stoke__tf_plan *p,
                       const stoke__tf_image *img, stoke__tf_scratch *s) {
  size_t n = stoke__tf_out_bytes(spec);
  int best = stoke__tf_isa_best(), compared = 0;
  s->isa = STOKE__TF_ISA_SCALAR;
  uint8_t *want = apply_ok(spec, p, img, s);
  for (int isa = STOKE__TF_ISA_SCALAR + 1; isa <= best; isa++) {
    s->isa = isa;
    uint8_t *got = apply_ok(spec, p, img, s);
    if (memcmp(got, want, n) != 0) {
      size_t at = 0;
      while (got[at] == want[at]) at++;
      fprintf(stderr, "isa %d differs from scalar at byte %zu of %zu: "
              "box %gx%g at (%g, %g), clip [%d, %d) x [%d, %d), region "
              "%dx%d at (%g, %g) scale %g, flip %d\n", isa, at, n, p->box_w,
              p->box_h, p->box_x, p->box_y, p->clip_x0, p->clip_x1,
              p->clip_y0, p->clip_y1, img->w, img->h, img->x0, img->y0,
              img->scale, p->flip);
    }
    assert_memory_equal(got, want, n);
    free(got);
    compared++;
  }
  s->isa = best;
  free(want);
  return compared;
}

/* After a test's check_paths calls: it compared `compared` outputs and
** should have compared `calls` x the vector paths this CPU has.  On a CPU
** with no vector path nothing was compared, and the test says so and is
** skipped rather than passing by comparing nothing. */
static void expect_compared(const char *test, int compared, int calls) {
  int paths = stoke__tf_isa_best() - STOKE__TF_ISA_SCALAR;
  if (paths == 0) {
    fprintf(stderr, "%s: SKIPPED, this CPU has neither SSE4.1 nor AVX2: no "
            "vector path to compare with the scalar one\n", test);
    skip();
  }
  TU_CHECK(compared == calls * paths,
           "%s: compared %d outputs, want %d calls x %d vector paths", test,
           compared, calls, paths);
}

static uint32_t lcg(uint32_t *r) {
  *r = *r * 1103515245u + 12345u;
  return *r >> 8;
}

static void test_vector_paths_match_scalar(void **state) {
  (void)state;
  static const char *specs[] = {
      "center-crop=224,chw,u8", "center-crop=224,hwc,u8",
      "center-crop=17x13,chw,u8", "center-crop=31,normalize=imagenet,f32",
      "center-crop=9x40,hwc,f16", "center-crop=1,chw,u8",
      "center-crop=224,normalize=imagenet,chw,f32",
      "center-crop=224,normalize=imagenet,chw,f16",
      "center-crop=100x227,chw,f32", "center-crop=57x45,normalize=0.5/0.5,f16",
      "center-crop=224,normalize=imagenet,hwc,f32", "center-crop=3x33,chw,u8",
      "center-crop=5x37,hwc,u8", "center-crop=64x200,normalize=imagenet,f16"};
  const int n_specs = (int)(sizeof specs / sizeof specs[0]);
  uint32_t r = 12345;
  stoke__tf_scratch s;
  stoke__tf_scratch_init(&s, NULL);
  int compared = 0;
  for (int it = 0; it < 600; it++) {
    int w = 1 + (int)(lcg(&r) % 500), h = 1 + (int)(lcg(&r) % 400);
    uint8_t *px = make_image(w, h, r);
    stoke__tf_spec spec = parse_ok(specs[it % n_specs]);
    /* Mostly boxes of 0.3 to 2 times the output (the common shrinks and
    ** enlargements), sometimes any size. */
    int bw, bh;
    if (lcg(&r) % 4) {
      bw = (int)(spec.out_w * (0.3 + (lcg(&r) % 1700) / 1000.0));
      bh = (int)(spec.out_h * (0.3 + (lcg(&r) % 1700) / 1000.0));
      bw = STOKE__MAX(1, STOKE__MIN(bw, w));
      bh = STOKE__MAX(1, STOKE__MIN(bh, h));
    } else {
      bw = 1 + (int)(lcg(&r) % (uint32_t)w);
      bh = 1 + (int)(lcg(&r) % (uint32_t)h);
    }
    int bx = (int)(lcg(&r) % (uint32_t)(w - bw + 1));
    int by = (int)(lcg(&r) % (uint32_t)(h - bh + 1));
    stoke__tf_plan p = box_plan(bx, by, bw, bh, spec.out_w, spec.out_h);
    p.flip = lcg(&r) & 1;
    stoke__tf_image img = full_image(px, w, h);
    uint8_t *reg = NULL;
    switch (it % 3) {
    case 0: /* the whole image */
      break;
    case 1: /* exactly the clip window, as a decoder's crop, in its own
            ** tight allocation */
      reg = malloc((size_t)bw * bh * 3);
      assert_non_null(reg);
      for (int y = 0; y < bh; y++)
        memcpy(reg + (size_t)y * bw * 3,
               px + ((size_t)(by + y) * w + bx) * 3, (size_t)bw * 3);
      img = (stoke__tf_image){.px = reg, .w = bw, .h = bh,
                              .stride = 3 * (size_t)bw, .x0 = bx,
                              .y0 = by, .scale = 1};
      break;
    default: /* the image as a 1/2-scale decode of one twice its size:
             ** fractional boxes in region pixels */
      img.scale = 2;
      p.box_x = p.clip_x0 = 2 * bx + 1;
      p.box_y = p.clip_y0 = 2 * by;
      p.box_w = 2 * bw - 1;
      p.box_h = 2 * bh - 1;
      p.clip_x1 = 2 * (bx + bw);
      p.clip_y1 = 2 * (by + bh) - 1;
      break;
    }
    compared += check_paths(&spec, &p, &img, &s);
    free(reg);
    free(px);
  }
  stoke__tf_scratch_free(&s);
  expect_compared(__func__, compared, 600);
}

/* The planner's own boxes, as the loader makes them: random-resized-crop
** of photo-sized images, and resize then center-crop (fractional boxes,
** the whole image as the clip window). */
static void test_vector_paths_match_scalar_on_plans(void **state) {
  (void)state;
  static const char *specs[] = {
      "random-resized-crop=224,flip,chw,u8",
      "random-resized-crop=224,flip,normalize=imagenet,chw,f32",
      "random-resized-crop=224,flip,normalize=imagenet,chw,f16",
      "random-resized-crop=224,flip,hwc,u8",
      "random-resized-crop=160x192,flip,normalize=imagenet,hwc,f32",
      "resize=256,center-crop=224,normalize=imagenet,chw,f32",
      "resize=256,center-crop=224,chw,u8"};
  static const int sizes[][2] = {{440, 365}, {500, 375}, {333, 500},
                                 {1024, 683}, {231, 229}};
  stoke__tf_scratch s;
  stoke__tf_scratch_init(&s, NULL);
  int compared = 0, calls = 0;
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    int w = sizes[k][0], h = sizes[k][1];
    uint8_t *px = make_image(w, h, (uint32_t)k);
    stoke__tf_image img = full_image(px, w, h);
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
      stoke__tf_spec spec = parse_ok(specs[i]);
      for (uint64_t j = 0; j < 12; j++) {
        stoke_rng rng;
        stoke_rng_init(&rng, 5, k, j);
        stoke__tf_plan p;
        assert_int_equal(stoke__tf_plan_make(&spec, w, h, &rng, &p), 0);
        compared += check_paths(&spec, &p, &img, &s);
        calls++;
      }
    }
    free(px);
  }
  stoke__tf_scratch_free(&s);
  expect_compared(__func__, compared, calls);
}

/* Every byte value through each path's float writer, for normalizations
** whose divisions round in different places: an identity-sized row holding
** all 256 values in each channel. */
static void test_vector_paths_every_value(void **state) {
  (void)state;
  static const char *norms[] = {"", ",normalize=imagenet",
                                ",normalize=0.5/0.5",
                                ",normalize=0.1,0.7,0.333/0.3,0.01,3.7",
                                ",normalize=0.485,0.456,0.406/1,1,1",
                                /* x / 1e-39 overflows: the vector kernels
                                ** are not exact there, and are not used */
                                ",normalize=0.2/0.5,0.5,1e-39"};
  uint8_t px[256 * 3];
  for (int x = 0; x < 256; x++)
    for (int c = 0; c < 3; c++) px[3 * x + c] = (uint8_t)(x * (2 * c + 1));
  stoke__tf_image img = full_image(px, 256, 1);
  stoke__tf_plan p = box_plan(0, 0, 256, 1, 256, 1);
  stoke__tf_scratch s;
  stoke__tf_scratch_init(&s, NULL);
  int compared = 0, calls = 0;
  for (size_t i = 0; i < sizeof norms / sizeof norms[0]; i++)
    for (int d = 0; d < 2; d++)
      for (int flip = 0; flip < 2; flip++) {
        char text[128];
        snprintf(text, sizeof text, "center-crop=1x256%s,%s", norms[i],
                 d ? "f16" : "f32");
        stoke__tf_spec spec = parse_ok(text);
        p.flip = flip;
        compared += check_paths(&spec, &p, &img, &s);
        calls++;
        /* Which writer ran: the kernels, except for the last. */
        if (stoke__tf_isa_best() >= STOKE__TF_ISA_AVX2)
          assert_int_equal(s.norm_exact, i + 1 < sizeof norms / sizeof norms[0]
                                             ? 3 : 0);
      }
  stoke__tf_scratch_free(&s);
  expect_compared(__func__, compared, calls);
}

static void test_isa_choice(void **state) {
  (void)state;
  int best = stoke__tf_isa_best();
  assert_true(best >= STOKE__TF_ISA_SCALAR && best <= STOKE__TF_ISA_AVX2);
  stoke__tf_scratch s;
  stoke__tf_scratch_init(&s, NULL);
  assert_int_equal(s.isa, best);
  fprintf(stderr, "transform kernels: best %s\n",
          best == STOKE__TF_ISA_AVX2    ? "avx2"
          : best == STOKE__TF_ISA_SSE41 ? "sse4.1"
                                        : "scalar");
  stoke__tf_scratch_free(&s);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_accepts),
      cmocka_unit_test(test_parse_rejects_and_names_the_token),
      cmocka_unit_test(test_field_desc_shapes),
      cmocka_unit_test(test_rrc_boxes_within_bounds),
      cmocka_unit_test(test_rrc_fallback),
      cmocka_unit_test(test_plan_is_a_function_of_the_stream),
      cmocka_unit_test(test_plan_resize_center_crop),
      cmocka_unit_test(test_f16_known_values),
      cmocka_unit_test(test_identity_is_exact_and_layouts),
      cmocka_unit_test(test_flip_reverses_columns),
      cmocka_unit_test(test_normalize_values),
      cmocka_unit_test(test_one_pixel_images),
      cmocka_unit_test(test_large_shrink),
      cmocka_unit_test(test_region_and_scale_mapping),
      cmocka_unit_test(test_plan_window_suffices),
      cmocka_unit_test(test_apply_errors_and_scratch_reuse),
      cmocka_unit_test(test_apply_out_of_memory),
      cmocka_unit_test(test_vector_paths_match_scalar),
      cmocka_unit_test(test_vector_paths_match_scalar_on_plans),
      cmocka_unit_test(test_vector_paths_every_value),
      cmocka_unit_test(test_isa_choice),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
