/* internal.h — stoke__ functions and STOKE__ macros shared inside src/.
** Nothing here is API: cli/ and python/ include only stoke.h. */
#ifndef STOKE_INTERNAL_H
#define STOKE_INTERNAL_H

#include "stoke.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define STOKE__CACHELINE 64
#define STOKE__MAX_FIELDS STOKE_MAX_FIELDS
#define STOKE__ERRMSG_CAP 512

#define STOKE__MIN(a, b) ((a) < (b) ? (a) : (b))
#define STOKE__MAX(a, b) ((a) > (b) ? (a) : (b))

/* A broken invariant: a bug in stoke, never a user error. */
#define STOKE__BUG(msg) stoke__bug(__FILE__, __LINE__, msg)
void stoke__bug(const char *file, int line, const char *msg);

/* ---- memory (src/core/alloc.c) ------------------------------------------ */

/* All allocation goes through these, with the loader's allocator or NULL
** for malloc/free.  They are also where tests inject allocation failures. */
void *stoke__alloc(const stoke_allocator *a, size_t n);
void *stoke__calloc(const stoke_allocator *a, size_t count, size_t size);
void stoke__free(const stoke_allocator *a, void *p);
/* Cache-line aligned (64 bytes); free with stoke__free_aligned. */
void *stoke__alloc_aligned(const stoke_allocator *a, size_t n);
void stoke__free_aligned(const stoke_allocator *a, void *p);
char *stoke__strdup(const stoke_allocator *a, const char *s);
/* a * b, or false on overflow. */
bool stoke__mul_ok(size_t a, size_t b, size_t *out);
/* A growing array of n elements of `size` bytes at *p with room for *cap:
** when full, doubles it (16 at first, at most max elements, 0: no limit).
** False when there is no room and none could be made (out of memory, or
** at max): the array is unchanged, and the caller loses the record it
** wanted to add, not its state. */
bool stoke__grow(const stoke_allocator *a, void **p, size_t *cap, size_t n,
                 size_t size, size_t max);

/* ---- errors (src/core/error.c) ------------------------------------------ */

/* printf into err[0..cap) (err may be NULL when cap is 0) and return code:
** how the layers below the public API report an error to their caller. */
int stoke__errf(char *err, size_t cap, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Set the calling thread's create-time message (read by stoke_errmsg(NULL))
** and return code. */
int stoke__set_tls_error(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void stoke__clear_tls_error(void);
const char *stoke__tls_error(void);
/* "12.0 MiB", "512 B": for messages. */
void stoke__format_bytes(uint64_t n, char *buf, size_t cap);

/* ---- clocks and threads (src/os/) --------------------------------------- */

int64_t stoke__now_ns(void);        /* CLOCK_MONOTONIC */
int64_t stoke__thread_cpu_ns(void); /* CLOCK_THREAD_CPUTIME_ID */
/* Sleep ns (restarting after signals). */
void stoke__sleep_ns(int64_t ns);
/* Burn ns of this thread's CPU time (not wall time: on a busy machine the
** call takes longer, as real CPU-bound work would). */
void stoke__spin_cpu_ns(int64_t ns);
unsigned stoke__online_cpus(void);
/* Drop the whole pages of a read-only file mapping inside [p, p + n) from
** the resident set (src/os/memory.c). */
void stoke__drop_pages(const void *p, size_t n);
/* Advise transparent huge pages for the 2 MiB pages inside [p, p + n) of
** anonymous memory (src/os/memory.c); advice only. */
void stoke__advise_huge(void *p, size_t n);
/* Gives the whole pages inside [p, p + n) back to the OS (private memory:
** they read as zeros when touched again); the bytes released. */
uint64_t stoke__release_pages(void *p, size_t n);

/* s ends with suffix. */
static inline bool stoke__ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The table of system calls that file access and thread starts go through
** (src/os/syscalls.h); NULL wherever one is taken means the real calls. */
typedef struct stoke__sys stoke__sys;

typedef struct stoke__thread stoke__thread; /* wraps pthread_t */
/* Start fn(arg) on a thread named `name` (at most 15 chars) with an explicit
** stack size, through sys's thread_create (NULL: pthread_create); the
** thread's timer slack is set to 1 us so that sleeps and condition waits
** wake on time.  Returns 0, STOKE_ENOMEM or STOKE_ETHREAD. */
int stoke__thread_start(stoke__thread **out, const stoke_allocator *a,
                        const stoke__sys *sys, const char *name,
                        void *(*fn)(void *), void *arg);
void stoke__thread_join(stoke__thread *t, const stoke_allocator *a);
/* Puts the calling thread under SCHED_BATCH (its nice value kept): threads
** it wakes are not preempted by it on wake-up.  0, or the errno. */
int stoke__thread_sched_batch(void);

/* ---- rng (src/sampler/rng.c) --------------------------------------------- */

uint64_t stoke__mix64(uint64_t x);
/* Fold a value or a string (eight bytes at a time, then its length, so
** "ab" + "c" != "a" + "bc") into a 64-bit hash h: identities and keys. */
uint64_t stoke__hash_u64(uint64_t h, uint64_t v);
uint64_t stoke__hash_str(uint64_t h, const char *s);

/* ---- sampler (src/sampler/sampler.c) -------------------------------------- */

/* The block order's blocks (src/sampler/blocks.c): consecutive samples of
** about block_bytes stored bytes, fixed for the source, and, for the
** epoch whose order was computed last, the block order and where each
** window ends. */
typedef struct stoke__blocks {
  size_t n_blocks;
  size_t *start;       /* n_blocks + 1: block b is samples [start[b],
                          start[b + 1]) */
  size_t window;       /* blocks per window */
  size_t n_windows;
  size_t *order;       /* n_blocks: the blocks in the epoch's order */
  size_t *win_end;     /* n_windows: window w is positions [win_end[w - 1],
                          win_end[w]) of the epoch's permutation */
  const stoke_allocator *alloc;
} stoke__blocks;

/* Cut n samples into blocks of about block_bytes (each at least one
** sample; bytes(user, i) the stored bytes of sample i) and windows of
** `window` blocks.  The arrays are sized for n blocks, whatever the cut:
** stoke__blocks_bytes(n).  0 or STOKE_ENOMEM. */
int stoke__blocks_init(stoke__blocks *b, const stoke_allocator *a, size_t n,
                       uint64_t (*bytes)(const void *user, size_t i),
                       const void *user, uint64_t block_bytes, size_t window);
void stoke__blocks_free(stoke__blocks *b);
uint64_t stoke__blocks_bytes(size_t n);
/* The window holding position t of the epoch's permutation. */
size_t stoke__blocks_window_of(const stoke__blocks *b, size_t t);

typedef struct stoke__plan {
  size_t n_source;     /* samples in the source */
  size_t per_rank;     /* samples this rank sees per epoch */
  size_t batch_size;
  size_t n_batches;    /* batches per epoch for this rank */
  int shuffle;         /* stoke_shuffle */
  uint64_t seed;
  unsigned rank, world;
  int shard_drop_last, drop_last;
  stoke__blocks *blocks; /* STOKE_SHUFFLE_BLOCK: the blocks (plan_order
                            writes their epoch order); else NULL */
} stoke__plan;

/* Fill in per_rank and n_batches from the other fields; STOKE_EINVAL (with
** the TLS message) when the shard is empty. */
int stoke__plan_init(stoke__plan *p);
/* The epoch's order for this rank: order[0..per_rank) = source indices.
** perm is scratch of n_source entries.  A pure function of (plan, epoch). */
void stoke__plan_order(const stoke__plan *p, uint64_t epoch, size_t *perm,
                       size_t *order);
/* Samples in the batch at position `batch` of the epoch. */
size_t stoke__plan_batch_len(const stoke__plan *p, size_t batch);

/* ---- sources (src/source/) ------------------------------------------------- */

struct stoke_sample {
  size_t index;
  uint64_t epoch;
  uint64_t seed;          /* the loader's */
  stoke_rng rng;
  void *dst[STOKE__MAX_FIELDS];
  void *scratch;          /* the worker's, reused across samples */
  int stage;              /* stage being timed */
  int64_t mark_ns;        /* when it began */
  int64_t stage_ns[STOKE_STAGE_COUNT]; /* accumulated for this sample */
  int64_t sleep_bias_ns;  /* the thread's measured sleep overshoot */
  char *err;              /* the worker's message buffer */
  size_t err_cap;
  bool failed;
  bool timed;             /* false: no clock reads for this sample */
  bool u8_form;           /* write the field of the source's u8_form as u8
                             pixels (the device normalises them) */
  struct stoke__trace *trace; /* the worker's, or NULL when not tracing */
  const stoke_batch *batch; /* the batch being filled */
  size_t pos;             /* this sample's position in it */
  /* Example echoing: fill `copies` copies of the sample (1: the sample
  ** alone), copy j's field f at dst[f] + j * copy_step[f], with the stream
  ** stoke__copy_rng(&rng, j) (copy 0: rng itself). */
  unsigned copies;
  size_t copy_step[STOKE__MAX_FIELDS];
  /* Set by image fills: the stored image's size from its header (0 when
  ** unknown), summed into the producer's statistics. */
  uint32_t src_w, src_h;
  struct stoke__cache *cache; /* the loader's packed cache, or NULL */
};

/* The stream of copy j of a sample whose stream is base: base for j = 0,
** else base's key mixed with j (src/sampler/rng.c). */
void stoke__copy_rng(const stoke_rng *base, unsigned j, stoke_rng *out);

struct stoke__u8_form;

typedef struct stoke__source_ops {
  int (*fill)(stoke_source *src, stoke_sample *s);
  void (*destroy)(stoke_source *src);
  /* Optional: where sample `index` lives (file, shard and offset), for
  ** error messages.  Writes a NUL-terminated string into buf. */
  void (*describe)(const stoke_source *src, size_t index, char *buf,
                   size_t cap);
  /* Optional: per-worker state (decoder contexts, read buffers), made when
  ** the loader is created and handed to fill as stoke_sample.scratch.  One
  ** worker uses it at a time.  Returns 0 or a STOKE_E* code (with the TLS
  ** message set). */
  int (*scratch_create)(stoke_source *src, const stoke_allocator *a,
                        void **out);
  void (*scratch_destroy)(stoke_source *src, const stoke_allocator *a,
                          void *scratch);
  /* Optional, on each worker thread (stoke_callback_config's hooks):
  ** before it claims anything, and when it stops.  A failing start
  ** poisons the loader with STOKE_ETHREAD and err's text. */
  int (*thread_start)(stoke_source *src, unsigned worker, char *err,
                      size_t cap);
  void (*thread_stop)(stoke_source *src, unsigned worker);
  /* Optional: by the thread that completes batch b, before it is READY.
  ** Nonzero poisons the loader with STOKE_ESAMPLE and err's text. */
  int (*batch_done)(stoke_source *src, const stoke_batch *b, char *err,
                    size_t cap);
  /* Optional: fill stoke_sample.copies copies at once, sharing what the
  ** copies have in common (reading, decoding); without it each copy is a
  ** fill of its own.  Same return as fill. */
  int (*fill_copies)(stoke_source *src, stoke_sample *s);
  /* Optional: true when a fill's bytes do not depend on the epoch or the
  ** random stream (a RAM cache may keep them). */
  bool (*deterministic)(const stoke_source *src);
  /* Optional: the stored bytes of sample i (the block order's sizes);
  ** without it every sample weighs its fields' bytes. */
  uint64_t (*stored_bytes)(const stoke_source *src, size_t i);
  /* Optional: read samples [first, first + n) ahead, asynchronously
  ** (madvise / posix_fadvise WILLNEED); advice only, errors ignored. */
  void (*read_ahead)(const stoke_source *src, size_t first, size_t n);
  /* Optional (since 0.2): a bound of one worker's scratch_create state at
  ** its largest, for the host ledger; *basis a stoke_scratch_basis, *w x
  ** *h the image it is of (0 when not an image). */
  uint64_t (*scratch_bound)(const stoke_source *src, int *basis,
                            uint32_t *w, uint32_t *h);
} stoke__source_ops;

/* A float field the source can also write as u8 pixels for the device to
** normalise (its fill then sees stoke_sample.u8_form), with the table of
** its values (src/device/device.h): image sources whose transform ends in
** f32 or f16 (src/source/image.c).  Returns true and fills *out, or
** false. */
bool stoke__source_u8_form(const stoke_source *src,
                           struct stoke__u8_form *out);
/* The longer side a stored image needs for src's transform to keep its
** detail (the doctor's pre-resize advice, src/source/image.c): 2 x the
** output of a random-resized-crop, 4/3 of a resize before a center-crop
** (a 4:3 image keeps it on its shorter side), rounded up to a multiple of
** 128; 0 for sources that are not images. */
unsigned stoke__source_keep_side(const stoke_source *src);

struct stoke_source {
  atomic_long refs;          /* atomic, acq_rel: last release frees */
  size_t n_samples;
  size_t n_fields;
  stoke_field_desc fields[STOKE__MAX_FIELDS]; /* names owned */
  size_t field_bytes[STOKE__MAX_FIELDS];
  const stoke__source_ops *ops;
  void *impl;                /* the kind's own state */
  const char *kind;          /* "tensors", "callback", "synthetic" */
  const stoke_allocator *alloc; /* what src and its names were allocated
                                   with (NULL: malloc); set before init */
};

/* Validate and copy field descriptions into src (names duplicated with
** src->alloc). */
int stoke__source_init(stoke_source *src, const char *kind, size_t n_samples,
                       size_t n_fields, const stoke_field_desc *fields);
void stoke__source_retain(stoke_source *src);
void stoke__source_release(stoke_source *src);
/* Bytes of one sample of a field desc (0 if invalid). */
size_t stoke__field_bytes(const stoke_field_desc *d);
/* A stage of a sample's own work (READ..TRANSFORM, PYTHON..COLLATE), as
** opposed to SLOT_WAIT and COPY. */
bool stoke__stage_is_work(int stage);

/* ---- the quarantine (src/source/quarantine.c, docs/quarantine.md) --------- */

typedef struct stoke__quarantine stoke__quarantine;

enum {
  STOKE__QUARANTINE_APPEND = 0, /* read the file if it exists (its header
                                   must match src), then append to it */
  STOKE__QUARANTINE_REWRITE = 1 /* write a new file (PATH.tmp, renamed over
                                   PATH at close) */
};

/* Open path for src (whose stoke_source_fingerprint is fingerprint).
** Returns 0, STOKE_EINVAL (made for another dataset), STOKE_EFORMAT (not a
** quarantine file), STOKE_EIO or STOKE_ENOMEM with err set. */
int stoke__quarantine_open(const char *path, const stoke_source *src,
                           uint64_t fingerprint, int mode,
                           const stoke_allocator *a, stoke__quarantine **out,
                           char *err, size_t cap);
void stoke__quarantine_close(stoke__quarantine *q); /* NULL: no-op */
/* Does q list sample index?  Any thread, lock-free. */
bool stoke__quarantine_has(const stoke__quarantine *q, size_t index);
/* List sample index (once) with where and why.  Any thread.  A write that
** fails is not fatal: the sample is listed in memory still, and note (if
** not NULL) gets the write error. */
void stoke__quarantine_add(stoke__quarantine *q, size_t index,
                           const char *where, const char *why, char *note,
                           size_t note_cap);
/* REWRITE: do not replace the file at close (an incomplete verification). */
void stoke__quarantine_discard(stoke__quarantine *q);
size_t stoke__quarantine_count(stoke__quarantine *q); /* distinct samples */
const char *stoke__quarantine_path(const stoke__quarantine *q);
/* 1 and the message in buf when a write failed; else 0. */
int stoke__quarantine_error(stoke__quarantine *q, char *buf, size_t cap);
/* Host bytes of a quarantine over n_samples samples (its bitmap). */
uint64_t stoke__quarantine_bytes(size_t n_samples);

/* ---- stats (src/stats/) ---------------------------------------------------- */

/* Log-bucket histogram of durations in ns: 32 linear buckets below 32 ns,
** then 32 buckets per power of two up to 2^40 ns (~18 min), so a bucket's
** midpoint is within 1.6% of any value in it.  One writer at a time; any
** thread may read (relaxed atomics, so reads are race-free). */
#define STOKE__HIST_SUB 32
#define STOKE__HIST_OCTAVES 36
#define STOKE__HIST_BUCKETS (STOKE__HIST_SUB * (STOKE__HIST_OCTAVES + 1))

typedef struct stoke__hist {
  atomic_uint_least64_t bucket[STOKE__HIST_BUCKETS];
  atomic_uint_least64_t count, sum, max;
} stoke__hist;

/* A plain copy, for merging and subtracting. */
typedef struct stoke__hist_snap {
  uint64_t bucket[STOKE__HIST_BUCKETS];
  uint64_t count, sum, max;
} stoke__hist_snap;

size_t stoke__hist_bucket_of(uint64_t v);
uint64_t stoke__hist_bucket_mid(size_t b);
void stoke__hist_bucket_range(size_t b, uint64_t *lo, uint64_t *hi);
void stoke__hist_add(stoke__hist *h, uint64_t v);       /* single writer */
void stoke__hist_add_n(stoke__hist *h, uint64_t v, uint64_t n); /* n times */
void stoke__hist_read(const stoke__hist *h, stoke__hist_snap *acc); /* += */
void stoke__hist_sub(stoke__hist_snap *a, const stoke__hist_snap *b);
/* Value at quantile q in [0, 1] (bucket midpoint, clamped to max). */
uint64_t stoke__hist_quantile(const stoke__hist_snap *h, double q);
void stoke__hist_dist(const stoke__hist_snap *h, stoke_dist *out);
/* h's non-empty buckets in increasing order: at most cap into out; returns
** how many there are (the public *_wait_histogram calls). */
size_t stoke__hist_buckets(const stoke__hist *h, stoke_hist_bucket *out,
                           size_t cap);

/* Single-writer counter add: a relaxed load and store, which compiles to a
** plain add on x86 (no lock prefix) yet is race-free for readers. */
static inline void stoke__counter_add(atomic_uint_least64_t *c, uint64_t v) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
                        memory_order_relaxed);
}
static inline uint64_t stoke__counter_get(const atomic_uint_least64_t *c) {
  return atomic_load_explicit((atomic_uint_least64_t *)c,
                              memory_order_relaxed);
}

/* What one producer thread measures.  Written only by that thread. */
typedef struct stoke__producer_stats {
  stoke__hist stage[STOKE_STAGE_COUNT];
  atomic_uint_least64_t busy_ns, cpu_ns, chunks, samples;
  /* The device thread's (src/device/copy.c); 0 for workers. */
  atomic_uint_least64_t copy_bytes, pageable_copies;
  /* Stored images: how many said their size, their pixels and longer
  ** sides summed (stoke_sample.src_w, src_h). */
  atomic_uint_least64_t images, image_pixels, image_sides;
  /* Samples served by the packed cache and the RAM cache. */
  atomic_uint_least64_t cache_hits, ram_hits;
} stoke__producer_stats;

/* What the consumer measures.  Written only by the consumer. */
#define STOKE__DEPTH_BINS 16
typedef struct stoke__consumer_stats {
  stoke__hist wait, compute;
  atomic_uint_least64_t depth[STOKE__DEPTH_BINS];
  atomic_uint_least64_t steps, samples, bytes;
  /* The device stage (src/device/stream.c): with the EVENTS clock, wait
  ** and compute come from events and the host's own times go here. */
  stoke__hist host_wait, host_compute, copy_wait, gpu_idle;
  atomic_uint_least64_t untimed_steps;
  atomic_uint_least64_t idle_steps; /* steps the stream found nothing to run
                                       (idle past STOKE__IDLE_STEP_NS) */
  atomic_uint_least64_t fresh_samples; /* echoing: samples of the first
                                          step of each echo group */
} stoke__consumer_stats;

/* A step whose stream idled longer than this before it started found its
** batch not ready: the events' "queue empty" (src/device/stream.c). */
#define STOKE__IDLE_STEP_NS 20000

/* Everything summed, for snapshots and the warm-up baseline. */
typedef struct stoke__stats_snap {
  stoke__hist_snap stage[STOKE_STAGE_COUNT];
  stoke__hist_snap wait, compute;
  uint64_t depth[STOKE__DEPTH_BINS];
  uint64_t busy_ns, cpu_ns, chunks, produced;
  uint64_t steps, samples, bytes;
  stoke__hist_snap host_wait, host_compute, copy_wait, gpu_idle;
  uint64_t copy_bytes, pageable_copies, untimed_steps, idle_steps;
  bool clock_events;      /* set by the reader: the loader's clock is EVENTS */
  uint64_t images, image_pixels, image_sides, cache_hits, ram_hits;
  uint64_t fresh_samples;
} stoke__stats_snap;

void stoke__stats_snap_producer(const stoke__producer_stats *p,
                                stoke__stats_snap *acc);
void stoke__stats_snap_consumer(const stoke__consumer_stats *c,
                                stoke__stats_snap *acc);
void stoke__stats_snap_sub(stoke__stats_snap *a, const stoke__stats_snap *b);
/* Fill the public view from a snapshot (struct_size already checked). */
void stoke__stats_publish(const stoke__stats_snap *s, stoke_stats *out);

/* ---- trace (src/stats/trace.c) -------------------------------------------- */

/* Event kinds: the stages (stoke_stage values), then the consumer's. */
enum {
  /* Above the stages (0 .. STOKE_STAGE_COUNT - 1), with room for more. */
  STOKE__EV_WAIT = 32,    /* consumer inside next(); arg = batch number */
  STOKE__EV_COMPUTE = 33, /* consumer between next() calls */
  STOKE__EV_DEPTH = 34,   /* counter: ready batches seen at next() */
  /* The device stage's tracks, from CUDA events (src/device/): */
  STOKE__EV_GPU_STEP = 35,      /* consumer stream: a step's work */
  STOKE__EV_GPU_COPY_WAIT = 36, /* consumer stream: waiting for the copy */
  STOKE__EV_GPU_IDLE = 37,      /* consumer stream: idle, no step queued */
  /* An instant: an autotuner decision; arg packs from/to workers and
  ** prefetch (16 bits each), n its stoke_autotune_kind. */
  STOKE__EV_AUTOTUNE = 38
};

typedef struct stoke__trace_event {
  int64_t ts_ns, dur_ns;
  uint64_t arg;          /* sample index, or batch number */
  uint32_t kind;
  uint32_t n;            /* samples in a chunk span (cheap samples) */
} stoke__trace_event;

/* A ring of the latest `cap` events of one thread. */
typedef struct stoke__trace {
  pthread_mutex_t mu;    /* leaf: the owner pushes, the exporter copies */
  stoke__trace_event *ev;
  size_t cap, head, len; /* protected by mu */
  uint64_t dropped;      /* protected by mu */
} stoke__trace;

int stoke__trace_init(stoke__trace *t, const stoke_allocator *a, size_t cap);
void stoke__trace_free(stoke__trace *t, const stoke_allocator *a);
/* No-op when t is NULL or tracing is off. */
void stoke__trace_push(stoke__trace *t, int kind, int64_t ts, int64_t dur,
                       uint64_t arg, uint32_t n);
/* Write every track as Trace Event JSON; tids are track indices. */
int stoke__trace_write(FILE *f, stoke__trace *const *tracks,
                       const char *const *names, size_t n_tracks, int64_t t0,
                       const stoke_allocator *a);

/* ---- the loader (src/pipeline/loader.c) ----------------------------------- */

/* stoke_loader_create with the worker threads started through sys (NULL:
** the real calls), so that tests can fail the start of any one worker. */
int stoke__loader_create(const stoke_config *cfg, const stoke__sys *sys,
                         stoke_loader **out);

/* ---- sample production (src/pipeline/produce.c) ---------------------------- */

/* Fill one sample with src; when `timed`, time its stages into ps (else
** the caller accounts for it).  Returns 0 or STOKE_ESAMPLE with s->err set. */
int stoke__produce(stoke_source *src, stoke_sample *s,
                   stoke__producer_stats *ps, bool timed);

/* ---- scheduler statistics (src/os/schedstat.c) ---------------------------- */

/* Sum the run time and the run delay (runnable, not running) of this
** process's threads whose name starts with prefix.  Returns the threads
** found, or -1 where the OS does not say (then both are 0). */
int stoke__schedstat_threads(const char *prefix, int64_t *run_ns,
                             int64_t *delay_ns);

typedef struct stoke__sched_thread {
  long tid;
  int64_t run_ns, delay_ns; /* since the thread started */
} stoke__sched_thread;

/* Those threads one by one (at most cap); the count, or -1. */
int stoke__schedstat_list(const char *prefix, stoke__sched_thread *out,
                          size_t cap);
/* Over a window from base to now: the threads that ran in it (their run
** time grew) and their run time and run delay in it. */
int stoke__schedstat_window(const stoke__sched_thread *base, size_t n_base,
                            const stoke__sched_thread *now, size_t n_now,
                            int64_t *run_ns, int64_t *delay_ns);

#endif /* STOKE_INTERNAL_H */
