/* rcache_feature.c — the stats' remote cache section: what the source's
** remote shard cache did (stoke_stats.rcache_*; docs/remote.md, "The
** cache").  A feature (feature.h) with one hook, stats, listed only when
** the source opened its remote shards through a cache, so any other
** source costs nothing; the cache counts on its own (storage/rcache.c).
** Counted since the source opened, not since the loader started: the
** cache's work is done at the open. */
#include "pipeline/pipeline.h"
#include "storage/rcache.h"

static void fill_stats(const stoke_loader *l, const void *state,
                       stoke_stats *st) {
  (void)state;
  stoke__rcache_counts c;
  if (!stoke__source_rcache_counts(l->src, &c)) return;
  st->rcache_used = 1;
  st->rcache_hits = c.hits;
  st->rcache_misses = c.misses;
  st->rcache_uncached = c.uncached;
  st->rcache_bytes_cached = c.bytes_hit;
  st->rcache_bytes_fetched = c.bytes_fetched;
  st->rcache_evicted = c.evicted;
  st->rcache_bytes_evicted = c.bytes_evicted;
}

static const stoke__feature_ops rcache_feature = {
    .name = "remote cache stats",
    .stats = fill_stats,
};

int stoke__rcache_stats_create(stoke_loader *l) {
  stoke__rcache_counts c;
  if (!stoke__source_rcache_counts(l->src, &c)) return 0;
  /* No state of its own (NULL, nothing to destroy): the source, alive as
  ** long as the loader, has the counts. */
  stoke__feature_add(&l->features, &rcache_feature, NULL);
  return 0;
}
