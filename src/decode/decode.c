/* decode.c — the decoder context and the calls that pick a format's
** decoder (jpeg.c, png.c) for the bytes given.  What the formats share
** (sniffing, the scale choice, crop boxes, limits, the output buffer) is
** common.c's, below them. */
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
