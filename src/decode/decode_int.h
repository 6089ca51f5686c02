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
};

/* printf into err[0..cap); returns code. */
int stoke__decode_fail(char *err, size_t cap, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* Make d->buf at least n bytes (n already checked against max_bytes by
** stoke__decode_check_size).  Old contents are not kept. */
int stoke__decode_reserve(stoke__decoder *d, size_t n, char *err, size_t cap);
/* Check w x h against max_pixels, and rows x row_bytes against max_bytes,
** before anything is allocated; *bytes = their product. */
int stoke__decode_check_size(const stoke__decoder *d, uint32_t w, uint32_t h,
                             size_t row_bytes, size_t rows, size_t *bytes,
                             char *err, size_t cap);

/* libjpeg's half of stoke__decoder_create/destroy (src/decode/jpeg.c). */
int stoke__jpeg_init(stoke__decoder *d);
void stoke__jpeg_fini(stoke__decoder *d);

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
