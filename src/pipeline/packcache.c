/* packcache.c — the packing cache as a loader feature (cfg.cache_dir).
**
** The cache itself is the storage layer's (src/storage/cache.c): the first
** epoch writes each sample's bytes into a pack as the source reads them,
** the later ones read the pack.  Here is what the loader does with it: it
** opens it at create (every worker's sample reads through it), cuts it at
** each epoch's end so the next epoch reads what this one wrote, reports
** its counters in stoke_stats, and closes it at destroy, once the workers
** are joined, so its writer publishes without waiting for the last lent
** batch. */
#include "pipeline/pipeline.h"
#include "pipeline/feature.h"
#include "source/image.h"
#include "storage/cache.h"

typedef struct stoke__packcache {
  stoke__cache *cache;           /* NULL once closed */
} stoke__packcache;

uint64_t stoke__packcache_ledger(const stoke__ledger_in *in) {
  return in->c->cache_dir ? stoke__cache_host_bytes(in->src->n_samples) : 0;
}

int stoke__packcache_create(stoke_loader *l, const stoke__sys *sys) {
  if (!l->cfg.cache_dir) return 0;
  stoke__packcache *pc = stoke__calloc(l->alloc, 1, sizeof *pc);
  if (!pc) return STOKE_ENOMEM;
  int rc = stoke__image_cache_open(l->src, l->cfg.cache_dir,
                                   l->cfg.cache_max_bytes, sys, l->alloc,
                                   &pc->cache);
  if (rc != 0 || !pc->cache) { /* none: remote shards cached below */
    stoke__free(l->alloc, pc);
    return rc;
  }
  for (size_t i = 0; i < STOKE__MAX(l->n_workers, 1); i++)
    l->workers[i].sample.cache = pc->cache;
  stoke__feature_add(&l->features, &stoke__packcache_feature, pc);
  return 0;
}

stoke__cache *stoke__packcache_of(const stoke_loader *l) {
  const stoke__packcache *pc =
      stoke__feature_state(&l->features, &stoke__packcache_feature);
  return pc ? pc->cache : NULL;
}

/* Publish what the epoch wrote, so that the next one reads it. */
static void epoch_end(stoke_loader *l, void *state) {
  (void)l;
  stoke__packcache *pc = state;
  if (pc->cache) stoke__cache_cut(pc->cache);
}

static void stats(const stoke_loader *l, const void *state, stoke_stats *st) {
  (void)l;
  const stoke__packcache *pc = state;
  if (!pc->cache) return;
  stoke__cache_stats cs;
  stoke__cache_stats_get(pc->cache, &cs);
  st->cache_hits = cs.hits;
  st->cache_written = cs.written;
  st->cache_bytes = cs.bytes;
  st->cache_samples = cs.samples;
}

/* No worker reads through it any more. */
static void stop(stoke_loader *l, void *state) {
  (void)l;
  stoke__packcache *pc = state;
  stoke__cache_close(pc->cache);
  pc->cache = NULL;
}

static void destroy(stoke_loader *l, void *state) {
  stop(l, state);
  stoke__free(l->alloc, state);
}

const stoke__feature_ops stoke__packcache_feature = {
    .name = "packing cache",
    .epoch_end = epoch_end,
    .stats = stats,
    .stop = stop,
    .destroy = destroy,
};
