/* plan_order.c — the plan's order: each epoch's permutation of the shard
** (src/sampler/: sequential, uniform shuffle or block order), a pure
** function of (seed, epoch, rank, world), cut into batches of batch_size
** (the last one shorter unless drop_last).  l->order holds the claim
** epoch's; it is written only while claims are closed (compute), and read
** under mu when a batch is assigned. */
#include "pipeline.h"

#include <string.h>

static void compute(stoke_loader *l, uint64_t epoch) {
  stoke__plan_order(&l->plan, epoch, l->perm, l->order);
}

static int claimable(const stoke_loader *l) {
  return l->next_batch < l->plan.n_batches ? 1 : -1;
}

static void assign(stoke_loader *l, stoke_batch *b) {
  b->n = stoke__plan_batch_len(&l->plan, b->number);
  memcpy(b->indices, l->order + b->number * l->cfg.batch_size,
         b->n * sizeof(size_t));
}

static bool epoch_done(const stoke_loader *l) {
  return l->n_delivered == l->plan.n_batches;
}

/* Every batch of a planned epoch comes: the consumer never starves. */
static bool starved(const stoke_loader *l) {
  (void)l;
  return false;
}

/* The next epoch's order is computed when it starts. */
static void reset(stoke_loader *l) { (void)l; }

const stoke__order_ops stoke__plan_order_ops = {
    .compute = compute,
    .claimable = claimable,
    .assign = assign,
    .epoch_done = epoch_done,
    .starved = starved,
    .reset = reset,
    .ahead = true,
};
