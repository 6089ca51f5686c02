/* core.c — the loader core: workers, slots and the consumer's
** next()/release().
**
** DESIGN
** What the core offers its features is core.h; the features are reached
** through their hooks (feature.h), at fixed points: may_claim when a
** worker would open a batch on a free slot, freed when a slot goes back,
** compute and step around each consumer step, epoch_end at an epoch's END.
** The epoch's order is an ops table (the plan's, plan_order.c, or the
** caller's, given_order.c), and so is where batches go out (outlet.h: the
** host slots, or the device's, echo wrapped around either).  A sample
** that fails goes to the features' fill_failed hook (the bad-sample
** policies), and a batch's last writer calls their filled hook.  The fill
** chain (the features' fill hooks: the quarantine's, the RAM cache's) is
** skipped outright when no feature has one (fill_plain).
**
** An epoch is a list of positions 0..per_rank-1 (the order's assign maps
** them to source indices); batch k covers positions [k*B, k*B + n_k).
** Workers claim *chunks* of consecutive positions under l->mu, write each
** sample straight into its place in the batch's slot (collation in place,
** no copy), and then, without the lock, subtract the chunk from the batch's
** `remaining`; the worker that takes it to zero marks the batch READY and
** wakes the consumer.  A chunk never spans two batches.
**
** Slots: K + 1 batch buffers.  Batch k takes a free slot when its first
** position is claimed (so batches are assigned in order) and keeps it until
** the caller releases it.  At most K + 1 batches exist at once: the window
** of prefetch is simply the free list, and a worker that finds no free slot
** waits on slot_cv (measured as the SLOT_WAIT stage).
**
** Order: in order (default), next() hands out batch next_deliver and waits
** for it; out of order, the lowest-numbered READY batch.  The content of a
** batch depends only on (seed, epoch, rank, world, batch number), never on
** which worker wrote which sample, nor when.
**
** Chunk size: each worker sizes its next claim from its measured cost per
** sample (about 50 us of work per claim, at most one batch), so cheap
** samples cost a lock per few hundred samples and expensive ones are spread
** over all workers one at a time.
**
** Errors: the first failing sample poisons the loader (l->error, message
** naming the sample); workers stop claiming, next() returns the error once
** and STOKE_EBADSTATE after.  In order, the batches before the failing one
** whose samples were all claimed still complete and are handed out first,
** so the error comes at the batch that holds the sample, as a consumer
** reading the epoch in order expects.  The consumer's wait is timed when a sample
** timeout is set and checks what each worker is in the middle of.
**
** W = 0: no threads; next() claims the whole batch and fills it inline. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline.h"
#include "pipeline/feature.h"
#include "pipeline/outlet.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define CHUNK_TARGET_NS 50000.0

/* Batch b failed (mu held): the error is reported at the earliest failed
** batch of the delivered epoch, and a batch with a failed chunk never
** completes, so error_batch is the lowest of them (0: at once).  Called
** for every failure, not only the first, before stoke__fail_locked. */
void stoke__note_failed_batch(stoke_loader *l, const stoke_batch *b) {
  size_t nb = b->gen == l->deliver_gen ? b->number : 0;
  if (!l->error) {
    l->error_batch = nb;
  } else if (nb < l->error_batch) {
    /* A consumer may wait for this batch: it will not come. */
    l->error_batch = nb;
    pthread_cond_broadcast(&l->ready_cv);
  }
}

void stoke__fail_locked(stoke_loader *l, int code, const char *fmt, ...) {
  if (l->error) return; /* the first error is the one reported */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(l->errmsg, sizeof l->errmsg, fmt, ap);
  va_end(ap);
  l->error = code;
  pthread_cond_broadcast(&l->ready_cv);
  stoke__wake_workers_locked(l);
}

/* ---- producing ------------------------------------------------------------ */

static size_t chunk_size(const stoke_loader *l, const stoke__worker *w,
                         size_t left) {
  size_t max = l->cfg.max_chunk ? l->cfg.max_chunk : l->cfg.batch_size;
  size_t n = 1;
  if (w->cost_ewma_ns > 0) {
    double want = CHUNK_TARGET_NS / w->cost_ewma_ns;
    n = want >= (double)max ? max : (size_t)want;
  }
  if (n < 1) n = 1;
  if (n > max) n = max;
  return n < left ? n : left;
}

/* Assign the next batch of the epoch to a free slot (mu held). */
static stoke_batch *assign_batch(stoke_loader *l) {
  stoke_batch *b = l->free_list;
  l->free_list = b->next_free;
  b->next_free = NULL;
  b->pages_released = false; /* they fault back in as it fills */
  b->pages_used = true;
  b->number = l->next_batch++;
  b->epoch = l->claim_epoch;
  b->gen = l->claim_gen;
  b->discard = false;
  l->order_ops->assign(l, b);
  atomic_store_explicit(&b->remaining, b->n, memory_order_relaxed);
  /* The bad samples' marks are reset by their `assigned` hook. */
  b->state = STOKE__SLOT_FILLING;
  return b;
}

/* With prefetch_next_epoch: may workers move on to the next epoch?  Only
** one epoch ahead of the consumer (also when it already saw the END), and
** only when epochs have batches. */
static bool may_advance(const stoke_loader *l) {
  return l->cfg.prefetch_next_epoch && l->order_ops->ahead && l->claim_open &&
         !l->order_busy && l->claim_gen == l->deliver_gen &&
         l->plan.n_batches > 0 &&
         (l->cfg.epochs == 0 || l->next_epoch < l->cfg.epochs);
}

/* Is there a batch of the claim epoch to assign (mu held)?  1 yes; 0 not
** yet (a given order may grow); -1 every batch of it is assigned. */
static int claimable(const stoke_loader *l) {
  return l->order_ops->claimable(l);
}

/* Open claims on the epoch after the one being delivered (mu held on entry
** and return).  The order is computed outside the lock: claim_open is false
** meanwhile, so nobody reads `order`, and order_busy tells start_epoch() to
** wait for it. */
static void advance_claims(stoke_loader *l) {
  uint64_t target = l->next_epoch;
  l->claim_open = false;
  l->order_busy = true;
  pthread_mutex_unlock(&l->mu);
  l->order_ops->compute(l, target);
  pthread_mutex_lock(&l->mu);
  l->order_busy = false;
  l->claim_epoch = target;
  l->claim_gen++;
  l->next_batch = 0;
  l->claim_batch = NULL;
  l->claim_open = true;
  stoke__outlet_ahead_dropped(&l->outlet, l);
  pthread_cond_broadcast(&l->ready_cv); /* start_epoch may wait for us */
  stoke__wake_workers_locked(l);
}

/* Claim the next chunk (mu held).  Returns false on stop.  *off is the
** chunk's first offset in *out_b. */
static bool claim(stoke_loader *l, stoke__worker *w, stoke_batch **out_b,
                  size_t *off, size_t *n) {
  int64_t slot_wait_start = 0;
  for (;;) {
    if (atomic_load_explicit(&l->stop, memory_order_relaxed)) return false;
    if (w->id >= l->active_workers) {
      /* Gated off by the autotuner (autotuner.c) until it wants us. */
      slot_wait_start = 0;
      pthread_cond_wait(&l->gate_cv, &l->mu);
      continue;
    }
    bool open = l->claim_open && !l->error;
    int more = open && !l->claim_batch ? claimable(l) : 1;
    if (more < 0) {
      if (may_advance(l)) {
        advance_claims(l);
        continue;
      }
      open = false; /* this epoch is all claimed */
    } else if (more == 0) {
      open = false; /* the caller has not given the next batch yet */
    }
    if (open) {
      if (!l->claim_batch) {
        if (!l->free_list || !stoke__features_may_claim(&l->features, l)) {
          /* The window is full: every slot is filling, ready or lent (or
          ** as many as the autotuner's prefetch allows). */
          if (!slot_wait_start) slot_wait_start = stoke__now_ns();
          l->slot_waiters++;
          pthread_cond_wait(&l->slot_cv, &l->mu);
          l->slot_waiters--;
          continue;
        }
        l->claim_batch = assign_batch(l);
        l->claim_pos = 0;
        stoke__features_assigned(&l->features, l, w, l->claim_batch);
      }
      stoke_batch *b = l->claim_batch;
      *out_b = b;
      *off = l->claim_pos;
      *n = chunk_size(l, w, b->n - l->claim_pos);
      l->claim_pos += *n;
      if (l->claim_pos == b->n) l->claim_batch = NULL;
      if (slot_wait_start) {
        int64_t waited = stoke__now_ns() - slot_wait_start;
        stoke__hist_add(&w->stats->stage[STOKE_STAGE_SLOT_WAIT],
                        (uint64_t)waited);
        stoke__trace_push(w->sample.trace, STOKE_STAGE_SLOT_WAIT,
                          slot_wait_start, waited, b->number, 0);
      }
      return true;
    }
    slot_wait_start = 0; /* idle between epochs is not a slot wait */
    pthread_cond_wait(&l->work_cv, &l->mu);
  }
}

static void describe_sample(const stoke_loader *l, size_t index, char *buf,
                            size_t cap) {
  buf[0] = '\0';
  if (l->src->ops->describe) {
    buf[0] = ' ';
    buf[1] = '(';
    l->src->ops->describe(l->src, index, buf + 2, cap > 4 ? cap - 4 : 0);
    strcat(buf, ")");
  }
}

/* Below this cost per sample, samples are timed per chunk: two clock reads
** per sample would be a third of the pipeline's own cost (measured: ~28 ns
** per read on a VM, against ~35 ns to copy a 128-byte sample), and their
** distribution hardly matters.  The chunk's mean is recorded per sample. */
#define CHEAP_SAMPLE_NS 2000.0

/* Point w's sample at position pos of b, source sample `index`, with the
** random stream rng (NULL: the sample's own).  What both fill paths share;
** s->batch and s->epoch are the caller's to set. */
static inline void sample_begin(const stoke_loader *l, stoke__worker *w,
                                const stoke_batch *b, size_t pos,
                                size_t index, const stoke_rng *rng) {
  stoke_sample *s = &w->sample;
  s->index = index;
  s->pos = pos;
  /* The sample's own stream is derived only if its fill draws
  ** (stoke__sample_rng): s->seed is cfg.seed and s->epoch b->epoch. */
  if (rng)
    s->rng = *rng;
  s->rng_lazy = !rng;
  /* s->copies and s->copy_step are the loader's, set once (loader.c). */
  for (size_t f = 0; f < l->src->n_fields; f++)
    s->dst[f] = (char *)b->data[f] + pos * l->outlet.field_bytes[f];
  w->err[0] = '\0'; /* a reason from an earlier sample is not this one's */
  atomic_store_explicit(&w->cur_index, index, memory_order_relaxed);
}

int stoke__fill_one(stoke_loader *l, stoke__worker *w, stoke_batch *b,
                    size_t pos, size_t index, const stoke_rng *rng,
                    bool timed) {
  stoke_sample *s = &w->sample;
  s->epoch = b->epoch;
  s->batch = b;
  sample_begin(l, w, b, pos, index, rng);
  int64_t t0 = timed ? stoke__now_ns() : 0;
  if (timed) atomic_store_explicit(&w->cur_start_ns, t0, memory_order_relaxed);
  int rc;
  /* Only a sample with its own stream may come from (or go to) the fill
  ** chain's features: a substitute's bytes depend on the one it replaces. */
  bool chain = !rng && l->features.fills;
  if (chain && stoke__features_fill_get(&l->features, l, s, w->stats)) {
    /* Served without the source (deterministic work done in an earlier
    ** epoch): timed as a read (READ counts every sample produced). */
    if (timed) {
      stoke__hist_add(&w->stats->stage[STOKE_STAGE_READ],
                      (uint64_t)(stoke__now_ns() - t0));
      stoke__counter_add(&w->stats->samples, 1);
    }
    rc = 0;
  } else {
    rc = stoke__produce(l->src, s, w->stats, timed);
    if (rc == 0 && chain) stoke__features_fill_put(&l->features, l, s);
  }
  if (timed) atomic_store_explicit(&w->cur_start_ns, 0, memory_order_relaxed);
  return rc;
}

/* stoke__fill_one's path with nothing in front of the source (no fill
** chain, the sample's own stream): the hot path of cheap samples, so no
** branch for what is off.  s->batch and s->epoch are set per chunk. */
static inline int fill_plain(stoke_loader *l, stoke__worker *w,
                             stoke_batch *b, size_t pos, size_t index,
                             bool timed) {
  stoke_sample *s = &w->sample;
  sample_begin(l, w, b, pos, index, NULL);
  if (!timed) return stoke__produce(l->src, s, w->stats, false);
  atomic_store_explicit(&w->cur_start_ns, stoke__now_ns(),
                        memory_order_relaxed);
  int rc = stoke__produce(l->src, s, w->stats, true);
  atomic_store_explicit(&w->cur_start_ns, 0, memory_order_relaxed);
  return rc;
}

/* The sample at position pos of b failed, or is known bad: the bad
** samples' feature decides by on_error (stoke_loader_create always lists
** it, stoke__bad_init, so there is no other policy here).  Returns 0 when
** the batch may go on. */
static int sample_failed(stoke_loader *l, stoke__worker *w, stoke_batch *b,
                         size_t pos, size_t index, bool known_bad,
                         bool timed) {
  int rc = STOKE_ESAMPLE;
  bool handled = stoke__features_fill_failed(&l->features, l, w, b, pos,
                                             index, known_bad, timed, &rc);
  assert(handled && "the bad samples' feature is always listed");
  (void)handled;
  return rc;
}

/* Fill samples [off, off + n) of b.  Returns 0 (bad samples skipped or
** replaced included), or STOKE_ESAMPLE / STOKE_EFAILURES after poisoning
** the loader with a message naming the sample, or STOKE_EBADSTATE on
** stop. */
static int fill_chunk(stoke_loader *l, stoke__worker *w, stoke_batch *b,
                      size_t off, size_t n) {
  stoke_sample *s = &w->sample;
  stoke__features_chunk(&l->features, l, w); /* e.g. the block read-ahead */
  bool per_chunk = n > 1 && w->cost_ewma_ns > 0 &&
                   w->cost_ewma_ns < CHEAP_SAMPLE_NS;
  int64_t t0 = stoke__now_ns(), c0 = stoke__thread_cpu_ns();
  if (per_chunk)
    atomic_store_explicit(&w->cur_start_ns, t0, memory_order_relaxed);
  size_t done = 0;
  int rc = 0;
  /* Without a fill chain (the features' fill hooks: the quarantine, the
  ** RAM cache) a sample costs no call to go through it. */
  bool plain = !l->features.fills;
  s->batch = b;
  s->epoch = b->epoch;
  for (; done < n; done++) {
    if (atomic_load_explicit(&l->stop, memory_order_relaxed)) break;
    size_t pos = off + done, index = b->indices[pos];
    if (!plain && stoke__features_fill_known_bad(&l->features, l, index)) {
      /* Known bad: not read, handled by the policy at once. */
      rc = sample_failed(l, w, b, pos, index, true, !per_chunk);
    } else {
      rc = plain ? fill_plain(l, w, b, pos, index, !per_chunk)
                 : stoke__fill_one(l, w, b, pos, index, NULL, !per_chunk);
      if (rc != 0) rc = sample_failed(l, w, b, pos, index, false, !per_chunk);
    }
    if (rc != 0) break;
  }
  atomic_store_explicit(&w->cur_start_ns, 0, memory_order_relaxed);
  int64_t dt = stoke__now_ns() - t0;
  stoke__producer_stats *ps = w->stats;
  if (per_chunk && done > 0) {
    stoke__hist_add_n(&ps->stage[STOKE_STAGE_READ], (uint64_t)dt / done,
                      done);
    stoke__trace_push(s->trace, STOKE_STAGE_READ, t0, dt, b->indices[off],
                      (uint32_t)done);
    stoke__counter_add(&ps->samples, done);
  }
  stoke__counter_add(&ps->busy_ns, (uint64_t)dt);
  stoke__counter_add(&ps->cpu_ns, (uint64_t)(stoke__thread_cpu_ns() - c0));
  stoke__counter_add(&ps->chunks, 1);
  if (done > 0) {
    double per = (double)dt / (double)done;
    w->cost_ewma_ns =
        w->cost_ewma_ns > 0 ? 0.7 * w->cost_ewma_ns + 0.3 * per : per;
  }
  if (rc != 0 || done < n) return rc ? rc : STOKE_EBADSTATE;
  return 0;
}

/* The batch's samples are all written (its last writer, or the consumer at
** W = 0): the features finish it (the bad samples close the gaps of the
** skipped ones). */
static void finish_batch(stoke_loader *l, stoke_batch *b) {
  stoke__features_filled(&l->features, l, b);
}

/* The source's whole-batch step (batch_done), by the thread that wrote the
** batch's last sample, timed as COLLATE (spread over its samples).  Returns
** 0 or STOKE_ESAMPLE after poisoning the loader. */
static int run_batch_done(stoke_loader *l, stoke__worker *w, stoke_batch *b) {
  if (!l->src->ops->batch_done) return 0;
  int64_t t0 = stoke__now_ns(), c0 = stoke__thread_cpu_ns();
  w->err[0] = '\0';
  int rc = l->src->ops->batch_done(l->src, b, w->err, sizeof w->err);
  int64_t dt = stoke__now_ns() - t0;
  stoke__producer_stats *ps = w->stats;
  if (b->n)
    stoke__hist_add_n(&ps->stage[STOKE_STAGE_COLLATE], (uint64_t)dt / b->n,
                      b->n);
  stoke__counter_add(&ps->busy_ns, (uint64_t)dt);
  stoke__counter_add(&ps->cpu_ns, (uint64_t)(stoke__thread_cpu_ns() - c0));
  stoke__trace_push(w->sample.trace, STOKE_STAGE_COLLATE, t0, dt, b->number,
                    (uint32_t)b->n);
  if (rc == 0) return 0;
  pthread_mutex_lock(&l->mu);
  stoke__note_failed_batch(l, b);
  stoke__fail_locked(l, STOKE_ESAMPLE, "batch %zu (epoch %llu) failed: %s",
                     b->number, (unsigned long long)b->epoch,
                     w->err[0] ? w->err : "no reason given");
  pthread_mutex_unlock(&l->mu);
  return STOKE_ESAMPLE;
}

/* Is b still wanted?  A batch of an epoch that was left is not (mu). */
static bool batch_wanted(stoke_loader *l, stoke_batch *b) {
  pthread_mutex_lock(&l->mu);
  bool wanted = !b->discard;
  pthread_mutex_unlock(&l->mu);
  return wanted;
}

/* Publish a filled chunk; the last one in marks the batch READY. */
static void complete_chunk(stoke_loader *l, stoke__worker *w, stoke_batch *b,
                           size_t n) {
  if (atomic_fetch_sub_explicit(&b->remaining, n, memory_order_acq_rel) != n)
    return;
  finish_batch(l, b);
  /* batch_done may call user code: no lock held.  A failure poisons the
  ** loader; the batch then never becomes READY, which no one waits for. */
  if (l->src->ops->batch_done && batch_wanted(l, b) &&
      run_batch_done(l, w, b) != 0)
    return;
  pthread_mutex_lock(&l->mu);
  if (b->discard) {
    /* A prefetched epoch that set_epoch() replaced: back to the pool. */
    b->discard = false;
    stoke__slot_free_locked(l, b);
  } else {
    b->state = STOKE__SLOT_READY;
    pthread_cond_broadcast(&l->ready_cv);
    (void)stoke__outlet_ready(&l->outlet, l, b);
  }
  pthread_mutex_unlock(&l->mu);
}

/* The source's per-thread setup, on this thread, before any claim.  A
** failure poisons the loader (STOKE_ETHREAD): the worker then only waits
** for stop. */
static bool start_thread(stoke_loader *l, stoke__worker *w) {
  if (!l->src->ops->thread_start) return true;
  w->err[0] = '\0';
  if (l->src->ops->thread_start(l->src, w->id, w->err, sizeof w->err) == 0)
    return true;
  pthread_mutex_lock(&l->mu);
  stoke__fail_locked(l, STOKE_ETHREAD, "worker %u could not start: %s",
                     w->id, w->err[0] ? w->err : "no reason given");
  pthread_mutex_unlock(&l->mu);
  return false;
}

void *stoke__worker_main(void *arg) {
  stoke__worker *w = arg;
  stoke_loader *l = w->l;
  if (l->cfg.worker_policy == STOKE_WORKER_NORMAL ||
      stoke__thread_sched_batch() == 0)
    atomic_fetch_add_explicit(&l->run.workers_policy_applied, 1,
                              memory_order_relaxed);
  bool started = start_thread(l, w);
  pthread_mutex_lock(&l->mu);
  stoke_batch *b;
  size_t off, n;
  while (claim(l, w, &b, &off, &n)) {
    pthread_mutex_unlock(&l->mu);
    if (fill_chunk(l, w, b, off, n) == 0) complete_chunk(l, w, b, n);
    pthread_mutex_lock(&l->mu);
  }
  pthread_mutex_unlock(&l->mu);
  if (started && l->src->ops->thread_stop)
    l->src->ops->thread_stop(l->src, w->id);
  return NULL;
}

/* ---- the consumer ------------------------------------------------------------ */

/* Drop the batches of claim generation gen that were not handed out (mu
** held): ready ones go back to the pool now, filling ones when their last
** sample is written.  The batch still being claimed into loses its
** unclaimed samples (nobody will claim them): they are taken off its
** remaining count, and if no chunk of it is in flight it is free now. */
static void drop_undelivered(stoke_loader *l, uint64_t gen) {
  for (size_t i = 0; i < l->n_slots; i++) {
    stoke_batch *b = &l->slots[i];
    if (b->gen != gen) continue;
    if (b->state == STOKE__SLOT_READY) {
      b->state = STOKE__SLOT_FREE;
      b->next_free = l->free_list;
      l->free_list = b;
    } else if (b->state == STOKE__SLOT_FILLING) {
      b->discard = true;
    }
  }
  /* Batches the outlet took into slots of its own go back too. */
  stoke__outlet_drop(&l->outlet, l, gen);
  stoke_batch *b = l->claim_batch;
  if (b && b->gen == gen) {
    l->claim_batch = NULL;
    size_t unclaimed = b->n - l->claim_pos;
    if (atomic_fetch_sub_explicit(&b->remaining, unclaimed,
                                  memory_order_acq_rel) == unclaimed) {
      b->discard = false;
      b->state = STOKE__SLOT_FREE;
      b->next_free = l->free_list;
      l->free_list = b;
    }
  }
  stoke__wake_workers_locked(l);
}

/* Drop what workers prefetched for an epoch that is not the next one (mu
** held). */
void stoke__discard_prefetch(stoke_loader *l) {
  drop_undelivered(l, l->claim_gen);
  stoke__outlet_ahead_dropped(&l->outlet, l);
  l->claim_batch = NULL;
}

/* Start the next epoch (mu held).  Either workers already prefetched it,
** or claims (re)open on it here.  The order is computed under the lock:
** workers have nothing to claim meanwhile, and release() waits at most this
** long once per epoch. */
static void start_epoch(stoke_loader *l, int64_t now) {
  while (l->order_busy) pthread_cond_wait(&l->ready_cv, &l->mu);
  uint64_t target = l->next_epoch;
  bool ahead = l->claim_open && l->claim_gen != l->deliver_gen;
  bool kept = ahead && l->claim_epoch == target;
  if (kept) {
    l->deliver_gen = l->claim_gen; /* keep the prefetched batches */
  } else {
    if (ahead) stoke__discard_prefetch(l);
    l->claim_open = false;
    l->order_ops->compute(l, target); /* a given one is being given */
    l->claim_epoch = target;
    l->deliver_gen = ++l->claim_gen;
    l->claim_batch = NULL;
    l->claim_pos = 0;
    l->next_batch = 0;
    l->claim_open = true;
  }
  l->epoch = target;
  l->next_epoch = target + 1;
  l->next_deliver = 0;
  l->n_delivered = 0;
  stoke__outlet_epoch_start(&l->outlet, l, kept);
  /* Features may start it elsewhere (resume: where a restored state was). */
  stoke__features_epoch_start(&l->features, l);
  l->epoch_active = true;
  uint64_t done =
      atomic_load_explicit(&l->run.epochs_done, memory_order_relaxed);
  stoke__cclock_epoch_start(&l->cclock, now, done < l->cfg.warmup_epochs);
  stoke__wake_workers_locked(l);
}

/* The batch next() may hand out now, or NULL (mu held).  *depth is how many
** batches were ready to hand out. */
static stoke_batch *deliverable(stoke_loader *l, size_t *depth) {
  /* The out slots: with a device, device slots whose copy has been
  ** issued (READY); the host slots are then the device thread's. */
  stoke_batch *slots = l->outlet.slots;
  size_t n_slots = l->outlet.n_slots;
  stoke_batch *best = NULL;
  size_t ready = 0;
  for (size_t i = 0; i < n_slots; i++) {
    stoke_batch *b = &slots[i];
    if (b->state != STOKE__SLOT_READY || b->gen != l->deliver_gen) continue;
    ready++;
    if (!best || b->number < best->number) best = b;
  }
  if (l->cfg.in_order) {
    /* Only the run of consecutive ready batches from next_deliver counts. */
    size_t run = 0;
    for (bool found = true; found;) {
      found = false;
      for (size_t i = 0; i < n_slots; i++) {
        stoke_batch *b = &slots[i];
        if (b->state == STOKE__SLOT_READY && b->gen == l->deliver_gen &&
            b->number == l->next_deliver + run) {
          run++;
          found = true;
        }
      }
    }
    ready = run;
    if (best && best->number != l->next_deliver) best = NULL;
  }
  *depth = ready;
  return best;
}

/* Look for a sample running past the timeout (mu held). */
static void check_stuck(stoke_loader *l, int64_t now) {
  int64_t limit = l->cfg.sample_timeout_ms * 1000000;
  for (unsigned i = 0; i < l->n_workers; i++) {
    stoke__worker *w = &l->workers[i];
    int64_t start =
        atomic_load_explicit(&w->cur_start_ns, memory_order_relaxed);
    if (start == 0 || now - start <= limit) continue;
    size_t index = atomic_load_explicit(&w->cur_index, memory_order_relaxed);
    char where[256];
    describe_sample(l, index, where, sizeof where);
    stoke__fail_locked(l, STOKE_ETIMEDOUT,
                       "sample %zu%s has been running for %lld ms on worker "
                       "%u, over the sample timeout of %lld ms (epoch %llu)",
                       index, where, (long long)((now - start) / 1000000), i,
                       (long long)l->cfg.sample_timeout_ms,
                       (unsigned long long)l->epoch);
    return;
  }
}

/* Wait for a batch, an error or stop (mu held), until `deadline` (0:
** none).  Returns false once the deadline has passed. */
static bool timed_wait(stoke_loader *l, int64_t deadline) {
  bool watch = l->cfg.sample_timeout_ms > 0 && l->n_workers > 0;
  if (!watch && !deadline) {
    pthread_cond_wait(&l->ready_cv, &l->mu);
    return true;
  }
  int64_t now = stoke__now_ns();
  if (deadline && now >= deadline) return false;
  int64_t t = deadline ? deadline : INT64_MAX;
  if (watch) {
    /* Wake at least every quarter timeout (at most 250 ms) to look. */
    int64_t step = STOKE__MIN(l->cfg.sample_timeout_ms * 1000000 / 4,
                              (int64_t)250000000);
    if (step < 1000000) step = 1000000;
    t = STOKE__MIN(t, now + step);
  }
  struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
  if (pthread_cond_timedwait(&l->ready_cv, &l->mu, &ts) == ETIMEDOUT &&
      watch)
    check_stuck(l, stoke__now_ns());
  return true;
}

/* W = 0: fill the next batch in the caller's thread (mu held on entry and
** on return; released while filling). */
static int fill_inline(stoke_loader *l, stoke_batch **out) {
  stoke_batch *b = assign_batch(l);
  l->claim_batch = NULL;
  stoke__features_assigned(&l->features, l, &l->workers[0], b);
  pthread_mutex_unlock(&l->mu);
  int rc = fill_chunk(l, &l->workers[0], b, 0, b->n);
  if (rc == 0) {
    finish_batch(l, b);
    rc = run_batch_done(l, &l->workers[0], b);
  }
  pthread_mutex_lock(&l->mu);
  if (rc != 0) return l->error ? l->error : rc;
  b->state = STOKE__SLOT_READY;
  *out = b;
  return 0;
}

/* Account a step's compute time (the gap since the last next() returned;
** mu held: the autotuner reads it). */
static void account_compute(stoke_loader *l, int64_t now) {
  int64_t c = stoke__cclock_compute_end(&l->cclock, now);
  if (c >= 0) stoke__features_compute(&l->features, l, c);
}

/* A host slot will come back without the caller: its copy or the
** caller's release is still completing (mu held). */
static bool slot_coming_back(const stoke_loader *l) {
  for (size_t i = 0; i < l->n_slots; i++)
    if (l->slots[i].state == STOKE__SLOT_COPYING ||
        l->slots[i].state == STOKE__SLOT_RELEASING)
      return true;
  return false;
}

static bool step_is_measured(stoke_loader *l) {
  bool warmup_ended = false;
  bool measured = stoke__cclock_measure(&l->cclock, &warmup_ended);
  /* Warm-up just ended: what producers measured so far is left out. */
  if (warmup_ended) stoke__take_baseline(l);
  return measured;
}

/* After an error, in order: is batch next_deliver, before the failing one,
** still to be handed out?  Yes when it is ready, or filling with every
** sample claimed (its chunks in flight finish; unclaimed samples would
** never be filled, since workers stop claiming at an error).  (mu) */
static bool deliver_before_error(const stoke_loader *l) {
  if (!l->cfg.in_order || l->next_deliver >= l->error_batch) return false;
  for (size_t i = 0; i < l->n_slots; i++) {
    const stoke_batch *b = &l->slots[i];
    if (b->gen != l->deliver_gen || b->number != l->next_deliver) continue;
    if (b->state == STOKE__SLOT_READY) return true;
    return b->state == STOKE__SLOT_FILLING && b != l->claim_batch &&
           !b->discard;
  }
  return false;
}

static int poisoned(stoke_loader *l) {
  if (l->error_reported) return STOKE_EBADSTATE;
  l->error_reported = true;
  return l->error;
}

/* next() with a deadline (0: none).  A call that times out leaves the
** step pending: the retry keeps its start, its depth and its warm-up
** decision, so a step waited for in several calls is measured once. */
void stoke__fail(stoke_loader *l, int code, const char *msg) {
  pthread_mutex_lock(&l->mu);
  stoke__fail_locked(l, code, "%s", msg);
  pthread_mutex_unlock(&l->mu);
}

/* Poison l with an outlet's error (mu not held); returns what next()
** returns for it. */
static int outlet_failed(stoke_loader *l, int rc, const char *msg) {
  stoke__fail(l, rc, msg);
  pthread_mutex_lock(&l->mu);
  rc = poisoned(l);
  pthread_mutex_unlock(&l->mu);
  return rc;
}

/* The epoch's END (mu not held): its record, and the packed cache
** publishes what the epoch wrote, so that the next one reads it. */
static void end_of_epoch(stoke_loader *l, int64_t now) {
  stoke__record_epoch(l, now);
  stoke__features_epoch_end(&l->features, l);
}

static int next_inside(stoke_loader *l, stoke_batch **out, int64_t deadline);

/* next() and the outlet's enter / leave around it, whatever it returns. */
static int next_until(stoke_loader *l, stoke_batch **out, int64_t deadline) {
  if (!l || !out) return STOKE_EINVAL;
  int rc = next_inside(l, out, deadline);
  stoke__outlet_leave(&l->outlet, l);
  return rc;
}

static int next_inside(stoke_loader *l, stoke_batch **out, int64_t deadline) {
  *out = NULL;
  /* The step's device work is complete before its clock stops: the
  ** caller's hook synchronises, or the stream's events will say. */
  if (l->cfg.step_sync) l->cfg.step_sync(l->cfg.step_sync_user);
  char oerr[STOKE__ERRMSG_CAP];
  int orc = stoke__outlet_enter(&l->outlet, l, oerr, sizeof oerr);
  int64_t t_enter = stoke__now_ns();
  if (orc) return outlet_failed(l, orc, oerr);
  pthread_mutex_lock(&l->mu);
  bool pending_measured = false;
  size_t pending_depth = 0;
  bool retry = stoke__cclock_resume(&l->cclock, &t_enter, &pending_measured,
                                    &pending_depth);
  account_compute(l, t_enter);
  if (l->error && (l->error_reported || !deliver_before_error(l))) {
    int rc = poisoned(l);
    pthread_mutex_unlock(&l->mu);
    return rc;
  }
  if (!l->epoch_active) start_epoch(l, t_enter);
  if (l->order_ops->epoch_done(l) && !stoke__outlet_pending(&l->outlet, l)) {
    l->epoch_active = false;
    /* An order that does not exist ahead starts from scratch. */
    if (!l->order_ops->ahead) l->claim_open = false;
    l->order_ops->reset(l);
    pthread_mutex_unlock(&l->mu);
    end_of_epoch(l, t_enter);
    return STOKE_END;
  }
  bool measured = retry ? pending_measured : step_is_measured(l);

  size_t depth = 0;
  stoke_batch *b = deliverable(l, &depth);
  size_t depth_seen = retry ? pending_depth : depth;
  size_t n_out = l->outlet.n_slots;
  int rc = 0;
  stoke_batch *out_b; /* what the caller gets: b, or a view of an echo */
  bool fresh = true;  /* the first step of its batch's group */
  if (stoke__outlet_pending(&l->outlet, l)) {
    /* Echoing: the next view of the batch being echoed is ready now. */
    out_b = stoke__outlet_take(&l->outlet, l);
    fresh = false;
    if (!retry) depth_seen = depth + 1;
    goto lent;
  }
again:
  while (!b) {
    if (l->error && (l->error_reported || !deliver_before_error(l))) {
      rc = poisoned(l);
      break;
    }
    if (l->order_ops->starved(l)) {
      /* Only the caller gives batches, and it is in here: waiting would
      ** never end. */
      snprintf(l->lastmsg, sizeof l->lastmsg,
               "next(): batch %zu of epoch %llu was never given "
               "(stoke_loader_order_append), nor the epoch's order ended "
               "(stoke_loader_order_end)",
               l->n_delivered, (unsigned long long)l->epoch);
      rc = STOKE_EINVAL;
      break;
    }
    if (l->n_lent == n_out) {
      rc = STOKE_EBUSY; /* nothing can be handed out until a release */
      break;
    }
    if (l->n_workers == 0 && !stoke__outlet_inline_busy(&l->outlet, l)) {
      if (!l->free_list && !slot_coming_back(l)) {
        rc = STOKE_EBUSY;
        break;
      }
      if (l->free_list) {
        rc = fill_inline(l, &b);
        if (rc) {
          rc = poisoned(l);
          break;
        }
        /* The outlet may take the host batch elsewhere first (the
        ** device thread copies it). */
        if (stoke__outlet_ready(&l->outlet, l, b)) break;
        b = NULL;
      }
      /* Else a copy or a release gives a slot back first. */
    }
    if (!timed_wait(l, deadline)) {
      stoke__cclock_pend(&l->cclock, t_enter, measured, depth_seen);
      rc = STOKE_AGAIN;
      break;
    }
    b = deliverable(l, &depth);
  }
  if (rc) {
    if (rc == STOKE_EBUSY)
      snprintf(l->lastmsg, sizeof l->lastmsg,
               "all %zu batch slots are held by the caller; release one "
               "before next() (or raise %s)", n_out,
               stoke__outlet_knob(&l->outlet));
    pthread_mutex_unlock(&l->mu);
    return rc;
  }
  if (b->n == 0) {
    /* on_error SKIP left this batch without a sample: it is not handed
    ** out, but its place in the epoch is passed. */
    stoke__features_delivered(&l->features, l, b);
    stoke__outlet_pass(&l->outlet, l, b);
    l->n_delivered++;
    if (l->cfg.in_order) l->next_deliver++;
    /* The epoch's end as the order says (a given order's count is not
    ** the plan's). */
    if (l->order_ops->epoch_done(l)) {
      l->epoch_active = false;
      if (!l->order_ops->ahead) l->claim_open = false;
      l->order_ops->reset(l);
      pthread_mutex_unlock(&l->mu);
      end_of_epoch(l, t_enter);
      return STOKE_END;
    }
    b = deliverable(l, &depth);
    goto again;
  }
  stoke__features_delivered(&l->features, l, b);
  l->n_delivered++;
  if (l->cfg.in_order) l->next_deliver++;
  out_b = stoke__outlet_lend(&l->outlet, l, b);
lent:
  pthread_mutex_unlock(&l->mu);

  int64_t t_ret = stoke__now_ns();
  int64_t wait = t_ret - t_enter;
  size_t number = stoke_batch_number(out_b);
  stoke__cclock *cc = &l->cclock;
  stoke__trace_push(cc->trace, STOKE__EV_DEPTH, t_enter, 0, depth_seen, 0);
  stoke__cclock_step(cc, t_enter, t_ret, number, out_b->n, measured);
  if (measured) {
    stoke__consumer_stats *c = cc->cs;
    stoke__cclock_depth(cc, depth_seen);
    if (fresh) stoke__counter_add(&c->fresh_samples, out_b->n);
    stoke__counter_add(&c->bytes, out_b->n * l->sample_bytes);
  }
  orc = stoke__outlet_lent(&l->outlet, l, out_b, measured, oerr, sizeof oerr);
  if (orc) {
    /* The caller never gets it: it is not lent (the loader stops, so no
    ** copy will go into it again), and destroy() need not wait for it. */
    pthread_mutex_lock(&l->mu);
    stoke__outlet_unlend(&l->outlet, l, out_b);
    pthread_mutex_unlock(&l->mu);
    return outlet_failed(l, orc, oerr);
  }
  stoke__features_step(&l->features, l, wait, depth_seen == 0);
  *out = out_b;
  return STOKE_OK;
}

int stoke_loader_next(stoke_loader *l, stoke_batch **out) {
  return next_until(l, out, 0);
}

int stoke_loader_next_timed(stoke_loader *l, stoke_batch **out,
                            int64_t timeout_ns) {
  if (timeout_ns < 0) return STOKE_EINVAL;
  return next_until(l, out, stoke__now_ns() + timeout_ns);
}

void stoke__wake_workers_locked(stoke_loader *l) {
  pthread_cond_broadcast(&l->work_cv);
  pthread_cond_broadcast(&l->slot_cv);
}

/* A freed slot opens one batch: at most batch_size chunks, so at most that
** many of the workers waiting for a slot can use it.  Waking all of them
** (32 workers, batches of 8) left the rest runnable for nothing: under
** SCHED_BATCH a woken worker waits for the tick to run, and that queueing
** read as other work on the cores (schedstat's run delay 11x the workers'
** CPU time), wrecking the model's prediction of the run itself.  A woken
** worker that finds the batch taken waits again; one that is not woken
** is not needed: running workers claim before they wait. */
void stoke__slot_free_locked(stoke_loader *l, stoke_batch *b) {
  b->state = STOKE__SLOT_FREE;
  b->next_free = l->free_list;
  l->free_list = b;
  pthread_cond_broadcast(&l->work_cv);
  size_t wake = l->slot_waiters < l->cfg.batch_size ? l->slot_waiters
                                                    : l->cfg.batch_size;
  for (size_t i = 0; i < wake; i++) pthread_cond_signal(&l->slot_cv);
  stoke__features_freed(&l->features, l);
  pthread_cond_broadcast(&l->ready_cv); /* W = 0 may wait for a slot */
}

bool stoke__last_release_locked(const stoke_loader *l) {
  return l->destroyed && l->n_lent == 0;
}

int stoke_batch_release_stream(stoke_batch *b, uintptr_t stream) {
  if (!b) return STOKE_EINVAL;
  stoke_loader *l = b->owner;
  return stoke__outlet_release(&l->outlet, l, b, stream);
}

int stoke__release_slot(stoke_batch *b, uintptr_t stream) {
  stoke_loader *l = b->owner;
  pthread_mutex_lock(&l->mu);
  if (b->state == STOKE__SLOT_LENT) {
    l->n_lent--;
    stoke__slot_free_locked(l, b);
  }
  /* destroy() ran while this batch was out: the last one back frees. */
  bool last = stoke__last_release_locked(l);
  pthread_mutex_unlock(&l->mu);
  if (last) stoke__loader_free(l);
  return 0;
}

void stoke_batch_release(stoke_batch *b) {
  if (!b) return;
  stoke_batch_release_stream(b, b->owner->cfg.cuda_stream);
}

int stoke_loader_end_epoch(stoke_loader *l) {
  if (!l) return STOKE_EINVAL;
  int64_t now = stoke__now_ns();
  pthread_mutex_lock(&l->mu);
  if (!l->epoch_active) {
    pthread_mutex_unlock(&l->mu);
    return 0;
  }
  account_compute(l, now);
  l->cclock.pending_enter_ns = 0; /* a step given up on is not retried */
  drop_undelivered(l, l->deliver_gen);
  /* Claims still on this epoch stop; the next start_epoch reopens them on
  ** the next one.  Claims already ahead (next-epoch prefetch) stay. */
  if (l->claim_gen == l->deliver_gen) l->claim_open = false;
  l->epoch_active = false;
  l->order_ops->reset(l); /* the rest of its order too */
  pthread_mutex_unlock(&l->mu);
  /* Steps still to be handed out of a batch (echo's views) never will. */
  stoke__outlet_cancel(&l->outlet, l);
  end_of_epoch(l, now);
  return 0;
}

int stoke_loader_set_epoch(stoke_loader *l, uint64_t epoch) {
  if (!l) return STOKE_EINVAL;
  pthread_mutex_lock(&l->mu);
  int rc = 0;
  if (l->epoch_active) {
    rc = STOKE_EINVAL;
    snprintf(l->lastmsg, sizeof l->lastmsg,
             "set_epoch(%llu) during epoch %llu: call it between epochs",
             (unsigned long long)epoch, (unsigned long long)l->epoch);
  } else
    l->next_epoch = epoch;
  pthread_mutex_unlock(&l->mu);
  return rc;
}

/* ---- batch views ---------------------------------------------------------------- */

size_t stoke_batch_size(const stoke_batch *b) { return b ? b->n : 0; }
/* A view's number is its step's (echo.c); a slot's step is the first of
** its group. */
size_t stoke_batch_number(const stoke_batch *b) {
  if (!b) return 0;
  return b->parent ? b->number : b->number * b->owner->cfg.echo;
}
uint64_t stoke_batch_epoch(const stoke_batch *b) { return b ? b->epoch : 0; }
const size_t *stoke_batch_indices(const stoke_batch *b) {
  return b ? b->indices : NULL;
}
size_t stoke_batch_n_fields(const stoke_batch *b) {
  return b ? b->owner->src->n_fields : 0;
}

int stoke_batch_field(const stoke_batch *b, size_t f, stoke_tensor *out) {
  if (!b || !out || f >= b->owner->src->n_fields) return STOKE_EINVAL;
  const stoke_source *src = b->owner->src;
  const stoke_field_desc *d = &src->fields[f];
  memset(out, 0, sizeof *out);
  out->name = d->name;
  out->data = b->data[f];
  out->dtype = d->dtype;
  out->ndim = d->ndim + 1;
  out->shape[0] = (int64_t)b->n;
  for (int i = 0; i < d->ndim; i++) out->shape[i + 1] = d->shape[i];
  out->n_bytes = b->n * src->field_bytes[f];
  return 0;
}
