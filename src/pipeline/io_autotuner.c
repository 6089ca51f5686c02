/* io_autotuner.c — the live autotuner's io_concurrency dimension: the
** requests in flight of a remote source's HTTP client, tuned beside the
** workers (docs/autotune.md, "io_concurrency").
**
** DESIGN
** A feature (feature.h) of its own, on only with autotune and a source
** that reads through a client (remote packed shards).  On the consumer's
** thread, in next()'s step hook: it measures windows of steps (at least
** WINDOW_MIN_STEPS and WINDOW_NS of wall time: a round trip of 100 ms
** needs longer windows than the workers' 12 steps), reads the client's
** counts (lock-free atomics), hands the window to the pure rule
** (src/model/io_tune.c) and moves the client's limit with
** stoke__http_set_io_concurrency: the requests in flight finish, the next
** ones start under the new limit.  The block order's read-ahead reads the
** limit at each batch (block_readahead.c), so it follows.  Decisions go
** into the autotuner's log (stoke__autotuner_note), with from_io/to_io.
** Nothing here changes which bytes a batch holds or their order: the
** limit only decides how many requests are on the wire at once. */
#include "pipeline.h"
#include "pipeline/feature.h"
#include "model/io_tune.h"
#include "storage/http.h"

#include <stdio.h>
#include <string.h>

#define WINDOW_MIN_STEPS 4
#define WINDOW_NS 1000000000LL

typedef struct io_tuner {
  stoke__http *http;          /* the source's; outlives the loader's use */
  stoke__iot_state st;
  int64_t start_ns;           /* the window's start; 0 before the first */
  uint64_t steps;
  int64_t wait_ns;
  stoke__http_counts base;    /* the client's counts at the start */
  uint64_t all_steps;         /* since create, for the events */
} io_tuner;

/* A window starts at now, from the client's counts then (the last
** window's end reading, once there is one). */
static void window_start(io_tuner *t, int64_t now,
                         const stoke__http_counts *c) {
  t->start_ns = now;
  t->steps = 0;
  t->wait_ns = 0;
  t->base = *c;
}

static void note(stoke_loader *l, const io_tuner *t,
                 const stoke__iot_window *w, const stoke__iot_decision *d,
                 int64_t now) {
  static const int kinds[] = {0, STOKE_AUTOTUNE_IO_MORE,
                              STOKE_AUTOTUNE_IO_FEWER,
                              STOKE_AUTOTUNE_ROLLBACK};
  stoke_autotune_event e;
  memset(&e, 0, sizeof e);
  e.kind = kinds[d->kind];
  e.epoch = l->epoch;
  e.step = t->all_steps;
  e.time_ns = now - l->tracks.t0_ns;
  pthread_mutex_lock(&l->mu);
  e.from_workers = e.to_workers = l->active_workers;
  e.from_prefetch = e.to_prefetch = l->active_prefetch;
  pthread_mutex_unlock(&l->mu);
  e.from_io = d->from;
  e.to_io = d->to;
  e.wait_before = d->wait;
  e.wait_after = -1;
  e.wait_predicted = -1;
  e.step_before_ns = w->wall_ns / (int64_t)w->steps; /* the window's mean */
  e.step_after_ns = -1;
  snprintf(e.text, sizeof e.text,
           "epoch %llu, step %llu: %sio_concurrency %u -> %u, waiting "
           "%.0f%%; %s",
           (unsigned long long)e.epoch, (unsigned long long)e.step,
           d->kind == STOKE__IOT_ROLLBACK ? "rollback, " : "", d->from,
           d->to, 100 * d->wait, d->reason);
  stoke__autotuner_note(l, &e, now);
}

static void step(stoke_loader *l, void *state, int64_t wait_ns, bool empty) {
  (void)empty;
  io_tuner *t = state;
  int64_t now = stoke__now_ns();
  t->all_steps++;
  if (!t->start_ns) { /* creation and the first batch are no steady state */
    stoke__http_counts c;
    stoke__http_counts_get(t->http, &c);
    window_start(t, now, &c);
    return;
  }
  t->steps++;
  t->wait_ns += wait_ns;
  int64_t wall = now - t->start_ns;
  if (t->steps < WINDOW_MIN_STEPS || wall < WINDOW_NS) return;
  stoke__http_counts c;
  stoke__http_counts_get(t->http, &c);
  stoke__iot_window w = {
      .steps = t->steps,
      .wall_ns = wall,
      .wait_ns = t->wait_ns,
      .requests = c.requests - t->base.requests,
      .throttled = c.throttled - t->base.throttled,
      .busy_ns = (int64_t)(c.busy_ns - t->base.busy_ns),
  };
  pthread_mutex_lock(&l->mu);
  w.workers = l->active_workers;
  pthread_mutex_unlock(&l->mu);
  /* The limit in force is the client's (a caller may have moved it). */
  t->st.limit = c.io_concurrency;
  stoke__iot_decision d;
  stoke__iot_decide(&t->st, &w, &d);
  if (d.kind) {
    stoke__http_set_io_concurrency(t->http, d.to);
    note(l, t, &w, &d, now);
  }
  window_start(t, now, &c);
}

static void destroy(stoke_loader *l, void *state) {
  stoke__free(l->alloc, state);
}

static const stoke__feature_ops io_tuner_feature = {
    .name = "io autotuner",
    .step = step,
    .destroy = destroy,
};

int stoke__io_autotuner_create(stoke_loader *l) {
  const stoke__http *h = stoke__source_http(l->src);
  if (!h) return 0;
  io_tuner *t = stoke__calloc(l->alloc, 1, sizeof *t);
  if (!t) return STOKE_ENOMEM;
  stoke__feature_add(&l->features, &io_tuner_feature, t);
  /* The client is the source's and lives as long as it; its limit is the
  ** one thing of it a loader changes, and that is safe from any thread
  ** (storage/http.h), so the const of the source's accessor is cast away
  ** here alone. */
  t->http = (stoke__http *)h;
  stoke__iot_init(&t->st, stoke__http_io_concurrency(h));
  return 0;
}
