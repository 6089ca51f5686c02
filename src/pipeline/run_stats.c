/* run_stats.c — what the loader measures beyond the workers' and the
** consumer's own counters: the warm-up baseline (the producers' totals and
** the stoke-w* threads' scheduler statistics when measuring started), the
** record of each finished epoch, and two counters read by stats.
** Locking: the baseline and the epoch log are protected by l->stats_mu (a
** leaf); the counters are atomic, relaxed: stats only. */
#include "pipeline/pipeline.h"

#include <string.h>

void stoke__run_stats_init(stoke__run_stats *r) {
  atomic_init(&r->epochs_done, 0);
  atomic_init(&r->workers_policy_applied, 0u);
}

int stoke__run_stats_create(stoke__run_stats *r, const stoke_allocator *a,
                            unsigned n_workers) {
  r->baseline = stoke__calloc(a, 1, sizeof *r->baseline);
  if (!r->baseline) return STOKE_ENOMEM;
  if (n_workers) {
    /* Room for the workers, helper threads they may start and another
    ** loader's: the window counts what fits. */
    r->cap_sched = 8 * (size_t)n_workers + 64;
    r->sched_base = stoke__calloc(a, r->cap_sched, sizeof *r->sched_base);
    if (!r->sched_base) return STOKE_ENOMEM;
  }
  return 0;
}

void stoke__run_stats_free(stoke__run_stats *r, const stoke_allocator *a) {
  stoke__free(a, r->sched_base);
  stoke__free(a, r->baseline);
  stoke__free(a, r->epochs.v);
}

void stoke__take_baseline(stoke_loader *l) {
  stoke__run_stats *r = &l->run;
  stoke__stats_snap *snap = r->baseline;
  pthread_mutex_lock(&l->stats_mu);
  memset(snap, 0, sizeof *snap);
  for (size_t i = 0; i < STOKE__MAX(l->n_workers, 1); i++)
    stoke__stats_snap_producer(l->workers[i].stats, snap);
  stoke__outlet_snap(&l->outlet, l, snap);
  r->have_baseline = true;
  if (r->sched_base) {
    int n = stoke__schedstat_list("stoke-w", r->sched_base, r->cap_sched);
    r->n_sched_base = n > 0 ? (size_t)n : 0;
  }
  pthread_mutex_unlock(&l->stats_mu);
}

void stoke__record_epoch(stoke_loader *l, int64_t end_ns) {
  stoke_epoch_stats e = stoke__cclock_epoch_record(&l->cclock, end_ns,
                                                   l->epoch);
  pthread_mutex_lock(&l->stats_mu);
  /* Out of memory for a record loses the record, not the epoch. */
  (void)stoke__epoch_log_add(&l->run.epochs, l->alloc, &e);
  pthread_mutex_unlock(&l->stats_mu);
  atomic_fetch_add_explicit(&l->run.epochs_done, 1, memory_order_relaxed);
}

void stoke__run_stats_sched(const stoke_loader *l, stoke_stats *st) {
  const stoke__run_stats *r = &l->run;
  if (!r->sched_base) return;
  stoke__sched_thread *now = stoke__calloc(l->alloc, r->cap_sched,
                                           sizeof *now);
  int n = now ? stoke__schedstat_list("stoke-w", now, r->cap_sched) : -1;
  if (n > 0) {
    stoke_loader *ml = (stoke_loader *)l; /* locks are not logically state */
    pthread_mutex_lock(&ml->stats_mu);
    /* Before a baseline (no warm-up) the window starts with the threads:
    ** their totals are the window's. */
    st->threads_active = stoke__schedstat_window(
        r->sched_base, r->have_baseline ? r->n_sched_base : 0, now,
        (size_t)n, &st->threads_run_ns, &st->threads_delay_ns);
    pthread_mutex_unlock(&ml->stats_mu);
  }
  stoke__free(l->alloc, now);
}
