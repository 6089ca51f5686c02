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
  rc = drain(l, false, err, cap);
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

int stoke__dev_release(stoke_loader *l, stoke_batch *b, CUstream stream) {
  stoke__dev *d = l->outlet.dev;
  pthread_mutex_lock(&l->mu);
  if (b->state != STOKE__SLOT_LENT) {
    pthread_mutex_unlock(&l->mu);
    return 0; /* released twice: the first one counts */
  }
  b->state = STOKE__SLOT_RELEASING;
  l->n_lent--;
  pthread_mutex_unlock(&l->mu);

  char err[STOKE__ERRMSG_CAP];
  int rc = stoke__dev_enter(d, err, sizeof err);
  if (rc == 0) {
    CUresult cr = d->cu->cuEventRecord(b->dev->release, stream);
    char what[48];
    snprintf(what, sizeof what, "releasing batch %zu", b->number);
    if (cr) rc = call_failed(d, err, sizeof err, what, "cuEventRecord", cr);
    stoke__dev_leave(d);
  }
  pthread_mutex_lock(&l->mu);
  if (rc) {
    /* Without its event nothing says when the GPU is done with the slot:
    ** it is not reused (freeing it for reuse could hand the next copy
    ** memory a kernel still reads), and the loader stops.  The caller's
    ** reference is gone all the same, so destroy can free it. */
    stoke__fail_locked(l, rc, "%s", err);
  } else if (b->on_device) {
    b->dev->release_pending = true;
    b->dev->release_seq = ++l->outlet.dev->release_seq;
    b->state = STOKE__SLOT_FREE;
    stoke__dev_kick(l);
  } else {
    stoke__dev_reclaim_locked(l, b);
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
  char err[STOKE__ERRMSG_CAP], what[48];
  int rc = stoke__dev_enter(d, err, sizeof err);
  if (rc == 0) {
    CUresult cr = d->cu->cuStreamWaitEvent((CUstream)stream, b->dev->ready, 0);
    snprintf(what, sizeof what, "waiting for batch %zu", b->number);
    if (cr) rc = call_failed(d, err, sizeof err, what, "cuStreamWaitEvent", cr);
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
    rc = drain(l, true, err, sizeof err);
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
