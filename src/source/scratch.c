/* scratch.c — a bound of an image source's per-worker scratch, for the host
** ledger (without it the ledger left out about 1 MB a worker on the bench
** corpus, and tens of MB for 12-megapixel photos).
**
** DESIGN
** A worker's scratch (image.c's scratch_create) grows to the largest image
** it has decoded and stays there, so its peak is a function of the
** largest image W x H (of its encoded size E, and of the output width):
**
**   read buffer   1.5 E      folder and tar read into a buffer that grows
**                            by half again (blob.c); packed shards are
**                            mapped: 0
**   restart cut   E + 4 KiB  a crop cut out of a JPEG's restart intervals
**                            (jpeg_rst.c) is never more than the file
**   pixels        3 W H      the decoded window: a random crop may be the
**                            whole image, decoded at full scale
**   libjpeg rows  96 W + 64 KiB  its row groups and colour buffers
**   coefficients  6 W H      progressive JPEGs only: libjpeg keeps every
**                            coefficient (2 bytes, 3 components at most)
**   resampler     H x (3 out_w + 64, to 32) + 6 x 3 out_w   the
**                            horizontal pass's intermediate image and the
**                            output row (resample.c)
**
** W x H comes from where it can be known: exactly from a packed index
** (every image's size is in it); from the headers of up to
** STOKE_SCRATCH_PROBE samples spread evenly over a folder or tar set
** (probed: a larger image elsewhere may exceed it, and the ledger says
** so); or as the user declares it in stoke_image_config.  The allocator's
** own rounding and libjpeg's and libspng's small fixed state are left to
** the documented constant of docs/tuning.md, as are thread stacks. */
#include "source/source.h"

#include <string.h>

#include "source/image.h"
#include "source/scratch.h"

#define ALIGN32(x) (((x) + 31) / 32 * 32)

uint64_t stoke__scratch_bound_bytes(const stoke__scratch_bound *b,
                                    uint32_t out_w) {
  if (!b->width || !b->height) return 0;
  uint64_t w = b->width, h = b->height, e = b->file_bytes;
  uint64_t n = 0;
  if (!b->mapped) n += e + e / 2;          /* read buffer */
  n += e + 4096;                           /* restart cut */
  n += 3 * w * h;                          /* pixels */
  n += 96 * w + 65536;                     /* libjpeg rows */
  if (b->progressive) n += 6 * w * h;      /* coefficients */
  n += h * ALIGN32(3 * (uint64_t)out_w + 64) + 6 * 3 * (uint64_t)out_w;
  return n;
}

static void take(stoke__scratch_bound *b, uint32_t w, uint32_t h,
                 uint64_t bytes, int progressive) {
  /* The largest area decides the pixels; keep each dimension's largest
  ** too (rows and the resampler scale with one side), which makes the
  ** bound hold for any mix. */
  if (w > b->width) b->width = w;
  if (h > b->height) b->height = h;
  if (bytes > b->file_bytes) b->file_bytes = bytes;
  if (progressive) b->progressive = 1;
}

/* The j-th of k samples spread evenly over n. */
static size_t probe_index(size_t j, size_t k, size_t n) {
  return k > 1 ? (size_t)((double)j * (double)(n - 1) / (double)(k - 1)) : 0;
}

int stoke__scratch_probe(const stoke__blobset *set,
                         const stoke_image_config *cfg,
                         const stoke_allocator *a,
                         stoke__scratch_bound *out) {
  memset(out, 0, sizeof *out);
  out->mapped = strcmp(stoke__blobset_kind(set), "packed") == 0;
  size_t n = stoke__blobset_n_samples(set);
  if (cfg->largest_width && cfg->largest_height) {
    out->basis = STOKE_SCRATCH_DECLARED;
    out->width = cfg->largest_width;
    out->height = cfg->largest_height;
    /* Without a declared file size, the raw pixels bound an encoded
    ** image well enough (a JPEG or PNG bigger than its pixels is rare). */
    out->file_bytes = cfg->largest_file_bytes
                          ? cfg->largest_file_bytes
                          : 3 * (uint64_t)out->width * out->height;
    return 0;
  }
  if (out->mapped) {
    out->basis = STOKE_SCRATCH_EXACT;
    for (size_t i = 0; i < n; i++) {
      uint32_t w, h;
      stoke__blobset_dims(set, i, &w, &h);
      take(out, w, h, stoke__blobset_bytes(set, i), 0);
    }
    if (out->width) return 0;
    /* An index without sizes (none that stoke pack writes): probe. */
  }
  out->basis = STOKE_SCRATCH_PROBED;
  size_t k = n < STOKE_SCRATCH_PROBE ? n : STOKE_SCRATCH_PROBE;
  stoke__decoder_opts o;
  stoke__decoder_opts_init(&o);
  o.max_pixels = cfg->max_pixels;
  o.max_bytes = (size_t)cfg->max_bytes;
  o.alloc = a;
  stoke__decoder *dec = NULL;
  int rc = stoke__decoder_create(&o, &dec);
  if (rc != 0) return rc;
  stoke__blob_reader r;
  stoke__blob_reader_init(&r, a);
  /* A remote set's: all asked for before the first is read, so that its
  ** read-ahead fetches them io_concurrency at once, where one after
  ** another would cost k round trips of the open.  (A local set's
  ** read-ahead is a hint whose failures nobody hears: not asked.) */
  if (stoke__blobset_http(set))
    for (size_t j = 0; j < k; j++)
      stoke__blobset_read_ahead(set, probe_index(j, k, n), 1);
  for (size_t j = 0; j < k; j++) {
    size_t i = probe_index(j, k, n);
    const uint8_t *bytes;
    size_t len;
    stoke_image_info info;
    char err[STOKE__ERRMSG_CAP];
    int prc = stoke__image_probe(set, i, &r, dec, &bytes, &len, &info, err,
                                 sizeof err);
    if (prc == 0) {
      take(out, info.width, info.height, len, info.progressive);
    } else if (prc == STOKE_EIO || prc == STOKE_ENOMEM) {
      /* The storage failing under the open is the open's error, as a
      ** failed stat of the walk is. */
      rc = stoke__set_tls_error(prc, "images: reading headers for the "
                                     "memory ledger: %s", err);
      break;
    }
    /* Bytes that are no image fail when the sample is made, as a bad
    ** sample (the policy decides); they bound nothing. */
  }
  stoke__blob_reader_free(&r);
  stoke__decoder_destroy(dec);
  return rc;
}

const char *stoke_scratch_basis_name(int basis) {
  switch (basis) {
  case STOKE_SCRATCH_EXACT: return "exact";
  case STOKE_SCRATCH_PROBED: return "probed";
  case STOKE_SCRATCH_DECLARED: return "declared";
  default: return "none";
  }
}
