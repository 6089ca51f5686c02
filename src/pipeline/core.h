/* core.h — what the loader core offers its features, and nothing else.
**
** DESIGN
** The core (core.c) does the loader's own jobs: slots, chunked claims,
** delivery in or out of order, epochs and claim generations, errors and
** lifetime.  Everything else is a feature around it: the live autotuner,
** bad samples and the quarantine, the RAM cache, the packing cache, block
** read-ahead, echo, resume and the device outlet.  The features the core
** calls are reached through one table of hooks (feature.h), called at
** fixed points; the order of an epoch (the plan's or a given one) is one
** of two ops tables (stoke__order_ops, pipeline.h), and where batches go
** out (the host slots or the device's, echo wrapped around either) is
** another (stoke__outlet_ops, outlet.h).  A feature calls back into the
** core only through the services below.
**
** Lock order: l->mu, then l->stats_mu (a leaf).  The bad-sample log's
** fail_mu and the quarantine's lock are leaves never taken with mu held.
** No user callback, fill or CUDA call runs with mu held.
**
** Threads: the caller's (create, next, release, destroy; stats from any
** thread), the workers (stoke-w<N>: claim, fill, complete) and, with a
** device, the device thread (stoke-dev).  Each service says which locks
** it wants held. */
#ifndef STOKE_PIPELINE_CORE_H
#define STOKE_PIPELINE_CORE_H

#include "core/core.h"
#include "os/os.h"
#include "stats/stats.h"
#include "sampler/sampler.h"
#include "source/source.h"

typedef struct stoke__worker stoke__worker;

/* ---- errors -------------------------------------------------------------- */

/* Poison the loader with its first fatal error (mu held): later errors
** keep the first message; the consumer and every worker are woken. */
void stoke__fail_locked(stoke_loader *l, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The same with mu not held, the message as it is. */
void stoke__fail(stoke_loader *l, int code, const char *msg);
/* Batch b is failing the loader (mu held; call right before
** stoke__fail_locked): in order, the error is reported at the earliest
** failed batch, the batches before it handed out first. */
void stoke__note_failed_batch(stoke_loader *l, const stoke_batch *b);

/* ---- samples ------------------------------------------------------------- */

/* Fill the sample at position pos of b with source sample index, with the
** random stream rng (NULL: the sample's own, (seed, epoch, index)), on
** worker w's thread, mu not held; when `timed`, its stages are timed.
** Returns 0 or STOKE_ESAMPLE (the reason in w->err). */
int stoke__fill_one(stoke_loader *l, stoke__worker *w, stoke_batch *b,
                    size_t pos, size_t index, const stoke_rng *rng, bool timed);

/* ---- slots and workers --------------------------------------------------- */

/* Give a host slot back to the free list and wake the workers that can use
** it (mu held); the features' `freed` hooks run. */
void stoke__slot_free_locked(stoke_loader *l, stoke_batch *b);
/* Give host slot b back to the free list after the caller's release (the
** host outlet's release; no echo view left on it; mu not held).  The last
** one back after destroy() frees the loader. */
int stoke__release_slot(stoke_batch *b, uintptr_t stream);
/* Wake every worker waiting for work or for a slot (mu held). */
void stoke__wake_workers_locked(stoke_loader *l);

/* ---- lifetime ------------------------------------------------------------ */

/* destroy() ran and the caller holds no slot any more (mu held): whoever
** sees this frees the loader, after releasing mu. */
bool stoke__last_release_locked(const stoke_loader *l);
/* Free the loader and everything it owns (loader.c; workers joined, no
** batch lent). */
void stoke__loader_free(stoke_loader *l);

#endif /* STOKE_PIPELINE_CORE_H */
