/* pipeline.h — the loader's private state, shared by loader.c (life cycle,
** configuration, statistics) and core.c (workers, next, release).
**
** Lock order: l->mu, then l->stats_mu.  stats_mu is a leaf; no user
** callback, allocation-hook call or fill runs while mu is held, except the
** allocator inside create/destroy where no other thread runs. */
#ifndef STOKE_PIPELINE_H
#define STOKE_PIPELINE_H

#include "core/core.h"
#include "os/os.h"
#include "stats/stats.h"
#include "sampler/sampler.h"
#include "source/source.h"
#include "stats/cclock.h"
#include "pipeline/feature.h"
#include "pipeline/core.h"
#include "pipeline/outlet.h"

#include <pthread.h>

typedef enum stoke__slot_state {
  STOKE__SLOT_FREE = 0, /* in the free list */
  STOKE__SLOT_FILLING,  /* assigned a batch; workers are writing samples */
  STOKE__SLOT_READY,    /* every sample written; waiting for next() (with a
                    device: for the device thread to copy it) */
  STOKE__SLOT_LENT,     /* handed to the caller until stoke_batch_release */
  /* The device stage (src/device/device.h): */
  STOKE__SLOT_COPYING,  /* host slot: its copy to a device slot is issued; free
                    once the copy's event completed */
  STOKE__SLOT_RELEASING /* released by the caller; free once the release's event
                    (recorded on the caller's stream) completed */
} stoke__slot_state;

struct stoke_batch {
  stoke_loader *owner;
  void *data[STOKE__MAX_FIELDS]; /* one buffer per field, owned, aligned */
  size_t *indices;               /* batch_size entries, owned */
  size_t number;                 /* position in its epoch */
  uint64_t epoch;
  uint64_t gen;                  /* the claim generation it belongs to */
  bool discard;                  /* FILLING for an epoch that will not be
                                    delivered: free it when filled; mu */
  size_t n;                      /* samples in this batch */
  atomic_size_t remaining;       /* samples not yet written; acq_rel: the
                                    worker that takes it to 0 sees every
                                    other worker's writes and marks READY */
  int state;                     /* stoke__slot_state; protected by mu */
  struct stoke_batch *next_free; /* protected by mu */
  /* Bad samples (badsample.c).  Set by the workers filling the batch and
  ** read after `remaining` reaches 0 (whose acq_rel orders them), reset by
  ** assign_batch under mu. */
  uint8_t *skip;                 /* SKIP: batch_size flags, 1 = the sample
                                    at that position is left out; owned */
  atomic_size_t n_skipped, n_replaced;
  bool on_device;                /* a device slot: data[] are CUdeviceptr */
  bool pages_released;           /* mu: FREE and its pages given back to
                                    the OS (the autotuner's trim); cleared
                                    when it is assigned */
  bool pages_used;               /* mu: filled since create or since its
                                    pages were last given back (what a
                                    release counts: an allocator may have
                                    touched an unused slot's first page,
                                    ASan's fill does, but not the rest) */
  struct stoke__slot_dev *dev;   /* device-stage state, or NULL */
  /* Data echoing (echo.c).  A slot handed out feeds echo steps: itself,
  ** then its echo - 1 views, handed out in a row; it goes back to the pool
  ** once it and every view are released (or will never be handed out). */
  struct stoke_batch *views;     /* echo - 1 views (owned), or NULL */
  struct stoke_batch *parent;    /* a view: its slot; NULL for a slot */
  unsigned echo_hold;            /* mu: views not yet released, handed out
                                    or still to be */
  bool echo_released;            /* mu: the slot's own step is over
                                    (released, or skipped by a restore) */
};

typedef struct stoke__worker {
  stoke_loader *l;
  unsigned id;
  stoke__thread *thread;
  stoke__producer_stats *stats;  /* written by this worker only */
  stoke_sample sample;           /* reused for every sample */
  char err[STOKE__ERRMSG_CAP];
  /* What the worker is producing, for the stuck-sample watchdog.
  ** atomic, relaxed: read only to write a message. */
  atomic_int_least64_t cur_start_ns; /* 0 when not inside a fill */
  atomic_size_t cur_index;
  double cost_ewma_ns;           /* per sample; sizes the next claim */
} stoke__worker;

/* Caller-given order (cfg.order_given; given_order.c).  The batches given to the
** epoch in progress (or, between epochs, to the next one) that workers have
** not claimed yet: batch k (base <= k < n) has b[k - base].len samples at
** idx[b[k - base].off...].  Protected by the loader's mu. */
typedef struct stoke__given_batch {
  size_t off, len;
} stoke__given_batch;

typedef struct stoke__given {
  size_t *idx, n_idx, cap_idx;
  stoke__given_batch *b;  /* batches base..n-1 */
  size_t cap_b;
  size_t base;            /* batch number of entry 0 */
  size_t n;               /* batches given to the epoch so far */
  size_t n_samples;       /* samples given to the epoch so far */
  bool ended;             /* stoke_loader_order_end: no more batches */
  size_t last_batches, last_samples; /* of the last finished epoch */
} stoke__given;

/* The order of an epoch, one of two (swappable at create): the plan's
** (the sampler's permutation, block order included; plan_order.c) or the
** one the caller gives (cfg.order_given; given_order.c).  Every call but
** `compute`, `create` and `destroy` is made with the loader's mu held. */
typedef struct stoke__order_ops {
  /* At create (no other thread): allocate l->order_state.  0 or
  ** STOKE_ENOMEM; destroy frees what there is (also after a failed
  ** create) and sets it back to NULL. */
  int (*create)(stoke_loader *l);
  void (*destroy)(stoke_loader *l);
  /* Compute epoch `epoch`'s order; claims are not open meanwhile, so mu
  ** need not be held (advance_claims computes it without). */
  void (*compute)(stoke_loader *l, uint64_t epoch);
  /* 1: batch l->next_batch can be assigned; 0: not yet (more may come);
  ** -1: the epoch's order ended and every batch of it is assigned. */
  int (*claimable)(const stoke_loader *l);
  /* Fill b->n and b->indices for batch b->number (claimable was 1). */
  void (*assign)(stoke_loader *l, stoke_batch *b);
  /* Every batch of the epoch has been handed out (or passed over). */
  bool (*epoch_done)(const stoke_loader *l);
  /* The consumer would wait for a batch nobody will ever give. */
  bool (*starved)(const stoke_loader *l);
  /* The epoch ended (its END, or end_epoch): forget its order. */
  void (*reset)(stoke_loader *l);
  /* The next epoch's order exists before it starts, so workers may
  ** prefetch it (prefetch_next_epoch); a given one does not. */
  bool ahead;
} stoke__order_ops;

extern const stoke__order_ops stoke__plan_order_ops;  /* plan_order.c */
extern const stoke__order_ops stoke__given_order_ops; /* given_order.c */

/* The trace (tracks.c): cfg.trace_events > 0 makes one track per thread,
** each with its own lock. */
typedef struct stoke__tracks {
  stoke__trace *v;               /* n tracks, or NULL: tracing is off */
  size_t n;
  int64_t t0_ns;                 /* creation: trace timestamps start here */
} stoke__tracks;

/* What the loader measures besides the workers' and the consumer's
** counters (run_stats.c). */
typedef struct stoke__run_stats {
  /* Protected by the loader's stats_mu. */
  stoke__stats_snap *baseline;   /* producers' totals when warm-up ended */
  bool have_baseline;
  stoke__epoch_log epochs;
  /* The stoke-w* threads when measuring started (schedstat.c), for the
  ** window's scheduler statistics. */
  stoke__sched_thread *sched_base;
  size_t n_sched_base, cap_sched;
  atomic_uint_least64_t epochs_done; /* relaxed: stats only */
  /* Workers the OS put under cfg.worker_policy; relaxed: stats only. */
  atomic_uint workers_policy_applied;
} stoke__run_stats;

/* The loader: core state only.  Every field, and why the core holds it:
**   cfg, alloc, src, plan      what to load, resolved at create; every job
**                              of the core reads them
**   n_slots, slots, free_list  the host slots and the pool the claims take
**                              them from
**   sample_bytes, host_bytes   a step's bytes (the consumer's counter) and
**                              the ledger's total (stoke_loader_host_bytes)
**   outlet                     where batches go out, with the out slots
**                              next() scans and a host slot's layout
**   cfg_text                   the block behind cfg's strings (cfg is ours)
**   mu, work_cv, slot_cv, slot_waiters, ready_cv, gate_cv
**                              the core's lock and the waits it wakes
**   epoch_active, epoch, next_epoch, deliver_gen, claim_open, order_busy,
**   claim_epoch, claim_gen, claim_pos, claim_batch, next_batch,
**   next_deliver, n_delivered, n_lent
**                              claims, delivery order and epochs
**   error, error_batch, error_reported, errmsg, lastmsg
**                              the first fatal error and where it is told
**   stop, destroyed            lifetime: shutdown and the last release
**   n_workers, workers         the threads that claim and fill
**   cclock                     the consumer's clock, stopped and started
**                              by next() itself
**   tracks, stats_mu, run      what next() and the workers record as they
**                              go (the trace, the baseline, the epochs)
**   order_ops, order_state     the epoch's order, one of two tables
**   active_workers, active_prefetch
**                              the window the core's claims obey (the
**                              autotuner moves it)
**   features                   the features that are on, and their state
** A feature's own state is in its file, reached through `features` (or
** the outlet's state). */
struct stoke_loader {
  stoke_config cfg;              /* resolved; frozen at create */
  const stoke_allocator *alloc;  /* borrowed from cfg */
  stoke_source *src;             /* our reference */
  stoke__plan plan;
  size_t n_slots;                /* prefetch + 1 */
  stoke_batch *slots;
  size_t sample_bytes;
  uint64_t host_bytes;
  /* Where batches go out (outlet.h): the host or the device outlet,
  ** echo wrapped around it, with the slots next() hands out and the
  ** layout of a host slot; frozen after create. */
  stoke__outlet outlet;
  char *cfg_text;                /* cfg's strings, copied (owned_config.c) */

  pthread_mutex_t mu;
  pthread_cond_t work_cv;        /* workers: a slot was freed, an epoch
                                    started, or stop */
  pthread_cond_t slot_cv;        /* workers waiting for a free slot: a
                                    freed slot wakes only as many of them
                                    as the batch it opens can use (see
                                    stoke__slot_free_locked); every other
                                    event wakes them all */
  unsigned slot_waiters;         /* workers waiting on slot_cv (mu) */
  pthread_cond_t ready_cv;       /* consumer: a batch became READY, an
                                    error, or stop */
  /* Protected by mu.  Two sides: the consumer delivers epoch `epoch`
  ** (generation deliver_gen) while workers assign batches of claim_epoch
  ** (generation claim_gen): the same epoch, or with prefetch_next_epoch the
  ** one after it.  A generation numbers each run of claims, so batches of a
  ** discarded prefetch are never mistaken for the epoch's own. */
  bool epoch_active;
  uint64_t epoch;                /* of the active (or last) epoch */
  uint64_t next_epoch;           /* number of the next epoch to start */
  uint64_t deliver_gen;
  bool claim_open;               /* order holds claim_epoch's order */
  bool order_busy;               /* a worker computes the next order
                                    outside the lock */
  uint64_t claim_epoch, claim_gen;
  size_t claim_pos;              /* next offset to claim in claim_batch */
  stoke_batch *claim_batch;      /* batch being claimed into, or NULL */
  size_t next_batch;             /* number of the next batch to assign */
  size_t next_deliver;           /* in order: lowest undelivered number */
  size_t n_delivered;            /* batches handed out this epoch */
  size_t n_lent;                 /* out slots held by the caller */
  stoke_batch *free_list;
  int error;                     /* first fatal error, 0 if none */
  size_t error_batch;            /* in order: the number of the delivered
                                    epoch's batch that failed (batches
                                    before it are still handed out), or 0:
                                    report at once; mu */
  bool error_reported;           /* next() returned it once already */
  char errmsg[STOKE__ERRMSG_CAP];/* kept from the first error; never
                                    changed once error is set */
  char lastmsg[STOKE__ERRMSG_CAP];/* the last non-fatal message (EBUSY,
                                    EINVAL); consumer thread, under mu */
  atomic_bool stop;              /* set under mu; workers also poll it
                                    between samples (relaxed) */
  bool destroyed;                /* destroy() ran while batches were lent:
                                    the last release frees the loader; mu */

  unsigned n_workers;
  stoke__worker *workers;        /* n_workers, or one for W = 0 that the
                                    consumer's thread uses */

  /* Consumer side: only the thread inside next() touches these.  The
  ** clock's statistics are readable from any thread. */
  stoke__cclock cclock;          /* wait, compute, warm-up, pending step,
                                    the epoch in progress */

  stoke__tracks tracks;          /* the trace (tracks.c) */

  pthread_mutex_t stats_mu;      /* leaf */
  stoke__run_stats run;          /* baseline, epoch log (run_stats.c) */

  const stoke__order_ops *order_ops; /* the epoch's order; frozen */
  void *order_state;             /* the order's own (its create); the
                                    plan's order writes it only while
                                    claim_open is false, the given one
                                    under mu */

  /* The window of work: the workers with id below active_workers claim
  ** work, and batches may take at most active_prefetch + consumer_slots
  ** slots (the live autotuner moves them, autotuner.c).  Without autotune
  ** they are n_workers and prefetch.  Protected by mu; a worker gated off
  ** waits on gate_cv (so that work_cv's broadcasts do not wake it). */
  unsigned active_workers, active_prefetch;
  pthread_cond_t gate_cv;
  /* The features that are on, each with its own state (feature.h). */
  stoke__features features;
};

/* echo.c: data echoing, an outlet around the outlet (outlet.h).  Every
** slot handed out feeds cfg.echo steps (resolved at create: at least 1). */
/* Copies of each sample a fill writes: cfg.echo with example echoing, else
** 1 (a slot's field holds that many batches' worth of samples). */
static inline unsigned stoke__echo_copies(const stoke_config *c) {
  return c->echo > 1 && c->echo_mode == STOKE_ECHO_EXAMPLE ? c->echo : 1;
}
/* At create, once the outlet and its out slots are set: with echo > 1,
** wrap l->outlet and allocate the views of every out slot.  0 or
** STOKE_ENOMEM. */
int stoke__echo_create(stoke_loader *l);
/* Unwrap and free (before the device outlet frees its slots). */
void stoke__echo_destroy(stoke_loader *l);
/* Host bytes of the views (the ledger). */
uint64_t stoke__echo_bytes(const stoke_config *c, size_t n_slots);
/* The steps handed out of the epoch in progress (mu held). */
uint64_t stoke__echo_steps_locked(const stoke_loader *l);
/* The epoch's first group starts at view view_index of its batch (resume;
** mu held, from an epoch_start hook).  Nothing without echo. */
void stoke__echo_start_at_locked(stoke_loader *l, unsigned view_index);

/* The features' ledger hooks: the host bytes a feature allocates for a
** configuration, computed without a loader (the ledger is asked before
** create, and by stoke_host_ledger_compute).  ledger.c sums them, each
** into its term, from one table. */
typedef struct stoke__ledger_in {
  const stoke_config *c;         /* resolved */
  unsigned n_workers;
  const stoke__plan *plan;
  const stoke_source *src;
} stoke__ledger_in;

/* ramcache.c: the RAM cache of deterministic samples. */
uint64_t stoke__ramcache_ledger(const stoke__ledger_in *in);
/* At create (after the slots: the field sizes): allocate it when
** ram_cache_bytes holds a sample and list it among the features.
** STOKE_EINVAL for a source that is not deterministic. */
int stoke__ramcache_create(stoke_loader *l);
/* metrics.c: Prometheus text and JSON lines (cfg.metrics_path,
** cfg.log_jsonl_path); 0, STOKE_ENOMEM or STOKE_EIO (message set). */
int stoke__metrics_create(stoke_loader *l);
/* Samples it holds, 0 when off (tests). */
size_t stoke__ramcache_samples(const stoke_loader *l);
/* packcache.c: the packing cache (cache_dir).  Its host bytes: its map
** and queue. */
uint64_t stoke__packcache_ledger(const stoke__ledger_in *in);
/* At create, after the workers' records: open it (when cache_dir is set)
** and list it among the features.  0 or an error (TLS message set). */
int stoke__packcache_create(stoke_loader *l, const stoke__sys *sys);
/* The open cache, or NULL (tests). */
struct stoke__cache *stoke__packcache_of(const stoke_loader *l);

/* block_readahead.c: the block order's blocks and read-ahead. */
/* Host bytes of the blocks and the workers' read-ahead lists (none with
** a given order: the blocks come with stoke's own order). */
uint64_t stoke__readahead_ledger(const stoke__ledger_in *in);
/* At create, after the workers' records: cut the blocks (shuffle BLOCK)
** for the plan and list the read-ahead among the features. */
int stoke__readahead_create(stoke_loader *l);

/* resume.c: at create, before the bad-sample state: list resume among
** the features (0 or STOKE_ENOMEM). */
int stoke__resume_create(stoke_loader *l);
/* publish_feature.c: at create, list the live view's publisher among the
** features when cfg.publish (or STOKE_PUBLISH) asks for it; it starts
** once the loader is whole.  0 or STOKE_ENOMEM. */
int stoke__publish_create(stoke_loader *l);
/* fetch_feature.c: at create, list the fetch statistics among the
** features when the source reads through an HTTP client (remote packed
** shards).  0 or STOKE_ENOMEM. */
int stoke__fetch_create(stoke_loader *l);
/* rcache_feature.c: at create, list the remote cache's statistics among
** the features when the source opened its remote shards through a cache.
** 0. */
int stoke__rcache_stats_create(stoke_loader *l);
/* The source's fingerprint, computed once (not with mu held). */
uint64_t stoke__loader_fingerprint(stoke_loader *l);

/* owned_config.c: point c's strings read after create (device,
** cuda_library, cache_dir) at copies in one block (*block, owned; NULL when
** there is none).  0 or STOKE_ENOMEM. */
int stoke__config_own_strings(stoke_config *c, const stoke_allocator *a,
                              char **block);

/* Check a config as stoke_loader_create does (loader.c); 0 or STOKE_EINVAL
** with the message in the thread's error.  The host ledger uses it too. */
int stoke__config_validate(const stoke_config *c);

/* ledger.c: the host memory ledger of a resolved configuration (no
** validation), and the budget check naming the biggest term. */
void stoke__host_ledger(const stoke_config *c, unsigned n_workers,
                        const stoke__plan *plan, const stoke_source *src,
                        stoke_host_ledger *g);
/* The same terms from what loader l chose (its backend, the field sizes of
** its host slots, its device slots). */
void stoke__loader_ledger_device(const stoke_loader *l, stoke_host_ledger *g);
int stoke__host_ledger_check(const stoke_host_ledger *g, unsigned prefetch,
                             size_t batch_size);

/* given_order.c: the batches and samples of the given order's epoch: the
** last finished one's until the one in progress is ended (takes mu). */
void stoke__given_counts(const stoke_loader *l, size_t *batches,
                         size_t *samples);
/* autotuner.c: the glue between the loader and the controller
** (src/model/autotune_controller.c). */
/* At create, before the ledger: resolve the most workers and the deepest
** prefetch (into l->cfg) inside the memory budget, and allocate the
** autotuner.  0, STOKE_EINVAL or STOKE_ENOMEM (TLS message set).
** Lists itself among the features (its hooks: feature.h). */
int stoke__autotuner_create(stoke_loader *l);
/* Another tuner's decision e (io_autotuner.c) into the log, counted as a
** change (a ROLLBACK as one), on the consumer's trace track at now;
** consumer thread.  No-op without the autotuner. */
void stoke__autotuner_note(stoke_loader *l, const stoke_autotune_event *e,
                           int64_t now);
/* io_autotuner.c: at create, with autotune and a source that reads through
** an HTTP client, list the io_concurrency tuner (src/model/io_tune.h) among
** the features.  0 or STOKE_ENOMEM. */
int stoke__io_autotuner_create(stoke_loader *l);
/* Tests: set the active workers and prefetch (clamped to the most) and
** stop the controller from deciding; any thread but a worker. */
void stoke__autotuner_force(stoke_loader *l, unsigned workers,
                            unsigned prefetch);

/* core.c: the worker threads' body (loader.c starts them). */
void *stoke__worker_main(void *arg);

/* badsample.c: the on_error policies, the failure log and budget, the
** quarantine. */
/* At create, after slots (the skip flags) and before the workers. */
int stoke__bad_init(stoke_loader *l);
/* Host bytes of the bad-sample state of a configuration (the ledger). */
uint64_t stoke__bad_bytes(const stoke_config *c, const stoke_source *src);
/* quarantine_feature.c: at create (from stoke__bad_init), open the
** quarantine when cfg.quarantine_path is set and list it among the
** features.  0 or an error (TLS message set). */
int stoke__quarantine_create(stoke_loader *l);
/* The open quarantine, or NULL: none. */
stoke__quarantine *stoke__quarantine_of(const stoke_loader *l);

/* Bytes of field f in one host slot (loader.c). */
size_t stoke__slot_field_bytes(const stoke_loader *l, size_t f);
/* tracks.c: at create, after the workers and the device: the tracks when
** cfg.trace_events > 0, and the clock origin.  0 or STOKE_ENOMEM. */
int stoke__tracks_create(stoke_loader *l);
void stoke__tracks_free(stoke__tracks *t, const stoke_allocator *a);
/* The consumer's track, or NULL: tracing is off. */
static inline stoke__trace *stoke__tracks_consumer(const stoke__tracks *t) {
  return t->v ? &t->v[0] : NULL;
}

/* run_stats.c.  Init: the counters (before any thread); create: the
** baseline and the scheduler window's room (0 or STOKE_ENOMEM); free
** what create made. */
void stoke__run_stats_init(stoke__run_stats *r);
int stoke__run_stats_create(stoke__run_stats *r, const stoke_allocator *a,
                            unsigned n_workers);
void stoke__run_stats_free(stoke__run_stats *r, const stoke_allocator *a);
/* Take the producers' totals as the warm-up baseline (consumer thread). */
void stoke__take_baseline(stoke_loader *l);
/* Record a finished epoch (consumer thread). */
void stoke__record_epoch(stoke_loader *l, int64_t end_ns);
/* The stoke-w* threads' scheduler window into st (threads_active stays
** as it is without one); takes stats_mu. */
void stoke__run_stats_sched(const stoke_loader *l, stoke_stats *st);
/* Drop what workers prefetched for an epoch that is not the next one
** (mu held); see core.c. */
void stoke__discard_prefetch(stoke_loader *l);

/* loader.c: stoke_loader_create with a table of system calls (NULL: the
** real ones), for the fault tests. */
int stoke__loader_create(const stoke_config *cfg, const stoke__sys *sys,
                         stoke_loader **out);
/* produce.c: fill sample s of src (its fields at s->dst), timing its
** stages into ps when `timed`. */
int stoke__produce(stoke_source *src, stoke_sample *s,
                   stoke__producer_stats *ps, bool timed);

#endif /* STOKE_PIPELINE_H */
