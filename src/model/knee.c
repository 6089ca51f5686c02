/* knee.c — the knee: one rule for measured and predicted points.
**
** DESIGN
** The knee is a pure function of a table of points, so it can be tested on
** hand-made tables and is shared by every client (knee.h):
**   1. best = the highest throughput;
**   2. good = points with throughput >= (1 - tolerance) x best; a curve
**      that is not monotonic (8 workers slower than 4) needs no special
**      case, only "as good as the best";
**   3. with a consumer, the stall matters more than the last percent: if
**      any good point is busy (the consumer rarely waits), keep only those;
**      if none is, the stall cannot be removed at these settings and the
**      cheapest of the fastest is the best achievable;
**   4. cheapest = fewest workers (threads compete with the step for CPU),
**      then least host memory, then the faster, then the earlier point.
** The doctor's advice asks the same question of the queue model: its
** predicted points go through the same function with the same tolerance,
** so "-j 1 is enough" cannot stand next to a sweep that chose -j 2 for the
** same reason. */
#include "model/knee.h"

#include <stdio.h>
#include <string.h>

/* ---- the knee ------------------------------------------------------------ */

/* Is a cheaper than b?  Fewest workers, then least memory, then faster. */
static bool cheaper(const stoke_tune_point *a, const stoke_tune_point *b) {
  if (a->n_workers != b->n_workers) return a->n_workers < b->n_workers;
  if (a->host_bytes != b->host_bytes) return a->host_bytes < b->host_bytes;
  return a->samples_per_s > b->samples_per_s;
}

static bool any_point(const stoke_tune_point *p) {
  (void)p;
  return true;
}

int stoke__knee_pick(const stoke_tune_point *pts, size_t n, double tolerance,
                     int have_consumer, stoke__knee_eligible eligible,
                     stoke__knee_cheaper cheaper_than, const char *none,
                     stoke_tune_knee *out) {
  if (!pts || !out)
    return stoke__set_tls_error(STOKE_EINVAL, "tune: NULL argument");
  memset(out, 0, sizeof *out);
  if (!(tolerance >= 0.0 && tolerance < 1.0))
    return stoke__set_tls_error(STOKE_EINVAL,
                                "tune: tolerance %g is outside [0, 1)",
                                tolerance);
  size_t best = n;
  for (size_t i = 0; i < n; i++) {
    if (pts[i].status != STOKE_TUNE_MEASURED || !eligible(&pts[i])) continue;
    if (best == n || pts[i].samples_per_s > pts[best].samples_per_s) best = i;
  }
  if (best == n) return stoke__set_tls_error(STOKE_EINVAL, "tune: %s", none);
  double floor_tp = (1.0 - tolerance) * pts[best].samples_per_s;
  bool any_busy = false;
  for (size_t i = 0; i < n; i++)
    if (pts[i].status == STOKE_TUNE_MEASURED && eligible(&pts[i]) &&
        pts[i].samples_per_s >= floor_tp &&
        pts[i].verdict == STOKE_VERDICT_BUSY)
      any_busy = true;
  bool need_busy = have_consumer && any_busy;
  size_t knee = n;
  for (size_t i = 0; i < n; i++) {
    const stoke_tune_point *p = &pts[i];
    if (p->status != STOKE_TUNE_MEASURED || !eligible(p) ||
        p->samples_per_s < floor_tp)
      continue;
    if (need_busy && p->verdict != STOKE_VERDICT_BUSY) continue;
    if (knee == n || cheaper_than(p, &pts[knee])) knee = i;
  }
  out->index = knee;
  out->best = best;
  out->stall_removed = !have_consumer ? -1 : need_busy ? 1 : 0;
  return 0;
}

double stoke__knee_share(const stoke_tune_point *pts,
                         const stoke_tune_knee *k) {
  double best = pts[k->best].samples_per_s;
  return best > 0 ? 100.0 * pts[k->index].samples_per_s / best : 100.0;
}

int stoke_tune_knee_find(const stoke_tune_point *pts, size_t n,
                         double tolerance, int have_consumer,
                         stoke_tune_knee *out) {
  int rc = stoke__knee_pick(pts, n, tolerance, have_consumer, any_point,
                            cheaper, "no measured point", out);
  if (rc != 0) return rc;
  const stoke_tune_point *k = &pts[out->index];
  double share = stoke__knee_share(pts, out);
  const char *why = out->stall_removed == 1
                        ? "the cheapest busy configuration"
                    : out->stall_removed == 0
                        ? "no configuration as fast as the best removes the "
                          "stall; the cheapest of the fastest"
                        : "the cheapest configuration";
  snprintf(out->reason, sizeof out->reason,
           "%s within %.0f%% of the best: %u workers, prefetch %u, batch "
           "%zu at %.1f%% of the best throughput",
           why, 100.0 * tolerance, k->n_workers, k->prefetch, k->batch_size,
           share);
  return 0;
}


int stoke__tune_predicted_point(const stoke_model *m, unsigned workers,
                                unsigned prefetch, uint64_t host_bytes,
                                stoke_tune_point *out) {
  stoke_prediction pr;
  int rc = stoke_predict_step(m, workers, prefetch, &pr);
  if (rc) return rc;
  memset(out, 0, sizeof *out);
  out->n_workers = workers;
  out->prefetch = prefetch;
  out->batch_size = m->batch_size;
  out->host_bytes = host_bytes;
  out->status = STOKE_TUNE_MEASURED;
  out->samples_per_s =
      pr.step_ns > 0 ? (double)m->batch_size * 1e9 / (double)pr.step_ns : 0;
  out->wait_ratio = pr.wait_ratio;
  out->verdict = pr.wait_ratio < STOKE_BUSY_WAIT_RATIO
                     ? STOKE_VERDICT_BUSY
                     : STOKE_VERDICT_STARVING;
  out->predicted_samples_per_s = out->samples_per_s;
  return 0;
}


/* The coarse ladder the model is asked first; between its knee and the
** rung below, every W. */
static const unsigned coarse[] = {1,  2,  3,  4,  6,  8,   12,  16,  24,
                                  32, 48, 64, 96, 128, 192, 256, 384, 512,
                                  768, 1024};
#define N_COARSE (sizeof coarse / sizeof coarse[0])
#define MAX_FINE 256

int stoke_tune_knee_model(const stoke_model *m, unsigned k, unsigned w_lo,
                           unsigned w_hi, double tolerance,
                           stoke_tune_point *out, stoke_tune_knee *knee_out) {
  if (!m || !out || w_lo > w_hi || k < 1)
    return stoke__set_tls_error(STOKE_EINVAL, "knee: bad arguments");
  stoke_tune_point pts[N_COARSE + 2 + MAX_FINE];
  size_t n = 0;
  int have_consumer = m->t_c_ns + m->copy_ns > 0;
  /* w_lo and w_hi themselves, and the coarse rungs between. */
  int rc = stoke__tune_predicted_point(m, w_lo, k, 0, &pts[n]);
  if (rc) return stoke__set_tls_error(rc, "knee: the model cannot predict");
  n++;
  for (size_t i = 0; i < N_COARSE; i++)
    if (coarse[i] > w_lo && coarse[i] < w_hi &&
        stoke__tune_predicted_point(m, coarse[i], k, 0, &pts[n]) == 0)
      n++;
  if (w_hi > w_lo && stoke__tune_predicted_point(m, w_hi, k, 0, &pts[n]) == 0)
    n++;
  stoke_tune_knee kn;
  rc = stoke_tune_knee_find(pts, n, tolerance, have_consumer, &kn);
  if (rc) return rc;
  /* Refine: every W between the rung below the coarse knee and it. */
  unsigned hi = pts[kn.index].n_workers, lo = w_lo;
  for (size_t i = 0; i < n; i++)
    if (pts[i].n_workers < hi && pts[i].n_workers > lo) lo = pts[i].n_workers;
  size_t n0 = n;
  for (unsigned w = lo + 1; w < hi && n < n0 + MAX_FINE; w++)
    if (stoke__tune_predicted_point(m, w, k, 0, &pts[n]) == 0) n++;
  if (n > n0) {
    rc = stoke_tune_knee_find(pts, n, tolerance, have_consumer, &kn);
    if (rc) return rc;
  }
  *out = pts[kn.index];
  if (knee_out) *knee_out = kn;
  return 0;
}

unsigned stoke_tune_knee_w_max(const stoke_model *m) {
  double p = stoke__model_cores_avail(m);
  /* Beyond 8 workers per core nothing more is asked of the model. */
  unsigned w = (unsigned)(8 * p) > m->n_workers ? (unsigned)(8 * p)
                                                 : m->n_workers;
  return w > 256 ? 256 : w;
}

int stoke_tune_knee_model_tuned(const stoke_model *m, stoke_tune_point *out) {
  if (!m || !out) return stoke__set_tls_error(STOKE_EINVAL, "knee: NULL");
  unsigned own = m->prefetch ? m->prefetch : 1;
  unsigned ks[4] = {1, 2, 4, own};
  size_t nk = own == 1 || own == 2 || own == 4 ? 3 : 4;
  unsigned w_hi = stoke_tune_knee_w_max(m);
  stoke_tune_point pts[4];
  size_t np = 0;
  for (size_t i = 0; i < nk; i++)
    if (stoke_tune_knee_model(m, ks[i], 1, w_hi, STOKE_TUNE_TOLERANCE,
                              &pts[np], NULL) == 0)
      np++;
  stoke_tune_knee kn;
  int rc = np ? stoke_tune_knee_find(pts, np, STOKE_TUNE_TOLERANCE,
                                     m->t_c_ns + m->copy_ns > 0, &kn)
              : STOKE_EINVAL;
  if (rc) return stoke__set_tls_error(STOKE_EINVAL, "knee: no prediction");
  *out = pts[kn.index];
  return 0;
}
