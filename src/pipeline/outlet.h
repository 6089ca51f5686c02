/* outlet.h — where the loader's batches go out: an ops table the core
** calls, never naming what is behind it.
**
** Two outlets serve the batches the workers filled in the host slots:
**   host    next() hands out the host slots themselves (outlet_host.c);
**   device  pinned host slots, and with CUDA device slots that the device
**           thread copies them into and next() hands out instead
**           (outlet_device*.c).
** Echo (echo.c) WRAPS either one: it hands out each batch the inner outlet
** lends `echo` times (the batch, then its views), and passes every other
** call through.  The loader holds one stoke__outlet, chosen at create.
**
** The slots next() hands out are l->outlet.slots (the host slots, or the
** device outlet's own), l->outlet.n_slots of them; l->n_lent of them are
** held by the caller.  Every hook NULL in a table is a no-op (the
** helpers below test it), so an outlet writes only what it needs.
**
** Threads and locks, per hook:
**   enter       next()'s entry, mu not held: finish the step before (the
**               device: its stream's events).  0 or an error (in err).
**   ready       a worker (or the consumer at W = 0), mu held: host batch
**               b is READY.  True when next() hands b out itself; false
**               when the outlet takes it elsewhere (the device thread).
**   inline_busy the consumer at W = 0, mu held: a batch filled inline is
**               still on its way out (being copied): fill no other yet.
**   pass        the consumer, mu held: b (an out slot) holds no sample; it
**               is not handed out, its place in the epoch passed.
**   lend        the consumer, mu held: b (an out slot, READY) goes to the
**               caller; returns what the caller gets (b, or echo's view).
**   pending, take  the consumer, mu held: a step of a batch lent before
**               is still to be handed out (echo), and take it.
**   lent        the consumer, mu not held: the caller is about to get b
**               (the device: its stream waits for b's copy).  0 or an
**               error (in err); then unlend runs (mu held) and next()
**               fails.
**   leave       the consumer, mu not held: next() returns (whatever it
**               returns), after enter.
**   release     the caller's release of b after work on `stream` (mu not
**               held).
**   drop        the consumer, mu held: batches of claim generation gen
**               are dropped; the outlet's own ready slots of it go back.
**   epoch_start the consumer, mu held, before the features' epoch_start:
**               `kept`: the prefetched next epoch is the one starting.
**   ahead_dropped  mu held: what was prefetched ahead is forgotten.
**   cancel      the consumer (end_epoch, destroy), mu not held: steps
**               still to be handed out never will be.
**   snap        any thread, stats_mu held: add the outlet's producer
**               statistics (the device thread's copies) to snap. */
#ifndef STOKE_PIPELINE_OUTLET_H
#define STOKE_PIPELINE_OUTLET_H

#include "core/core.h"
#include "stats/stats.h"

typedef struct stoke__outlet_ops {
  const char *name;
  /* The config knob that sets how many out slots there are, for the
  ** message of a next() with every one lent (NULL: "prefetch"). */
  const char *(*knob)(const void *st);
  int (*enter)(stoke_loader *l, void *st, char *err, size_t cap);
  bool (*ready)(stoke_loader *l, void *st, stoke_batch *b);
  bool (*inline_busy)(const stoke_loader *l, const void *st);
  void (*pass)(stoke_loader *l, void *st, stoke_batch *b);
  stoke_batch *(*lend)(stoke_loader *l, void *st, stoke_batch *b);
  bool (*pending)(const stoke_loader *l, const void *st);
  stoke_batch *(*take)(stoke_loader *l, void *st);
  int (*lent)(stoke_loader *l, void *st, stoke_batch *b, bool measured,
              char *err, size_t cap);
  void (*unlend)(stoke_loader *l, void *st, stoke_batch *b);
  void (*leave)(stoke_loader *l, void *st);
  int (*release)(stoke_loader *l, void *st, stoke_batch *b, uintptr_t stream);
  void (*drop)(stoke_loader *l, void *st, uint64_t gen);
  void (*epoch_start)(stoke_loader *l, void *st, bool kept);
  void (*ahead_dropped)(stoke_loader *l, void *st);
  void (*cancel)(stoke_loader *l, void *st);
  void (*snap)(const stoke_loader *l, const void *st, stoke__stats_snap *snap);
} stoke__outlet_ops;

typedef struct stoke__outlet {
  const stoke__outlet_ops *ops;
  void *state;                   /* the outlet's, owned by it */
  /* Set at create, frozen after; echo's wrapping changes only ops and
  ** state. */
  /* The slots next() hands out: the host slots, or the outlet's own (the
  ** device slots); l->n_lent of them are held by the caller. */
  stoke_batch *slots;
  size_t n_slots;
  /* Bytes of one sample of each field in a host slot: the source's, or u8
  ** pixels for a field the device normalises. */
  size_t field_bytes[STOKE__MAX_FIELDS];
  /* The device backend (src/device/device.h, outlet_device.h), which the
  ** device outlet's hooks and the host slots' allocation use; NULL: plain
  ** host memory. */
  struct stoke__dev *dev;
} stoke__outlet;

/* The two outlets (echo wraps one of them: echo.c). */
extern const stoke__outlet_ops stoke__host_outlet_ops;   /* outlet_host.c */
extern const stoke__outlet_ops stoke__device_outlet_ops; /* outlet_device_stream.c */

/* The host outlet's hooks, which the device outlet shares for its pinned
** host slots (outlet_host.c; mu as the table says). */
stoke_batch *stoke__host_lend_locked(stoke_loader *l, stoke_batch *b);
void stoke__host_unlend_locked(stoke_loader *l, stoke_batch *b);

/* ---- the core's calls (a NULL hook does nothing) ------------------------- */

static inline const char *stoke__outlet_knob(const stoke__outlet *o) {
  return o->ops->knob ? o->ops->knob(o->state) : "prefetch";
}
static inline int stoke__outlet_enter(const stoke__outlet *o, stoke_loader *l,
                                      char *err, size_t cap) {
  return o->ops->enter ? o->ops->enter(l, o->state, err, cap) : 0;
}
static inline void stoke__outlet_leave(const stoke__outlet *o,
                                       stoke_loader *l) {
  if (o->ops->leave) o->ops->leave(l, o->state);
}
static inline bool stoke__outlet_ready(const stoke__outlet *o, stoke_loader *l,
                                       stoke_batch *b) {
  return o->ops->ready ? o->ops->ready(l, o->state, b) : true;
}
static inline bool stoke__outlet_inline_busy(const stoke__outlet *o,
                                             const stoke_loader *l) {
  return o->ops->inline_busy && o->ops->inline_busy(l, o->state);
}
static inline void stoke__outlet_pass(const stoke__outlet *o, stoke_loader *l,
                                      stoke_batch *b) {
  o->ops->pass(l, o->state, b);
}
static inline stoke_batch *stoke__outlet_lend(const stoke__outlet *o,
                                              stoke_loader *l,
                                              stoke_batch *b) {
  return o->ops->lend(l, o->state, b);
}
static inline bool stoke__outlet_pending(const stoke__outlet *o,
                                         const stoke_loader *l) {
  return o->ops->pending && o->ops->pending(l, o->state);
}
static inline stoke_batch *stoke__outlet_take(const stoke__outlet *o,
                                              stoke_loader *l) {
  return o->ops->take(l, o->state);
}
static inline int stoke__outlet_lent(const stoke__outlet *o, stoke_loader *l,
                                     stoke_batch *b, bool measured, char *err,
                                     size_t cap) {
  return o->ops->lent ? o->ops->lent(l, o->state, b, measured, err, cap) : 0;
}
static inline void stoke__outlet_unlend(const stoke__outlet *o,
                                        stoke_loader *l, stoke_batch *b) {
  o->ops->unlend(l, o->state, b);
}
static inline int stoke__outlet_release(const stoke__outlet *o,
                                        stoke_loader *l, stoke_batch *b,
                                        uintptr_t stream) {
  return o->ops->release(l, o->state, b, stream);
}
static inline void stoke__outlet_drop(const stoke__outlet *o, stoke_loader *l,
                                      uint64_t gen) {
  if (o->ops->drop) o->ops->drop(l, o->state, gen);
}
static inline void stoke__outlet_epoch_start(const stoke__outlet *o,
                                             stoke_loader *l, bool kept) {
  if (o->ops->epoch_start) o->ops->epoch_start(l, o->state, kept);
}
static inline void stoke__outlet_ahead_dropped(const stoke__outlet *o,
                                               stoke_loader *l) {
  if (o->ops->ahead_dropped) o->ops->ahead_dropped(l, o->state);
}
static inline void stoke__outlet_cancel(const stoke__outlet *o,
                                        stoke_loader *l) {
  if (o->ops->cancel) o->ops->cancel(l, o->state);
}
static inline void stoke__outlet_snap(const stoke__outlet *o,
                                      const stoke_loader *l,
                                      stoke__stats_snap *snap) {
  if (o->ops->snap) o->ops->snap(l, o->state, snap);
}

#endif /* STOKE_PIPELINE_OUTLET_H */
