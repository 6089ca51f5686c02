/* io_sweep.c — io_concurrency as a dimension of its own (stoke.h,
** "io_concurrency as its own dimension"; docs/tuning.md).
**
** DESIGN
** A remote source's requests in flight are fixed when its HTTP client is
** made (the read-ahead's fetcher threads, the pool of kept connections),
** so a loader cannot change them: each point makes its own source through
** the caller's callback, measures one loader on it exactly as a point of
** the worker sweep is measured (tune.c's oracle: warm-up excluded), and
** destroys both.  The workers, prefetch and batch size stay those given
** (the worker sweep's knee): the dimension is swept alone, which is what
** the knee needs (more requests in flight hide latency that more workers
** would otherwise have to), at a handful of points.  The ladder doubles
** as the worker ladder does and ends at the first rung that does not
** raise the best by tolerance / 2; the knee is stoke_tune_knee_find's
** rule with io_concurrency as the cost. */
#include "tune.h"

#include <stdio.h>
#include <string.h>

void stoke_tune_io_config_init(stoke_tune_io_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
}

static int io_check(const stoke_tune_io_config *c) {
  if (!c) return stoke__set_tls_error(STOKE_EINVAL, "tune: config is NULL");
  if (c->struct_size != sizeof *c)
    return stoke__set_tls_error(
        STOKE_EINVAL,
        "tune: struct_size is %zu, expected %zu (call "
        "stoke_tune_io_config_init)",
        c->struct_size, sizeof *c);
  if (!c->tune || !c->source)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "tune: io sweep without tune or source");
  if (c->tune->struct_size != sizeof *c->tune)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "tune: tune's struct_size is %zu, expected "
                                "%zu",
                                c->tune->struct_size, sizeof *c->tune);
  if (c->prefetch == 0)
    return stoke__set_tls_error(STOKE_EINVAL, "tune: prefetch 0");
  if (c->values && !c->n_values)
    return stoke__set_tls_error(STOKE_EINVAL, "tune: an empty list");
  for (size_t i = 0; c->values && i < c->n_values; i++)
    if (c->values[i] == 0 || c->values[i] > STOKE_IO_CONCURRENCY_MAX)
      return stoke__set_tls_error(STOKE_EINVAL,
                                  "tune: io_concurrency %u is outside 1..%d",
                                  c->values[i], STOKE_IO_CONCURRENCY_MAX);
  if (c->tune->min_epochs == 0)
    return stoke__set_tls_error(STOKE_EINVAL, "tune: min_epochs is 0");
  return 0;
}

/* The ladder 1, 2, 4, ..., STOKE_IO_CONCURRENCY_MAX. */
static size_t ladder_n(void) {
  size_t n = 0;
  for (unsigned v = 1; v <= STOKE_IO_CONCURRENCY_MAX; v *= 2) n++;
  return n;
}

size_t stoke_tune_io_bound(const stoke_tune_io_config *c) {
  if (io_check(c)) return 0;
  return c->values ? c->n_values : ladder_n();
}

static unsigned value_at(const stoke_tune_io_config *c, size_t i) {
  return c->values ? c->values[i] : 1u << i;
}

int stoke_tune_io_sweep(const stoke_tune_io_config *c, stoke_tune_point *pts,
                        size_t cap, size_t *n_done) {
  if (!n_done || !pts)
    return stoke__set_tls_error(STOKE_EINVAL, "tune: NULL argument");
  *n_done = 0;
  int rc = io_check(c);
  if (rc) return rc;
  size_t n = stoke_tune_io_bound(c);
  if (cap < n)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "tune: %zu points do not fit in %zu", n, cap);
  const stoke_tune_config *t = c->tune;
  double tol = stoke__tune_tolerance(t);
  double best = 0;
  for (size_t i = 0; i < n; i++) {
    if (t->cancel && *t->cancel) break;
    stoke_tune_point *p = &pts[i];
    memset(p, 0, sizeof *p);
    p->n_workers = c->n_workers;
    p->prefetch = c->prefetch;
    p->batch_size = c->batch_size ? c->batch_size : t->base.batch_size;
    p->io_concurrency = value_at(c, i);
    snprintf(p->note, sizeof p->note, "%s", c->values ? "list" : "ladder");
    if (t->progress && t->progress(t->progress_user, i, n, p)) break;
    unsigned asked = p->io_concurrency;
    stoke_source *src = NULL;
    rc = c->source(c->source_user, asked, &src);
    if (rc) return rc; /* the callback's message */
    stoke_tune_config pc = *t;
    pc.base.source = src;
    stoke_model m;
    int have;
    rc = stoke__tune_loader_oracle.measure(NULL, &pc, p, &m, &have);
    stoke_source_destroy(src);
    if (rc) return rc;
    *n_done = i + 1;
    if (p->io_concurrency == 0) {
      /* Nothing was fetched while the loader ran: the requests in flight
      ** change only the open, which is not measured. */
      snprintf(p->note, sizeof p->note, "the run read no remote shard "
               "(local or cached shards): io_concurrency cannot matter");
      if (t->progress) (void)t->progress(t->progress_user, i, n, p);
      break;
    }
    bool stop = t->progress && t->progress(t->progress_user, i, n, p);
    /* The ladder ends at the first rung that does not raise the best by
    ** tolerance / 2 (the worker ladder's rule). */
    bool gained = i == 0 || p->samples_per_s >= best * (1.0 + tol / 2);
    if (p->samples_per_s > best) best = p->samples_per_s;
    if (stop || (!c->values && !gained)) break;
  }
  stoke__clear_tls_error();
  return 0;
}

/* Only the points of the sweep (io_concurrency set); the fewest requests
** in flight, then the faster. */
static bool io_point(const stoke_tune_point *p) { return p->io_concurrency; }
static bool fewer_requests(const stoke_tune_point *a,
                           const stoke_tune_point *b) {
  if (a->io_concurrency != b->io_concurrency)
    return a->io_concurrency < b->io_concurrency;
  return a->samples_per_s > b->samples_per_s;
}

int stoke_tune_io_knee_find(const stoke_tune_point *pts, size_t n,
                            double tolerance, int have_consumer,
                            stoke_tune_knee *out) {
  int rc = stoke__knee_pick(pts, n, tolerance, have_consumer, io_point,
                            fewer_requests, "no measured io_concurrency point",
                            out);
  if (rc != 0) return rc;
  size_t knee = out->index, best = out->best;
  const stoke_tune_point *k = &pts[knee];
  double share = stoke__knee_share(pts, out);
  const char *why = out->stall_removed == 1
                        ? "the fewest requests in flight that are busy"
                    : out->stall_removed == 0
                        ? "no io_concurrency as fast as the best removes the "
                          "stall; the fewest requests of the fastest"
                        : "the fewest requests in flight";
  snprintf(out->reason, sizeof out->reason,
           "%s within %.0f%% of the best: io_concurrency %u (%u workers, "
           "prefetch %u) at %.1f%% of the best throughput (io_concurrency "
           "%u)",
           why, 100.0 * tolerance, k->io_concurrency, k->n_workers,
           k->prefetch, share, pts[best].io_concurrency);
  return 0;
}
