/* common.c — what the format decoders (jpeg.c, png.c, jpeg_transcode.c)
** and decode.c share: sniffing, the scale choice, crop boxes, the limits
** and the output buffer.  It calls no decoder, so that the decoders and
** the dispatcher above them form no circle. */
#include "decode/decode_int.h"

#include <stdio.h>
#include <string.h>

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
