/* outlet_device_ops.c — the device outlet's table (outlet.h): what the
** core's calls mean with pinned host slots and, with CUDA, device slots.
**
** Pinned only (no device slots): next() hands out the host slots as the
** host outlet does; only their release differs (it waits for an event on
** the caller's stream).  CUDA: next() hands out device slots, the host
** slots go to the device thread once READY, and the device thread is
** woken whenever what it copies from or into may have changed. */
#include "pipeline/pipeline.h"
#include "pipeline/outlet_device.h"

static const char *dev_knob(const void *st) {
  const stoke__dev *d = st;
  return d->dslots ? "device_prefetch" : "prefetch";
}

static int dev_enter(stoke_loader *l, void *st, char *err, size_t cap) {
  return stoke__dev_next_enter(l, err, cap);
}

static bool dev_ready(stoke_loader *l, void *st, stoke_batch *b) {
  stoke__dev *d = st;
  if (!d->dslots) return true;
  stoke__dev_kick(l); /* to be copied to the device */
  return false;
}

/* At W = 0 the consumer fills the next batch only once the one before
** came out of the device thread. */
static bool dev_inline_busy(const stoke_loader *l, const void *st) {
  const stoke__dev *d = st;
  return d->dslots && l->next_batch > l->n_delivered;
}

static void dev_pass(stoke_loader *l, void *st, stoke_batch *b) {
  stoke__dev *d = st;
  if (!d->dslots) {
    stoke__slot_free_locked(l, b);
    return;
  }
  /* A device slot: the device thread reuses it. */
  b->state = STOKE__SLOT_FREE;
  stoke__dev_kick(l);
}

static stoke_batch *dev_lend(stoke_loader *l, void *st, stoke_batch *b) {
  /* The consumer thread: the per-thread stream a release may name is its. */
  if (b->dev) b->dev->lent_to = pthread_self();
  return stoke__host_lend_locked(l, b);
}

static int dev_lent(stoke_loader *l, void *st, stoke_batch *b, bool measured,
                    char *err, size_t cap) {
  return stoke__dev_next_lent(l, b, measured, err, cap);
}

static void dev_leave(stoke_loader *l, void *st) { stoke__dev_next_leave(l); }

static void dev_unlend(stoke_loader *l, void *st, stoke_batch *b) {
  stoke__host_unlend_locked(l, b);
}

/* Device slots and pinned host slots wait for the stream's event; the
** device stage owns their way back. */
static int dev_release(stoke_loader *l, void *st, stoke_batch *b,
                       uintptr_t stream) {
  if (b->dev) return stoke__dev_release(l, b, (CUstream)stream);
  return stoke__release_slot(b, stream);
}

/* Batches already copied to the device: their device slots go back (a
** copy still running into one is ordered before any later copy into it,
** on the same stream); their host slots are reclaimed as usual. */
static void dev_drop(stoke_loader *l, void *st, uint64_t gen) {
  stoke__dev *d = st;
  if (!d->dslots) return;
  for (size_t i = 0; i < d->n_dslots; i++) {
    stoke_batch *s = &d->dslots[i];
    if (s->gen == gen && s->state == STOKE__SLOT_READY)
      s->state = STOKE__SLOT_FREE;
  }
  stoke__dev_kick(l);
}

static void dev_epoch_start(stoke_loader *l, void *st, bool kept) {
  stoke__dev *d = st;
  /* The prefetched epoch's copies count as the delivered one's. */
  d->copies_cur = kept ? d->copies_ahead : 0;
  d->copies_ahead = 0;
  if (d->dslots) stoke__dev_kick(l);
}

static void dev_ahead_dropped(stoke_loader *l, void *st) {
  stoke__dev *d = st;
  d->copies_ahead = 0;
}

/* The device thread's copies count among the producers. */
static void dev_snap(const stoke_loader *l, const void *st,
                     stoke__stats_snap *snap) {
  const stoke__dev *d = st;
  if (d->stats) stoke__stats_snap_producer(d->stats, snap);
}

const stoke__outlet_ops stoke__device_outlet_ops = {
    .name = "device",
    .knob = dev_knob,
    .enter = dev_enter,
    .ready = dev_ready,
    .inline_busy = dev_inline_busy,
    .pass = dev_pass,
    .lend = dev_lend,
    .lent = dev_lent,
    .unlend = dev_unlend,
    .leave = dev_leave,
    .release = dev_release,
    .drop = dev_drop,
    .epoch_start = dev_epoch_start,
    .ahead_dropped = dev_ahead_dropped,
    .snap = dev_snap,
};
