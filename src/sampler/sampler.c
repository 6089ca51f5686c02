/* sampler.c — the order of an epoch.
**
** The order is a pure function of (seed, epoch, rank, world): a Fisher-Yates
** shuffle driven by the counter-based stream (seed, epoch, SHUFFLE_STREAM),
** then the DistributedSampler rule: pad the permutation to a multiple of
** world by repeating it from the start (or drop its tail), and give rank r
** the positions r, r + world, r + 2*world, ...  Nothing depends on the
** worker count, the prefetch depth or timing. */
#include "sampler/sampler.h"

/* Sample streams use the sample index (< 2^63) as the last coordinate, so
** these values can never collide with one of them. */
#define SHUFFLE_STREAM UINT64_MAX
#define BLOCK_STREAM (UINT64_MAX - 1)

int stoke__plan_init(stoke__plan *p) {
  size_t n = p->n_source, w = p->world;
  if (w > 1) {
    p->per_rank = p->shard_drop_last ? n / w : (n + w - 1) / w;
  } else {
    p->per_rank = n;
  }
  if (p->per_rank == 0)
    return stoke__set_tls_error(
        STOKE_EINVAL, "rank %u of %u gets no samples: the source has %zu",
        p->rank, p->world, n);
  size_t b = p->batch_size;
  /* As in PyTorch, drop_last with a batch larger than the shard gives an
  ** epoch of no batches: next() returns STOKE_END at once. */
  p->n_batches = p->drop_last ? p->per_rank / b : (p->per_rank + b - 1) / b;
  return 0;
}

static void fisher_yates(size_t *v, size_t n, stoke_rng *rng) {
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)stoke_rng_below(rng, (uint64_t)i);
    size_t t = v[i - 1];
    v[i - 1] = v[j];
    v[j] = t;
  }
}

/* The blocks of epoch's block order, shuffled: the stream's first draws. */
static void shuffle_blocks(const stoke__plan *p, uint64_t epoch,
                           size_t *order, stoke_rng *rng) {
  stoke_rng_init(rng, p->seed, epoch, BLOCK_STREAM);
  for (size_t k = 0; k < p->blocks->n_blocks; k++) order[k] = k;
  fisher_yates(order, p->blocks->n_blocks, rng);
}

void stoke__plan_block_order(const stoke__plan *p, uint64_t epoch,
                             size_t *order) {
  stoke_rng rng;
  shuffle_blocks(p, epoch, order, &rng);
}

/* The block order (blocks.c): the blocks shuffled, then the samples of
** each window of blocks shuffled among themselves, from one stream. */
static void block_order(const stoke__plan *p, uint64_t epoch, size_t *perm) {
  stoke__blocks *b = p->blocks;
  stoke_rng rng;
  shuffle_blocks(p, epoch, b->order, &rng);
  size_t pos = 0;
  for (size_t w = 0; w < b->n_windows; w++) {
    size_t from = pos;
    size_t last = STOKE__MIN((w + 1) * b->window, b->n_blocks);
    for (size_t k = w * b->window; k < last; k++)
      for (size_t i = b->start[b->order[k]]; i < b->start[b->order[k] + 1];
           i++)
        perm[pos++] = i;
    fisher_yates(perm + from, pos - from, &rng);
    b->win_end[w] = pos;
  }
}

void stoke__plan_order(const stoke__plan *p, uint64_t epoch, size_t *perm,
                       size_t *order) {
  size_t n = p->n_source;
  if (p->shuffle == STOKE_SHUFFLE_BLOCK && p->blocks) {
    block_order(p, epoch, perm);
  } else {
    for (size_t i = 0; i < n; i++) perm[i] = i;
  }
  if (p->shuffle == STOKE_SHUFFLE_UNIFORM) {
    stoke_rng rng;
    stoke_rng_init(&rng, p->seed, epoch, SHUFFLE_STREAM);
    fisher_yates(perm, n, &rng); /* the same draws as the loop it replaced */
  }
  /* Position t of the padded permutation is perm[t % n]. */
  for (size_t i = 0; i < p->per_rank; i++) {
    size_t t = p->rank + i * (size_t)p->world;
    order[i] = perm[t % n];
  }
}

size_t stoke__plan_batch_len(const stoke__plan *p, size_t batch) {
  size_t start = batch * p->batch_size;
  if (start >= p->per_rank) return 0;
  return STOKE__MIN(p->batch_size, p->per_rank - start);
}
