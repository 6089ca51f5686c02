/* jpeg.c — JPEG through libjpeg-turbo's libjpeg API, with DCT-domain
** scaling and region decoding.
**
** One jpeg_decompress_struct per decoder, created once and reused: after
** every image, good or bad, it goes back to its start state through
** jpeg_finish_decompress or jpeg_abort_decompress.  libjpeg reports errors
** by calling error_exit, which must not return; ours longjmps back to
** jpeg_decode/jpeg_probe, which abort the image and return the code.  All
** state that must survive the longjmp lives in the decoder, not in locals.
**
** Region decoding: rows above the crop are skipped (jpeg_skip_scanlines
** skips the IDCT and colour conversion; baseline files still entropy-
** decode them), columns outside it are not decoded at all
** (jpeg_crop_scanline, which widens the window leftwards to an iMCU
** boundary), and decoding stops after the last row needed. */
#include "decode/decode_int.h"

#include <jerror.h>
#include <string.h>

/* ---- errors -------------------------------------------------------------- */

static void jerr_describe(j_common_ptr c, stoke__jpeg_err *e) {
  if (!e->err || e->cap == 0) return;
  j_decompress_ptr dc = (j_decompress_ptr)c;
  char where[96] = "in the header";
  if (e->decoding)
    snprintf(where, sizeof where, "at row %u of %u", dc->output_scanline,
             dc->output_height);
  if (e->hit_eof || c->err->msg_code == JWRN_JPEG_EOF) {
    snprintf(e->err, e->cap,
             "JPEG: premature end of data after %zu bytes (%s)", e->n,
             where);
    return;
  }
  char msg[JMSG_LENGTH_MAX];
  c->err->format_message(c, msg);
  size_t at = e->n;
  if (dc->src && dc->src->next_input_byte >= e->data &&
      dc->src->next_input_byte <= e->data + e->n)
    at = (size_t)(dc->src->next_input_byte - e->data);
  snprintf(e->err, e->cap, "JPEG: %s (near byte %zu of %zu, %s)", msg, at,
           e->n, where);
}

static void jerr_exit(j_common_ptr c) {
  stoke__jpeg_err *e = (stoke__jpeg_err *)c->err;
  e->code = c->err->msg_code == JERR_OUT_OF_MEMORY ? STOKE_ENOMEM
                                                   : STOKE_EFORMAT;
  jerr_describe(c, e);
  longjmp(e->jmp, 1);
}

/* Level -1 is a corrupt-data warning: libjpeg would fill the gap (grey
** blocks) and carry on, which a training set must not see silently. */
static void jerr_emit(j_common_ptr c, int level) {
  stoke__jpeg_err *e = (stoke__jpeg_err *)c->err;
  if (level >= 0) return; /* trace messages */
  c->err->num_warnings++;
  if (!e->warnings_fatal) return;
  e->code = STOKE_EFORMAT;
  jerr_describe(c, e);
  longjmp(e->jmp, 1);
}

static void jerr_output(j_common_ptr c) {
  (void)c; /* the library never prints */
}

/* ---- source: the whole input is in memory -------------------------------- */

static void src_init(j_decompress_ptr c) { (void)c; }
static void src_term(j_decompress_ptr c) { (void)c; }

/* Called only when the data ran out.  As jdatasrc.c does, warn and insert
** an EOI so a tolerant caller gets the partial image; with fatal warnings
** the warning longjmps and the EOI is never read. */
static boolean src_fill(j_decompress_ptr c) {
  static const JOCTET eoi[2] = {0xff, JPEG_EOI};
  stoke__jpeg_err *e = (stoke__jpeg_err *)c->err;
  e->hit_eof = true;
  WARNMS(c, JWRN_JPEG_EOF);
  c->src->next_input_byte = eoi;
  c->src->bytes_in_buffer = 2;
  return TRUE;
}

static void src_skip(j_decompress_ptr c, long n) {
  if (n <= 0) return;
  struct jpeg_source_mgr *s = c->src;
  if ((size_t)n > s->bytes_in_buffer) {
    s->next_input_byte += s->bytes_in_buffer;
    s->bytes_in_buffer = 0;
    (void)src_fill(c);
    return;
  }
  s->next_input_byte += n;
  s->bytes_in_buffer -= (size_t)n;
}

int stoke__jpeg_init(stoke__decoder *d) {
  struct jpeg_decompress_struct *c = &d->cinfo;
  c->err = jpeg_std_error(&d->jerr.pub);
  d->jerr.pub.error_exit = jerr_exit;
  d->jerr.pub.emit_message = jerr_emit;
  d->jerr.pub.output_message = jerr_output;
  d->jerr.warnings_fatal = d->opts.warnings_fatal;
  d->jerr.err = NULL;
  d->jerr.cap = 0;
  if (setjmp(d->jerr.jmp)) return d->jerr.code; /* out of memory */
  jpeg_create_decompress(c);
  d->src.init_source = src_init;
  d->src.fill_input_buffer = src_fill;
  d->src.skip_input_data = src_skip;
  d->src.resync_to_restart = jpeg_resync_to_restart;
  d->src.term_source = src_term;
  c->src = &d->src;
  d->cinfo_ready = true;
  return 0;
}

void stoke__jpeg_fini(stoke__decoder *d) {
  if (d->cinfo_ready) jpeg_destroy_decompress(&d->cinfo);
  d->cinfo_ready = false;
}

/* Point the context at one input and its message buffer. */
void stoke__jpeg_begin(stoke__decoder *d, const uint8_t *data, size_t n,
                       char *err, size_t cap) {
  d->jerr.data = data;
  d->jerr.n = n;
  d->jerr.hit_eof = false;
  d->jerr.decoding = false;
  d->jerr.err = err;
  d->jerr.cap = cap;
  d->jerr.code = 0;
  d->jerr.pub.num_warnings = 0;
  d->src.next_input_byte = data;
  d->src.bytes_in_buffer = n;
}

/* ---- header -------------------------------------------------------------- */

/* Find the frame header (SOFn) by walking the marker segments ourselves,
** so that a header claiming a huge image is refused with our message
** before libjpeg sees it.  Returns false when there is no well-formed SOF
** before the first scan; libjpeg then reports what is wrong.  *info gets
** what the SOF says. */
static bool find_sof(const uint8_t *p, size_t n, stoke__img_info *info) {
  size_t i = 2; /* after SOI */
  while (i + 4 <= n) {
    if (p[i] != 0xff) return false;
    uint8_t m = p[i + 1];
    if (m == 0xff) { /* fill byte */
      i++;
      continue;
    }
    if (m == 0x01 || (m >= 0xd0 && m <= 0xd8)) { /* no length */
      i += 2;
      continue;
    }
    if (m == 0xd9 || m == 0xda) return false; /* EOI or SOS: no SOF */
    size_t len = (size_t)p[i + 2] << 8 | p[i + 3];
    if (len < 2) return false;
    bool sof = m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 &&
               m != 0xcc;
    if (sof) {
      if (len < 8 || i + 10 > n) return false;
      memset(info, 0, sizeof *info);
      info->format = STOKE__IMG_JPEG;
      info->height = (uint32_t)p[i + 5] << 8 | p[i + 6];
      info->width = (uint32_t)p[i + 7] << 8 | p[i + 8];
      info->channels = p[i + 9];
      info->progressive = m == 0xc2 || m == 0xc6 || m == 0xca || m == 0xce;
      return true;
    }
    i += 2 + len;
  }
  return false;
}

bool stoke__jpeg_peek(const uint8_t *data, size_t n, stoke__img_info *out) {
  return n >= 4 && find_sof(data, n, out) && out->width > 0 &&
         out->height > 0 && out->channels > 0;
}

static void fill_info(const struct jpeg_decompress_struct *c,
                      stoke__img_info *info) {
  info->format = STOKE__IMG_JPEG;
  info->width = c->image_width;
  info->height = c->image_height;
  info->channels = (unsigned)c->num_components;
  info->has_alpha = false;
  info->progressive = c->progressive_mode;
}

int stoke__jpeg_probe(stoke__decoder *d, const uint8_t *data, size_t n,
                      stoke__img_info *out, char *err, size_t cap) {
  stoke__jpeg_begin(d, data, n, err, cap);
  if (setjmp(d->jerr.jmp)) {
    jpeg_abort_decompress(&d->cinfo);
    return d->jerr.code;
  }
  jpeg_read_header(&d->cinfo, TRUE);
  fill_info(&d->cinfo, out);
  jpeg_abort_decompress(&d->cinfo);
  return 0;
}

/* ---- pixels -------------------------------------------------------------- */

/* CMYK -> RGB in place: row after row, pixel after pixel, each RGB pixel
** lands at or before the CMYK pixel it came from.  Adobe (Photoshop)
** writes CMYK inverted, and an Adobe APP14 marker is how files say so;
** that is the common case, plain CMYK without the marker is rare. */
static void cmyk_to_rgb(uint8_t *buf, size_t n_px, bool inverted) {
  const uint8_t *s = buf;
  uint8_t *o = buf;
  for (size_t i = 0; i < n_px; i++, s += 4, o += 3) {
    unsigned c = s[0], m = s[1], y = s[2], k = s[3];
    if (!inverted) {
      c = 255 - c;
      m = 255 - m;
      y = 255 - y;
      k = 255 - k;
    }
    o[0] = (uint8_t)((c * k + 127) / 255);
    o[1] = (uint8_t)((m * k + 127) / 255);
    o[2] = (uint8_t)((y * k + 127) / 255);
  }
}

/* Decoded columns asked of jpeg_crop_scanline at least (see decode_body):
** two chroma columns at 2x horizontal subsampling, and the one trimmed. */
#define MIN_WINDOW 5u

/* The body of stoke__jpeg_decode, below its setjmp.  libjpeg errors
** longjmp out of it; its own errors abort the image and return. */
static int decode_body(stoke__decoder *d, const stoke__decode_req *req,
                       stoke__image *out, char *err, size_t cap) {
  struct jpeg_decompress_struct *c = &d->cinfo;
  jpeg_read_header(c, TRUE);
  fill_info(c, &out->info);
  uint32_t W = c->image_width, H = c->image_height;
  int rc = stoke__decode_check_size(d, W, H, 0, 0, NULL, err, cap);
  if (rc != 0) goto abort;

  uint32_t x, y, w, h;
  rc = stoke__decode_crop_box(req, W, H, &x, &y, &w, &h, err, cap);
  if (rc != 0) goto abort;

  bool cmyk = c->jpeg_color_space == JCS_CMYK ||
              c->jpeg_color_space == JCS_YCCK;
  if (!cmyk && c->num_components != 1 && c->num_components != 3) {
    rc = stoke__errf(err, cap, STOKE_EFORMAT,
                     "JPEG: unsupported colour space (%d components)",
                     c->num_components);
    goto abort;
  }
  /* Gray, YCbCr and RGB all convert straight to packed RGB inside
  ** libjpeg-turbo; CMYK/YCCK come out as CMYK and are converted here. */
  c->out_color_space = cmyk ? JCS_CMYK : JCS_EXT_RGB;
  /* libjpeg smooths the blocks of a progressive JPEG whose coefficients
  ** are incomplete (scans missing) from their neighbours, differently for
  ** a jpeg_crop_scanline window than for the whole image, so a crop would
  ** not be the full decode's pixels (found by fuzz_jpeg; corpus/jpeg/
  ** crash-progressive-smoothing-crop).  Off: every window is the full
  ** decode's; complete files, which libjpeg never smooths, are unchanged. */
  c->do_block_smoothing = FALSE;
  unsigned ch_dec = cmyk ? 4 : 3;

  unsigned s = stoke__decode_pick_scale(w, h, req->out_w, req->out_h);
  c->scale_num = 1;
  c->scale_denom = s;
  jpeg_calc_output_dimensions(c);
  uint32_t OW = c->output_width, OH = c->output_height;

  /* The crop in scaled pixels: every scaled pixel that overlaps it. */
  uint32_t sx0 = x / s, sy0 = y / s;
  uint32_t sx1 = STOKE__MIN((uint32_t)(((uint64_t)x + w + s - 1) / s), OW);
  uint32_t sy1 = STOKE__MIN((uint32_t)(((uint64_t)y + h + s - 1) / s), OH);

  /* jpeg_crop_scanline decodes the window as if it were the whole image,
  ** so the fancy (triangle) chroma upsampler replicates the edge chroma
  ** sample where a full decode would blend in its neighbour: the window's
  ** first and last columns can differ from a full decode.  Ask for one
  ** more column on each side and drop it, so every pixel handed out is
  ** exactly what a full decode gives. */
  uint32_t ask0 = sx0 > 0 ? sx0 - 1 : 0;
  uint32_t ask1 = sx1 < OW ? sx1 + 1 : OW;
  /* A window of one subsampled chroma column is upsampled differently
  ** again (libjpeg-turbo's SIMD upsampler; found by fuzz_jpeg, corpus/jpeg/
  ** crash-narrow-crop): never ask for fewer than MIN_WINDOW columns. */
  if (ask1 - ask0 < MIN_WINDOW) ask1 = STOKE__MIN(ask0 + MIN_WINDOW, OW);

  /* Bound the window before jpeg_start_decompress, which allocates (the
  ** whole-image coefficient buffer of a progressive file): the crop moves
  ** its left edge down to an iMCU boundary, less than one iMCU away. */
  uint32_t align = (uint32_t)(c->min_DCT_scaled_size * c->max_h_samp_factor);
  uint32_t wx0 = align ? ask0 / align * align : 0;
  rc = stoke__decode_check_size(d, W, H, (size_t)(ask1 - wx0) * ch_dec,
                                sy1 - sy0, NULL, err, cap);
  if (rc != 0) goto abort;

  jpeg_start_decompress(c);
  d->jerr.decoding = true;

  JDIMENSION xo = ask0, cw = ask1 - ask0;
  if (ask0 > 0 || ask1 < OW) jpeg_crop_scanline(c, &xo, &cw);
  uint32_t trim_l = xo > 0 ? 1 : 0;           /* xo < sx0 when xo > 0 */
  uint32_t trim_r = xo + cw < OW ? 1 : 0;     /* ask1 = sx1 + 1 then */
  size_t stride_dec = (size_t)cw * ch_dec, bytes;
  rc = stoke__decode_check_size(d, W, H, stride_dec, sy1 - sy0, &bytes, err,
                                cap);
  if (rc == 0) rc = stoke__decode_reserve(d, bytes, err, cap);
  if (rc != 0) goto abort;

  if (sy0 > 0 && jpeg_skip_scanlines(c, sy0) != sy0) {
    rc = stoke__errf(err, cap, STOKE_EFORMAT,
                     "JPEG: could not skip to row %u of %u", sy0, OH);
    goto abort;
  }
  while (c->output_scanline < sy1) {
    JSAMPROW rows[16];
    JDIMENSION k = STOKE__MIN(sy1 - c->output_scanline, (JDIMENSION)16);
    for (JDIMENSION i = 0; i < k; i++)
      rows[i] = d->buf + (size_t)(c->output_scanline - sy0 + i) * stride_dec;
    if (jpeg_read_scanlines(c, rows, k) == 0) { /* cannot suspend: a bug */
      rc = stoke__errf(err, cap, STOKE_EFORMAT,
                       "JPEG: decoder stalled at row %u of %u",
                       c->output_scanline, OH);
      goto abort;
    }
  }
  /* Reading to EOI catches trailing corruption (a desynchronised entropy
  ** stream leaves "extraneous bytes"), but only matters when every row was
  ** used; otherwise stop here. */
  if (sy1 == OH)
    jpeg_finish_decompress(c);
  else
    jpeg_abort_decompress(c);
  d->jerr.decoding = false;

  if (cmyk) cmyk_to_rgb(d->buf, (size_t)cw * (sy1 - sy0), c->saw_Adobe_marker);

  out->pixels = d->buf + (size_t)trim_l * 3;
  out->channels = 3;
  out->stride = (size_t)cw * 3;
  out->width = cw - trim_l - trim_r;
  out->height = sy1 - sy0;
  out->scale = s;
  out->win_x = ((uint32_t)xo + trim_l) * s;
  out->win_y = sy0 * s;
  out->win_w = STOKE__MIN(out->width * s, W - out->win_x);
  out->win_h = STOKE__MIN((sy1 - sy0) * s, H - out->win_y);
  out->crop_x = (double)(x - out->win_x) / s;
  out->crop_y = (double)(y - out->win_y) / s;
  out->crop_w = (double)w / s;
  out->crop_h = (double)h / s;
  out->n_warnings = d->jerr.pub.num_warnings;
  return 0;

abort:
  jpeg_abort_decompress(c);
  d->jerr.decoding = false;
  return rc;
}

/* ---- restart cuts (jpeg_rst.c) ------------------------------------------ */

/* Make d->cut at least n bytes. */
static bool reserve_cut(stoke__decoder *d, size_t n) {
  if (n <= d->cut_cap) return true;
  stoke__free(d->opts.alloc, d->cut);
  d->cut_cap = 0;
  d->cut = stoke__alloc(d->opts.alloc, n);
  if (!d->cut) return false;
  d->cut_cap = n;
  return true;
}

/* The cut's inner edges (those inside the image) lack the neighbours the
** chroma upsampler blends in, so their outermost decoded pixels may differ
** from a full decode: drop them.  The crop is at least one scaled pixel
** inside each inner edge (the margin decode_cut adds), so it stays whole. */
static void trim_inner_edges(stoke__image *o, const stoke__jpeg_rst *L,
                             const stoke__jpeg_rst_box *b) {
  unsigned s = o->scale;
  uint32_t ow = (b->w + s - 1) / s, oh = (b->h + s - 1) / s;
  if (b->x > 0 && o->win_x == 0) {
    o->pixels += 3;
    o->width--;
    o->win_x += s;
    o->crop_x -= 1;
  }
  if (b->x + b->w < L->width && o->win_x / s + o->width == ow) o->width--;
  if (b->y > 0 && o->win_y == 0) {
    o->pixels += o->stride;
    o->height--;
    o->win_y += s;
    o->crop_y -= 1;
  }
  if (b->y + b->h < L->height && o->win_y / s + o->height == oh) o->height--;
  o->win_w = STOKE__MIN(o->width * s, b->w - o->win_x);
  o->win_h = STOKE__MIN(o->height * s, b->h - o->win_y);
}

/* Decode req's crop from only the restart intervals that cover it.  false
** when the file has no usable intervals, the cut would be the whole image,
** or anything at all fails: the caller then decodes the original stream
** the ordinary way, which gives the same pixels or reports the error. */
static bool decode_cut(stoke__decoder *d, const uint8_t *data, size_t n,
                       const stoke__decode_req *req, stoke__image *out) {
  stoke__jpeg_rst L;
  if (!d->opts.restart_cuts || req->w == 0 || req->h == 0 ||
      !stoke__jpeg_rst_parse(data, n, &L))
    return false;
  uint32_t cx, cy, cw, ch; /* a bad box is the ordinary path's to report */
  if (stoke__decode_crop_box(req, L.width, L.height, &cx, &cy, &cw, &ch, NULL,
                             0) != 0)
    return false;
  /* A margin of one scaled pixel round the crop, for trim_inner_edges. */
  unsigned s = stoke__decode_pick_scale(req->w, req->h, req->out_w,
                                        req->out_h);
  uint32_t x0 = req->x > s ? req->x - s : 0, y0 = req->y > s ? req->y - s : 0;
  uint32_t x1 = STOKE__MIN(req->x + req->w + s, L.width);
  uint32_t y1 = STOKE__MIN(req->y + req->h + s, L.height);
  stoke__jpeg_rst_box b;
  stoke__jpeg_rst_box_for(&L, x0, y0, x1, y1, &b);
  if (b.w == L.width && b.h == L.height) return false;
  size_t cut_n;
  if (!reserve_cut(d, stoke__jpeg_rst_cut_bound(n, &b)) ||
      !stoke__jpeg_rst_cut(&L, data, n, &b, d->cut, d->cut_cap, &cut_n))
    return false;

  stoke__decode_req r = *req;
  r.x -= b.x;
  r.y -= b.y;
  stoke__jpeg_begin(d, d->cut, cut_n, NULL, 0);
  if (setjmp(d->jerr.jmp)) {
    jpeg_abort_decompress(&d->cinfo);
    d->jerr.decoding = false;
    return false;
  }
  if (decode_body(d, &r, out, NULL, 0) != 0) return false;
  trim_inner_edges(out, &L, &b);
  out->win_x += b.x;
  out->win_y += b.y;
  out->info.width = L.width;
  out->info.height = L.height;
  out->restart_cut = true;
  return true;
}

int stoke__jpeg_decode(stoke__decoder *d, const uint8_t *data, size_t n,
                       const stoke__decode_req *req, stoke__image *out,
                       char *err, size_t cap) {
  stoke__img_info sof;
  if (find_sof(data, n, &sof)) {
    out->info.format = STOKE__IMG_JPEG;
    out->info.width = sof.width;
    out->info.height = sof.height;
    int rc = stoke__decode_check_size(d, sof.width, sof.height, 0, 0, NULL,
                                      err, cap);
    if (rc != 0) return rc;
  }
  if (decode_cut(d, data, n, req, out)) return 0;
  stoke__img_info seen = out->info;
  memset(out, 0, sizeof *out);
  out->info = seen;
  stoke__jpeg_begin(d, data, n, err, cap);
  if (setjmp(d->jerr.jmp)) {
    jpeg_abort_decompress(&d->cinfo);
    d->jerr.decoding = false;
    stoke__img_info info = out->info;
    memset(out, 0, sizeof *out);
    out->info = info;
    return d->jerr.code;
  }
  return decode_body(d, req, out, err, cap);
}
