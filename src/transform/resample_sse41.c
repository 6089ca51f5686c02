/* resample_sse41.c — SSE4.1 kernels of the resampler (resample_simd.h says
** what each computes and why the sums are exact).  Compiled for SSE4.1 by
** function attribute only: resample.c calls them after checking the CPU. */
#include "transform/resample_simd.h"

#if STOKE__TF_X86
#include <immintrin.h>

#define SSE41 __attribute__((target("sse4.1")))

void stoke__tf_hcoef_table(const int *xb, const int32_t *kx, int ksx, int W,
                           int kp, void *tab) {
  uint32_t *t0 = tab;
  for (int xx = 0; xx < W; xx++) {
    const int32_t *k = kx + (size_t)xx * ksx;
    int n = xb[2 * xx + 1];
    for (int q = 0; q < kp; q++) {
      int32_t k0 = 2 * q < n ? k[2 * q] : 0;
      int32_t k1 = 2 * q + 1 < n ? k[2 * q + 1] : 0;
      uint32_t hi = stoke__tf_kh2(k0, k1), lo = stoke__tf_kl2(k0, k1);
      uint32_t *t = t0 + ((size_t)xx * kp + q) * 8;
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
  __m128i sh = _mm_setzero_si128();
  __m128i sl = _mm_set1_epi32(1 << (PRECISION_BITS - 1)); /* the rounding */
  for (int q = 0; q < kp; q++) {
    __m128i v = _mm_shuffle_epi8(
        _mm_loadl_epi64((const __m128i *)(const void *)(p + 6 * q)), shuf);
    sh = _mm_add_epi32(sh, _mm_madd_epi16(v, _mm_loadu_si128(t + 2 * q)));
    sl = _mm_add_epi32(sl, _mm_madd_epi16(v, _mm_loadu_si128(t + 2 * q + 1)));
  }
  __m128i s = _mm_add_epi32(_mm_slli_epi32(sh, KSPLIT), sl);
  return _mm_srai_epi32(s, PRECISION_BITS);
}

/* Pixels [x0, x1), four at a time, then one at a time. */
SSE41 static inline __attribute__((always_inline)) void
hrow_body(const uint8_t *in, uint8_t *out, const int *xb, const __m128i *tab,
          int kp, int x0, int x1) {
  const __m128i shuf = _mm_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5,
                                     -1, -1, -1, -1, -1);
  const __m128i pack = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14,
                                     -1, -1, -1, -1);
  int xx = x0;
  for (; xx + 4 <= x1; xx += 4) {
    const __m128i *t = tab + (size_t)xx * kp * 2;
    __m128i a = hpixel(in + 3 * (size_t)xb[2 * xx], t, kp, shuf);
    __m128i b = hpixel(in + 3 * (size_t)xb[2 * xx + 2], t + 2 * kp, kp, shuf);
    __m128i c = hpixel(in + 3 * (size_t)xb[2 * xx + 4], t + 4 * kp, kp, shuf);
    __m128i d = hpixel(in + 3 * (size_t)xb[2 * xx + 6], t + 6 * kp, kp, shuf);
    __m128i r = _mm_packus_epi16(_mm_packs_epi32(a, b), _mm_packs_epi32(c, d));
    _mm_storeu_si128((__m128i *)(void *)(out + 3 * (size_t)xx),
                     _mm_shuffle_epi8(r, pack));
  }
  for (; xx < x1; xx++) {
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
SSE41 void stoke__tf_hrow_sse41(const uint8_t *in, uint8_t *out,
                                const int *xb, const void *tab, int kp,
                                int x0, int x1) {
  const __m128i *t = tab;
  if (kp == 2)
    hrow_body(in, out, xb, t, 2, x0, x1);
  else if (kp == 3)
    hrow_body(in, out, xb, t, 3, x0, x1);
  else
    hrow_body(in, out, xb, t, kp, x0, x1);
}

SSE41 void stoke__tf_vrow_sse41(const uint8_t *in, size_t stride,
                                size_t row_bytes, const int32_t *k, int n,
                                uint8_t *row) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i bias = _mm_set1_epi32(1 << (PRECISION_BITS - 1));
  enum { MAXP = (MAX_SIMD_TAPS + 1) / 2 };
  __m128i kh[MAXP], kl[MAXP];
  const uint8_t *ra[MAXP], *rb[MAXP];
  uint32_t khv[MAXP], klv[MAXP];
  int np = stoke__tf_vpairs(in, stride, k, n, ra, rb, khv, klv);
  for (int q = 0; q < np; q++) {
    kh[q] = _mm_set1_epi32((int)khv[q]);
    kl[q] = _mm_set1_epi32((int)klv[q]);
  }
  for (size_t i = 0; i < row_bytes; i += 16) {
    __m128i h0 = zero, h1 = zero, h2 = zero, h3 = zero;
    __m128i l0 = bias, l1 = bias, l2 = bias, l3 = bias;
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
#define FIN(h, l) \
  _mm_srai_epi32(_mm_add_epi32(_mm_slli_epi32(h, KSPLIT), l), PRECISION_BITS)
    __m128i r = _mm_packus_epi16(_mm_packs_epi32(FIN(h0, l0), FIN(h1, l1)),
                                 _mm_packs_epi32(FIN(h2, l2), FIN(h3, l3)));
#undef FIN
    _mm_storeu_si128((__m128i *)(void *)(row + i), r);
  }
}

const int8_t stoke__tf_planes_masks[2][9][16] = {
    {{0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13},
     {1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14},
     {2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15}},
    {{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 15, 12, 9, 6, 3, 0},
     {-1, -1, -1, -1, -1, 14, 11, 8, 5, 2, -1, -1, -1, -1, -1, -1},
     {13, 10, 7, 4, 1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 13, 10, 7, 4, 1},
     {-1, -1, -1, -1, -1, 15, 12, 9, 6, 3, 0, -1, -1, -1, -1, -1},
     {14, 11, 8, 5, 2, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
     {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 14, 11, 8, 5, 2},
     {-1, -1, -1, -1, -1, -1, 13, 10, 7, 4, 1, -1, -1, -1, -1, -1},
     {15, 12, 9, 6, 3, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}}};

SSE41 size_t stoke__tf_planes_sse41(const uint8_t *row, size_t W, bool flip,
                                    uint8_t *o0, uint8_t *o1, uint8_t *o2) {
  __m128i mk[9];
  for (int i = 0; i < 9; i++)
    mk[i] = _mm_loadu_si128(
        (const __m128i *)(const void *)stoke__tf_planes_masks[flip][i]);
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

SSE41 size_t stoke__tf_mirror_sse41(const uint8_t *row, size_t W,
                                    uint8_t *out) {
  /* Output vector v of a block of 16 reversed pixels, from input vector s
  ** (a, b, c: bytes 0..15, 16..31, 32..47): m[v][s]; -1 is zero. */
  static const int8_t m[3][3][16] = {
      {{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
       {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 14},
       {13, 14, 15, 10, 11, 12, 7, 8, 9, 4, 5, 6, 1, 2, 3, -1}},
      {{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 15, -1},
       {15, -1, 11, 12, 13, 8, 9, 10, 5, 6, 7, 2, 3, 4, -1, 0},
       {-1, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}},
      {{-1, 12, 13, 14, 9, 10, 11, 6, 7, 8, 3, 4, 5, 0, 1, 2},
       {1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},
       {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}}};
  __m128i mk[3][3];
  for (int v = 0; v < 3; v++)
    for (int i = 0; i < 3; i++)
      mk[v][i] = _mm_loadu_si128((const __m128i *)(const void *)m[v][i]);
  size_t n = W / 16 * 16;
  for (size_t x = 0; x < n; x += 16) {
    const __m128i *p = (const __m128i *)(const void *)(row + 3 * x);
    __m128i in[3] = {_mm_loadu_si128(p), _mm_loadu_si128(p + 1),
                     _mm_loadu_si128(p + 2)};
    __m128i *o = (__m128i *)(void *)(out + 3 * (W - 16 - x));
    for (int v = 0; v < 3; v++) {
      __m128i r = _mm_or_si128(
          _mm_or_si128(_mm_shuffle_epi8(in[0], mk[v][0]),
                       _mm_shuffle_epi8(in[1], mk[v][1])),
          _mm_shuffle_epi8(in[2], mk[v][2]));
      _mm_storeu_si128(o + v, r);
    }
  }
  return n;
}
#else
typedef int stoke__tf_no_sse41; /* ISO C wants a declaration */
#endif /* STOKE__TF_X86 */
