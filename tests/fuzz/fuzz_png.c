/* fuzz_png.c — PNG through stoke's decoder (png.c over libspng), limits
** set: probe, full decode, a crop decoded row by row (stopping after its
** last row), with and without alpha.  The last 8 bytes choose the crop.
** Property: the crop's window equals the full decode's rows. */
#include "image_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_opts o;
  size_t n = fuzz_take_opts(data, size, &o);
  stoke__decoder *d = oracle_decoder(true, true);
  stoke__decoder *full_d = oracle_decoder(true, true);
  stoke__img_info info;
  char err[256];
  if (stoke__decode_probe(d, data, n, &info, err, sizeof err) == 0 &&
      info.format == STOKE__IMG_PNG &&
      (uint64_t)info.width * info.height <= ORACLE_MAX_PIXELS) {
    stoke__decode_req r = oracle_crop(&o, info.width, info.height);
    stoke__image img;
    if (stoke__decode(d, data, n, &r, &img, err, sizeof err) == 0) {
      full_image f;
      if (oracle_full(full_d, data, n, info.width, info.height, 1,
                      r.keep_alpha, &f)) {
        oracle_check(&img, &f);
        free(f.px);
      }
    }
  } else {
    stoke__image img;
    (void)stoke__decode(d, data, n, NULL, &img, err, sizeof err);
  }
  stoke__decoder_destroy(d);
  stoke__decoder_destroy(full_d);
  return 0;
}
