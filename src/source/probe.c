/* probe.c — reading one stored image and probing its header: shared by
** the image source (image.c), its scratch bound (scratch.c) and the
** packer (pack.c). */
#include "source/image.h"

#include <stdio.h>
#include <string.h>

int stoke__image_probe(const stoke__blobset *set, size_t index,
                       stoke__blob_reader *r, stoke__decoder *dec,
                       const uint8_t **bytes, size_t *n,
                       stoke_image_info *out, char *err, size_t cap) {
  char msg[STOKE__ERRMSG_CAP], where[256];
  int rc = stoke__blobset_read(set, index, r, bytes, n, err, cap);
  if (rc != 0) return rc;
  stoke__img_info info;
  rc = stoke__decode_probe(dec, *bytes, *n, &info, msg, sizeof msg);
  if (rc != 0) {
    stoke__blobset_describe(set, index, where, sizeof where);
    snprintf(err, cap, "sample %zu (%s): %s", index, where, msg);
    return rc;
  }
  memset(out, 0, sizeof *out);
  out->format = info.format == STOKE__IMG_JPEG ? STOKE_IMAGE_JPEG
                                               : STOKE_IMAGE_PNG;
  out->width = info.width;
  out->height = info.height;
  out->channels = info.channels;
  out->progressive = info.progressive;
  out->has_alpha = info.has_alpha;
  out->restart_cuts = stoke__decode_cut_ready(*bytes, *n);
  out->bytes = *n;
  return 0;
}
