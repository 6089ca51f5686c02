/* autotune_controller.c — the online autotuner's controller (docs/autotune.md).
**
** DESIGN
** A pure function from a window of the loader's own clocks to a decision,
** so that every rule is tested on synthetic numbers (test_autotune.c).
** The glue (src/pipeline/autotuner.c) measures windows of consumer steps on
** the consumer's thread and applies what is decided by gating how many of
** the started workers claim work and how many slots batches may occupy.
**
** One window, one decision, in this order:
**   1. a window right after a change is discarded (the queue refills);
**      1b. so is one whose machine's other load (os/outside.c) moved
**      away from the level the decisions were measured at (a quarter
**      of a core, the whole machine busier or idler with it), and the
**      one on which it came back (recorded once per move, OUTSIDE): a
**      hog that comes and goes is not chased, and a trial is judged only
**      on a window at the load its "before" had; a load that stays 3 s
**      at its new level is the machine's now: search again.  The job's
**      own step change (3) lifts the hold: one that the other load cannot
**      explain (the other way, or by more than twice a fair share of the
**      cores it took or gave back);
**   2a. a trial whose window saw the other load move against the window
**      it was decided on (as in 1b, or, on a full machine, the way the
**      change itself cannot move it: others' use up while this loader
**      took more) is discarded, once: back to what it replaced, no
**      direction closed, tried again later (OUTSIDE);
**   2. the change on trial is judged on the next one: a grow that did not
**      make the step at least 3% faster, a shrink or a shallower prefetch
**      that waits over 3% or adds waiting of 3% of the step, a deeper
**      prefetch that did not cut the waiting by a fifth: rolled back to the
**      last known-good configuration, and the direction is closed (floor
**      or ceiling) until the step changes;
**   3. the consumer's compute per step moved by 25%: the floors and
**      ceilings are forgotten and the search starts again, both ways;
**   4. stalled (waiting > 5% of the step): the queue model of
**      model.c (its closed form, from this window's per-sample wall
**      and CPU time) names the fewest workers whose batch takes at most
**      95% of the step; capped by the CPU budget (a worker counts for the
**      share of its time it is on a core, so waiting workers barely
**      count), the threads and 8x the current count.  When the model says
**      the workers already suffice, the wait is the spread's: one more
**      batch of prefetch (or, when the queue is mostly empty, one more
**      worker).  Nothing left to try: LIMIT, recorded once;
**   5. quiet (waiting < 2%): the model's count with 20% to spare, if
**      fewer, and not below a floor; else one batch of prefetch less.
** The two headrooms (5% to grow, 20% to shrink) keep a grow from being
** followed by a shrink on the same numbers; with the floors and ceilings
** that leaves at most one trial per direction in a steady state. */
#include "model/autotune_controller.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void stoke__atc_init(stoke__atc_state *st, const stoke__atc_limits *lim) {
  memset(st, 0, sizeof *st);
  st->workers = lim->max_workers ? 1 : 0;
  st->prefetch = STOKE__MIN(2u, lim->max_prefetch ? lim->max_prefetch : 1u);
  st->good_workers = st->workers;
  st->good_prefetch = st->prefetch;
  st->have_good = true;
  st->floor_workers = 1;
  st->floor_prefetch = 1;
}

/* A model of the limits' batch and cores, no costs yet. */
static void limits_model(const stoke__atc_limits *lim, stoke_model *m) {
  memset(m, 0, sizeof *m);
  m->struct_size = sizeof *m;
  m->batch_size = lim->batch_size;
  m->cores = lim->cores >= 1 ? lim->cores : 1;
  m->chunk = 1; /* the slots' cap is the glue's: it gates them itself */
}

/* The window's per-sample clocks as the queue model's inputs: t_io is the
** wall time off a core, less the queueing for one: as model.c, measured
** where the scheduler says (t_cpu x (1 + run delay / run)), else the
** max(1, A / P) that A workers producing at once on P cores meet. */
static bool window_model(const stoke__atc_limits *lim,
                         const stoke__atc_window *win, stoke_model *m) {
  if (win->produced == 0 || win->busy_ns <= 0) return false;
  limits_model(lim, m);
  double td = (double)win->busy_ns / (double)win->produced;
  double tcpu = (double)win->cpu_ns / (double)win->produced;
  if (tcpu > td) tcpu = td;
  double a = win->wall_ns > 0 ? (double)win->busy_ns / (double)win->wall_ns
                              : 1.0;
  double stretch = a / stoke__model_cores_avail(m);
  if (stretch < 1) stretch = 1;
  if (win->sched_run_ns > 0)
    stretch = 1.0 + (double)win->sched_delay_ns / (double)win->sched_run_ns;
  double tio = td - tcpu * stretch;
  m->t_d_ns = (int64_t)td;
  m->t_cpu_ns = (int64_t)tcpu;
  m->t_io_ns = tio > 0 ? (int64_t)tio : 0;
  return m->t_cpu_ns + m->t_io_ns > 0;
}

unsigned stoke__atc_workers_needed(const stoke__atc_limits *lim,
                                  const stoke__atc_window *win,
                                  double headroom, unsigned *cpu_cap,
                                  double *pred_wait, bool *enough) {
  stoke_model m;
  bool have = win->steps && window_model(lim, win, &m);
  return stoke__atc_workers_needed_model(
      lim, have ? &m : NULL, have ? win->compute_ns / (int64_t)win->steps : 0,
      headroom, cpu_cap, pred_wait, enough);
}

unsigned stoke__atc_workers_needed_model(const stoke__atc_limits *lim,
                                        const stoke_model *mp, int64_t tc_ns,
                                        double headroom, unsigned *cpu_cap,
                                        double *pred_wait, bool *enough) {
  *cpu_cap = lim->max_workers;
  if (pred_wait) *pred_wait = -1;
  if (enough) *enough = false;
  if (!mp || mp->t_cpu_ns + mp->t_io_ns <= 0) return 0; /* no costs yet */
  const stoke_model m = *mp;
  double tc = (double)tc_ns;
  /* A working worker keeps f of a core busy. */
  double f = (double)m.t_cpu_ns / (double)(m.t_cpu_ns + m.t_io_ns);
  if (f > 0) {
    double cap = floor(lim->cpu_budget / f + 1e-9);
    if (cap < 1) cap = 1;
    if (cap < (double)*cpu_cap) *cpu_cap = (unsigned)cap;
  }
  unsigned k = lim->max_prefetch ? lim->max_prefetch : 1;
  unsigned need = 0;
  int64_t best = INT64_MAX;
  unsigned best_w = 1;
  /* Past the threads started too, so that "enough" is the model's, not
  ** the thread cap's (the caller caps). */
  for (unsigned w = 1; w <= STOKE__ATC_MODEL_MAX_WORKERS; w++) {
    int64_t tp = stoke__model_producer_batch(&m, w, k, NULL);
    if ((double)tp <= (1.0 - headroom) * tc) {
      need = w;
      best = tp;
      break;
    }
    /* More workers past the CPU bound gain nothing: the first W within
    ** 1% of the best is where the curve is flat. */
    if ((double)tp < 0.99 * (double)best) {
      best = tp;
      best_w = w;
    }
  }
  if (enough) *enough = need != 0;
  if (!need) {
    need = best_w;
    best = stoke__model_producer_batch(&m, need, k, NULL);
  }
  if (pred_wait) {
    double step = (double)best > tc ? (double)best : tc;
    *pred_wait = step > 0 ? ((double)best > tc ? ((double)best - tc) / step
                                               : 0.0)
                          : 0.0;
  }
  return need;
}

/* The window's per-sample costs into the recent average (the oldest
** fading so that the newest window weighs about 1 / STOKE__ATC_COST_WINDOWS),
** and the model of that average: what the decisions use.  false without a
** producer clock yet. */
static bool smoothed_model(stoke__atc_state *st, const stoke__atc_limits *lim,
                           const stoke__atc_window *win, stoke_model *m) {
  stoke_model w;
  if (window_model(lim, win, &w)) {
    double n = (double)win->produced;
    double cap = STOKE__ATC_COST_WINDOWS * n;
    if (st->cost_n + n > cap) {
      double keep = st->cost_n > 0 ? (cap - n) / st->cost_n : 0;
      if (keep < 0) keep = 0;
      st->cost_cpu_ns *= keep;
      st->cost_io_ns *= keep;
      st->cost_n *= keep;
    }
    st->cost_cpu_ns += (double)w.t_cpu_ns * n;
    st->cost_io_ns += (double)w.t_io_ns * n;
    st->cost_n += n;
  }
  limits_model(lim, m);
  if (!(st->cost_n > 0)) return false;
  m->t_cpu_ns = (int64_t)(st->cost_cpu_ns / st->cost_n);
  m->t_io_ns = (int64_t)(st->cost_io_ns / st->cost_n);
  m->t_d_ns = m->t_cpu_ns + m->t_io_ns;
  return m->t_d_ns > 0;
}

static void set_change(stoke__atc_state *st, stoke__atc_decision *out, int kind,
                       unsigned w, unsigned k, int64_t step, double wait,
                       const stoke__atc_window *win) {
  out->kind = kind;
  st->before_outside_on = win->outside_on;
  st->before_outside = win->outside_cores;
  st->before_machine = win->machine_cores;
  out->to_workers = w;
  out->to_prefetch = k;
  st->pending = kind;
  st->before_workers = st->workers;
  st->before_prefetch = st->prefetch;
  st->before_step_ns = step;
  st->before_wait = wait;
  st->workers = w;
  st->prefetch = k;
  st->settle = true;
  st->limited = false;
  st->changes++;
}

static double ms(int64_t ns) { return (double)ns / 1e6; }

/* Step 2: is the change on trial worse than what it replaced? */
static bool trial_failed(const stoke__atc_state *st, int64_t step,
                         double wait) {
  double before = (double)st->before_step_ns;
  switch (st->pending) {
  case STOKE_AUTOTUNE_GROW:
    return (double)step > 0.97 * before;
  case STOKE_AUTOTUNE_DEEPER:
    return wait > 0.8 * st->before_wait &&
           (double)step > 0.97 * before;
  default:
    /* SHRINK, SHALLOWER: less must cost (almost) nothing.  Fewer workers
    ** or slots cannot slow the consumer's own compute (they free cores),
    ** so only the waiting they add counts: a step that changed meanwhile
    ** is not mistaken for their cost. */
    return wait > STOKE__ATC_SHRINK_WAIT ||
           (double)step * wait >
               before * st->before_wait + STOKE__ATC_SHRINK_SLOWER * before;
  }
}

static void rollback(stoke__atc_state *st, stoke__atc_decision *out,
                     int64_t step, double wait) {
  int was = st->pending;
  unsigned tried_w = st->workers, tried_k = st->prefetch;
  /* The direction tried is closed until the step changes. */
  if (was == STOKE_AUTOTUNE_GROW) st->ceil_workers = st->before_workers;
  if (was == STOKE_AUTOTUNE_SHRINK) st->floor_workers = st->before_workers;
  if (was == STOKE_AUTOTUNE_SHALLOWER) st->floor_prefetch = st->before_prefetch;
  if (was == STOKE_AUTOTUNE_DEEPER) st->ceil_prefetch = st->before_prefetch;
  int64_t before_step = st->before_step_ns;
  double before_wait = st->before_wait;
  st->pending = 0;
  out->kind = STOKE_AUTOTUNE_ROLLBACK;
  out->to_workers = st->good_workers;
  out->to_prefetch = st->good_prefetch;
  st->workers = st->good_workers;
  st->prefetch = st->good_prefetch;
  st->settle = true;
  st->changes++;
  st->rollbacks++;
  snprintf(out->reason, sizeof out->reason,
           "%s to %u workers, prefetch %u made the step %.1f -> %.1f ms "
           "(waiting %.0f%% -> %.0f%%): back to the last known-good",
           stoke_autotune_kind_name(was), tried_w, tried_k, ms(before_step),
           ms(step), 100 * before_wait, 100 * wait);
}

/* Did the other load move from (o0, m0) to (o1, m1), each (its cores,
** the whole machine's busy cores)?  By STOKE__ATC_OUTSIDE_CORES (and
** _SHARE of the cores), and the whole machine by half that the same way:
** on a full machine, cores this loader takes are cores other jobs lose,
** which is no move of theirs. */
static bool outside_moved(double o0, double m0, double o1, double m1,
                          double cores) {
  double d = o1 - o0, dm = m1 - m0;
  double thr = STOKE__ATC_OUTSIDE_CORES;
  if (STOKE__ATC_OUTSIDE_SHARE * cores > thr)
    thr = STOKE__ATC_OUTSIDE_SHARE * cores;
  return fabs(d) >= thr && d * dm > 0 && fabs(dm) >= thr / 2;
}

static double lim_cores(const stoke__atc_limits *lim) {
  return lim->cores >= 1 ? lim->cores : 1;
}

/* Is the window's other load away from the decisions' level? */
static bool outside_is_away(const stoke__atc_state *st,
                            const stoke__atc_limits *lim,
                            const stoke__atc_window *win) {
  return win->outside_on && st->have_outside &&
         outside_moved(st->outside_ref, st->machine_ref, win->outside_cores,
                       win->machine_cores, lim_cores(lim));
}

/* Step 1b: true when the window is held (out may carry an OUTSIDE record:
** the first window away, or the new level kept).  A window away from the
** level decides nothing, a pending trial included: its "before" was
** measured at the level, and so must its "after" be.  The window on
** which the load is back is held too (it may hold part of the move).
** Once the load stayed at a new level for STOKE__ATC_OUTSIDE_SETTLE_NS,
** that is the machine now: the trial is kept unjudged and the search
** starts again, as when the step changes. */
static bool outside_held(stoke__atc_state *st, const stoke__atc_limits *lim,
                         const stoke__atc_window *win,
                         stoke__atc_decision *out) {
  if (!win->outside_on) return false;
  double now = win->outside_cores, mnow = win->machine_cores;
  double cores = lim_cores(lim);
  if (!st->have_outside) {
    st->have_outside = true;
    st->outside_ref = now;
    st->machine_ref = mnow;
    return false;
  }
  if (!outside_is_away(st, lim, win)) {
    bool was = st->outside_away;
    st->outside_away = false;
    return was;
  }
  char trial[96] = "";
  if (st->pending)
    snprintf(trial, sizeof trial, "; the %s to %u workers, prefetch %u %s",
             stoke_autotune_kind_name(st->pending), st->workers,
             st->prefetch,
             st->outside_away ? "is kept unjudged" : "waits for it");
  if (!st->outside_away ||
      outside_moved(st->outside_new, st->machine_new, now, mnow, cores)) {
    bool first = !st->outside_away;
    st->outside_away = true;
    st->outside_new = now;
    st->machine_new = mnow;
    st->outside_new_ns = 0;
    if (first) {
      out->kind = STOKE_AUTOTUNE_OUTSIDE;
      /* A long trial is cut off: the reason is a note, whole or not. */
      if (snprintf(out->reason, sizeof out->reason,
                   "the machine's other load moved %.1f -> %.1f cores (of "
                   "%.0f): nothing decided on it%s",
                   st->outside_ref, now, cores,
                   trial) >= (int)sizeof out->reason) {
      }
    }
    return true;
  }
  st->outside_new_ns += win->wall_ns;
  if (st->outside_new_ns < STOKE__ATC_OUTSIDE_SETTLE_NS) return true;
  out->kind = STOKE_AUTOTUNE_OUTSIDE;
  if (snprintf(out->reason, sizeof out->reason,
               "the machine's other load went %.1f -> %.1f cores (of %.0f) "
               "and stayed %.1f s: searching again%s",
               st->outside_ref, st->outside_new, cores,
               (double)st->outside_new_ns / 1e9,
               trial) >= (int)sizeof out->reason) {
    /* cut off, as above */
  }
  st->outside_ref = st->outside_new;
  st->machine_ref = st->machine_new;
  st->outside_away = false;
  st->pending = 0;
  st->good_workers = st->workers;
  st->good_prefetch = st->prefetch;
  st->floor_workers = 1;
  st->ceil_workers = 0;
  st->floor_prefetch = 1;
  st->ceil_prefetch = 0;
  st->limited = false;
  /* Costs measured at the old load are not this machine's. */
  st->cost_cpu_ns = st->cost_io_ns = st->cost_n = 0;
  return true;
}

/* Step 2a: did the machine's other load move between the window the
** change on trial was decided on and the one that would judge it?  By
** the rule above (the whole machine with it), or, on a full machine
** where the whole cannot move, the way the change itself cannot have
** moved it: others' use rising while this loader took more (a grow, a
** deeper prefetch) or falling while it gave some back (a shrink, a
** shallower prefetch).  A hog that starts beside CPU-bound workers on
** full cores shows so: others' use up, the machine as busy. */
static bool trial_disturbed(const stoke__atc_state *st,
                            const stoke__atc_limits *lim,
                            const stoke__atc_window *win) {
  if (!win->outside_on || !st->before_outside_on) return false;
  if (st->discarded_kind == st->pending &&
      st->discarded_workers == st->workers &&
      st->discarded_prefetch == st->prefetch)
    return false; /* discarded once: judged now */
  double cores = lim_cores(lim);
  if (outside_moved(st->before_outside, st->before_machine,
                    win->outside_cores, win->machine_cores, cores))
    return true;
  double d = win->outside_cores - st->before_outside;
  double thr = STOKE__ATC_OUTSIDE_CORES;
  if (STOKE__ATC_OUTSIDE_SHARE * cores > thr)
    thr = STOKE__ATC_OUTSIDE_SHARE * cores;
  bool more = st->pending == STOKE_AUTOTUNE_GROW ||
              st->pending == STOKE_AUTOTUNE_DEEPER;
  return more ? d >= thr : d <= -thr;
}

/* The trial is discarded: back to what it replaced, no direction closed,
** nothing counted against it; it is decided again on later windows. */
static void discard_trial(stoke__atc_state *st, const stoke__atc_limits *lim,
                          const stoke__atc_window *win,
                          stoke__atc_decision *out) {
  int was = st->pending;
  unsigned tried_w = st->workers, tried_k = st->prefetch;
  st->discarded_kind = was;
  st->discarded_workers = tried_w;
  st->discarded_prefetch = tried_k;
  st->pending = 0;
  st->workers = st->before_workers;
  st->prefetch = st->before_prefetch;
  st->good_workers = st->workers;
  st->good_prefetch = st->prefetch;
  st->settle = true;
  st->changes++;
  out->kind = STOKE_AUTOTUNE_OUTSIDE;
  out->to_workers = st->workers;
  out->to_prefetch = st->prefetch;
  if (snprintf(out->reason, sizeof out->reason,
               "the %s to %u workers, prefetch %u was measured while the "
               "machine's other load moved %.1f -> %.1f cores (of %.0f): "
               "discarded, to be tried again",
               stoke_autotune_kind_name(was), tried_w, tried_k,
               st->before_outside, win->outside_cores,
               lim_cores(lim)) >= (int)sizeof out->reason) {
    /* cut off: a note */
  }
}

/* While the other load holds the decisions, is a changed step (two
** windows past STOKE__ATC_STEP_CHANGE, ratio r of the step it replaced)
** the job's own?  Other load that came can slow a CPU-bound step, at a
** fair share of the cores by 1 + its cores / the cores, and one that went
** can speed it up as much; twice that leaves room for a sleeping step
** woken late (its wake-up waits for a core too).  A step that moved the
** other way, or further, is not the other load's doing. */
static bool own_step(const stoke__atc_state *st, const stoke__atc_limits *lim,
                     const stoke__atc_window *win, double r) {
  double d = win->outside_cores - st->outside_ref;
  double bound = 1 + 2 * fabs(d) / lim_cores(lim);
  if ((d > 0 && r < 1) || (d < 0 && r > 1)) return true;
  return r > bound || r < 1 / bound;
}

void stoke__atc_decide(stoke__atc_state *st, const stoke__atc_limits *lim,
                      const stoke__atc_window *win, stoke__atc_decision *out) {
  memset(out, 0, sizeof *out);
  out->wait_predicted = -1;
  out->from_workers = out->to_workers = st->workers;
  out->from_prefetch = out->to_prefetch = st->prefetch;
  if (!win->steps) return;
  int64_t tot = win->wait_ns + win->compute_ns;
  double wait = tot > 0 ? (double)win->wait_ns / (double)tot : 0.0;
  int64_t step = tot / (int64_t)win->steps;
  int64_t tc = win->compute_ns / (int64_t)win->steps;
  double empty = (double)win->empty_steps / (double)win->steps;
  out->wait_now = wait;
  out->step_now_ns = step;
  out->compute_ns = tc;
  /* 1. Right after a change: the queue is still refilling.  Its producer
  ** clocks count (every window's do), unless the machine's other load
  ** had moved: those are another machine's costs. */
  if (st->settle) {
    st->settle = false;
    stoke_model unused;
    if (!outside_is_away(st, lim, win)) smoothed_model(st, lim, win, &unused);
    return;
  }
  /* The compute moved past the threshold in this window and, the same
  ** way, in the one before: the step changed (one window alone is often a
  ** loaded machine's noise: a sleeping step woken late).  Judged on the
  ** held windows too (1b), so that the job's own change is seen there. */
  int moved = 0;
  double r = 1;
  if (st->ref_compute_ns > 0) {
    r = (double)tc / (double)st->ref_compute_ns;
    moved = r > 1 + STOKE__ATC_STEP_CHANGE ? 1
            : r < 1 - STOKE__ATC_STEP_CHANGE ? -1
                                            : 0;
  } else {
    st->ref_compute_ns = tc;
  }
  bool step_moved = moved != 0 && moved == st->step_suspect;
  st->step_suspect = step_moved ? 0 : moved;
  /* 1b. The machine's other load moved away from the level the decisions
  ** are measured at: nothing is decided on this window (nor are its costs
  ** kept), until it comes back or stays, or the job's own step changed:
  ** the hold only keeps the tuner from chasing what came from outside.
  ** Then the load now is the level, the trial is kept unjudged, and the
  ** search starts again (3). */
  char lifted[96] = "";
  if (outside_held(st, lim, win, out)) {
    if (!step_moved || !own_step(st, lim, win, r)) return;
    snprintf(lifted, sizeof lifted,
             " (the machine's other load moved too, %.1f -> %.1f cores: "
             "the hold is lifted)",
             st->outside_ref, win->outside_cores);
    st->outside_ref = win->outside_cores;
    st->machine_ref = win->machine_cores;
    st->outside_away = false;
    st->pending = 0;
    st->cost_cpu_ns = st->cost_io_ns = st->cost_n = 0;
  }
  stoke_model m;
  bool have_model = smoothed_model(st, lim, win, &m);

  /* 2. The change on trial: judged by the whole step, so that a change
  ** that slows the consumer itself (workers taking its cores) is undone
  ** too. */
  if (st->pending) {
    /* 2a. Its window saw the other load move: no verdict on it. */
    if (!step_moved && trial_disturbed(st, lim, win)) {
      discard_trial(st, lim, win, out);
      return;
    }
    st->discarded_kind = 0;
    if (trial_failed(st, step, wait)) {
      rollback(st, out, step, wait);
      return;
    }
    out->evaluated = true;
    /* What it showed stays true until the step changes. */
    if (st->pending == STOKE_AUTOTUNE_GROW)
      st->floor_workers = STOKE__MAX(st->floor_workers,
                                     st->before_workers + 1);
    if (st->pending == STOKE_AUTOTUNE_DEEPER)
      st->floor_prefetch = STOKE__MAX(st->floor_prefetch, st->prefetch);
    st->pending = 0;
  }
  st->good_workers = st->workers;
  st->good_prefetch = st->prefetch;
  st->good_step_ns = step;

  /* 3. The consumer's step changed: search again, both ways. */
  if (step_moved) {
    out->kind = STOKE_AUTOTUNE_STEP;
    if (snprintf(out->reason, sizeof out->reason,
                 "the step's compute went %.1f -> %.1f ms: searching "
                 "again%s",
                 ms(st->ref_compute_ns), ms(tc),
                 lifted) >= (int)sizeof out->reason) {
      /* cut off: a note */
    }
    st->discarded_kind = 0;
    st->ref_compute_ns = tc;
    st->floor_workers = 1;
    st->ceil_workers = 0;
    st->floor_prefetch = 1;
    st->ceil_prefetch = 0;
    st->limited = false;
    return;
  }

  unsigned cpu_cap;
  double pred;
  double on_core = have_model && m.t_cpu_ns + m.t_io_ns > 0
                       ? (double)m.t_cpu_ns / (double)(m.t_cpu_ns + m.t_io_ns)
                       : 0.0;
  unsigned w = st->workers, k = st->prefetch;

  if (wait > STOKE__ATC_STALL) {
    /* 4. Stalled. */
    bool enough;
    unsigned need = stoke__atc_workers_needed_model(
        lim, have_model ? &m : NULL, tc, STOKE__ATC_GROW_HEADROOM, &cpu_cap,
        &pred, &enough);
    unsigned top = STOKE__MIN(lim->max_workers, cpu_cap);
    if (st->ceil_workers) top = STOKE__MIN(top, st->ceil_workers);
    if (!need) need = 2 * w; /* no producer clock yet: double */
    unsigned target = STOKE__MIN(need, top);
    target = STOKE__MIN(target, w * STOKE__ATC_MAX_GROW_FACTOR);
    if (target > w) {
      out->wait_predicted = pred;
      set_change(st, out, STOKE_AUTOTUNE_GROW, target, k, step, wait, win);
      snprintf(out->reason, sizeof out->reason,
               "waiting %.0f%%: a sample takes %.2f ms (%.0f%% on a core), "
               "the step computes %.1f ms: the model needs %u workers",
               100 * wait, have_model ? ms(m.t_d_ns) : 0.0, 100 * on_core,
               ms(tc), need);
      return;
    }
    /* No more workers: the model's count is above what is allowed, or
    ** none keeps up (the cores are the bound).  Deeper prefetch cannot
    ** help a mean that is short. */
    bool covered = have_model && enough && need <= w;
    bool room_k = covered && k < lim->max_prefetch &&
                  (!st->ceil_prefetch || k < st->ceil_prefetch);
    if (room_k && (empty < 0.5 || w >= top)) {
      set_change(st, out, STOKE_AUTOTUNE_DEEPER, w, k + 1, step, wait, win);
      snprintf(out->reason, sizeof out->reason,
               "waiting %.0f%% with %u workers, enough for the mean: the "
               "queue was empty at %.0f%% of steps; the spread wants "
               "deeper prefetch",
               100 * wait, w, 100 * empty);
      return;
    }
    if (covered && w < top) {
      set_change(st, out, STOKE_AUTOTUNE_GROW, w + 1, k, step, wait, win);
      snprintf(out->reason, sizeof out->reason,
               "waiting %.0f%% with %u workers, which the model thought "
               "enough: one more",
               100 * wait, w);
      return;
    }
    if (!st->limited) {
      st->limited = true;
      out->kind = STOKE_AUTOTUNE_LIMIT;
      const char *why =
          st->ceil_workers && st->ceil_workers <= w
              ? "more workers made the step slower"
          : cpu_cap <= w && cpu_cap < lim->max_workers
              ? "the CPU budget allows no more workers"
          : have_model && !enough
              ? "no worker count keeps up: the cores are the bound"
          : w >= lim->max_workers
              ? (lim->mem_note ? lim->mem_note
                               : "every started worker is active")
              : "the model's count is reached";
      snprintf(out->reason, sizeof out->reason,
               "waiting %.0f%% at %u workers, prefetch %u: %s (CPU budget "
               "%.1f cores, a worker %.0f%% on a core)",
               100 * wait, w, k, why, lim->cpu_budget, 100 * on_core);
    }
    return;
  }

  if (wait >= STOKE__ATC_QUIET) return; /* between the two: keep */
  /* 5. Quiet: try less. */
  bool enough;
  unsigned need = stoke__atc_workers_needed_model(
      lim, have_model ? &m : NULL, tc, STOKE__ATC_SHRINK_HEADROOM, &cpu_cap,
      &pred, &enough);
  unsigned lo = STOKE__MAX(need, st->floor_workers);
  if (need && enough && lo < w) {
    out->wait_predicted = pred;
    set_change(st, out, STOKE_AUTOTUNE_SHRINK, lo, k, step, wait, win);
    snprintf(out->reason, sizeof out->reason,
             "waiting %.0f%%: %u workers make a batch with %.0f%% to spare "
             "(a sample %.2f ms, the step computes %.1f ms)",
             100 * wait, lo, 100 * STOKE__ATC_SHRINK_HEADROOM,
             have_model ? ms(m.t_d_ns) : 0.0, ms(tc));
    return;
  }
  if (k > st->floor_prefetch && k > 1 && empty < STOKE__ATC_QUIET) {
    set_change(st, out, STOKE_AUTOTUNE_SHALLOWER, w, k - 1, step, wait, win);
    snprintf(out->reason, sizeof out->reason,
             "waiting %.0f%%, the queue empty at %.0f%% of steps: one batch "
             "of prefetch less",
             100 * wait, 100 * empty);
  }
}

bool stoke__atc_fit_memory(stoke__atc_bytes_fn bytes, void *ctx,
                           uint64_t budget, unsigned *w, unsigned *k) {
  unsigned w0 = *w, k0 = *k;
  if (!budget) return false;
  while (*k > 2 && bytes(ctx, *w, *k) > budget) (*k)--;
  while (*w > 1 && bytes(ctx, *w, *k) > budget) *w = *w > 8 ? *w - 4 : *w - 1;
  while (*k > 1 && bytes(ctx, *w, *k) > budget) (*k)--;
  return *w != w0 || *k != k0;
}
