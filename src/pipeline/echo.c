/* echo.c — data echoing (Choi et al. 2020): each batch the producer makes
** feeds `echo` steps of the consumer.
**
** DESIGN
** A slot that next() hands out begins a group of echo steps: the slot
** itself (step k * echo of the epoch, k its batch number), then its echo -
** 1 views, stoke_batch headers of their own over the slot's memory, handed
** out by the next echo - 1 calls (steps k * echo + j).  Nothing is copied:
**
**   BATCH    every view is the slot's data: the same batch, echo times;
**   EXAMPLE  the slot holds echo x batch_size samples: the workers fill
**            each sample's echo copies at once (stoke_sample.copies, one
**            read and decode), copy j at position pos of view j, with the
**            stream stoke__copy_rng(sample's, j); view j is copy j of
**            every sample, so each sample is in echo batches in a row,
**            each time with its own random transform.
**
** The group is a pure function of the batch (its samples and their
** streams), so what each step holds depends on (seed, epoch, rank, world,
** echo, echo_mode) only, never on W, K or timing.
**
** An outlet around an outlet (outlet.h): echo wraps the host or the
** device outlet, and its hooks pass every call through but the ones that
** hand out and release: lend starts a group, pending/take hand out its
** views, release and unlend count them.
**
** Releases: the slot goes back to the pool (the inner outlet's release:
** the host free list, or the device stage's event-guarded return) once its
** own step and every view are released.  echo_hold counts the views not
** yet released, those still to be handed out included; echo_released says
** the slot's own step is over.  Views still to be handed out when an
** epoch is ended early or the loader destroyed are given up (the cancel
** hook).  On a device the slot is reused after the
** event of the last release, so every view is read on the consumer's
** stream in step order (or released on a stream that waited for the
** others).
**
** Resume: a position is a step count; step s of an epoch is view s % echo
** of batch s / echo, so a restore starts claiming at that batch and its
** group at that view (`first`): the views before it are never handed
** out.  Locking: everything here runs under l->mu except the release and
** the cancel, which take it. */
#include "pipeline.h"
#include "pipeline/outlet.h"

#include <string.h>

const char *stoke_echo_mode_name(int mode) {
  switch (mode) {
  case STOKE_ECHO_BATCH: return "batch";
  case STOKE_ECHO_EXAMPLE: return "example";
  default: return "?";
  }
}

uint64_t stoke__echo_bytes(const stoke_config *c, size_t n_slots) {
  unsigned e = c->echo > 1 ? c->echo : 1;
  return (uint64_t)n_slots * (e - 1) * sizeof(stoke_batch);
}

/* Echo's state: the outlet it wraps and the group being handed out. */
typedef struct stoke__echo {
  stoke__outlet inner;
  stoke_batch *cur;              /* mu: the slot whose views next() hands
                                    out next, or NULL */
  unsigned next;                 /* mu: the view of cur to hand out */
  unsigned first;                /* mu: the first epoch's first group
                                    starts at this step of it (resume) */
  /* Steps per batch and the mode are read from l->cfg (frozen at create):
  ** cfg.echo > 1 here, and with STOKE_ECHO_EXAMPLE view j is copy j of
  ** every sample. */
} stoke__echo;

static const stoke__outlet_ops echo_ops;

static stoke__echo *echo_of(const stoke_loader *l) {
  return l->outlet.ops == &echo_ops ? l->outlet.state : NULL;
}

int stoke__echo_create(stoke_loader *l) {
  if (l->cfg.echo <= 1) return 0;
  stoke__echo *e = stoke__calloc(l->alloc, 1, sizeof *e);
  if (!e) return STOKE_ENOMEM;
  e->inner = l->outlet;
  l->outlet.ops = &echo_ops;
  l->outlet.state = e;
  /* The views of every slot next() hands out (after the device slots). */
  for (size_t i = 0; i < l->outlet.n_slots; i++) {
    stoke_batch *b = &l->outlet.slots[i];
    b->views = stoke__calloc(l->alloc, l->cfg.echo - 1, sizeof(stoke_batch));
    if (!b->views) return STOKE_ENOMEM;
  }
  return 0;
}

void stoke__echo_destroy(stoke_loader *l) {
  stoke__echo *e = echo_of(l);
  if (!e) return;
  for (size_t i = 0; i < l->outlet.n_slots; i++) {
    stoke__free(l->alloc, l->outlet.slots[i].views);
    l->outlet.slots[i].views = NULL;
  }
  l->outlet.ops = e->inner.ops;
  l->outlet.state = e->inner.state;
  stoke__free(l->alloc, e);
}

/* View j (1 .. echo - 1) of slot b, set up to be handed out (mu held). */
static stoke_batch *view(stoke_loader *l, stoke_batch *b, unsigned j) {
  stoke_batch *v = &b->views[j - 1];
  memset(v, 0, sizeof *v);
  v->owner = l;
  v->parent = b;
  size_t nf = l->src->n_fields;
  for (size_t f = 0; f < nf; f++) {
    /* EXAMPLE: copy j of every sample, batch_size positions further (host
    ** slots only: the loader refuses example echoing on a device). */
    size_t off = stoke__echo_copies(&l->cfg) > 1
                     ? j * l->cfg.batch_size * l->outlet.field_bytes[f]
                     : 0;
    v->data[f] = b->on_device ? (void *)((uintptr_t)b->data[f] + off)
                              : (char *)b->data[f] + off;
  }
  v->indices = b->indices;
  v->number = b->number * l->cfg.echo + j;
  v->epoch = b->epoch;
  v->gen = b->gen;
  v->n = b->n;
  atomic_init(&v->remaining, 0);
  atomic_init(&v->n_skipped,
              atomic_load_explicit(&b->n_skipped, memory_order_relaxed));
  atomic_init(&v->n_replaced,
              atomic_load_explicit(&b->n_replaced, memory_order_relaxed));
  v->state = STOKE__SLOT_LENT;
  v->on_device = b->on_device;
  v->dev = b->dev;
  return v;
}

/* Slot b is handed out: the inner outlet lends it, and its group starts
** at the step the caller gets (b, or a view after a restored position). */
static stoke_batch *echo_lend(stoke_loader *l, void *st, stoke_batch *b) {
  stoke__echo *e = st;
  b = stoke__outlet_lend(&e->inner, l, b);
  unsigned j0 = e->first;
  e->first = 0;
  /* Views j0 .. echo - 1 are still to come; j0 > 0 skips the slot's own
  ** step and the views before j0 (a restored position). */
  b->echo_hold = l->cfg.echo - (j0 ? j0 : 1);
  b->echo_released = j0 > 0;
  e->next = j0 + 1;
  e->cur = e->next < l->cfg.echo ? b : NULL;
  return j0 ? view(l, b, j0) : b;
}

static bool echo_pending(const stoke_loader *l, const void *st) {
  const stoke__echo *e = st;
  return e->cur != NULL;
}

/* The next view of the group being handed out (pending was true). */
static stoke_batch *echo_take(stoke_loader *l, void *st) {
  stoke__echo *e = st;
  stoke_batch *v = view(l, e->cur, e->next++);
  if (e->next == l->cfg.echo) e->cur = NULL;
  return v;
}

uint64_t stoke__echo_steps_locked(const stoke_loader *l) {
  const stoke__echo *e = echo_of(l);
  uint64_t steps = (uint64_t)l->n_delivered * l->cfg.echo;
  if (e && e->cur) steps -= l->cfg.echo - e->next;
  return steps;
}

void stoke__echo_start_at_locked(stoke_loader *l, unsigned view_index) {
  stoke__echo *e = echo_of(l);
  if (e) e->first = view_index;
}

/* The views of the group in progress that will not be handed out (end of
** epoch, destroy): the slot goes back if nothing else holds it. */
static void echo_cancel(stoke_loader *l, void *st) {
  stoke__echo *e = st;
  pthread_mutex_lock(&l->mu);
  stoke_batch *b = e->cur;
  if (b) {
    b->echo_hold -= l->cfg.echo - e->next;
    e->cur = NULL;
    if (b->echo_hold != 0 || !b->echo_released) b = NULL;
  }
  pthread_mutex_unlock(&l->mu);
  if (b) stoke__outlet_release(&e->inner, l, b, l->cfg.cuda_stream);
  stoke__outlet_cancel(&e->inner, l);
}

static int echo_release(stoke_loader *l, void *st, stoke_batch *b,
                        uintptr_t stream) {
  stoke__echo *e = st;
  pthread_mutex_lock(&l->mu);
  if (b->parent) {
    stoke_batch *p = b->parent;
    bool last = false;
    if (b->state ==
        STOKE__SLOT_LENT) { /* else released twice: the first counts */
      b->state = STOKE__SLOT_FREE;
      last = --p->echo_hold == 0 && p->echo_released;
    }
    pthread_mutex_unlock(&l->mu);
    return last ? stoke__outlet_release(&e->inner, l, p, stream) : 0;
  }
  if (b->state == STOKE__SLOT_LENT && (b->echo_hold > 0 || b->echo_released)) {
    /* Views of it are out or still to come: it waits for them.  (With
    ** echo_released already set, a second release of the slot itself.) */
    b->echo_released = true;
    pthread_mutex_unlock(&l->mu);
    return 0;
  }
  pthread_mutex_unlock(&l->mu);
  return stoke__outlet_release(&e->inner, l, b, stream);
}

/* The caller never gets b: a view's slot comes back with the last of the
** group out. */
static void echo_unlend(stoke_loader *l, void *st, stoke_batch *b) {
  stoke__echo *e = st;
  if (!b->parent) {
    stoke__outlet_unlend(&e->inner, l, b);
    return;
  }
  stoke_batch *p = b->parent;
  b->state = STOKE__SLOT_FREE;
  if (--p->echo_hold == 0 && p->echo_released)
    stoke__outlet_unlend(&e->inner, l, p);
}

static void echo_pass(stoke_loader *l, void *st, stoke_batch *b) {
  stoke__echo *e = st;
  e->first = 0; /* a restored group's steps went with it */
  stoke__outlet_pass(&e->inner, l, b);
}

static void echo_epoch_start(stoke_loader *l, void *st, bool kept) {
  stoke__echo *e = st;
  e->first = 0;
  e->cur = NULL;
  stoke__outlet_epoch_start(&e->inner, l, kept);
}

/* ---- the rest passes through ---------------------------------------------- */

static const char *echo_knob(const void *st) {
  const stoke__echo *e = st;
  return stoke__outlet_knob(&e->inner);
}
static int echo_enter(stoke_loader *l, void *st, char *err, size_t cap) {
  stoke__echo *e = st;
  return stoke__outlet_enter(&e->inner, l, err, cap);
}
static bool echo_ready(stoke_loader *l, void *st, stoke_batch *b) {
  stoke__echo *e = st;
  return stoke__outlet_ready(&e->inner, l, b);
}
static bool echo_inline_busy(const stoke_loader *l, const void *st) {
  const stoke__echo *e = st;
  return stoke__outlet_inline_busy(&e->inner, l);
}
static int echo_lent(stoke_loader *l, void *st, stoke_batch *b, bool measured,
                     char *err, size_t cap) {
  stoke__echo *e = st;
  return stoke__outlet_lent(&e->inner, l, b, measured, err, cap);
}
static void echo_leave(stoke_loader *l, void *st) {
  stoke__echo *e = st;
  stoke__outlet_leave(&e->inner, l);
}
static void echo_drop(stoke_loader *l, void *st, uint64_t gen) {
  stoke__echo *e = st;
  stoke__outlet_drop(&e->inner, l, gen);
}
static void echo_ahead_dropped(stoke_loader *l, void *st) {
  stoke__echo *e = st;
  stoke__outlet_ahead_dropped(&e->inner, l);
}
static void echo_snap(const stoke_loader *l, const void *st,
                      stoke__stats_snap *snap) {
  const stoke__echo *e = st;
  stoke__outlet_snap(&e->inner, l, snap);
}

static const stoke__outlet_ops echo_ops = {
    .name = "echo",
    .knob = echo_knob,
    .enter = echo_enter,
    .ready = echo_ready,
    .inline_busy = echo_inline_busy,
    .pass = echo_pass,
    .lend = echo_lend,
    .pending = echo_pending,
    .take = echo_take,
    .lent = echo_lent,
    .unlend = echo_unlend,
    .leave = echo_leave,
    .release = echo_release,
    .drop = echo_drop,
    .epoch_start = echo_epoch_start,
    .ahead_dropped = echo_ahead_dropped,
    .cancel = echo_cancel,
    .snap = echo_snap,
};
