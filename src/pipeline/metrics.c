/* metrics.c — the loader's metrics feature: Prometheus text and JSON lines
** (cfg.metrics_path, cfg.log_jsonl_path), written by the one writer in
** src/stats/export.c that stoke_twoclock also uses.
**
** It hooks the consumer's steps (mu not held): each step counts, and when
** a JSON line or the metrics file is due it takes a stats snapshot
** (stoke_loader_stats, which takes the locks it needs) and writes.  An
** epoch's end writes its line and the metrics; destroy (the stop hook,
** workers joined) the last metrics.  The writes run on the consumer's
** thread: a line is a few hundred bytes, the metrics file a rename every
** metrics_every_ns, nothing per step but a count and, with a metrics file,
** a clock read.  Off, it is not listed and costs nothing. */
#include "pipeline/pipeline.h"
#include "stats/export.h"

#include <string.h>

typedef struct metrics_state {
  stoke__exporter ex;
} metrics_state;

static void snapshot(const stoke_loader *l, stoke_stats *st) {
  memset(st, 0, sizeof *st);
  st->struct_size = sizeof *st;
  (void)stoke_loader_stats(l, st); /* out of memory: zeros this time */
}

static void metrics_step(stoke_loader *l, void *state, int64_t wait_ns,
                         bool empty) {
  (void)wait_ns;
  (void)empty;
  metrics_state *m = state;
  unsigned due = stoke__exporter_step(&m->ex, 0);
  if (!due) return;
  stoke_stats st;
  snapshot(l, &st);
  stoke__exporter_emit(&m->ex, due, &st, st.epochs_done);
}

static void metrics_epoch_end(stoke_loader *l, void *state) {
  metrics_state *m = state;
  size_t n = stoke_loader_n_epoch_stats(l);
  stoke_epoch_stats rec;
  bool have = n && stoke_loader_epoch_stats(l, n - 1, &rec) == 0;
  stoke_stats st;
  snapshot(l, &st);
  stoke__exporter_epoch(&m->ex, have ? &rec : NULL, &st);
}

static void metrics_stop(stoke_loader *l, void *state) {
  metrics_state *m = state;
  stoke_stats st;
  snapshot(l, &st);
  stoke__exporter_emit(&m->ex, STOKE__EXPORT_METRICS, &st, st.epochs_done);
}

static void metrics_destroy(stoke_loader *l, void *state) {
  metrics_state *m = state;
  stoke__exporter_free(&m->ex, l->alloc);
  stoke__free(l->alloc, m);
}

static const stoke__feature_ops metrics_feature = {
    .name = "metrics",
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
                                c->rank, &zero, err, sizeof err);
  if (rc != 0) return stoke__set_tls_error(rc, "%s", err);
  return 0;
}
