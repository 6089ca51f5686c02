/* test_jpeg_rst.c — restart-interval cuts (src/decode/jpeg_rst.c) and the
** lossless rewrite for packed shards (src/decode/jpeg_transcode.c).
**
** The pixel-exactness of cut decodes over random crops and scales is in
** test_decode.c (test_jpeg_region_exact, restart kinds); here: the header
** parser's verdicts, the cut stream itself, damaged markers, the rewrite's
** losslessness for every kind of input, and its failures. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "decode/decode_int.h"
#include "decode_fixtures.h"
#include "test_util.h"

static char err[512];

static void make(const df_jpeg_opts *o, uint32_t w, uint32_t h,
                 uint64_t seed, uint8_t **j, size_t *n) {
  uint8_t *px = df_pattern(w, h, seed);
  if (o->in == JCS_GRAYSCALE)
    for (size_t i = 0; i < (size_t)w * h; i++) px[i] = px[3 * i];
  df_jpeg(px, w, h, o, j, n);
  free(px);
}

/* ---- the header parser --------------------------------------------------- */

static void test_parse_verdicts(void **state) {
  (void)state;
  static const struct {
    df_jpeg_opts o;
    uint32_t w;
    bool ok;
    uint32_t mcu_w, mcu_h, seg_w;
  } cases[] = {
      {{JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 1}, 333, true, 16, 16, 16},
      {{JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 1, 1}, 333, true, 16, 8, 16},
      {{JCS_RGB, JCS_UNKNOWN, 90, 0, 1, 1, 2}, 333, true, 8, 8, 16},
      {{JCS_GRAYSCALE, JCS_UNKNOWN, 90, 0, 0, 0, 3}, 333, true, 8, 8, 24},
      {{JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 0}, 333, false, 0, 0, 0},
      {{JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 2}, 333, false, 0, 0, 0},
      {{JCS_RGB, JCS_UNKNOWN, 90, 1, 2, 2, 1}, 333, false, 0, 0, 0},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    uint8_t *j;
    size_t n;
    make(&cases[k].o, cases[k].w, 97, k, &j, &n);
    stoke__jpeg_rst L;
    bool ok = stoke__jpeg_rst_parse(j, n, &L);
    if (ok != cases[k].ok) fail_msg("case %zu: parse says %d", k, ok);
    if (ok) {
      assert_int_equal(L.width, cases[k].w);
      assert_int_equal(L.height, 97);
      assert_int_equal(L.mcu_w, cases[k].mcu_w);
      assert_int_equal(L.mcu_h, cases[k].mcu_h);
      assert_int_equal(L.seg_w, cases[k].seg_w);
      assert_int_equal(L.segs_x * L.seg_w >= L.width, true);
    }
    free(j);
  }
  /* Not a JPEG, and a JPEG cut short inside its header. */
  stoke__jpeg_rst L;
  assert_false(stoke__jpeg_rst_parse((const uint8_t *)"\x89PNG\r\n", 6, &L));
  uint8_t *j;
  size_t n;
  df_jpeg_opts o = {JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 1};
  make(&o, 64, 64, 9, &j, &n);
  assert_false(stoke__jpeg_rst_parse(j, 100, &L));
  free(j);
}

/* ---- the cut stream ------------------------------------------------------ */

/* A cut is a JPEG of its box: plain libjpeg decodes it to the same pixels
** the full image has there (away from the inner edges, where the chroma
** upsampler lacks its neighbours, so 4:4:4 and gray compare whole). */
static void test_cut_is_a_jpeg(void **state) {
  (void)state;
  df_jpeg_opts kinds[] = {{JCS_RGB, JCS_UNKNOWN, 92, 0, 1, 1, 1},
                          {JCS_GRAYSCALE, JCS_UNKNOWN, 90, 0, 0, 0, 1}};
  for (size_t k = 0; k < 2; k++) {
    uint8_t *j;
    size_t n;
    make(&kinds[k], 200, 120, 3 + k, &j, &n);
    uint32_t rw, rh, cw, ch;
    uint8_t *ref = df_ref_jpeg(j, n, 1, &rw, &rh);
    stoke__jpeg_rst L;
    assert_true(stoke__jpeg_rst_parse(j, n, &L));
    stoke__jpeg_rst_box b;
    stoke__jpeg_rst_box_for(&L, 37, 21, 150, 100, &b);
    /* 8x8 MCUs, one per interval: x 32..152, y 16..104. */
    assert_int_equal(b.x, 32);
    assert_int_equal(b.y, 16);
    assert_int_equal(b.w, 120);
    assert_int_equal(b.h, 88);
    size_t cap = stoke__jpeg_rst_cut_bound(n, &b), cn;
    uint8_t *cut = malloc(cap);
    assert_true(stoke__jpeg_rst_cut(&L, j, n, &b, cut, cap, &cn));
    assert_true(cn < n);
    uint8_t *px = df_ref_jpeg(cut, cn, 1, &cw, &ch);
    assert_int_equal(cw, b.w);
    assert_int_equal(ch, b.h);
    for (uint32_t y = 0; y < ch; y++)
      assert_memory_equal(px + (size_t)y * cw * 3,
                          ref + ((size_t)(b.y + y) * rw + b.x) * 3,
                          (size_t)cw * 3);
    /* Too small a buffer is refused, not overrun. */
    assert_false(stoke__jpeg_rst_cut(&L, j, n, &b, cut, cap - 1, &cn));
    free(px);
    free(cut);
    free(ref);
    free(j);
  }
}

/* Offset of the k-th restart marker (0-based) in the scan, or 0. */
static size_t nth_rst(const uint8_t *p, size_t n, size_t scan, unsigned k) {
  for (size_t i = scan; i + 1 < n; i++)
    if (p[i] == 0xff && p[i + 1] >= 0xd0 && p[i + 1] <= 0xd7 && k-- == 0)
      return i;
  return 0;
}

/* Damaged markers: the cut gives up and the ordinary decode reports the
** damage (or, tolerant, decodes what it can); nothing crashes. */
static void test_damaged_markers(void **state) {
  (void)state;
  df_jpeg_opts o = {JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 1};
  uint8_t *j;
  size_t n;
  make(&o, 333, 257, 11, &j, &n);
  stoke__jpeg_rst L;
  assert_true(stoke__jpeg_rst_parse(j, n, &L));
  size_t at = nth_rst(j, n, L.scan_at, 30);
  assert_true(at > 0);
  stoke__decoder *d = NULL;
  assert_int_equal(stoke__decoder_create(NULL, &d), 0);
  stoke__decode_req r = {.x = 100, .y = 100, .w = 120, .h = 100,
                         .out_w = 120, .out_h = 100};
  stoke__image img;
  uint8_t *bad = malloc(n);

  /* Out of sequence: RST6 is RST7 (interval 30 ends with RST(30 % 8)). */
  memcpy(bad, j, n);
  bad[at + 1] = 0xd7;
  stoke__jpeg_rst_box b;
  stoke__jpeg_rst_box_for(&L, 100, 100, 220, 200, &b);
  uint8_t *cut = malloc(stoke__jpeg_rst_cut_bound(n, &b));
  size_t cn;
  assert_false(stoke__jpeg_rst_cut(&L, bad, n, &b, cut,
                                   stoke__jpeg_rst_cut_bound(n, &b), &cn));
  int rc = stoke__decode(d, bad, n, &r, &img, err, sizeof err);
  assert_int_equal(rc, STOKE_EFORMAT);
  if (!strstr(err, "JPEG")) fail_msg("message: %s", err);

  /* A marker turned into data (the scan has one interval fewer). */
  memcpy(bad, j, n);
  bad[at + 1] = 0x00;
  rc = stoke__decode(d, bad, n, &r, &img, err, sizeof err);
  assert_int_equal(rc, STOKE_EFORMAT);

  /* Cut short before the crop's rows: the cut runs out of markers. */
  rc = stoke__decode(d, j, L.scan_at + 200, &r, &img, err, sizeof err);
  assert_int_equal(rc, STOKE_EFORMAT);
  if (!strstr(err, "premature end")) fail_msg("message: %s", err);

  /* The undamaged file still cuts. */
  rc = stoke__decode(d, j, n, &r, &img, err, sizeof err);
  assert_int_equal(rc, 0);
  assert_true(img.restart_cut);
  free(cut);
  free(bad);
  free(j);
  stoke__decoder_destroy(d);
}

/* Random damage anywhere (header, markers, entropy data) and random crops:
** every decode either succeeds or fails with a message; nothing is read or
** written out of bounds (run under ASan in CI). */
static void test_fuzz_cuts(void **state) {
  (void)state;
  df_jpeg_opts o = {JCS_RGB, JCS_UNKNOWN, 88, 0, 2, 2, 1};
  uint8_t *j;
  size_t n;
  make(&o, 203, 151, 13, &j, &n);
  stoke__decoder *d = NULL;
  assert_int_equal(stoke__decoder_create(NULL, &d), 0);
  uint8_t *bad = malloc(n);
  uint64_t rng = 99;
  unsigned ok = 0, failed = 0;
  for (int t = 0; t < 400; t++) {
    memcpy(bad, j, n);
    size_t len = n;
    int flips = 1 + (int)(df_rng(&rng) % 4);
    for (int k = 0; k < flips; k++) {
      /* Half the damage in the first 700 bytes: the header. */
      size_t at = df_rng(&rng) % 2 ? df_rng(&rng) % 700 : df_rng(&rng) % n;
      bad[at] = (uint8_t)df_rng(&rng);
    }
    if (t % 5 == 0) len = 2 + df_rng(&rng) % (n - 2); /* cut short */
    stoke__decode_req r;
    r.w = 1 + (uint32_t)(df_rng(&rng) % 203);
    r.h = 1 + (uint32_t)(df_rng(&rng) % 151);
    r.x = (uint32_t)(df_rng(&rng) % (203 - r.w + 1));
    r.y = (uint32_t)(df_rng(&rng) % (151 - r.h + 1));
    r.out_w = r.w / 2 ? r.w / 2 : 1;
    r.out_h = r.h / 2 ? r.h / 2 : 1;
    r.keep_alpha = false;
    stoke__image img;
    int rc = stoke__decode(d, bad, len, &r, &img, err, sizeof err);
    if (rc == 0) {
      ok++;
    } else {
      if (err[0] == '\0') fail_msg("try %d: rc %d without a message", t, rc);
      failed++;
    }
  }
  assert_true(ok > 0 && failed > 0);
  free(bad);
  free(j);
  stoke__decoder_destroy(d);
}

/* ---- the rewrite --------------------------------------------------------- */

static void test_rewrite_lossless(void **state) {
  (void)state;
  static const struct {
    df_jpeg_opts o;
    uint32_t w, h;
  } cases[] = {
      {{JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 0}, 333, 257},
      {{JCS_RGB, JCS_UNKNOWN, 85, 0, 2, 1, 0}, 517, 389},
      {{JCS_RGB, JCS_UNKNOWN, 95, 0, 1, 1, 0}, 333, 257}, /* 42 MCUs: 2 */
      {{JCS_RGB, JCS_UNKNOWN, 95, 0, 1, 1, 0}, 517, 100}, /* 65 MCUs: 1 */
      {{JCS_RGB, JCS_UNKNOWN, 90, 1, 2, 2, 0}, 640, 480}, /* progressive */
      {{JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 7}, 333, 257}, /* 112 px wide */
      {{JCS_GRAYSCALE, JCS_UNKNOWN, 90, 0, 0, 0, 0}, 200, 300},
      {{JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 0}, 1, 1},
  };
  stoke__decoder *d = NULL;
  assert_int_equal(stoke__decoder_create(NULL, &d), 0);
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    uint8_t *j, *out;
    size_t n, on;
    make(&cases[k].o, cases[k].w, cases[k].h, 20 + k, &j, &n);
    int rc = stoke__jpeg_transcode(d, j, n, &out, &on, err, sizeof err);
    if (rc != 0 || !out) fail_msg("case %zu: rc %d out %p: %s", k, rc,
                                  (void *)out, err);
    stoke__jpeg_rst L;
    if (!stoke__jpeg_rst_parse(out, on, &L) || L.seg_w > 16)
      fail_msg("case %zu: the rewrite cannot be cut", k);
    uint32_t aw, ah, bw, bh;
    uint8_t *a = df_ref_jpeg(j, n, 1, &aw, &ah);
    uint8_t *b = df_ref_jpeg(out, on, 1, &bw, &bh);
    assert_int_equal(aw, bw);
    assert_int_equal(ah, bh);
    assert_memory_equal(a, b, (size_t)aw * ah * 3);
    /* Rewriting the rewrite keeps it as it is. */
    uint8_t *again;
    size_t an;
    assert_int_equal(stoke__jpeg_transcode(d, out, on, &again, &an, err,
                                           sizeof err), 0);
    assert_null(again);
    free(a);
    free(b);
    stoke__free(NULL, out);
    free(j);
  }
  stoke__decoder_destroy(d);
}

/* CMYK is kept; broken files and PNGs are not rewritten; allocation
** failures come back as STOKE_ENOMEM with nothing leaked, and the decoder
** still works after each. */
static void test_rewrite_refusals(void **state) {
  (void)state;
  df_counting cnt = {0};
  stoke_allocator a = {df_counting_alloc, df_counting_free, &cnt};
  stoke__decoder_opts opts;
  stoke__decoder_opts_init(&opts);
  opts.alloc = &a;
  stoke__decoder *d = NULL;
  assert_int_equal(stoke__decoder_create(&opts, &d), 0);
  uint8_t *j, *out;
  size_t n, on;

  df_jpeg_opts cmyk = {JCS_CMYK, JCS_UNKNOWN, 90, 0, 0, 0, 0};
  uint8_t *px = malloc(64 * 48 * 4);
  memset(px, 0x5a, 64 * 48 * 4);
  df_jpeg(px, 64, 48, &cmyk, &j, &n);
  free(px);
  assert_int_equal(stoke__jpeg_transcode(d, j, n, &out, &on, err, sizeof err),
                   0);
  assert_null(out);
  free(j);

  assert_int_equal(stoke__jpeg_transcode(d, (const uint8_t *)"\x89PNG\r\n\x1a\n",
                                         8, &out, &on, err, sizeof err),
                   0);
  assert_null(out);

  df_jpeg_opts rgb = {JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 0};
  make(&rgb, 160, 120, 5, &j, &n);
  /* Truncated: the coefficients run out. */
  assert_int_equal(stoke__jpeg_transcode(d, j, n / 2, &out, &on, err,
                                         sizeof err), STOKE_EFORMAT);
  assert_null(out);
  if (!strstr(err, "premature end")) fail_msg("message: %s", err);
  /* Every allocation the rewrite makes, failed in turn. */
  size_t failures = 0;
  for (size_t at = 1;; at++) {
    cnt.fail_at = cnt.n_calls + at;
    int rc = stoke__jpeg_transcode(d, j, n, &out, &on, err, sizeof err);
    cnt.fail_at = 0;
    if (rc == 0) {
      assert_non_null(out);
      stoke__free(&a, out);
      break;
    }
    assert_int_equal(rc, STOKE_ENOMEM);
    assert_null(out);
    failures++;
  }
  assert_true(failures >= 2); /* the context and the output buffer */
  stoke__decode_req r = {.x = 10, .y = 10, .w = 100, .h = 80,
                         .out_w = 100, .out_h = 80};
  stoke__image img;
  assert_int_equal(stoke__decode(d, j, n, &r, &img, err, sizeof err), 0);
  free(j);
  stoke__decoder_destroy(d);
  assert_int_equal(cnt.live, 0);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_verdicts),
      cmocka_unit_test(test_cut_is_a_jpeg),
      cmocka_unit_test(test_damaged_markers),
      cmocka_unit_test(test_fuzz_cuts),
      cmocka_unit_test(test_rewrite_lossless),
      cmocka_unit_test(test_rewrite_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
