/* fetch_feature.c — the stats' fetch section: what the HTTP client of a
** remote source did since the loader started (stoke_stats.fetch_*).  It is
** a feature (feature.h) with one hook, stats, listed only when the source
** reads through a client, so a local source costs nothing, not even a
** branch; the client counts on its own (storage/http.c). */
#include "pipeline/pipeline.h"
#include "storage/http.h"

typedef struct fetch_state {
  const stoke__http *http; /* the source's, alive as long as the loader */
  int64_t t0_ns;           /* the loader's start */
  stoke__http_counts base; /* at the start: the shards' indices fetched at
                              open are not the run's */
  stoke__hist_snap *base_latency;
} fetch_state;

static void destroy(stoke_loader *l, void *state) {
  fetch_state *f = state;
  stoke__free(l->alloc, f->base_latency);
  stoke__free(l->alloc, f);
}

static void fill_stats(const stoke_loader *l, const void *state,
                       stoke_stats *st) {
  const fetch_state *f = state;
  stoke__http_counts c;
  stoke__http_counts_get(f->http, &c);
  st->fetch_remote = 1;
  st->io_concurrency = c.io_concurrency;
  st->fetch_requests = c.requests - f->base.requests;
  st->fetch_retries = c.retries - f->base.retries;
  st->fetch_throttled = c.throttled - f->base.throttled;
  st->fetch_bytes = c.bytes - f->base.bytes;
  double wall_s = (double)(stoke__now_ns() - f->t0_ns) / 1e9;
  if (wall_s > 0) {
    st->fetch_bytes_per_s = (double)st->fetch_bytes / wall_s;
    st->fetch_in_flight = (double)(c.busy_ns - f->base.busy_ns) / 1e9 / wall_s;
  }
  /* Per request, not per run: each attempt's body time is its own (curl's
  ** first byte to its last), so the share holds at any concurrency. */
  uint64_t busy = c.busy_ns - f->base.busy_ns;
  if (busy > 0)
    st->fetch_body_frac = (double)(c.body_ns - f->base.body_ns) / (double)busy;
  /* The histogram is ~29 KiB: off the stack, and no quantiles when there
  ** is no memory for it (the counts above still stand). */
  stoke__hist_snap *h = stoke__calloc(l->alloc, 1, sizeof *h);
  if (!h) return;
  stoke__http_latency_read(f->http, h);
  stoke__hist_sub(h, f->base_latency);
  st->fetch_latency_p50_ms = (double)stoke__hist_quantile(h, 0.50) / 1e6;
  st->fetch_latency_p95_ms = (double)stoke__hist_quantile(h, 0.95) / 1e6;
  stoke__free(l->alloc, h);
}

static const stoke__feature_ops fetch_feature = {
    .name = "fetch stats",
    .destroy = destroy,
    .stats = fill_stats,
};

int stoke__fetch_create(stoke_loader *l) {
  const stoke__http *h = stoke__source_http(l->src);
  if (!h) return 0;
  fetch_state *f = stoke__calloc(l->alloc, 1, sizeof *f);
  if (!f) return STOKE_ENOMEM;
  stoke__feature_add(&l->features, &fetch_feature, f);
  f->http = h;
  f->base_latency = stoke__calloc(l->alloc, 1, sizeof *f->base_latency);
  if (!f->base_latency) return STOKE_ENOMEM;
  f->t0_ns = stoke__now_ns();
  stoke__http_counts_get(h, &f->base);
  stoke__http_latency_read(h, f->base_latency);
  return 0;
}
