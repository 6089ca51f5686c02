/* fetch.c — the fetch stage's verdict (stoke_fetch_diagnose, stoke.h):
** throttled, latency-bound, bandwidth-bound, from the stats' fetch_*
** numbers alone, so that a test can hand it numbers and a report can
** explain them.
**
** Latency and bandwidth are told apart within one run, per request: where
** the readers are all busy and their requests explain the step, what each
** request spends its time on decides.  Waiting for the first byte (the
** round trip, the server's think time) is hidden by more requests in
** flight; receiving the body at the link's rate is not, since the
** requests share that rate.  No verdict compares runs. */
#include "core/core.h"

#include <math.h>
#include <string.h>

const char *stoke_fetch_verdict_name(int verdict) {
  switch (verdict) {
  case STOKE_FETCH_LATENCY: return "latency-bound";
  case STOKE_FETCH_BANDWIDTH: return "bandwidth-bound";
  case STOKE_FETCH_THROTTLED: return "throttled";
  default: return "none";
  }
}

int stoke_fetch_diagnose(const stoke_stats *st, stoke_fetch_diagnosis *out) {
  if (!st || !out) return STOKE_EINVAL;
  memset(out, 0, sizeof *out);
  if (!st->fetch_remote || st->fetch_requests == 0 || st->steps == 0 ||
      st->wait_ratio <= STOKE_BUSY_WAIT_RATIO)
    return 0;
  out->throttled_frac =
      (double)st->fetch_throttled / (double)st->fetch_requests;
  unsigned io = st->io_concurrency ? st->io_concurrency : 1;
  if (out->throttled_frac > STOKE_FETCH_THROTTLED_FRAC) {
    out->verdict = STOKE_FETCH_THROTTLED;
    out->io_concurrency = io > 1 ? io / 2 : 1;
    return 0;
  }
  /* The fetch's wall time from its rate; the steps' from their clocks:
  ** requests per step is the ratio of the two rates (the fetch counts
  ** warm-up too, the steps do not: rates, not totals, are compared). */
  double run_s = (double)(st->wait.total_ns + st->compute.total_ns) / 1e9;
  if (st->fetch_bytes_per_s <= 0 || run_s <= 0 || st->fetch_in_flight <= 0)
    return 0;
  double fetch_s = (double)st->fetch_bytes / st->fetch_bytes_per_s;
  double steps_per_s = (double)st->steps / run_s;
  out->requests_per_step = (double)st->fetch_requests / fetch_s / steps_per_s;
  out->step_ms = 1e3 * run_s / (double)st->steps;
  out->fetch_step_ms = st->fetch_latency_p50_ms * out->requests_per_step /
                       st->fetch_in_flight;
  /* The readers: each worker holds one request at a time, the block
  ** order's read-ahead io_concurrency; the smaller pool full is busy. */
  unsigned readers = st->n_workers ? st->n_workers : 1;
  if (io < readers) readers = io;
  bool busy = st->fetch_in_flight >= STOKE_FETCH_BUSY_FRAC * readers;
  if (!busy || out->fetch_step_ms < 0.5 * out->step_ms) return 0;
  double compute_ms = (double)st->compute.total_ns / 1e6 / (double)st->steps;
  out->body_frac = st->fetch_body_frac;
  out->bytes_per_step = st->fetch_bytes_per_s / steps_per_s;
  if (st->fetch_body_frac >= STOKE_FETCH_BODY_FRAC) {
    out->verdict = STOKE_FETCH_BANDWIDTH;
    /* While the bytes cross the link, a step takes at least its bytes at
    ** the rate the link gave; the advice prices what changes the bytes
    ** (advise.c). */
    out->link_step_ms = 1e3 * out->bytes_per_step / st->fetch_bytes_per_s;
    return 0;
  }
  out->verdict = STOKE_FETCH_LATENCY;
  double want = compute_ms > 0
                    ? ceil(st->fetch_in_flight * out->fetch_step_ms / compute_ms)
                    : STOKE_FETCH_MAX_CONCURRENCY;
  if (want < st->fetch_in_flight + 1) want = ceil(st->fetch_in_flight + 1);
  if (want > STOKE_FETCH_MAX_CONCURRENCY) want = STOKE_FETCH_MAX_CONCURRENCY;
  out->io_concurrency = (unsigned)want;
  double fetch_then = out->fetch_step_ms * st->fetch_in_flight / want;
  out->predicted_step_ms = fetch_then > compute_ms ? fetch_then : compute_ms;
  return 0;
}
