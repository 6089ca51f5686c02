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
** decoded.  A remote source (one with an HTTP client) is read further
** ahead: enough windows that twice io_concurrency blocks are asked for
** beyond the batch's own window (what is in flight is rate x round trip,
** so one window ahead, 8 MB at the default sizes, is outrun by a 20 ms
** server at 200 MB/s), at most half its read-ahead buffer and
** MAX_AHEAD windows.  When the windows reach the epoch's last one and
** the workers will move on to the next epoch (prefetch_next_epoch), that
** epoch's first windows (its block order: stoke__plan_block_order) are
** read ahead too, so a short epoch does not begin with a round trip.
** Read-ahead is advice: it changes no byte of any batch, and a
** call that fails is ignored.  `next` starts again at 0 whenever an
** order is computed (a new epoch's claims: a new claim generation), under
** mu.  It is a feature (feature.h): its `assigned` hook collects, its
** `chunk` hook issues; the plan's sampler reads its blocks. */
#include "pipeline.h"
#include "storage/http.h"

#include <string.h>

/* Windows read ahead past the batch's own, at most (a remote source's). */
#define MAX_AHEAD 16u
/* A list's entries: this epoch's windows (up to MAX_AHEAD + 1) and the
** next epoch's first MAX_AHEAD + 1, two entries a block. */
#define LIST_ENTRIES(window) (2 * (2 * MAX_AHEAD + 2) * (size_t)(window))

static size_t window_of(const stoke_config *c) {
  return c->shuffle_window ? c->shuffle_window : STOKE_BLOCK_WINDOW_DEFAULT;
}

uint64_t stoke__readahead_ledger(const stoke__ledger_in *in) {
  const stoke_config *c = in->c;
  if (c->shuffle != STOKE_SHUFFLE_BLOCK || c->order_given) return 0;
  return stoke__blocks_bytes(in->plan->n_source) + sizeof(stoke__blocks) +
         (uint64_t)STOKE__MAX(in->n_workers, 1u) *
             LIST_ENTRIES(window_of(c)) * sizeof(size_t) +
         (uint64_t)in->plan->n_source * sizeof(size_t); /* next_order */
}

/* The stored bytes of a sample: the source's, or its fields' bytes. */
static uint64_t sample_bytes(const void *user, size_t i) {
  const stoke_source *src = user;
  if (src->ops->stored_bytes) return src->ops->stored_bytes(src, i);
  uint64_t n = 0;
  for (size_t f = 0; f < src->n_fields; f++) n += src->field_bytes[f];
  return n;
}

/* Sample ranges (first, n) to advise, collected under mu by the worker
** that owns the list, issued by it without mu. */
typedef struct stoke__ra_list {
  size_t *ra;                    /* LIST_ENTRIES(window) */
  size_t n;                      /* ranges collected */
} stoke__ra_list;

typedef struct stoke__readahead {
  stoke__blocks blocks;          /* the plan's (l->plan.blocks) */
  bool have_blocks;
  uint64_t gen;                  /* mu: the claim generation of `next` */
  size_t next;                   /* mu: the first window of that
                                    generation's order not read ahead yet */
  stoke__ra_list *lists;         /* one per worker record */
  size_t n_lists;
  uint64_t block_bytes;          /* the blocks' size asked for */
  const stoke__http *http;       /* a remote source's client, or NULL */
  uint64_t buffer_bytes;         /* its read-ahead buffer (held_bytes) */
  size_t *next_order;            /* mu: the next epoch's block order */
  uint64_t next_epoch;           /* mu: the epoch whose first windows */
  size_t next_windows;           /*     were read ahead, and how many
                                        (0: none) */
} stoke__readahead;

static void destroy(stoke_loader *l, void *state) {
  stoke__readahead *r = state;
  if (r->lists)
    for (size_t i = 0; i < r->n_lists; i++) stoke__free(l->alloc, r->lists[i].ra);
  stoke__free(l->alloc, r->lists);
  stoke__free(l->alloc, r->next_order);
  if (r->have_blocks) stoke__blocks_free(&r->blocks);
  l->plan.blocks = NULL;
  stoke__free(l->alloc, r);
}

/* Window win's blocks, in the block order `order`, into list t. */
static void collect_window(const stoke__blocks *bl, const size_t *order,
                           size_t win, stoke__ra_list *t) {
  size_t last = STOKE__MIN((win + 1) * bl->window, bl->n_blocks);
  for (size_t k = win * bl->window; k < last; k++) {
    size_t b = order[k];
    t->ra[2 * t->n] = bl->start[b];
    t->ra[2 * t->n + 1] = bl->start[b + 1] - bl->start[b];
    t->n++;
  }
}

/* Windows to read ahead past the batch's own: 1 for a local source (the
** kernel's read-ahead does the rest); for a remote one enough to hold
** 2 x io_concurrency blocks (the client's limit now: the tuner may move
** it), within half the buffer and MAX_AHEAD. */
static size_t windows_ahead(const stoke__readahead *r) {
  if (!r->http) return 1;
  uint64_t window_bytes = r->block_bytes * r->blocks.window;
  unsigned io = stoke__http_io_concurrency(r->http);
  uint64_t want = 2ull * STOKE__MAX(io, 1u) * r->block_bytes;
  if (r->buffer_bytes) want = STOKE__MIN(want, r->buffer_bytes / 2);
  uint64_t n = (want + window_bytes - 1) / STOKE__MAX(window_bytes, 1u);
  return (size_t)STOKE__MAX(1u, STOKE__MIN(n, (uint64_t)MAX_AHEAD));
}

/* Batch b was just assigned to w (mu held): collect into w's list the
** blocks of the windows it reaches that are not read ahead yet, and the
** windows_ahead() after it. */
static void assigned(stoke_loader *l, void *state, stoke__worker *w,
                     stoke_batch *b) {
  stoke__readahead *r = state;
  const stoke__blocks *bl = &r->blocks;
  stoke__ra_list *t = &r->lists[w->id];
  if (r->gen != l->claim_gen) { /* a new order: nothing of it advised, */
    r->gen = l->claim_gen;     /* but its first windows if read ahead */
    r->next = r->next_windows && r->next_epoch == b->epoch ? r->next_windows
                                                           : 0;
    r->next_windows = 0;
  }
  if (!l->src->ops->read_ahead || b->n == 0 || t->n) return;
  /* The batch's last position in the permutation (rank r takes r, r +
  ** world, ...; past the end it wraps, as the padding does). */
  size_t pos = b->number * l->cfg.batch_size + b->n - 1;
  size_t at = (l->cfg.rank + pos * (size_t)l->cfg.world) % l->plan.n_source;
  size_t win = stoke__blocks_window_of(bl, at);
  size_t ahead = windows_ahead(r);
  if (win + ahead < r->next) return; /* this and those ahead are advised */
  size_t from = STOKE__MAX(r->next, win);
  size_t to = STOKE__MIN(win + ahead, bl->n_windows - 1);
  for (size_t v = from; v <= to; v++) collect_window(bl, bl->order, v, t);
  r->next = to + 1;
  if (to + 1 == bl->n_windows && r->next_order && !r->next_windows &&
      l->cfg.prefetch_next_epoch &&
      (l->cfg.epochs == 0 || b->epoch + 1 < l->cfg.epochs)) {
    /* The last window: the next epoch's first ones, as its claims will
    ** ask for them (the same windows_ahead() + 1). */
    stoke__plan_block_order(&l->plan, b->epoch + 1, r->next_order);
    r->next_epoch = b->epoch + 1;
    r->next_windows = STOKE__MIN(ahead + 1, bl->n_windows);
    for (size_t v = 0; v < r->next_windows; v++)
      collect_window(bl, r->next_order, v, t);
  }
}

/* Issue what w collected (mu not held), before it fills a chunk. */
static void chunk(stoke_loader *l, void *state, stoke__worker *w) {
  stoke__ra_list *t = &((stoke__readahead *)state)->lists[w->id];
  for (size_t k = 0; k < t->n; k++)
    l->src->ops->read_ahead(l->src, t->ra[2 * k], t->ra[2 * k + 1]);
  t->n = 0;
}

static const stoke__feature_ops readahead_feature = {
    .name = "block read-ahead",
    .destroy = destroy,
    .assigned = assigned,
    .chunk = chunk,
};

int stoke__readahead_create(stoke_loader *l) {
  if (l->cfg.shuffle != STOKE_SHUFFLE_BLOCK || l->cfg.order_given) return 0;
  stoke__readahead *r = stoke__calloc(l->alloc, 1, sizeof *r);
  if (!r) return STOKE_ENOMEM;
  /* Listed at once: destroy frees what was allocated if the rest fails. */
  stoke__feature_add(&l->features, &readahead_feature, r);
  uint64_t bytes = l->cfg.shuffle_block_bytes ? l->cfg.shuffle_block_bytes
                                              : STOKE_BLOCK_BYTES_DEFAULT;
  int rc = stoke__blocks_init(&r->blocks, l->alloc, l->src->n_samples,
                              sample_bytes, l->src, bytes, window_of(&l->cfg));
  if (rc) return rc;
  r->have_blocks = true;
  l->plan.blocks = &r->blocks;
  r->block_bytes = bytes;
  r->http = stoke__source_http(l->src);
  if (r->http && l->src->ops->held_bytes)
    r->buffer_bytes = l->src->ops->held_bytes(l->src);
  r->n_lists = STOKE__MAX(l->n_workers, 1u);
  r->lists = stoke__calloc(l->alloc, r->n_lists, sizeof *r->lists);
  if (!r->lists) return STOKE_ENOMEM;
  for (size_t i = 0; i < r->n_lists; i++) {
    r->lists[i].ra =
        stoke__calloc(l->alloc, LIST_ENTRIES(r->blocks.window), sizeof(size_t));
    if (!r->lists[i].ra) return STOKE_ENOMEM;
  }
  if (l->cfg.prefetch_next_epoch) {
    r->next_order = stoke__calloc(l->alloc, STOKE__MAX(r->blocks.n_blocks, 1u),
                                  sizeof(size_t));
    if (!r->next_order) return STOKE_ENOMEM;
  }
  return 0;
}
