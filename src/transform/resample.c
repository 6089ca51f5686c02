/* resample.c — the box of a plan, resampled to the output size and written
** into the batch slot.
**
** The resampler is Pillow's (libImaging/Resample.c, BILINEAR), so that stoke
** reproduces the pixels of torchvision-on-PIL pipelines rather than merely
** resembling them:
**   - per output pixel of each axis, a triangle filter centred on the
**     output pixel's centre in source coordinates, its support widened by
**     the shrink factor (antialiasing), clamped to the pixels it may read
**     and normalized to sum 1;
**   - coefficients in 22-bit fixed point (32 - 8 bits of value - 2 bits of
**     headroom), rounded half away from zero;
**   - horizontal pass over only the rows the vertical pass needs, into a u8
**     intermediate; then the vertical pass, rounding with a half bias.
** The clamp window is where stoke generalizes PIL: PIL clamps to the image
** it is given (the crop, for crop-then-resize); stoke clamps to the plan's
** clip window mapped into the decoded region, so a decoder may hand over a
** larger region, or one at 1/2..1/8 scale, and the box is still exact.
**
** Writing fuses the rest: the vertical pass produces one u8 output row,
** which is written in the slot's layout, mirrored if flipped, through a
** 256-entry table per channel for the float dtypes (x/255, normalize, f16). */
#include "transform/transform.h"

#include <math.h>
#include <string.h>

#define PRECISION_BITS (32 - 8 - 2)

/* Scratch buffers (stoke__tf_scratch.buf). */
enum { BUF_W, BUF_KX, BUF_KY, BUF_TMP, BUF_ROW, BUF_COUNT };

void stoke__tf_scratch_init(stoke__tf_scratch *s, const stoke_allocator *a) {
  memset(s, 0, sizeof *s);
  s->alloc = a;
}

void stoke__tf_scratch_free(stoke__tf_scratch *s) {
  for (int i = 0; i < BUF_COUNT; i++) {
    stoke__free(s->alloc, s->buf[i]);
    s->buf[i] = NULL;
    s->cap[i] = 0;
  }
}

/* Buffer i with at least n bytes; contents are not kept. */
static void *grow(stoke__tf_scratch *s, int i, size_t n) {
  if (s->cap[i] >= n && s->buf[i]) return s->buf[i];
  void *p = stoke__alloc(s->alloc, n ? n : 1);
  if (!p) return NULL;
  stoke__free(s->alloc, s->buf[i]);
  s->buf[i] = p;
  s->cap[i] = n;
  return p;
}

/* ---- f16 ----------------------------------------------------------------- */

uint16_t stoke__tf_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;
  uint32_t e = ax >> 23;
  if (e == 0xff) /* inf stays inf; NaN stays NaN (quiet, payload's top) */
    return (uint16_t)(sign | 0x7c00u |
                      (ax & 0x7fffffu ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
  if (e >= 143) return (uint16_t)(sign | 0x7c00u); /* >= 2^16: inf */
  if (e < 102) return sign; /* < 2^-25: rounds to zero (2^-25 ties to 0) */
  if (e < 113) {
    /* Subnormal half: units of 2^-24.  value = m * 2^(e - 150), so units
    ** = m >> (126 - e), rounded to nearest even on the dropped bits. */
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    return (uint16_t)(sign | r); /* r may carry into the smallest normal */
  }
  uint32_t h = ((e - 112) << 10) | ((ax >> 13) & 0x3ffu);
  uint32_t rem = ax & 0x1fffu;
  /* A carry out of the mantissa bumps the exponent, up to inf: right. */
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

/* ---- coefficients -------------------------------------------------------- */

static double triangle(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

/* Pillow's precompute_coeffs + normalize_coeffs_8bpc for one axis: output
** pixel i reads bounds[2i + 1] pixels from bounds[2i] (both relative to the
** clamp window [0, in_size)) with weights k[i * ksize ...].  The box is
** [in0, in1) in window coordinates.  Returns ksize, or 0 when out of
** memory. */
static int coeffs(stoke__tf_scratch *s, int which, int in_size, double in0,
                  double in1, int out_size, int **bounds_out,
                  int32_t **k_out) {
  double scale = (in1 - in0) / out_size;
  double filterscale = scale < 1.0 ? 1.0 : scale;
  double support = 1.0 * filterscale; /* the triangle's support is 1 */
  /* A kernel never needs more taps than the window has pixels. */
  double taps = ceil(support) * 2 + 1;
  int ksize = taps > in_size + 2 ? in_size + 2 : (int)taps;
  size_t n_k, bytes;
  if (!stoke__mul_ok((size_t)out_size, (size_t)ksize, &n_k) ||
      !stoke__mul_ok(n_k + 2 * (size_t)out_size, sizeof(int32_t), &bytes))
    return 0;
  void *mem = grow(s, which, bytes);
  double *w = grow(s, BUF_W, (size_t)ksize * sizeof(double));
  if (!mem || !w) return 0;
  int *bounds = mem;
  int32_t *kk = (int32_t *)(bounds + 2 * (size_t)out_size);
  double ss = 1.0 / filterscale;
  for (int xx = 0; xx < out_size; xx++) {
    double center = in0 + (xx + 0.5) * scale;
    /* (int) truncates toward zero as in Pillow; negatives clamp to 0. */
    int xmin = (int)(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    double xmax_d = center + support + 0.5;
    int xmax = xmax_d > in_size ? in_size : (int)xmax_d;
    xmax -= xmin;
    if (xmax > ksize) xmax = ksize; /* only when weights there are 0 */
    if (xmax < 0) xmax = 0;
    double ww = 0.0;
    for (int x = 0; x < xmax; x++) {
      w[x] = triangle((x + xmin - center + 0.5) * ss);
      ww += w[x];
    }
    int32_t *k = kk + (size_t)xx * ksize;
    for (int x = 0; x < ksize; x++) {
      double v = x < xmax ? (ww != 0.0 ? w[x] / ww : w[x]) : 0.0;
      double f = v * (1 << PRECISION_BITS);
      k[x] = (int32_t)(f < 0 ? -0.5 + f : 0.5 + f);
    }
    bounds[2 * xx] = xmin;
    bounds[2 * xx + 1] = xmax;
  }
  *bounds_out = bounds;
  *k_out = kk;
  return ksize;
}

static inline uint8_t clip8(int32_t v) {
  if (v >= (1 << PRECISION_BITS << 8)) return 255;
  if (v <= 0) return 0;
  return (uint8_t)(v >> PRECISION_BITS);
}

/* ---- SSE4.1 kernels ------------------------------------------------------
**
** The same integer sums as the scalar passes, so the same bytes.  A 22-bit
** coefficient k (0 <= k <= 2^22) is split as k = kh * 2^11 + kl with kh and
** kl in [0, 2^11], both int16, so that pmaddwd (16 x 16 -> 32-bit products,
** adjacent pairs summed) computes sum(p * kh) and sum(p * kl) two taps at a
** time; sum(p * k) = (sum(p * kh) << 11) + sum(p * kl), exactly, with no
** intermediate over 2^31 for up to MAX_SIMD_TAPS taps.  Then srai 22 and
** the saturating packs are clip8.  Taps are taken in pairs; an odd last tap
** pairs with a zero coefficient (its pixel is read, never used). */
#if (defined(__x86_64__) || defined(__i386__)) && \
    (defined(__GNUC__) || defined(__clang__))
#define STOKE__TF_SSE41 1
#include <immintrin.h>
#define SSE41 __attribute__((target("sse4.1")))
#else
#define STOKE__TF_SSE41 0
#endif

#define KSPLIT 11
#define MAX_SIMD_TAPS 256 /* lo sums: 255 * 2047 * taps < 2^31 */
#define ROW_SLACK 16      /* bytes after tmp rows and the output row */

static bool force_scalar;

/* Test hook (tests/unit/test_transform.c): true runs the portable scalar
** passes even where SSE4.1 is available.  Not thread-safe: set it before
** applying. */
void stoke__tf_force_scalar(bool on);
void stoke__tf_force_scalar(bool on) { force_scalar = on; }

static bool use_sse41(void) {
#if STOKE__TF_SSE41
  return !force_scalar && __builtin_cpu_supports("sse4.1");
#else
  return false;
#endif
}

#if STOKE__TF_SSE41
static inline uint32_t pair16(int32_t a, int32_t b) {
  return (uint32_t)(uint16_t)a | (uint32_t)(uint16_t)b << 16;
}

/* The horizontal coefficients as broadcast vectors: for output pixel xx,
** pair q: tab[(xx * kp + q) * 2] = (kh[2q], kh[2q+1]) x 4 and the next one
** the kl's; pairs past the pixel's taps are zero. */
static void hcoef_table(const int *xb, const int32_t *kx, int ksx, int W,
                        int kp, uint32_t *tab) {
  for (int xx = 0; xx < W; xx++) {
    const int32_t *k = kx + (size_t)xx * ksx;
    int n = xb[2 * xx + 1];
    for (int q = 0; q < kp; q++) {
      int32_t k0 = 2 * q < n ? k[2 * q] : 0;
      int32_t k1 = 2 * q + 1 < n ? k[2 * q + 1] : 0;
      uint32_t hi = pair16(k0 >> KSPLIT, k1 >> KSPLIT);
      uint32_t lo = pair16(k0 & ((1 << KSPLIT) - 1), k1 & ((1 << KSPLIT) - 1));
      uint32_t *t = tab + ((size_t)xx * kp + q) * 8;
      for (int i = 0; i < 4; i++) {
        t[i] = hi;
        t[4 + i] = lo;
      }
    }
  }
}

/* One output pixel's 3 channels (lane 3 is 0), before clip8 (<< 22). */
SSE41 static inline __m128i hpixel(const uint8_t *p, const __m128i *t, int kp,
                                  __m128i shuf) {
  __m128i sh = _mm_setzero_si128(), sl = _mm_setzero_si128();
  for (int q = 0; q < kp; q++) {
    __m128i v = _mm_shuffle_epi8(
        _mm_loadl_epi64((const __m128i *)(const void *)(p + 6 * q)), shuf);
    sh = _mm_add_epi32(sh, _mm_madd_epi16(v, _mm_loadu_si128(t + 2 * q)));
    sl = _mm_add_epi32(sl, _mm_madd_epi16(v, _mm_loadu_si128(t + 2 * q + 1)));
  }
  __m128i bias = _mm_set1_epi32(1 << (PRECISION_BITS - 1));
  __m128i s = _mm_add_epi32(_mm_slli_epi32(sh, KSPLIT), _mm_add_epi32(sl, bias));
  return _mm_srai_epi32(s, PRECISION_BITS);
}

/* Horizontal pass of one row: pixels [0, n_fast) by vectors, four at a
** time; n_fast is such that their reads (8 bytes at 3 * xb + 6q) stay
** inside the row's bytes.  The caller does the rest.  Writes up to 4 bytes
** past 3 * n_fast (the row slack). */
SSE41 static inline __attribute__((always_inline)) void
hrow_body(const uint8_t *in, uint8_t *out, const int *xb, const __m128i *tab,
          int kp, int n_fast) {
  const __m128i shuf = _mm_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5,
                                     -1, -1, -1, -1, -1);
  const __m128i pack = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14,
                                     -1, -1, -1, -1);
  int xx = 0;
  for (; xx + 4 <= n_fast; xx += 4) {
    const __m128i *t = tab + (size_t)xx * kp * 2;
    __m128i a = hpixel(in + 3 * (size_t)xb[2 * xx], t, kp, shuf);
    __m128i b = hpixel(in + 3 * (size_t)xb[2 * xx + 2], t + 2 * kp, kp, shuf);
    __m128i c = hpixel(in + 3 * (size_t)xb[2 * xx + 4], t + 4 * kp, kp, shuf);
    __m128i d = hpixel(in + 3 * (size_t)xb[2 * xx + 6], t + 6 * kp, kp, shuf);
    __m128i r = _mm_packus_epi16(_mm_packs_epi32(a, b), _mm_packs_epi32(c, d));
    _mm_storeu_si128((__m128i *)(void *)(out + 3 * (size_t)xx),
                     _mm_shuffle_epi8(r, pack));
  }
  for (; xx < n_fast; xx++) {
    __m128i a = hpixel(in + 3 * (size_t)xb[2 * xx], tab + (size_t)xx * kp * 2,
                       kp, shuf);
    uint32_t v = (uint32_t)_mm_cvtsi128_si32(
        _mm_packus_epi16(_mm_packs_epi32(a, a), a));
    out[3 * xx] = (uint8_t)v;
    out[3 * xx + 1] = (uint8_t)(v >> 8);
    out[3 * xx + 2] = (uint8_t)(v >> 16);
  }
}

/* With the usual pair counts as constants, so that the tap loops unroll
** (2: enlarging or a mild shrink; 3: a shrink by up to 2). */
SSE41 static void hrow_sse41(const uint8_t *in, uint8_t *out, const int *xb,
                             const __m128i *tab, int kp, int n_fast) {
  if (kp == 2)
    hrow_body(in, out, xb, tab, 2, n_fast);
  else if (kp == 3)
    hrow_body(in, out, xb, tab, 3, n_fast);
  else
    hrow_body(in, out, xb, tab, kp, n_fast);
}

/* Vertical pass of one output row: n rows of tmp (row_bytes apart, from
** in) weighted by k, 16 bytes at a time, into row.  Reads and writes up to
** 15 bytes past row_bytes (the slack). */
SSE41 static void vrow_sse41(const uint8_t *in, size_t row_bytes,
                             const int32_t *k, int n, uint8_t *row) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i bias = _mm_set1_epi32(1 << (PRECISION_BITS - 1));
  /* Per pair of taps: the two rows and the split coefficients (an odd
  ** last tap pairs with itself and a zero weight). */
  enum { MAXP = (MAX_SIMD_TAPS + 1) / 2 };
  __m128i kh[MAXP], kl[MAXP];
  const uint8_t *ra[MAXP], *rb[MAXP];
  int np = (n + 1) / 2;
  for (int q = 0; q < np; q++) {
    int y = 2 * q;
    int32_t k0 = k[y], k1 = y + 1 < n ? k[y + 1] : 0;
    ra[q] = in + (size_t)y * row_bytes;
    rb[q] = y + 1 < n ? ra[q] + row_bytes : ra[q];
    kh[q] = _mm_set1_epi32((int)pair16(k0 >> KSPLIT, k1 >> KSPLIT));
    kl[q] = _mm_set1_epi32((int)pair16(k0 & ((1 << KSPLIT) - 1),
                                       k1 & ((1 << KSPLIT) - 1)));
  }
  for (size_t i = 0; i < row_bytes; i += 16) {
    __m128i h0 = zero, h1 = zero, h2 = zero, h3 = zero;
    __m128i l0 = zero, l1 = zero, l2 = zero, l3 = zero;
    for (int q = 0; q < np; q++) {
      __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(ra[q] + i));
      __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(rb[q] + i));
      __m128i ablo = _mm_unpacklo_epi8(a, b), abhi = _mm_unpackhi_epi8(a, b);
      __m128i v0 = _mm_cvtepu8_epi16(ablo), v1 = _mm_unpackhi_epi8(ablo, zero);
      __m128i v2 = _mm_cvtepu8_epi16(abhi), v3 = _mm_unpackhi_epi8(abhi, zero);
      h0 = _mm_add_epi32(h0, _mm_madd_epi16(v0, kh[q]));
      h1 = _mm_add_epi32(h1, _mm_madd_epi16(v1, kh[q]));
      h2 = _mm_add_epi32(h2, _mm_madd_epi16(v2, kh[q]));
      h3 = _mm_add_epi32(h3, _mm_madd_epi16(v3, kh[q]));
      l0 = _mm_add_epi32(l0, _mm_madd_epi16(v0, kl[q]));
      l1 = _mm_add_epi32(l1, _mm_madd_epi16(v1, kl[q]));
      l2 = _mm_add_epi32(l2, _mm_madd_epi16(v2, kl[q]));
      l3 = _mm_add_epi32(l3, _mm_madd_epi16(v3, kl[q]));
    }
#define FIN(h, l)                                                          \
  _mm_srai_epi32(_mm_add_epi32(_mm_slli_epi32(h, KSPLIT),                  \
                               _mm_add_epi32(l, bias)),                    \
                 PRECISION_BITS)
    __m128i r = _mm_packus_epi16(_mm_packs_epi32(FIN(h0, l0), FIN(h1, l1)),
                                 _mm_packs_epi32(FIN(h2, l2), FIN(h3, l3)));
#undef FIN
    _mm_storeu_si128((__m128i *)(void *)(row + i), r);
  }
}

/* De-interleave one RGB row into three planes, mirrored if flip: pixels
** [0, W / 16 * 16) by vectors; returns how many were done. */
SSE41 static size_t planes_sse41(const uint8_t *row, size_t W, bool flip,
                                 uint8_t *o0, uint8_t *o1, uint8_t *o2) {
  static const int8_t fwd[9][16] = {
      {0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
      {-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1},
      {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13},
      {1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
      {-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1},
      {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14},
      {2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
      {-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1},
      {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15}};
  static const int8_t rev[9][16] = {
      {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 15, 12, 9, 6, 3, 0},
      {-1, -1, -1, -1, -1, 14, 11, 8, 5, 2, -1, -1, -1, -1, -1, -1},
      {13, 10, 7, 4, 1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
      {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 13, 10, 7, 4, 1},
      {-1, -1, -1, -1, -1, 15, 12, 9, 6, 3, 0, -1, -1, -1, -1, -1},
      {14, 11, 8, 5, 2, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
      {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 14, 11, 8, 5, 2},
      {-1, -1, -1, -1, -1, -1, 13, 10, 7, 4, 1, -1, -1, -1, -1, -1},
      {15, 12, 9, 6, 3, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}};
  const int8_t(*m)[16] = flip ? rev : fwd;
  __m128i mk[9];
  for (int i = 0; i < 9; i++)
    mk[i] = _mm_loadu_si128((const __m128i *)(const void *)m[i]);
  uint8_t *o[3] = {o0, o1, o2};
  size_t n = W / 16 * 16;
  for (size_t x = 0; x < n; x += 16) {
    const __m128i *p = (const __m128i *)(const void *)(row + 3 * x);
    __m128i a = _mm_loadu_si128(p), b = _mm_loadu_si128(p + 1),
            c = _mm_loadu_si128(p + 2);
    size_t at = flip ? W - 16 - x : x;
    for (int ch = 0; ch < 3; ch++) {
      __m128i v = _mm_or_si128(
          _mm_or_si128(_mm_shuffle_epi8(a, mk[3 * ch]),
                       _mm_shuffle_epi8(b, mk[3 * ch + 1])),
          _mm_shuffle_epi8(c, mk[3 * ch + 2]));
      _mm_storeu_si128((__m128i *)(void *)(o[ch] + at), v);
    }
  }
  return n;
}
#endif /* STOKE__TF_SSE41 */

/* ---- output -------------------------------------------------------------- */

static void build_lut(const stoke__tf_spec *spec, stoke__tf_scratch *s) {
  float key[7] = {spec->mean[0], spec->mean[1], spec->mean[2], spec->std[0],
                  spec->std[1],  spec->std[2],  spec->normalize ? 1.f : 0.f};
  if (s->lut_ok && memcmp(key, s->lut_key, sizeof key) == 0) return;
  for (int c = 0; c < 3; c++)
    for (int v = 0; v < 256; v++) {
      /* The same float32 operations as ToTensor (div 255) then Normalize
      ** (sub mean, div std), so the values match torchvision's exactly. */
      float x = (float)v / 255.0f;
      if (spec->normalize) x = (x - spec->mean[c]) / spec->std[c];
      s->lut[c][v] = x;
      s->lut16[c][v] = stoke__tf_f16(x);
    }
  memcpy(s->lut_key, key, sizeof key);
  s->lut_ok = true;
}

/* Write output row y (u8 RGB, unflipped) into dst.  The layout and dtype
** branches sit outside the pixel loops; stores go through memcpy because a
** slot need not be aligned (it compiles to plain stores). */
static void emit_row(const stoke__tf_spec *spec, const stoke__tf_scratch *s,
                     bool flip, bool simd, int y, const uint8_t *row,
                     void *dst) {
  size_t W = (size_t)spec->out_w, plane = W * (size_t)spec->out_h;
  size_t es = stoke_dtype_size(spec->dtype);
  char *out = dst;
  /* Element (x, c) of this row goes to base + x * xstep + c * cstep;
  ** flipping starts at the last column and steps backwards. */
  ptrdiff_t xstep, cstep;
  char *base;
  if (spec->layout == STOKE__TF_HWC) {
    xstep = (ptrdiff_t)(3 * es);
    cstep = (ptrdiff_t)es;
    base = out + (size_t)y * W * 3 * es;
  } else {
    xstep = (ptrdiff_t)es;
    cstep = (ptrdiff_t)(plane * es);
    base = out + (size_t)y * W * es;
  }
  if (flip) {
    base += (ptrdiff_t)(W - 1) * xstep;
    xstep = -xstep;
  }
  if (spec->dtype == STOKE_U8 && spec->layout == STOKE__TF_HWC && !flip) {
    memcpy(base, row, 3 * W);
    return;
  }
  if (spec->dtype == STOKE_U8 && spec->layout == STOKE__TF_CHW) {
    /* Three planes at once: one pass over the row. */
    uint8_t *o0 = (uint8_t *)out + (size_t)y * W, *o1 = o0 + plane,
            *o2 = o1 + plane;
    size_t x = 0;
#if STOKE__TF_SSE41
    if (simd) x = planes_sse41(row, W, flip, o0, o1, o2);
#else
    (void)simd;
#endif
    for (; x < W; x++) {
      size_t at = flip ? W - 1 - x : x;
      o0[at] = row[3 * x];
      o1[at] = row[3 * x + 1];
      o2[at] = row[3 * x + 2];
    }
    return;
  }
  for (int c = 0; c < 3; c++) {
    char *o = base + c * cstep;
    const uint8_t *in = row + c;
    if (spec->dtype == STOKE_U8) {
      for (size_t x = 0; x < W; x++, o += xstep) *(uint8_t *)o = in[3 * x];
    } else if (spec->dtype == STOKE_F16) {
      const uint16_t *lut = s->lut16[c];
      for (size_t x = 0; x < W; x++, o += xstep)
        memcpy(o, &lut[in[3 * x]], 2);
    } else {
      const float *lut = s->lut[c];
      for (size_t x = 0; x < W; x++, o += xstep)
        memcpy(o, &lut[in[3 * x]], 4);
    }
  }
}


/* ---- apply --------------------------------------------------------------- */

int stoke__tf_apply(const stoke__tf_spec *spec, const stoke__tf_plan *plan,
                    const stoke__tf_image *img, stoke__tf_scratch *s,
                    void *dst) {
  if (plan->out_w != spec->out_w || plan->out_h != spec->out_h ||
      plan->out_w < 1 || plan->out_h < 1)
    return stoke__set_tls_error(STOKE_EINVAL, "transform: plan output %dx%d "
                                "differs from the spec's %dx%d", plan->out_h,
                                plan->out_w, spec->out_h, spec->out_w);
  if (!img->px || img->w < 1 || img->h < 1 || !(img->scale > 0) ||
      img->stride < 3 * (size_t)img->w)
    return stoke__set_tls_error(STOKE_EINVAL, "transform: bad image region "
                                "%dx%d", img->w, img->h);
  /* Everything below in region pixels. */
  double sc = img->scale;
  double bx = (plan->box_x - img->x0) / sc, by = (plan->box_y - img->y0) / sc;
  double bw = plan->box_w / sc, bh = plan->box_h / sc;
  const double eps = 1e-6;
  if (!(bw > 0 && bh > 0) || bx < -eps || by < -eps || bx + bw > img->w + eps ||
      by + bh > img->h + eps)
    return stoke__set_tls_error(STOKE_EINVAL, "transform: region %dx%d at "
                                "(%g, %g) scale %g does not cover the box "
                                "%gx%g at (%g, %g)", img->w, img->h, img->x0,
                                img->y0, sc, plan->box_w, plan->box_h,
                                plan->box_x, plan->box_y);
  /* The clip window, rounded outward into region pixels and cut to it. */
  int cx0 = (int)STOKE__MAX(0.0, floor((plan->clip_x0 - img->x0) / sc + eps));
  int cy0 = (int)STOKE__MAX(0.0, floor((plan->clip_y0 - img->y0) / sc + eps));
  int cx1 = (int)STOKE__MIN((double)img->w,
                            ceil((plan->clip_x1 - img->x0) / sc - eps));
  int cy1 = (int)STOKE__MIN((double)img->h,
                            ceil((plan->clip_y1 - img->y0) / sc - eps));
  if (cx1 <= cx0 || cy1 <= cy0)
    return stoke__set_tls_error(STOKE_EINVAL, "transform: empty clip window");

  int W = plan->out_w, H = plan->out_h;
  int *xb, *yb;
  int32_t *kx, *ky;
  int ksx = coeffs(s, BUF_KX, cx1 - cx0, bx - cx0, bx + bw - cx0, W, &xb, &kx);
  int ksy = ksx ? coeffs(s, BUF_KY, cy1 - cy0, by - cy0, by + bh - cy0, H,
                         &yb, &ky)
                : 0;
  if (!ksx || !ksy)
    return stoke__set_tls_error(STOKE_ENOMEM, "transform: out of memory for "
                                "coefficients (%dx%d)", H, W);
  /* Rows of the window the vertical pass reads: [y_first, y_last). */
  int y_first = yb[0];
  int y_last = yb[2 * (H - 1)] + yb[2 * (H - 1) + 1];
  for (int i = 1; i < H; i++) /* bounds are monotonic; be safe anyway */
    y_first = STOKE__MIN(y_first, yb[2 * i]);
  size_t row_bytes = (size_t)W * 3;
  size_t n_rows = (size_t)(y_last - y_first), tmp_bytes;
  if (!stoke__mul_ok(n_rows ? n_rows : 1, row_bytes, &tmp_bytes) ||
      tmp_bytes > SIZE_MAX - ROW_SLACK)
    return stoke__set_tls_error(STOKE_ENOMEM, "transform: box too large");
  /* ROW_SLACK: the vector passes read and write a little past the end. */
  uint8_t *tmp = grow(s, BUF_TMP, tmp_bytes + ROW_SLACK);
  uint8_t *rowbuf =
      grow(s, BUF_ROW, row_bytes * (1 + sizeof(int32_t)) + ROW_SLACK);
  if (!tmp || !rowbuf)
    return stoke__set_tls_error(STOKE_ENOMEM, "transform: out of memory for "
                                "the intermediate image (%zu bytes)",
                                tmp_bytes);
  memset(tmp + tmp_bytes, 0, ROW_SLACK);
  /* The accumulators first: the allocation's alignment suits them. */
  int32_t *acc = (int32_t *)(void *)rowbuf;
  uint8_t *row = rowbuf + row_bytes * sizeof(int32_t);
  build_lut(spec, s);

  bool simd = use_sse41() && ksx <= MAX_SIMD_TAPS && ksy <= MAX_SIMD_TAPS;
  const int32_t bias = 1 << (PRECISION_BITS - 1);
  /* Horizontal pass: window rows y_first..y_last, W columns out. */
  int n_fast = 0; /* output pixels the vector pass does, per row */
#if STOKE__TF_SSE41
  const __m128i *htab = NULL;
  int kp = 0;
  if (simd) {
    for (int xx = 0; xx < W; xx++)
      kp = STOKE__MAX(kp, (xb[2 * xx + 1] + 1) / 2);
    kp = STOKE__MAX(kp, 1);
    htab = grow(s, BUF_W, (size_t)W * (size_t)kp * 32);
    if (!htab)
      return stoke__set_tls_error(STOKE_ENOMEM, "transform: out of memory "
                                  "for coefficients (%dx%d)", H, W);
    hcoef_table(xb, kx, ksx, W, kp, (uint32_t *)(uintptr_t)htab);
    /* A pixel's loads end 3 * xb + 6 * kp + 2 bytes into the window row;
    ** pixels whose loads would pass the region's row go scalar (bounds
    ** are monotonic: a prefix is fast). */
    size_t avail = 3 * (size_t)(img->w - cx0);
    while (n_fast < W &&
           3 * (size_t)xb[2 * n_fast] + 6 * (size_t)kp + 2 <= avail)
      n_fast++;
  }
#endif
  for (size_t r = 0; r < n_rows; r++) {
    const uint8_t *in = img->px + (size_t)(cy0 + y_first + (int)r) *
                                      img->stride + 3 * (size_t)cx0;
    uint8_t *out = tmp + r * row_bytes;
#if STOKE__TF_SSE41
    if (simd) hrow_sse41(in, out, xb, htab, kp, n_fast);
#endif
    for (int xx = n_fast; xx < W; xx++) {
      const uint8_t *p = in + 3 * (size_t)xb[2 * xx];
      const int32_t *k = kx + (size_t)xx * ksx;
      int n = xb[2 * xx + 1];
      int32_t s0 = bias, s1 = bias, s2 = bias;
      for (int x = 0; x < n; x++) {
        s0 += p[3 * x] * k[x];
        s1 += p[3 * x + 1] * k[x];
        s2 += p[3 * x + 2] * k[x];
      }
      out[3 * xx] = clip8(s0);
      out[3 * xx + 1] = clip8(s1);
      out[3 * xx + 2] = clip8(s2);
    }
  }
  /* Vertical pass, one output row at a time, straight to the slot.
  ** Integer sums are exact, so summing row by row (cache-friendly) gives
  ** Pillow's results although Pillow sums column by column. */
  for (int yy = 0; yy < H; yy++) {
    const int32_t *k = ky + (size_t)yy * ksy;
    int ymin = yb[2 * yy] - y_first, n = yb[2 * yy + 1];
#if STOKE__TF_SSE41
    if (simd) {
      vrow_sse41(tmp + (size_t)ymin * row_bytes, row_bytes, k, n, row);
      emit_row(spec, s, plan->flip, true, yy, row, dst);
      continue;
    }
#endif
    for (size_t i = 0; i < row_bytes; i++) acc[i] = bias;
    for (int y = 0; y < n; y++) {
      const uint8_t *in = tmp + (size_t)(ymin + y) * row_bytes;
      int32_t ky_y = k[y];
      for (size_t i = 0; i < row_bytes; i++) acc[i] += in[i] * ky_y;
    }
    for (size_t i = 0; i < row_bytes; i++) row[i] = clip8(acc[i]);
    emit_row(spec, s, plan->flip, false, yy, row, dst);
  }
  return 0;
}
