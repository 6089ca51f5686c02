/* jpeg_transcode.c — rewriting a JPEG for packed shards, losslessly.
**
** The DCT coefficients are read (jpeg_read_coefficients) and written again
** (jpeg_write_coefficients) unchanged, with the same quantisation tables,
** so every decoder gives the same pixels as from the original.  What
** changes:
**   - a restart marker every `interval` MCUs, chosen so the intervals tile
**     each MCU row and are at most STOKE__JPEG_CUT_PX (16) pixels wide, or
**     one MCU where an MCU is wider (sampling factors of 3 or 4): a
**     crop can then be decoded from the intervals that cover it alone
**     (jpeg_rst.c);
**   - one baseline sequential scan, also for progressive files, whose
**     several scans would each have to be entropy-decoded whole;
**   - Huffman tables optimised for the image, which pays for the markers
**     in size (benchmark corpus: 106.1 MB in, 107.2 MB out).  A whole-file
**     decode costs about 10% more instructions with the markers (callgrind,
**     20 corpus files): libjpeg-turbo turns its fast Huffman path off for
**     any file with them.  Crops, cut out, still decode in 470-525 us
**     against 630-690 us by region decoding (bench/README.md);
**   - APPn and COM markers are dropped (EXIF, ICC): torchvision's PIL path
**     ignores them for pixels too.
** CMYK and YCCK files are kept as they are: whether their values are
** inverted is told by an Adobe marker the rewrite would not reproduce. */
#include "decode/decode_int.h"

#include <jerror.h>
#include <string.h>

/* The compress side's own error manager: it longjmps to the same place as
** the decoder's (d->jerr.jmp) but says which side failed, and its errors
** carry no decode position (jpeg.c's describer assumes a decompress
** object). */
typedef struct tc_err {
  struct jpeg_error_mgr pub;
  jmp_buf *jmp;
  int code;
  char *err;
  size_t cap;
} tc_err;

static void tc_exit(j_common_ptr c) {
  tc_err *e = (tc_err *)c->err;
  e->code = c->err->msg_code == JERR_OUT_OF_MEMORY ? STOKE_ENOMEM
                                                   : STOKE_EFORMAT;
  char msg[JMSG_LENGTH_MAX];
  c->err->format_message(c, msg);
  stoke__errf(e->err, e->cap, e->code, "JPEG rewrite: %s", msg);
  longjmp(*e->jmp, 1);
}

static void tc_silent(j_common_ptr c) { (void)c; }

/* Destination: a buffer from the decoder's allocator, doubled when full. */
typedef struct tc_dest {
  struct jpeg_destination_mgr pub;
  const stoke_allocator *a;
  uint8_t *buf;
  size_t cap;
} tc_dest;

static void dest_init(j_compress_ptr c) {
  tc_dest *d = (tc_dest *)c->dest;
  d->pub.next_output_byte = d->buf;
  d->pub.free_in_buffer = d->cap;
}

static boolean dest_grow(j_compress_ptr c) {
  tc_dest *d = (tc_dest *)c->dest;
  size_t cap = d->cap * 2;
  uint8_t *nb = cap > d->cap ? stoke__alloc(d->a, cap) : NULL;
  if (!nb) ERREXIT1(c, JERR_OUT_OF_MEMORY, 0);
  memcpy(nb, d->buf, d->cap);
  stoke__free(d->a, d->buf);
  d->pub.next_output_byte = nb + d->cap;
  d->pub.free_in_buffer = cap - d->cap;
  d->buf = nb;
  d->cap = cap;
  return TRUE;
}

static void dest_term(j_compress_ptr c) { (void)c; }

/* Everything the rewrite changes after its setjmp lives here, on the heap,
** so it is still valid after a longjmp (locals changed after a setjmp are
** not). */
typedef struct tc_ctx {
  struct jpeg_compress_struct co;
  tc_err ce;
  tc_dest dest;
  bool co_made;
} tc_ctx;

/* A compress side for decoder d writing into a buffer of dest_cap bytes
** (doubled as needed); its errors longjmp to d's handler.  NULL when out
** of memory. */
static tc_ctx *tc_new(stoke__decoder *d, size_t dest_cap, char *err,
                      size_t cap) {
  const stoke_allocator *a = d->opts.alloc;
  tc_ctx *t = stoke__calloc(a, 1, sizeof *t);
  if (!t) return NULL;
  t->co.err = jpeg_std_error(&t->ce.pub);
  t->ce.pub.error_exit = tc_exit;
  t->ce.pub.output_message = tc_silent;
  t->ce.jmp = &d->jerr.jmp;
  t->ce.err = err;
  t->ce.cap = cap;
  t->dest = (tc_dest){.a = a, .cap = dest_cap};
  t->dest.pub.init_destination = dest_init;
  t->dest.pub.empty_output_buffer = dest_grow;
  t->dest.pub.term_destination = dest_term;
  return t;
}

/* What t wrote becomes the caller's (*out, *out_n). */
static void tc_take(tc_ctx *t, uint8_t **out, size_t *out_n) {
  *out = t->dest.buf;
  *out_n = t->dest.cap - t->dest.pub.free_in_buffer;
  t->dest.buf = NULL;
}

static void tc_free(stoke__decoder *d, tc_ctx *t) {
  if (t->co_made) jpeg_destroy_compress(&t->co);
  stoke__free(d->opts.alloc, t->dest.buf);
  stoke__free(d->opts.alloc, t);
}

/* The largest divisor of the MCUs in a row that keeps an interval at most
** STOKE__JPEG_CUT_PX wide (1 for 16-pixel MCUs, 2 for 8-pixel ones when
** even; 1 for MCUs wider than that). */
static unsigned pick_interval(const struct jpeg_decompress_struct *c) {
  unsigned mcu_w =
      c->num_components == 1 ? 8u : 8u * (unsigned)c->max_h_samp_factor;
  unsigned mcus = (c->image_width + mcu_w - 1) / mcu_w, best = 1;
  for (unsigned r = 1; r * mcu_w <= STOKE__JPEG_CUT_PX; r++)
    if (mcus % r == 0) best = r;
  return best;
}

/* Below the setjmp of stoke__jpeg_transcode. */
static void rewrite(stoke__decoder *d, tc_ctx *t, const uint8_t *data,
                    size_t n, char *err, size_t cap) {
  jpeg_create_compress(&t->co);
  t->co_made = true;
  t->dest.buf = stoke__alloc(t->dest.a, t->dest.cap);
  if (!t->dest.buf) ERREXIT1(&t->co, JERR_OUT_OF_MEMORY, 0);
  stoke__jpeg_begin(d, data, n, err, cap);
  struct jpeg_decompress_struct *di = &d->cinfo;
  jpeg_read_header(di, TRUE);
  jvirt_barray_ptr *coef = jpeg_read_coefficients(di);
  jpeg_copy_critical_parameters(di, &t->co);
  t->co.dest = &t->dest.pub;
  t->co.optimize_coding = TRUE;
  t->co.restart_in_rows = 0;
  t->co.restart_interval = pick_interval(di);
  jpeg_write_coefficients(&t->co, coef);
  jpeg_finish_compress(&t->co);
  jpeg_finish_decompress(di);
}

bool stoke__jpeg_rewrite_done(const void *data, size_t n) {
  stoke__jpeg_rst L;
  /* One MCU per interval is as fine as a cut gets, however wide the MCU
  ** (found by fuzz_jpeg: a 3x2-sampled file, 24-pixel MCUs, was rewritten
  ** again at every pack; corpus/jpeg/crash-wide-mcu-rewrite). */
  return data && stoke__jpeg_rst_parse(data, n, &L) &&
         (L.seg_w <= STOKE__JPEG_CUT_PX || L.interval == 1);
}

int stoke__jpeg_transcode(stoke__decoder *d, const uint8_t *data, size_t n,
                          uint8_t **out, size_t *out_n, char *err,
                          size_t cap) {
  *out = NULL;
  *out_n = 0;
  if (stoke__decode_sniff(data, n) != STOKE__IMG_JPEG) return 0;
  if (stoke__jpeg_rewrite_done(data, n)) return 0;
  stoke__img_info info;
  int rc = stoke__jpeg_probe(d, data, n, &info, err, cap);
  if (rc != 0) return rc;
  if (info.channels != 1 && info.channels != 3) return 0; /* CMYK, YCCK */
  rc = stoke__decode_check_size(d, info.width, info.height, 0, 0, NULL, err,
                                cap);
  if (rc != 0) return rc;

  tc_ctx *t = tc_new(d, n + n / 8 + 1024, err, cap);
  if (!t)
    return stoke__errf(err, cap, STOKE_ENOMEM,
                       "JPEG rewrite: out of memory");
  if (setjmp(d->jerr.jmp)) {
    /* jpeg.c's handler wrote the message of a decode-side error. */
    jpeg_abort_decompress(&d->cinfo);
    rc = t->ce.code ? t->ce.code : d->jerr.code;
  } else {
    rewrite(d, t, data, n, err, cap);
    tc_take(t, out, out_n);
    rc = 0;
  }
  tc_free(d, t);
  return rc;
}

/* ---- encoding pixels (stoke pack --max-side) ------------------------------ */

/* Below the setjmp of stoke__jpeg_encode. */
static void encode(tc_ctx *t, const uint8_t *rgb, uint32_t w, uint32_t h,
                   size_t stride, int quality) {
  jpeg_create_compress(&t->co);
  t->co_made = true;
  t->dest.buf = stoke__alloc(t->dest.a, t->dest.cap);
  if (!t->dest.buf) ERREXIT1(&t->co, JERR_OUT_OF_MEMORY, 0);
  t->co.dest = &t->dest.pub;
  t->co.image_width = w;
  t->co.image_height = h;
  t->co.input_components = 3;
  t->co.in_color_space = JCS_RGB;
  jpeg_set_defaults(&t->co); /* YCbCr 4:2:0: 16-pixel MCUs, baseline */
  jpeg_set_quality(&t->co, quality, TRUE);
  t->co.optimize_coding = TRUE;
  t->co.dct_method = JDCT_ISLOW;
  /* A restart marker every MCU: every interval is 16 pixels wide, so
  ** crops cut as from `stoke pack`'s lossless rewrite. */
  t->co.restart_in_rows = 0;
  t->co.restart_interval = 1;
  jpeg_start_compress(&t->co, TRUE);
  while (t->co.next_scanline < h) {
    JSAMPROW row = (JSAMPROW)(rgb + (size_t)t->co.next_scanline * stride);
    jpeg_write_scanlines(&t->co, &row, 1);
  }
  jpeg_finish_compress(&t->co);
}

int stoke__jpeg_encode(stoke__decoder *d, const uint8_t *rgb, uint32_t w,
                       uint32_t h, size_t stride, int quality, uint8_t **out,
                       size_t *out_n, char *err, size_t cap) {
  *out = NULL;
  *out_n = 0;
  if (!rgb || w == 0 || h == 0 || stride < 3 * (size_t)w || quality < 1 ||
      quality > 100)
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "JPEG encode: %ux%u, stride %zu, quality %d", w, h,
                       stride, quality);
  /* About a bit a pixel at quality 90; the buffer doubles as needed. */
  tc_ctx *t = tc_new(d, (size_t)w * h / 4 + 4096, err, cap);
  if (!t)
    return stoke__errf(err, cap, STOKE_ENOMEM, "JPEG encode: out of memory");
  int rc;
  if (setjmp(d->jerr.jmp)) {
    rc = t->ce.code ? t->ce.code : STOKE_EFORMAT;
  } else {
    encode(t, rgb, w, h, stride, quality);
    tc_take(t, out, out_n);
    rc = 0;
  }
  tc_free(d, t);
  return rc;
}
