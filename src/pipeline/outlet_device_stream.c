/* outlet_device_stream.c — the consumer's side of the device outlet: the
** stream waits on each batch's copy, releases record events, and the
** steps are timed by events on the consumer's stream.
**
** DESIGN
** The host never waits for the GPU here.  next() enqueues on the
** consumer's stream (cfg.cuda_stream), for the batch it hands out:
**
**   ready(k)   the stream has reached step k (recorded at next()'s return)
**   wait       cuStreamWaitEvent on the batch's copy (device batches)
**   start(k)   step k's work may begin
**
** and at the following next(), end(k): step k's work, as the caller
** enqueued it, ends there.  Once end(k) completes (cuEventQuery, without
** blocking, at a later next()), the step is counted:
**
**   computing   start(k) -> end(k)     the stream ran the step
**   copy wait   ready(k) -> start(k)   the stream waited for the copy:
**                                      the copy exposed
**   idle        end(k-1) -> start(k)   the stream had nothing to run
**                                      between steps (copy wait included)
**
** With the EVENTS clock these are the loader's two clocks (waiting = idle,
** computing), so that asynchronous GPU work is never timed by the host's
** wall clock around it; the host's own times are kept beside them.  Up to
** STOKE__STEP_RING - 1 steps may be in flight; a step beyond that (the
** stream far behind the host) is not timed, and counted.
**
** Release: a device slot, or a pinned host slot, is reused only after an
** event recorded at its release on the stream that read it has completed.
** For a device slot the copy stream itself waits on that event before the
** next copy into the slot (outlet_device_copy.c); a pinned slot waits in
** the device thread's reclaim queue.  Either way the releasing thread does not
** block. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/pipeline.h"
#include "pipeline/outlet_device.h"

#include <stdio.h>
#include <string.h>

#define CU_CALL(call, args)                                                   \
  do {                                                                        \
    CUresult rc_ = d->cu->call args;                                          \
    if (rc_ != 0) {                                                           \
      char e_[STOKE__ERRMSG_CAP - 32];                                        \
      stoke__cuda_errf(d->cu, e_, sizeof e_, #call, rc_);                     \
      rc = stoke__errf(err, cap, STOKE_EDEVICE, "device: %s", e_);            \
      goto out;                                                               \
    }                                                                         \
  } while (0)

/* "device: <what>: <call> failed: <name> (<code>): <text>" into err;
** returns STOKE_EDEVICE. */
static int call_failed(const stoke__dev *d, char *err, size_t cap,
                       const char *what, const char *call, CUresult cr) {
  char e[STOKE__ERRMSG_CAP - 64];
  stoke__cuda_errf(d->cu, e, sizeof e, call, cr);
  return stoke__errf(err, cap, STOKE_EDEVICE, "device: %s: %s", what, e);
}

static stoke__step_rec *rec_at(stoke__dev *d, size_t i) {
  return &d->steps[i % STOKE__STEP_RING];
}

static void trace_span(stoke__dev *d, int kind, CUevent from, CUevent to,
                       int64_t enq_ns, uint64_t batch) {
  int64_t t0, t1;
  if (!d->stream_trace ||
      !stoke__dev_event_host_ns(d, &d->stream_anchors, from, enq_ns, &t0) ||
      !stoke__dev_event_host_ns(d, &d->stream_anchors, to, enq_ns, &t1))
    return;
  stoke__trace_push(d->stream_trace, kind, t0, t1 > t0 ? t1 - t0 : 0, batch,
                    0);
}

/* Count a step whose end completed (consumer thread). */
static void account(stoke_loader *l, stoke__step_rec *r,
                    const stoke__step_rec *prev) {
  stoke__dev *d = l->outlet.dev;
  int64_t compute = 0, copy_wait = 0, idle = -1;
  bool ok = stoke__dev_elapsed_ns(d, r->start, r->end, &compute) &&
            stoke__dev_elapsed_ns(d, r->ready, r->start, &copy_wait);
  if (ok && prev && !stoke__dev_elapsed_ns(d, prev->end, r->start, &idle))
    idle = -1;
  if (!ok) return;
  /* A step with no timed step before it: its idle time is unknown beyond
  ** its own wait for the copy. */
  if (idle < copy_wait) idle = copy_wait;
  if (r->measured) {
    stoke__consumer_stats *c = l->cclock.cs;
    stoke__hist_add(&c->copy_wait, (uint64_t)copy_wait);
    stoke__hist_add(&c->gpu_idle, (uint64_t)idle);
    if (idle > STOKE__IDLE_STEP_NS) stoke__counter_add(&c->idle_steps, 1);
    if (d->clock == STOKE_CLOCK_EVENTS) {
      stoke__hist_add(&c->wait, (uint64_t)idle);
      stoke__hist_add(&c->compute, (uint64_t)compute);
    }
  }
  if (d->stream_trace) {
    if (prev) trace_span(d, STOKE__EV_GPU_IDLE, prev->end, r->ready,
                         r->ready_ns, r->number);
    trace_span(d, STOKE__EV_GPU_COPY_WAIT, r->ready, r->start, r->ready_ns,
               r->number);
    trace_span(d, STOKE__EV_GPU_STEP, r->start, r->end, r->ready_ns,
               r->number);
  }
}

/* Count the steps whose events completed, oldest first; with `block`, wait
** for each (context current). */
static int drain(stoke_loader *l, bool block, char *err, size_t cap) {
  stoke__dev *d = l->outlet.dev;
  int rc = 0;
  while (d->step_tail != d->step_head) {
    stoke__step_rec *r = rec_at(d, d->step_tail);
    if (!r->has_end) break;
    CUresult q = block ? d->cu->cuEventSynchronize(r->end)
                       : d->cu->cuEventQuery(r->end);
    if (q == STOKE__CUDA_ERROR_NOT_READY) break;
    if (q != 0) {
      char e[STOKE__ERRMSG_CAP - 32];
      stoke__cuda_errf(d->cu, e, sizeof e,
                       block ? "cuEventSynchronize" : "cuEventQuery", q);
      return stoke__errf(err, cap, STOKE_EDEVICE, "device: %s", e);
    }
    /* The record before stays intact until this one is counted: a new step
    ** is opened only while fewer than STOKE__STEP_RING - 1 are in flight. */
    const stoke__step_rec *prev =
        r->prev_ok ? rec_at(d, d->step_tail + STOKE__STEP_RING - 1) : NULL;
    account(l, r, prev);
    d->step_tail++;
  }
  return rc;
}

static int consumer_records(stoke_loader *l, bool inside, char *err,
                            size_t cap);

int stoke__dev_next_enter(stoke_loader *l, char *err, size_t cap) {
  stoke__dev *d = l->outlet.dev;
  if (!d->cu) return 0;
  int rc = stoke__dev_enter(d, err, cap);
  if (rc) return rc;
  if (d->step_open) {
    stoke__step_rec *r = rec_at(d, d->step_head - 1);
    CU_CALL(cuEventRecord, (r->end, d->consumer));
    r->has_end = true;
    d->step_open = false;
  }
  rc = consumer_records(l, true, err, cap);
  if (rc == 0) rc = drain(l, false, err, cap);
out:
  stoke__dev_leave(d);
  return rc;
}

int stoke__dev_next_lent(stoke_loader *l, stoke_batch *b, bool measured,
                         char *err, size_t cap) {
  stoke__dev *d = l->outlet.dev;
  if (!d->cu) return 0;
  int rc = stoke__dev_enter(d, err, cap);
  if (rc) return rc;
  int64_t now = stoke__now_ns();
  if (d->stream_trace) stoke__dev_anchors_tick(d, &d->stream_anchors, now);
  bool timed = d->step_head - d->step_tail < STOKE__STEP_RING - 1;
  stoke__step_rec *r = timed ? rec_at(d, d->step_head) : NULL;
  if (r) CU_CALL(cuEventRecord, (r->ready, d->consumer));
  if (b->on_device) CU_CALL(cuStreamWaitEvent, (d->consumer, b->dev->ready, 0));
  if (r) {
    CU_CALL(cuEventRecord, (r->start, d->consumer));
    r->number = b->number;
    r->ready_ns = now;
    r->measured = measured;
    r->has_end = false;
    r->prev_ok = d->last_timed;
    d->step_head++;
    d->step_open = true;
  } else if (measured) {
    stoke__counter_add(&l->cclock.cs->untimed_steps, 1);
  }
  d->last_timed = r != NULL;
out:
  stoke__dev_leave(d);
  return rc;
}

/* The per-thread default stream is the calling thread's own: work on it
** can only be fenced by that thread. */
static bool per_thread(uintptr_t s) { return s == STOKE__STREAM_PER_THREAD; }

/* mu held: b's release events are recorded; the slot goes back (a device
** slot to the device thread, whose next copy into it waits on them; a
** pinned host slot to the reclaim queue). */
static void finish_release_locked(stoke_loader *l, stoke_batch *b) {
  b->dev->deferred = false;
  if (b->on_device) {
    b->dev->release_pending = true;
    b->dev->release_seq = ++l->outlet.dev->release_seq;
    b->state = STOKE__SLOT_FREE;
    stoke__dev_kick(l);
  } else {
    stoke__dev_reclaim_locked(l, b);
  }
}

/* The consumer thread (context current): record `release` on its own
** per-thread stream for every slot lent to it and every slot another
** thread released onto that stream since, then give the latter back.
** Inside next() (`inside`), the lent slots count as covered until next()
** returns: the caller queues nothing meanwhile, and it gave any batch it
** hands to another thread away before it called, so a release from there
** finds its reads fenced already.  Without this a consumer waiting inside
** next() for a slot released onto its stream would wait forever. */
static int consumer_records(stoke_loader *l, bool inside, char *err,
                            size_t cap) {
  stoke__dev *d = l->outlet.dev;
  /* Most loaders never use stream 2: no lock taken for them (device.h). */
  if (!atomic_load_explicit(&d->per_thread, memory_order_relaxed)) return 0;
  pthread_t self = pthread_self();
  pthread_mutex_lock(&l->mu);
  uint64_t seq = ++d->entry_seq;
  size_t n = 0;
  for (size_t i = 0; i < l->outlet.n_slots; i++) {
    stoke_batch *b = &l->outlet.slots[i];
    bool mine = b->dev && (b->state == STOKE__SLOT_LENT || b->dev->deferred);
    if (mine && pthread_equal(b->dev->lent_to, self))
      d->entry_scratch[n++] = b;
  }
  pthread_mutex_unlock(&l->mu);
  CUresult cr = 0;
  for (size_t k = 0; k < n && cr == 0; k++)
    cr = d->cu->cuEventRecord(d->entry_scratch[k]->dev->release,
                              (CUstream)STOKE__STREAM_PER_THREAD);
  pthread_mutex_lock(&l->mu);
  for (size_t k = 0; k < n && cr == 0; k++) {
    stoke_batch *b = d->entry_scratch[k];
    if (b->state == STOKE__SLOT_LENT) {
      b->dev->covered_seq = seq;
    } else if (b->dev->deferred) {
      finish_release_locked(l, b);
    }
  }
  d->in_next = inside && cr == 0;
  pthread_mutex_unlock(&l->mu);
  if (cr)
    return call_failed(d, err, cap, "recording releases on the consumer's "
                       "per-thread stream", "cuEventRecord", cr);
  return 0;
}

void stoke__dev_next_leave(stoke_loader *l) {
  stoke__dev *d = l->outlet.dev;
  /* in_next is set only once per_thread is (consumer_records). */
  if (!d || !d->cu ||
      !atomic_load_explicit(&d->per_thread, memory_order_relaxed))
    return;
  pthread_mutex_lock(&l->mu);
  d->in_next = false;
  pthread_mutex_unlock(&l->mu);
}

int stoke__dev_release(stoke_loader *l, stoke_batch *b, CUstream stream) {
  stoke__dev *d = l->outlet.dev;
  uintptr_t h = (uintptr_t)stream;
  pthread_mutex_lock(&l->mu);
  if (b->state != STOKE__SLOT_LENT) {
    pthread_mutex_unlock(&l->mu);
    return 0; /* released twice: the first one counts */
  }
  b->state = STOKE__SLOT_RELEASING;
  l->n_lent--;
  /* `release` goes on the consumer's own stream when the release or a
  ** reader names the per-thread stream, else on the release's stream; the
  ** other streams that read the slot get one event each. */
  stoke__readers *rd = &b->dev->readers;
  bool ptd = per_thread(h);
  for (size_t i = 0; i < rd->n; i++) ptd |= per_thread(rd->stream[i]);
  stoke__readers others = {.n = 0};
  if (ptd && !per_thread(h)) stoke__readers_add(&others, h);
  for (size_t i = 0; i < rd->n; i++)
    if (!per_thread(rd->stream[i]) &&
        (ptd || !stoke__same_stream(rd->stream[i], h)))
      stoke__readers_add(&others, rd->stream[i]);
  rd->n = 0;
  /* Released on another thread than the consumer's: that thread records
  ** `release` on its stream, unless it did at the entry of the next() it
  ** is inside now (consumer_records).  A loader
  ** already destroyed has no consumer left: the event goes on this
  ** thread's stream, as the driver reads the handle. */
  bool foreign = ptd && !l->destroyed &&
                 !pthread_equal(pthread_self(), b->dev->lent_to);
  bool covered = foreign && d->in_next &&
                 b->dev->covered_seq == d->entry_seq;
  if (ptd) atomic_store_explicit(&d->per_thread, true, memory_order_relaxed);
  pthread_mutex_unlock(&l->mu);

  char err[STOKE__ERRMSG_CAP];
  int rc = stoke__dev_enter(d, err, sizeof err);
  if (rc == 0) {
    CUresult cr = stoke__readers_record(d->cu, rd, others.stream, others.n);
    if (cr == 0 && !foreign)
      cr = d->cu->cuEventRecord(
          b->dev->release,
          ptd ? (CUstream)STOKE__STREAM_PER_THREAD : stream);
    if (cr) {
      char what[48];
      snprintf(what, sizeof what, "releasing batch %zu", b->number);
      rc = call_failed(d, err, sizeof err, what, "cuEventRecord", cr);
    }
    stoke__dev_leave(d);
  }
  pthread_mutex_lock(&l->mu);
  if (rc) {
    /* Without its event nothing says when the GPU is done with the slot:
    ** it is not reused (freeing it for reuse could hand the next copy
    ** memory a kernel still reads), and the loader stops.  The caller's
    ** reference is gone all the same, so destroy can free it. */
    stoke__fail_locked(l, rc, "%s", err);
  } else if (foreign && !covered) {
    b->dev->deferred = true;
  } else {
    finish_release_locked(l, b);
  }
  /* destroy() ran while this batch was out: the last one back frees (and
  ** the device stage waits there for this release's event first). */
  bool last = stoke__last_release_locked(l);
  pthread_mutex_unlock(&l->mu);
  if (last) stoke__loader_free(l);
  return rc;
}

/* ---- public calls -------------------------------------------------------- */

/* A failed call poisons the loader: returns rc. */
static int poison(stoke_loader *l, int rc, const char *err) {
  if (rc) stoke__fail(l, rc, err);
  return rc;
}

int stoke_batch_wait_stream(stoke_batch *b, uintptr_t stream) {
  if (!b) return STOKE_EINVAL;
  if (!b->on_device) return 0;
  stoke_loader *l = b->owner;
  stoke__dev *d = l->outlet.dev;
  /* The stream reads the batch from now on: the release fences it too. */
  pthread_mutex_lock(&l->mu);
  int full = 0, foreign = 0;
  if (b->state == STOKE__SLOT_LENT) {
    foreign = per_thread(stream) &&
              !pthread_equal(pthread_self(), b->dev->lent_to);
    if (!foreign) full = stoke__readers_add(&b->dev->readers, stream);
    if (!foreign && !full && per_thread(stream))
      atomic_store_explicit(&d->per_thread, true, memory_order_relaxed);
  }
  if (foreign)
    snprintf(l->lastmsg, sizeof l->lastmsg,
             "batch %zu: the per-thread default stream (2) of a thread "
             "other than the one next() lent the batch to: stoke can fence "
             "only the consumer thread's; pass the stream's own handle",
             b->number);
  else if (full)
    snprintf(l->lastmsg, sizeof l->lastmsg,
             "batch %zu is read on more than %d streams", b->number,
             STOKE__READERS);
  pthread_mutex_unlock(&l->mu);
  if (foreign || full) return STOKE_EINVAL;
  char err[STOKE__ERRMSG_CAP];
  int rc = stoke__dev_enter(d, err, sizeof err);
  if (rc == 0) {
    CUresult cr = d->cu->cuStreamWaitEvent((CUstream)stream, b->dev->ready, 0);
    if (cr) {
      char what[48];
      snprintf(what, sizeof what, "waiting for batch %zu", b->number);
      rc = call_failed(d, err, sizeof err, what, "cuStreamWaitEvent", cr);
    }
    stoke__dev_leave(d);
  }
  return poison(l, rc, err);
}

int stoke_loader_device_sync(stoke_loader *l) {
  if (!l) return STOKE_EINVAL;
  stoke__dev *d = l->outlet.dev;
  if (!d || !d->cu) return 0;
  char err[STOKE__ERRMSG_CAP];
  int rc = stoke__dev_enter(d, err, sizeof err);
  if (rc == 0) {
    rc = consumer_records(l, false, err, sizeof err);
    if (rc == 0) rc = drain(l, true, err, sizeof err);
    stoke__dev_leave(d);
  }
  return poison(l, rc, err);
}

int stoke_loader_gpu_sleep(stoke_loader *l, int64_t ns) {
  if (!l || ns < 0) return STOKE_EINVAL;
  stoke__dev *d = l->outlet.dev;
  if (!d || !d->cu || !d->k_spin) {
    pthread_mutex_lock(&l->mu);
    snprintf(l->lastmsg, sizeof l->lastmsg,
             "gpu sleep needs the CUDA backend and its kernels (%s%s%s)",
             d ? d->reason : "no device asked for",
             d && d->cu && !d->k_spin ? "; " : "",
             d && d->cu && !d->k_spin ? d->kernel_reason : "");
    pthread_mutex_unlock(&l->mu);
    return STOKE_ENOTSUP;
  }
  char err[STOKE__ERRMSG_CAP];
  int rc = stoke__dev_enter(d, err, sizeof err);
  if (rc == 0) {
    unsigned long long v = (unsigned long long)ns;
    void *params[] = {&v};
    CUresult cr = d->cu->cuLaunchKernel(d->k_spin, 1, 1, 1, 1, 1, 1, 0,
                                        d->consumer, params, NULL);
    if (cr)
      rc = call_failed(d, err, sizeof err, "the gpu sleep step",
                       "cuLaunchKernel", cr);
    stoke__dev_leave(d);
  }
  return poison(l, rc, err);
}
