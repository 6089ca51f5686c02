/* sampler.h — the order of an epoch (src/sampler/): counter-based random
** streams, the plan's permutation, sharding and the block order's blocks.
** Nothing here is API. */
#ifndef STOKE_SAMPLER_SAMPLER_H
#define STOKE_SAMPLER_SAMPLER_H

#include "core/core.h"

/* ---- random streams (rng.c) ---------------------------------------------- */

/* The stream of copy j of a sample whose stream is base: base for j = 0,
** else base's key mixed with j. */
void stoke__copy_rng(const stoke_rng *base, unsigned j, stoke_rng *out);

/* ---- blocks and the plan (blocks.c, sampler.c) --------------------------- */

/* The block order's blocks (src/sampler/blocks.c): consecutive samples of
** about block_bytes stored bytes, fixed for the source, and, for the
** epoch whose order was computed last, the block order and where each
** window ends. */
typedef struct stoke__blocks {
  size_t n_blocks;
  size_t *start;       /* n_blocks + 1: block b is samples [start[b],
                          start[b + 1]) */
  size_t window;       /* blocks per window */
  size_t n_windows;
  size_t *order;       /* n_blocks: the blocks in the epoch's order */
  size_t *win_end;     /* n_windows: window w is positions [win_end[w - 1],
                          win_end[w]) of the epoch's permutation */
  const stoke_allocator *alloc;
} stoke__blocks;

/* Cut n samples into blocks of about block_bytes (each at least one
** sample; bytes(user, i) the stored bytes of sample i) and windows of
** `window` blocks.  The arrays are sized for n blocks, whatever the cut:
** stoke__blocks_bytes(n).  0 or STOKE_ENOMEM. */
int stoke__blocks_init(stoke__blocks *b, const stoke_allocator *a, size_t n,
                       uint64_t (*bytes)(const void *user, size_t i),
                       const void *user, uint64_t block_bytes, size_t window);
void stoke__blocks_free(stoke__blocks *b);
uint64_t stoke__blocks_bytes(size_t n);
/* The window holding position t of the epoch's permutation. */
size_t stoke__blocks_window_of(const stoke__blocks *b, size_t t);

typedef struct stoke__plan {
  size_t n_source;     /* samples in the source */
  size_t per_rank;     /* samples this rank sees per epoch */
  size_t batch_size;
  size_t n_batches;    /* batches per epoch for this rank */
  int shuffle;         /* stoke_shuffle */
  uint64_t seed;
  unsigned rank, world;
  int shard_drop_last, drop_last;
  stoke__blocks *blocks; /* STOKE_SHUFFLE_BLOCK: the blocks (plan_order
                            writes their epoch order); else NULL */
} stoke__plan;

/* Fill in per_rank and n_batches from the other fields; STOKE_EINVAL (with
** the TLS message) when the shard is empty. */
int stoke__plan_init(stoke__plan *p);
/* The epoch's order for this rank: order[0..per_rank) = source indices.
** perm is scratch of n_source entries.  A pure function of (plan, epoch). */
void stoke__plan_order(const stoke__plan *p, uint64_t epoch, size_t *perm,
                       size_t *order);
/* With p->blocks: the blocks in epoch's block order (n_blocks entries),
** as stoke__plan_order leaves them in p->blocks->order, without the
** samples' permutation (the read-ahead's look at the next epoch). */
void stoke__plan_block_order(const stoke__plan *p, uint64_t epoch,
                             size_t *order);
/* Samples in the batch at position `batch` of the epoch. */
size_t stoke__plan_batch_len(const stoke__plan *p, size_t batch);

#endif /* STOKE_SAMPLER_SAMPLER_H */
