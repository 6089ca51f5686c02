/* publish_feature.c — the loader's live view: its statistics published for
** `stoke top` (stats/publish.c) while it runs.
**
** The publisher's own thread reads the loader's statistics through the
** calls any thread may make (stoke_loader_stats, the wait histogram, the
** autotuner's decisions); the feature has no hook on the steps or the
** workers, so publishing adds nothing to them.  It starts once the loader
** is whole (`started`) and stops when destroy has joined the workers. */
#include "pipeline.h"
#include "stats/publish.h"

typedef struct stoke__publish {
  stoke__publisher *pub; /* NULL until started, or when it could not be */
} stoke__publish;

static void fill(void *ctx, stoke_live *out, stoke_hist_bucket *scratch,
                 size_t cap) {
  const stoke_loader *l = ctx;
  stoke_loader_stats(l, &out->stats);
  size_t n = stoke_loader_wait_histogram(l, scratch, cap);
  stoke__live_rebin(scratch, n < cap ? n : cap, out->wait_hist);
  size_t events = stoke_loader_n_autotune_events(l);
  out->n_autotune = events;
  /* The autotuner keeps its first decisions: the last kept ones. */
  size_t kept = events < STOKE_AUTOTUNE_EVENTS_KEPT
                    ? events
                    : STOKE_AUTOTUNE_EVENTS_KEPT;
  size_t first = kept > STOKE_LIVE_EVENTS ? kept - STOKE_LIVE_EVENTS : 0;
  for (size_t i = first; i < kept; i++)
    if (stoke_loader_autotune_event(l, i, &out->events[out->n_events]) == 0)
      out->n_events++;
}

static void publish_started(stoke_loader *l, void *state) {
  stoke__publish *p = state;
  p->pub = stoke__publisher_start(l->alloc, STOKE_LIVE_LOADER, fill, l);
}

static void publish_stop(stoke_loader *l, void *state) {
  (void)l;
  stoke__publish *p = state;
  stoke__publisher_stop(p->pub);
  p->pub = NULL;
}

static void publish_destroy(stoke_loader *l, void *state) {
  publish_stop(l, state);
  stoke__free(l->alloc, state);
}

const stoke__feature_ops stoke__publish_feature = {
    .name = "publish",
    .started = publish_started,
    .stop = publish_stop,
    .destroy = publish_destroy,
};

int stoke__publish_create(stoke_loader *l) {
  if (!stoke__publish_wanted(l->cfg.publish)) return 0;
  stoke__publish *p = stoke__calloc(l->alloc, 1, sizeof *p);
  if (!p) return STOKE_ENOMEM;
  stoke__feature_add(&l->features, &stoke__publish_feature, p);
  return 0;
}
