/* autotune_controller.h — the online autotuner's controller: a pure
** function from a window of measurements to a decision
** (autotune_controller.c).  The loader's glue (src/pipeline/autotuner.c)
** measures the windows and applies the decisions; the unit tests drive the
** controller with synthetic clocks. */
#ifndef STOKE_MODEL_AUTOTUNE_CONTROLLER_H
#define STOKE_MODEL_AUTOTUNE_CONTROLLER_H

#include "stoke.h"

#include <stdbool.h>
#include <stdint.h>

/* The waiting share of the step above which the consumer is stalled, and
** below which a smaller configuration may be tried. */
#define STOKE__ATC_STALL 0.05
#define STOKE__ATC_QUIET 0.02
/* Headroom of the model's worker count: growing aims at a producer this
** much faster than the step, shrinking needs this much to spare.  Two
** values, so that a grow is never followed by a shrink on the same
** numbers (no oscillation). */
#define STOKE__ATC_GROW_HEADROOM 0.05
#define STOKE__ATC_SHRINK_HEADROOM 0.20
/* A shrink or shallower prefetch that waits more than this share of the
** step, or adds waiting of this share of it, is rolled back: less must
** cost almost nothing. */
#define STOKE__ATC_SHRINK_WAIT 0.02
#define STOKE__ATC_SHRINK_SLOWER 0.02
/* The per-sample costs the model is given are averaged over about this
** many windows (weighted by samples, the oldest fading): one window of a
** heavy-tailed cost read 1.4x the mean and grew the workers past the knee
** (bench/autotune.sh, lognormal costs). */
#define STOKE__ATC_COST_WINDOWS 4
/* The consumer's compute per step moved this much: search again. */
#define STOKE__ATC_STEP_CHANGE 0.25
/* The model is asked about worker counts up to this. */
#define STOKE__ATC_MODEL_MAX_WORKERS 4096
/* The most one grow multiplies the workers by (the model's error). */
#define STOKE__ATC_MAX_GROW_FACTOR 8
/* The machine's other load that moved away from the level the decisions
** were measured at (by STOKE__ATC_OUTSIDE_CORES) holds them; once it stayed at
** its new level this long, that level is the machine's and the search
** starts again.  Longer than a passing job (a hog that comes and goes),
** short against a training run. */
#define STOKE__ATC_OUTSIDE_SETTLE_NS 3000000000LL
/* The move that holds: a quarter of a core and a tenth of the cores, half
** the reports' (stats/outside.h), so that a window the load moved only in
** part of (its other cores the fraction) cannot stall the consumer by the
** 5% that grows; and the whole machine busier or idler by half that, the
** same way, so that cores this loader took from (or gave back to) other
** jobs on a full machine are not taken for them moving. */
#define STOKE__ATC_OUTSIDE_CORES 0.25
#define STOKE__ATC_OUTSIDE_SHARE 0.10

/* What the glue measured over one window of steps. */
typedef struct stoke__atc_window {
  uint64_t steps;          /* consumer steps in the window */
  int64_t wait_ns;         /* their time inside next() */
  int64_t compute_ns;      /* their time between next() calls */
  uint64_t empty_steps;    /* next() found no ready batch */
  uint64_t produced;       /* samples the workers finished */
  int64_t busy_ns, cpu_ns; /* the workers' wall and CPU time on them */
  int64_t wall_ns;         /* the window's wall time */
  /* The workers' time on a core and runnable but waiting for one (Linux
  ** schedstat of the threads named stoke-w*) in the window; run 0:
  ** unknown.  It tells a worker queueing for a core (CPU-bound on a busy
  ** machine) from one waiting on I/O, which its CPU clock cannot. */
  int64_t sched_run_ns, sched_delay_ns;
  /* The cores the rest of the machine kept busy over the window
  ** (os/outside.c); outside_on false: unknown (the rule is off). */
  bool outside_on;
  double outside_cores;
  double machine_cores;    /* the whole machine's busy cores, this
                              process included */
} stoke__atc_window;

/* What the controller may choose from (frozen at create). */
typedef struct stoke__atc_limits {
  size_t batch_size;
  unsigned max_workers;    /* threads started (the budget already applied) */
  unsigned max_prefetch;   /* slots allocated, less the consumer's */
  double cpu_budget;       /* cores the workers may keep busy */
  double cores;            /* online CPUs, for the queue model */
  const char *mem_note;    /* why max_prefetch / max_workers are lower
                              than asked (the memory budget), or NULL */
} stoke__atc_limits;

/* The controller's memory between windows. */
typedef struct stoke__atc_state {
  unsigned workers, prefetch;        /* in force */
  unsigned good_workers, good_prefetch; /* the last known-good */
  int64_t good_step_ns;
  bool have_good;
  int pending;                       /* the kind of the change on trial
                                        (evaluated on the next window), 0 */
  unsigned before_workers, before_prefetch;
  int64_t before_step_ns;
  double before_wait;
  /* The machine's other load on the window the change was decided on
  ** (before_outside_on false: unknown), and the trial last discarded
  ** because it moved (kind 0: none): a trial is discarded once, then
  ** judged, so that a change that itself moves others' use (its workers
  ** thrash, others take the cores it frees) cannot be retried forever. */
  bool before_outside_on;
  double before_outside, before_machine;
  int discarded_kind;
  unsigned discarded_workers, discarded_prefetch;
  bool settle;                       /* the next window follows a change:
                                        it is discarded (the queue refills) */
  unsigned floor_workers;            /* no shrink below (a stall was seen
                                        there), until the step changes */
  unsigned ceil_workers;             /* no grow above (rolled back), 0 none */
  unsigned floor_prefetch;           /* no shallower than this */
  unsigned ceil_prefetch;            /* no deeper (it did not help), 0 */
  bool limited;                      /* a LIMIT was recorded for this state */
  int64_t ref_compute_ns;            /* the step the floors belong to */
  int step_suspect;                  /* the last window's compute moved
                                        past STOKE__ATC_STEP_CHANGE up (1)
                                        or down (-1): a second one in a row
                                        is a changed step */
  uint64_t changes, rollbacks;
  /* The per-sample costs (CPU, off a core, ns) summed over the recent
  ** windows, and the samples they sum: see STOKE__ATC_COST_WINDOWS. */
  double cost_cpu_ns, cost_io_ns, cost_n;
  /* The machine's other load: the level the decisions are measured at
  ** (have_outside false: none yet), and, while a window's load is away
  ** from it, the level it moved to and for how long it stayed there. */
  bool have_outside;
  double outside_ref, machine_ref;
  bool outside_away;                 /* held: the load is not at ref */
  double outside_new, machine_new;
  int64_t outside_new_ns;
} stoke__atc_state;

typedef struct stoke__atc_decision {
  int kind;                          /* stoke_autotune_kind, 0: nothing */
  bool evaluated;                    /* the window judged the last change
                                        (kept): its "after" numbers are
                                        this window's */
  unsigned from_workers, to_workers, from_prefetch, to_prefetch;
  double wait_now;                   /* this window's */
  int64_t step_now_ns, compute_ns;
  double wait_predicted;             /* -1: none */
  char reason[160];                  /* why, with the numbers */
} stoke__atc_decision;

/* Start: 1 worker (or the most allowed if less), prefetch 2 (or less). */
void stoke__atc_init(stoke__atc_state *st, const stoke__atc_limits *lim);

/* Judge one window and decide.  Pure: no clock, no loader, no allocation;
** the same state and window give the same decision.  Updates st (the
** configuration in force becomes the decision's). */
void stoke__atc_decide(stoke__atc_state *st, const stoke__atc_limits *lim,
                      const stoke__atc_window *win, stoke__atc_decision *out);

/* The smallest worker count whose producer, by the queue model of
** model.c (its closed form), makes a batch in at most (1 - headroom)
** x compute_ns (not capped: the caller caps); *cpu_cap gets the most
** workers the
** CPU budget allows.  From a window's per-sample clocks.
** *enough (may be NULL) tells whether that count keeps up with the step;
** when no count does (the cores are the bound), it is the fewest past which
** more gain nothing. */
unsigned stoke__atc_workers_needed(const stoke__atc_limits *lim,
                                  const stoke__atc_window *win,
                                  double headroom, unsigned *cpu_cap,
                                  double *pred_wait, bool *enough);
/* The same from a model of the per-sample costs (t_cpu, t_io) and the
** step's compute tc_ns; m NULL (no costs yet): 0. */
unsigned stoke__atc_workers_needed_model(const stoke__atc_limits *lim,
                                        const stoke_model *m, int64_t tc_ns,
                                        double headroom, unsigned *cpu_cap,
                                        double *pred_wait, bool *enough);

/* The bytes a configuration of w workers and k slots holds (the host
** ledger's total). */
typedef uint64_t (*stoke__atc_bytes_fn)(void *ctx, unsigned w, unsigned k);

/* Lower *w and *k until bytes(w, k) fits in budget: fewer slots first
** (down to 2), then fewer threads (by 4 above 8), then one slot.  True
** when either changed.  Pure but for the callback. */
bool stoke__atc_fit_memory(stoke__atc_bytes_fn bytes, void *ctx,
                           uint64_t budget, unsigned *w, unsigned *k);

#endif
