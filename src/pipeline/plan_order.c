/* plan_order.c — the plan's order: each epoch's permutation of the shard
** (src/sampler/: sequential, uniform shuffle or block order), a pure
** function of (seed, epoch, rank, world), cut into batches of batch_size
** (the last one shorter unless drop_last).  `order` holds the claim
** epoch's; it is written only while claims are closed (compute), and read
** under mu when a batch is assigned. */
#include "pipeline.h"

#include <string.h>

/* The loader's order_state with the plan's order. */
typedef struct stoke__plan_state {
  size_t *perm;                  /* n_source scratch for the shuffle */
  size_t *order;                 /* per_rank source indices of claim_epoch */
} stoke__plan_state;

static int create(stoke_loader *l) {
  stoke__plan_state *p = stoke__calloc(l->alloc, 1, sizeof *p);
  if (!p) return STOKE_ENOMEM;
  l->order_state = p;
  p->perm = stoke__calloc(l->alloc, l->plan.n_source, sizeof(size_t));
  p->order = stoke__calloc(l->alloc, l->plan.per_rank, sizeof(size_t));
  return p->perm && p->order ? 0 : STOKE_ENOMEM;
}

static void destroy(stoke_loader *l) {
  stoke__plan_state *p = l->order_state;
  if (!p) return;
  stoke__free(l->alloc, p->perm);
  stoke__free(l->alloc, p->order);
  stoke__free(l->alloc, p);
  l->order_state = NULL;
}

static void compute(stoke_loader *l, uint64_t epoch) {
  stoke__plan_state *p = l->order_state;
  stoke__plan_order(&l->plan, epoch, p->perm, p->order);
}

static int claimable(const stoke_loader *l) {
  return l->next_batch < l->plan.n_batches ? 1 : -1;
}

static void assign(stoke_loader *l, stoke_batch *b) {
  b->n = stoke__plan_batch_len(&l->plan, b->number);
  const stoke__plan_state *p = l->order_state;
  memcpy(b->indices, p->order + b->number * l->cfg.batch_size,
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
    .create = create,
    .destroy = destroy,
    .compute = compute,
    .claimable = claimable,
    .assign = assign,
    .epoch_done = epoch_done,
    .starved = starved,
    .reset = reset,
    .ahead = true,
};
