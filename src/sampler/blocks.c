/* blocks.c — the block order's blocks, for datasets larger than the page
** cache.
**
** A uniform shuffle of a dataset that does not fit in memory makes every
** sample a random read from storage, and the page cache thrashes (CoorDL;
** FFCV's QUASI_RANDOM).  The block order keeps reads mostly sequential:
** the samples are cut, in index order, into blocks of consecutive samples
** of about block_bytes of stored bytes (a block holds at least one
** sample); an epoch shuffles the blocks, takes them `window` at a time
** and shuffles the samples of each window among themselves (sampler.c).
** So an epoch reads each block once, window after window, and the next
** window's blocks can be read ahead while this one is decoded (the
** loader, pipeline/core.c).  The cut depends on the source alone, so the order
** is a function of (seed, epoch, rank, world, block_bytes, window) only. */
#include "sampler/sampler.h"

#include <string.h>

uint64_t stoke__blocks_bytes(size_t n) {
  /* start (n + 1), order (n) and win_end (n): at most n blocks. */
  return ((uint64_t)3 * n + 1) * sizeof(size_t);
}

int stoke__blocks_init(stoke__blocks *b, const stoke_allocator *a, size_t n,
                       uint64_t (*bytes)(const void *user, size_t i),
                       const void *user, uint64_t block_bytes, size_t window) {
  memset(b, 0, sizeof *b);
  b->alloc = a;
  b->start = stoke__calloc(a, n + 1, sizeof *b->start);
  b->order = stoke__calloc(a, n ? n : 1, sizeof *b->order);
  b->win_end = stoke__calloc(a, n ? n : 1, sizeof *b->win_end);
  if (!b->start || !b->order || !b->win_end) {
    stoke__blocks_free(b);
    return STOKE_ENOMEM;
  }
  uint64_t fill = 0;
  for (size_t i = 0; i < n; i++) {
    if (i == 0 || fill >= block_bytes) {
      b->start[b->n_blocks++] = i;
      fill = 0;
    }
    fill += bytes(user, i);
  }
  b->start[b->n_blocks] = n;
  b->window = window ? window : 1;
  b->n_windows = (b->n_blocks + b->window - 1) / b->window;
  return 0;
}

void stoke__blocks_free(stoke__blocks *b) {
  if (!b) return;
  stoke__free(b->alloc, b->start);
  stoke__free(b->alloc, b->order);
  stoke__free(b->alloc, b->win_end);
  memset(b, 0, sizeof *b);
}

size_t stoke__blocks_window_of(const stoke__blocks *b, size_t t) {
  size_t lo = 0, hi = b->n_windows; /* the first window ending past t */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (b->win_end[mid] <= t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < b->n_windows ? lo : b->n_windows - 1;
}
