/* diagnose.c — from the two clocks to a verdict.
**
** busy      waiting is under STOKE_BUSY_WAIT_RATIO of the step: the model
**           is the cost, and a faster pipeline would change nothing;
** starving  waiting is a real share and either a lower bound of the
**           producer's time per batch is STOKE_STARVING_PRODUCER_RATIO
**           times the step or more, or the ready queue was empty at most
**           next() calls (>= STOKE_STARVING_EMPTY_FRAC): the producer's
**           mean rate is below the consumer's (Little's law: a queue that
**           is empty on average cannot be fixed by making it deeper);
** variance  waiting is a real share but the queue was usually non-empty:
**           the mean keeps up and the wait comes from a long tail, which
**           deeper prefetch absorbs;
** python-bound  starving, and the samples are Python code that the GIL
**           serialises (the queue model's t_gil, model.c): more threads do
**           not help, less Python per sample does.
** The thresholds and their reasoning are in docs/diagnosis.md.
**
** stoke_diagnose_ex adds the queue model (model.c): the per-sample costs
** behind the verdict, the step the model predicts for this run and how far
** that is from the measured one. */
#include "model/model.h"

#include <stdio.h>
#include <string.h>

const char *stoke_verdict_name(int verdict) {
  switch (verdict) {
  case STOKE_VERDICT_BUSY: return "busy";
  case STOKE_VERDICT_STARVING: return "starving";
  case STOKE_VERDICT_VARIANCE: return "variance";
  case STOKE_VERDICT_PYTHON: return "python-bound";
  default: return "unknown";
  }
}

int stoke_diagnose(const stoke_stats *st, stoke_diagnosis *out) {
  return stoke_diagnose_ex(st, NULL, 0, out);
}

/* The verdict.  m (may be NULL) gives the producer's floor: when even a
** lower bound of the producer's time per batch is STOKE_STARVING_PRODUCER_
** RATIO times the step, the producer is slower on average whatever the
** queue shows (CPU-bound workers on few cores finish batches in bursts, so
** the queue is non-empty at most next() calls although it drains). */
static int verdict(const stoke_stats *st, const stoke_model *m,
                   stoke_diagnosis *out) {
  memset(out, 0, sizeof *out);
  out->wait_ratio = st->wait_ratio;
  out->queue_empty_frac = st->queue_empty_frac;
  int64_t step_p50 = st->wait.p50_ns + st->compute.p50_ns;
  int64_t floor_ns = step_p50 > 1000000 ? step_p50 : 1000000;
  out->tail_ratio = (double)st->wait.p99_ns / (double)floor_ns;
  if (st->steps < 2) {
    out->verdict = STOKE_VERDICT_UNKNOWN;
    snprintf(out->reason, sizeof out->reason,
             "unknown: %llu measured steps are too few to judge",
             (unsigned long long)st->steps);
    return 0;
  }
  double wait_pct = 100.0 * st->wait_ratio;
  double empty_pct = 100.0 * st->queue_empty_frac;
  int64_t tp = 0, tc = 0;
  if (m && st->n_workers > 0 && m->t_d_ns > 0) {
    tp = stoke__model_producer_floor(m);
    tc = m->t_c_ns + m->copy_ns;
  }
  if (tp > 0 && (double)tp >= STOKE_STARVING_PRODUCER_RATIO * (double)tc) {
    /* Checked before the wait: with the step the consumer asked for (the
    ** caller's model may take out the time its thread waited for a core),
    ** a producer this slow starves it even when its own clock shows the
    ** time as computing. */
    out->verdict = STOKE_VERDICT_STARVING;
    snprintf(out->reason, sizeof out->reason,
             "starving: waiting %.1f%% of the step; the producer needs at "
             "least %.2f ms per batch against a %.2f ms step (queue empty "
             "at %.0f%% of next() calls)",
             wait_pct, (double)tp / 1e6, (double)tc / 1e6, empty_pct);
  } else if (st->wait_ratio < STOKE_BUSY_WAIT_RATIO) {
    out->verdict = STOKE_VERDICT_BUSY;
    snprintf(out->reason, sizeof out->reason,
             "busy: waiting %.1f%% of the step (under %.0f%%), the consumer "
             "is the cost",
             wait_pct, 100.0 * STOKE_BUSY_WAIT_RATIO);
  } else if (st->n_workers == 0) {
    /* No workers: there is no queue, every batch is made inside next(). */
    out->verdict = STOKE_VERDICT_STARVING;
    snprintf(out->reason, sizeof out->reason,
             "starving: waiting %.1f%% of the step; with 0 workers every "
             "batch is produced inside next(), nothing overlaps the step",
             wait_pct);
  } else if (st->queue_empty_frac >= STOKE_STARVING_EMPTY_FRAC) {
    out->verdict = STOKE_VERDICT_STARVING;
    snprintf(out->reason, sizeof out->reason,
             "starving: waiting %.1f%% of the step, ready queue empty at "
             "%.0f%% of next() calls",
             wait_pct, empty_pct);
  } else {
    out->verdict = STOKE_VERDICT_VARIANCE;
    snprintf(out->reason, sizeof out->reason,
             "variance: waiting %.1f%% of the step though the ready queue was "
             "empty at only %.0f%% of next() calls; wait p99 %.2f ms vs "
             "p50 %.2f ms",
             wait_pct, empty_pct, (double)st->wait.p99_ns / 1e6,
             (double)st->wait.p50_ns / 1e6);
  }
  /* Variance too: with the GIL taken in turns by the samples' Python, the
  ** batches come out in bursts (W finish together, then none), so the
  ** queue is empty at fewer calls than the waiting suggests, and more
  ** prefetch cannot raise a rate the GIL caps.  (CI saw 24% waiting, the
  ** queue empty at 33% of calls, 6 workers of pure Python.) */
  if ((out->verdict == STOKE_VERDICT_STARVING ||
       out->verdict == STOKE_VERDICT_VARIANCE) &&
      m && m->t_gil_ns > 0) {
    out->verdict = STOKE_VERDICT_PYTHON;
    snprintf(out->reason, sizeof out->reason,
             "python-bound: waiting %.1f%% of the step; the workers run "
             "Python one at a time: they wait %.0f%% of a sample's time for "
             "the GIL and keep it %.0f%% busy, so more workers will not help",
             wait_pct, 100.0 * m->gil_wait_frac,
             100.0 * (m->gil_busy < 1 ? m->gil_busy : 1.0));
  }
  return 0;
}

int stoke_diagnose_ex(const stoke_stats *st, const stoke_config *cfg,
                      unsigned cores, stoke_diagnosis *out) {
  if (!st || !out) return STOKE_EINVAL;
  stoke_model m;
  if (st->steps == 0 || stoke_model_init(&m, st, cfg, cores) != 0)
    return verdict(st, NULL, out);
  return stoke_diagnose_model(st, &m, out);
}

int stoke_diagnose_model(const stoke_stats *st, const stoke_model *m,
                         stoke_diagnosis *out) {
  if (!st || !out || !m) return STOKE_EINVAL;
  int rc = verdict(st, m, out);
  if (rc != 0 || st->steps == 0) return rc;
  out->measured_step_ns =
      (st->wait.total_ns + st->compute.total_ns) / (int64_t)st->steps;
  out->t_d_ns = m->t_d_ns;
  out->t_cpu_ns = m->t_cpu_ns;
  out->t_io_ns = m->t_io_ns;
  out->cpu_frac = st->worker_busy_ns > 0 ? (double)st->worker_cpu_ns /
                                               (double)st->worker_busy_ns
                                         : 0.0;
  if (out->cpu_frac > 1) out->cpu_frac = 1;
  out->t_c_ns = m->t_c_ns;
  out->copy_ns = m->copy_ns;
  out->batch_size = m->batch_size;
  out->cores_avail = stoke__model_cores_avail(m);
  out->gil_wait_frac = m->gil_wait_frac;
  out->gil_busy = m->gil_busy;
  stoke_prediction p;
  if (stoke_predict_step(m, m->n_workers, m->prefetch ? m->prefetch : 1,
                         &p) != 0)
    return 0;
  out->producer_batch_ns = p.producer_batch_ns;
  out->predicted_step_ns = p.step_ns;
  out->bound = p.bound;
  if (out->measured_step_ns > 0)
    out->model_error = (double)p.step_ns / (double)out->measured_step_ns - 1;
  return 0;
}
