/* block_readahead.c — the block order in the loader: its blocks, and
** reading the next window's blocks ahead.
**
** DESIGN
** With shuffle = STOKE_SHUFFLE_BLOCK the epoch's permutation (sampler.c)
** runs window after window of shuffled blocks (src/sampler/blocks.c).
** When a worker assigns a batch (claim(), under mu) it looks where the
** batch's last position falls: the windows from the first not yet read
** ahead up to that one, and the one after it, are collected into the
** worker's list (their blocks' sample ranges), and the worker asks the
** source to read them ahead (madvise / posix_fadvise WILLNEED, through
** the source's syscall table) before it fills its chunk, without the
** lock.  So storage reads the next window sequentially while this one is
** decoded.  Read-ahead is advice: it changes no byte of any batch, and a
** call that fails is ignored.  ra_next is reset whenever an order is
** computed (a new epoch's claims), under mu. */
#include "pipeline.h"

#include <string.h>

static size_t window_of(const stoke_config *c) {
  return c->shuffle_window ? c->shuffle_window : STOKE_BLOCK_WINDOW_DEFAULT;
}

uint64_t stoke__readahead_bytes(const stoke_config *c, unsigned n_workers,
                            size_t n_source) {
  if (c->shuffle != STOKE_SHUFFLE_BLOCK || c->order_given) return 0;
  return stoke__blocks_bytes(n_source) + sizeof(stoke__blocks) +
         (uint64_t)STOKE__MAX(n_workers, 1u) * 4 * window_of(c) *
             sizeof(size_t);
}

/* The stored bytes of a sample: the source's, or its fields' bytes. */
static uint64_t sample_bytes(const void *user, size_t i) {
  const stoke_source *src = user;
  if (src->ops->stored_bytes) return src->ops->stored_bytes(src, i);
  uint64_t n = 0;
  for (size_t f = 0; f < src->n_fields; f++) n += src->field_bytes[f];
  return n;
}

int stoke__readahead_init(stoke_loader *l) {
  if (l->cfg.shuffle != STOKE_SHUFFLE_BLOCK || l->cfg.order_given) return 0;
  l->blocks = stoke__calloc(l->alloc, 1, sizeof *l->blocks);
  if (!l->blocks) return STOKE_ENOMEM;
  uint64_t bytes = l->cfg.shuffle_block_bytes ? l->cfg.shuffle_block_bytes
                                              : STOKE_BLOCK_BYTES_DEFAULT;
  int rc = stoke__blocks_init(l->blocks, l->alloc, l->src->n_samples,
                              sample_bytes, l->src, bytes, window_of(&l->cfg));
  if (rc) {
    stoke__free(l->alloc, l->blocks);
    l->blocks = NULL;
    return rc;
  }
  l->plan.blocks = l->blocks;
  size_t n = STOKE__MAX(l->n_workers, 1u);
  for (size_t i = 0; i < n; i++) {
    stoke__worker *w = &l->workers[i];
    w->ra = stoke__calloc(l->alloc, 4 * l->blocks->window, sizeof(size_t));
    if (!w->ra) return STOKE_ENOMEM;
  }
  return 0;
}

void stoke__readahead_free(stoke_loader *l) {
  if (l->workers)
    for (size_t i = 0; i < STOKE__MAX(l->n_workers, 1u); i++)
      stoke__free(l->alloc, l->workers[i].ra);
  if (l->blocks) stoke__blocks_free(l->blocks);
  stoke__free(l->alloc, l->blocks);
  l->blocks = NULL;
}

/* Window w's blocks into w's list. */
static void collect_window(const stoke__blocks *bl, size_t win,
                           stoke__worker *w) {
  size_t last = STOKE__MIN((win + 1) * bl->window, bl->n_blocks);
  for (size_t k = win * bl->window; k < last; k++) {
    size_t b = bl->order[k];
    w->ra[2 * w->ra_n] = bl->start[b];
    w->ra[2 * w->ra_n + 1] = bl->start[b + 1] - bl->start[b];
    w->ra_n++;
  }
}

void stoke__readahead_collect_locked(stoke_loader *l, stoke__worker *w,
                                 const stoke_batch *b) {
  const stoke__blocks *bl = l->blocks;
  if (!bl || !l->src->ops->read_ahead || b->n == 0 || w->ra_n) return;
  /* The batch's last position in the permutation (rank r takes r, r +
  ** world, ...; past the end it wraps, as the padding does). */
  size_t pos = b->number * l->cfg.batch_size + b->n - 1;
  size_t t = (l->cfg.rank + pos * (size_t)l->cfg.world) % l->plan.n_source;
  size_t win = stoke__blocks_window_of(bl, t);
  if (win + 1 < l->ra_next) return; /* this and the next are advised */
  size_t from = STOKE__MAX(l->ra_next, win);
  size_t to = STOKE__MIN(win + 1, bl->n_windows - 1);
  for (size_t v = from; v <= to; v++) collect_window(bl, v, w);
  l->ra_next = to + 1;
}

void stoke__readahead_issue(stoke_loader *l, stoke__worker *w) {
  for (size_t k = 0; k < w->ra_n; k++)
    l->src->ops->read_ahead(l->src, w->ra[2 * k], w->ra[2 * k + 1]);
  w->ra_n = 0;
}
