/* diagnose.c — from the two clocks to a verdict.
**
** busy      waiting is under STOKE_BUSY_WAIT_RATIO of the step: the model
**           is the cost, and a faster pipeline would change nothing;
** starving  waiting is a real share and the ready queue was empty at most
**           next() calls (>= STOKE_STARVING_EMPTY_FRAC): the producer's
**           mean rate is below the consumer's (Little's law: a queue that
**           is empty on average cannot be fixed by making it deeper);
** variance  waiting is a real share but the queue was usually non-empty:
**           the mean keeps up and the wait comes from a long tail, which
**           deeper prefetch absorbs.
** The thresholds and their reasoning are in docs/diagnosis.md. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

const char *stoke_verdict_name(int verdict) {
  switch (verdict) {
  case STOKE_VERDICT_BUSY: return "busy";
  case STOKE_VERDICT_STARVING: return "starving";
  case STOKE_VERDICT_VARIANCE: return "variance";
  default: return "unknown";
  }
}

int stoke_diagnose(const stoke_stats *st, stoke_diagnosis *out) {
  if (!st || !out) return STOKE_EINVAL;
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
  if (st->wait_ratio < STOKE_BUSY_WAIT_RATIO) {
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
  return 0;
}
