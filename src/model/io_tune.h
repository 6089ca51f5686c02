/* io_tune.h — the live autotuner's io_concurrency rule (docs/autotune.md,
** "io_concurrency"): a pure function from a window of the consumer's
** steps and the HTTP client's counts to a decision, as the workers'
** controller is (autotune_controller.h), so that every case is tested on
** given numbers (tests/unit/test_io_tune.c).  The glue is
** src/pipeline/io_autotuner.c. */
#ifndef STOKE_MODEL_IO_TUNE_H
#define STOKE_MODEL_IO_TUNE_H

#include "core/core.h"

/* One window: the consumer's steps and the client's counts' deltas. */
typedef struct stoke__iot_window {
  uint64_t steps;
  int64_t wall_ns;       /* the window's wall time */
  int64_t wait_ns;       /* of it, the consumer waiting for batches */
  uint64_t requests;     /* attempts started (retries included) */
  uint64_t throttled;    /* 429 and 503 answers */
  int64_t busy_ns;       /* the attempts' wall times summed: / wall_ns is
                            the mean number in flight */
  unsigned workers;      /* the decode workers in use over it */
} stoke__iot_window;

typedef struct stoke__iot_state {
  unsigned limit;        /* io_concurrency in force */
  unsigned ceiling;      /* the most worth trying (closed by a rollback or
                            throttling); STOKE_IO_CONCURRENCY_MAX at start */
  bool settle;           /* the window after a change is not judged */
  unsigned trial_from;   /* a grow on trial: the limit it replaced; 0 none */
  double trial_rate;     /* steps/s before it */
  unsigned trial_workers;/* the workers then (a change of theirs voids it) */
} stoke__iot_state;

enum { STOKE__IOT_NONE = 0, STOKE__IOT_MORE, STOKE__IOT_FEWER,
       STOKE__IOT_ROLLBACK };

typedef struct stoke__iot_decision {
  int kind;              /* STOKE__IOT_* */
  unsigned from, to;
  double wait;           /* the window's waiting share */
  double in_flight;      /* its mean requests in flight */
  double throttled_frac; /* its throttled share of the requests */
  char reason[192];
} stoke__iot_decision;

/* The rule's constants (docs/autotune.md says why each). */
#define STOKE__IOT_STARVING 0.05   /* waiting share that asks for more */
#define STOKE__IOT_BOUND 0.75      /* in flight / limit: the limit binds */
#define STOKE__IOT_GAIN 1.03       /* a grow must raise steps/s this much */
#define STOKE__IOT_THROTTLED 0.02  /* share of throttled answers: fewer */
#define STOKE__IOT_MIN_REQUESTS 10 /* a window's requests to judge them */

void stoke__iot_init(stoke__iot_state *st, unsigned limit);
void stoke__iot_decide(stoke__iot_state *st, const stoke__iot_window *w,
                       stoke__iot_decision *d);

#endif /* STOKE_MODEL_IO_TUNE_H */
