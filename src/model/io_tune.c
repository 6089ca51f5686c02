/* io_tune.c — the io_concurrency rule (io_tune.h).
**
** One window, one decision, in this order:
**   1. the window right after a change is not judged (the requests of the
**      old limit are still landing);
**   2. a grow on trial is judged: the consumer's steps/s must have risen
**      by STOKE__IOT_GAIN, else back to the limit it replaced and the
**      ceiling closed below the trial (a link that is saturated, or a
**      server that answers no faster with more at once, gains nothing
**      from more requests).  A trial across which the decode workers
**      changed (the workers' autotuner moved them) is kept unjudged: its
**      numbers are not its own;
**   3. throttled: at least STOKE__IOT_THROTTLED of the window's requests
**      were answered 429 or 503: half the requests in flight (at least
**      one), and the ceiling closed below the old limit.  The server
**      pushes back; more would be refused faster;
**   4. starving and latency-bound: the consumer waited over
**      STOKE__IOT_STARVING of the window while the requests in flight
**      averaged STOKE__IOT_BOUND of the limit or more (requests queued
**      behind it): twice the limit, up to the ceiling.  A grow is a
**      trial (2);
**   5. else nothing: a quiet loader keeps its limit (idle connections
**      cost a socket each, not a core).
** At most one trial at a time, and the ceiling only comes down, so the
** limit settles after log2(64) = 6 trials at most. */
#include "model/io_tune.h"

#include <stdio.h>
#include <string.h>

void stoke__iot_init(stoke__iot_state *st, unsigned limit) {
  memset(st, 0, sizeof *st);
  st->limit = limit ? limit : STOKE_IO_CONCURRENCY_DEFAULT;
  st->ceiling = STOKE_IO_CONCURRENCY_MAX;
}

static double rate_of(const stoke__iot_window *w) {
  return w->wall_ns > 0 ? (double)w->steps * 1e9 / (double)w->wall_ns : 0;
}

void stoke__iot_decide(stoke__iot_state *st, const stoke__iot_window *w,
                       stoke__iot_decision *d) {
  memset(d, 0, sizeof *d);
  d->from = d->to = st->limit;
  if (w->wall_ns <= 0 || w->steps == 0) return;
  d->wait = (double)w->wait_ns / (double)w->wall_ns;
  d->in_flight = (double)w->busy_ns / (double)w->wall_ns;
  d->throttled_frac =
      w->requests ? (double)w->throttled / (double)w->requests : 0;
  if (st->settle) { /* 1 */
    st->settle = false;
    return;
  }
  double rate = rate_of(w);
  if (st->trial_from) { /* 2 */
    unsigned from = st->trial_from;
    st->trial_from = 0;
    if (w->workers != st->trial_workers) return; /* not its own numbers */
    if (rate < st->trial_rate * STOKE__IOT_GAIN) {
      d->kind = STOKE__IOT_ROLLBACK;
      d->to = from;
      st->ceiling = from;
      st->limit = from;
      st->settle = true;
      snprintf(d->reason, sizeof d->reason,
               "%u requests in flight made %.1f steps/s of %.1f (under "
               "+%.0f%%): back to %u, no more tried",
               d->from, rate, st->trial_rate,
               100 * (STOKE__IOT_GAIN - 1), from);
      return;
    }
  }
  if (w->requests >= STOKE__IOT_MIN_REQUESTS &&
      d->throttled_frac >= STOKE__IOT_THROTTLED) { /* 3 */
    if (st->limit <= 1) return; /* one at a time already: never more */
    d->kind = STOKE__IOT_FEWER;
    d->to = STOKE__MAX(1u, st->limit / 2);
    st->ceiling = d->to;
    st->limit = d->to;
    st->settle = true;
    snprintf(d->reason, sizeof d->reason,
             "throttled: %.0f%% of %llu requests answered 429/503, the "
             "server pushes back", 100 * d->throttled_frac,
             (unsigned long long)w->requests);
    return;
  }
  if (d->wait > STOKE__IOT_STARVING &&
      d->in_flight >= STOKE__IOT_BOUND * st->limit &&
      st->limit < st->ceiling) { /* 4 */
    d->kind = STOKE__IOT_MORE;
    d->to = STOKE__MIN(2 * st->limit, st->ceiling);
    st->trial_from = st->limit;
    st->trial_rate = rate;
    st->trial_workers = w->workers;
    st->limit = d->to;
    st->settle = true;
    snprintf(d->reason, sizeof d->reason,
             "latency-bound: waiting %.0f%% with %.1f of %u requests in "
             "flight on average (the limit binds)",
             100 * d->wait, d->in_flight, d->from);
  }
}
