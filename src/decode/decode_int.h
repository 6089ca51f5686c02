/* decode_int.h — what the files of src/decode/ share; nothing outside
** src/decode/ includes it (they use decode.h). */
#ifndef STOKE_DECODE_INT_H
#define STOKE_DECODE_INT_H

#include "decode/decode.h"

#include <stdio.h> /* jpeglib.h needs FILE and size_t declared first */
#include <jpeglib.h>
#include <setjmp.h>

/* libjpeg error manager: errors and (if fatal) warnings longjmp to jmp. */
typedef struct stoke__jpeg_err {
  struct jpeg_error_mgr pub;   /* first: libjpeg casts to it */
  jmp_buf jmp;
  int code;                    /* STOKE_E* of the longjmp */
  bool warnings_fatal;
  const uint8_t *data;         /* the input, for byte offsets in messages */
  size_t n;
  bool hit_eof;                /* the source ran out of bytes */
  bool decoding;               /* past jpeg_start_decompress */
  char *err;                   /* caller's message buffer for this call */
  size_t cap;
} stoke__jpeg_err;

struct stoke__decoder {
  stoke__decoder_opts opts;
  uint8_t *buf;                /* output pixels; via opts.alloc */
  size_t buf_cap;
  struct jpeg_decompress_struct cinfo; /* reused for every JPEG */
  stoke__jpeg_err jerr;
  struct jpeg_source_mgr src;
  bool cinfo_ready;            /* jpeg_create_decompress done */
  uint8_t *cut;                /* a crop's JPEG cut by restart intervals */
  size_t cut_cap;
};

/* ---- restart-interval cuts (jpeg_rst.c) ---------------------------------- */

/* The layout of a baseline JPEG whose restart intervals tile its MCU rows:
** interval k covers MCU row k / segs_x, columns [k % segs_x * seg_w, +
** seg_w) in pixels. */
typedef struct stoke__jpeg_rst {
  uint32_t width, height;      /* of the image */
  uint32_t mcu_w, mcu_h;       /* MCU size in pixels */
  uint32_t mcus_x, mcus_y;     /* MCUs per row, MCU rows */
  uint32_t interval;           /* restart interval, in MCUs */
  uint32_t seg_w, segs_x;      /* an interval's width in pixels; per row */
  size_t sof_at;               /* offset of the SOF marker */
  size_t scan_at;              /* first byte of entropy-coded data */
} stoke__jpeg_rst;

/* A rectangle of whole intervals, and the pixels it covers. */
typedef struct stoke__jpeg_rst_box {
  uint32_t seg_x0, seg_x1;     /* interval columns [x0, x1) */
  uint32_t seg_y0, seg_y1;     /* MCU rows [y0, y1) */
  uint32_t x, y, w, h;         /* in image pixels (clipped to the image) */
} stoke__jpeg_rst_box;

/* true when data[0..n) is a single-scan baseline (Huffman) JPEG with a
** restart interval that divides its MCU rows; only the header is read. */
bool stoke__jpeg_rst_parse(const uint8_t *data, size_t n, stoke__jpeg_rst *L);
/* The smallest box of intervals covering pixels [x0, x1) x [y0, y1). */
void stoke__jpeg_rst_box_for(const stoke__jpeg_rst *L, uint32_t x0,
                             uint32_t y0, uint32_t x1, uint32_t y1,
                             stoke__jpeg_rst_box *box);
/* Bytes stoke__jpeg_rst_cut may write for box. */
size_t stoke__jpeg_rst_cut_bound(size_t n, const stoke__jpeg_rst_box *box);
/* Write the JPEG of just box into out[0..cap) (cap >= the bound); false
** when the entropy data does not have the markers the header promises. */
bool stoke__jpeg_rst_cut(const stoke__jpeg_rst *L, const uint8_t *data,
                         size_t n, const stoke__jpeg_rst_box *box,
                         uint8_t *out, size_t cap, size_t *out_n);

/* Make d->buf at least n bytes (n already checked against max_bytes by
** stoke__decode_check_size).  Old contents are not kept. */
int stoke__decode_reserve(stoke__decoder *d, size_t n, char *err, size_t cap);
/* The crop box of req in a W x H image (req's w or h 0: the whole image);
** STOKE_EINVAL with a message when it does not lie inside. */
int stoke__decode_crop_box(const stoke__decode_req *req, uint32_t W,
                           uint32_t H, uint32_t *x, uint32_t *y, uint32_t *w,
                           uint32_t *h, char *err, size_t cap);
/* Check w x h against max_pixels, and rows x row_bytes against max_bytes,
** before anything is allocated; *bytes = their product. */
int stoke__decode_check_size(const stoke__decoder *d, uint32_t w, uint32_t h,
                             size_t row_bytes, size_t rows, size_t *bytes,
                             char *err, size_t cap);

/* libjpeg's half of stoke__decoder_create/destroy (src/decode/jpeg.c). */
int stoke__jpeg_init(stoke__decoder *d);
void stoke__jpeg_fini(stoke__decoder *d);

/* Point d's libjpeg context (source, error messages) at data[0..n). */
void stoke__jpeg_begin(stoke__decoder *d, const uint8_t *data, size_t n,
                       char *err, size_t cap);
bool stoke__jpeg_peek(const uint8_t *data, size_t n, stoke__img_info *out);
int stoke__jpeg_probe(stoke__decoder *d, const uint8_t *data, size_t n,
                      stoke__img_info *out, char *err, size_t cap);
int stoke__jpeg_decode(stoke__decoder *d, const uint8_t *data, size_t n,
                       const stoke__decode_req *req, stoke__image *out,
                       char *err, size_t cap);
int stoke__png_probe(stoke__decoder *d, const uint8_t *data, size_t n,
                     stoke__img_info *out, char *err, size_t cap);
int stoke__png_decode(stoke__decoder *d, const uint8_t *data, size_t n,
                      const stoke__decode_req *req, stoke__image *out,
                      char *err, size_t cap);

#endif /* STOKE_DECODE_INT_H */
