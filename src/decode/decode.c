/* decode.c — the format-independent half of src/decode/: sniffing, the
** decoder context, limits, the output buffer, and the scale choice.
** jpeg.c and png.c do the rest. */
#include "decode/decode_int.h"

#include <stdio.h>
#include <string.h>

void stoke__decoder_opts_init(stoke__decoder_opts *o) {
  memset(o, 0, sizeof *o);
  o->max_pixels = STOKE__DECODE_DEFAULT_MAX_PIXELS;
  o->max_bytes = STOKE__DECODE_DEFAULT_MAX_BYTES;
  o->warnings_fatal = true;
  o->restart_cuts = true;
}

int stoke__decoder_create(const stoke__decoder_opts *opts,
                          stoke__decoder **out) {
  if (!out) return STOKE_EINVAL;
  *out = NULL;
  stoke__decoder_opts o;
  if (opts)
    o = *opts;
  else
    stoke__decoder_opts_init(&o);
  stoke__decoder *d = stoke__calloc(o.alloc, 1, sizeof *d);
  if (!d) return STOKE_ENOMEM;
  d->opts = o;
  int rc = stoke__jpeg_init(d);
  if (rc != 0) {
    stoke__free(o.alloc, d);
    return rc;
  }
  *out = d;
  return 0;
}

void stoke__decoder_destroy(stoke__decoder *d) {
  if (!d) return;
  stoke__jpeg_fini(d);
  stoke__free(d->opts.alloc, d->buf);
  stoke__free(d->opts.alloc, d->cut);
  stoke__free(d->opts.alloc, d);
}

static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a,
                                   '\n'};

stoke__img_format stoke__decode_sniff(const void *data, size_t n) {
  const uint8_t *p = data;
  if (!p) return STOKE__IMG_UNKNOWN;
  if (n >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
    return STOKE__IMG_JPEG;
  if (n >= sizeof png_sig && memcmp(p, png_sig, sizeof png_sig) == 0)
    return STOKE__IMG_PNG;
  return STOKE__IMG_UNKNOWN;
}

const char *stoke__img_format_name(stoke__img_format f) {
  switch (f) {
  case STOKE__IMG_JPEG: return "JPEG";
  case STOKE__IMG_PNG: return "PNG";
  default: return "unknown";
  }
}

/* "not an image: starts with 3c 21 44 4f 43 54 59 50 "<!DOCTYP"": the
** bytes say more than a name would (HTML error pages, LFS pointers, ...). */
static int not_an_image(const uint8_t *p, size_t n, char *err, size_t cap) {
  if (n == 0)
    return stoke__errf(err, cap, STOKE_EFORMAT,
                       "not an image: empty input (0 bytes)");
  char hex[8 * 3 + 1] = "", txt[8 + 1] = "";
  size_t k = STOKE__MIN(n, (size_t)8), pos = 0;
  for (size_t i = 0; i < k; i++) {
    pos += (size_t)snprintf(hex + pos, sizeof hex - pos, "%s%02x",
                            i ? " " : "", p[i]);
    txt[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? (char)p[i] : '.';
  }
  txt[k] = '\0';
  return stoke__errf(err, cap, STOKE_EFORMAT,
                     "not an image: starts with %s \"%s\" (%zu bytes; "
                     "expected JPEG ff d8 ff or PNG 89 50 4e 47)",
                     hex, txt, n);
}

int stoke__decode_probe(stoke__decoder *d, const void *data, size_t n,
                        stoke__img_info *out, char *err, size_t cap) {
  if (!d || !out || (!data && n > 0))
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "decode: NULL decoder, data or output");
  memset(out, 0, sizeof *out);
  switch (stoke__decode_sniff(data, n)) {
  case STOKE__IMG_JPEG: return stoke__jpeg_probe(d, data, n, out, err, cap);
  case STOKE__IMG_PNG: return stoke__png_probe(d, data, n, out, err, cap);
  default: return not_an_image(data, n, err, cap);
  }
}

bool stoke__decode_peek(const void *data, size_t n, stoke__img_info *out) {
  return data && stoke__decode_sniff(data, n) == STOKE__IMG_JPEG &&
         stoke__jpeg_peek(data, n, out);
}

bool stoke__decode_cut_ready(const void *data, size_t n) {
  stoke__jpeg_rst L;
  return data && stoke__jpeg_rst_parse(data, n, &L);
}

unsigned stoke__decode_pick_scale(uint32_t crop_w, uint32_t crop_h,
                                  uint32_t out_w, uint32_t out_h) {
  if (out_w == 0 || out_h == 0) return 1;
  /* Only 1/2, 1/4 and 1/8: libjpeg-turbo has SIMD IDCTs for those, its
  ** other M/8 scales are slower than decoding at full size. */
  for (unsigned s = 8; s > 1; s /= 2)
    if ((uint64_t)crop_w >= (uint64_t)out_w * s &&
        (uint64_t)crop_h >= (uint64_t)out_h * s)
      return s;
  return 1;
}

int stoke__decode(stoke__decoder *d, const void *data, size_t n,
                  const stoke__decode_req *req, stoke__image *out, char *err,
                  size_t cap) {
  if (err && cap > 0) err[0] = '\0';
  if (!d || !out || (!data && n > 0))
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "decode: NULL decoder, data or output");
  memset(out, 0, sizeof *out);
  stoke__decode_req whole = {0};
  if (!req) req = &whole;
  switch (stoke__decode_sniff(data, n)) {
  case STOKE__IMG_JPEG:
    return stoke__jpeg_decode(d, data, n, req, out, err, cap);
  case STOKE__IMG_PNG:
    return stoke__png_decode(d, data, n, req, out, err, cap);
  default: return not_an_image(data, n, err, cap);
  }
}

int stoke__decode_crop_box(const stoke__decode_req *req, uint32_t W,
                           uint32_t H, uint32_t *x, uint32_t *y, uint32_t *w,
                           uint32_t *h, char *err, size_t cap) {
  *x = req->x;
  *y = req->y;
  *w = req->w;
  *h = req->h;
  if (*w == 0 || *h == 0) {
    *x = *y = 0;
    *w = W;
    *h = H;
  }
  if (*x >= W || *y >= H || *w > W - *x || *h > H - *y)
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "crop %ux%u+%u+%u is outside the %ux%u image",
                       *w, *h, *x, *y, W, H);
  return 0;
}

int stoke__decode_check_size(const stoke__decoder *d, uint32_t w, uint32_t h,
                             size_t row_bytes, size_t rows, size_t *bytes,
                             char *err, size_t cap) {
  uint64_t px = (uint64_t)w * h;
  if (d->opts.max_pixels && px > d->opts.max_pixels)
    return stoke__errf(err, cap, STOKE_EFORMAT,
                       "image %ux%u exceeds max_pixels %llu", w, h,
                       (unsigned long long)d->opts.max_pixels);
  size_t b;
  if (!stoke__mul_ok(row_bytes, rows, &b) ||
      (d->opts.max_bytes && b > d->opts.max_bytes)) {
    char lim[32];
    stoke__format_bytes(d->opts.max_bytes, lim, sizeof lim);
    return stoke__errf(err, cap, STOKE_EFORMAT,
                       "image %ux%u: decoding %zu rows of %zu bytes "
                       "exceeds max_bytes %s",
                       w, h, rows, row_bytes, lim);
  }
  if (bytes) *bytes = b;
  return 0;
}

int stoke__decode_reserve(stoke__decoder *d, size_t n, char *err,
                          size_t cap) {
  if (n <= d->buf_cap) return 0;
  /* Free first: the old contents are dead, and holding both would double
  ** the peak for the one large image that made the buffer grow. */
  stoke__free(d->opts.alloc, d->buf);
  d->buf = NULL;
  d->buf_cap = 0;
  d->buf = stoke__alloc(d->opts.alloc, n);
  if (!d->buf) {
    char sz[32];
    stoke__format_bytes(n, sz, sizeof sz);
    return stoke__errf(err, cap, STOKE_ENOMEM,
                       "decode: out of memory for a %s pixel buffer",
                       sz);
  }
  d->buf_cap = n;
  return 0;
}
