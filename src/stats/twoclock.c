/* twoclock.c — the two clocks around somebody else's loop.
**
** The loader measures waiting and computing itself (src/pipeline/), with
** the same consumer clock (cclock.c) used here.  A loop
** over another loader (PyTorch's DataLoader, a generator, a file reader)
** gets the same clocks from three calls: enter() when the consumer asks for
** the next batch, leave() when it has it, end_epoch() when the iteration is
** over.  The wait is enter..leave, the compute leave..next enter, and the
** statistics are the loader's own structures (stoke__consumer_stats, epoch
** records, the consumer trace track), so stoke_diagnose, the CLI's report
** and `stoke report` read them unchanged.
**
** What it cannot see: the producer's stages and its ready queue.  The queue
** is inferred from the wait: a next() that returned within ready_wait_ns
** found a batch ready (depth 1), a longer one found none (depth 0).  So
** queue_empty_frac is "the share of steps that waited", which is what the
** doctor's starving-vs-variance rule asks of the queue.  A loader whose W
** workers each make whole batches (PyTorch's) starves in rounds: one long
** wait, then W - 1 batches made beside the waited one are "ready" although
** nothing was made ahead; with round_steps = W a round that waited at all
** is one empty queue (PyTorch's DataLoader at 4 workers: every round
** waits 160 ms, 1 step in 4).
**
** A caller that does see its producer (stoke.DataLoader's worker
** processes) gives what it sees: the ready queue at each step
** (stoke_twoclock_depth) and the producers' stages in a stage block
** (stage_block.c, stoke_twoclock_attach_stages), which the statistics then
** count from the end of the warm-up as a loader counts its workers'. */
#include "os/os.h"
#include "stats/cclock.h"
#include "stats/publish.h"
#include "stats/export.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct stoke_twoclock {
  stoke_twoclock_config cfg;
  const stoke_allocator *alloc; /* cfg.alloc, borrowed */
  /* Wait, compute, warm-up, the epoch in progress (the driving thread
  ** only; its statistics readable from any thread). */
  stoke__cclock clock;
  int64_t t0_ns;                /* creation: trace timestamps start here */
  int64_t enter_ns;             /* 0: not inside a next() */
  uint64_t step_number;         /* in the epoch, for the trace */
  unsigned round_pos;           /* measured steps into the current round */
  bool round_waited;            /* one of them waited */
  bool epoch_active;
  uint64_t epoch_number;
  /* Records, read from any thread. */
  pthread_mutex_t mu;           /* leaf: epochs */
  stoke__epoch_log epochs;
  stoke__trace *trace;          /* NULL when cfg.trace_events is 0 */
  stoke__publisher *pub;        /* the live view (cfg.publish), or NULL */
  stoke__exporter ex;           /* metrics and JSON lines (export.h) */
  /* Stages measured elsewhere: the block (borrowed) and its counters when
  ** the warm-up ended, subtracted from every snapshot; protected by mu
  ** (attach and the warm-up's end write them, readers read them). */
  const void *stages;
  unsigned stages_processes;    /* stats.worker_processes */
  bool stages_counting;         /* base taken: the warm-up is over */
  stoke__stats_snap *stages_base;
  /* The ready queue the step in progress found (stoke_twoclock_depth);
  ** the driving thread only. */
  bool depth_known;
  size_t depth;
};

void stoke_twoclock_config_init(stoke_twoclock_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->warmup_epochs = 1;
  cfg->ready_wait_ns = 2000000;
  cfg->n_workers = STOKE_WORKERS_AUTO;
  cfg->warmup_end_steps = STOKE_WARMUP_END_STEPS;
  cfg->warmup_end_ns = STOKE_WARMUP_END_NS;
}

/* The steady state so far, for the writers, on the exporter's thread or
** the driving one (zeros when out of memory). */
static void export_snapshot(void *ctx, stoke_stats *st) {
  (void)stoke_twoclock_stats(ctx, st);
}

/* The live view's snapshot, on the publisher's thread: the read calls are
** safe beside the driving thread. */
static void live_fill(void *ctx, stoke_live *out, stoke_hist_bucket *scratch,
                      size_t cap) {
  const stoke_twoclock *c = ctx;
  stoke_twoclock_stats(c, &out->stats);
  size_t n = stoke_twoclock_wait_histogram(c, scratch, cap);
  stoke__live_rebin(scratch, n < cap ? n : cap, out->wait_hist);
}

int stoke_twoclock_create(const stoke_twoclock_config *cfg,
                          stoke_twoclock **out) {
  if (!out) return stoke__set_tls_error(STOKE_EINVAL, "twoclock: out is NULL");
  *out = NULL;
  stoke__clear_tls_error();
  stoke_twoclock_config def;
  if (!cfg) {
    stoke_twoclock_config_init(&def);
    cfg = &def;
  }
  if (cfg->struct_size != sizeof *cfg)
    return stoke__set_tls_error(
        STOKE_EINVAL,
        "twoclock: struct_size is %zu, expected %zu (call "
        "stoke_twoclock_config_init)",
        cfg->struct_size, sizeof *cfg);
  if (cfg->ready_wait_ns < 0)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "twoclock: ready_wait_ns is negative");
  if (cfg->publish < STOKE_PUBLISH_OFF || cfg->publish > STOKE_PUBLISH_ON)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "twoclock: publish is %d, expected 0, 1 or "
                                "-1", cfg->publish);
  if (cfg->warmup_end_ns < 0)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "twoclock: warmup_end_ns is negative");
  stoke_twoclock *c = stoke__calloc(cfg->alloc, 1, sizeof *c);
  if (!c) return stoke__set_tls_error(STOKE_ENOMEM, "twoclock: out of memory");
  c->cfg = *cfg;
  c->alloc = cfg->alloc;
  c->t0_ns = stoke__now_ns();
  int rc = stoke__cclock_init(&c->clock, c->alloc, cfg->warmup_epochs,
                              cfg->warmup_steps);
  bool have_clock = rc == 0;
  if (have_clock)
    stoke__cclock_warmup_end(&c->clock, cfg->warmup_end_steps,
                             cfg->warmup_end_ns);
  if (have_clock && (cfg->metrics_path || cfg->log_jsonl_path))
    rc = stoke__cclock_track_steps(&c->clock, c->alloc);
  if (rc == 0 && pthread_mutex_init(&c->mu, NULL) != 0) rc = STOKE_ENOMEM;
  bool have_mu = rc == 0;
  if (rc == 0 && cfg->trace_events > 0) {
    c->trace = stoke__calloc(c->alloc, 1, sizeof *c->trace);
    rc = c->trace ? stoke__trace_init(c->trace, c->alloc, cfg->trace_events)
                  : STOKE_ENOMEM;
    if (rc != 0) {
      stoke__free(c->alloc, c->trace);
      c->trace = NULL;
    }
  }
  if (rc != 0) {
    if (have_mu) pthread_mutex_destroy(&c->mu);
    if (have_clock) stoke__cclock_free(&c->clock, c->alloc);
    stoke__free(c->alloc, c);
    return stoke__set_tls_error(rc, "twoclock: out of memory");
  }
  c->clock.trace = c->trace;
  stoke_stats zero;
  memset(&zero, 0, sizeof zero);
  zero.struct_size = sizeof zero;
  zero.n_workers = cfg->n_workers;
  char err[512];
  rc = stoke__exporter_init(&c->ex, c->alloc, cfg->metrics_path,
                            cfg->metrics_every_ns, cfg->log_jsonl_path,
                            cfg->log_every_steps, cfg->metrics_loader,
                            cfg->rank, &zero, export_snapshot, c, err,
                            sizeof err);
  if (rc != 0) {
    stoke__exporter_free(&c->ex, c->alloc); /* no last metrics: none began */
    stoke_twoclock_destroy(c);
    return stoke__set_tls_error(rc, "twoclock: %s", err);
  }
  stoke__exporter_start(&c->ex, c->alloc);
  if (stoke__publish_wanted(cfg->publish))
    c->pub = stoke__publisher_start(c->alloc, STOKE_LIVE_TWOCLOCK,
                                    live_fill, c);
  *out = c;
  return 0;
}

void stoke_twoclock_destroy(stoke_twoclock *c) {
  if (!c) return;
  stoke__publisher_stop(c->pub); /* it reads the statistics freed below */
  stoke__exporter_stop(&c->ex, c->alloc); /* the lines due, last metrics */
  stoke__exporter_free(&c->ex, c->alloc);
  if (c->trace) {
    stoke__trace_free(c->trace, c->alloc);
    stoke__free(c->alloc, c->trace);
  }
  pthread_mutex_destroy(&c->mu);
  stoke__free(c->alloc, c->stages_base);
  stoke__free(c->alloc, c->epochs.v);
  stoke__cclock_free(&c->clock, c->alloc);
  stoke__free(c->alloc, c);
}

/* A round of steps ends: it found a batch ready unless one waited. */
static void end_round(stoke_twoclock *c) {
  if (!c->round_pos) return;
  stoke__cclock_depth(&c->clock, c->round_waited ? 0 : 1);
  c->round_pos = 0;
  c->round_waited = false;
}

/* A measured step waited wait_ns: part of the current round. */
static void round_step(stoke_twoclock *c, int64_t wait_ns) {
  c->round_waited |= wait_ns > c->cfg.ready_wait_ns;
  if (++c->round_pos >= STOKE__MAX(c->cfg.round_steps, 1u)) end_round(c);
}

static void start_epoch(stoke_twoclock *c, int64_t now) {
  if (c->epoch_active) return;
  c->epoch_active = true;
  stoke__cclock_epoch_start(&c->clock, now,
                            c->epoch_number < c->cfg.warmup_epochs);
  c->step_number = 0;
}

/* The attached block's counters now become the base the statistics
** subtract: what the producers made during the warm-up is left out.
** Under mu. */
static void stages_start(stoke_twoclock *c) {
  memset(c->stages_base, 0, sizeof *c->stages_base);
  stoke__stage_block_read(c->stages, c->stages_base);
  c->stages_counting = true;
}

/* Whether this step counts: not in a warm-up epoch, and past the first
** warmup_steps (which it counts).  The step that ends the warm-up starts
** the attached stages' count. */
static bool step_measured(stoke_twoclock *c) {
  bool ended = false;
  bool measured = stoke__cclock_measure(&c->clock, &ended);
  if (ended) {
    pthread_mutex_lock(&c->mu);
    if (c->stages) stages_start(c);
    pthread_mutex_unlock(&c->mu);
  }
  return measured;
}

/* A measured step's queue: the depth the caller gave, else the round's
** inference from its wait. */
static void step_depth(stoke_twoclock *c, int64_t wait_ns) {
  if (c->depth_known)
    stoke__cclock_depth(&c->clock, c->depth);
  else
    round_step(c, wait_ns);
}

int64_t stoke_twoclock_enter(stoke_twoclock *c) {
  int64_t now = stoke__now_ns();
  stoke__cclock_compute_end(&c->clock, now);
  start_epoch(c, now);
  c->enter_ns = now;
  return now;
}

int64_t stoke_twoclock_leave(stoke_twoclock *c, size_t n_samples) {
  int64_t now = stoke__now_ns();
  if (!c->enter_ns) return now; /* leave without enter: nothing to time */
  int64_t enter = c->enter_ns;
  c->enter_ns = 0;
  bool measured = step_measured(c);
  if (measured) step_depth(c, now - enter);
  c->depth_known = false;
  stoke__cclock_step(&c->clock, enter, now, c->step_number, n_samples,
                     measured);
  c->step_number++;
  stoke__exporter_step(&c->ex);
  return now;
}

int stoke_twoclock_record(stoke_twoclock *c, int64_t wait_ns,
                          int64_t compute_ns, size_t n_samples) {
  if (!c || wait_ns < 0 || compute_ns < 0) return STOKE_EINVAL;
  start_epoch(c, stoke__now_ns());
  bool measured = step_measured(c);
  if (measured) step_depth(c, wait_ns);
  c->depth_known = false;
  stoke__cclock_record(&c->clock, wait_ns, compute_ns, n_samples, measured);
  c->step_number++;
  stoke__exporter_step(&c->ex);
  return 0;
}

int stoke_twoclock_end_epoch(stoke_twoclock *c) {
  int64_t now = stoke__now_ns();
  stoke__cclock_compute_end(&c->clock, now);
  c->enter_ns = 0;
  end_round(c); /* rounds do not span epochs */
  if (!c->epoch_active) return 0;
  c->epoch_active = false;
  stoke_epoch_stats e =
      stoke__cclock_epoch_record(&c->clock, now, c->epoch_number);
  c->epoch_number++;
  pthread_mutex_lock(&c->mu);
  int rc = stoke__epoch_log_add(&c->epochs, c->alloc, &e);
  pthread_mutex_unlock(&c->mu);
  stoke__exporter_epoch(&c->ex, &e);
  return rc;
}

int stoke_twoclock_stats(const stoke_twoclock *c, stoke_stats *out) {
  if (!c || !out || out->struct_size == 0) return STOKE_EINVAL;
  stoke__stats_snap *snap = stoke__calloc(c->alloc, 1, sizeof *snap);
  if (!snap) return STOKE_ENOMEM;
  stoke__stats_snap_consumer(c->clock.cs, snap);
  stoke_twoclock *mc = (stoke_twoclock *)c; /* the lock is not state */
  pthread_mutex_lock(&mc->mu);
  unsigned processes = c->stages ? c->stages_processes : 0;
  if (c->stages && c->stages_counting) {
    /* The producers' side, since the warm-up ended (a snapshot of the
    ** consumer's side holds no producer counters to mix with). */
    stoke__stage_block_read(c->stages, snap);
    stoke__stats_snap_sub(snap, c->stages_base);
  }
  size_t epochs_done = c->epochs.n;
  pthread_mutex_unlock(&mc->mu);
  stoke_stats full;
  full.struct_size = sizeof full;
  stoke__stats_publish(snap, &full);
  stoke__stats_step_dist(c->clock.cs, c->alloc, &full.step);
  stoke__free(c->alloc, snap);
  full.epochs_done = epochs_done;
  full.worker_processes = processes;
  full.n_workers = c->cfg.n_workers;
  full.prefetch = c->cfg.prefetch;
  stoke__outside_stats(&c->clock.outside, stoke__online_cpus(), &full);
  size_t n = STOKE__MIN(out->struct_size, sizeof full);
  full.struct_size = n;
  memcpy(out, &full, n);
  return 0;
}

uint64_t stoke_twoclock_measured_steps(const stoke_twoclock *c) {
  return c ? stoke__counter_get(&c->clock.cs->steps) : 0;
}

size_t stoke_twoclock_wait_histogram(const stoke_twoclock *c,
                                     stoke_hist_bucket *out, size_t cap) {
  return c ? stoke__hist_buckets(&c->clock.cs->wait, out, cap) : 0;
}

size_t stoke_twoclock_n_epoch_stats(const stoke_twoclock *c) {
  if (!c) return 0;
  stoke_twoclock *mc = (stoke_twoclock *)c;
  pthread_mutex_lock(&mc->mu);
  size_t n = c->epochs.n;
  pthread_mutex_unlock(&mc->mu);
  return n;
}

int stoke_twoclock_epoch_stats(const stoke_twoclock *c, size_t i,
                               stoke_epoch_stats *out) {
  if (!c || !out) return STOKE_EINVAL;
  stoke_twoclock *mc = (stoke_twoclock *)c;
  int rc = STOKE_EINVAL;
  pthread_mutex_lock(&mc->mu);
  if (i < c->epochs.n) {
    *out = c->epochs.v[i];
    rc = 0;
  }
  pthread_mutex_unlock(&mc->mu);
  return rc;
}

int stoke_twoclock_write_trace(const stoke_twoclock *c, const char *path) {
  if (!c || !path) return stoke__set_tls_error(STOKE_EINVAL, "twoclock: NULL");
  if (!c->trace)
    return stoke__set_tls_error(
        STOKE_EINVAL, "twoclock: tracing is off: create it with trace_events "
                      "> 0");
  FILE *f = fopen(path, "w");
  if (!f)
    return stoke__set_tls_error(STOKE_EIO, "cannot write trace %s: %s", path,
                                strerror(errno));
  stoke__trace *tracks[1] = {c->trace};
  const char *names[1] = {"consumer (two clocks)"};
  int rc = stoke__trace_write(f, tracks, names, 1, c->t0_ns, c->alloc);
  if (fclose(f) != 0 && rc == 0) rc = STOKE_EIO;
  if (rc != 0)
    return stoke__set_tls_error(rc, "cannot write trace %s: %s", path,
                                stoke_strerror(rc));
  return 0;
}

int stoke_twoclock_attach_stages(stoke_twoclock *c, const void *mem,
                                 int processes) {
  unsigned n = mem ? stoke__stage_block_producers(mem) : 0;
  if (!c || (mem && !n)) return STOKE_EINVAL;
  if (mem && !c->stages_base) {
    c->stages_base = stoke__calloc(c->alloc, 1, sizeof *c->stages_base);
    if (!c->stages_base) return STOKE_ENOMEM;
  }
  pthread_mutex_lock(&c->mu);
  c->stages = mem;
  c->stages_processes = processes ? n : 0;
  /* Worker processes' CPU is the job's, not the machine's other load. */
  atomic_store_explicit(&c->clock.outside.job, processes ? mem : NULL,
                        memory_order_release);
  c->stages_counting = false;
  /* Already measuring (no warm-up, or it is over): count from now. */
  if (mem && c->clock.measuring) stages_start(c);
  pthread_mutex_unlock(&c->mu);
  return 0;
}

int stoke_twoclock_depth(stoke_twoclock *c, size_t depth) {
  if (!c) return STOKE_EINVAL;
  c->depth_known = true;
  c->depth = depth;
  return 0;
}
