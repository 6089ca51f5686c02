/* fuzz_jpeg.c — JPEG through stoke's own entry points, limits set: the
** marker walk (peek, cut_ready, rewrite_done), probe, full and region
** decoding with and without restart cuts (jpeg_rst.c), and stoke pack's
** lossless rewrite (jpeg_transcode.c) followed by the cut path on its
** output.  The last 8 bytes choose the crop (image_oracle.h).
**
** Properties: every decoded window equals the full decode at its scale;
** the rewrite is lossless (its full decode equals the original's) and its
** output is cut-ready and left alone by a second rewrite. */
#include "image_oracle.h"

static void check_crops(stoke__decoder *d, const uint8_t *p, size_t n,
                        const stoke__decode_req *r, stoke__decoder *full_d,
                        uint32_t W, uint32_t H) {
  stoke__image img;
  char err[256];
  if (stoke__decode(d, p, n, r, &img, err, sizeof err) != 0 || img.n_warnings)
    return;
  full_image f;
  if (!oracle_full(full_d, p, n, W, H, img.scale, false, &f)) return;
  oracle_check(&img, &f);
  free(f.px);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_opts o;
  size_t n = fuzz_take_opts(data, size, &o);
  stoke__img_info peek, info;
  bool peeked = stoke__decode_peek(data, n, &peek);
  (void)stoke__decode_cut_ready(data, n);
  (void)stoke__jpeg_rewrite_done(data, n);
  stoke__decoder *cut = oracle_decoder(true, true);
  stoke__decoder *plain = oracle_decoder(false, true);
  stoke__decoder *lax = oracle_decoder(true, false);
  /* The reference: its own decoder, so that its decode never reuses the
  ** buffer a window under test points into. */
  stoke__decoder *ref = oracle_decoder(false, true);
  char err[256];
  if (stoke__decode_probe(plain, data, n, &info, err, sizeof err) == 0 &&
      info.format == STOKE__IMG_JPEG && info.width && info.height) {
    /* The hot path's marker walk agrees with libjpeg on the size. */
    if (peeked)
      FUZZ_ASSERT(peek.width == info.width && peek.height == info.height);
    uint32_t W = info.width, H = info.height;
    if ((uint64_t)W * H <= ORACLE_MAX_PIXELS) {
      stoke__decode_req r = oracle_crop(&o, W, H);
      check_crops(cut, data, n, &r, ref, W, H);
      check_crops(plain, data, n, &r, ref, W, H);
      stoke__image img;
      (void)stoke__decode(lax, data, n, &r, &img, err, sizeof err);
      /* The rewrite, then the cut path on what it wrote. */
      uint8_t *out = NULL;
      size_t out_n = 0;
      if (stoke__jpeg_transcode(plain, data, n, &out, &out_n, err,
                                sizeof err) == 0 && out) {
        FUZZ_ASSERT(stoke__jpeg_rewrite_done(out, out_n));
        FUZZ_ASSERT(stoke__decode_cut_ready(out, out_n));
        full_image a, b;
        if (oracle_full(ref, data, n, W, H, 1, false, &a)) {
          FUZZ_ASSERT(oracle_full(ref, out, out_n, W, H, 1, false, &b));
          FUZZ_ASSERT(a.w == b.w && a.h == b.h &&
                      memcmp(a.px, b.px, (size_t)a.w * a.h * a.ch) == 0);
          free(a.px);
          free(b.px);
        }
        check_crops(cut, out, out_n, &r, ref, W, H);
        uint8_t *again = NULL;
        size_t again_n = 0;
        FUZZ_ASSERT(stoke__jpeg_transcode(plain, out, out_n, &again,
                                          &again_n, err, sizeof err) == 0 &&
                    again == NULL);
        free(out);
      }
    }
  } else {
    stoke__image img;
    (void)stoke__decode(cut, data, n, NULL, &img, err, sizeof err);
  }
  stoke__decoder_destroy(cut);
  stoke__decoder_destroy(plain);
  stoke__decoder_destroy(lax);
  stoke__decoder_destroy(ref);
  return 0;
}
