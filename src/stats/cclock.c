/* cclock.c — the consumer clock (see cclock.h). */
#include "stats/cclock.h"

#include "os/os.h"

#include <string.h>

int stoke__cclock_init(stoke__cclock *c, const stoke_allocator *a,
                       uint64_t warmup_epochs, uint64_t warmup_steps) {
  memset(c, 0, sizeof *c);
  c->cs = stoke__alloc_aligned(a, sizeof *c->cs);
  if (!c->cs) return STOKE_ENOMEM;
  memset(c->cs, 0, sizeof *c->cs);
  c->warmup_steps = warmup_steps;
  /* No warm-up at all: every step counts, and no step "ends" a warm-up
  ** (which would leave out what the producers did before it). */
  c->measuring = warmup_epochs == 0 && warmup_steps == 0;
  return 0;
}

void stoke__cclock_warmup_end(stoke__cclock *c, uint64_t steps, int64_t ns) {
  c->end_steps = steps;
  c->end_ns = ns > 0 ? ns : 0;
}

int stoke__cclock_track_steps(stoke__cclock *c, const stoke_allocator *a) {
  if (c->cs->step) return 0;
  c->cs->step = stoke__alloc_aligned(a, sizeof *c->cs->step);
  if (!c->cs->step) return STOKE_ENOMEM;
  memset(c->cs->step, 0, sizeof *c->cs->step);
  return 0;
}

void stoke__cclock_free(stoke__cclock *c, const stoke_allocator *a) {
  if (c->cs) stoke__free_aligned(a, c->cs->step);
  stoke__free_aligned(a, c->cs);
  c->cs = NULL;
}

void stoke__cclock_epoch_start(stoke__cclock *c, int64_t now, bool warmup) {
  /* Once the warm-up ended early, no later epoch is a warm-up one. */
  c->epoch_warmup = warmup && !c->warmup_epochs_over;
  c->epoch_warmup_ended = false;
  c->epoch_start_ns = now;
  c->epoch_wait_ns = c->epoch_compute_ns = 0;
  c->epoch_batches = c->epoch_samples = 0;
}

stoke_epoch_stats stoke__cclock_epoch_record(const stoke__cclock *c,
                                             int64_t now, uint64_t number) {
  return (stoke_epoch_stats){.epoch = number,
                             .warmup = c->epoch_warmup_ended ? 2
                                       : c->epoch_warmup       ? 1
                                                               : 0,
                             .wall_ns = now - c->epoch_start_ns,
                             .wait_ns = c->epoch_wait_ns,
                             .compute_ns = c->epoch_compute_ns,
                             .batches = c->epoch_batches,
                             .samples = c->epoch_samples};
}

int64_t stoke__cclock_compute_end(stoke__cclock *c, int64_t now) {
  if (!c->leave_ns) return -1;
  int64_t dt = now - c->leave_ns;
  c->epoch_compute_ns += dt;
  stoke__trace_push(c->trace, STOKE__EV_COMPUTE, c->leave_ns, dt,
                    c->last_number, 0);
  if (c->last_measured) {
    stoke__hist_add(c->events ? &c->cs->host_compute : &c->cs->compute,
                    (uint64_t)dt);
    if (c->cs->step && !c->events)
      stoke__hist_add(c->cs->step, (uint64_t)(c->last_wait_ns + dt));
  }
  c->leave_ns = 0;
  return dt;
}

/* A step of a warm-up epoch: does it end the warm-up epochs early?  The
** first end_steps steps never do; after them, the first step end_ns after
** the first one does.  (Steps, not only time: a loader's first steps are
** its slowest, and a few seconds of them say little.) */
static bool warmup_ends_early(stoke__cclock *c) {
  if (!c->end_steps && !c->end_ns) return false;
  int64_t now = c->end_ns ? stoke__now_ns() : 0;
  if (c->warmup_epoch_steps++ == 0) c->first_step_ns = now;
  if (c->warmup_epoch_steps <= c->end_steps) return false;
  if (now - c->first_step_ns < c->end_ns) return false;
  c->warmup_epochs_over = true;
  c->epoch_warmup = false;
  c->epoch_warmup_ended = true;
  return true;
}

bool stoke__cclock_measure(stoke__cclock *c, bool *warmup_ended) {
  if (c->measuring) return true;
  if (c->epoch_warmup && !warmup_ends_early(c)) return false;
  if (c->warmup_steps_seen < c->warmup_steps) {
    c->warmup_steps_seen++;
    return false;
  }
  c->measuring = true;
  *warmup_ended = true;
  return true;
}

/* A measured step: the other load's windows go on (or start). */
static void outside_step(stoke__cclock *c, int64_t now) {
  if (c->outside_started) {
    stoke__outside_tick(&c->outside, now);
    return;
  }
  c->outside_started = true;
  stoke__outside_start(&c->outside);
}

void stoke__cclock_step(stoke__cclock *c, int64_t enter, int64_t leave,
                        uint64_t number, size_t n_samples, bool measured) {
  int64_t wait = leave - enter;
  stoke__trace_push(c->trace, STOKE__EV_WAIT, enter, wait, number, 0);
  c->epoch_wait_ns += wait;
  c->epoch_batches++;
  c->epoch_samples += n_samples;
  if (measured) {
    stoke__consumer_stats *cs = c->cs;
    stoke__hist_add(c->events ? &cs->host_wait : &cs->wait, (uint64_t)wait);
    stoke__counter_add(&cs->steps, 1);
    stoke__counter_add(&cs->samples, n_samples);
    outside_step(c, leave);
  }
  c->last_number = number;
  c->last_measured = measured;
  c->last_wait_ns = wait;
  c->leave_ns = leave;
}

void stoke__cclock_record(stoke__cclock *c, int64_t wait_ns,
                          int64_t compute_ns, size_t n_samples,
                          bool measured) {
  c->epoch_wait_ns += wait_ns;
  c->epoch_compute_ns += compute_ns;
  c->epoch_batches++;
  c->epoch_samples += n_samples;
  if (measured) {
    stoke__consumer_stats *cs = c->cs;
    stoke__hist_add(c->events ? &cs->host_wait : &cs->wait,
                    (uint64_t)wait_ns);
    stoke__hist_add(c->events ? &cs->host_compute : &cs->compute,
                    (uint64_t)compute_ns);
    if (cs->step) stoke__hist_add(cs->step, (uint64_t)(wait_ns + compute_ns));
    stoke__counter_add(&cs->steps, 1);
    stoke__counter_add(&cs->samples, n_samples);
    outside_step(c, 0);
  }
}

void stoke__cclock_pend(stoke__cclock *c, int64_t enter, bool measured,
                        size_t depth) {
  c->pending_enter_ns = enter;
  c->pending_measured = measured;
  c->pending_depth = depth;
}

bool stoke__cclock_resume(stoke__cclock *c, int64_t *enter, bool *measured,
                          size_t *depth) {
  if (!c->pending_enter_ns) return false;
  *enter = c->pending_enter_ns;
  *measured = c->pending_measured;
  *depth = c->pending_depth;
  c->pending_enter_ns = 0;
  return true;
}

int stoke__epoch_log_add(stoke__epoch_log *g, const stoke_allocator *a,
                         const stoke_epoch_stats *e) {
  void *p = g->v;
  if (!stoke__grow(a, &p, &g->cap, g->n, sizeof *e, 0)) return STOKE_ENOMEM;
  g->v = p;
  g->v[g->n++] = *e;
  return 0;
}
