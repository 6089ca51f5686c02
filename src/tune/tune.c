/* tune.c — the offline sweep (workers x prefetch x batch size) and the knee.
**
** DESIGN
** Without a list of worker counts the sweep is adaptive (search.c): the
** ladder follows waiting stages past the core count and a bisection finds
** the knee to one worker.  Given lists, or with adaptive 0, it is the
** fixed grid: a plain loop in the caller's thread that for each point
** computes the host ledger (skipping points over the budget without
** allocating anything), creates one loader, runs warm-up epochs and then
** measured epochs through the caller's step, reads the loader's own clocks
** and destroys it.  A point is therefore measured exactly like
** `stoke bench`: warm-up excluded, throughput = measured samples / measured
** wall time.  Cancellation is cooperative: the cancel flag and the progress
** callback are consulted between points only, so a point in progress always
** finishes its epochs and every recorded number is a whole measurement.
**
** The knee is a pure function of the table, in knee.c: the one rule the
** sweep, the doctor's advice and the online autotuner share. */
#include "tune.h"

#include <stdio.h>
#include <string.h>

void stoke_tune_config_init(stoke_tune_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  stoke_config_init(&cfg->base);
  cfg->warmup_epochs = 1;
  cfg->min_epochs = 1;
  cfg->adaptive = 1;
  cfg->tolerance = STOKE_TUNE_TOLERANCE;
}

/* The adaptive search decides the workers when no list is given. */
static bool is_adaptive(const stoke_tune_config *c) {
  return c->adaptive && !c->workers;
}

unsigned stoke_tune_prefetch_factor(unsigned n_workers, unsigned prefetch) {
  if (n_workers == 0) return 0;
  return (prefetch + n_workers - 1) / n_workers;
}

/* ---- the grid ------------------------------------------------------------ */

static const unsigned default_prefetch[] = {1, 2, 4};

static int check_config(const stoke_tune_config *c) {
  if (!c)
    return stoke__set_tls_error(STOKE_EINVAL, "tune: config is NULL");
  if (c->struct_size != sizeof *c)
    return stoke__set_tls_error(
        STOKE_EINVAL,
        "tune: struct_size is %zu, expected %zu (call stoke_tune_config_init)",
        c->struct_size, sizeof *c);
  if (!c->base.source)
    return stoke__set_tls_error(STOKE_EINVAL, "tune: base.source is NULL");
  if ((c->workers && !c->n_workers) || (c->prefetch && !c->n_prefetch) ||
      (c->batch_sizes && !c->n_batch_sizes))
    return stoke__set_tls_error(STOKE_EINVAL, "tune: an empty list");
  for (size_t i = 0; c->prefetch && i < c->n_prefetch; i++)
    if (c->prefetch[i] == 0)
      return stoke__set_tls_error(STOKE_EINVAL, "tune: prefetch 0");
  for (size_t i = 0; c->batch_sizes && i < c->n_batch_sizes; i++)
    if (c->batch_sizes[i] == 0)
      return stoke__set_tls_error(STOKE_EINVAL, "tune: batch size 0");
  if (c->min_epochs == 0)
    return stoke__set_tls_error(STOKE_EINVAL, "tune: min_epochs is 0");
  if (!(c->tolerance >= 0 && c->tolerance < 1))
    return stoke__set_tls_error(STOKE_EINVAL,
                                "tune: tolerance %g is outside [0, 1)",
                                c->tolerance);
  if (c->max_workers > 1024)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "tune: max_workers %u is over 1024",
                                c->max_workers);
  return 0;
}

/* The default worker ladder 0, 1, 2, 4, ..., max (max included even when
** it is not a power of two).  Returns the count written to v (at most 34). */
#define LADDER_CAP 34
static size_t ladder(unsigned max, unsigned v[LADDER_CAP]) {
  size_t n = 0;
  v[n++] = 0;
  for (unsigned x = 1; x < max && n < LADDER_CAP - 1; x *= 2) v[n++] = x;
  if (max > 0) v[n++] = max;
  return n;
}

static unsigned max_workers_of(const stoke_tune_config *c) {
  if (c->max_workers) return c->max_workers;
  unsigned cores = stoke__online_cpus();
  return STOKE__MAX(2 * cores, 8u);
}

static size_t n_worker_values(const stoke_tune_config *c) {
  if (c->workers) return c->n_workers;
  unsigned v[LADDER_CAP];
  return ladder(max_workers_of(c), v);
}

static unsigned worker_value(const stoke_tune_config *c, size_t i) {
  if (c->workers) return c->workers[i];
  unsigned v[LADDER_CAP];
  ladder(max_workers_of(c), v);
  return v[i];
}

int stoke_tune_grid(const stoke_tune_config *c, stoke_tune_point *pts,
                    size_t cap, size_t *n) {
  if (!n) return stoke__set_tls_error(STOKE_EINVAL, "tune: n is NULL");
  *n = 0;
  int rc = check_config(c);
  if (rc) return rc;
  if (is_adaptive(c)) {
    *n = stoke__tune_search_bound(c);
    if (!pts) return 0;
    if (cap < *n)
      return stoke__set_tls_error(STOKE_EINVAL,
                                  "tune: %zu points do not fit in %zu", *n,
                                  cap);
    memset(pts, 0, *n * sizeof *pts);
    return 0;
  }
  size_t nw = n_worker_values(c);
  size_t nk = c->prefetch ? c->n_prefetch : 3;
  size_t nb = c->batch_sizes ? c->n_batch_sizes : 1;
  size_t total = nw * nk * nb;
  *n = total;
  if (!pts) return 0;
  if (cap < total)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "tune: %zu points do not fit in %zu", total,
                                cap);
  size_t at = 0;
  for (size_t b = 0; b < nb; b++)
    for (size_t w = 0; w < nw; w++)
      for (size_t k = 0; k < nk; k++) {
        stoke_tune_point *p = &pts[at++];
        memset(p, 0, sizeof *p);
        p->batch_size = c->batch_sizes ? c->batch_sizes[b] : c->base.batch_size;
        p->n_workers = worker_value(c, w);
        p->prefetch = c->prefetch ? c->prefetch[k] : default_prefetch[k];
        stoke_config lc = c->base;
        lc.batch_size = p->batch_size;
        lc.n_workers = p->n_workers;
        lc.prefetch = p->prefetch;
        stoke_host_ledger g;
        g.struct_size = sizeof g;
        rc = stoke_host_ledger_compute(&lc, &g);
        if (rc == STOKE_EBUDGET) {
          p->status = STOKE_TUNE_OVER_BUDGET;
        } else if (rc != 0) {
          *n = 0;
          return rc;
        }
        p->host_bytes = g.total_bytes;
      }
  stoke__clear_tls_error();
  return 0;
}

/* ---- the sweep ----------------------------------------------------------- */

static int fail_from(stoke_loader *l, int rc) {
  const char *msg = stoke_errmsg(l);
  return stoke__set_tls_error(rc, "%s", msg[0] ? msg : stoke_strerror(rc));
}

/* Run one point: warm-up, then measured epochs until both minimums hold;
** the queue model of the run is made while its workers live (their
** scheduler statistics). */
static int measure(void *user, const stoke_tune_config *c,
                   stoke_tune_point *p, stoke_model *m, int *have_model) {
  (void)user;
  *have_model = 0;
  stoke_config lc = c->base;
  lc.batch_size = p->batch_size;
  lc.n_workers = p->n_workers;
  lc.prefetch = p->prefetch;
  lc.warmup_epochs = c->warmup_epochs;
  lc.warmup_steps = 0;
  stoke_loader *l = NULL;
  int rc = stoke_loader_create(&lc, &l);
  if (rc) return rc; /* the TLS message is the loader's */
  unsigned epochs = 0;
  int64_t measured_ns = 0;
  for (;;) {
    stoke_batch *b;
    rc = stoke_loader_next(l, &b);
    if (rc == STOKE_END) {
      epochs++;
      if (epochs > c->warmup_epochs) {
        stoke_epoch_stats e;
        size_t last = stoke_loader_n_epoch_stats(l);
        if (last && stoke_loader_epoch_stats(l, last - 1, &e) == 0)
          measured_ns += e.wall_ns;
        unsigned done = epochs - c->warmup_epochs;
        if (done >= c->min_epochs &&
            (measured_ns >= c->min_measure_ns || done >= 1000))
          break;
      }
      continue;
    }
    if (rc != STOKE_OK) {
      rc = fail_from(l, rc);
      stoke_loader_destroy(l);
      return rc;
    }
    if (c->step) c->step(c->step_user, b);
    stoke_batch_release(b);
  }
  stoke_stats st;
  st.struct_size = sizeof st;
  rc = stoke_loader_stats(l, &st);
  stoke_diagnosis d;
  if (rc == 0) rc = stoke_diagnose(&st, &d);
  if (rc != 0) {
    rc = fail_from(l, rc);
    stoke_loader_destroy(l);
    return rc;
  }
  if (st.steps && stoke_model_init(m, &st, &lc, 0) == 0) {
    m->consumer_cpu = c->consumer_cpu;
    m->n_batches = stoke_loader_n_batches(l);
    *have_model = 1;
  }
  int64_t wall = 0;
  unsigned n_measured = 0;
  size_t ne = stoke_loader_n_epoch_stats(l);
  for (size_t i = 0; i < ne; i++) {
    stoke_epoch_stats e;
    if (stoke_loader_epoch_stats(l, i, &e) != 0 || e.warmup) continue;
    wall += e.wall_ns;
    n_measured++;
  }
  p->host_bytes = stoke_loader_host_bytes(l);
  p->steps = st.steps;
  p->samples = st.samples;
  p->samples_per_s = wall > 0 ? (double)st.samples / ((double)wall / 1e9) : 0;
  p->epoch_s = n_measured ? (double)wall / 1e9 / n_measured : 0;
  p->wait_ratio = st.wait_ratio;
  p->queue_empty_frac = st.queue_empty_frac;
  p->worker_cpu_s =
      n_measured ? (double)st.worker_cpu_ns / 1e9 / n_measured : 0;
  p->verdict = d.verdict;
  /* The requests in flight of a remote run (io_sweep.c sweeps them). */
  p->io_concurrency = st.fetch_remote ? st.io_concurrency : 0;
  p->status = STOKE_TUNE_MEASURED;
  stoke_loader_destroy(l);
  return 0;
}

const stoke__tune_oracle stoke__tune_loader_oracle = {measure, NULL};

int stoke_tune_sweep(const stoke_tune_config *c, stoke_tune_point *pts,
                     size_t cap, size_t *n_done) {
  if (!n_done || !pts)
    return stoke__set_tls_error(STOKE_EINVAL, "tune: NULL argument");
  *n_done = 0;
  size_t n;
  int rc = stoke_tune_grid(c, pts, cap, &n);
  if (rc) return rc;
  if (is_adaptive(c))
    return stoke__tune_search(c, &stoke__tune_loader_oracle, pts, cap,
                              n_done);
  for (size_t i = 0; i < n; i++) {
    if (c->cancel && *c->cancel) break;
    stoke_tune_point *p = &pts[i];
    if (c->progress && c->progress(c->progress_user, i, n, p)) break;
    if (p->status != STOKE_TUNE_OVER_BUDGET) {
      stoke_model m;
      int have;
      rc = measure(NULL, c, p, &m, &have);
      if (rc) return rc;
    }
    *n_done = i + 1;
    if (c->progress && c->progress(c->progress_user, i, n, p)) break;
  }
  return 0;
}
