/* outlet_device_copy.c — the device thread (stoke-dev): host batches to
** device slots, and host slots back to the workers once the GPU is done
** with them.
**
** DESIGN
** One thread per loader, started when a pinned or CUDA backend serves.  It
** owns every CUDA call on the copy stream and sleeps on dev->cv otherwise.
** Its loop, under the loader's mu except around CUDA calls:
**
**  1. copy: the next READY host batch in order (the number after the last
**     one copied of the epoch being delivered; once that epoch is all
**     copied, of the epoch the workers prefetch) goes to a free device
**     slot.  On the copy stream: wait for the slot's release event if it
**     was used before (the consumer's stream recorded it when the caller
**     gave the slot back, and each other stream that read it an event of
**     its own: the GPU, not the host, waits for the last read),
**     the host slot's copy_start, the copies of each field (the field the
**     device normalises goes as u8 to the staging buffer and is normalised
**     from there into the slot), copy_end, then the slot's ready event.
**     The device slot becomes READY at once: next() may hand it out while
**     the copy runs, since the consumer's stream waits on `ready`.  The
**     host slot becomes COPYING and joins the reclaim queue.
**  2. reclaim: the oldest host slot of the queue waits (cuEventSynchronize,
**     a blocking-sync event) for its copy to end, or for the caller's
**     release event of a pinned slot; then it is free for the workers.
**     Its copy's time (copy_start to copy_end) is the COPY stage.
**
** Copies are issued before reclaims, to keep the copy engine fed; while
** the thread waits on the oldest copy, a newer one would only queue behind
** it on the same stream.  Copying in order means the device slots always
** hold the next batches the consumer asks for, so in-order delivery never
** waits for a batch that has no slot.
**
** Shutdown: stop is set under mu and dev->cv broadcast; a wait on an event
** ends when the GPU reaches it, so the thread always returns. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/pipeline.h"
#include "pipeline/outlet_device.h"

#include <stdio.h>
#include <string.h>

void stoke__dev_kick(stoke_loader *l) {
  pthread_cond_signal(&l->outlet.dev->cv);
}

/* The host batch to copy next and a free device slot for it (mu held);
** both taken: the host slot COPYING, the device slot FILLING (its copy
** being issued), the batch's identity copied over. */
static bool pick(stoke_loader *l, stoke_batch **out_h, stoke_batch **out_d) {
  if (l->error) return false;
  /* The free device slot released longest ago: its release event is the
  ** likeliest to have completed, so the copy into it waits least (a slot
  ** never used waits for nothing). */
  stoke_batch *d = NULL;
  for (size_t i = 0; i < stoke__dev_n_slots(l->outlet.dev); i++) {
    stoke_batch *c = &l->outlet.dev->dslots[i];
    if (c->state == STOKE__SLOT_FREE &&
        (!d || c->dev->release_seq < d->dev->release_seq))
      d = c;
  }
  if (!d) return false;
  bool cur_done = l->outlet.dev->copies_cur >= l->plan.n_batches;
  bool ahead_open = l->claim_gen != l->deliver_gen;
  stoke_batch *best = NULL;
  bool best_ahead = false;
  for (size_t i = 0; i < l->n_slots; i++) {
    stoke_batch *s = &l->slots[i];
    if (s->state != STOKE__SLOT_READY) continue;
    bool ahead;
    size_t want;
    if (s->gen == l->deliver_gen && !cur_done) {
      ahead = false;
      want = l->outlet.dev->copies_cur;
    } else if (ahead_open && cur_done && s->gen == l->claim_gen) {
      ahead = true;
      want = l->outlet.dev->copies_ahead;
    } else {
      continue;
    }
    if (l->cfg.in_order && s->number != want) continue;
    if (!best || s->number < best->number) {
      best = s;
      best_ahead = ahead;
    }
  }
  if (!best) return false;
  d->state = STOKE__SLOT_FILLING;
  d->number = best->number;
  d->epoch = best->epoch;
  d->gen = best->gen;
  d->n = best->n;
  memcpy(d->indices, best->indices, best->n * sizeof *best->indices);
  /* What on_error did to the batch (badsample.c), for stoke_batch_n_*. */
  atomic_store_explicit(&d->n_skipped,
                        atomic_load_explicit(&best->n_skipped,
                                             memory_order_relaxed),
                        memory_order_relaxed);
  atomic_store_explicit(&d->n_replaced,
                        atomic_load_explicit(&best->n_replaced,
                                             memory_order_relaxed),
                        memory_order_relaxed);
  best->state = STOKE__SLOT_COPYING;
  if (best_ahead)
    l->outlet.dev->copies_ahead++;
  else
    l->outlet.dev->copies_cur++;
  *out_h = best;
  *out_d = d;
  return true;
}

#define CU_CALL(call, args)                                                   \
  do {                                                                        \
    CUresult rc_ = cu->call args;                                             \
    if (rc_ != 0) {                                                           \
      char e_[STOKE__ERRMSG_CAP - 64];                                        \
      stoke__cuda_errf(cu, e_, sizeof e_, #call, rc_);                        \
      return stoke__errf(err, cap, STOKE_EDEVICE,                             \
                         "device: copying batch %zu of epoch %llu: %s",       \
                         h->number, (unsigned long long)h->epoch, e_);        \
    }                                                                         \
  } while (0)

/* Enqueue the copy of host batch h into device slot d (no lock held). */
static int issue(stoke_loader *l, stoke_batch *h, stoke_batch *d, char *err,
                 size_t cap) {
  stoke__dev *dv = l->outlet.dev;
  const stoke__cuda *cu = dv->cu;
  CUstream s = dv->copy_stream;
  /* Owned by this thread between pick and READY: no lock needed. */
  if (d->dev->release_pending) {
    CU_CALL(cuStreamWaitEvent, (s, d->dev->release, 0));
    /* And for the other streams that read the slot (readers.c); then
    ** forget them, so teardown does not wait on them again. */
    stoke__readers *rd = &d->dev->readers;
    for (size_t i = 0; i < rd->n_done; i++)
      CU_CALL(cuStreamWaitEvent, (s, rd->done[i], 0));
    rd->n_done = 0;
    d->dev->release_pending = false;
  }
  h->dev->copy_issue_ns = stoke__now_ns();
  CU_CALL(cuEventRecord, (h->dev->copy_start, s));
  uint64_t bytes = 0;
  for (size_t f = 0; f < l->src->n_fields; f++) {
    size_t n = h->n * l->outlet.field_bytes[f];
    if ((long)f == dv->norm_field) {
      CU_CALL(cuMemcpyHtoDAsync, (dv->staging, h->data[f], n, s));
      CUresult rc = stoke__dev_launch_norm(dv, s, dv->staging,
                                           d->dev->dptr[f], (uint32_t)n);
      if (rc != 0) {
        char e[STOKE__ERRMSG_CAP - 64];
        stoke__cuda_errf(cu, e, sizeof e, "cuLaunchKernel", rc);
        return stoke__errf(err, cap, STOKE_EDEVICE,
                           "device: normalising batch %zu of epoch %llu: %s",
                           h->number, (unsigned long long)h->epoch, e);
      }
    } else {
      CU_CALL(cuMemcpyHtoDAsync, (d->dev->dptr[f], h->data[f], n, s));
    }
    bytes += n;
  }
  CU_CALL(cuEventRecord, (h->dev->copy_end, s));
  CU_CALL(cuEventRecord, (d->dev->ready, s));
  stoke__counter_add(&dv->stats->copy_bytes, bytes);
  if (!dv->pinned) stoke__counter_add(&dv->stats->pageable_copies, 1);
  return 0;
}

/* Wait until host slot h may be reused (no lock held); time its copy. */
static int settle(stoke_loader *l, stoke_batch *h, bool copy, char *err,
                  size_t cap) {
  stoke__dev *dv = l->outlet.dev;
  const stoke__cuda *cu = dv->cu;
  CUevent e = copy ? h->dev->copy_end : h->dev->release;
  CU_CALL(cuEventSynchronize, (e));
  if (!copy) return 0;
  int64_t ns;
  if (stoke__dev_elapsed_ns(dv, h->dev->copy_start, h->dev->copy_end, &ns)) {
    stoke__hist_add(&dv->stats->stage[STOKE_STAGE_COPY], (uint64_t)ns);
    int64_t t0;
    if (dv->copy_trace &&
        stoke__dev_event_host_ns(dv, &dv->copy_anchors, h->dev->copy_start,
                                 h->dev->copy_issue_ns, &t0))
      stoke__trace_push(dv->copy_trace, STOKE_STAGE_COPY, t0, ns, h->number,
                        0);
  }
  return 0;
}

#undef CU_CALL

void *stoke__dev_main(void *arg) {
  stoke_loader *l = arg;
  stoke__dev *dv = l->outlet.dev;
  char err[STOKE__ERRMSG_CAP];
  if (stoke__dev_enter(dv, err, sizeof err) != 0) {
    pthread_mutex_lock(&l->mu);
    stoke__fail_locked(l, STOKE_EDEVICE, "device thread: %s", err);
    pthread_mutex_unlock(&l->mu);
    return NULL;
  }
  pthread_mutex_lock(&l->mu);
  while (!atomic_load_explicit(&l->stop, memory_order_relaxed)) {
    stoke_batch *h, *d;
    if (pick(l, &h, &d)) {
      pthread_mutex_unlock(&l->mu);
      if (dv->copy_trace)
        stoke__dev_anchors_tick(dv, &dv->copy_anchors, stoke__now_ns());
      int rc = issue(l, h, d, err, sizeof err);
      pthread_mutex_lock(&l->mu);
      if (rc) {
        stoke__fail_locked(l, rc, "%s", err);
        continue;
      }
      d->state = STOKE__SLOT_READY;
      dv->reclaim[(dv->reclaim_head + dv->reclaim_len++) % dv->reclaim_cap] =
          h;
      pthread_cond_broadcast(&l->ready_cv);
      continue;
    }
    if (dv->reclaim_len) {
      stoke_batch *r = dv->reclaim[dv->reclaim_head];
      bool copy = r->state == STOKE__SLOT_COPYING;
      pthread_mutex_unlock(&l->mu);
      int rc = settle(l, r, copy, err, sizeof err);
      pthread_mutex_lock(&l->mu);
      dv->reclaim_head = (dv->reclaim_head + 1) % dv->reclaim_cap;
      dv->reclaim_len--;
      if (rc)
        stoke__fail_locked(l, rc, "%s", err);
      else
        stoke__slot_free_locked(l, r);
      continue;
    }
    pthread_cond_wait(&l->outlet.dev->cv, &l->mu);
  }
  pthread_mutex_unlock(&l->mu);
  stoke__dev_leave(dv);
  return NULL;
}

/* A pinned host slot released on `stream` (outlet_device_stream.c): queue
** it for the device thread once its event is recorded (mu held). */
void stoke__dev_reclaim_locked(stoke_loader *l, stoke_batch *b) {
  stoke__dev *dv = l->outlet.dev;
  dv->reclaim[(dv->reclaim_head + dv->reclaim_len++) % dv->reclaim_cap] = b;
  stoke__dev_kick(l);
}
