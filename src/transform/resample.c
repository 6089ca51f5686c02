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
                     bool flip, int y, const uint8_t *row, void *dst) {
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
  if (!stoke__mul_ok(n_rows ? n_rows : 1, row_bytes, &tmp_bytes))
    return stoke__set_tls_error(STOKE_ENOMEM, "transform: box too large");
  uint8_t *tmp = grow(s, BUF_TMP, tmp_bytes);
  uint8_t *rowbuf = grow(s, BUF_ROW, row_bytes * (1 + sizeof(int32_t)));
  if (!tmp || !rowbuf)
    return stoke__set_tls_error(STOKE_ENOMEM, "transform: out of memory for "
                                "the intermediate image (%zu bytes)",
                                tmp_bytes);
  /* The accumulators first: the allocation's alignment suits them. */
  int32_t *acc = (int32_t *)(void *)rowbuf;
  uint8_t *row = rowbuf + row_bytes * sizeof(int32_t);
  build_lut(spec, s);

  /* Horizontal pass: window rows y_first..y_last, W columns out. */
  const int32_t bias = 1 << (PRECISION_BITS - 1);
  for (size_t r = 0; r < n_rows; r++) {
    const uint8_t *in = img->px + (size_t)(cy0 + y_first + (int)r) *
                                      img->stride + 3 * (size_t)cx0;
    uint8_t *out = tmp + r * row_bytes;
    for (int xx = 0; xx < W; xx++) {
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
    for (size_t i = 0; i < row_bytes; i++) acc[i] = bias;
    for (int y = 0; y < n; y++) {
      const uint8_t *in = tmp + (size_t)(ymin + y) * row_bytes;
      int32_t ky_y = k[y];
      for (size_t i = 0; i < row_bytes; i++) acc[i] += in[i] * ky_y;
    }
    for (size_t i = 0; i < row_bytes; i++) row[i] = clip8(acc[i]);
    emit_row(spec, s, plan->flip, yy, row, dst);
  }
  return 0;
}
