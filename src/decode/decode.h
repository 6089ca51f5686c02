/* decode.h — image bytes -> 8-bit RGB(A) pixels, for the image sources.
**
** Internal API (not in stoke.h).  One stoke__decoder per worker thread,
** reused for every sample that worker decodes; nothing here is shared
** between threads, so there are no locks.
**
**   stoke__decoder *d;
**   stoke__decoder_opts o;
**   stoke__decoder_opts_init(&o);            limits, warnings policy
**   stoke__decoder_create(&o, &d);
**   stoke__decode_req r = { .x = 100, .y = 50, .w = 800, .h = 600,
**                           .out_w = 224, .out_h = 224 };
**   stoke__image img;
**   int rc = stoke__decode(d, bytes, n, &r, &img, err, sizeof err);
**   ... resample img (see stoke__image for the coordinate mapping) ...
**   stoke__decoder_destroy(d);
**
** The format comes from the first bytes (magic), never from a file name.
** JPEG goes through libjpeg-turbo with DCT-domain scaling (1/1, 1/2, 1/4,
** 1/8) and region decoding (jpeg_crop_scanline + jpeg_skip_scanlines);
** PNG goes through libspng, row by row, stopping after the last row needed.
**
** Errors: every function returns 0 or a negative STOKE_E* code and, on
** failure, writes a NUL-terminated message naming the cause into
** err[0..cap) (err may be NULL when cap is 0):
**   STOKE_EFORMAT  not an image, malformed or truncated data, a corrupt-data
**                  warning (unless warnings_fatal is off), an image over
**                  max_pixels or max_bytes;
**   STOKE_ENOMEM   an allocation failed;
**   STOKE_EINVAL   a bad argument (NULL data, crop outside the image).
** No error is fatal to the decoder: it decodes the next sample normally.
**
** Memory: the output pixels live in a buffer owned by the decoder, grown
** through the opts allocator (never shrunk, never larger than max_bytes);
** they stay valid until the next stoke__decode on that decoder or its
** destruction.  Limits are checked from the header before any allocation
** that scales with the image.  libspng's working memory goes through the
** opts allocator too (png.c); libjpeg's does not (its API takes no
** allocator): see stoke_allocator in stoke.h for what it allocates, all of
** it after the limits are checked.
*/
#ifndef STOKE_DECODE_H
#define STOKE_DECODE_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum stoke__img_format {
  STOKE__IMG_UNKNOWN = 0,
  STOKE__IMG_JPEG,
  STOKE__IMG_PNG
} stoke__img_format;

/* What the header says, without decoding pixels. */
typedef struct stoke__img_info {
  stoke__img_format format;
  uint32_t width, height;  /* full resolution */
  /* Channels stored in the file: 1 gray, 2 gray+alpha (or gray with
  ** tRNS), 3 colour (RGB, YCbCr, or a palette without transparency), 4
  ** CMYK/YCCK or colour with alpha (RGBA, palette with tRNS). */
  unsigned channels;
  bool has_alpha;          /* PNG alpha channel or tRNS */
  bool progressive;        /* JPEG progressive, or PNG Adam7 interlaced */
} stoke__img_info;

/* PIL's decompression-bomb limit (2 x 89478485): larger images are far more
** likely to be hostile or broken than training data. */
#define STOKE__DECODE_DEFAULT_MAX_PIXELS UINT64_C(178956970)
#define STOKE__DECODE_DEFAULT_MAX_BYTES ((size_t)1 << 30) /* 1 GiB */

typedef struct stoke__decoder_opts {
  /* Largest width * height accepted (of the whole image, even when only a
  ** crop is decoded: progressive JPEGs buffer the whole image).  0 = none. */
  uint64_t max_pixels;
  /* Largest output buffer for one sample, in bytes.  0 = none. */
  size_t max_bytes;
  /* true (default): a libjpeg corrupt-data warning (it would patch the gap
  ** with grey and carry on) fails the sample.  false: the pixels are
  ** returned and stoke__image.n_warnings counts the warnings. */
  bool warnings_fatal;
  /* true (default): a crop of a JPEG whose restart intervals tile its MCU
  ** rows (every JPEG `stoke pack` writes) is cut out of the entropy data
  ** and only that part is decoded (jpeg_rst.c).  Same pixels either way;
  ** false is for tests and measurements. */
  bool restart_cuts;
  const stoke_allocator *alloc;  /* NULL = malloc/free; borrowed, must
                                    outlive the decoder */
} stoke__decoder_opts;

/* Defaults: max_pixels 178956970, max_bytes 1 GiB, warnings fatal,
** restart cuts on, malloc/free. */
void stoke__decoder_opts_init(stoke__decoder_opts *o);

/* What to decode.  All coordinates in full-resolution pixels. */
typedef struct stoke__decode_req {
  /* Crop box.  w == 0 or h == 0 means the whole image.  The box must lie
  ** inside the image (STOKE_EINVAL otherwise). */
  uint32_t x, y, w, h;
  /* Size the transform will resize the crop to.  The decoder picks the
  ** smallest JPEG scale (1/1, 1/2, 1/4 or 1/8) at which the crop is still
  ** at least out_w x out_h, so the resize only ever shrinks.  0 = full
  ** resolution (scale 1/1). */
  uint32_t out_w, out_h;
  /* Keep a 4th (alpha) channel when the PNG has alpha or tRNS.  false:
  ** alpha is dropped (not composited).  JPEGs are always 3 channels. */
  bool keep_alpha;
} stoke__decode_req;

/* A decoded window.  Pixel (i, j) of the window (column i, row j) covers
** full-resolution pixels
**     [win_x + i * scale, win_x + (i + 1) * scale)  horizontally,
**     [win_y + j * scale, win_y + (j + 1) * scale)  vertically
** (clipped to the image at its right and bottom edges), so a full-res
** coordinate X maps to window coordinate (X - win_x) / scale and the
** request's crop box is exactly
**     [crop_x, crop_x + crop_w) x [crop_y, crop_y + crop_h)
** in window coordinates (fractional when the crop is not on the scale
** grid).  The window contains the crop box and may be larger: a JPEG
** window starts up to one iMCU (at most 16 decoded columns) left of the
** crop, a PNG window is whole rows.  Every pixel of the window equals
** the same pixel of a full decode of the image at the same scale. */
typedef struct stoke__image {
  const uint8_t *pixels;    /* owned by the decoder, see the top of file */
  size_t stride;            /* bytes from one row to the next */
  uint32_t width, height;   /* of the window, in decoded pixels */
  unsigned channels;        /* 3 (RGB) or 4 (RGBA, PNG with keep_alpha) */
  unsigned scale;           /* 1, 2, 4 or 8: full-res pixels per pixel */
  uint32_t win_x, win_y;    /* window origin, full-res */
  uint32_t win_w, win_h;    /* window size, full-res (clipped to image) */
  double crop_x, crop_y, crop_w, crop_h; /* the crop box, window coords */
  stoke__img_info info;     /* of the whole file */
  long n_warnings;          /* libjpeg corrupt-data warnings tolerated */
  bool restart_cut;         /* only the crop's restart intervals decoded */
} stoke__image;

typedef struct stoke__decoder stoke__decoder;

/* Create a decoder.  opts may be NULL (defaults); it is copied.  Returns
** 0, STOKE_ENOMEM, or STOKE_EINVAL for a NULL out.  *out is NULL on
** failure.  Thread-safety: any thread; the decoder is then used by one
** thread at a time. */
int stoke__decoder_create(const stoke__decoder_opts *opts,
                          stoke__decoder **out);
void stoke__decoder_destroy(stoke__decoder *d); /* NULL: no-op */

/* The format from the magic bytes: JPEG (FF D8 FF), PNG (the 8-byte
** signature) or STOKE__IMG_UNKNOWN. */
stoke__img_format stoke__decode_sniff(const void *data, size_t n);
const char *stoke__img_format_name(stoke__img_format f); /* "JPEG", ... */

/* Read the header of data[0..n) (borrowed) into *out without decoding
** pixels.  Does not apply max_pixels (the caller sees the size and
** decides).  Errors as at the top of the file. */
int stoke__decode_probe(stoke__decoder *d, const void *data, size_t n,
                        stoke__img_info *out, char *err, size_t cap);

/* The size and kind of an image from its frame header alone, for the
** loader's hot path: a marker walk, no libjpeg (a JPEG's tables are read
** when it is decoded).  false when that walk finds no frame header or the
** data is not a JPEG; stoke__decode_probe then reads it properly. */
bool stoke__decode_peek(const void *data, size_t n, stoke__img_info *out);

/* true when data[0..n) is a JPEG whose restart intervals let a crop be
** cut out and decoded alone (every JPEG `stoke pack` writes). */
bool stoke__decode_cut_ready(const void *data, size_t n);

/* The JPEG scale denominator (1, 2, 4 or 8) chosen for a crop of
** crop_w x crop_h resized to out_w x out_h: the largest whose scaled crop
** is still >= the output in both dimensions.  0 in out_w or out_h: 1. */
unsigned stoke__decode_pick_scale(uint32_t crop_w, uint32_t crop_h,
                                  uint32_t out_w, uint32_t out_h);

/* Decode the region req asks for (NULL: the whole image at full res) of
** data[0..n) (borrowed) into *out.  On failure *out is zeroed except
** out->info, which holds what the header said if it was read.
** Thread-safety: one thread at a time per decoder. */
int stoke__decode(stoke__decoder *d, const void *data, size_t n,
                  const stoke__decode_req *req, stoke__image *out, char *err,
                  size_t cap);

/* The widest restart interval, in pixels, that the rewrite below writes:
** one 16-pixel MCU of 4:2:0 and 4:2:2, two of 4:4:4 and grayscale.  A JPEG
** whose MCU is wider (horizontal sampling factor 3 or 4: 24 or 32 pixels)
** gets one MCU per interval, the finest there is. */
#define STOKE__JPEG_CUT_PX 16

/* true when data[0..n) is a JPEG the rewrite below would leave as it is:
** cut-ready (stoke__decode_cut_ready) with restart intervals at most
** STOKE__JPEG_CUT_PX wide, or of one MCU.  Only the header is read. */
bool stoke__jpeg_rewrite_done(const void *data, size_t n);

/* Rewrite a JPEG losslessly for packed shards (jpeg_transcode.c): same
** coefficients, one baseline scan, optimised Huffman tables, restart
** intervals at most STOKE__JPEG_CUT_PX wide.  0 with *out (the caller
** frees it through the decoder's allocator) and *out_n; 0 with *out NULL
** when the file is to be kept as it is (CMYK/YCCK, or
** stoke__jpeg_rewrite_done); STOKE_EFORMAT or STOKE_ENOMEM with a message
** otherwise. */
int stoke__jpeg_transcode(stoke__decoder *d, const uint8_t *data, size_t n,
                          uint8_t **out, size_t *out_n, char *err,
                          size_t cap);

/* Encode w x h RGB8 pixels (rows `stride` bytes apart) as a baseline JPEG
** of `quality` (1..100), 4:2:0, optimised Huffman tables and a restart
** marker every MCU, so that crops cut as from the rewrite above (stoke
** pack --max-side).  0 with *out (freed through the decoder's allocator)
** and *out_n; STOKE_EINVAL or STOKE_ENOMEM with a message otherwise. */
int stoke__jpeg_encode(stoke__decoder *d, const uint8_t *rgb, uint32_t w,
                       uint32_t h, size_t stride, int quality, uint8_t **out,
                       size_t *out_n, char *err, size_t cap);

#endif /* STOKE_DECODE_H */
