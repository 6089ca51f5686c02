/* sampler.c — the order of an epoch.
**
** The order is a pure function of (seed, epoch, rank, world): a Fisher-Yates
** shuffle driven by the counter-based stream (seed, epoch, SHUFFLE_STREAM),
** then the DistributedSampler rule: pad the permutation to a multiple of
** world by repeating it from the start (or drop its tail), and give rank r
** the positions r, r + world, r + 2*world, ...  Nothing depends on the
** worker count, the prefetch depth or timing. */
#include "internal.h"

/* Sample streams use the sample index (< 2^63) as the last coordinate, so
** this value can never collide with one of them. */
#define SHUFFLE_STREAM UINT64_MAX

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

void stoke__plan_order(const stoke__plan *p, uint64_t epoch, size_t *perm,
                       size_t *order) {
  size_t n = p->n_source;
  for (size_t i = 0; i < n; i++) perm[i] = i;
  if (p->shuffle) {
    stoke_rng rng;
    stoke_rng_init(&rng, p->seed, epoch, SHUFFLE_STREAM);
    for (size_t i = n - 1; i > 0; i--) {
      size_t j = (size_t)stoke_rng_below(&rng, (uint64_t)i + 1);
      size_t t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
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
