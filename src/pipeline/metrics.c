/* metrics.c — the loader's metrics feature: Prometheus text and JSON lines
** (cfg.metrics_path, cfg.log_jsonl_path), written by the one writer in
** src/stats/export.c that stoke_twoclock also uses.
**
** It hooks the consumer's steps (mu not held): each step is a count and a
** compare, nothing more.  The writing runs on the exporter's own thread
** (started once the loader is whole), which takes a stats snapshot
** (stoke_loader_stats, safe from any thread) when a JSON line comes due and
** when its timer says the metrics are.  An epoch's end writes its line and
** the metrics on the consumer's thread, after the lines still due, so the
** file is whole when next() reports the end; destroy (the stop hook,
** workers joined) joins the thread and writes the last metrics.  Off, it is
** not listed and costs nothing. */
#include "pipeline/pipeline.h"
#include "stats/export.h"

#include <string.h>

typedef struct metrics_state {
  stoke__exporter ex;
} metrics_state;

/* The exporter's snapshot, from its thread or the consumer's. */
static void snapshot(void *ctx, stoke_stats *st) {
  (void)stoke_loader_stats(ctx, st); /* out of memory: zeros this time */
}

static void metrics_started(stoke_loader *l, void *state) {
  metrics_state *m = state;
  stoke__exporter_start(&m->ex, l->alloc);
}

static void metrics_step(stoke_loader *l, void *state, int64_t wait_ns,
                         bool empty) {
  (void)l;
  (void)wait_ns;
  (void)empty;
  metrics_state *m = state;
  stoke__exporter_step(&m->ex);
}

static void metrics_epoch_end(stoke_loader *l, void *state) {
  metrics_state *m = state;
  size_t n = stoke_loader_n_epoch_stats(l);
  stoke_epoch_stats rec;
  bool have = n && stoke_loader_epoch_stats(l, n - 1, &rec) == 0;
  stoke__exporter_epoch(&m->ex, have ? &rec : NULL);
}

static void metrics_stop(stoke_loader *l, void *state) {
  metrics_state *m = state;
  stoke__exporter_stop(&m->ex, l->alloc);
}

static void metrics_destroy(stoke_loader *l, void *state) {
  metrics_state *m = state;
  stoke__exporter_free(&m->ex, l->alloc);
  stoke__free(l->alloc, m);
}

static const stoke__feature_ops metrics_feature = {
    .name = "metrics",
    .started = metrics_started,
    .step = metrics_step,
    .epoch_end = metrics_epoch_end,
    .stop = metrics_stop,
    .destroy = metrics_destroy,
};

int stoke__metrics_create(stoke_loader *l) {
  const stoke_config *c = &l->cfg;
  if (!c->metrics_path && !c->log_jsonl_path) return 0;
  metrics_state *m = stoke__calloc(l->alloc, 1, sizeof *m);
  if (!m) return STOKE_ENOMEM;
  /* Listed at once: destroy frees what was made if the rest fails. */
  stoke__feature_add(&l->features, &metrics_feature, m);
  stoke_stats zero;
  memset(&zero, 0, sizeof zero);
  zero.struct_size = sizeof zero;
  zero.n_workers = l->n_workers;
  char err[512];
  int rc = stoke__exporter_init(&m->ex, l->alloc, c->metrics_path,
                                c->metrics_every_ns, c->log_jsonl_path,
                                c->log_every_steps, c->metrics_loader,
                                c->rank, &zero, snapshot, l, err, sizeof err);
  if (rc != 0) return stoke__set_tls_error(rc, "%s", err);
  return 0;
}
