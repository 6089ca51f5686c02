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
** Releases: the slot goes back to the pool (stoke__release_slot: the
** host free list, or the device stage's event-guarded return) once its
** own step and every view are released.  echo_hold counts the views not
** yet released, those still to be handed out included; echo_released says
** the slot's own step is over.  Views still to be handed out when an
** epoch is ended early or the loader destroyed are given up
** (stoke__echo_cancel_locked).  On a device the slot is reused after the
** event of the last release, so every view is read on the consumer's
** stream in step order (or released on a stream that waited for the
** others).
**
** Resume: a position is a step count; step s of an epoch is view s % echo
** of batch s / echo, so a restore starts claiming at that batch and its
** group at that view (echo_first): the views before it are never handed
** out.  Locking: everything here runs under l->mu except the release,
** which takes it. */
#include "pipeline.h"

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

/* The slots next() hands out: the device's when there are any. */
static stoke_batch *out_slots(stoke_loader *l, size_t *n) {
  *n = l->dslots ? l->n_dslots : l->n_slots;
  return l->dslots ? l->dslots : l->slots;
}

int stoke__echo_alloc(stoke_loader *l) {
  if (l->echo <= 1) return 0;
  size_t n;
  stoke_batch *slots = out_slots(l, &n);
  for (size_t i = 0; i < n; i++) {
    slots[i].views = stoke__calloc(l->alloc, l->echo - 1, sizeof(stoke_batch));
    if (!slots[i].views) return STOKE_ENOMEM;
  }
  return 0;
}

void stoke__echo_free(stoke_loader *l) {
  size_t n;
  stoke_batch *slots = out_slots(l, &n);
  if (!slots) return;
  for (size_t i = 0; i < n; i++) {
    stoke__free(l->alloc, slots[i].views);
    slots[i].views = NULL;
  }
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
    size_t off = l->echo_example ? j * l->cfg.batch_size * l->field_bytes[f]
                                 : 0;
    v->data[f] = b->on_device ? (void *)((uintptr_t)b->data[f] + off)
                              : (char *)b->data[f] + off;
  }
  v->indices = b->indices;
  v->number = b->number * l->echo + j;
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

stoke_batch *stoke__echo_begin_locked(stoke_loader *l, stoke_batch *b) {
  if (l->echo <= 1) return b;
  unsigned j0 = l->echo_first;
  l->echo_first = 0;
  /* Views j0 .. echo - 1 are still to come; j0 > 0 skips the slot's own
  ** step and the views before j0 (a restored position). */
  b->echo_hold = l->echo - (j0 ? j0 : 1);
  b->echo_released = j0 > 0;
  l->echo_next = j0 + 1;
  l->echo_cur = l->echo_next < l->echo ? b : NULL;
  return j0 ? view(l, b, j0) : b;
}

stoke_batch *stoke__echo_next_locked(stoke_loader *l) {
  stoke_batch *b = l->echo_cur;
  stoke_batch *v = view(l, b, l->echo_next++);
  if (l->echo_next == l->echo) l->echo_cur = NULL;
  return v;
}

uint64_t stoke__echo_steps_locked(const stoke_loader *l) {
  uint64_t steps = (uint64_t)l->n_delivered * l->echo;
  if (l->echo_cur) steps -= l->echo - l->echo_next;
  return steps;
}

stoke_batch *stoke__echo_cancel_locked(stoke_loader *l) {
  stoke_batch *b = l->echo_cur;
  if (!b) return NULL;
  b->echo_hold -= l->echo - l->echo_next;
  l->echo_cur = NULL;
  return b->echo_hold == 0 && b->echo_released ? b : NULL;
}

int stoke__echo_release(stoke_batch *b, uintptr_t stream, int *rc) {
  stoke_loader *l = b->owner;
  *rc = 0;
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
    if (last) *rc = stoke__release_slot(p, stream);
    return 1;
  }
  if (b->state == STOKE__SLOT_LENT && (b->echo_hold > 0 || b->echo_released)) {
    /* Views of it are out or still to come: it waits for them.  (With
    ** echo_released already set, a second release of the slot itself.) */
    b->echo_released = true;
    pthread_mutex_unlock(&l->mu);
    return 1;
  }
  pthread_mutex_unlock(&l->mu);
  return 0;
}
