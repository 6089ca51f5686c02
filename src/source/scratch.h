/* scratch.h — the per-worker scratch bound of an image source (scratch.c),
** for the host ledger (src/pipeline/ledger.c via the source's
** scratch_bound op).  Internal. */
#ifndef STOKE_SOURCE_SCRATCH_H
#define STOKE_SOURCE_SCRATCH_H

#include "storage/blob.h"

typedef struct stoke__scratch_bound {
  int basis;              /* stoke_scratch_basis */
  uint32_t width, height; /* the largest image (each side's largest) */
  uint64_t file_bytes;    /* the largest encoded file */
  int progressive;        /* a progressive JPEG was seen */
  int mapped;             /* packed shards: read through the mapping */
} stoke__scratch_bound;

/* The bound of set's images: from cfg's declaration, a packed index, or
** the headers of up to STOKE_SCRATCH_PROBE samples spread over the set
** (reads them with a decoder made with a).  0, or STOKE_EIO / STOKE_ENOMEM
** with the message set when the storage fails under the probe. */
int stoke__scratch_probe(const stoke__blobset *set,
                         const stoke_image_config *cfg,
                         const stoke_allocator *a,
                         stoke__scratch_bound *out);

/* Bytes of one worker's scratch at its largest, for output width out_w;
** 0 when the bound has no image. */
uint64_t stoke__scratch_bound_bytes(const stoke__scratch_bound *b,
                                    uint32_t out_w);

#endif
