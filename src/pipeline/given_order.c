/* given_order.c — an epoch order the caller gives (cfg.order_given).
**
** DESIGN
** stoke's own order is a pure function of (seed, epoch, rank, world)
** (src/sampler/).  A caller that must follow somebody else's order — a
** Python DataLoader iterating the user's sampler or batch sampler — gives
** it instead, batch by batch, ahead of the workers: the consumer thread
** appends batches (stoke_loader_order_append) and finally ends the epoch's
** order (stoke_loader_order_end); workers assign given batches to slots in
** the order given, exactly as they assign batches of stoke's own order, so
** everything downstream (chunked claims, in-order delivery, epochs,
** statistics) is unchanged.  An infinite sampler simply never ends its
** order.  With a given order the next epoch is never prefetched: its order
** does not exist before the caller starts it.
**
** Memory: the given batches live in growable arrays holding only what the
** workers have not claimed yet (a claimed batch's indices are in its slot):
** each append first drops the claimed prefix, so a caller that stays a few
** batches ahead (the Python DataLoader keeps the slots' worth) keeps a few
** batches of indices, however long the epoch.
**
** Locking: everything here is protected by l->mu.  The public calls take
** it; the order's ops (stoke__given_order_ops) are called by core.c with
** it held.
** Appends wake workers waiting for something to claim (work_cv). */
#include "pipeline.h"

#include <stdio.h>
#include <string.h>

/* The given order's state is the loader's order_state (NULL: the plan's
** order, and the public calls here refuse). */
static stoke__given *given_of(const stoke_loader *l) {
  return l->order_ops == &stoke__given_order_ops ? l->order_state : NULL;
}

static int create(stoke_loader *l) {
  l->order_state = stoke__calloc(l->alloc, 1, sizeof(stoke__given));
  return l->order_state ? 0 : STOKE_ENOMEM;
}

static void destroy(stoke_loader *l) {
  stoke__given *g = l->order_state;
  if (!g) return;
  stoke__free(l->alloc, g->idx);
  stoke__free(l->alloc, g->b);
  stoke__free(l->alloc, g);
  l->order_state = NULL;
}

void stoke__given_counts(const stoke_loader *l, size_t *batches,
                         size_t *samples) {
  stoke_loader *ml = (stoke_loader *)l;
  pthread_mutex_lock(&ml->mu);
  const stoke__given *g = given_of(l);
  *batches = g->ended ? g->n : g->last_batches;
  *samples = g->ended ? g->n_samples : g->last_samples;
  pthread_mutex_unlock(&ml->mu);
}

static int claimable(const stoke_loader *l) {
  const stoke__given *g = given_of(l);
  if (l->next_batch < g->n) return 1;
  return g->ended ? -1 : 0;
}

static void assign(stoke_loader *l, stoke_batch *b) {
  const stoke__given *g = given_of(l);
  const stoke__given_batch *gb = &g->b[b->number - g->base];
  b->n = gb->len;
  memcpy(b->indices, g->idx + gb->off, b->n * sizeof(size_t));
}

static bool epoch_done(const stoke_loader *l) {
  return given_of(l)->ended && l->n_delivered == given_of(l)->n;
}

static bool starved(const stoke_loader *l) {
  return !given_of(l)->ended && l->n_delivered == given_of(l)->n;
}

static void reset(stoke_loader *l) {
  stoke__given *g = given_of(l);
  g->last_batches = g->n;
  g->last_samples = g->n_samples;
  g->n_idx = 0;
  g->base = g->n = g->n_samples = 0;
  g->ended = false;
}

/* Nothing to compute: the caller gives the order as the epoch runs. */
static void compute(stoke_loader *l, uint64_t epoch) {
  (void)l;
  (void)epoch;
}

const stoke__order_ops stoke__given_order_ops = {
    .create = create,
    .destroy = destroy,
    .compute = compute,
    .claimable = claimable,
    .assign = assign,
    .epoch_done = epoch_done,
    .starved = starved,
    .reset = reset,
    .ahead = false,
};

/* Drop the batches workers have claimed (their indices are in their
** slots).  Between epochs l->next_batch still counts the last epoch, whose
** order was reset: nothing is claimed then. */
static void compact(stoke_loader *l) {
  stoke__given *g = given_of(l);
  size_t done = l->epoch_active ? l->next_batch : 0;
  if (done <= g->base) return;
  size_t drop = done - g->base, keep = g->n - done;
  size_t first = keep ? g->b[drop].off : g->n_idx;
  memmove(g->idx, g->idx + first, (g->n_idx - first) * sizeof *g->idx);
  g->n_idx -= first;
  for (size_t k = 0; k < keep; k++) {
    g->b[k].off = g->b[drop + k].off - first;
    g->b[k].len = g->b[drop + k].len;
  }
  g->base = done;
}

/* Make room for `need` elements of `size` bytes in *p (capacity *cap,
** `used` in use).  false: out of memory (nothing changed). */
static bool grow(const stoke_allocator *a, void **p, size_t *cap, size_t need,
                 size_t used, size_t size) {
  if (need <= *cap) return true;
  size_t n = *cap ? *cap : 64, bytes;
  while (n < need)
    if (!stoke__mul_ok(n, 2, &n)) return false;
  if (!stoke__mul_ok(n, size, &bytes)) return false;
  void *q = stoke__alloc(a, bytes);
  if (!q) return false;
  if (used) memcpy(q, *p, used * size);
  stoke__free(a, *p);
  *p = q;
  *cap = n;
  return true;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int refuse(stoke_loader *l, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(l->lastmsg, sizeof l->lastmsg, fmt, ap);
  va_end(ap);
  return STOKE_EINVAL;
}

/* Check the batches of one append (mu held); *total gets their samples. */
static int check_append(stoke_loader *l, const size_t *indices,
                        const size_t *batch_lens, size_t n_batches,
                        size_t *total) {
  const stoke__given *g = given_of(l);
  size_t bsz = l->cfg.batch_size, n_src = l->src->n_samples, sum = 0;
  if (!g)
    return refuse(l, "order_append: the loader was created without "
                     "order_given");
  if (g->ended)
    return refuse(l, "order_append: this epoch's order was ended "
                     "(stoke_loader_order_end); give the next epoch's "
                     "batches after next() returned STOKE_END");
  if (n_batches && !indices)
    return refuse(l, "order_append: indices is NULL");
  for (size_t k = 0; k < n_batches; k++) {
    size_t n = batch_lens ? batch_lens[k] : bsz;
    if (n == 0 || n > bsz)
      return refuse(l, "order_append: batch %zu of the call has %zu "
                       "samples, expected 1..%zu (the batch size)",
                    k, n, bsz);
    sum += n;
  }
  for (size_t i = 0; i < sum; i++)
    if (indices[i] >= n_src)
      return refuse(l, "order_append: index %zu (entry %zu) is not below "
                       "the source's %zu samples",
                    indices[i], i, n_src);
  *total = sum;
  return 0;
}

int stoke_loader_order_append(stoke_loader *l, const size_t *indices,
                              const size_t *batch_lens, size_t n_batches) {
  if (!l) return STOKE_EINVAL;
  pthread_mutex_lock(&l->mu);
  size_t total = 0;
  int rc = check_append(l, indices, batch_lens, n_batches, &total);
  stoke__given *g = given_of(l);
  if (rc == 0 && n_batches) {
    compact(l);
    size_t kept = g->n - g->base;
    if (!grow(l->alloc, (void **)&g->idx, &g->cap_idx, g->n_idx + total,
              g->n_idx, sizeof *g->idx) ||
        !grow(l->alloc, (void **)&g->b, &g->cap_b, kept + n_batches, kept,
              sizeof *g->b))
      rc = refuse(l, "order_append: out of memory for %zu more batches",
                  n_batches);
  }
  if (rc == 0 && n_batches) {
    memcpy(g->idx + g->n_idx, indices, total * sizeof *indices);
    size_t kept = g->n - g->base;
    for (size_t k = 0; k < n_batches; k++) {
      g->b[kept + k].off = g->n_idx;
      g->b[kept + k].len = batch_lens ? batch_lens[k] : l->cfg.batch_size;
      g->n_idx += g->b[kept + k].len;
    }
    g->n += n_batches;
    g->n_samples += total;
    stoke__wake_workers_locked(l);
  }
  pthread_mutex_unlock(&l->mu);
  return rc;
}

int stoke_loader_order_end(stoke_loader *l) {
  if (!l) return STOKE_EINVAL;
  pthread_mutex_lock(&l->mu);
  int rc = 0;
  if (!given_of(l))
    rc = refuse(l, "order_end: the loader was created without order_given");
  else {
    given_of(l)->ended = true;
    /* Workers waiting for more learn that the epoch is all claimed. */
    stoke__wake_workers_locked(l);
  }
  pthread_mutex_unlock(&l->mu);
  return rc;
}
