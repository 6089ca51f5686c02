/* stats.h — the clocks (src/stats/): log-bucket histograms, what the
** producers and the consumer measure, snapshots, and the Chrome trace.
** Nothing here is API. */
#ifndef STOKE_STATS_STATS_H
#define STOKE_STATS_STATS_H

#include "core/core.h"

#include <pthread.h>

/* ---- histograms and counters (hist.c, stats.c) --------------------------- */

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
/* Any number of writers at once (atomic adds): the HTTP client's request
** latencies, which every worker and read-ahead thread records. */
void stoke__hist_add_shared(stoke__hist *h, uint64_t v);
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
  /* The device thread's (src/pipeline/outlet_device_copy.c); 0 for workers. */
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
  /* Wait + compute of each whole step: NULL unless asked for (the
  ** metrics' step quantiles), since a histogram is ~29 KiB per loader. */
  stoke__hist *step;
  atomic_uint_least64_t depth[STOKE__DEPTH_BINS];
  atomic_uint_least64_t steps, samples, bytes;
  /* The device stage (src/pipeline/outlet_device_stream.c): with the EVENTS clock, wait
  ** and compute come from events and the host's own times go here. */
  stoke__hist host_wait, host_compute, copy_wait, gpu_idle;
  atomic_uint_least64_t untimed_steps;
  atomic_uint_least64_t idle_steps; /* steps the stream found nothing to run
                                       (idle past STOKE__IDLE_STEP_NS) */
  atomic_uint_least64_t fresh_samples; /* echoing: samples of the first
                                          step of each echo group */
} stoke__consumer_stats;

/* A step whose stream idled longer than this before it started found its
** batch not ready: the events' "queue empty" (src/pipeline/outlet_device_stream.c). */
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
/* The whole steps' distribution (c->step), zeros when it is not kept. */
void stoke__stats_step_dist(const stoke__consumer_stats *c,
                            const stoke_allocator *a, stoke_dist *out);
/* Fill the public view from a snapshot (struct_size already checked). */
void stoke__stats_publish(const stoke__stats_snap *s, stoke_stats *out);

/* ---- stages measured elsewhere (stage_block.c) --------------------------- */

/* The producers of the stoke_stage_block at mem; 0 when it is not one. */
unsigned stoke__stage_block_producers(const void *mem);
/* Its producers' counters added into acc (as stoke__stats_snap_producer);
** false when mem is not a block. */
bool stoke__stage_block_read(const void *mem, stoke__stats_snap *acc);
/* The CPU time its producers recorded so far (0 when it is not one). */
int64_t stoke__stage_block_cpu_ns(const void *mem);

/* ---- trace (trace.c) ----------------------------------------------------- */

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

#endif /* STOKE_STATS_STATS_H */
