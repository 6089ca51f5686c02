/* ledger.c — the host memory ledger of a configuration, without a loader.
**
** The terms mirror what stoke_loader_create allocates (loader.c): K + 1
** batch slots (each: the batch's field buffers, its index array and its
** header), the epoch order plus the shuffle scratch, one worker record and
** one statistics block per worker (one for W = 0, used by the consumer's
** thread), the consumer's statistics with the warm-up baseline, and the
** bad-sample state (badsample.c: the failure log, SKIP's flags, the
** quarantine's bitmap), and the source's per-worker scratch (an image
** source's decoded window, read buffer, restart cut and resampler
** buffers: a bound from its largest image, src/source/image.c).
** The loader checks its budget with these same functions, and
** tests/unit/test_tune.c checks that the total equals
** stoke_loader_host_bytes() of a real loader. */
#include "pipeline.h"
#include "pipeline/outlet_device.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* The bad-sample state's bytes (badsample.c keeps its own signature). */
static uint64_t bad_ledger(const stoke__ledger_in *in) {
  return stoke__bad_bytes(in->c, in->src);
}

/* Every feature's ledger hook and the term its bytes go into: the one
** list of what features add to the ledger.  A feature that is off for the
** configuration returns 0. */
static const struct {
  size_t term; /* offset of a uint64_t term of stoke_host_ledger */
  uint64_t (*bytes)(const stoke__ledger_in *in);
} feature_terms[] = {
    {offsetof(stoke_host_ledger, order_bytes), stoke__readahead_ledger},
    {offsetof(stoke_host_ledger, failures_bytes), bad_ledger},
    {offsetof(stoke_host_ledger, cache_bytes), stoke__ramcache_ledger},
    {offsetof(stoke_host_ledger, cache_bytes), stoke__packcache_ledger},
};

static void add_feature_terms(const stoke__ledger_in *in,
                              stoke_host_ledger *g) {
  for (size_t i = 0; i < sizeof feature_terms / sizeof feature_terms[0];
       i++) {
    uint64_t *term = (uint64_t *)((char *)g + feature_terms[i].term);
    *term += feature_terms[i].bytes(in);
  }
}

/* The batch slots: each its batch (echo x the batch for example echoing),
** its indices and header, and the echo views of the slots next() hands
** out (the device's when there are any). */
static uint64_t slots_bytes(const stoke_config *c,
                            const stoke_host_ledger *g) {
  uint64_t b = c->batch_size;
  uint64_t copies =
      c->echo > 1 && c->echo_mode == STOKE_ECHO_EXAMPLE ? c->echo : 1;
  size_t out = g->n_device_slots ? g->n_device_slots : g->n_slots;
  return (uint64_t)g->n_slots * (g->batch_bytes * copies +
                                 b * sizeof(size_t) + sizeof(stoke_batch)) +
         stoke__echo_bytes(c, out);
}

/* The sum of the terms: one place, so that a new term is added once. */
static uint64_t total_of(const stoke_host_ledger *g) {
  return g->slots_bytes + g->order_bytes + g->workers_bytes +
         g->consumer_bytes + g->trace_bytes + g->failures_bytes +
         g->cache_bytes + g->scratch_bytes + g->storage_bytes;
}

void stoke__host_ledger(const stoke_config *c, unsigned n_workers,
                        const stoke__plan *plan, const stoke_source *src,
                        stoke_host_ledger *g) {
  memset(g, 0, sizeof *g);
  g->struct_size = sizeof *g;
  uint64_t b = c->batch_size;
  for (size_t f = 0; f < src->n_fields; f++)
    g->sample_bytes += src->field_bytes[f];
  g->n_slots = (size_t)c->prefetch + c->consumer_slots;
  g->n_workers = n_workers;
  g->batch_bytes = b * g->sample_bytes;
  /* The device terms; a field normalised on the device is u8 in a host
  ** slot. */
  stoke__dev_ledger(c, src, g);
  g->slots_bytes = slots_bytes(c, g);
  /* A given order (given_order.c) keeps only the batches given ahead. */
  g->order_bytes =
      c->order_given
          ? 0
          : ((uint64_t)plan->n_source + plan->per_rank) * sizeof(size_t);
  g->workers_bytes = (uint64_t)STOKE__MAX(n_workers, 1) *
                     (sizeof(stoke__producer_stats) + sizeof(stoke__worker));
  if (n_workers) /* the scheduler baseline (loader.c) */
    g->workers_bytes +=
        (8 * (uint64_t)n_workers + 64) * sizeof(stoke__sched_thread);
  g->consumer_bytes =
      sizeof(stoke__consumer_stats) + sizeof(stoke__stats_snap);
  if (c->metrics_path || c->log_jsonl_path) /* whole steps' histogram */
    g->consumer_bytes += sizeof(stoke__hist);
  g->trace_bytes = (uint64_t)(STOKE__MAX(n_workers, 1) + 1) *
                   c->trace_events * sizeof(stoke__trace_event);
  stoke__ledger_in in = {.c = c, .n_workers = n_workers, .plan = plan,
                         .src = src};
  add_feature_terms(&in, g);
  /* Each worker's source scratch (decoder window, read buffer, resampler):
  ** one set for W = 0, used by the consumer's thread. */
  if (src->ops && src->ops->scratch_bound) {
    g->scratch_per_worker = src->ops->scratch_bound(
        src, &g->scratch_basis, &g->scratch_width, &g->scratch_height);
    g->scratch_bytes =
        (uint64_t)STOKE__MAX(n_workers, 1) * g->scratch_per_worker;
  }
  /* What the storage holds once for the whole source (remote read-ahead). */
  g->storage_bytes =
      src->ops && src->ops->held_bytes ? src->ops->held_bytes(src) : 0;
  g->total_bytes = total_of(g);
  g->budget_bytes = c->mem_budget_bytes;
}

void stoke__loader_ledger_device(const stoke_loader *l, stoke_host_ledger *g) {
  const stoke__dev *d = l->outlet.dev;
  uint64_t b = l->cfg.batch_size, host_sample = 0;
  for (size_t f = 0; f < l->src->n_fields; f++)
    host_sample += l->outlet.field_bytes[f];
  g->pinned = d && d->pinned;
  g->n_device_slots = d ? d->n_dslots : 0;
  g->device_bytes = d && d->n_dslots ? d->device_bytes : 0;
  g->device_batch_bytes = g->n_device_slots ? b * g->sample_bytes : 0;
  g->device_free_bytes = g->n_device_slots ? d->free_bytes : 0;
  g->batch_bytes = b * host_sample;
  if (d && d->clock_stream) /* the copy and consumer streams' tracks */
    g->trace_bytes += 2 * (uint64_t)l->cfg.trace_events *
                      sizeof(stoke__trace_event);
  g->slots_bytes = slots_bytes(&l->cfg, g);
  g->total_bytes = total_of(g);
}

int stoke__host_ledger_check(const stoke_host_ledger *g, unsigned prefetch,
                             size_t batch_size) {
  if (g->budget_bytes == 0 || g->total_bytes <= g->budget_bytes) return 0;
  struct { const char *what; uint64_t n; } terms[] = {
      {"batch slots", g->slots_bytes},
      {"epoch order", g->order_bytes},
      {"worker state and statistics", g->workers_bytes},
      {"consumer statistics", g->consumer_bytes},
      {"trace buffers (trace_events)", g->trace_bytes},
      {"bad-sample log, skip flags and quarantine", g->failures_bytes},
      {"the RAM cache and the packed cache's map (ram_cache_bytes, "
       "cache_dir)", g->cache_bytes},
      {"the source's per-worker scratch (decoded images, read buffers)",
       g->scratch_bytes},
      {"the remote shards' read-ahead buffer", g->storage_bytes}};
  size_t big = 0;
  for (size_t i = 1; i < sizeof terms / sizeof terms[0]; i++)
    if (terms[i].n > terms[big].n) big = i;
  char need[32], have[32], slot[32], term[32];
  stoke__format_bytes(g->total_bytes, need, sizeof need);
  stoke__format_bytes(g->budget_bytes, have, sizeof have);
  stoke__format_bytes(g->batch_bytes, slot, sizeof slot);
  stoke__format_bytes(terms[big].n, term, sizeof term);
  if (big == 0)
    return stoke__set_tls_error(
        STOKE_EBUDGET,
        "memory budget %s is too small: the loader needs %s, most of it %s "
        "of batch slots (%zu slots = prefetch %u + %zu held, %s each at "
        "batch size %zu); lower prefetch or batch_size",
        have, need, term, g->n_slots, prefetch, g->n_slots - prefetch, slot,
        batch_size);
  return stoke__set_tls_error(
      STOKE_EBUDGET,
      "memory budget %s is too small: the loader needs %s, most of it %s "
      "of %s", have, need, term, terms[big].what);
}

int stoke_host_ledger_compute(const stoke_config *c, stoke_host_ledger *out) {
  if (!c || !out)
    return stoke__set_tls_error(STOKE_EINVAL, "ledger: NULL argument");
  int rc = stoke__config_validate(c); /* what the loader would refuse */
  if (rc) return rc;
  stoke__plan plan = {.n_source = c->source->n_samples,
                      .batch_size = c->batch_size,
                      .shuffle = c->shuffle,
                      .seed = c->seed,
                      .rank = c->rank,
                      .world = c->world,
                      .shard_drop_last = c->shard_drop_last,
                      .drop_last = c->drop_last};
  rc = stoke__plan_init(&plan);
  if (rc) return rc;
  unsigned w = c->n_workers == STOKE_WORKERS_AUTO ? stoke__online_cpus()
                                                  : c->n_workers;
  stoke__host_ledger(c, w, &plan, c->source, out);
  return stoke__host_ledger_check(out, c->prefetch, c->batch_size);
}

int stoke_loader_ledger(const stoke_loader *l, stoke_host_ledger *out) {
  if (!l || !out) return STOKE_EINVAL;
  stoke__host_ledger(&l->cfg, l->n_workers, &l->plan, l->src, out);
  stoke__loader_ledger_device(l, out);
  return 0;
}
