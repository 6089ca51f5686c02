/* outlet_device.h — the device outlet: the loader's batches in pinned
** host slots and, with CUDA, copied to device slots by the device thread
** (stoke-dev) and handed out from there.  Built on the primitives of
** src/device/ (device.h), which know nothing of the loader; the state it
** keeps per loader is stoke__dev (device.h) and the slots' stoke__slot_dev.
**
** Files: outlet_device.c (choosing the backend, memory, the ledger's
** device term), outlet_device_copy.c (the device thread),
** outlet_device_stream.c (the consumer's side: waits, releases, step
** events).  Locking as device.h says: the loader's mu protects slot states
** and the reclaim queue; no CUDA call is made with mu held. */
#ifndef STOKE_PIPELINE_OUTLET_DEVICE_H
#define STOKE_PIPELINE_OUTLET_DEVICE_H

#include "pipeline/pipeline.h"
#include "pipeline/outlet.h"
#include "device/device.h"

/* Device slots allocated (the CUDA backend), 0 before and without. */
static inline size_t stoke__dev_n_slots(const stoke__dev *d) {
  return d->dslots ? d->n_dslots : 0;
}

/* ---- outlet_device.c ----------------------------------------------------- */

/* Validate cfg's device fields (the loader's config check): the device
** text, device_prefetch, clock.  0 or STOKE_EINVAL with the TLS message. */
int stoke__dev_validate(const stoke_config *c);

/* Choose the backend for l (l->cfg, l->src set): NULL l->outlet.dev for
** the plain backend with nothing asked; else open CUDA when asked, falling
** back to plain memory with the reason when it cannot serve.  Fills
** l->outlet.field_bytes (u8 for a field normalised on the device) and the
** device terms of nothing yet allocated.  Returns 0 or an error with the
** TLS message (a CUDA call failing after the driver opened: STOKE_EDEVICE
** naming it). */
int stoke__dev_open(stoke_loader *l);
/* The device memory check against cuMemGetInfo, before any allocation:
** 0 or STOKE_EBUDGET with the TLS message. */
int stoke__dev_check_memory(stoke_loader *l);
/* Host slot buffers from the backend: pinned or the loader's allocator. */
void *stoke__dev_host_alloc(stoke_loader *l, size_t bytes);
void stoke__dev_host_free(stoke_loader *l, void *p);
/* Per-slot state, device slots, events, the reclaim queue and statistics
** (after the host slots).  0 or an error with the TLS message. */
int stoke__dev_alloc(stoke_loader *l);
/* Start the device thread if the backend needs one (through sys's thread
** start, as the workers). */
int stoke__dev_start(stoke_loader *l, const stoke__sys *sys);
/* Stop the device thread (mu not held); after stoke__loader stop. */
void stoke__dev_stop(stoke_loader *l);
/* Wait for the device work on stoke's memory, free it, release the
** context.  Safe on a partly built loader. */
void stoke__dev_close(stoke_loader *l);
/* The ledger's device terms of a configuration (outlet_device.c): slots and
** bytes, as the loader would allocate them if CUDA serves. */
void stoke__dev_ledger(const stoke_config *c, const stoke_source *src,
                       stoke_host_ledger *g);

/* ---- outlet_device_copy.c ------------------------------------------------ */

void *stoke__dev_main(void *arg);
/* mu held: wake the device thread (a batch became READY, a slot was
** freed, an epoch started, stop). */
void stoke__dev_kick(stoke_loader *l);
/* mu held: queue pinned host slot b, its release event recorded, for the
** device thread to give back once the event completed. */
void stoke__dev_reclaim_locked(stoke_loader *l, stoke_batch *b);

/* ---- outlet_device_stream.c ---------------------------------------------- */

/* At next()'s entry, before mu: the sync hook, the end of the step in
** progress on the consumer's stream, the accounting of steps whose events
** completed.  0 or an error (the loader is then poisoned by the caller). */
int stoke__dev_next_enter(stoke_loader *l, char *err, size_t cap);
/* After next() lent b (mu not held): make the consumer's stream wait for
** b's copy and open the step's events.  0 or STOKE_EDEVICE. */
int stoke__dev_next_lent(stoke_loader *l, stoke_batch *b, bool measured,
                         char *err, size_t cap);
/* next() returns, whatever it returns (mu not held): the lent slots are no
** longer fenced by its entry's records. */
void stoke__dev_next_leave(stoke_loader *l);
/* Release b after work on `stream`: for device and pinned slots.  A
** release that needs the consumer thread's per-thread stream (handle 2,
** the stream or a reader) made on another thread is handed to the
** consumer, which records it at its next next() entry or device_sync. */
int stoke__dev_release(stoke_loader *l, stoke_batch *b, CUstream stream);

#endif /* STOKE_PIPELINE_OUTLET_DEVICE_H */
