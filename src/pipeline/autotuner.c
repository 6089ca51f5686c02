/* autotuner.c — the online autotuner inside a live loader.
**
** DESIGN
** Threads: everything here but the stats reads runs on the consumer's
** thread, inside next(): it measures windows of steps, hands each to the
** controller (src/model/autotune_controller.c, a pure function) and applies the
** decision under mu.  Nothing is recreated: every worker thread the budgets
** allow (the most workers) is started at create with all the slots (the
** deepest prefetch), and two numbers under mu say how many of them are in
** use:
**   - active_workers: a worker whose id is not below it does not claim
**     (claim() waits on gate_cv); one that is inside a chunk finishes it;
**   - active_prefetch: a new batch takes a slot only while fewer than
**     active_prefetch + consumer_slots slots are in use (the caller's
**     lent ones counted up to consumer_slots).
** Order and exactly-once: which samples form batch k and where each goes
** is fixed by (seed, epoch, rank, world, k) (core.c): workers only
** choose when a position is filled, so gating them cannot change what is
** delivered, nor its order.  A slot that is never used is never touched,
** so its pages stay out of the resident set.
** The log: every decision is an event kept under stats_mu (any thread may
** read it), an instant on the consumer's trace track, and, for a change,
** filled in with the numbers of the window after it. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline.h"
#include "pipeline/feature.h"
#include "model/autotune_controller.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A window ends after this many steps, or after WINDOW_MIN_STEPS once this
** much wall time went by (slow, starving steps); the window after a change
** needs only the queue's refill. */
#define WINDOW_STEPS 12
#define WINDOW_MIN_STEPS 4
#define WINDOW_NS 500000000LL
#define SETTLE_NS 250000000LL

typedef struct stoke__autotuner {
  stoke__atc_limits lim;
  stoke__atc_state st;          /* consumer thread */
  stoke__atc_window win;        /* consumer thread: the window so far */
  int64_t win_start_ns;
  uint64_t base_produced;      /* the producers' totals at its start */
  int64_t base_busy, base_cpu;
  int64_t base_run, base_delay; /* the stoke-w* threads' schedstat; run
                                   -1: unknown */
  stoke__outside_reading base_outside; /* the machine's CPU at its start */
  bool have_outside;           /* base_outside was read */
  uint64_t steps;              /* all steps since create */
  char mem_note[128];
  /* Protected by the loader's stats_mu. */
  stoke_autotune_event *ev;
  size_t n_ev, cap_ev;
  size_t trial_ev;             /* the event of the change on trial, or
                                  SIZE_MAX */
  uint64_t changes, rollbacks;
  atomic_bool frozen;          /* stoke__autotuner_force: no more decisions */
  atomic_uint_least64_t released_bytes; /* written under mu
                                           (trim_locked);
                                           relaxed: stats */
} stoke__at;

/* ---- create ---------------------------------------------------------------- */

static void trim_locked(stoke_loader *l);

/* The autotuner's state, or NULL: it is off. */
static stoke__at *tuner(const stoke_loader *l) {
  return stoke__feature_state(&l->features, &stoke__autotuner_feature);
}

static uint64_t ledger_total(void *ctx, unsigned w, unsigned k) {
  const stoke_loader *l = ctx;
  stoke_config c = l->cfg;
  c.n_workers = w;
  c.prefetch = k;
  stoke_host_ledger g;
  memset(&g, 0, sizeof g);
  g.struct_size = sizeof g;
  stoke__host_ledger(&c, w, &l->plan, l->src, &g);
  return g.total_bytes;
}

int stoke__autotuner_create(stoke_loader *l) {
  stoke_config *c = &l->cfg;
  if (c->autotune != 1)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: autotune is %d, expected 0 or 1",
                                c->autotune);
  if (!(c->cpu_budget >= 0) || !isfinite(c->cpu_budget))
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: cpu_budget is %g, expected cores "
                                "(> 0) or 0 for the online CPUs",
                                c->cpu_budget);
  if (c->n_workers == 0)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: autotune needs worker threads "
                                "(n_workers is 0)");
  if (c->device && *c->device && strcmp(c->device, "cpu") != 0)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: autotune does not work with a "
                                "device stage yet (device '%s')",
                                c->device);
  unsigned cpus = stoke__online_cpus();
  unsigned w = c->n_workers == STOKE_WORKERS_AUTO
                   ? STOKE_AUTOTUNE_MAX_WORKERS(cpus)
                   : c->n_workers;
  unsigned k = c->autotune_max_prefetch
                   ? c->autotune_max_prefetch
                   : STOKE__MAX(c->prefetch, 8u);
  if (k > 1024) k = 1024;
  stoke__at *at = stoke__calloc(l->alloc, 1, sizeof *at);
  if (!at) return stoke__set_tls_error(STOKE_ENOMEM, "loader: out of memory");
  atomic_init(&at->released_bytes, 0);
  /* Inside the memory budget: fewer slots first (down to 2), then fewer
  ** threads, then one slot.  Without one, the default most workers and
  ** slots fit in half the memory the process may have: 64 threads and 8
  ** slots of large batches are more than a small machine (or container)
  ** holds, and each thread starts at create.  A count the caller gave is
  ** the caller's. */
  uint64_t budget = c->mem_budget_bytes;
  bool machine = !budget && c->n_workers == STOKE_WORKERS_AUTO;
  if (machine) budget = stoke__memory_bytes() / 2;
  if (stoke__atc_fit_memory(ledger_total, l, budget, &w, &k)) {
    char b[32];
    stoke__format_bytes(budget, b, sizeof b);
    snprintf(at->mem_note, sizeof at->mem_note,
             machine ? "half the machine's memory (%s) allows %u workers and "
                       "prefetch %u"
                     : "the memory budget (%s) allows %u workers and "
                       "prefetch %u",
             b, w, k);
    at->lim.mem_note = at->mem_note;
  }
  c->n_workers = w;
  c->prefetch = k;
  at->lim.batch_size = c->batch_size;
  at->lim.max_workers = w;
  at->lim.max_prefetch = k;
  at->lim.cores = cpus;
  at->lim.cpu_budget = c->cpu_budget > 0 ? c->cpu_budget : (double)cpus;
  stoke__atc_init(&at->st, &at->lim);
  at->trial_ev = SIZE_MAX;
  atomic_init(&at->frozen, false);
  stoke__feature_add(&l->features, &stoke__autotuner_feature, at);
  l->active_workers = at->st.workers;
  l->active_prefetch = at->st.prefetch;
  return 0;
}

static void destroy(stoke_loader *l, void *state) {
  stoke__at *at = state;
  stoke__free(l->alloc, at->ev);
  stoke__free(l->alloc, at);
}

/* ---- gating ------------------------------------------------------------------- */

/* May a worker assign a new batch to a slot (mu held)?  Only while fewer
** than active_prefetch + consumer_slots slots are in use. */
static bool may_claim(const stoke_loader *l, const void *state) {
  (void)state;
  size_t busy = 0, lent = 0;
  for (size_t i = 0; i < l->n_slots; i++) {
    int s = l->slots[i].state;
    if (s == STOKE__SLOT_LENT)
      lent++;
    else if (s != STOKE__SLOT_FREE)
      busy++;
  }
  size_t cs = l->cfg.consumer_slots;
  return busy + STOKE__MIN(lent, cs) < (size_t)l->active_prefetch + cs;
}

/* ---- the log ------------------------------------------------------------------ */

static void event_text(stoke_autotune_event *e, const char *reason) {
  char what[96] = "", wait[64] = "", pred[32] = "";
  int n = 0;
  if (e->from_workers != e->to_workers)
    n += snprintf(what + n, sizeof what - n, "%u -> %u workers",
                  e->from_workers, e->to_workers);
  if (e->from_prefetch != e->to_prefetch)
    snprintf(what + n, sizeof what - n, "%sprefetch %u -> %u", n ? ", " : "",
             e->from_prefetch, e->to_prefetch);
  if (!what[0])
    snprintf(what, sizeof what, "%u workers, prefetch %u", e->to_workers,
             e->to_prefetch);
  if (e->wait_after >= 0)
    snprintf(wait, sizeof wait, "waiting %.0f%% -> %.0f%%",
             100 * e->wait_before, 100 * e->wait_after);
  else
    snprintf(wait, sizeof wait, "waiting %.0f%%", 100 * e->wait_before);
  if (e->wait_predicted >= 0)
    snprintf(pred, sizeof pred, " (model: %.0f%%)", 100 * e->wait_predicted);
  snprintf(e->text, sizeof e->text, "epoch %llu, step %llu: %s%s%s, %s%s; %s",
           (unsigned long long)e->epoch, (unsigned long long)e->step,
           e->kind == STOKE_AUTOTUNE_ROLLBACK ? "rollback, " : "",
           e->kind == STOKE_AUTOTUNE_LIMIT ||
                   e->kind == STOKE_AUTOTUNE_OUTSIDE
               ? "held at "
               : "",
           what, wait,
           pred, reason);
}

/* Event e into the log and on the consumer's trace track (consumer
** thread).  A change is counted (a ROLLBACK as one).  `own`: a decision of
** the workers' controller, which ends the trial before it and opens one
** when it is a change other than a rollback; another tuner's (note) leaves
** the workers' trial as it is. */
static void keep_event(stoke_loader *l, const stoke_autotune_event *e,
                       bool change, bool own, int64_t now) {
  stoke__at *at = tuner(l);
  pthread_mutex_lock(&l->stats_mu);
  if (change) {
    at->changes++;
    if (e->kind == STOKE_AUTOTUNE_ROLLBACK) at->rollbacks++;
  }
  if (own) at->trial_ev = SIZE_MAX;
  /* Out of memory for the log loses the record, not the decision. */
  void *p = at->ev;
  bool room = stoke__grow(l->alloc, &p, &at->cap_ev, at->n_ev, sizeof *e,
                          STOKE_AUTOTUNE_EVENTS_KEPT);
  at->ev = p;
  if (room) {
    if (own && change && e->kind != STOKE_AUTOTUNE_ROLLBACK)
      at->trial_ev = at->n_ev;
    at->ev[at->n_ev++] = *e;
  }
  pthread_mutex_unlock(&l->stats_mu);
  if (l->tracks.v) {
    uint64_t arg = (uint64_t)(e->from_workers & 0xffff) |
                   (uint64_t)(e->to_workers & 0xffff) << 16 |
                   (uint64_t)(e->from_prefetch & 0xffff) << 32 |
                   (uint64_t)(e->to_prefetch & 0xffff) << 48;
    stoke__trace_push(&l->tracks.v[0], STOKE__EV_AUTOTUNE, now, 0, arg,
                      (uint32_t)e->kind);
  }
}

/* Keep decision d (consumer thread). */
static void record(stoke_loader *l, const stoke__atc_decision *d,
                   int64_t now) {
  stoke__at *at = tuner(l);
  stoke_autotune_event e;
  memset(&e, 0, sizeof e);
  e.kind = d->kind;
  e.epoch = l->epoch;
  e.step = at->steps;
  e.time_ns = now - l->tracks.t0_ns;
  e.from_workers = d->from_workers;
  e.to_workers = d->to_workers;
  e.from_prefetch = d->from_prefetch;
  e.to_prefetch = d->to_prefetch;
  e.wait_before = d->wait_now;
  e.wait_after = -1;
  e.wait_predicted = d->wait_predicted;
  e.step_before_ns = d->step_now_ns;
  e.step_after_ns = -1;
  e.compute_ns = d->compute_ns;
  event_text(&e, d->reason);
  bool change = d->kind != STOKE_AUTOTUNE_LIMIT &&
                d->kind != STOKE_AUTOTUNE_STEP &&
                d->kind != STOKE_AUTOTUNE_OUTSIDE;
  keep_event(l, &e, change, true, now);
}

void stoke__autotuner_note(stoke_loader *l, const stoke_autotune_event *e,
                           int64_t now) {
  if (tuner(l)) keep_event(l, e, true, false, now);
}

/* The window after a kept change: its measured numbers. */
static void fill_after(stoke_loader *l, const stoke__atc_decision *d) {
  stoke__at *at = tuner(l);
  pthread_mutex_lock(&l->stats_mu);
  if (at->trial_ev < at->n_ev) {
    stoke_autotune_event *e = &at->ev[at->trial_ev];
    e->wait_after = d->wait_now;
    e->step_after_ns = d->step_now_ns;
    /* The reason is the text after the first "; ". */
    const char *r = strstr(e->text, "; ");
    char reason[256];
    snprintf(reason, sizeof reason, "%s", r ? r + 2 : "");
    event_text(e, reason);
  }
  at->trial_ev = SIZE_MAX;
  pthread_mutex_unlock(&l->stats_mu);
}

/* ---- windows -------------------------------------------------------------------- */

static void producer_totals(const stoke_loader *l, uint64_t *produced,
                            int64_t *busy, int64_t *cpu) {
  uint64_t p = 0, b = 0, c = 0;
  for (unsigned i = 0; i < l->n_workers; i++) {
    const stoke__producer_stats *ps = l->workers[i].stats;
    p += stoke__counter_get(&ps->samples);
    b += stoke__counter_get(&ps->busy_ns);
    c += stoke__counter_get(&ps->cpu_ns);
  }
  *produced = p;
  *busy = (int64_t)b;
  *cpu = (int64_t)c;
}

static void window_start(stoke_loader *l, int64_t now) {
  stoke__at *at = tuner(l);
  memset(&at->win, 0, sizeof at->win);
  at->win_start_ns = now;
  producer_totals(l, &at->base_produced, &at->base_busy, &at->base_cpu);
  /* The process's threads named stoke-w* (another loader's too): one
  ** read of each thread's schedstat per window. */
  if (stoke__schedstat_threads("stoke-w", &at->base_run, &at->base_delay) <
      0)
    at->base_run = -1;
  /* The machine's busy time beside this process's: the window's other
  ** load (one small file read a window: the last window's end reading,
  ** when there is one, starts the next). */
  if (!at->have_outside)
    at->have_outside = stoke__outside_read(&at->base_outside) == 0;
}

/* Consumer thread, mu held: a step's compute. */
static void compute(stoke_loader *l, void *state, int64_t compute_ns) {
  (void)l;
  stoke__at *at = state;
  if (at->win_start_ns) at->win.compute_ns += compute_ns;
}

static bool window_done(const stoke__at *at, int64_t wall) {
  uint64_t n = at->win.steps;
  if (at->st.settle)
    return n >= (uint64_t)at->st.prefetch + 1 || (n >= 2 && wall >= SETTLE_NS);
  return n >= WINDOW_STEPS || (n >= WINDOW_MIN_STEPS && wall >= WINDOW_NS);
}

/* Put a configuration in force: the workers gated on or off, the slots
** opened or closed.  Fewer takes effect as workers finish their chunks and
** slots come back; nothing in flight is interrupted. */
static void apply(stoke_loader *l, unsigned workers, unsigned prefetch) {
  pthread_mutex_lock(&l->mu);
  bool more_workers = workers > l->active_workers;
  bool fewer_workers = workers < l->active_workers;
  bool more_slots = prefetch > l->active_prefetch;
  l->active_workers = workers;
  l->active_prefetch = prefetch;
  if (more_workers) pthread_cond_broadcast(&l->gate_cv);
  /* Fewer workers: those gated off leave the slot wait for the gate, so
  ** that a freed slot's signals go to workers that may claim. */
  if (more_slots || fewer_workers)
    stoke__wake_workers_locked(l);
  trim_locked(l);
  pthread_mutex_unlock(&l->mu);
}

/* "The least memory": slots the active prefetch leaves idle give their
** pages back to the OS (madvise DONTNEED), so that a shallower prefetch
** lowers the resident set, not only the slots in use.  The free list is a
** stack, so the slots at its bottom are the ones the gate keeps unused:
** the first (allowed - in use) are kept, the rest released once each (a
** released slot assigned again faults its pages back in as it fills).
** Only malloc's memory: a caller's allocator and page-locked memory keep
** their pages.  Called with mu held, when prefetch is lowered and when a
** slot is freed. */
static void trim_locked(stoke_loader *l) {
  if (l->alloc || l->outlet.dev) return; /* page-locked: kept */
  size_t in_use = 0;
  for (size_t i = 0; i < l->n_slots; i++)
    in_use += l->slots[i].state != STOKE__SLOT_FREE;
  size_t allowed = (size_t)l->active_prefetch + l->cfg.consumer_slots;
  size_t keep = allowed > in_use ? allowed - in_use : 0;
  for (stoke_batch *b = l->free_list; b; b = b->next_free) {
    if (keep) {
      keep--;
      continue;
    }
    if (b->pages_released) continue;
    b->pages_released = true;
    uint64_t n = 0;
    for (size_t f = 0; f < l->src->n_fields; f++)
      n += stoke__release_pages(b->data[f], stoke__slot_field_bytes(l, f));
    /* Counted only for a slot that was filled: one never used had (almost)
    ** nothing resident to give back. */
    if (b->pages_used)
      atomic_fetch_add_explicit(&tuner(l)->released_bytes, n,
                                memory_order_relaxed);
    b->pages_used = false;
  }
}

/* Consumer thread, mu not held: a step was handed out after waiting
** wait_ns; empty: no batch was ready at next(). */
static void step(stoke_loader *l, void *state, int64_t wait_ns, bool empty) {
  stoke__at *at = state;
  if (atomic_load_explicit(&at->frozen, memory_order_relaxed)) return;
  int64_t now = stoke__now_ns();
  at->steps++;
  if (!at->win_start_ns) {
    /* The first step starts the first window: creation and the first
    ** batch are not a steady state. */
    window_start(l, now);
    return;
  }
  stoke__atc_window *w = &at->win;
  w->steps++;
  w->wait_ns += wait_ns;
  if (empty) w->empty_steps++;
  int64_t wall = now - at->win_start_ns;
  if (!window_done(at, wall)) return;
  uint64_t p;
  int64_t b, c;
  producer_totals(l, &p, &b, &c);
  w->produced = p - at->base_produced;
  w->busy_ns = b - at->base_busy;
  w->cpu_ns = c - at->base_cpu;
  w->wall_ns = wall;
  int64_t run, delay;
  if (at->base_run >= 0 &&
      stoke__schedstat_threads("stoke-w", &run, &delay) >= 0 &&
      run > at->base_run && delay >= at->base_delay) {
    w->sched_run_ns = run - at->base_run;
    w->sched_delay_ns = delay - at->base_delay;
  }
  stoke__outside_reading o;
  if (at->have_outside && stoke__outside_read(&o) == 0) {
    w->outside_on = true;
    w->outside_cores = stoke__outside_cores(&at->base_outside, &o);
    w->machine_cores = stoke__outside_busy_cores(&at->base_outside, &o);
    at->base_outside = o;
  } else {
    at->have_outside = false; /* read again at the next window's start */
  }
  stoke__atc_decision d;
  stoke__atc_decide(&at->st, &at->lim, w, &d);
  if (d.evaluated) fill_after(l, &d);
  if (d.kind) {
    record(l, &d, now);
    apply(l, at->st.workers, at->st.prefetch);
  }
  window_start(l, now);
}

void stoke__autotuner_force(stoke_loader *l, unsigned workers,
                            unsigned prefetch) {
  stoke__at *at = tuner(l);
  if (!at) return;
  atomic_store_explicit(&at->frozen, true, memory_order_relaxed);
  apply(l, STOKE__MAX(1u, STOKE__MIN(workers, at->lim.max_workers)),
        STOKE__MAX(1u, STOKE__MIN(prefetch, at->lim.max_prefetch)));
}

/* ---- reading ---------------------------------------------------------------------- */

static void stats(const stoke_loader *l, const void *state, stoke_stats *st) {
  stoke_loader *ml = (stoke_loader *)l;
  const stoke__at *at = state;
  st->autotune = 1;
  st->cpu_budget = at->lim.cpu_budget;
  pthread_mutex_lock(&ml->mu);
  st->n_workers = l->active_workers;
  st->prefetch = l->active_prefetch;
  pthread_mutex_unlock(&ml->mu);
  pthread_mutex_lock(&ml->stats_mu);
  st->autotune_changes = at->changes;
  st->autotune_rollbacks = at->rollbacks;
  pthread_mutex_unlock(&ml->stats_mu);
  st->autotune_released_bytes =
      atomic_load_explicit(&at->released_bytes, memory_order_relaxed);
}

size_t stoke_loader_n_autotune_events(const stoke_loader *l) {
  const stoke__at *at = l ? tuner(l) : NULL;
  if (!at) return 0;
  stoke_loader *ml = (stoke_loader *)l;
  pthread_mutex_lock(&ml->stats_mu);
  size_t n = at->n_ev;
  pthread_mutex_unlock(&ml->stats_mu);
  return n;
}

int stoke_loader_autotune_event(const stoke_loader *l, size_t i,
                                stoke_autotune_event *out) {
  const stoke__at *at = l ? tuner(l) : NULL;
  if (!out || !at) return STOKE_EINVAL;
  stoke_loader *ml = (stoke_loader *)l;
  int rc = STOKE_EINVAL;
  pthread_mutex_lock(&ml->stats_mu);
  if (i < at->n_ev) {
    *out = at->ev[i];
    rc = 0;
  }
  pthread_mutex_unlock(&ml->stats_mu);
  return rc;
}

/* Slots given back wake the trim (freed) as the gate reopens (may_claim). */
static void freed(stoke_loader *l, void *state) {
  (void)state;
  trim_locked(l);
}

const stoke__feature_ops stoke__autotuner_feature = {
    .name = "autotuner",
    .may_claim = may_claim,
    .freed = freed,
    .compute = compute,
    .step = step,
    .stats = stats,
    .destroy = destroy,
};
