/* spec.c — the transform spec string, the output field, and per-sample
** planning (which box of the image becomes the output).
**
** Planning mirrors torchvision so that a model sees the same distribution of
** crops: RandomResizedCrop.get_params, Resize(int) + CenterCrop.  Python's
** round() rounds half to even, which nearbyint() does in the default
** rounding mode; Python's // on the non-negative values here is a plain
** integer division. */
#include "transform/transform.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIDE 65535 /* output side limit: keeps every size product sane */
#define TOKEN_CAP 256

/* ---- parsing ------------------------------------------------------------ */

typedef struct parser {
  const char *text;
  char tok[TOKEN_CAP]; /* the current token, NUL-terminated */
  size_t pos;          /* its byte offset in text */
} parser;

#define FAIL(P, ...) stoke__set_tls_error(STOKE_EINVAL, __VA_ARGS__)

static bool num_start(char c) {
  return isdigit((unsigned char)c) || c == '.' || c == '-' || c == '+';
}

/* A decimal number filling [s, s+n) exactly. */
static bool parse_double(const char *s, size_t n, double *out) {
  char buf[64];
  if (n == 0 || n >= sizeof buf) return false;
  memcpy(buf, s, n);
  buf[n] = '\0';
  if (!num_start(buf[0])) return false; /* no "inf", "nan", " 1" */
  char *end;
  double v = strtod(buf, &end);
  if (*end != '\0' || !isfinite(v)) return false;
  *out = v;
  return true;
}

/* "224" (square) or "HxW". */
static bool parse_size(const char *s, int *h, int *w, bool *zero) {
  long v[2] = {0, 0};
  int n = 0;
  *zero = false;
  for (;;) {
    if (!isdigit((unsigned char)*s)) return false;
    long x = 0;
    while (isdigit((unsigned char)*s)) {
      x = x * 10 + (*s++ - '0');
      if (x > MAX_SIDE) return false;
    }
    v[n++] = x;
    if (*s == '\0') break;
    if (*s != 'x' || n == 2) return false;
    s++;
  }
  if (n == 1) v[1] = v[0];
  if (v[0] == 0 || v[1] == 0) *zero = true;
  *h = (int)v[0];
  *w = (int)v[1];
  return true;
}

/* "lo-hi" with 0 < lo <= hi. */
static bool parse_range(const char *s, double out[2]) {
  const char *dash = strchr(s + 1, '-'); /* s[0] may not be the dash */
  if (!dash) return false;
  if (!parse_double(s, (size_t)(dash - s), &out[0])) return false;
  if (!parse_double(dash + 1, strlen(dash + 1), &out[1])) return false;
  return out[0] > 0 && out[0] <= out[1];
}

/* "a" or "a,b,c" into v[3]. */
static bool parse_triple(const char *s, size_t n, float v[3]) {
  double d[3];
  size_t k = 0, start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i == n || s[i] == ',') {
      if (k == 3 || !parse_double(s + start, i - start, &d[k])) return false;
      k++;
      start = i + 1;
    }
  }
  if (k == 1) d[1] = d[2] = d[0];
  else if (k != 3) return false;
  for (int c = 0; c < 3; c++) v[c] = (float)d[c];
  return true;
}

static int parse_rrc(parser *p, const char *val, stoke__tf_spec *s) {
  /* SIZE[:scale=a-b][:ratio=a-b] */
  char buf[TOKEN_CAP];
  strcpy(buf, val);
  char *opt = strchr(buf, ':');
  if (opt) *opt++ = '\0';
  bool zero;
  if (!parse_size(buf, &s->out_h, &s->out_w, &zero))
    return FAIL(p, "transform: random-resized-crop: bad size '%s' at position "
                   "%zu (want N or HxW, at most %d)", buf, p->pos, MAX_SIDE);
  if (zero)
    return FAIL(p, "transform: random-resized-crop: size '%s' must be "
                   "positive", buf);
  while (opt) {
    char *next = strchr(opt, ':');
    if (next) *next++ = '\0';
    if (strncmp(opt, "scale=", 6) == 0) {
      if (!parse_range(opt + 6, s->scale) || s->scale[1] > 1.0)
        return FAIL(p, "transform: random-resized-crop: bad '%s' at position "
                       "%zu (want scale=LO-HI with 0 < LO <= HI <= 1)", opt,
                    p->pos);
    } else if (strncmp(opt, "ratio=", 6) == 0) {
      if (!parse_range(opt + 6, s->ratio))
        return FAIL(p, "transform: random-resized-crop: bad '%s' at position "
                       "%zu (want ratio=LO-HI with 0 < LO <= HI)", opt,
                    p->pos);
    } else {
      return FAIL(p, "transform: random-resized-crop: unknown option '%s' at "
                     "position %zu", opt, p->pos);
    }
    opt = next;
  }
  return 0;
}

int stoke__tf_parse(const char *text, stoke__tf_spec *out) {
  stoke__tf_spec s;
  memset(&s, 0, sizeof s);
  s.scale[0] = 0.08;
  s.scale[1] = 1.0;
  s.ratio[0] = 3.0 / 4.0;
  s.ratio[1] = 4.0 / 3.0;
  s.layout = STOKE__TF_CHW;
  s.dtype = STOKE_U8;
  for (int c = 0; c < 3; c++) s.std[c] = 1.0f;
  parser P = {.text = text};
  parser *p = &P;
  if (!text || !*text)
    return FAIL(p, "transform: empty spec (want e.g. "
                   "'random-resized-crop=224,flip,normalize=imagenet,f32')");
  /* Positions of tokens that later checks blame; -1: not seen. */
  long at_crop = -1, at_resize = -1, at_norm = -1, at_flip = -1;
  long at_layout = -1, at_dtype = -1;
  size_t pos = 0;
  for (;;) {
    size_t end = pos;
    while (text[end] && text[end] != ',') end++;
    /* normalize=M1,M2,M3/S1,S2,S3 has commas of its own: no other token
    ** starts with a number, so take following numeric parts along. */
    if (strncmp(text + pos, "normalize=", 10) == 0)
      while (text[end] == ',' && num_start(text[end + 1])) {
        end++;
        while (text[end] && text[end] != ',') end++;
      }
    size_t n = end - pos;
    p->pos = pos;
    if (n == 0)
      return FAIL(p, "transform: empty token at position %zu", pos);
    if (n >= TOKEN_CAP)
      return FAIL(p, "transform: token at position %zu is too long", pos);
    memcpy(p->tok, text + pos, n);
    p->tok[n] = '\0';
    char *tok = p->tok;
    char *eq = strchr(tok, '=');
    const char *val = eq ? eq + 1 : NULL;
    size_t name_n = eq ? (size_t)(eq - tok) : n;
#define IS(name) (name_n == strlen(name) && strncmp(tok, name, name_n) == 0)
    if (IS("random-resized-crop") || IS("center-crop")) {
      if (at_crop >= 0)
        return FAIL(p, "transform: second crop '%s' at position %zu (one "
                       "crop per spec)", tok, pos);
      at_crop = (long)pos;
      if (!val)
        return FAIL(p, "transform: '%s' at position %zu needs a size", tok,
                    pos);
      if (IS("random-resized-crop")) {
        s.crop = STOKE__TF_CROP_RANDOM;
        int rc = parse_rrc(p, val, &s);
        if (rc) return rc;
      } else {
        bool zero;
        s.crop = STOKE__TF_CROP_CENTER;
        if (!parse_size(val, &s.out_h, &s.out_w, &zero))
          return FAIL(p, "transform: center-crop: bad size '%s' at position "
                         "%zu (want N or HxW, at most %d)", val, pos,
                      MAX_SIDE);
        if (zero)
          return FAIL(p, "transform: center-crop: size '%s' must be positive",
                      val);
      }
    } else if (IS("resize")) {
      if (at_resize >= 0)
        return FAIL(p, "transform: second resize '%s' at position %zu", tok,
                    pos);
      at_resize = (long)pos;
      int h, w;
      bool zero;
      if (!val || !parse_size(val, &h, &w, &zero) || h != w)
        return FAIL(p, "transform: resize: bad size '%s' at position %zu "
                       "(want the shorter side, e.g. resize=256)",
                    val ? val : "", pos);
      if (zero)
        return FAIL(p, "transform: resize: size '%s' must be positive", val);
      s.resize = h;
    } else if (IS("flip")) {
      if (at_flip >= 0)
        return FAIL(p, "transform: second flip '%s' at position %zu", tok,
                    pos);
      at_flip = (long)pos;
      double fp = 0.5;
      if (val && (!parse_double(val, strlen(val), &fp) || fp < 0 || fp > 1))
        return FAIL(p, "transform: flip: bad probability '%s' at position "
                       "%zu (want 0..1)", val, pos);
      s.flip_p = fp;
    } else if (IS("normalize")) {
      if (at_norm >= 0)
        return FAIL(p, "transform: second normalize '%s' at position %zu",
                    tok, pos);
      at_norm = (long)pos;
      const char *slash = val ? strchr(val, '/') : NULL;
      if (val && strcmp(val, "imagenet") == 0) {
        static const double m[3] = {0.485, 0.456, 0.406};
        static const double d[3] = {0.229, 0.224, 0.225};
        for (int c = 0; c < 3; c++) {
          s.mean[c] = (float)m[c];
          s.std[c] = (float)d[c];
        }
      } else if (!slash || !parse_triple(val, (size_t)(slash - val), s.mean) ||
                 !parse_triple(slash + 1, strlen(slash + 1), s.std)) {
        return FAIL(p, "transform: normalize: bad value '%s' at position %zu "
                       "(want imagenet, M/S or M1,M2,M3/S1,S2,S3)",
                    val ? val : "", pos);
      }
      for (int c = 0; c < 3; c++)
        if (!(s.std[c] > 0.0f))
          return FAIL(p, "transform: normalize: std must be positive in '%s' "
                         "at position %zu", tok, pos);
      s.normalize = true;
    } else if (!eq && (IS("chw") || IS("hwc"))) {
      if (at_layout >= 0)
        return FAIL(p, "transform: second layout '%s' at position %zu", tok,
                    pos);
      at_layout = (long)pos;
      s.layout = IS("chw") ? STOKE__TF_CHW : STOKE__TF_HWC;
    } else if (!eq && (IS("u8") || IS("f16") || IS("f32"))) {
      if (at_dtype >= 0)
        return FAIL(p, "transform: second dtype '%s' at position %zu", tok,
                    pos);
      at_dtype = (long)pos;
      s.dtype = IS("u8") ? STOKE_U8 : IS("f16") ? STOKE_F16 : STOKE_F32;
    } else {
      return FAIL(p, "transform: unknown token '%s' at position %zu", tok,
                  pos);
    }
#undef IS
    if (!text[end]) break;
    pos = end + 1;
  }
  /* Combinations. */
  if (at_crop < 0)
    return FAIL(p, "transform: no crop: add random-resized-crop=SIZE or "
                   "center-crop=SIZE to fix the output size");
  if (at_norm >= 0 && s.dtype == STOKE_U8)
    return FAIL(p, "transform: normalize at position %ld needs dtype f16 or "
                   "f32 (u8 cannot hold normalized values)", at_norm);
  if (at_resize >= 0 && s.crop == STOKE__TF_CROP_RANDOM)
    return FAIL(p, "transform: resize at position %ld with "
                   "random-resized-crop (which resizes itself)", at_resize);
  if (at_resize >= 0 && at_resize > at_crop)
    return FAIL(p, "transform: resize at position %ld comes after the crop "
                   "(want resize=N,center-crop=M)", at_resize);
  if (s.resize && s.resize < STOKE__MAX(s.out_h, s.out_w))
    return FAIL(p, "transform: resize=%d at position %ld is smaller than the "
                   "center-crop %dx%d (torchvision would pad)", s.resize,
                at_resize, s.out_h, s.out_w);
  *out = s;
  return 0;
}

void stoke__tf_field_desc(const stoke__tf_spec *spec, stoke_field_desc *d) {
  d->dtype = spec->dtype;
  d->ndim = 3;
  for (int i = 0; i < STOKE_MAX_DIMS; i++) d->shape[i] = 0;
  if (spec->layout == STOKE__TF_HWC) {
    d->shape[0] = spec->out_h;
    d->shape[1] = spec->out_w;
    d->shape[2] = 3;
  } else {
    d->shape[0] = 3;
    d->shape[1] = spec->out_h;
    d->shape[2] = spec->out_w;
  }
}

size_t stoke__tf_out_bytes(const stoke__tf_spec *spec) {
  /* Sides are at most MAX_SIDE, so this cannot overflow a 64-bit size_t. */
  return (size_t)spec->out_h * (size_t)spec->out_w * 3 *
         stoke_dtype_size(spec->dtype);
}

/* ---- planning ------------------------------------------------------------ */

static double uniform_in(stoke_rng *rng, double lo, double hi) {
  return lo + (hi - lo) * stoke_rng_uniform(rng);
}

/* RandomResizedCrop.get_params: box (j, i, cw, ch) of a w x h image. */
static void plan_rrc(const stoke__tf_spec *s, int w, int h, stoke_rng *rng,
                     int box[4]) {
  double area = (double)w * (double)h;
  double lr0 = log(s->ratio[0]), lr1 = log(s->ratio[1]);
  for (int attempt = 0; attempt < 10; attempt++) {
    double target = area * uniform_in(rng, s->scale[0], s->scale[1]);
    double aspect = exp(uniform_in(rng, lr0, lr1));
    double cw = nearbyint(sqrt(target * aspect));
    double ch = nearbyint(sqrt(target / aspect));
    if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
      int icw = (int)cw, ich = (int)ch;
      /* torchvision draws the row first, then the column. */
      box[1] = (int)stoke_rng_below(rng, (uint64_t)(h - ich + 1));
      box[0] = (int)stoke_rng_below(rng, (uint64_t)(w - icw + 1));
      box[2] = icw;
      box[3] = ich;
      return;
    }
  }
  /* Fallback: the central crop with the aspect clamped into the range. */
  double in_ratio = (double)w / (double)h;
  int cw = w, ch = h;
  if (in_ratio < s->ratio[0])
    ch = (int)nearbyint(w / s->ratio[0]);
  else if (in_ratio > s->ratio[1])
    cw = (int)nearbyint(h * s->ratio[1]);
  /* torchvision can round a side to 0 for ratios far from 1 on a 1-pixel
  ** side (and then fails); stoke keeps at least one pixel. */
  cw = STOKE__MAX(cw, 1);
  ch = STOKE__MAX(ch, 1);
  box[0] = (w - cw) / 2;
  box[1] = (h - ch) / 2;
  box[2] = cw;
  box[3] = ch;
}

int stoke__tf_plan_make(const stoke__tf_spec *s, int w, int h,
                        stoke_rng *rng, stoke__tf_plan *out) {
  stoke__tf_plan p;
  memset(&p, 0, sizeof p);
  if (w < 1 || h < 1)
    return stoke__set_tls_error(STOKE_EINVAL, "transform: image %dx%d is "
                                "empty", w, h);
  p.out_w = s->out_w;
  p.out_h = s->out_h;
  if (s->crop == STOKE__TF_CROP_RANDOM) {
    int b[4];
    plan_rrc(s, w, h, rng, b);
    p.box_x = p.clip_x0 = b[0];
    p.box_y = p.clip_y0 = b[1];
    p.box_w = b[2];
    p.box_h = b[3];
    p.clip_x1 = b[0] + b[2];
    p.clip_y1 = b[1] + b[3];
  } else if (s->crop == STOKE__TF_CROP_CENTER && s->resize > 0) {
    /* Resize(int): the shorter side becomes `resize`, the longer one
    ** int(resize * long / short), as torchvision computes it. */
    int64_t sh = STOKE__MIN(w, h), lo = STOKE__MAX(w, h);
    int nl = (int)((double)((int64_t)s->resize * lo) / (double)sh);
    int nw = w <= h ? s->resize : nl, nh = w <= h ? nl : s->resize;
    /* CenterCrop on the resized image; its box mapped back to the source.
    ** PIL resizes the whole image, so the filter may read all of it. */
    double top = nearbyint((nh - s->out_h) / 2.0);
    double left = nearbyint((nw - s->out_w) / 2.0);
    double sx = (double)w / nw, sy = (double)h / nh;
    p.box_x = left * sx;
    p.box_y = top * sy;
    p.box_w = s->out_w * sx;
    p.box_h = s->out_h * sy;
    p.clip_x1 = w;
    p.clip_y1 = h;
  } else if (s->crop == STOKE__TF_CROP_CENTER) {
    if (w < s->out_w || h < s->out_h)
      return stoke__set_tls_error(STOKE_EINVAL, "transform: image %dx%d is "
                                  "smaller than center-crop %dx%d", w, h,
                                  s->out_h, s->out_w);
    int top = (int)nearbyint((h - s->out_h) / 2.0);
    int left = (int)nearbyint((w - s->out_w) / 2.0);
    p.box_x = p.clip_x0 = left;
    p.box_y = p.clip_y0 = top;
    p.box_w = s->out_w;
    p.box_h = s->out_h;
    p.clip_x1 = left + s->out_w;
    p.clip_y1 = top + s->out_h;
  } else {
    return stoke__set_tls_error(STOKE_EINVAL, "transform: spec has no crop");
  }
  /* RandomHorizontalFlip: torch.rand(1) < p.  Drawn only when it can flip,
  ** after the crop, as torchvision's Compose order does. */
  if (s->flip_p > 0) p.flip = stoke_rng_uniform(rng) < s->flip_p;
  *out = p;
  return 0;
}

int stoke__tf_plan_dct_denom(const stoke__tf_plan *p) {
  for (int d = 8; d > 1; d /= 2)
    if (p->box_w / d >= p->out_w && p->box_h / d >= p->out_h) return d;
  return 1;
}

void stoke__tf_plan_window(const stoke__tf_plan *p, int denom, int win[4]) {
  double d = denom > 0 ? denom : 1;
  /* Support in full-resolution pixels: one output pixel's footprint when
  ** shrinking, one decoded pixel otherwise; plus one decoded pixel so that
  ** the filter's rounding of its bounds never reaches outside. */
  double sx = (STOKE__MAX(1.0, p->box_w / d / p->out_w) + 1) * d;
  double sy = (STOKE__MAX(1.0, p->box_h / d / p->out_h) + 1) * d;
  double x0 = floor((p->box_x - sx) / d) * d;
  double y0 = floor((p->box_y - sy) / d) * d;
  double x1 = ceil((p->box_x + p->box_w + sx) / d) * d;
  double y1 = ceil((p->box_y + p->box_h + sy) / d) * d;
  /* Within the clip window, itself aligned outward to decoded pixels. */
  win[0] = (int)STOKE__MAX(x0, floor(p->clip_x0 / d) * d);
  win[1] = (int)STOKE__MAX(y0, floor(p->clip_y0 / d) * d);
  win[2] = (int)STOKE__MIN(x1, ceil(p->clip_x1 / d) * d);
  win[3] = (int)STOKE__MIN(y1, ceil(p->clip_y1 / d) * d);
}
