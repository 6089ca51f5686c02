/* device.h — the accelerator's primitives: the CUDA driver opened at run
** time, its primary context, the kernels and event clocks (internal).
** Nothing here knows the loader: the device outlet that moves the loader's
** batches to the accelerator is src/pipeline/outlet_device*.c, on top of
** these.
**
** The slot allocator is a backend:
**   plain    host slots from the loader's allocator (the default, no CUDA
**            touched: stoke_loader.dev is NULL and nothing here runs);
**   pinned   host slots in page-locked memory (cuMemHostAlloc), lent to
**            the caller, who copies them itself; a release may name a
**            stream, and the slot is reused only once an event recorded on
**            it at the release has completed;
**   CUDA     pinned host slots, plus device slots: each completed host
**            batch is copied to a free device slot on a copy stream by the
**            device thread (stoke-dev), and next() hands out device
**            batches, the consumer's stream made to wait for the copy.
** When CUDA is asked for and cannot serve (no library, no device, a driver
** too old), the plain backend serves and the device info says why.
**
** Files: cuda_dl.c (the driver, opened with dlopen), context.c (making
** the primary context current), module.c (the kernels: normalisation, the
** spin step), timing.c (event times on the host clock, for traces).  The
** outlet (src/pipeline/outlet_device.h): outlet_device.c (choosing the
** backend, memory, the ledger's device term), outlet_device_copy.c (the
** device thread), outlet_device_stream.c (the consumer's side: waits,
** releases, step events).
**
** Locking: the loader's mu protects slot states and the lists below (the
** outlet's); no CUDA call is made with mu held.  dev->anchor_mu is a
** leaf.  CUDA calls need the device's primary context current on the
** calling thread: every entry point here pushes it and pops it again. */
#ifndef STOKE_DEVICE_H
#define STOKE_DEVICE_H

#include "core/core.h"
#include "os/os.h"
#include "stats/stats.h"
#include "source/source.h"
#include "device/cuda_api.h"
#include "device/kernels.h"
#include "transform/u8_form.h" /* stoke__u8_form */

#include <pthread.h>

/* The streams that read a device slot besides the one its release names:
** each stream stoke_batch_wait_stream made wait for the slot's copy (a
** DLPack consumer's __dlpack__(stream=S)).  The slot is reused only once
** every one of them has passed the point of the release, so at the release
** an event is recorded on each (readers.c). */
#define STOKE__READERS 8
/* CU_STREAM_PER_THREAD: the calling thread's own default stream. */
#define STOKE__STREAM_PER_THREAD ((uintptr_t)2)

typedef struct stoke__readers {
  uintptr_t stream[STOKE__READERS]; /* the loader's mu */
  size_t n;                          /* the loader's mu */
  /* Recorded at the last release, one per stream read there, for the next
  ** copy into the slot to wait on: written by the releasing thread before
  ** the slot is FREE, then read by the device thread that picked it. */
  CUevent done[STOKE__READERS];
  size_t n_done;
} stoke__readers;

/* Per-slot state of the device stage (host and device slots alike). */
typedef struct stoke__slot_dev {
  /* Host slot, CUDA backend: its copy on the copy stream (timing events;
  ** the device thread waits on copy_end before the slot is reused). */
  CUevent copy_start, copy_end;
  int64_t copy_issue_ns;        /* host time the copy was issued */
  /* Device slot: recorded after the copy into it; next() makes the
  ** consumer's stream wait on it. */
  CUevent ready;
  /* Device slot, or pinned host slot: recorded at release on the stream
  ** that last read it. */
  CUevent release;
  bool release_pending;         /* device slot: the next copy into it waits
                                   on `release`; protected by mu */
  uint64_t release_seq;         /* device slot: when it was released (a
                                   count; 0: never); protected by mu */
  stoke__readers readers;       /* device slot: other streams that read it */
  /* The per-thread default stream (handle 2) is the thread's own: a
  ** release that needs the stream of the thread next() lent the slot to
  ** (lent_to), made on another thread (a DLPack deleter), is recorded by
  ** that consumer thread (outlet_device_stream.c).  mu. */
  pthread_t lent_to;
  uint64_t covered_seq;         /* `release` recorded on the consumer's own
                                   stream at its entry number covered_seq */
  bool deferred;                /* released, waiting for the consumer to
                                   record `release` on its stream (its
                                   next() entry scans the slots for it) */
  CUdeviceptr dptr[STOKE__MAX_FIELDS]; /* device slot: field buffers */
} stoke__slot_dev;

/* One step's events on the consumer's stream (outlet_device_stream.c). */
typedef struct stoke__step_rec {
  CUevent ready;    /* the stream reached the step: recorded at next()'s
                       return, before it waits for the copy */
  CUevent start;    /* after the wait: the step's work begins */
  CUevent end;      /* at the following next(): the step's work ends */
  size_t number;
  int64_t ready_ns; /* host time `ready` was recorded (trace anchor choice) */
  bool measured;    /* outside warm-up */
  bool has_end;
  bool prev_ok;     /* the step before was timed too: its end is the gap's
                       start */
} stoke__step_rec;

#define STOKE__STEP_RING 32
#define STOKE__ANCHORS 16

/* Events recorded on an idle stream (it runs nothing else, so they complete
** as soon as they are submitted) with the host clock read around the
** record: the GPU time of an event is placed on the host clock by its
** elapsed time from the newest anchor recorded before it was enqueued.
** One set per thread that converts times (the device thread, the
** consumer), so no lock: each is written and read by its thread only. */
typedef struct stoke__anchors {
  CUevent ev[STOKE__ANCHORS];
  int64_t host_ns[STOKE__ANCHORS];
  size_t n;                     /* anchors recorded so far */
} stoke__anchors;

typedef struct stoke__dev {
  int want;                     /* stoke_backend asked for */
  int backend;                  /* stoke_backend serving */
  int ordinal;                  /* CUDA device, -1 */
  char reason[256];             /* one line: the backend and why */
  char norm_reason[160];        /* one line: where normalisation runs */
  char kernel_reason[160];      /* why the kernels are missing, or "" */
  char name[96];
  bool pinned;                  /* host slots page-locked */
  int driver_version;
  uint64_t total_bytes, free_bytes; /* of the device, at creation */
  const stoke__cuda *cu;        /* NULL: no CUDA (plain backend) */
  CUdevice device;
  CUcontext ctx;                /* the primary context, retained */
  bool ctx_retained;
  CUstream copy_stream;         /* non-blocking: copies overlap stream 0 */
  CUstream clock_stream;        /* idle: anchors complete at once */
  CUstream consumer;            /* cfg.cuda_stream */
  int clock;                    /* stoke_clock in force */

  /* Device slots (CUDA backend): the batches next() hands out, of the
  ** outlet's stoke_batch type (src/pipeline/outlet_device.h); n_dslots is
  ** planned when the device opens, dslots allocated after the host slots,
  ** NULL until then and without CUDA. */
  size_t n_dslots;
  stoke_batch *dslots;
  /* The device thread copies in order (protected by mu): how many batches
  ** of the delivered epoch (copies_cur) and of a prefetched next one
  ** (copies_ahead) it has copied. */
  size_t copies_cur, copies_ahead;
  /* The device thread waits on cv (with the loader's mu): a batch became
  ** READY, a slot was released, an epoch started, or stop. */
  pthread_cond_t cv;
  bool cv_made;
  uint64_t device_bytes;        /* everything allocated on the device */
  /* Normalisation on the device. */
  long norm_field;              /* -1: none */
  stoke__u8_form form;
  CUmodule module;
  CUfunction k_norm, k_spin;
  CUdeviceptr lut;              /* stoke__norm_lut on the device */
  CUdeviceptr staging;          /* the u8 copy of the normalised field */
  uint64_t staging_bytes;

  /* The device thread's reclaim queue: host slots whose copy (or, pinned,
  ** whose caller's release) must complete before reuse, in order.
  ** Protected by mu. */
  stoke_batch **reclaim;
  size_t reclaim_head, reclaim_len, reclaim_cap;
  stoke__thread *thread;
  bool thread_started;

  uint64_t release_seq;         /* releases of device slots; mu */

  /* Releases onto the consumer thread's per-thread stream (see
  ** stoke__slot_dev.lent_to); mu.  per_thread: handle 2 was ever used
  ** (cuda_stream, a release or a reader), so each next() entry records
  ** the lent slots' release events on the consumer's stream; entry_seq
  ** counts those entries, in_next says the consumer is inside next()
  ** since the last one (it has queued no work since).  per_thread only
  ** goes false -> true, under mu, so the consumer tests it with a relaxed
  ** load before it takes mu: a store before the consumer last took mu is
  ** seen, and a racing one would race the lock just the same. */
  atomic_bool per_thread;
  bool in_next;
  uint64_t entry_seq;
  stoke_batch **entry_scratch; /* n_out slots: the entry's records (made by
                                  stoke__dev_alloc, or no loader) */

  /* The device thread's statistics (copy stage); written by it only. */
  stoke__producer_stats *stats;

  /* Steps on the consumer's stream; consumer thread only. */
  stoke__step_rec steps[STOKE__STEP_RING];
  size_t step_head, step_tail;  /* [tail, head) in flight */
  bool step_open;               /* steps[head - 1] waits for its end */
  bool last_timed;              /* the step before the next was timed */

  /* Tracing (cfg.trace_events > 0, clock_stream made): the copy stream's
  ** and the consumer stream's tracks, and each thread's anchors. */
  struct stoke__trace *copy_trace, *stream_trace;
  stoke__anchors copy_anchors;   /* the device thread's */
  stoke__anchors stream_anchors; /* the consumer's */
} stoke__dev;

/* ---- context.c ----------------------------------------------------------- */

/* Push the primary context on this thread: 0 or STOKE_EDEVICE (message
** in err). */
int stoke__dev_enter(const stoke__dev *d, char *err, size_t cap);
void stoke__dev_leave(const stoke__dev *d);

/* ---- readers.c ---------------------------------------------------------- */

/* Two handles that name one stream (0 and 1: the legacy stream). */
bool stoke__same_stream(uintptr_t a, uintptr_t b);
/* Add `stream` to the set unless it is there (mu held): 0, or -1 when the
** set is full. */
int stoke__readers_add(stoke__readers *r, uintptr_t stream);
/* Record done[] on the n streams (context current; the slot is the
** caller's): 0, or the failing cuEventRecord's code. */
CUresult stoke__readers_record(const stoke__cuda *cu, stoke__readers *r,
                               const uintptr_t *streams, size_t n);
/* Wait on the host for what the last release recorded (teardown). */
void stoke__readers_sync(const stoke__cuda *cu, const stoke__readers *r);

/* ---- module.c ------------------------------------------------------------ */

/* Whether this build has the kernels (nvcc was found). */
bool stoke__dev_have_kernels(void);
/* Load the module and find the kernels (context current).  Failing loads
** leave norm_reason set and return nonzero; never fatal. */
int stoke__dev_module_load(stoke__dev *d, char *why, size_t cap);
void stoke__dev_module_unload(stoke__dev *d);
/* Enqueue the normalisation of n u8 elements at `in` into `out` on s. */
CUresult stoke__dev_launch_norm(stoke__dev *d, CUstream s, CUdeviceptr in,
                                CUdeviceptr out, uint32_t n);

/* ---- timing.c ------------------------------------------------------------ */

/* Create a set's events and record its first anchor (context current).
** 0, or the failing call's CUresult and its name in *call. */
CUresult stoke__dev_anchors_init(stoke__dev *d, stoke__anchors *a,
                                 const char **call);
void stoke__dev_anchors_free(stoke__dev *d, stoke__anchors *a);
/* Record a new anchor when the newest is older than a few seconds (its
** thread, context current; never blocks). */
void stoke__dev_anchors_tick(stoke__dev *d, stoke__anchors *a, int64_t now);
/* The host time of completed event e, enqueued at host time enq_ns.  False
** when it cannot be told (no anchor, or the driver refuses). */
bool stoke__dev_event_host_ns(const stoke__dev *d, const stoke__anchors *a,
                              CUevent e, int64_t enq_ns, int64_t *out);
/* The time from completed event a to completed event b, in ns (negative
** clamped to 0).  False when the driver cannot tell. */
bool stoke__dev_elapsed_ns(const stoke__dev *d, CUevent a, CUevent b,
                           int64_t *ns);

#endif /* STOKE_DEVICE_H */
