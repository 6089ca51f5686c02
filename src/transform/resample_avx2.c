/* resample_avx2.c — AVX2 kernels of the resampler (resample_simd.h says
** what each computes and why the sums are exact).  Compiled for AVX2, FMA
** and F16C by function attribute only: resample.c calls them after checking
** the CPU for all three. */
#include "transform/resample_simd.h"

#if STOKE__TF_X86
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define INLINE inline __attribute__((always_inline))

/* ---- horizontal pass ----------------------------------------------------
**
** As the SSE4.1 pass, a vector holds one output pixel (R, G, B, 0 as int32
** sums), but with two rows in the two 128-bit lanes: the pixel's
** coefficients are the same in every row, so one broadcast load serves
** both, and the shuffles, which work within lanes, need no change.  A
** 16-byte load covers two tap pairs (12 bytes), so a pixel with kp pairs
** costs ceil(kp / 2) loads per row instead of kp. */

size_t stoke__tf_hreach_avx2(int kp) {
  /* Pairs q, q + 1 load 16 bytes at 6q; an odd last pair loads at 6q - 6
  ** (its taps are the upper half): either way the last load ends at
  ** 6 kp + 4, or 16 when there is one pair. */
  return kp <= 1 ? 16 : 6 * (size_t)kp + 4;
}

/* 16 bytes at p0 in the low lane, 16 at p1 in the high one. */
AVX2 static INLINE __m256i load2(const uint8_t *p0, const uint8_t *p1) {
  __m128i a = _mm_loadu_si128((const __m128i *)(const void *)p0);
  __m128i b = _mm_loadu_si128((const __m128i *)(const void *)p1);
  return _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
}

/* Add one tap pair's products: v holds the pair's pixels as int16
** (R0 R1 G0 G1 B0 B1 0 0 per lane), t its table entry (kh vector, then kl). */
AVX2 static INLINE void madd_pair(__m256i v, const __m128i *t, __m256i *sh,
                                  __m256i *sl) {
  __m256i kh = _mm256_broadcastsi128_si256(_mm_loadu_si128(t));
  __m256i kl = _mm256_broadcastsi128_si256(_mm_loadu_si128(t + 1));
  *sh = _mm256_add_epi32(*sh, _mm256_madd_epi16(v, kh));
  *sl = _mm256_add_epi32(*sl, _mm256_madd_epi16(v, kl));
}

/* One output pixel of two rows, its taps at p0 and p1, before the packs. */
AVX2 static INLINE __m256i hpixel2(const uint8_t *p0, const uint8_t *p1,
                                   const __m128i *t, int kp) {
  /* The first and the second tap pair of 12 bytes, as int16 channel pairs. */
  const __m256i s0 = _mm256_setr_epi8(
      0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1, 0, -1, 3, -1,
      1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
  const __m256i s1 = _mm256_setr_epi8(
      6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1, 6, -1, 9,
      -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
  __m256i sh = _mm256_setzero_si256();
  __m256i sl = _mm256_set1_epi32(1 << (PRECISION_BITS - 1)); /* rounding */
  int q = 0;
  for (; q + 2 <= kp; q += 2) {
    __m256i v = load2(p0 + 6 * q, p1 + 6 * q);
    madd_pair(_mm256_shuffle_epi8(v, s0), t + 2 * q, &sh, &sl);
    madd_pair(_mm256_shuffle_epi8(v, s1), t + 2 * q + 2, &sh, &sl);
  }
  if (q < kp) { /* an odd last pair */
    if (q == 0)
      madd_pair(_mm256_shuffle_epi8(load2(p0, p1), s0), t, &sh, &sl);
    else
      madd_pair(_mm256_shuffle_epi8(load2(p0 + 6 * q - 6, p1 + 6 * q - 6),
                                    s1),
                t + 2 * q, &sh, &sl);
  }
  __m256i s = _mm256_add_epi32(_mm256_slli_epi32(sh, KSPLIT), sl);
  return _mm256_srai_epi32(s, PRECISION_BITS);
}

AVX2 static INLINE void hrows_body(const uint8_t *in0, const uint8_t *in1,
                                   uint8_t *out0, uint8_t *out1,
                                   const int *xb, const __m128i *tab, int kp,
                                   int n) {
  /* R G B of four pixels to the front of each lane (the zeros behind are
  ** the 4 bytes a store may write past the pixels). */
  const __m256i pack = _mm256_setr_epi8(
      0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1, 2, 4, 5,
      6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  int xx = 0;
  for (; xx + 4 <= n; xx += 4) {
    const __m128i *t = tab + (size_t)xx * kp * 2;
    size_t o[4];
    for (int i = 0; i < 4; i++) o[i] = 3 * (size_t)xb[2 * (xx + i)];
    __m256i a = hpixel2(in0 + o[0], in1 + o[0], t, kp);
    __m256i b = hpixel2(in0 + o[1], in1 + o[1], t + 2 * kp, kp);
    __m256i c = hpixel2(in0 + o[2], in1 + o[2], t + 4 * kp, kp);
    __m256i d = hpixel2(in0 + o[3], in1 + o[3], t + 6 * kp, kp);
    /* The packs work within lanes: each lane stays one row. */
    __m256i r = _mm256_packus_epi16(_mm256_packs_epi32(a, b),
                                    _mm256_packs_epi32(c, d));
    r = _mm256_shuffle_epi8(r, pack);
    _mm_storeu_si128((__m128i *)(void *)(out0 + 3 * (size_t)xx),
                     _mm256_castsi256_si128(r));
    _mm_storeu_si128((__m128i *)(void *)(out1 + 3 * (size_t)xx),
                     _mm256_extracti128_si256(r, 1));
  }
  for (; xx < n; xx++) {
    size_t o = 3 * (size_t)xb[2 * xx];
    __m256i a = hpixel2(in0 + o, in1 + o, tab + (size_t)xx * kp * 2, kp);
    __m256i r = _mm256_packus_epi16(_mm256_packs_epi32(a, a), a);
    uint32_t v0 = (uint32_t)_mm256_extract_epi32(r, 0);
    uint32_t v1 = (uint32_t)_mm256_extract_epi32(r, 4);
    uint8_t *p = out0 + 3 * (size_t)xx, *p1 = out1 + 3 * (size_t)xx;
    p[0] = (uint8_t)v0;
    p[1] = (uint8_t)(v0 >> 8);
    p[2] = (uint8_t)(v0 >> 16);
    p1[0] = (uint8_t)v1;
    p1[1] = (uint8_t)(v1 >> 8);
    p1[2] = (uint8_t)(v1 >> 16);
  }
}

/* The usual pair counts as constants, so that the tap loops unroll (1:
** enlarging, 2: a shrink by up to 2, 3: by up to 3). */
AVX2 void stoke__tf_hrows_avx2(const uint8_t *in0, const uint8_t *in1,
                               uint8_t *out0, uint8_t *out1, const int *xb,
                               const void *tab, int kp, int n) {
  const __m128i *t = tab;
  if (kp == 1)
    hrows_body(in0, in1, out0, out1, xb, t, 1, n);
  else if (kp == 2)
    hrows_body(in0, in1, out0, out1, xb, t, 2, n);
  else if (kp == 3)
    hrows_body(in0, in1, out0, out1, xb, t, 3, n);
  else
    hrows_body(in0, in1, out0, out1, xb, t, kp, n);
}

/* ---- vertical pass ------------------------------------------------------
**
** The SSE4.1 pass, 32 bytes at a time.  Unpacks and packs both work within
** 128-bit lanes, so the bytes come out in order without a permute. */

/* Half `hi` (bytes 8..15 of each lane, else 0..7) of 32 output bytes:
** the sums of each of its two quarters, finished and packed to int16. */
AVX2 static INLINE __m256i vrow_half(const uint8_t *const *ra,
                                     const uint8_t *const *rb,
                                     const __m256i *kh, const __m256i *kl,
                                     int np, size_t i, bool hi) {
  const __m256i zero = _mm256_setzero_si256();
  __m256i h0 = zero, h1 = zero;
  __m256i l0 = _mm256_set1_epi32(1 << (PRECISION_BITS - 1)), l1 = l0;
  for (int q = 0; q < np; q++) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(ra[q] + i));
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(rb[q] + i));
    __m256i ab = hi ? _mm256_unpackhi_epi8(a, b) : _mm256_unpacklo_epi8(a, b);
    __m256i v0 = _mm256_unpacklo_epi8(ab, zero);
    __m256i v1 = _mm256_unpackhi_epi8(ab, zero);
    h0 = _mm256_add_epi32(h0, _mm256_madd_epi16(v0, kh[q]));
    h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(v1, kh[q]));
    l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(v0, kl[q]));
    l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(v1, kl[q]));
  }
  __m256i r0 = _mm256_add_epi32(_mm256_slli_epi32(h0, KSPLIT), l0);
  __m256i r1 = _mm256_add_epi32(_mm256_slli_epi32(h1, KSPLIT), l1);
  return _mm256_packs_epi32(_mm256_srai_epi32(r0, PRECISION_BITS),
                            _mm256_srai_epi32(r1, PRECISION_BITS));
}

/* In halves, so that the sums of each fit in registers. */
AVX2 static INLINE void vrow_body(const uint8_t *const *ra,
                                  const uint8_t *const *rb, const __m256i *kh,
                                  const __m256i *kl, int np, size_t row_bytes,
                                  uint8_t *row) {
  for (size_t i = 0; i < row_bytes; i += 32) {
    __m256i lo = vrow_half(ra, rb, kh, kl, np, i, false);
    __m256i hi = vrow_half(ra, rb, kh, kl, np, i, true);
    _mm256_storeu_si256((__m256i *)(void *)(row + i),
                        _mm256_packus_epi16(lo, hi));
  }
}

AVX2 void stoke__tf_vrow_avx2(const uint8_t *in, size_t stride,
                              size_t row_bytes, const int32_t *k, int n,
                              uint8_t *row) {
  enum { MAXP = (MAX_SIMD_TAPS + 1) / 2 };
  __m256i kh[MAXP], kl[MAXP];
  const uint8_t *ra[MAXP], *rb[MAXP];
  uint32_t khv[MAXP], klv[MAXP];
  int np = stoke__tf_vpairs(in, stride, k, n, ra, rb, khv, klv);
  for (int q = 0; q < np; q++) {
    kh[q] = _mm256_set1_epi32((int)khv[q]);
    kl[q] = _mm256_set1_epi32((int)klv[q]);
  }
  /* Constant pair counts, as in the horizontal pass. */
  if (np == 1)
    vrow_body(ra, rb, kh, kl, 1, row_bytes, row);
  else if (np == 2)
    vrow_body(ra, rb, kh, kl, 2, row_bytes, row);
  else if (np == 3)
    vrow_body(ra, rb, kh, kl, 3, row_bytes, row);
  else
    vrow_body(ra, rb, kh, kl, np, row_bytes, row);
}

/* ---- planes -------------------------------------------------------------
**
** As the SSE4.1 splitter, 32 pixels at a time: the 96 bytes are loaded so
** that the low lanes hold pixels 0..15 and the high lanes 16..31 in the
** SSE4.1 layout, so that its masks serve both lanes; mirrored, the lanes
** then swap. */

AVX2 size_t stoke__tf_planes_avx2(const uint8_t *row, size_t W, bool flip,
                                  uint8_t *o0, uint8_t *o1, uint8_t *o2) {
  __m256i mk[9];
  for (int i = 0; i < 9; i++)
    mk[i] = _mm256_broadcastsi128_si256(
        _mm_loadu_si128((const __m128i *)(const void *)
                            stoke__tf_planes_masks[flip][i]));
  uint8_t *o[3] = {o0, o1, o2};
  size_t n = W / 32 * 32;
  for (size_t x = 0; x < n; x += 32) {
    const uint8_t *p = row + 3 * x;
    __m256i v[3];
    for (int i = 0; i < 3; i++) v[i] = load2(p + 16 * i, p + 48 + 16 * i);
    size_t at = flip ? W - 32 - x : x;
    for (int ch = 0; ch < 3; ch++) {
      __m256i r = _mm256_or_si256(
          _mm256_or_si256(_mm256_shuffle_epi8(v[0], mk[3 * ch]),
                          _mm256_shuffle_epi8(v[1], mk[3 * ch + 1])),
          _mm256_shuffle_epi8(v[2], mk[3 * ch + 2]));
      if (flip) r = _mm256_permute4x64_epi64(r, 0x4e);
      _mm256_storeu_si256((__m256i *)(void *)(o[ch] + at), r);
    }
  }
  return n;
}

/* ---- float output -------------------------------------------------------
**
** ToTensor and Normalize are two float divisions, (v / 255 - mean) / std;
** a table per channel gives them exactly but costs a load per element, and
** vdivps is slow.  Markstein's division instead: with r = RN(1 / b),
** q = RN(a * r) is within an ulp or so of a / b, e = a - q * b is exact in
** one fused multiply-add, and RN(q + e * r) is the correctly rounded
** quotient, which is what the division gives (the theorem has conditions:
** resample.c compares all 256 inputs with the table before using this). */

AVX2 static INLINE __m256 div_rn(__m256 a, __m256 b, __m256 r) {
  __m256 q = _mm256_mul_ps(a, r);
  __m256 e = _mm256_fnmadd_ps(q, b, a);
  return _mm256_fmadd_ps(e, r, q);
}

typedef struct norm_consts {
  __m256 c255, r255, mean, sd, rsd;
} norm_consts;

AVX2 static INLINE norm_consts norm_load(const float *norm) {
  norm_consts c = {_mm256_set1_ps(255.0f), _mm256_set1_ps(1.0f / 255.0f),
                   _mm256_set1_ps(norm[0]), _mm256_set1_ps(norm[1]),
                   _mm256_set1_ps(norm[2])};
  return c;
}

/* The values of the 8 bytes at p, as the table has them. */
AVX2 static INLINE __m256 norm8(const uint8_t *p, const norm_consts *c) {
  __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)p);
  __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
  __m256 x = div_rn(v, c->c255, c->r255);
  return div_rn(_mm256_sub_ps(x, c->mean), c->sd, c->rsd);
}

AVX2 void stoke__tf_norm_f32_avx2(const uint8_t *in, size_t n,
                                  const float *norm, void *out) {
  norm_consts c = norm_load(norm);
  float *o = out;
#ifndef STOKE_NO_NT
  /* Streaming stores when aligned (every row of a 224-wide slot is): a
  ** float batch is far larger than the caches and is next read by the
  ** device copy, so writing around the cache saves the read-for-ownership
  ** of every line and leaves the decoder's working set in place.  The
  ** caller fences before the sample is published (stoke__tf_fence). */
  if (((uintptr_t)o & 31) == 0) {
    for (size_t i = 0; i < n; i += 8)
      _mm256_stream_ps(o + i, norm8(in + i, &c));
    return;
  }
#endif
  for (size_t i = 0; i < n; i += 8) _mm256_storeu_ps(o + i, norm8(in + i, &c));
}

AVX2 void stoke__tf_norm_f16_avx2(const uint8_t *in, size_t n,
                                  const float *norm, void *out) {
  norm_consts c = norm_load(norm);
  uint16_t *o = out;
  for (size_t i = 0; i < n; i += 8)
    _mm_storeu_si128((__m128i *)(void *)(o + i),
                     _mm256_cvtps_ph(norm8(in + i, &c),
                                     _MM_FROUND_TO_NEAREST_INT));
}
#else
typedef int stoke__tf_no_avx2; /* ISO C wants a declaration */
#endif /* STOKE__TF_X86 */
