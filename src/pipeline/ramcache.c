/* ramcache.c — a RAM cache of finished samples, for deterministic work.
**
** DESIGN
** An evaluation pipeline (resize + center-crop, no flip) makes the same
** bytes for a sample every epoch: its read, decode and resize can be done
** once.  With
** ram_cache_bytes the loader keeps the finished bytes of the first
** samples by index (as many as the budget holds: which ones is a function
** of the budget only, never of timing), in one arena allocated at create,
** counted in the host ledger and checked against mem_budget_bytes before
** it is allocated.  A sample's slot is written once, by the first stoke__worker
** that produces it (a compare-and-swap from EMPTY to FILLING; FILLED is
** published with a release store after the bytes), and copied out by
** every later fill (an acquire load).  The source must say it is
** deterministic (stoke__source_ops.deterministic); another is refused at
** create, naming its transform.  It is a feature (feature.h) with two
** hooks in the fill chain: fill_get serves a hit, fill_put keeps a miss. */
#include "pipeline.h"

#include <string.h>

enum { EMPTY = 0, FILLING = 1, FILLED = 2 };

typedef struct stoke__ramcache {
  uint8_t *arena;           /* n x per bytes */
  atomic_uchar *state;      /* n */
  size_t n, per;
  size_t off[STOKE__MAX_FIELDS]; /* field f's offset in a sample */
} stoke__ramcache;

/* Bytes of one sample: the source's fields (a field normalised on the
** device is smaller in a host slot: the cache stores what the slot
** holds, within this). */
static size_t per_sample(const stoke_source *src) {
  size_t n = 0;
  for (size_t f = 0; f < src->n_fields; f++) n += src->field_bytes[f];
  return n;
}

static size_t cached_samples(const stoke_config *c, const stoke_source *src) {
  size_t per = per_sample(src);
  if (!c->ram_cache_bytes || per == 0) return 0;
  uint64_t n = c->ram_cache_bytes / per;
  return n < src->n_samples ? (size_t)n : src->n_samples;
}

uint64_t stoke__ramcache_ledger(const stoke__ledger_in *in) {
  size_t n = cached_samples(in->c, in->src);
  if (!n) return 0;
  return (uint64_t)n * per_sample(in->src) + n + sizeof(stoke__ramcache);
}

static void destroy(stoke_loader *l, void *state) {
  stoke__ramcache *r = state;
  stoke__free_aligned(l->alloc, r->arena);
  stoke__free(l->alloc, (void *)r->state);
  stoke__free(l->alloc, r);
}

/* Copy sample s->index from the cache into s's fields: true on a hit. */
static bool fill_get(const stoke_loader *l, void *state, stoke_sample *s,
                     stoke__producer_stats *ps) {
  const stoke__ramcache *r = state;
  if (s->index >= r->n ||
      atomic_load_explicit(&r->state[s->index], memory_order_acquire) !=
          FILLED)
    return false;
  const uint8_t *at = r->arena + s->index * r->per;
  unsigned copies = s->copies > 1 ? s->copies : 1;
  for (size_t f = 0; f < l->src->n_fields; f++)
    for (unsigned j = 0; j < copies; j++)
      memcpy((char *)s->dst[f] + j * s->copy_step[f], at + r->off[f],
             l->outlet.field_bytes[f]);
  stoke__counter_add(&ps->ram_hits, 1);
  return true;
}

/* Keep the sample s just filled, if the cache has its place free. */
static void fill_put(const stoke_loader *l, void *state,
                     const stoke_sample *s) {
  stoke__ramcache *r = state;
  unsigned char empty = EMPTY;
  if (s->index >= r->n ||
      !atomic_compare_exchange_strong_explicit(&r->state[s->index], &empty,
                                               FILLING, memory_order_relaxed,
                                               memory_order_relaxed))
    return;
  uint8_t *at = r->arena + s->index * r->per;
  for (size_t f = 0; f < l->src->n_fields; f++)
    memcpy(at + r->off[f], s->dst[f], l->outlet.field_bytes[f]);
  atomic_store_explicit(&r->state[s->index], FILLED, memory_order_release);
}

const stoke__feature_ops stoke__ramcache_feature = {
    .name = "RAM cache",
    .destroy = destroy,
    .fill_get = fill_get,
    .fill_put = fill_put,
};

int stoke__ramcache_create(stoke_loader *l) {
  size_t n = cached_samples(&l->cfg, l->src);
  if (!n) return 0;
  const stoke__source_ops *ops = l->src->ops;
  if (!ops->deterministic || !ops->deterministic(l->src))
    return stoke__set_tls_error(
        STOKE_EINVAL,
        "config: ram_cache_bytes: the %s source's samples change from epoch "
        "to epoch (a random crop or flip); the RAM cache keeps "
        "deterministic work only (resize + center-crop, no flip)",
        l->src->kind);
  stoke__ramcache *r = stoke__calloc(l->alloc, 1, sizeof *r);
  if (!r) return STOKE_ENOMEM;
  /* Listed at once: destroy frees what was allocated if the rest fails. */
  stoke__feature_add(&l->features, &stoke__ramcache_feature, r);
  r->n = n;
  r->per = per_sample(l->src);
  for (size_t f = 1; f < l->src->n_fields; f++)
    r->off[f] = r->off[f - 1] + l->outlet.field_bytes[f - 1];
  r->arena = stoke__alloc_aligned(l->alloc, n * r->per);
  r->state = stoke__calloc(l->alloc, n, sizeof *r->state);
  if (!r->arena || !r->state) return STOKE_ENOMEM;
  for (size_t i = 0; i < n; i++) atomic_init(&r->state[i], EMPTY);
  return 0;
}

size_t stoke__ramcache_samples(const stoke_loader *l) {
  const stoke__ramcache *r =
      stoke__feature_state(&l->features, &stoke__ramcache_feature);
  return r ? r->n : 0;
}
