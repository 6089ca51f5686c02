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
** 256-entry table per channel for the float dtypes (x/255, normalize, f16).
**
** The passes here are the portable reference; resample_sse41.c and
** resample_avx2.c do the same integer sums with vectors, so every
** instruction set gives the same bytes.  Which one runs is the scratch's
** choice (stoke__tf_scratch.isa, the best the CPU has unless a test asks
** for less). */
#include "transform/transform.h"

#include <math.h>
#include <string.h>

#include "transform/resample_simd.h"

#if STOKE__TF_X86
#include <cpuid.h>
#include <xmmintrin.h> /* _mm_sfence: SSE, in every x86-64 */
#endif

/* Scratch buffers (stoke__tf_scratch.buf). */
enum { BUF_W, BUF_KX, BUF_KY, BUF_TMP, BUF_ROW, BUF_COUNT };

void stoke__tf_scratch_init(stoke__tf_scratch *s, const stoke_allocator *a) {
  memset(s, 0, sizeof *s);
  s->alloc = a;
  s->isa = stoke__tf_isa_best();
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

/* Pillow's bilinear filter: 1 - |x| inside (-1, 1), else 0.  Written
** without branches (their signs alternate from tap to tap, which costs
** mispredictions); the values are the same: 1 - |x| <= 0 exactly when
** |x| >= 1, and then the result is +0 as Pillow's. */
static double triangle(double x) {
  double t = 1.0 - fabs(x);
  return t > 0.0 ? t : 0.0;
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
    /* Over all ksize taps, those from xmax on weighing +0 (which leaves
    ** ww as it was and divides to +0): loops of a fixed count, whose exits
    ** the branch predictor gets right. */
    double ww = 0.0;
    for (int x = 0; x < ksize; x++) {
      w[x] = x < xmax ? triangle((x + xmin - center + 0.5) * ss) : 0.0;
      ww += w[x];
    }
    int32_t *k = kk + (size_t)xx * ksize;
    for (int x = 0; x < ksize; x++) {
      double v = ww != 0.0 ? w[x] / ww : 0.0; /* ww is 0 when all are */
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

/* ---- instruction sets --------------------------------------------------- */

int stoke__tf_isa_best(void) {
#if STOKE__TF_X86
  /* F16C by cpuid: not every compiler's __builtin_cpu_supports knows it. */
  unsigned eax, ebx, ecx, edx;
  bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c)
    return STOKE__TF_ISA_AVX2;
  if (__builtin_cpu_supports("sse4.1")) return STOKE__TF_ISA_SSE41;
#endif
  return STOKE__TF_ISA_SCALAR;
}

/* The kernels this call uses: the scratch's, or scalar when a kernel has
** more taps than the vector sums allow. */
static int isa_for(const stoke__tf_scratch *s, int ksx, int ksy) {
  if (ksx > MAX_SIMD_TAPS || ksy > MAX_SIMD_TAPS) return STOKE__TF_ISA_SCALAR;
  return s->isa;
}

/* ---- output -------------------------------------------------------------- */

void stoke__tf_norm_table(const stoke__tf_spec *spec, float lut[3][256],
                          uint16_t lut16[3][256]) {
  for (int c = 0; c < 3; c++)
    for (int v = 0; v < 256; v++) {
      /* The same float32 operations as ToTensor (div 255) then Normalize
      ** (sub mean, div std), so the values match torchvision's exactly. */
      float x = (float)v / 255.0f;
      if (spec->normalize) x = (x - spec->mean[c]) / spec->std[c];
      lut[c][v] = x;
      lut16[c][v] = stoke__tf_f16(x);
    }
}

static void build_lut(const stoke__tf_spec *spec, stoke__tf_scratch *s) {
  float key[7] = {spec->mean[0], spec->mean[1], spec->mean[2], spec->std[0],
                  spec->std[1],  spec->std[2],  spec->normalize ? 1.f : 0.f};
  if (s->lut_ok && memcmp(key, s->lut_key, sizeof key) == 0) return;
  stoke__tf_norm_table(spec, s->lut, s->lut16);
  for (int c = 0; c < 3; c++) {
    /* For the vector kernels: ToTensor alone is mean 0, std 1 (x - 0 and
    ** x / 1 are x); 1 / std rounded once, as Markstein's division needs. */
    float mean = spec->normalize ? spec->mean[c] : 0.0f;
    float sd = spec->normalize ? spec->std[c] : 1.0f;
    s->norm[c][0] = mean;
    s->norm[c][1] = sd;
    s->norm[c][2] = 1.0f / sd;
  }
  s->norm_exact = -1;
  memcpy(s->lut_key, key, sizeof key);
  s->lut_ok = true;
}

/* One RGB row into three planes, mirrored if flip. */
static void split_planes(const uint8_t *row, size_t W, bool flip, int isa,
                         uint8_t *o0, uint8_t *o1, uint8_t *o2) {
  size_t x = 0;
#if STOKE__TF_X86
  /* The vectors take whole blocks from the front of the row, whose
  ** mirrored places are at the back of the planes; the rest goes on. */
  if (isa >= STOKE__TF_ISA_AVX2)
    x = stoke__tf_planes_avx2(row, W, flip, o0, o1, o2);
  if (isa >= STOKE__TF_ISA_SSE41 && W - x >= 16) {
    size_t at = flip ? 0 : x, n = W - x;
    x += stoke__tf_planes_sse41(row + 3 * x, n, flip, o0 + at, o1 + at,
                                o2 + at);
  }
#else
  (void)isa;
#endif
  for (; x < W; x++) {
    size_t at = flip ? W - 1 - x : x;
    o0[at] = row[3 * x];
    o1[at] = row[3 * x + 1];
    o2[at] = row[3 * x + 2];
  }
}

/* One RGB row as it is, or with its pixels in reverse order. */
static void mirror_or_copy(const uint8_t *row, size_t W, bool flip, int isa,
                           uint8_t *out) {
  if (!flip) {
    memcpy(out, row, 3 * W);
    return;
  }
  size_t x = 0;
#if STOKE__TF_X86
  if (isa >= STOKE__TF_ISA_SSE41) x = stoke__tf_mirror_sse41(row, W, out);
#else
  (void)isa;
#endif
  for (; x < W; x++) memcpy(out + 3 * (W - 1 - x), row + 3 * x, 3);
}

#if STOKE__TF_X86
/* Whether the AVX2 float kernels give the table's values, to the bit, for
** the dtype (STOKE_F32 or STOKE_F16): checked once per table on all 256
** inputs of each channel; where they do not, the table is used. */
static bool norm_avx2_exact(stoke__tf_scratch *s, int dtype) {
  if (s->norm_exact < 0) {
    uint8_t v[256];
    float f[256];
    uint16_t h[256];
    for (int i = 0; i < 256; i++) v[i] = (uint8_t)i;
    s->norm_exact = 3; /* bit 0: f32, bit 1: f16 */
    for (int c = 0; c < 3; c++) {
      stoke__tf_norm_f32_avx2(v, 256, s->norm[c], f);
      stoke__tf_norm_f16_avx2(v, 256, s->norm[c], h);
      if (memcmp(f, s->lut[c], sizeof f) != 0) s->norm_exact &= ~1;
      if (memcmp(h, s->lut16[c], sizeof h) != 0) s->norm_exact &= ~2;
    }
  }
  return s->norm_exact & (dtype == STOKE_F32 ? 1 : 2);
}

/* Float CHW by the AVX2 kernels: the row split into planes (mirrored
** there), then each plane's values computed 8 at a time and stored as
** whole vectors; the last W % 8 from the table.  False when the kernels
** are not exact for this table: the caller writes it. */
static bool emit_float_chw_avx2(const stoke__tf_spec *spec,
                                stoke__tf_scratch *s, bool flip, int y,
                                const uint8_t *row, uint8_t *planes,
                                void *dst) {
  if (!norm_avx2_exact(s, spec->dtype)) return false;
  size_t W = (size_t)spec->out_w, plane = W * (size_t)spec->out_h;
  size_t es = stoke_dtype_size(spec->dtype), n8 = W / 8 * 8;
  split_planes(row, W, flip, STOKE__TF_ISA_AVX2, planes, planes + W,
               planes + 2 * W);
  for (int c = 0; c < 3; c++) {
    const uint8_t *in = planes + c * W;
    char *o = (char *)dst + (c * plane + (size_t)y * W) * es;
    if (spec->dtype == STOKE_F32) {
      stoke__tf_norm_f32_avx2(in, n8, s->norm[c], o);
      for (size_t x = n8; x < W; x++) memcpy(o + 4 * x, &s->lut[c][in[x]], 4);
    } else {
      stoke__tf_norm_f16_avx2(in, n8, s->norm[c], o);
      for (size_t x = n8; x < W; x++)
        memcpy(o + 2 * x, &s->lut16[c][in[x]], 2);
    }
  }
  return true;
}
#endif /* STOKE__TF_X86 */

/* Write output row y (u8 RGB, unflipped) into dst.  The layout and dtype
** branches sit outside the pixel loops; stores go through memcpy because a
** slot need not be aligned (it compiles to plain stores).  `planes` is
** 3 * out_w bytes of scratch. */
static void emit_row(const stoke__tf_spec *spec, stoke__tf_scratch *s,
                     int isa, bool flip, int y, const uint8_t *row,
                     uint8_t *planes, void *dst) {
  size_t W = (size_t)spec->out_w, plane = W * (size_t)spec->out_h;
  size_t es = stoke_dtype_size(spec->dtype);
  char *out = dst;
  if (spec->dtype == STOKE_U8) {
    uint8_t *o = (uint8_t *)out + (size_t)y * W * (spec->layout ==
                                                   STOKE__TF_HWC ? 3 : 1);
    if (spec->layout == STOKE__TF_HWC)
      mirror_or_copy(row, W, flip, isa, o);
    else /* three planes at once: one pass over the row */
      split_planes(row, W, flip, isa, o, o + plane, o + 2 * plane);
    return;
  }
#if STOKE__TF_X86
  if (spec->layout == STOKE__TF_CHW && isa >= STOKE__TF_ISA_AVX2 &&
      emit_float_chw_avx2(spec, s, flip, y, row, planes, dst))
    return;
#endif
  /* Through the tables.  Element (x, c) of this row goes to
  ** base + x * xstep + c * cstep; flipping starts at the last column and
  ** steps backwards. */
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
  for (int c = 0; c < 3; c++) {
    char *o = base + c * cstep;
    const uint8_t *in = row + c;
    if (spec->dtype == STOKE_F16) {
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

/* ---- passes -------------------------------------------------------------- */

/* One apply call's resampling: its coefficients and its intermediate. */
typedef struct pass {
  int isa;                /* STOKE__TF_ISA_*, after isa_for */
  int W, H;               /* output size */
  const int *xb, *yb;     /* coeffs' bounds per output pixel / row */
  const int32_t *kx, *ky; /* and weights, ksx / ksy per pixel / row */
  int ksx, ksy;
  const void *htab;       /* the vector coefficient table (kp pairs) */
  int kp;
  int n_sse, n_avx;       /* output pixels whose vector loads stay in a row */
  uint8_t *tmp;           /* the intermediate: n_rows rows, stride apart */
  size_t n_rows, row_bytes, stride;
  int y_first;            /* the window row of tmp's first row */
} pass;

/* Horizontal pass, scalar: pixels [x0, W) of one row. */
static void hrow_scalar(const pass *p, const uint8_t *in, uint8_t *out,
                        int x0) {
  const int32_t bias = 1 << (PRECISION_BITS - 1);
  for (int xx = x0; xx < p->W; xx++) {
    const uint8_t *q = in + 3 * (size_t)p->xb[2 * xx];
    const int32_t *k = p->kx + (size_t)xx * p->ksx;
    int n = p->xb[2 * xx + 1];
    int32_t s0 = bias, s1 = bias, s2 = bias;
    for (int x = 0; x < n; x++) {
      s0 += q[3 * x] * k[x];
      s1 += q[3 * x + 1] * k[x];
      s2 += q[3 * x + 2] * k[x];
    }
    out[3 * xx] = clip8(s0);
    out[3 * xx + 1] = clip8(s1);
    out[3 * xx + 2] = clip8(s2);
  }
}

/* Pixels [x0, W) of one row: by SSE4.1 vectors as far as their loads stay
** in the row, then scalar.  Then the bytes between the row's end and the
** next row, which the vector passes write and read a little of, are
** zeroed, so that every byte read is defined. */
static void hrow_rest(const pass *p, const uint8_t *in, uint8_t *out,
                      int x0) {
#if STOKE__TF_X86
  if (p->isa >= STOKE__TF_ISA_SSE41 && x0 < p->n_sse) {
    stoke__tf_hrow_sse41(in, out, p->xb, p->htab, p->kp, x0, p->n_sse);
    x0 = p->n_sse;
  }
#endif
  hrow_scalar(p, in, out, x0);
  memset(out + p->row_bytes, 0, p->stride - p->row_bytes);
}

/* Horizontal pass: window rows y_first.. into tmp, AVX2 two rows at a
** time.  `in` is the window's top-left pixel. */
static void hpass(const pass *p, const uint8_t *in, size_t in_stride) {
  size_t r = 0;
  const uint8_t *src = in + (size_t)p->y_first * in_stride;
#if STOKE__TF_X86
  if (p->isa >= STOKE__TF_ISA_AVX2)
    for (; r + 2 <= p->n_rows; r += 2) {
      const uint8_t *in0 = src + r * in_stride, *in1 = in0 + in_stride;
      uint8_t *out0 = p->tmp + r * p->stride, *out1 = out0 + p->stride;
      stoke__tf_hrows_avx2(in0, in1, out0, out1, p->xb, p->htab, p->kp,
                           p->n_avx);
      hrow_rest(p, in0, out0, p->n_avx);
      hrow_rest(p, in1, out1, p->n_avx);
    }
#endif
  for (; r < p->n_rows; r++)
    hrow_rest(p, src + r * in_stride, p->tmp + r * p->stride, 0);
}

/* Vertical pass of output row yy into row (row_bytes, plus ROW_SLACK that
** the vectors may write); acc is row_bytes int32 for the scalar sums.
** Integer sums are exact, so summing row by row (cache-friendly) gives
** Pillow's results although Pillow sums column by column. */
static void vrow(const pass *p, int yy, int32_t *acc, uint8_t *row) {
  const int32_t *k = p->ky + (size_t)yy * p->ksy;
  int n = p->yb[2 * yy + 1];
  const uint8_t *in = p->tmp + (size_t)(p->yb[2 * yy] - p->y_first) * p->stride;
#if STOKE__TF_X86
  if (p->isa >= STOKE__TF_ISA_AVX2) {
    stoke__tf_vrow_avx2(in, p->stride, p->row_bytes, k, n, row);
    return;
  }
  if (p->isa >= STOKE__TF_ISA_SSE41) {
    stoke__tf_vrow_sse41(in, p->stride, p->row_bytes, k, n, row);
    return;
  }
#endif
  const int32_t bias = 1 << (PRECISION_BITS - 1);
  for (size_t i = 0; i < p->row_bytes; i++) acc[i] = bias;
  for (int y = 0; y < n; y++) {
    const uint8_t *src = in + (size_t)y * p->stride;
    int32_t ky_y = k[y];
    for (size_t i = 0; i < p->row_bytes; i++) acc[i] += src[i] * ky_y;
  }
  for (size_t i = 0; i < p->row_bytes; i++) row[i] = clip8(acc[i]);
}

#if STOKE__TF_X86
/* How many pixels of a row a vector pass may do: a pixel's loads reach
** `reach` bytes past 3 * xb, and must stay within the `avail` bytes of the
** region's row from the window's left edge (bounds are monotonic: a prefix
** qualifies). */
static int fast_prefix(const pass *p, size_t reach, size_t avail) {
  int n = 0;
  while (n < p->W && 3 * (size_t)p->xb[2 * n] + reach <= avail) n++;
  return n;
}

#endif /* STOKE__TF_X86 */

/* The vector passes' coefficient table and reach. */
static int vector_setup(pass *p, stoke__tf_scratch *s, size_t avail) {
#if STOKE__TF_X86
  if (p->isa < STOKE__TF_ISA_SSE41) return 0;
  int kp = 1;
  for (int xx = 0; xx < p->W; xx++)
    kp = STOKE__MAX(kp, (p->xb[2 * xx + 1] + 1) / 2);
  void *tab = grow(s, BUF_W, (size_t)p->W * (size_t)kp * 32);
  if (!tab)
    return stoke__set_tls_error(STOKE_ENOMEM, "transform: out of memory "
                                "for coefficients (%dx%d)", p->H, p->W);
  stoke__tf_hcoef_table(p->xb, p->kx, p->ksx, p->W, kp, tab);
  p->htab = tab;
  p->kp = kp;
  p->n_sse = fast_prefix(p, 6 * (size_t)kp + 2, avail);
  if (p->isa >= STOKE__TF_ISA_AVX2)
    p->n_avx = fast_prefix(p, stoke__tf_hreach_avx2(kp), avail);
#else
  (void)p, (void)s, (void)avail;
#endif
  return 0;
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

  pass p = {.W = plan->out_w, .H = plan->out_h};
  int *xb, *yb;
  int32_t *kx, *ky;
  p.ksx = coeffs(s, BUF_KX, cx1 - cx0, bx - cx0, bx + bw - cx0, p.W, &xb, &kx);
  p.ksy = p.ksx ? coeffs(s, BUF_KY, cy1 - cy0, by - cy0, by + bh - cy0, p.H,
                         &yb, &ky)
                : 0;
  if (!p.ksx || !p.ksy)
    return stoke__set_tls_error(STOKE_ENOMEM, "transform: out of memory for "
                                "coefficients (%dx%d)", p.H, p.W);
  p.xb = xb, p.yb = yb, p.kx = kx, p.ky = ky;
  p.isa = isa_for(s, p.ksx, p.ksy);
  /* Rows of the window the vertical pass reads: [y_first, y_last). */
  int H = p.H;
  int y_first = yb[0];
  int y_last = yb[2 * (H - 1)] + yb[2 * (H - 1) + 1];
  for (int i = 1; i < H; i++) /* bounds are monotonic; be safe anyway */
    y_first = STOKE__MIN(y_first, yb[2 * i]);
  p.y_first = y_first;
  p.n_rows = (size_t)(y_last - y_first);
  p.row_bytes = (size_t)p.W * 3;
  /* Each intermediate row is followed by at least ROW_SLACK bytes, which
  ** the vector passes write and read past its end; 32-byte multiples. */
  p.stride = (p.row_bytes + ROW_SLACK + 31) / 32 * 32;
  size_t tmp_bytes;
  if (!stoke__mul_ok(p.n_rows ? p.n_rows : 1, p.stride, &tmp_bytes))
    return stoke__set_tls_error(STOKE_ENOMEM, "transform: box too large");
  p.tmp = grow(s, BUF_TMP, tmp_bytes);
  /* The output row's buffer: the scalar sums, the row (and slack), then
  ** three planes for the float writer. */
  size_t acc_bytes = p.row_bytes * sizeof(int32_t);
  uint8_t *rowbuf = grow(s, BUF_ROW, acc_bytes + p.row_bytes + ROW_SLACK +
                                         p.row_bytes);
  if (!p.tmp || !rowbuf)
    return stoke__set_tls_error(STOKE_ENOMEM, "transform: out of memory for "
                                "the intermediate image (%zu bytes)",
                                tmp_bytes);
  /* The accumulators first: the allocation's alignment suits them. */
  int32_t *acc = (int32_t *)(void *)rowbuf;
  uint8_t *row = rowbuf + acc_bytes;
  uint8_t *planes = row + p.row_bytes + ROW_SLACK;
  build_lut(spec, s);
  int rc = vector_setup(&p, s, 3 * (size_t)(img->w - cx0));
  if (rc) return rc;

  hpass(&p, img->px + (size_t)cy0 * img->stride + 3 * (size_t)cx0,
        img->stride);
  for (int yy = 0; yy < H; yy++) {
    vrow(&p, yy, acc, row);
    emit_row(spec, s, p.isa, plan->flip, yy, row, planes, dst);
  }
#if STOKE__TF_X86
  /* Order the streaming stores of the float writers before whatever
  ** publishes the sample to another thread. */
  if (p.isa >= STOKE__TF_ISA_SSE41) _mm_sfence();
#endif
  return 0;
}
