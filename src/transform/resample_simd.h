/* resample_simd.h — what resample.c shares with its vector kernels
** (resample_sse41.c, resample_avx2.c): the fixed-point format, the layout of
** the horizontal coefficient table and the kernels themselves.  Internal to
** src/transform/.
**
** Every kernel computes the same integer sums as resample.c's scalar passes,
** so it writes the same bytes.  A 22-bit coefficient k (0 <= k <= 2^22: the
** triangle filter's weights are never negative) is split as
** k = kh * 2^11 + kl with kh and kl in [0, 2^11], both int16, so that
** pmaddwd (16 x 16 -> 32-bit products, adjacent pairs summed) computes
** sum(p * kh) and sum(p * kl) two taps at a time;
** sum(p * k) = (sum(p * kh) << 11) + sum(p * kl), exactly, with no
** intermediate over 2^31 for up to MAX_SIMD_TAPS taps.  Then srai 22 and
** the saturating packs are clip8.  Taps are taken in pairs; an odd last tap
** pairs with a zero coefficient (its pixel is read, never used). */
#ifndef STOKE_RESAMPLE_SIMD_H
#define STOKE_RESAMPLE_SIMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PRECISION_BITS (32 - 8 - 2)
#define KSPLIT 11
#define MAX_SIMD_TAPS 256 /* lo sums: 255 * 2047 * taps < 2^31 */
/* Bytes the vector passes may read and write past the end of an
** intermediate row or of the output row (a 32-byte vector's worth). */
#define ROW_SLACK 32

#if (defined(__x86_64__) || defined(__i386__)) && \
    (defined(__GNUC__) || defined(__clang__))
#define STOKE__TF_X86 1
#else
#define STOKE__TF_X86 0
#endif

/* The high (kh) and low (kl) parts of two taps' coefficients k0, k1 as the
** 32-bit lane that pmaddwd pairs with the two taps' pixels (k0's part in
** the low half). */
static inline uint32_t stoke__tf_kh2(int32_t k0, int32_t k1) {
  return (uint32_t)(k0 >> KSPLIT) | (uint32_t)(k1 >> KSPLIT) << 16;
}
static inline uint32_t stoke__tf_kl2(int32_t k0, int32_t k1) {
  const int32_t m = (1 << KSPLIT) - 1;
  return (uint32_t)(k0 & m) | (uint32_t)(k1 & m) << 16;
}

/* The vertical pass's taps in pairs: for pair q, the two input rows ra[q],
** rb[q] and their split coefficients kh[q], kl[q] (an odd last tap pairs
** with itself and a zero weight).  Returns the number of pairs. */
static inline int stoke__tf_vpairs(const uint8_t *in, size_t stride,
                                   const int32_t *k, int n,
                                   const uint8_t **ra, const uint8_t **rb,
                                   uint32_t *kh, uint32_t *kl) {
  int np = (n + 1) / 2;
  for (int q = 0; q < np; q++) {
    int y = 2 * q;
    int32_t k0 = k[y], k1 = y + 1 < n ? k[y + 1] : 0;
    ra[q] = in + (size_t)y * stride;
    rb[q] = y + 1 < n ? ra[q] + stride : ra[q];
    kh[q] = stoke__tf_kh2(k0, k1);
    kl[q] = stoke__tf_kl2(k0, k1);
  }
  return np;
}

#if STOKE__TF_X86
/* ---- SSE4.1 (resample_sse41.c) ------------------------------------------
**
** The horizontal coefficients as one table both instruction sets read: for
** output pixel xx and tap pair q, two 16-byte vectors at
** tab + (xx * kp + q) * 32 bytes: (kh[2q], kh[2q+1]) x 4, then the kl's
** likewise; pairs past the pixel's taps are zero.  kp is the most tap pairs
** any output pixel has; the table is W * kp * 32 bytes. */
void stoke__tf_hcoef_table(const int *xb, const int32_t *kx, int ksx, int W,
                           int kp, void *tab);

/* Horizontal pass of output pixels [x0, x1) of one row, `in` pointing at
** the clamp window's first pixel in that row.  Each pixel reads
** 3 * xb[2 * xx] + 6 * kp + 2 bytes from `in`: the caller keeps that inside
** the row.  Writes up to 4 bytes past 3 * x1. */
void stoke__tf_hrow_sse41(const uint8_t *in, uint8_t *out, const int *xb,
                          const void *tab, int kp, int x0, int x1);

/* Vertical pass of one output row: the n rows from `in` (`stride` bytes
** apart) weighted by k, row_bytes bytes, 16 at a time.  Reads and writes up
** to 15 bytes past row_bytes. */
void stoke__tf_vrow_sse41(const uint8_t *in, size_t stride, size_t row_bytes,
                          const int32_t *k, int n, uint8_t *row);

/* De-interleave one RGB row into three planes, mirrored if flip: pixels
** [0, W / 16 * 16) by vectors; returns how many were done. */
size_t stoke__tf_planes_sse41(const uint8_t *row, size_t W, bool flip,
                              uint8_t *o0, uint8_t *o1, uint8_t *o2);
/* Its pshufb masks, [flip][3 * channel + v]: channel's bytes of 16 pixels
** from their v-th 16 bytes (or mirrored), -1 where another v has them. */
extern const int8_t stoke__tf_planes_masks[2][9][16];

/* One RGB row with its pixels in reverse order, into out (3 * W bytes, not
** row): input pixels [0, W / 16 * 16) by vectors (to the end of out);
** returns how many were done. */
size_t stoke__tf_mirror_sse41(const uint8_t *row, size_t W, uint8_t *out);

/* ---- AVX2 (resample_avx2.c); callers check avx2, fma and f16c -----------
**
** The horizontal pass of two rows at once (in0 -> out0, in1 -> out1),
** output pixels [0, n): one pixel of each row per vector, so each
** coefficient vector is loaded once for both.  Each pixel reads
** 3 * xb[2 * xx] + stoke__tf_hreach_avx2(kp) bytes from in0 and in1.
** Writes up to 4 bytes past 3 * n in each row. */
void stoke__tf_hrows_avx2(const uint8_t *in0, const uint8_t *in1,
                          uint8_t *out0, uint8_t *out1, const int *xb,
                          const void *tab, int kp, int n);
size_t stoke__tf_hreach_avx2(int kp);

/* stoke__tf_planes_sse41, pixels [0, W / 32 * 32). */
size_t stoke__tf_planes_avx2(const uint8_t *row, size_t W, bool flip,
                             uint8_t *o0, uint8_t *o1, uint8_t *o2);

/* stoke__tf_vrow_sse41, 32 bytes at a time: reads and writes up to 31
** bytes past row_bytes. */
void stoke__tf_vrow_avx2(const uint8_t *in, size_t stride, size_t row_bytes,
                         const int32_t *k, int n, uint8_t *row);

/* The float value of each of n bytes (n a multiple of 8) into out (any
** alignment): ToTensor then Normalize, (v / 255 - mean) / std, each
** division done as a multiply by the reciprocal and two fused
** multiply-adds that correct it to the correctly rounded quotient
** (Markstein), so that, where the theorem's conditions hold, the result is
** the float division's to the bit; resample.c checks that on all 256
** inputs before using it.  norm is {mean, std, 1 / std}; {0, 1, 1} is
** ToTensor alone. */
void stoke__tf_norm_f32_avx2(const uint8_t *in, size_t n, const float *norm,
                             void *out);
/* The same, converted to IEEE binary16 (round to nearest even). */
void stoke__tf_norm_f16_avx2(const uint8_t *in, size_t n, const float *norm,
                             void *out);
#endif /* STOKE__TF_X86 */

#endif /* STOKE_RESAMPLE_SIMD_H */
