/* image_oracle.h — the decoder's promise, checked (fuzz_jpeg.c,
** fuzz_png.c): every pixel of a decoded window equals the same pixel of a
** full decode at the same scale (decode.h), whatever path made it (JPEG
** region decoding, restart cuts, PNG rows). */
#ifndef STOKE_FUZZ_IMAGE_ORACLE_H
#define STOKE_FUZZ_IMAGE_ORACLE_H

#include "decode/decode.h"
#include "fuzz.h"

/* Limits small enough that one input decodes in milliseconds. */
#define ORACLE_MAX_PIXELS ((uint64_t)1 << 20)
#define ORACLE_MAX_BYTES ((size_t)64 << 20)

typedef struct full_image {
  uint8_t *px; /* owned: w x h x ch */
  uint32_t w, h;
  unsigned ch, scale;
} full_image;

static inline stoke__decoder *oracle_decoder(bool restart_cuts,
                                             bool warnings_fatal) {
  stoke__decoder_opts o;
  stoke__decoder_opts_init(&o);
  o.max_pixels = ORACLE_MAX_PIXELS;
  o.max_bytes = ORACLE_MAX_BYTES;
  o.restart_cuts = restart_cuts;
  o.warnings_fatal = warnings_fatal;
  stoke__decoder *d = NULL;
  FUZZ_ASSERT(stoke__decoder_create(&o, &d) == 0);
  return d;
}

/* The whole image at 1/scale (the out size that forces that scale), copied
** out of the decoder.  false when it does not decode. */
static inline bool oracle_full(stoke__decoder *d, const uint8_t *p, size_t n,
                               uint32_t W, uint32_t H, unsigned scale,
                               bool keep_alpha, full_image *f) {
  memset(f, 0, sizeof *f);
  stoke__decode_req r = {0, 0, 0, 0, (W + scale - 1) / scale,
                         (H + scale - 1) / scale, keep_alpha};
  stoke__image img;
  char err[256];
  if (stoke__decode(d, p, n, &r, &img, err, sizeof err) != 0) return false;
  FUZZ_ASSERT(img.scale == scale || scale != 1);
  if (img.scale != scale || img.n_warnings) return false;
  f->w = img.width;
  f->h = img.height;
  f->ch = img.channels;
  f->scale = img.scale;
  f->px = malloc((size_t)f->w * f->h * f->ch + 1);
  FUZZ_ASSERT(f->px);
  for (uint32_t y = 0; y < f->h; y++)
    memcpy(f->px + (size_t)y * f->w * f->ch, img.pixels + y * img.stride,
           (size_t)f->w * f->ch);
  return true;
}

/* The window img equals f where they overlap, and contains its crop box. */
static inline void oracle_check(const stoke__image *img,
                                const full_image *f) {
  FUZZ_ASSERT(img->scale == f->scale && img->channels == f->ch);
  FUZZ_ASSERT(img->win_x % img->scale == 0 && img->win_y % img->scale == 0);
  uint32_t x0 = img->win_x / img->scale, y0 = img->win_y / img->scale;
  FUZZ_ASSERT(x0 + img->width <= f->w && y0 + img->height <= f->h);
  FUZZ_ASSERT(img->crop_x >= 0 && img->crop_y >= 0 &&
              img->crop_x + img->crop_w <= img->width + 1e-9 &&
              img->crop_y + img->crop_h <= img->height + 1e-9);
  for (uint32_t y = 0; y < img->height; y++) {
    if (memcmp(img->pixels + y * img->stride,
               f->px + ((size_t)(y0 + y) * f->w + x0) * f->ch,
               (size_t)img->width * f->ch) != 0) {
      for (uint32_t x = 0; x < img->width * f->ch; x++)
        if (img->pixels[y * img->stride + x] !=
            f->px[((size_t)(y0 + y) * f->w + x0) * f->ch + x]) {
          fprintf(stderr, "window %ux%u at %u,%u (scale %u, cut %d) of "
                  "%ux%u: row %u byte %u: %u, full decode %u\n",
                  img->width, img->height, img->win_x, img->win_y,
                  img->scale, img->restart_cut, f->w, f->h, y, x,
                  img->pixels[y * img->stride + x],
                  f->px[((size_t)(y0 + y) * f->w + x0) * f->ch + x]);
          break;
        }
      FUZZ_ASSERT(!"the window differs from the full decode");
    }
  }
}

/* A crop of a W x H image from option bytes: a box anywhere inside it, and
** an output size that selects a DCT scale (1/1 .. 1/8). */
static inline stoke__decode_req oracle_crop(const fuzz_opts *o, uint32_t W,
                                            uint32_t H) {
  stoke__decode_req r = {0};
  r.x = (uint32_t)((uint64_t)o->b[0] * W / 256);
  r.y = (uint32_t)((uint64_t)o->b[1] * H / 256);
  r.w = 1 + (uint32_t)((uint64_t)o->b[2] * (W - r.x - 1) / 255);
  r.h = 1 + (uint32_t)((uint64_t)o->b[3] * (H - r.y - 1) / 255);
  unsigned s = 1u << (o->b[4] & 3); /* ask for about 1/s */
  r.out_w = (r.w + s - 1) / s;
  r.out_h = (r.h + s - 1) / s;
  r.keep_alpha = o->b[5] & 1;
  return r;
}

#endif /* STOKE_FUZZ_IMAGE_ORACLE_H */
