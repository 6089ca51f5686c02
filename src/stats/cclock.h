/* cclock.h — the consumer clock: one step = waiting + computing.
**
** Shared by the loader (src/pipeline/, its next()) and stoke_twoclock (a
** loop over somebody else's loader).  Both see the same events: a step is
** asked for (enter), handed out (leave), and the gap until the next enter
** is its compute.  The clock keeps what both need of them:
**   - the warm-up decision: steps of warm-up epochs, then the first
**     warmup_steps steps, are not measured; the warm-up epochs may end
**     early, in the middle of one, after warmup_end_steps steps and
**     warmup_end_ns (stoke__cclock_warmup_end);
**   - the consumer statistics (wait and compute histograms, steps,
**     samples; the queue-depth bins are the caller's, since only it knows
**     the queue);
**   - the epoch in progress (wall, wait, compute, batches, samples), for
**     its stoke_epoch_stats record;
**   - a pending step: a timed next() that gave up keeps its start, depth
**     and warm-up decision, so that the retry measures the step once;
**   - the consumer's trace track (wait and compute spans);
**   - the machine's other load over the measured steps (outside.h), from
**     the first measured step on.
**
** Thread-safety: one consumer thread at a time; the statistics in `cs`
** are counters and histograms, readable from any thread. */
#ifndef STOKE_STATS_CCLOCK_H
#define STOKE_STATS_CCLOCK_H

#include "stats/outside.h"
#include "stats/stats.h"

typedef struct stoke__cclock {
  stoke__consumer_stats *cs;  /* owned; written only for measured steps */
  stoke__trace *trace;        /* borrowed consumer track, or NULL */
  /* The stoke_clock in force (never AUTO): the loader's resolves it with
  ** its backend.  Under EVENTS the device's CUDA events time wait and
  ** compute: the host's own times go to host_wait / host_compute instead. */
  int clock;
  bool events;                /* clock == STOKE_CLOCK_EVENTS */
  uint64_t warmup_steps;      /* steps left out after the warm-up epochs */
  uint64_t warmup_steps_seen;
  bool measuring;             /* warm-up is over, for good */
  /* The warm-up epochs' early end: off when both are 0. */
  uint64_t end_steps;
  int64_t end_ns;
  uint64_t warmup_epoch_steps; /* steps seen in warm-up epochs */
  int64_t first_step_ns;      /* when the first of them was handed out */
  bool warmup_epochs_over;    /* they ended early, for good */
  /* The step in progress. */
  int64_t leave_ns;           /* 0: no compute clock running */
  bool last_measured;
  int64_t last_wait_ns;       /* its wait, for the whole step's time */
  uint64_t last_number;       /* its number, for the compute span */
  /* A step a timed next() gave up on (0: none). */
  int64_t pending_enter_ns;
  bool pending_measured;
  size_t pending_depth;
  /* The epoch in progress. */
  bool epoch_warmup;           /* still warming up in it */
  bool epoch_warmup_ended;     /* the warm-up ended early in it */
  int64_t epoch_start_ns, epoch_wait_ns, epoch_compute_ns;
  uint64_t epoch_batches, epoch_samples;
  /* The machine's other load (outside.h): started at the first measured
  ** step. */
  bool outside_started;
  stoke__outside outside;
} stoke__cclock;

/* Zeroed statistics; measuring from the start when there is no warm-up at
** all.  0 or STOKE_ENOMEM. */
int stoke__cclock_init(stoke__cclock *c, const stoke_allocator *a,
                       uint64_t warmup_epochs, uint64_t warmup_steps);
void stoke__cclock_free(stoke__cclock *c, const stoke_allocator *a);
/* Keep a histogram of whole steps (wait + compute) too, for the metrics'
** step quantiles (stoke_stats.step).  0 or STOKE_ENOMEM. */
int stoke__cclock_track_steps(stoke__cclock *c, const stoke_allocator *a);
/* The warm-up epochs end early at the first step after `steps` steps once
** `ns` have passed since the first step (both 0: never). */
void stoke__cclock_warmup_end(stoke__cclock *c, uint64_t steps, int64_t ns);

/* An epoch starts at `now`; `warmup`: it is one of the warm-up epochs. */
void stoke__cclock_epoch_start(stoke__cclock *c, int64_t now, bool warmup);
/* The record of the epoch in progress, ending at `now`. */
stoke_epoch_stats stoke__cclock_epoch_record(const stoke__cclock *c,
                                             int64_t now, uint64_t number);

/* The step in progress stops computing at `now`: returns its compute time,
** or -1 when no compute clock runs. */
int64_t stoke__cclock_compute_end(stoke__cclock *c, int64_t now);
/* Is the step being handed out measured?  It counts the warm-up steps;
** *warmup_ended is set true on the step that ends the warm-up.  Only
** while warming up with an early end does it read the clock. */
bool stoke__cclock_measure(stoke__cclock *c, bool *warmup_ended);
/* A step asked for at `enter` is handed out at `leave` with n_samples:
** its wait is accounted and its compute clock starts. */
void stoke__cclock_step(stoke__cclock *c, int64_t enter, int64_t leave,
                        uint64_t number, size_t n_samples, bool measured);
/* A step timed by somebody else (wait_ns, compute_ns): accounted as
** step() and compute_end() would, without a trace span or a clock. */
void stoke__cclock_record(stoke__cclock *c, int64_t wait_ns,
                          int64_t compute_ns, size_t n_samples,
                          bool measured);
/* A measured step found `depth` batches ready. */
static inline void stoke__cclock_depth(stoke__cclock *c, size_t depth) {
  stoke__counter_add(
      &c->cs->depth[STOKE__MIN(depth, (size_t)STOKE__DEPTH_BINS - 1)], 1);
}

/* A step given up on at a deadline; the retry takes it back. */
void stoke__cclock_pend(stoke__cclock *c, int64_t enter, bool measured,
                        size_t depth);
/* True (and the step's enter, warm-up decision and depth) when a step is
** pending; it is then no longer pending. */
bool stoke__cclock_resume(stoke__cclock *c, int64_t *enter, bool *measured,
                          size_t *depth);

/* A growing list of epoch records; the caller holds the lock that guards
** it.  Out of memory loses the record (STOKE_ENOMEM), not the clocks. */
typedef struct stoke__epoch_log {
  stoke_epoch_stats *v;
  size_t n, cap;
} stoke__epoch_log;

int stoke__epoch_log_add(stoke__epoch_log *g, const stoke_allocator *a,
                         const stoke_epoch_stats *e);

#endif /* STOKE_STATS_CCLOCK_H */
