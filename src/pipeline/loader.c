/* loader.c — the loader's life cycle: configuration, the memory budget,
** creation and destruction, and the statistics read side.
**
** DESIGN
** Threads: the caller's (create, next, release, destroy, any thread for
** stats) and n_workers workers named stoke-w<N>, created once and kept
** across epochs.  W = 0 creates no thread: next() fills the batch itself.
** Memory: everything is allocated here, before any thread starts, and
** checked first against cfg.mem_budget_bytes: K + 1 batch slots, the epoch
** order, per-worker statistics.  Nothing grows during an epoch except the
** list of epoch records (one small record per epoch).
** Shutdown: destroy sets stop under mu, wakes every waiter and joins every
** worker; a worker finishes the sample it is in, so a stuck user callback
** delays destroy until it returns, and nothing is detached.  Batches still
** lent stay valid: the last stoke_batch_release frees the loader. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline.h"
#include "pipeline/outlet_device.h"
#include "source/image.h"
#include "storage/cache.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void stoke_config_init(stoke_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->batch_size = 32;
  cfg->n_workers = STOKE_WORKERS_AUTO;
  cfg->prefetch = 2;
  cfg->world = 1;
  cfg->in_order = 1;
  cfg->prefetch_next_epoch = 1;
  cfg->on_error = STOKE_ON_ERROR_FAIL;
  cfg->max_failure_frac = 0.01;
  cfg->max_replace_tries = 8;
  cfg->consumer_slots = 1;
  cfg->device_prefetch = 1;
  cfg->pin_memory = -1;
  cfg->device_normalize = 1;
}

const char *stoke_worker_policy_name(int policy) {
  switch (policy) {
  case STOKE_WORKER_BATCH: return "batch";
  case STOKE_WORKER_NORMAL: return "normal";
  default: return "?";
  }
}

/* Upper bound on threads: beyond this a config is a typo, not a plan. */
#define STOKE__MAX_WORKERS 1024
#define STOKE__MAX_PREFETCH 1024

#define STOKE__MAX_ECHO 64

/* The storage and sample-cost rungs: echo, the block order, the caches. */
static int validate_rungs(const stoke_config *c) {
  if (c->echo > STOKE__MAX_ECHO)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: echo is %u, expected 1..%d (0 or 1: "
                                "off)", c->echo, STOKE__MAX_ECHO);
  if (c->echo_mode != STOKE_ECHO_BATCH && c->echo_mode != STOKE_ECHO_EXAMPLE)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: echo_mode is %d, expected "
                                "STOKE_ECHO_BATCH or STOKE_ECHO_EXAMPLE",
                                c->echo_mode);
  if (c->echo > 1 && c->echo_mode == STOKE_ECHO_EXAMPLE && c->device &&
      *c->device && strcmp(c->device, "cpu") != 0)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: example echoing on a device (%s) is "
                                "not supported; batch echoing is (echo_mode "
                                "STOKE_ECHO_BATCH)", c->device);
  if (c->shuffle < STOKE_SHUFFLE_NONE || c->shuffle > STOKE_SHUFFLE_BLOCK)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: shuffle is %d, expected 0 (none), 1 "
                                "(uniform) or 2 (block)", c->shuffle);
  if (c->shuffle_window > 65536)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: shuffle_window is %u blocks, "
                                "expected 0 (default) to 65536",
                                c->shuffle_window);
  if (c->cache_dir && !*c->cache_dir)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: cache_dir is empty (NULL for none)");
  if (c->order_given && c->echo > 1)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: echo with a given order "
                                "(order_given) is not supported");
  return 0;
}

int stoke__config_validate(const stoke_config *c) {
  if (!c)
    return stoke__set_tls_error(STOKE_EINVAL, "config: cfg is NULL");
  if (c->struct_size != sizeof *c)
    return stoke__set_tls_error(
        STOKE_EINVAL,
        "config: struct_size is %zu, expected %zu (call stoke_config_init)",
        c->struct_size, sizeof *c);
  if (!c->source)
    return stoke__set_tls_error(STOKE_EINVAL, "config: source is NULL");
  if (c->batch_size == 0)
    return stoke__set_tls_error(STOKE_EINVAL, "config: batch_size is 0");
  if (c->prefetch == 0 || c->prefetch > STOKE__MAX_PREFETCH)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: prefetch is %u, expected 1..%d",
                                c->prefetch, STOKE__MAX_PREFETCH);
  if (c->n_workers != STOKE_WORKERS_AUTO && c->n_workers > STOKE__MAX_WORKERS)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: n_workers is %u, expected 0..%d",
                                c->n_workers, STOKE__MAX_WORKERS);
  if (c->consumer_slots == 0 || c->consumer_slots > STOKE__MAX_PREFETCH)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: consumer_slots is %u, expected 1..%d",
                                c->consumer_slots, STOKE__MAX_PREFETCH);
  if (c->world == 0)
    return stoke__set_tls_error(STOKE_EINVAL, "config: world is 0");
  if (c->rank >= c->world)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: rank %u is not below world %u",
                                c->rank, c->world);
  if (c->warmup_end_ns < 0)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: warmup_end_ns is negative");
  if (c->sample_timeout_ms < 0)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: sample_timeout_ms is negative");
  if (c->worker_policy != STOKE_WORKER_BATCH &&
      c->worker_policy != STOKE_WORKER_NORMAL)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: worker_policy is %d, expected "
                                "STOKE_WORKER_BATCH or STOKE_WORKER_NORMAL",
                                c->worker_policy);
  if (c->order_given != 0 && c->order_given != 1)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: order_given is %d, expected 0 or 1",
                                c->order_given);
  if (c->on_error < STOKE_ON_ERROR_FAIL || c->on_error > STOKE_ON_ERROR_REPLACE)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: on_error is %d, expected "
                                "STOKE_ON_ERROR_FAIL, _SKIP or _REPLACE",
                                c->on_error);
  if (!(c->max_failure_frac >= 0 && c->max_failure_frac <= 1))
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: max_failure_frac is %g, expected a "
                                "share in [0, 1]", c->max_failure_frac);
  if (c->max_replace_tries == 0)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: max_replace_tries is 0, expected 1 "
                                "or more");
  if (c->quarantine_path && !*c->quarantine_path)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: quarantine_path is empty (NULL for "
                                "none)");
  if (c->publish < STOKE_PUBLISH_OFF || c->publish > STOKE_PUBLISH_ON)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: publish is %d, expected 0 "
                                "(STOKE_PUBLISH decides), 1 (on) or -1 (off)",
                                c->publish);
  int rc = validate_rungs(c);
  if (rc) return rc;
  return stoke__dev_validate(c);
}

size_t stoke__slot_field_bytes(const stoke_loader *l, size_t f) {
  return l->cfg.batch_size * l->outlet.field_bytes[f] *
         stoke__echo_copies(&l->cfg);
}

static int alloc_slots(stoke_loader *l) {
  l->slots = stoke__calloc(l->alloc, l->n_slots, sizeof *l->slots);
  if (!l->slots) return STOKE_ENOMEM;
  /* next() hands out the host slots, unless the device outlet gives it
  ** slots of its own (stoke__dev_alloc). */
  l->outlet.slots = l->slots;
  l->outlet.n_slots = l->n_slots;
  for (size_t i = 0; i < l->n_slots; i++) {
    stoke_batch *b = &l->slots[i];
    b->owner = l;
    atomic_init(&b->remaining, 0);
    b->indices = stoke__calloc(l->alloc, l->cfg.batch_size, sizeof(size_t));
    if (!b->indices) return STOKE_ENOMEM;
    for (size_t f = 0; f < l->src->n_fields; f++) {
      /* From the backend: the allocator's memory, or page-locked. */
      b->data[f] = stoke__dev_host_alloc(l, stoke__slot_field_bytes(l, f));
      if (!b->data[f])
        return l->outlet.dev && l->outlet.dev->pinned ? STOKE_EDEVICE
                                                      : STOKE_ENOMEM;
    }
    b->next_free = l->free_list;
    l->free_list = b;
  }
  return 0;
}

static int alloc_workers(stoke_loader *l) {
  size_t n = STOKE__MAX(l->n_workers, 1);
  l->workers = stoke__calloc(l->alloc, n, sizeof *l->workers);
  if (!l->workers) return STOKE_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    stoke__worker *w = &l->workers[i];
    w->l = l;
    w->id = (unsigned)i;
    w->sample.err = w->err;
    w->sample.err_cap = sizeof w->err;
    w->sample.seed = l->cfg.seed;
    w->sample.u8_form = l->outlet.dev && l->outlet.dev->norm_field >= 0;
    /* Example echoing: copy j of a sample goes to the same position of
    ** view j.  Fixed for the loader's life, so not set per sample. */
    w->sample.copies = stoke__echo_copies(&l->cfg);
    for (size_t f = 0; f < l->src->n_fields; f++)
      w->sample.copy_step[f] = l->cfg.batch_size * l->outlet.field_bytes[f];
    atomic_init(&w->cur_start_ns, 0);
    atomic_init(&w->cur_index, 0);
    w->stats = stoke__alloc_aligned(l->alloc, sizeof *w->stats);
    if (!w->stats) return STOKE_ENOMEM;
    memset(w->stats, 0, sizeof *w->stats);
    if (l->src->ops->scratch_create) {
      int rc = l->src->ops->scratch_create(l->src, l->alloc,
                                           &w->sample.scratch);
      if (rc != 0) return rc;
    }
  }
  return 0;
}

static int init_sync(stoke_loader *l) {
  pthread_condattr_t ca;
  if (pthread_condattr_init(&ca) != 0) return STOKE_ENOMEM;
  /* Timed waits (the stuck-sample watchdog) use the monotonic clock. */
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  int rc = pthread_mutex_init(&l->mu, NULL) ||
           pthread_mutex_init(&l->stats_mu, NULL) ||
           pthread_cond_init(&l->work_cv, &ca) ||
           pthread_cond_init(&l->slot_cv, &ca) ||
           pthread_cond_init(&l->ready_cv, &ca) ||
           pthread_cond_init(&l->gate_cv, &ca);
  pthread_condattr_destroy(&ca);
  return rc ? STOKE_ENOMEM : 0;
}

static void destroy_sync(stoke_loader *l) {
  pthread_mutex_destroy(&l->mu);
  pthread_mutex_destroy(&l->stats_mu);
  pthread_cond_destroy(&l->work_cv);
  pthread_cond_destroy(&l->slot_cv);
  pthread_cond_destroy(&l->ready_cv);
  pthread_cond_destroy(&l->gate_cv);
}

static void free_loader(stoke_loader *l) {
  const stoke_allocator *a = l->alloc;
  /* First: it waits for the GPU and frees the page-locked slots. */
  /* The features first: the packing cache is closed before anything a
  ** worker read through it goes. */
  stoke__features_destroy(&l->features, l);
  stoke__echo_destroy(l); /* before the device stage frees its slots */
  stoke__dev_close(l);
  if (l->slots) {
    for (size_t i = 0; i < l->n_slots; i++) {
      stoke__free(a, l->slots[i].indices);
      for (size_t f = 0; f < STOKE__MAX_FIELDS; f++)
        stoke__free_aligned(a, l->slots[i].data[f]);
    }
    stoke__free(a, l->slots);
  }
  if (l->workers) {
    for (size_t i = 0; i < STOKE__MAX(l->n_workers, 1); i++) {
      stoke__worker *w = &l->workers[i];
      stoke__free_aligned(a, w->stats);
      if (w->sample.scratch && l->src->ops->scratch_destroy)
        l->src->ops->scratch_destroy(l->src, a, w->sample.scratch);
    }
    stoke__free(a, l->workers);
  }
  stoke__tracks_free(&l->tracks, a);
  if (l->order_ops) l->order_ops->destroy(l);
  stoke__cclock_free(&l->cclock, a);
  stoke__run_stats_free(&l->run, a);
  stoke__free(a, l->cfg_text);
  stoke__source_release(l->src);
  stoke__free(a, l);
}

static void stop_workers(stoke_loader *l, unsigned started) {
  pthread_mutex_lock(&l->mu);
  atomic_store_explicit(&l->stop, true, memory_order_relaxed);
  stoke__wake_workers_locked(l);
  pthread_cond_broadcast(&l->ready_cv);
  pthread_cond_broadcast(&l->gate_cv);
  pthread_mutex_unlock(&l->mu);
  for (unsigned i = 0; i < started; i++)
    stoke__thread_join(l->workers[i].thread, l->alloc);
  stoke__dev_stop(l); /* wakes and joins the device thread */
}

int stoke_loader_create(const stoke_config *cfg, stoke_loader **out) {
  return stoke__loader_create(cfg, NULL, out);
}

int stoke__loader_create(const stoke_config *cfg, const stoke__sys *sys,
                         stoke_loader **out) {
  if (!out)
    return stoke__set_tls_error(STOKE_EINVAL, "config: out is NULL");
  *out = NULL;
  stoke__clear_tls_error();
  int rc = stoke__config_validate(cfg);
  if (rc) return rc;

  stoke_loader *l = stoke__calloc(cfg->alloc, 1, sizeof *l);
  if (!l) return stoke__set_tls_error(STOKE_ENOMEM, "loader: out of memory");
  l->cfg = *cfg;
  l->alloc = cfg->alloc;
  l->src = cfg->source;
  stoke__source_retain(l->src);
  /* The autotuner resolves AUTO to its own bound (autotuner.c). */
  if (l->cfg.n_workers == STOKE_WORKERS_AUTO && !l->cfg.autotune)
    l->cfg.n_workers = stoke__online_cpus();
  l->n_workers = l->cfg.n_workers;
  l->n_slots = (size_t)l->cfg.prefetch + l->cfg.consumer_slots;
  /* Echo's factor: steps per batch, at least 1 (0 is off). */
  l->cfg.echo = l->cfg.echo > 1 ? l->cfg.echo : 1;
  for (size_t f = 0; f < l->src->n_fields; f++)
    l->sample_bytes += l->src->field_bytes[f];
  l->plan = (stoke__plan){.n_source = l->src->n_samples,
                          .batch_size = l->cfg.batch_size,
                          .shuffle = l->cfg.shuffle,
                          .seed = l->cfg.seed,
                          .rank = l->cfg.rank,
                          .world = l->cfg.world,
                          .shard_drop_last = l->cfg.shard_drop_last,
                          .drop_last = l->cfg.drop_last};
  atomic_init(&l->stop, false);
  stoke__run_stats_init(&l->run);

  /* A given order does not shard or shuffle, and needs no plan of ours
  ** beyond its batch size (plan_init refuses a shard with no sample). */
  if (l->cfg.order_given) {
    l->plan.shuffle = 0;
    l->plan.rank = 0;
    l->plan.world = 1;
    l->plan.drop_last = 0;
  }
  rc = stoke__plan_init(&l->plan);
  /* The autotuner's most workers and deepest prefetch replace n_workers
  ** and prefetch: threads and slots are made for them, and gated. */
  if (rc == 0 && l->cfg.autotune) {
    rc = stoke__autotuner_create(l);
    l->n_workers = l->cfg.n_workers;
    l->n_slots = (size_t)l->cfg.prefetch + l->cfg.consumer_slots;
  } else {
    l->active_workers = l->n_workers;
    l->active_prefetch = l->cfg.prefetch;
  }
  /* The strings are the caller's: keep copies. */
  if (rc == 0 && stoke__config_own_strings(&l->cfg, l->alloc, &l->cfg_text))
    rc = stoke__set_tls_error(STOKE_ENOMEM, "loader: out of memory");
  /* The backend before the ledger: it decides the slots' memory. */
  if (rc == 0) rc = stoke__dev_open(l);
  /* Where batches go out: the device outlet when a backend other than
  ** plain memory serves (echo may wrap it later). */
  l->outlet.ops =
      l->outlet.dev ? &stoke__device_outlet_ops : &stoke__host_outlet_ops;
  l->outlet.state = l->outlet.dev;
  if (rc == 0) {
    stoke_host_ledger g;
    stoke__host_ledger(&l->cfg, l->n_workers, &l->plan, l->src, &g);
    stoke__loader_ledger_device(l, &g);
    l->host_bytes = g.total_bytes;
    rc = stoke__host_ledger_check(&g, l->cfg.prefetch, l->cfg.batch_size);
  }
  if (rc == 0) rc = stoke__dev_check_memory(l);
  if (rc == 0 && init_sync(l) != 0) {
    free_loader(l);
    return stoke__set_tls_error(STOKE_ENOMEM, "loader: cannot set up locks");
  }
  if (rc != 0) {
    free_loader(l);
    return rc;
  }
  /* The caller gives the order (given_order.c): no order of our own, and
  ** the source's n_samples may be a bound on indices rather than a count.
  ** Else the plan's (plan_order.c). */
  l->order_ops = l->cfg.order_given ? &stoke__given_order_ops
                                    : &stoke__plan_order_ops;
  int mem = l->order_ops->create(l);
  /* The clock in force was resolved with the backend (stoke__dev_open);
  ** init starts the consumer clock afresh. */
  int clock = l->cclock.clock;
  if (stoke__cclock_init(&l->cclock, l->alloc, l->cfg.warmup_epochs,
                         l->cfg.warmup_steps) != 0)
    mem = STOKE_ENOMEM;
  l->cclock.clock = clock;
  l->cclock.events = clock == STOKE_CLOCK_EVENTS;
  stoke__cclock_warmup_end(&l->cclock, l->cfg.warmup_end_steps,
                           l->cfg.warmup_end_ns);
  /* The metrics give whole steps' quantiles. */
  if (!mem && (l->cfg.metrics_path || l->cfg.log_jsonl_path) &&
      stoke__cclock_track_steps(&l->cclock, l->alloc) != 0)
    mem = STOKE_ENOMEM;
  if (!mem) mem = stoke__run_stats_create(&l->run, l->alloc, l->n_workers);
  if (!mem) mem = alloc_slots(l);
  if (!mem) mem = stoke__resume_create(l);
  if (!mem) mem = stoke__ramcache_create(l);
  if (!mem) mem = stoke__bad_init(l);
  if (!mem) mem = stoke__dev_alloc(l); /* may give next() its own slots */
  if (!mem) mem = stoke__echo_create(l); /* wraps the outlet */
  if (!mem) mem = alloc_workers(l);
  if (!mem) mem = stoke__readahead_create(l);
  if (!mem) mem = stoke__packcache_create(l, sys);
  if (!mem) mem = stoke__metrics_create(l);
  if (!mem) mem = stoke__tracks_create(l);
  if (!mem) mem = stoke__publish_create(l);
  if (!mem) mem = stoke__fetch_create(l);
  if (!mem && l->cfg.autotune) mem = stoke__io_autotuner_create(l);
  if (!mem) mem = stoke__rcache_stats_create(l);
  if (mem && mem != STOKE_ENOMEM) {
    /* A source's per-worker state failed for its own reason (message set). */
    destroy_sync(l);
    free_loader(l);
    return mem;
  }
  if (mem) {
    char need[32];
    stoke__format_bytes(l->host_bytes, need, sizeof need);
    destroy_sync(l);
    free_loader(l);
    return stoke__set_tls_error(STOKE_ENOMEM,
                                "loader: out of memory allocating %s", need);
  }
  l->cclock.trace = stoke__tracks_consumer(&l->tracks);

  for (unsigned i = 0; i < l->n_workers; i++) {
    char name[32];
    snprintf(name, sizeof name, "stoke-w%u", i);
    rc = stoke__thread_start(&l->workers[i].thread, l->alloc, sys, name,
                             stoke__worker_main, &l->workers[i]);
    if (rc != 0) {
      unsigned n = l->n_workers;
      stop_workers(l, i);
      destroy_sync(l);
      free_loader(l);
      return stoke__set_tls_error(rc, "loader: cannot start worker %u of %u: %s",
                                  i, n, stoke_strerror(rc));
    }
  }
  rc = stoke__dev_start(l, sys);
  if (rc != 0) {
    char msg[STOKE__ERRMSG_CAP];
    snprintf(msg, sizeof msg, "%s", stoke__tls_error());
    stop_workers(l, l->n_workers);
    destroy_sync(l);
    free_loader(l);
    return stoke__set_tls_error(rc, "%s", msg);
  }
  stoke__features_started(&l->features, l);
  *out = l;
  return 0;
}

void stoke__loader_free(stoke_loader *l) {
  destroy_sync(l);
  free_loader(l);
}

/* Batches still lent out keep their slots, and the loader's memory with
** them, until the last one is released (stoke_batch_release frees it): a
** Python array can outlive the loader object that made it. */
void stoke_loader_destroy(stoke_loader *l) {
  if (!l) return;
  /* Echo views never to be handed out hold their slot no more. */
  stoke__outlet_cancel(&l->outlet, l);
  stop_workers(l, l->n_workers);
  /* The features finish what must not wait for the last release of a
  ** lent batch (the packing cache's writer publishes what it wrote). */
  stoke__features_stop(&l->features, l);
  pthread_mutex_lock(&l->mu);
  bool lent = l->n_lent > 0;
  if (lent) l->destroyed = true;
  pthread_mutex_unlock(&l->mu);
  if (!lent) stoke__loader_free(l);
}

const char *stoke_errmsg(const stoke_loader *l) {
  if (!l) return stoke__tls_error();
  /* errmsg is written once, under mu, before error is set, and never
  ** changed after: returning it after the lock is released is safe. */
  stoke_loader *ml = (stoke_loader *)l;
  pthread_mutex_lock(&ml->mu);
  const char *m = l->error ? l->errmsg : l->lastmsg;
  pthread_mutex_unlock(&ml->mu);
  return m;
}

size_t stoke_loader_n_batches(const stoke_loader *l) {
  if (!l) return 0;
  if (l->cfg.order_given) {
    size_t b, s;
    stoke__given_counts(l, &b, &s);
    return b;
  }
  /* Steps: with echoing, each batch the producer makes is echo steps. */
  return l->plan.n_batches * l->cfg.echo;
}

size_t stoke_loader_n_samples(const stoke_loader *l) {
  if (!l) return 0;
  if (l->cfg.order_given) {
    size_t b, s;
    stoke__given_counts(l, &b, &s);
    return s;
  }
  if (!l->plan.drop_last) return l->plan.per_rank;
  return l->plan.n_batches * l->plan.batch_size;
}

void stoke_loader_config(const stoke_loader *l, stoke_config *out) {
  if (l && out) *out = l->cfg;
}

const stoke_source *stoke_loader_source(const stoke_loader *l) {
  return l ? l->src : NULL;
}

uint64_t stoke_loader_host_bytes(const stoke_loader *l) {
  return l ? l->host_bytes : 0;
}

int stoke_loader_stats(const stoke_loader *l, stoke_stats *out) {
  if (!l || !out || out->struct_size == 0) return STOKE_EINVAL;
  stoke__stats_snap *snap = stoke__calloc(l->alloc, 1, sizeof *snap);
  if (!snap) return STOKE_ENOMEM;
  stoke_loader *ml = (stoke_loader *)l; /* locks are not logically state */
  pthread_mutex_lock(&ml->stats_mu);
  for (size_t i = 0; i < STOKE__MAX(l->n_workers, 1); i++)
    stoke__stats_snap_producer(l->workers[i].stats, snap);
  stoke__outlet_snap(&l->outlet, l, snap);
  if (l->run.have_baseline) stoke__stats_snap_sub(snap, l->run.baseline);
  pthread_mutex_unlock(&ml->stats_mu);
  stoke__stats_snap_consumer(l->cclock.cs, snap);
  snap->clock_events = l->cclock.events;
  stoke_stats full;
  full.struct_size = sizeof full;
  stoke__stats_publish(snap, &full);
  stoke__stats_step_dist(l->cclock.cs, l->alloc, &full.step);
  full.threads_active = -1;
  stoke__run_stats_sched(l, &full);
  full.epochs_done =
      atomic_load_explicit(&ml->run.epochs_done, memory_order_relaxed);
  full.n_workers = l->n_workers;
  full.prefetch = l->cfg.prefetch;
  full.max_workers = l->n_workers;
  full.max_prefetch = l->cfg.prefetch;
  stoke__features_stats(&l->features, l, &full);
  full.backend = l->outlet.dev ? l->outlet.dev->backend : STOKE_BACKEND_HOST;
  full.clock = l->cclock.clock;
  full.device_prefetch =
      l->outlet.slots != l->slots ? l->cfg.device_prefetch : 0;
  full.echo = l->cfg.echo;
  full.echo_mode = l->cfg.echo_mode;
  full.worker_policy = l->cfg.worker_policy;
  full.workers_policy_applied = atomic_load_explicit(
      &ml->run.workers_policy_applied, memory_order_relaxed);
  full.image_keep_side = stoke__source_keep_side(l->src);
  stoke__outside_stats(&l->cclock.outside, stoke__online_cpus(), &full);
  stoke__free(l->alloc, snap);
  /* A caller built against an older, smaller stoke_stats gets its prefix. */
  size_t n = STOKE__MIN(out->struct_size, sizeof full);
  full.struct_size = n;
  memcpy(out, &full, n);
  return 0;
}

size_t stoke_loader_n_epoch_stats(const stoke_loader *l) {
  if (!l) return 0;
  stoke_loader *ml = (stoke_loader *)l;
  pthread_mutex_lock(&ml->stats_mu);
  size_t n = l->run.epochs.n;
  pthread_mutex_unlock(&ml->stats_mu);
  return n;
}

int stoke_loader_epoch_stats(const stoke_loader *l, size_t i,
                             stoke_epoch_stats *out) {
  if (!l || !out) return STOKE_EINVAL;
  stoke_loader *ml = (stoke_loader *)l;
  int rc = STOKE_EINVAL;
  pthread_mutex_lock(&ml->stats_mu);
  if (i < l->run.epochs.n) {
    *out = l->run.epochs.v[i];
    rc = 0;
  }
  pthread_mutex_unlock(&ml->stats_mu);
  return rc;
}

size_t stoke_loader_wait_histogram(const stoke_loader *l,
                                   stoke_hist_bucket *out, size_t cap) {
  /* Consumer stats are only written while measuring: no baseline needed. */
  return l ? stoke__hist_buckets(&l->cclock.cs->wait, out, cap) : 0;
}
