/* search.c — the adaptive sweep: a worker ladder that follows waiting
** stages past the core count, a bisection to the knee, and the queue model
** skipping what cannot matter.
**
** DESIGN
** A fixed ladder of max(2 x cores, 8) workers is right for samples that
** burn a core and wrong for samples that wait (remote storage, the
** network): 32 samples of 5 ms of waiting against a 12 ms step need 14
** workers on any machine.  So, per batch size:
**
**   1. the ladder 0, 1, 2, 4, ... keeps doubling while
**        - the rung's best throughput rose by tolerance / 2 or more over
**          the rung before (more workers still help), or the rung's own
**          queue model predicts the next doubling buys that much (one
**          noisy rung on a loaded machine must not end the ladder); one
**          worker against none needs neither (it buys only the overlap),
**        - the stall is not gone (the rung's best point still waits
**          tolerance or more of the step: were it less, no more workers
**          could buy as much as the knee's tolerance), and
**        - past 2 x the cores, the workers mostly wait (under half of a
**          sample on a core, by the stage clocks): CPU-bound samples stop
**          near the core count, waiting ones go on;
**      up to the top: max_workers, else STOKE_TUNE_MAX_WORKERS, and the
**      largest count whose host ledger fits the memory budget.
**   2. the knee of what was measured (stoke_tune_knee_find, the rule every
**      client shares) lies between its rung and the rung below; bisect
**      there to one worker, the first probe at the queue model's own knee
**      (then one below it, to confirm), the rest halving.
**   3. the queue model of each measured point skips what cannot matter, and
**      every skip is recorded as a SKIPPED point with its prediction and
**      reason: a deeper prefetch that the model predicts no faster
**      (tolerance / 2) than the rung's first depth, unless that point's
**      verdict is variance (the spread is what prefetch buys) or the model
**      does not predict that point's own verdict (it missed a spread that
**      prefetch may cover: bench/knee.sh's mixed scenario); a bisection
**      probe it predicts below (1 - 2 x tolerance) of the best, which
**      cannot be within the tolerance even with the model's error.
**
** Nothing here reads a clock: the oracle measures (tune.c runs a loader;
** the tests give curves), so the rules are tested exactly. */
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define PREFETCH_CAP 64

typedef struct search {
  const stoke_tune_config *c;
  const stoke__tune_oracle *o;
  stoke_tune_point *pts;
  stoke_model *models; /* per recorded point, valid where have[i] */
  unsigned char *have;
  size_t cap, n, bound;
  double tol;
  bool stopped;
  int rc;
  bool consumer;       /* a step is given: the stall matters */
  unsigned cores;
  unsigned ks[PREFETCH_CAP]; /* the prefetch depths, ascending */
  size_t nk;
  size_t first;        /* the first point of the batch size in hand */
} search;

double stoke__tune_tolerance(const stoke_tune_config *c) {
  return c->tolerance > 0 && c->tolerance < 1 ? c->tolerance
                                              : STOKE_TUNE_TOLERANCE;
}

unsigned stoke__tune_top(const stoke_tune_config *c) {
  return c->max_workers ? c->max_workers : STOKE_TUNE_MAX_WORKERS;
}

static unsigned log2_ceil(unsigned x) {
  unsigned n = 0;
  while ((1u << n) < x && n < 31) n++;
  return n;
}

size_t stoke__tune_search_bound(const stoke_tune_config *c) {
  unsigned top = stoke__tune_top(c);
  size_t nk = c->prefetch ? c->n_prefetch : 3;
  size_t nb = c->batch_sizes ? c->n_batch_sizes : 1;
  /* Rungs 0, 1, 2, ..., top; bisection probes: two guided, then halving
  ** (a moved knee may add as many again). */
  size_t rungs = 2 + log2_ceil(top);
  size_t probes = 2 + 2 * (size_t)log2_ceil(top);
  return nb * (rungs * nk + probes);
}

/* ---- recording ----------------------------------------------------------- */

static bool cancelled(const search *s) {
  return s->c->cancel && *s->c->cancel;
}

/* A new point of batch size b (the ledger decides OVER_BUDGET), or NULL
** when pts is full. */
static stoke_tune_point *new_point(search *s, unsigned w, unsigned k,
                                   size_t b, const char *note) {
  if (s->n >= s->cap) return NULL;
  stoke_tune_point *p = &s->pts[s->n];
  memset(p, 0, sizeof *p);
  s->have[s->n] = 0;
  p->n_workers = w;
  p->prefetch = k;
  p->batch_size = b;
  snprintf(p->note, sizeof p->note, "%s", note);
  stoke_config lc = s->c->base;
  lc.n_workers = w;
  lc.prefetch = k;
  lc.batch_size = b;
  stoke_host_ledger g;
  g.struct_size = sizeof g;
  int rc = stoke_host_ledger_compute(&lc, &g);
  p->host_bytes = g.total_bytes;
  if (rc == STOKE_EBUDGET) {
    p->status = STOKE_TUNE_OVER_BUDGET;
    snprintf(p->note, sizeof p->note, "over the host memory budget");
  }
  return p;
}

/* A point decided without running (over budget, skipped): recorded, with
** the progress call after it. */
static void decided(search *s, stoke_tune_point *p) {
  size_t i = s->n++;
  if (s->c->progress && s->c->progress(s->c->progress_user, i, s->bound, p))
    s->stopped = true;
}

/* Run the PENDING point p (the next in pts): 0, or 1 when the sweep
** stops (cancelled, progress, or an error in s->rc). */
static int run(search *s, stoke_tune_point *p) {
  if (p->status == STOKE_TUNE_OVER_BUDGET) {
    decided(s, p);
    return s->stopped;
  }
  size_t i = s->n;
  if (cancelled(s) ||
      (s->c->progress &&
       s->c->progress(s->c->progress_user, i, s->bound, p))) {
    s->stopped = true; /* before it: not recorded */
    return 1;
  }
  int have = 0;
  int rc = s->o->measure(s->o->user, s->c, p, &s->models[i], &have);
  if (rc) {
    s->rc = rc;
    s->stopped = true;
    return 1;
  }
  s->have[i] = (unsigned char)have;
  s->n++;
  if (s->c->progress && s->c->progress(s->c->progress_user, i, s->bound, p))
    s->stopped = true;
  return s->stopped || cancelled(s);
}

static double ms(int64_t ns) { return (double)ns / 1e6; }

/* ---- the ladder ------------------------------------------------------------ */

static int64_t predicted_step(const stoke_model *m, unsigned w, unsigned k) {
  stoke_prediction pr;
  return stoke_predict_step(m, w, k, &pr) == 0 ? pr.step_ns : INT64_MAX;
}

/* Does the model, made from the run of p, predict p's own verdict?  When it
** does not (it says busy where the run waited), its word on what deeper
** prefetch buys is not taken: the spread it missed may be just what
** prefetch covers. */
static bool agrees(const stoke_model *m, const stoke_tune_point *p) {
  stoke_tune_point q;
  if (stoke__tune_predicted_point(m, p->n_workers, p->prefetch, 0, &q) != 0)
    return false;
  bool busy = p->verdict == STOKE_VERDICT_BUSY;
  return busy == (q.verdict == STOKE_VERDICT_BUSY);
}

/* Every prefetch depth at W workers, the first measured, the deeper ones
** measured unless the first one's model says they cannot matter.  Returns
** the index of the rung's fastest measured point, or -1 (none: the budget,
** or the sweep stopped). */
static long rung(search *s, unsigned w, size_t b) {
  long best = -1;
  size_t i0 = s->n;
  char note[64];
  snprintf(note, sizeof note, "ladder");
  stoke_tune_point *p0 = new_point(s, w, s->ks[0], b, note);
  if (!p0 || run(s, p0)) return -1;
  if (p0->status != STOKE_TUNE_MEASURED) return -1;
  best = (long)i0;
  const stoke_model *m = s->have[i0] ? &s->models[i0] : NULL;
  int64_t step0 = m ? predicted_step(m, w, s->ks[0]) : 0;
  for (size_t j = 1; j < s->nk; j++) {
    unsigned k = s->ks[j];
    stoke_tune_point *p = new_point(s, w, k, b, note);
    if (!p) break;
    if (p->status == STOKE_TUNE_OVER_BUDGET) {
      decided(s, p);
      break; /* deeper ones need more still */
    }
    const stoke_tune_point *q0 = &s->pts[i0];
    if (m && q0->verdict != STOKE_VERDICT_VARIANCE && agrees(m, q0)) {
      int64_t sk = predicted_step(m, w, k);
      if (sk != INT64_MAX && step0 != INT64_MAX &&
          (double)sk >= (double)step0 * (1 - s->tol / 2)) {
        p->status = STOKE_TUNE_SKIPPED;
        p->predicted_samples_per_s =
            sk > 0 ? (double)b * 1e9 / (double)sk : 0;
        snprintf(p->note, sizeof p->note,
                 "model: prefetch %u predicts %.2f ms a step, no faster than "
                 "prefetch %u's %.2f ms",
                 k, ms(sk), s->ks[0], ms(step0));
        decided(s, p);
        if (s->stopped) return best;
        continue;
      }
    }
    size_t at = s->n;
    if (run(s, p)) return s->rc ? -1 : best;
    if (s->pts[at].status == STOKE_TUNE_MEASURED &&
        s->pts[at].samples_per_s > s->pts[best].samples_per_s)
      best = (long)at;
  }
  return best;
}

/* The largest worker count at most `top` whose host ledger (at the
** shallowest prefetch) fits the budget; -1 when not even 0 workers do. */
static long memory_top(const search *s, unsigned top, size_t b) {
  if (!s->c->base.mem_budget_bytes) return top;
  stoke_config lc = s->c->base;
  lc.prefetch = s->ks[0];
  lc.batch_size = b;
  stoke_host_ledger g;
  g.struct_size = sizeof g;
  long lo = -1, hi = (long)top; /* lo fits (or -1), the answer in [lo, hi] */
  lc.n_workers = top;
  if (stoke_host_ledger_compute(&lc, &g) == 0) return top;
  while (lo < hi) {
    long mid = lo + (hi - lo + 1) / 2;
    lc.n_workers = (unsigned)mid;
    if (stoke_host_ledger_compute(&lc, &g) == 0)
      lo = mid;
    else
      hi = mid - 1;
  }
  stoke__clear_tls_error();
  return lo;
}

static double cpu_frac_of(const search *s, long i) {
  if (i < 0 || !s->have[i] || s->models[i].t_d_ns <= 0) return 0;
  return (double)s->models[i].t_cpu_ns / (double)s->models[i].t_d_ns;
}

/* Does the rung's model predict that the next doubling still buys
** tolerance / 2?  One noisy rung on a loaded machine must not end the
** ladder while the model, made from that very run, says more workers
** help. */
static bool model_says_rises(const search *s, long i, unsigned w, long top) {
  if (i < 0 || !s->have[i]) return false;
  unsigned next = 2 * w > (unsigned)top ? (unsigned)top : 2 * w;
  if (next <= w) return false;
  const stoke_model *m = &s->models[i];
  unsigned k = s->pts[i].prefetch;
  int64_t now = predicted_step(m, w, k), then = predicted_step(m, next, k);
  return now != INT64_MAX && then != INT64_MAX &&
         (double)then * (1 + s->tol / 2) <= (double)now;
}

static void ladder(search *s, size_t b) {
  long top = memory_top(s, stoke__tune_top(s->c), b);
  if (top < 0) {
    /* Not even the inline loader fits: say so with its point. */
    stoke_tune_point *p = new_point(s, 0, s->ks[0], b, "ladder");
    if (p) decided(s, p);
    return;
  }
  unsigned w = 0;
  long prev = -1;
  for (;;) {
    long best = rung(s, w, b);
    if (best < 0 || s->stopped) return;
    if (w >= (unsigned)top) return;
    const stoke_tune_point *p = &s->pts[best];
    if (w >= 1) {
      /* One worker against none buys only the overlap with the step;
      ** from two on, a doubling must buy throughput. */
      bool rose = w < 2 || prev < 0 ||
                  p->samples_per_s >=
                      s->pts[prev].samples_per_s * (1 + s->tol / 2) ||
                  model_says_rises(s, best, w, top);
      bool gone = s->consumer && p->wait_ratio < s->tol;
      bool waits = w < 2 * s->cores || cpu_frac_of(s, best) < 0.5;
      if (!rose || gone || !waits) return;
    }
    prev = best;
    unsigned next = w == 0 ? 1 : 2 * w;
    w = next > (unsigned)top ? (unsigned)top : next;
  }
}

/* ---- the bisection ----------------------------------------------------------- */

/* The knee of this batch size's points so far, or -1. */
static long knee_now(const search *s, stoke_tune_knee *k) {
  if (s->n <= s->first) return -1;
  if (stoke_tune_knee_find(s->pts + s->first, s->n - s->first, s->tol,
                           s->consumer, k) != 0) {
    stoke__clear_tls_error();
    return -1;
  }
  return (long)(s->first + k->index);
}

/* The largest worker count below `hi` decided so far (measured, or skipped
** as not good), or -1. */
static long decided_below(const search *s, unsigned hi) {
  long lo = -1;
  for (size_t i = s->first; i < s->n; i++) {
    const stoke_tune_point *p = &s->pts[i];
    if ((p->status == STOKE_TUNE_MEASURED || p->status == STOKE_TUNE_SKIPPED) &&
        p->n_workers < hi && (long)p->n_workers > lo)
      lo = (long)p->n_workers;
  }
  return lo;
}

/* The cheapest prefetch depth at W that the model predicts within
** tolerance / 2 of the fastest depth at W; *tp its predicted throughput
** (0 when the model cannot say). */
static unsigned best_depth(const search *s, const stoke_model *m, unsigned w,
                           stoke_tune_point *q_out) {
  stoke_tune_point q[PREFETCH_CAP];
  double top = 0;
  size_t ok = 0;
  for (size_t j = 0; j < s->nk; j++) {
    if (stoke__tune_predicted_point(m, w, s->ks[j], 0, &q[j]) != 0)
      q[j].samples_per_s = 0;
    if (q[j].samples_per_s > top) top = q[j].samples_per_s;
  }
  for (ok = 0; ok < s->nk; ok++)
    if (q[ok].samples_per_s >= top * (1 - s->tol / 2)) break;
  if (ok == s->nk) ok = 0;
  *q_out = q[ok];
  return s->ks[ok];
}

/* Would the model call W (at its best depth) a knee candidate: within the
** tolerance of the best and, when the knee removes the stall, busy? */
static bool predicted_good(const search *s, const stoke_model *m, unsigned w,
                           double floor_tp, bool need_busy) {
  stoke_tune_point q;
  best_depth(s, m, w, &q);
  return q.samples_per_s >= floor_tp &&
         (!need_busy || q.verdict == STOKE_VERDICT_BUSY);
}

/* The model to predict between lo and hi: the knee point's, else the
** nearest measured one's. */
static const stoke_model *model_near(const search *s, long ki, unsigned w) {
  if (s->have[ki]) return &s->models[ki];
  const stoke_model *m = NULL;
  unsigned dist = 0;
  for (size_t i = s->first; i < s->n; i++) {
    if (!s->have[i]) continue;
    unsigned d = s->pts[i].n_workers > w ? s->pts[i].n_workers - w
                                         : w - s->pts[i].n_workers;
    if (!m || d < dist) {
      m = &s->models[i];
      dist = d;
    }
  }
  return m;
}

static void bisect(search *s, size_t b) {
  stoke_tune_knee k;
  unsigned tries = 0, max_tries = 2 + 2 * log2_ceil(stoke__tune_top(s->c));
  long last = -1;
  bool last_good = false, guided = false;
  for (;;) {
    long ki = knee_now(s, &k);
    if (ki < 0 || s->stopped) return;
    const stoke_tune_point *kp = &s->pts[ki];
    unsigned hi = kp->n_workers;
    long lo = decided_below(s, hi);
    if (lo < 0 || hi - (unsigned)lo <= 1 || tries >= max_tries) return;
    double best_tp = s->pts[s->first + k.best].samples_per_s;
    bool need_busy = k.stall_removed == 1;
    const stoke_model *m = model_near(s, ki, hi);
    unsigned mid = (unsigned)lo + (hi - (unsigned)lo) / 2;
    const char *why = "bisection";
    if (!guided && m) {
      /* The model's own knee in (lo, hi]: predicted good is monotone in
      ** W (at each W's best depth), so halve on it; then probe there, or
      ** one below the rung when the model says the rung itself. */
      unsigned a = (unsigned)lo + 1, z = hi;
      while (a < z) {
        unsigned g = a + (z - a) / 2;
        if (predicted_good(s, m, g, (1 - s->tol) * best_tp, need_busy))
          z = g;
        else
          a = g + 1;
      }
      mid = a < hi ? a : hi - 1;
      why = "bisection, at the model's knee";
    } else if (guided && tries == 1 && last_good && last - 1 > lo) {
      mid = (unsigned)last - 1; /* confirm: one below a good guess */
      why = "bisection, one below the model's knee";
    }
    guided = true;
    tries++;
    unsigned kk = kp->prefetch;
    stoke_tune_point q;
    memset(&q, 0, sizeof q);
    if (m) kk = best_depth(s, m, mid, &q);
    char note[96];
    snprintf(note, sizeof note, "%s (between %ld and %u workers)", why, lo,
             hi);
    stoke_tune_point *p = new_point(s, mid, kk, b, note);
    if (!p) return;
    if (m && p->status == STOKE_TUNE_PENDING &&
        q.samples_per_s < (1 - 2 * s->tol) * best_tp) {
      p->status = STOKE_TUNE_SKIPPED;
      p->predicted_samples_per_s = q.samples_per_s;
      snprintf(p->note, sizeof p->note,
               "model: %u workers predict %.1f samples/s, %.0f%% of the "
               "best: cannot be within %.0f%%",
               mid, q.samples_per_s, 100 * q.samples_per_s / best_tp,
               100 * s->tol);
      decided(s, p);
      last = mid;
      last_good = false;
      continue;
    }
    if (m) p->predicted_samples_per_s = q.samples_per_s;
    if (run(s, p)) return;
    long k2 = knee_now(s, &k);
    last = mid;
    last_good = k2 >= 0 && s->pts[k2].n_workers <= mid;
  }
}

/* ---- the sweep ----------------------------------------------------------------- */

int stoke__tune_search(const stoke_tune_config *c,
                       const stoke__tune_oracle *o, stoke_tune_point *pts,
                       size_t cap, size_t *n_done) {
  search s;
  memset(&s, 0, sizeof s);
  s.c = c;
  s.o = o;
  s.pts = pts;
  s.cap = cap;
  s.bound = stoke__tune_search_bound(c);
  s.tol = stoke__tune_tolerance(c);
  s.consumer = c->step != NULL;
  s.cores = stoke__online_cpus();
  /* The depths ascending and distinct, so the first is the cheapest. */
  size_t nk = c->prefetch ? c->n_prefetch : 3;
  if (nk > PREFETCH_CAP) nk = PREFETCH_CAP;
  static const unsigned dk[] = {1, 2, 4};
  for (size_t i = 0; i < nk; i++) {
    unsigned k = c->prefetch ? c->prefetch[i] : dk[i];
    size_t j = 0;
    while (j < s.nk && s.ks[j] < k) j++;
    if (j < s.nk && s.ks[j] == k) continue;
    memmove(&s.ks[j + 1], &s.ks[j], (s.nk - j) * sizeof s.ks[0]);
    s.ks[j] = k;
    s.nk++;
  }
  s.models = stoke__calloc(c->base.alloc, cap ? cap : 1, sizeof *s.models);
  s.have = stoke__calloc(c->base.alloc, cap ? cap : 1, 1);
  if (!s.models || !s.have) {
    stoke__free(c->base.alloc, s.models);
    stoke__free(c->base.alloc, s.have);
    return stoke__set_tls_error(STOKE_ENOMEM, "tune: out of memory");
  }
  size_t nb = c->batch_sizes ? c->n_batch_sizes : 1;
  for (size_t i = 0; i < nb && !s.stopped; i++) {
    size_t b = c->batch_sizes ? c->batch_sizes[i] : c->base.batch_size;
    s.first = s.n;
    ladder(&s, b);
    if (!s.stopped) bisect(&s, b);
  }
  stoke__free(c->base.alloc, s.models);
  stoke__free(c->base.alloc, s.have);
  *n_done = s.n;
  return s.rc;
}
