/* png.c — PNG through libspng, one spng_ctx per image (a context cannot
** be rewound to a new input).
**
** PNG compresses whole rows in one deflate stream, so there is no column
** crop and no skipping rows without inflating them; the window is the full
** width of the rows the crop needs.  Non-interlaced images are decoded row
** by row, rows above the crop into the first output row (overwritten), and
** decoding stops after the crop's last row.  Adam7 images scatter every row
** over seven passes, so they are decoded whole and the rows pointed at. */
#include "decode/decode_int.h"

#include <spng.h>
#include <string.h>

/* Ancillary chunks (text, ICC profiles, EXIF) are what spng keeps in
** memory; bound each and their total.  Image data is not cached. */
#define PNG_CHUNK_MAX ((size_t)16 << 20)
#define PNG_CACHE_MAX ((size_t)64 << 20)

/* ---- libspng's memory through the decoder's allocator ------------------- */

/* spng_ctx_new2 takes malloc/realloc/calloc/free hooks with no user
** pointer, so the decoder's allocator reaches them through a thread-local
** slot: png_enter sets it for the duration of one stoke__png_* call and
** png_leave puts the previous value back.  Every spng context is made and
** freed inside one such call, on one thread, so each block is freed through
** the allocator that made it.  This is the decoders' only thread-local
** state, and nothing of it outlives the call. */
typedef struct png_mem {
  const stoke_allocator *alloc;
  bool failed; /* an allocation failed during this call: whatever spng
                  says then (zlib's lazy window allocation comes back as
                  SPNG_EIDAT_STREAM), the cause is memory, not the file */
} png_mem;
static _Thread_local png_mem png_cur;

/* Each block carries its size (realloc needs it; the hooks have no
** realloc), in a header that keeps malloc's 16-byte alignment. */
#define PNG_HDR 16

static void *png_malloc(size_t n) {
  if (n > SIZE_MAX - PNG_HDR) return NULL;
  uint8_t *p = stoke__alloc(png_cur.alloc, n + PNG_HDR);
  if (!p) {
    png_cur.failed = true;
    return NULL;
  }
  memcpy(p, &n, sizeof n);
  return p + PNG_HDR;
}
static void png_free(void *p) {
  if (p) stoke__free(png_cur.alloc, (uint8_t *)p - PNG_HDR);
}
static void *png_calloc(size_t count, size_t size) {
  size_t n;
  if (!stoke__mul_ok(count, size, &n)) return NULL;
  void *p = png_malloc(n);
  if (p) memset(p, 0, n);
  return p;
}
static void *png_realloc(void *p, size_t n) {
  if (!p) return png_malloc(n);
  size_t old;
  memcpy(&old, (uint8_t *)p - PNG_HDR, sizeof old);
  void *q = png_malloc(n);
  if (!q) return NULL; /* p stays valid, as realloc leaves it */
  memcpy(q, p, STOKE__MIN(old, n));
  png_free(p);
  return q;
}

static png_mem png_enter(const stoke__decoder *d) {
  png_mem prev = png_cur;
  png_cur = (png_mem){d->opts.alloc, false};
  return prev;
}
static void png_leave(png_mem prev) { png_cur = prev; }

static int png_error(int e, size_t n, uint32_t row, uint32_t height,
                     char *err, size_t cap) {
  char where[64] = "in the header";
  if (height) snprintf(where, sizeof where, "at row %u of %u", row, height);
  if (png_cur.failed) e = SPNG_EMEM;
  switch (e) {
  case SPNG_EMEM:
    return stoke__errf(err, cap, STOKE_ENOMEM, "PNG: out of memory");
  case SPNG_EZLIB_INIT: /* inflateInit: Z_MEM_ERROR (the version is ours) */
    return stoke__errf(err, cap, STOKE_ENOMEM,
                       "PNG: out of memory (zlib's inflate state)");
  case SPNG_ECHUNK_CRC:
    return stoke__errf(err, cap, STOKE_EFORMAT,
                       "PNG: CRC error in a critical chunk (%s)",
                       where);
  case SPNG_EOF:
  case SPNG_IO_EOF:
  case SPNG_IO_ERROR:
    return stoke__errf(err, cap, STOKE_EFORMAT,
                       "PNG: premature end of data after %zu bytes "
                       "(%s)",
                       n, where);
  case SPNG_ECHUNK_LIMITS:
    return stoke__errf(err, cap, STOKE_EFORMAT,
                       "PNG: a chunk exceeds the chunk limits "
                       "(%zu bytes each, %zu in all)",
                       PNG_CHUNK_MAX, PNG_CACHE_MAX);
  default:
    return stoke__errf(err, cap, STOKE_EFORMAT, "PNG: %s (%s)",
                       spng_strerror(e), where);
  }
}

/* A context on data with the limits set, its header read into *ihdr. */
static int png_open(const stoke__decoder *d, const uint8_t *data, size_t n,
                    spng_ctx **out, struct spng_ihdr *ihdr, char *err,
                    size_t cap) {
  struct spng_alloc hooks = {png_malloc, png_realloc, png_calloc, png_free};
  spng_ctx *ctx = spng_ctx_new2(&hooks, 0);
  *out = ctx;
  if (!ctx)
    return stoke__errf(err, cap, STOKE_ENOMEM, "PNG: out of memory");
  /* A width or height above max_pixels can never pass: let spng refuse it
  ** as early as it can.  Our own check on the product follows. */
  uint64_t lim = d->opts.max_pixels ? d->opts.max_pixels : UINT32_MAX;
  lim = STOKE__MIN(lim, (uint64_t)INT32_MAX);
  int e = spng_set_png_buffer(ctx, data, n);
  if (!e) e = spng_set_image_limits(ctx, (uint32_t)lim, (uint32_t)lim);
  if (!e) e = spng_set_chunk_limits(ctx, PNG_CHUNK_MAX, PNG_CACHE_MAX);
  if (!e) e = spng_get_ihdr(ctx, ihdr);
  if (e == SPNG_EUSER_WIDTH || e == SPNG_EUSER_HEIGHT)
    return stoke__errf(err, cap, STOKE_EFORMAT,
                       "PNG: %s exceeds max_pixels %llu",
                       e == SPNG_EUSER_WIDTH ? "width" : "height",
                       (unsigned long long)d->opts.max_pixels);
  if (e) return png_error(e, n, 0, 0, err, cap);
  return 0;
}

/* Returns 0 or an spng error: reading tRNS reads (and checks) every chunk
** before the image data, and a failure there leaves ctx unusable. */
static int fill_info(spng_ctx *ctx, const struct spng_ihdr *ih,
                     stoke__img_info *info) {
  static const unsigned chans[7] = {1, 0, 3, 3, 2, 0, 4};
  info->format = STOKE__IMG_PNG;
  info->width = ih->width;
  info->height = ih->height;
  info->channels = ih->color_type < 7 ? chans[ih->color_type] : 0;
  info->progressive = ih->interlace_method != 0;
  info->has_alpha = ih->color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA ||
                    ih->color_type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA;
  /* tRNS sits before the image data: reading it is still header-only. */
  struct spng_trns trns;
  int e = spng_get_trns(ctx, &trns);
  if (e == SPNG_ECHUNKAVAIL) return 0;
  if (e) return e;
  if (!info->has_alpha) {
    info->has_alpha = true;
    info->channels = ih->color_type == SPNG_COLOR_TYPE_GRAYSCALE ? 2 : 4;
  }
  return 0;
}

int stoke__png_probe(stoke__decoder *d, const uint8_t *data, size_t n,
                     stoke__img_info *out, char *err, size_t cap) {
  png_mem prev = png_enter(d);
  spng_ctx *ctx;
  struct spng_ihdr ih;
  int rc = png_open(d, data, n, &ctx, &ih, err, cap);
  if (rc == 0) {
    int e = fill_info(ctx, &ih, out);
    if (e) rc = png_error(e, n, 0, 0, err, cap);
  }
  spng_ctx_free(ctx);
  png_leave(prev);
  return rc;
}

static int decode_rows(stoke__decoder *d, spng_ctx *ctx, size_t n,
                       const struct spng_ihdr *ih, int fmt, int flags,
                       uint32_t y0, uint32_t y1, size_t stride,
                       const uint8_t **first, char *err, size_t cap) {
  uint32_t H = ih->height;
  size_t bytes;
  if (ih->interlace_method != 0) {
    int rc = stoke__decode_check_size(d, ih->width, H, stride, H, &bytes,
                                      err, cap);
    if (rc == 0) rc = stoke__decode_reserve(d, bytes, err, cap);
    if (rc != 0) return rc;
    int e = spng_decode_image(ctx, d->buf, bytes, fmt, flags);
    if (e) return png_error(e, n, 0, H, err, cap);
    *first = d->buf + (size_t)y0 * stride;
    return 0;
  }
  int rc = stoke__decode_check_size(d, ih->width, H, stride, y1 - y0,
                                    &bytes, err, cap);
  if (rc == 0) rc = stoke__decode_reserve(d, bytes, err, cap);
  if (rc != 0) return rc;
  int e = spng_decode_image(ctx, NULL, 0, fmt,
                            flags | SPNG_DECODE_PROGRESSIVE);
  if (e) return png_error(e, n, 0, H, err, cap);
  for (uint32_t r = 0; r < y1; r++) {
    uint8_t *row = d->buf + (size_t)(r < y0 ? 0 : r - y0) * stride;
    e = spng_decode_row(ctx, row, stride);
    /* SPNG_EOI: that was the last row, decoded fine. */
    if (e == SPNG_EOI && r == H - 1) break;
    if (e) return png_error(e, n, r, H, err, cap);
  }
  *first = d->buf;
  return 0;
}

int stoke__png_decode(stoke__decoder *d, const uint8_t *data, size_t n,
                      const stoke__decode_req *req, stoke__image *out,
                      char *err, size_t cap) {
  png_mem prev = png_enter(d);
  spng_ctx *ctx;
  struct spng_ihdr ih;
  int rc = png_open(d, data, n, &ctx, &ih, err, cap);
  if (rc != 0) goto done;
  int e = fill_info(ctx, &ih, &out->info);
  if (e) {
    rc = png_error(e, n, 0, 0, err, cap);
    goto done;
  }
  uint32_t W = ih.width, H = ih.height;
  rc = stoke__decode_check_size(d, W, H, 0, 0, NULL, err, cap);
  if (rc != 0) goto done;

  uint32_t x, y, w, h;
  rc = stoke__decode_crop_box(req, W, H, &x, &y, &w, &h, err, cap);
  if (rc != 0) goto done;
  bool alpha = req->keep_alpha && out->info.has_alpha;
  unsigned ch = alpha ? 4 : 3;
  /* 16-bit samples are scaled to 8 by spng; alpha is dropped, not
  ** composited, when it is not kept. */
  int fmt = alpha ? SPNG_FMT_RGBA8 : SPNG_FMT_RGB8;
  int flags = alpha ? SPNG_DECODE_TRNS : 0;
  size_t stride = (size_t)W * ch;
  const uint8_t *first = NULL;
  rc = decode_rows(d, ctx, n, &ih, fmt, flags, y, y + h, stride, &first, err,
                   cap);
  if (rc != 0) goto done;

  out->pixels = first;
  out->stride = stride;
  out->width = W;
  out->height = h;
  out->channels = ch;
  out->scale = 1;
  out->win_x = 0;
  out->win_y = y;
  out->win_w = W;
  out->win_h = h;
  out->crop_x = x;
  out->crop_y = 0;
  out->crop_w = w;
  out->crop_h = h;
done:
  spng_ctx_free(ctx);
  png_leave(prev);
  if (rc != 0) {
    stoke__img_info info = out->info;
    memset(out, 0, sizeof *out);
    out->info = info;
  }
  return rc;
}
