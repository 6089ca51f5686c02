/* outlet_host.c — the host outlet (outlet.h): next() hands out the host
** slots the workers filled, and a release puts one back on the free list.
** Nothing to wait for, nothing to copy: every hook it leaves NULL is a
** no-op. */
#include "pipeline/pipeline.h"
#include "pipeline/outlet.h"

stoke_batch *stoke__host_lend_locked(stoke_loader *l, stoke_batch *b) {
  b->state = STOKE__SLOT_LENT;
  l->n_lent++;
  return b;
}

/* The caller never gets b (the loader is failing, so nothing fills it
** again): it is not lent, and destroy() need not wait for it. */
void stoke__host_unlend_locked(stoke_loader *l, stoke_batch *b) {
  b->state = STOKE__SLOT_FREE;
  l->n_lent--;
}

static void host_pass(stoke_loader *l, void *st, stoke_batch *b) {
  stoke__slot_free_locked(l, b);
}

static stoke_batch *host_lend(stoke_loader *l, void *st, stoke_batch *b) {
  return stoke__host_lend_locked(l, b);
}

static void host_unlend(stoke_loader *l, void *st, stoke_batch *b) {
  stoke__host_unlend_locked(l, b);
}

static int host_release(stoke_loader *l, void *st, stoke_batch *b,
                        uintptr_t stream) {
  return stoke__release_slot(b, stream);
}

const stoke__outlet_ops stoke__host_outlet_ops = {
    .name = "host",
    .pass = host_pass,
    .lend = host_lend,
    .unlend = host_unlend,
    .release = host_release,
};
