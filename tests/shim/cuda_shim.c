/* cuda_shim.c — a CUDA driver for tests, on host memory (test-only).
**
** libstoke_cuda_shim.so exports the subset of the driver API that stoke
** uses, under the driver's symbol names, and is loaded through stoke's
** own dlopen path (stoke_config.cuda_library or STOKE_CUDA_LIBRARY), so
** that the device stage runs, unchanged, on a machine without a GPU.  It
** is meant to be stricter than a GPU, not kinder:
**
**  - "device" memory and page-locked host memory are host allocations
**    recorded as what they are; a copy or kernel given an address outside
**    them fails; an asynchronous copy from pageable memory is counted (and,
**    as on a GPU, runs synchronously);
**  - each stream is a thread that runs its work in order, after a random
**    delay (0..delay_us, seeded), so that work on different streams
**    interleaves differently from run to run and an ordering bug shows;
**  - events complete when their stream reaches them and carry the time they
**    did; stream waits and synchronisation block on that;
**  - the moment a copy or kernel *may begin* writing a buffer, the buffer is
**    filled with poison; anything that then reads it (a copy back, a
**    kernel) before the write is over finds poison and it is counted and
**    printed: a slot reused while the GPU may still read it, or a consumer
**    that did not wait for the copy, is caught;
**  - an asynchronous host-to-device copy remembers a hash of its source
**    when it is enqueued and checks the bytes it copied against it: a host
**    buffer rewritten before its copy ran is caught;
**  - calls need cuInit first and a current context (cuCtxPushCurrent) as a
**    driver does, so a stoke thread that forgot its context fails;
**  - each device has its own primary context, and streams, events and
**    device memory belong to the context current where they were made: one
**    used under another context is refused (CUDA_ERROR_INVALID_HANDLE);
**  - streams 0 and CU_STREAM_LEGACY (1) are the current context's legacy
**    stream, CU_STREAM_PER_THREAD (2) the calling thread's own stream in
**    it; work on the legacy stream waits for the context's blocking
**    streams (per-thread streams included) and they wait for it, as the
**    driver orders them (the setting legacy_sync, on by default; 0 turns
**    the implicit ordering off); a CU_STREAM_NON_BLOCKING stream waits for
**    nothing it was not told to;
**  - cuMemcpyHtoD from pageable memory returns once its source is staged,
**    and the bytes land later, on the legacy stream: a reader on another
**    stream before then finds poison;
**  - kernels: stoke_normalize_u8 runs the C version of the per-element code
**    that kernels.cu runs (src/device/kernels.h); stoke_spin_ns sleeps on
**    the stream's thread;
**  - any call can be made to fail (its nth call, with a chosen code).
**
** Settings come from the environment at cuInit (STOKE_SHIM_DEVICES,
** STOKE_SHIM_DRIVER_VERSION, STOKE_SHIM_DELAY_US, STOKE_SHIM_SEED,
** STOKE_SHIM_TOTAL_BYTES, STOKE_SHIM_COPY_GBPS, STOKE_SHIM_COPY_US,
** STOKE_SHIM_LEGACY_SYNC, STOKE_SHIM_FAIL=symbol:n:code)
** or from the control calls at the end (stoke_shim_set, stoke_shim_fail,
** stoke_shim_get), which tests reach with dlopen of the same path. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/cuda_api.h"
#include "device/kernels.h"

#define SHIM_API __attribute__((visibility("default")))

/* ---- settings, counters, faults ------------------------------------------ */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* leaf */

typedef struct settings {
  long long devices, driver_version, delay_us, seed, total_bytes;
  double copy_bytes_per_ns; /* 0: copies take only their delay */
  long long copy_us;        /* and this long besides */
  bool hold_pageable_dma;   /* cuMemcpyHtoD's landing waits for an unhold */
  bool legacy_sync;         /* the legacy stream's implicit ordering */
} settings;

static settings g_set = {1, 13000, 50, 1, 16LL << 30, 0, 0, false,
                         true}; /* g_mu */
static bool g_inited;                                     /* g_mu */

#define MAX_CALL_NAMES 64
typedef struct call_count {
  const char *name;
  long long n;
  long long fail_nth; /* 0: never */
  int fail_code;
} call_count;
static call_count g_calls[MAX_CALL_NAMES]; /* g_mu */
static size_t g_n_calls;                   /* g_mu */

static atomic_llong c_poison_reads, c_changed_sources, c_pageable_async,
    c_copies, c_copies_during_spin, c_kernels, c_spins, c_bad_address,
    c_spinning_syncs, c_pageable_sync;
static atomic_int g_spins_running;

static call_count *call_slot(const char *name) {
  for (size_t i = 0; i < g_n_calls; i++)
    if (strcmp(g_calls[i].name, name) == 0) return &g_calls[i];
  if (g_n_calls == MAX_CALL_NAMES) return NULL;
  g_calls[g_n_calls].name = name;
  return &g_calls[g_n_calls++];
}

/* Count a call; its injected failure code or 0. */
static CUresult enter(const char *name) {
  pthread_mutex_lock(&g_mu);
  call_count *c = call_slot(name);
  CUresult rc = 0;
  if (c) {
    c->n++;
    if (c->fail_nth && c->n == c->fail_nth) rc = c->fail_code;
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ns(int64_t ns) {
  if (ns <= 0) return;
  struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* ---- contexts ------------------------------------------------------------ */

#define SHIM_MAX_DEVICES 8

struct CUstream_st;
#define SHIM_MAX_BLOCKING 64
/* One primary context per device, as a driver keeps. */
struct CUctx_st {
  int refs;                   /* g_mu */
  int ordinal;
  struct CUstream_st *legacy; /* streams 0 and 1 in it; g_ctx_mu */
  /* Its blocking streams (created without CU_STREAM_NON_BLOCKING, and the
  ** per-thread ones), which the legacy stream synchronises with;
  ** g_ctx_mu. */
  struct CUstream_st *blocking[SHIM_MAX_BLOCKING];
  int n_blocking;
};
static struct CUctx_st g_ctxs[SHIM_MAX_DEVICES];
static pthread_mutex_t g_ctx_mu = PTHREAD_MUTEX_INITIALIZER; /* over g_mu */
static _Thread_local CUcontext t_ctx_stack[16];
static _Thread_local int t_ctx_depth;

static struct CUctx_st *cur_ctx(void) {
  return t_ctx_depth ? t_ctx_stack[t_ctx_depth - 1] : NULL;
}

#define CHECK_INIT()                                                          \
  do {                                                                        \
    pthread_mutex_lock(&g_mu);                                                \
    bool ok_ = g_inited;                                                      \
    pthread_mutex_unlock(&g_mu);                                              \
    if (!ok_) return STOKE__CUDA_ERROR_NOT_INITIALIZED;                       \
  } while (0)

/* The calls that act on a context's resources need one current. */
#define CHECK_CTX()                                                           \
  do {                                                                        \
    CHECK_INIT();                                                             \
    if (t_ctx_depth == 0 || !t_ctx_stack[t_ctx_depth - 1])                    \
      return 201; /* CUDA_ERROR_INVALID_CONTEXT */                            \
  } while (0)

#define ENTER(sym)                                                            \
  do {                                                                        \
    CUresult inj_ = enter(sym);                                               \
    if (inj_) return inj_;                                                    \
  } while (0)

/* ---- memory -------------------------------------------------------------- */

enum { MEM_PINNED = 1, MEM_DEVICE = 2 };

typedef struct alloc_rec {
  char *p;
  size_t n;
  int kind;
  struct CUctx_st *ctx; /* device memory: the context it was made in */
  struct alloc_rec *next;
} alloc_rec;
static alloc_rec *g_allocs;     /* g_mu */
static long long g_device_live; /* bytes, g_mu */

static void *track(size_t n, int kind) {
  size_t rounded = (n + 255) / 256 * 256;
  char *p = aligned_alloc(256, rounded ? rounded : 256);
  alloc_rec *r = malloc(sizeof *r);
  if (!p || !r) {
    free(p);
    free(r);
    return NULL;
  }
  r->p = p;
  r->n = n;
  r->kind = kind;
  r->ctx = cur_ctx();
  pthread_mutex_lock(&g_mu);
  r->next = g_allocs;
  g_allocs = r;
  if (kind == MEM_DEVICE) g_device_live += (long long)n;
  pthread_mutex_unlock(&g_mu);
  return p;
}

static bool untrack(void *p, int kind) {
  pthread_mutex_lock(&g_mu);
  for (alloc_rec **pp = &g_allocs; *pp; pp = &(*pp)->next)
    if ((*pp)->p == p && (*pp)->kind == kind) {
      alloc_rec *r = *pp;
      *pp = r->next;
      if (kind == MEM_DEVICE) g_device_live -= (long long)r->n;
      pthread_mutex_unlock(&g_mu);
      free(r->p);
      free(r);
      return true;
    }
  pthread_mutex_unlock(&g_mu);
  return false;
}

/* The kind of [p, p + n) if it lies inside one allocation, else 0. */
static int kind_in(const void *p, size_t n, struct CUctx_st **ctx) {
  const char *c = p;
  int kind = 0;
  pthread_mutex_lock(&g_mu);
  for (alloc_rec *r = g_allocs; r; r = r->next)
    if (c >= r->p && c + n <= r->p + r->n) {
      kind = r->kind;
      if (ctx) *ctx = r->ctx;
      break;
    }
  pthread_mutex_unlock(&g_mu);
  return kind;
}

static int kind_of(const void *p, size_t n) { return kind_in(p, n, NULL); }

/* Device memory of the current context: [p, p + n) inside one device
** allocation made under it.  Memory of another device's context is refused
** as the shim refuses its other handles; a driver with peer access or
** unified addressing might serve it, but stoke must never need that. */
static bool is_own_device(const void *p, size_t n) {
  struct CUctx_st *ctx = NULL;
  return kind_in(p, n, &ctx) == MEM_DEVICE && ctx == cur_ctx();
}

static long long count_allocs(int kind) {
  long long n = 0;
  pthread_mutex_lock(&g_mu);
  for (alloc_rec *r = g_allocs; r; r = r->next) n += r->kind == kind;
  pthread_mutex_unlock(&g_mu);
  return n;
}

/* ---- poison and hashes --------------------------------------------------- */

#define POISON 0xdeadbeefcafef00dULL

/* Poison every 8-byte-aligned word inside [p, p + n). */
static void poison(void *p, size_t n) {
  uintptr_t a = ((uintptr_t)p + 7) & ~(uintptr_t)7, end = (uintptr_t)p + n;
  for (; a + 8 <= end; a += 8) {
    uint64_t v = POISON;
    memcpy((void *)a, &v, 8);
  }
}

static bool has_poison(const void *p, size_t n) {
  uintptr_t a = ((uintptr_t)p + 7) & ~(uintptr_t)7, end = (uintptr_t)p + n;
  for (; a + 8 <= end; a += 8) {
    uint64_t v;
    memcpy(&v, (const void *)a, 8);
    if (v == POISON) return true;
  }
  return false;
}

static void report_poison(const char *who, const void *p, size_t n) {
  atomic_fetch_add(&c_poison_reads, 1);
  fprintf(stderr,
          "stoke-shim: POISON: %s read %zu bytes at %p while a copy or "
          "kernel may still be writing them\n", who, n, p);
}

static uint64_t fnv(const void *p, size_t n) {
  const unsigned char *c = p;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ULL;
  return h;
}

/* ---- events -------------------------------------------------------------- */

struct CUevent_st {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned flags;
  struct CUctx_st *ctx; /* made under it */
  uint64_t recorded;  /* records asked for; mu */
  uint64_t completed; /* the last record its stream reached; mu */
  int64_t t_ns;       /* when it did; mu */
};
static atomic_llong g_events_live;

/* ---- streams ------------------------------------------------------------- */

enum {
  OP_HTOD = 1, OP_DTOH, OP_RECORD, OP_WAIT, OP_NORM, OP_SPIN, OP_HOLD,
  OP_STOP
};

/* Holds (stoke_shim_hold): a stream stops at one until the test lets the
** holds go (stoke_shim_unhold), like a kernel that runs as long as a test
** needs, without timing. */
static pthread_mutex_t g_hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_hold_cv = PTHREAD_COND_INITIALIZER;
static uint64_t g_hold_gen;  /* g_hold_mu: bumped by each unhold */
static long long g_holding;  /* g_hold_mu: streams stopped at a hold now */

typedef struct op {
  int kind;
  void *dst;
  const void *src;
  size_t n;
  uint64_t hash;             /* HTOD: of the source at enqueue */
  bool owns_src;             /* HTOD: src is the shim's staging copy */
  CUevent ev;
  uint64_t gen;              /* RECORD / WAIT: the record meant */
  bool frees_event;          /* WAIT: on an internal event, freed after */
  /* NORM */
  uint32_t count, plane;
  int hwc, f16;
  const stoke__norm_lut *lut;
  uint64_t spin_ns;
  struct op *next;
} op;

struct CUstream_st {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;       /* work arrived, or work done */
  op *head, *tail;         /* mu */
  uint64_t enqueued, done; /* mu */
  unsigned flags;
  uint64_t rng;            /* the stream thread's own */
  int64_t delay_ns;        /* at most, before each op */
  double bytes_per_ns;
  int64_t copy_ns;          /* each host-to-device copy takes this long */
  struct CUctx_st *ctx;     /* the context it belongs to */
  atomic_llong waits;       /* cuStreamWaitEvent calls on it */
};

/* The per-thread default streams made so far, kept so that they stay
** reachable (their threads live until the process ends). */
typedef struct thread_stream {
  struct CUstream_st *s;
  struct thread_stream *next;
} thread_stream;
static thread_stream *g_thread_streams; /* g_ctx_mu */
static _Thread_local struct CUstream_st *t_own_stream[SHIM_MAX_DEVICES];
static atomic_llong g_streams_live;

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void run_op(struct CUstream_st *s, op *o) {
  if (s->delay_ns > 0)
    sleep_ns((int64_t)(next_rand(&s->rng) % (uint64_t)(s->delay_ns + 1)));
  switch (o->kind) {
  case OP_HTOD: {
    int spinning = atomic_load(&g_spins_running);
    poison(o->dst, o->n);
    if (s->bytes_per_ns > 0)
      sleep_ns((int64_t)((double)o->n / s->bytes_per_ns));
    sleep_ns(s->copy_ns);
    memcpy(o->dst, o->src, o->n);
    if (o->owns_src) free((void *)o->src);
    if (fnv(o->dst, o->n) != o->hash) {
      atomic_fetch_add(&c_changed_sources, 1);
      fprintf(stderr,
              "stoke-shim: CHANGED: the %zu host bytes at %p changed between "
              "cuMemcpyHtoDAsync and the copy: a host buffer was reused "
              "before its copy completed\n", o->n, o->src);
    }
    atomic_fetch_add(&c_copies, 1);
    if (spinning || atomic_load(&g_spins_running))
      atomic_fetch_add(&c_copies_during_spin, 1);
    break;
  }
  case OP_DTOH:
    if (has_poison(o->src, o->n))
      report_poison("cuMemcpyDtoHAsync", o->src, o->n);
    memcpy(o->dst, o->src, o->n);
    break;
  case OP_RECORD:
    pthread_mutex_lock(&o->ev->mu);
    if (o->gen > o->ev->completed) {
      o->ev->completed = o->gen;
      o->ev->t_ns = now_ns();
    }
    pthread_cond_broadcast(&o->ev->cv);
    pthread_mutex_unlock(&o->ev->mu);
    break;
  case OP_WAIT:
    pthread_mutex_lock(&o->ev->mu);
    while (o->ev->completed < o->gen)
      pthread_cond_wait(&o->ev->cv, &o->ev->mu);
    pthread_mutex_unlock(&o->ev->mu);
    if (o->frees_event) {
      pthread_mutex_destroy(&o->ev->mu);
      pthread_cond_destroy(&o->ev->cv);
      free(o->ev);
    }
    break;
  case OP_NORM: {
    size_t es = o->f16 ? 2 : 4;
    if (has_poison(o->src, o->count))
      report_poison("stoke_normalize_u8 (its input)", o->src, o->count);
    if (has_poison(o->lut, sizeof *o->lut))
      report_poison("stoke_normalize_u8 (its table)", o->lut,
                    sizeof *o->lut);
    poison(o->dst, (size_t)o->count * es);
    for (uint32_t i = 0; i < o->count; i++)
      stoke__norm_elem(o->src, o->dst, i, o->plane, o->hwc, o->f16, o->lut);
    atomic_fetch_add(&c_kernels, 1);
    break;
  }
  case OP_HOLD:
    pthread_mutex_lock(&g_hold_mu);
    g_holding++;
    pthread_cond_broadcast(&g_hold_cv);
    while (g_hold_gen == o->gen) pthread_cond_wait(&g_hold_cv, &g_hold_mu);
    g_holding--;
    pthread_mutex_unlock(&g_hold_mu);
    break;
  case OP_SPIN:
    atomic_fetch_add(&g_spins_running, 1);
    sleep_ns((int64_t)o->spin_ns);
    atomic_fetch_sub(&g_spins_running, 1);
    atomic_fetch_add(&c_spins, 1);
    break;
  }
}

static void *stream_main(void *arg) {
  struct CUstream_st *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->head) pthread_cond_wait(&s->cv, &s->mu);
    op *o = s->head;
    s->head = o->next;
    if (!s->head) s->tail = NULL;
    pthread_mutex_unlock(&s->mu);
    int kind = o->kind;
    if (kind != OP_STOP) run_op(s, o);
    free(o);
    pthread_mutex_lock(&s->mu);
    s->done++;
    pthread_cond_broadcast(&s->cv);
    if (kind == OP_STOP) break;
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static struct CUstream_st *stream_new(unsigned flags, struct CUctx_st *ctx) {
  struct CUstream_st *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->flags = flags;
  s->ctx = ctx;
  pthread_mutex_lock(&g_mu);
  static uint64_t serial;
  s->rng = (uint64_t)g_set.seed * 0x9e3779b97f4a7c15ULL + ++serial;
  if (!s->rng) s->rng = 1;
  s->delay_ns = g_set.delay_us * 1000;
  s->bytes_per_ns = g_set.copy_bytes_per_ns;
  s->copy_ns = g_set.copy_us * 1000;
  pthread_mutex_unlock(&g_mu);
  if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
    free(s);
    return NULL;
  }
  return s;
}

/* The legacy stream of ctx, made at its first use. */
static struct CUstream_st *legacy_of(struct CUctx_st *ctx) {
  pthread_mutex_lock(&g_ctx_mu);
  if (!ctx->legacy) ctx->legacy = stream_new(0, ctx);
  struct CUstream_st *s = ctx->legacy;
  pthread_mutex_unlock(&g_ctx_mu);
  return s;
}

/* The calling thread's per-thread default stream in ctx.  The driver API's
** stream synchronisation behaviour: "The per-thread default stream is not
** a non-blocking stream and will synchronize with the legacy default
** stream if both are used in a program", and CU_STREAM_PER_THREAD is the
** "stream handle that can be passed as a CUstream to use an implicit
** stream with per-thread synchronization behavior": each host thread has
** its own, so work put on handle 2 by two threads is on two streams. */
static struct CUstream_st *per_thread_of(struct CUctx_st *ctx) {
  struct CUstream_st **own = &t_own_stream[ctx->ordinal];
  if (*own) return *own;
  thread_stream *rec = malloc(sizeof *rec);
  struct CUstream_st *s = rec ? stream_new(0, ctx) : NULL;
  if (!s) {
    free(rec);
    return NULL;
  }
  pthread_mutex_lock(&g_ctx_mu);
  rec->s = s;
  rec->next = g_thread_streams;
  g_thread_streams = rec;
  if (ctx->n_blocking < SHIM_MAX_BLOCKING)
    ctx->blocking[ctx->n_blocking++] = s;
  pthread_mutex_unlock(&g_ctx_mu);
  return *own = s;
}

/* The stream a handle names in ctx: 0 and CU_STREAM_LEGACY (1) the
** context's legacy stream, CU_STREAM_PER_THREAD (2) the calling thread's;
** a stream of another context is refused, as the driver refuses it
** (CUDA_ERROR_INVALID_HANDLE: "event and stream must be on the same CUDA
** context", cuEventRecord's reference; the same holds for work put on a
** stream). */
static bool stream_live(CUstream h);

static CUresult stream_in(struct CUctx_st *ctx, CUstream h,
                          struct CUstream_st **out) {
  struct CUstream_st *s;
  /* A handle cuStreamDestroy took (or never made) is refused before it is
  ** read: a driver's behaviour there is undefined, a test's must not be. */
  if ((uintptr_t)h > 2 && !stream_live(h))
    return STOKE__CUDA_ERROR_INVALID_HANDLE;
  if ((uintptr_t)h <= 1)
    s = legacy_of(ctx);
  else if ((uintptr_t)h == 2)
    s = per_thread_of(ctx);
  else if (h->ctx != ctx)
    return STOKE__CUDA_ERROR_INVALID_HANDLE;
  else
    s = h;
  if (!s) return STOKE__CUDA_ERROR_OUT_OF_MEMORY;
  *out = s;
  return 0;
}

/* The streams cuStreamCreate made and cuStreamDestroy has not taken. */
#define SHIM_MAX_STREAMS 256
static struct CUstream_st *g_live[SHIM_MAX_STREAMS]; /* g_live_mu */
static int g_n_live;                                  /* g_live_mu */
static pthread_mutex_t g_live_mu = PTHREAD_MUTEX_INITIALIZER; /* leaf */

static bool stream_live(CUstream h) {
  pthread_mutex_lock(&g_live_mu);
  bool live = false;
  for (int i = 0; i < g_n_live && !live; i++) live = g_live[i] == h;
  pthread_mutex_unlock(&g_live_mu);
  return live;
}

static bool stream_track(struct CUstream_st *s, bool add) {
  pthread_mutex_lock(&g_live_mu);
  bool ok = true;
  if (add) {
    ok = g_n_live < SHIM_MAX_STREAMS;
    if (ok) g_live[g_n_live++] = s;
  } else {
    for (int i = 0; i < g_n_live; i++)
      if (g_live[i] == s) g_live[i--] = g_live[--g_n_live];
  }
  pthread_mutex_unlock(&g_live_mu);
  return ok;
}

#define STREAM_OF(var, h)                                                     \
  struct CUstream_st *var;                                                    \
  do {                                                                        \
    CUresult sr_ = stream_in(cur_ctx(), (h), &var);                           \
    if (sr_) return sr_;                                                      \
  } while (0)

static op *op_new(int kind) {
  op *o = calloc(1, sizeof *o);
  if (o) o->kind = kind;
  return o;
}

static uint64_t push_raw(struct CUstream_st *s, op *o);

/* Make `waiter` wait for the work enqueued on `on` so far: an internal
** event recorded on `on`, waited for on `waiter`, freed by the waiter. */
static void order_after(struct CUstream_st *waiter, struct CUstream_st *on) {
  struct CUevent_st *e = calloc(1, sizeof *e);
  op *rec = e ? op_new(OP_RECORD) : NULL;
  op *w = rec ? op_new(OP_WAIT) : NULL;
  if (!w) abort(); /* a test tool: out of memory here is not worth more */
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  e->recorded = 1;
  rec->ev = w->ev = e;
  rec->gen = w->gen = 1;
  w->frees_event = true;
  push_raw(on, rec);
  push_raw(waiter, w);
}

/* The driver API's stream synchronisation behaviour
** (docs.nvidia.com/cuda/cuda-driver-api/stream-sync-behavior.html, "Legacy
** default stream"): "The legacy default stream is an implicit stream
** which synchronizes with all other streams in the same CUcontext except
** for non-blocking streams ... When an action is taken in the legacy
** stream such as a kernel launch or cudaStreamWaitEvent(), the legacy stream first waits on all blocking
** streams, the action is queued in the legacy stream, and then all
** blocking streams wait on the legacy stream."  And: "Non-blocking streams
** which do not synchronize with the legacy stream can be created using the
** CU_STREAM_NON_BLOCKING flag": those are never ordered here. */
static void order_legacy(struct CUstream_st *s) {
  struct CUctx_st *ctx = s->ctx;
  pthread_mutex_lock(&g_mu);
  bool on = g_set.legacy_sync;
  pthread_mutex_unlock(&g_mu);
  if (!ctx || !on) return;
  pthread_mutex_lock(&g_ctx_mu);
  struct CUstream_st *legacy = ctx->legacy;
  bool blocking = false;
  for (int i = 0; i < ctx->n_blocking; i++) blocking |= ctx->blocking[i] == s;
  if (s == legacy)
    for (int i = 0; i < ctx->n_blocking; i++)
      order_after(s, ctx->blocking[i]);
  else if (blocking && legacy)
    order_after(s, legacy);
  pthread_mutex_unlock(&g_ctx_mu);
}

/* The action o on s, after what the legacy stream's rules order it after;
** returns the op's number in its stream. */
static uint64_t push(struct CUstream_st *s, op *o) {
  order_legacy(s);
  return push_raw(s, o);
}

static uint64_t push_raw(struct CUstream_st *s, op *o) {
  pthread_mutex_lock(&s->mu);
  if (s->tail)
    s->tail->next = o;
  else
    s->head = o;
  s->tail = o;
  uint64_t n = ++s->enqueued;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return n;
}

static void wait_done(struct CUstream_st *s, uint64_t n) {
  pthread_mutex_lock(&s->mu);
  while (s->done < n) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
}

static void stream_free(struct CUstream_st *s) {
  op *o = op_new(OP_STOP);
  if (!o) abort(); /* a test tool: out of memory here is not worth more */
  if (s->ctx) {
    pthread_mutex_lock(&g_ctx_mu);
    struct CUctx_st *c = s->ctx;
    for (int i = 0; i < c->n_blocking; i++)
      if (c->blocking[i] == s) c->blocking[i--] = c->blocking[--c->n_blocking];
    pthread_mutex_unlock(&g_ctx_mu);
  }
  push_raw(s, o);
  pthread_join(s->thread, NULL);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
}

/* ---- the driver API ------------------------------------------------------ */

static long long env_ll(const char *name, long long def) {
  const char *v = getenv(name);
  return v && *v ? strtoll(v, NULL, 0) : def;
}

static void env_fail(void) {
  /* STOKE_SHIM_FAIL=cuMemAlloc_v2:3:2 fails the third cuMemAlloc_v2 with
  ** CUDA_ERROR_OUT_OF_MEMORY. */
  const char *v = getenv("STOKE_SHIM_FAIL");
  if (!v || !*v) return;
  static char name[64];
  long long nth = 1;
  int code = 999;
  const char *colon = strchr(v, ':');
  size_t len = colon ? (size_t)(colon - v) : strlen(v);
  if (len >= sizeof name) return;
  memcpy(name, v, len);
  name[len] = '\0';
  if (colon) sscanf(colon + 1, "%lld:%d", &nth, &code);
  call_count *c = call_slot(name);
  if (c) {
    c->fail_nth = nth;
    c->fail_code = code;
  }
}

SHIM_API CUresult cuInit(unsigned flags) {
  ENTER("cuInit");
  if (flags != 0) return STOKE__CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  bool first = !g_inited;
  if (first) {
    g_set.devices = env_ll("STOKE_SHIM_DEVICES", g_set.devices);
    g_set.driver_version =
        env_ll("STOKE_SHIM_DRIVER_VERSION", g_set.driver_version);
    g_set.delay_us = env_ll("STOKE_SHIM_DELAY_US", g_set.delay_us);
    g_set.seed = env_ll("STOKE_SHIM_SEED", g_set.seed);
    g_set.total_bytes = env_ll("STOKE_SHIM_TOTAL_BYTES", g_set.total_bytes);
    g_set.copy_us = env_ll("STOKE_SHIM_COPY_US", g_set.copy_us);
    g_set.legacy_sync =
        env_ll("STOKE_SHIM_LEGACY_SYNC", g_set.legacy_sync) != 0;
    long long gbps = env_ll("STOKE_SHIM_COPY_GBPS", 0);
    if (gbps > 0) g_set.copy_bytes_per_ns = (double)gbps;
    env_fail();
    g_inited = true;
  }
  pthread_mutex_unlock(&g_mu);
  return 0;
}

SHIM_API CUresult cuDriverGetVersion(int *v) {
  ENTER("cuDriverGetVersion");
  if (!v) return STOKE__CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  *v = (int)g_set.driver_version;
  pthread_mutex_unlock(&g_mu);
  return 0;
}

SHIM_API CUresult cuDeviceGetCount(int *n) {
  ENTER("cuDeviceGetCount");
  CHECK_INIT();
  pthread_mutex_lock(&g_mu);
  *n = (int)g_set.devices;
  pthread_mutex_unlock(&g_mu);
  return 0;
}

SHIM_API CUresult cuDeviceGet(CUdevice *d, int ordinal) {
  ENTER("cuDeviceGet");
  CHECK_INIT();
  pthread_mutex_lock(&g_mu);
  long long n = g_set.devices;
  pthread_mutex_unlock(&g_mu);
  if (ordinal < 0 || ordinal >= n) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *d = ordinal;
  return 0;
}

SHIM_API CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
  ENTER("cuDeviceGetName");
  CHECK_INIT();
  if (!name || len <= 0) return STOKE__CUDA_ERROR_INVALID_VALUE;
  snprintf(name, (size_t)len, "stoke shim %d", d);
  return 0;
}

SHIM_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
  ENTER("cuDeviceTotalMem_v2");
  CHECK_INIT();
  (void)d;
  pthread_mutex_lock(&g_mu);
  *bytes = (size_t)g_set.total_bytes;
  pthread_mutex_unlock(&g_mu);
  return 0;
}

static bool valid_device(CUdevice d) {
  pthread_mutex_lock(&g_mu);
  long long n = g_set.devices;
  pthread_mutex_unlock(&g_mu);
  return d >= 0 && d < n && d < SHIM_MAX_DEVICES;
}

SHIM_API CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
  ENTER("cuDevicePrimaryCtxRetain");
  CHECK_INIT();
  if (!valid_device(d)) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  pthread_mutex_lock(&g_mu);
  g_ctxs[d].ordinal = d;
  g_ctxs[d].refs++;
  pthread_mutex_unlock(&g_mu);
  *c = &g_ctxs[d];
  return 0;
}

SHIM_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  ENTER("cuDevicePrimaryCtxRelease_v2");
  CHECK_INIT();
  if (d < 0 || d >= SHIM_MAX_DEVICES) return 101;
  pthread_mutex_lock(&g_mu);
  int bad = g_ctxs[d].refs <= 0;
  if (!bad) g_ctxs[d].refs--;
  pthread_mutex_unlock(&g_mu);
  return bad ? 201 : 0;
}

SHIM_API CUresult cuCtxPushCurrent_v2(CUcontext c) {
  ENTER("cuCtxPushCurrent_v2");
  CHECK_INIT();
  if (c < &g_ctxs[0] || c >= &g_ctxs[SHIM_MAX_DEVICES]) return 201;
  if (t_ctx_depth == 16) return STOKE__CUDA_ERROR_INVALID_VALUE;
  t_ctx_stack[t_ctx_depth++] = c;
  return 0;
}

SHIM_API CUresult cuCtxPopCurrent_v2(CUcontext *c) {
  ENTER("cuCtxPopCurrent_v2");
  CHECK_INIT();
  if (t_ctx_depth == 0) return 201;
  CUcontext top = t_ctx_stack[--t_ctx_depth];
  if (c) *c = top;
  return 0;
}

SHIM_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  ENTER("cuMemGetInfo_v2");
  CHECK_CTX();
  pthread_mutex_lock(&g_mu);
  long long total = g_set.total_bytes, used = g_device_live;
  pthread_mutex_unlock(&g_mu);
  *free_bytes = (size_t)(total > used ? total - used : 0);
  *total_bytes = (size_t)total;
  return 0;
}

SHIM_API CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
  ENTER("cuMemHostAlloc");
  CHECK_CTX();
  (void)flags;
  if (!p || bytes == 0) return STOKE__CUDA_ERROR_INVALID_VALUE;
  *p = track(bytes, MEM_PINNED);
  return *p ? 0 : STOKE__CUDA_ERROR_OUT_OF_MEMORY;
}

SHIM_API CUresult cuMemFreeHost(void *p) {
  ENTER("cuMemFreeHost");
  CHECK_CTX();
  return untrack(p, MEM_PINNED) ? 0 : STOKE__CUDA_ERROR_INVALID_VALUE;
}

SHIM_API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
  ENTER("cuMemAlloc_v2");
  CHECK_CTX();
  if (!p || bytes == 0) return STOKE__CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  bool fits = g_device_live + (long long)bytes <= g_set.total_bytes;
  pthread_mutex_unlock(&g_mu);
  void *q = fits ? track(bytes, MEM_DEVICE) : NULL;
  if (!q) return STOKE__CUDA_ERROR_OUT_OF_MEMORY;
  *p = (CUdeviceptr)(uintptr_t)q;
  return 0;
}

SHIM_API CUresult cuMemFree_v2(CUdeviceptr p) {
  ENTER("cuMemFree_v2");
  CHECK_CTX();
  struct CUctx_st *owner = NULL;
  if (kind_in((void *)(uintptr_t)p, 1, &owner) == MEM_DEVICE &&
      owner != cur_ctx())
    return STOKE__CUDA_ERROR_INVALID_HANDLE;
  return untrack((void *)(uintptr_t)p, MEM_DEVICE)
             ? 0
             : STOKE__CUDA_ERROR_INVALID_VALUE;
}

static CUresult bad_address(const char *call, const void *p, size_t n) {
  atomic_fetch_add(&c_bad_address, 1);
  fprintf(stderr, "stoke-shim: %s: %zu bytes at %p are not in an allocation "
                  "of the right kind\n", call, n, p);
  return STOKE__CUDA_ERROR_INVALID_VALUE;
}

/* 0 if [p, p + n) is device memory of the current context; else the
** error, counted and printed. */
static CUresult check_device(const char *call, const void *p, size_t n) {
  struct CUctx_st *owner = NULL;
  if (kind_in(p, n, &owner) != MEM_DEVICE) return bad_address(call, p, n);
  if (owner != cur_ctx()) {
    atomic_fetch_add(&c_bad_address, 1);
    fprintf(stderr, "stoke-shim: %s: %zu bytes at %p belong to device %d's "
                    "context, not the current one\n", call, n, p,
            owner ? owner->ordinal : -1);
    return STOKE__CUDA_ERROR_INVALID_HANDLE;
  }
  return 0;
}

/* Everything enqueued on s so far is done. */
static void sync_stream(struct CUstream_st *s) {
  pthread_mutex_lock(&s->mu);
  uint64_t n = s->enqueued;
  pthread_mutex_unlock(&s->mu);
  wait_done(s, n);
}

SHIM_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src,
                                  size_t bytes) {
  ENTER("cuMemcpyHtoD_v2");
  CHECK_CTX();
  void *d = (void *)(uintptr_t)dst;
  CUresult bad = check_device("cuMemcpyHtoD", d, bytes);
  if (bad) return bad;
  STREAM_OF(s, NULL); /* the legacy stream */
  sync_stream(s);
  if (kind_of(src, bytes) == MEM_PINNED) {
    /* "For transfers from pinned host memory to device memory, the
    ** function is synchronous with respect to the host." */
    memcpy(d, src, bytes);
    return 0;
  }
  /* The driver API's synchronisation behaviour: "For transfers from
  ** pageable host memory to device memory, a stream sync is performed
  ** before the copy is initiated.  The function will return once the
  ** pageable buffer has been copied to the staging memory for DMA transfer
  ** to device memory, but the DMA to final destination may not have
  ** completed."  So the source is staged now, and the bytes land later on
  ** the legacy stream; until then the destination holds poison, which a
  ** kernel on a non-blocking stream may read. */
  void *staged = malloc(bytes ? bytes : 1);
  op *o = staged ? op_new(OP_HTOD) : NULL;
  if (!o) {
    free(staged);
    return STOKE__CUDA_ERROR_OUT_OF_MEMORY;
  }
  memcpy(staged, src, bytes);
  poison(d, bytes);
  o->dst = d;
  o->src = staged;
  o->n = bytes;
  o->owns_src = true;
  o->hash = fnv(staged, bytes);
  atomic_fetch_add(&c_pageable_sync, 1);
  pthread_mutex_lock(&g_mu);
  bool hold = g_set.hold_pageable_dma;
  pthread_mutex_unlock(&g_mu);
  if (hold) {
    /* A test holds the landing until stoke_shim_unhold(). */
    op *h = op_new(OP_HOLD);
    if (h) {
      pthread_mutex_lock(&g_hold_mu);
      h->gen = g_hold_gen;
      pthread_mutex_unlock(&g_hold_mu);
      push(s, h);
    }
  }
  push(s, o);
  return 0;
}

SHIM_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src,
                                       size_t bytes, CUstream h) {
  ENTER("cuMemcpyHtoDAsync_v2");
  CHECK_CTX();
  void *d = (void *)(uintptr_t)dst;
  CUresult bad = check_device("cuMemcpyHtoDAsync", d, bytes);
  if (bad) return bad;
  STREAM_OF(s, h);
  bool pinned = kind_of(src, bytes) == MEM_PINNED;
  op *o = op_new(OP_HTOD);
  if (!o) return STOKE__CUDA_ERROR_OUT_OF_MEMORY;
  o->dst = d;
  o->src = src;
  o->n = bytes;
  o->hash = fnv(src, bytes);
  uint64_t n = push(s, o);
  if (!pinned) {
    /* CUDA stages pageable memory and returns once it was read: the copy
    ** is not asynchronous. */
    atomic_fetch_add(&c_pageable_async, 1);
    wait_done(s, n);
  }
  return 0;
}

SHIM_API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src,
                                       size_t bytes, CUstream h) {
  ENTER("cuMemcpyDtoHAsync_v2");
  CHECK_CTX();
  const void *s_ = (const void *)(uintptr_t)src;
  CUresult bad = check_device("cuMemcpyDtoHAsync", s_, bytes);
  if (bad) return bad;
  STREAM_OF(s, h);
  op *o = op_new(OP_DTOH);
  if (!o) return STOKE__CUDA_ERROR_OUT_OF_MEMORY;
  o->dst = dst;
  o->src = s_;
  o->n = bytes;
  uint64_t n = push(s, o);
  if (kind_of(dst, bytes) != MEM_PINNED) wait_done(s, n);
  return 0;
}

SHIM_API CUresult cuStreamCreate(CUstream *out, unsigned flags) {
  ENTER("cuStreamCreate");
  CHECK_CTX();
  struct CUstream_st *s = stream_new(flags, cur_ctx());
  if (!s) return STOKE__CUDA_ERROR_OUT_OF_MEMORY;
  if (!(flags & STOKE__CU_STREAM_NON_BLOCKING)) {
    pthread_mutex_lock(&g_ctx_mu);
    struct CUctx_st *c = cur_ctx();
    bool room = c->n_blocking < SHIM_MAX_BLOCKING;
    if (room) c->blocking[c->n_blocking++] = s;
    pthread_mutex_unlock(&g_ctx_mu);
    if (!room) {
      stream_free(s);
      return STOKE__CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (!stream_track(s, true)) {
    stream_free(s);
    return STOKE__CUDA_ERROR_OUT_OF_MEMORY;
  }
  atomic_fetch_add(&g_streams_live, 1);
  *out = s;
  return 0;
}

SHIM_API CUresult cuStreamDestroy_v2(CUstream h) {
  ENTER("cuStreamDestroy_v2");
  CHECK_CTX();
  if ((uintptr_t)h <= 2 || !stream_live(h) || h->ctx != cur_ctx())
    return STOKE__CUDA_ERROR_INVALID_HANDLE;
  stream_track(h, false);
  stream_free(h);
  atomic_fetch_sub(&g_streams_live, 1);
  return 0;
}

SHIM_API CUresult cuStreamSynchronize(CUstream h) {
  ENTER("cuStreamSynchronize");
  CHECK_CTX();
  STREAM_OF(s, h);
  sync_stream(s);
  return 0;
}

SHIM_API CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned flags) {
  ENTER("cuStreamWaitEvent");
  CHECK_CTX();
  if (!e || flags != 0) return STOKE__CUDA_ERROR_INVALID_VALUE;
  /* The event may be of another context: cuStreamWaitEvent's reference
  ** says "The event may be from a different device than the stream";
  ** the stream must be of the current one. */
  STREAM_OF(s, h);
  pthread_mutex_lock(&e->mu);
  uint64_t gen = e->recorded;
  pthread_mutex_unlock(&e->mu);
  if (gen == 0) { /* never recorded: nothing to wait for */
    atomic_fetch_add(&s->waits, 1);
    return 0;
  }
  op *o = op_new(OP_WAIT);
  if (!o) return STOKE__CUDA_ERROR_OUT_OF_MEMORY;
  o->ev = e;
  o->gen = gen;
  atomic_fetch_add(&s->waits, 1);
  push(s, o);
  return 0;
}

SHIM_API CUresult cuEventCreate(CUevent *out, unsigned flags) {
  ENTER("cuEventCreate");
  CHECK_CTX();
  struct CUevent_st *e = calloc(1, sizeof *e);
  if (!e) return STOKE__CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_init(&e->mu, NULL);
  pthread_cond_init(&e->cv, NULL);
  e->flags = flags;
  e->ctx = cur_ctx();
  atomic_fetch_add(&g_events_live, 1);
  *out = e;
  return 0;
}

SHIM_API CUresult cuEventDestroy_v2(CUevent e) {
  ENTER("cuEventDestroy_v2");
  CHECK_CTX();
  if (!e) return STOKE__CUDA_ERROR_INVALID_HANDLE;
  /* A driver defers the free until pending records complete; the shim
  ** waits for them instead, which is the same to the caller. */
  pthread_mutex_lock(&e->mu);
  while (e->completed < e->recorded) pthread_cond_wait(&e->cv, &e->mu);
  pthread_mutex_unlock(&e->mu);
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->cv);
  free(e);
  atomic_fetch_sub(&g_events_live, 1);
  return 0;
}

SHIM_API CUresult cuEventRecord(CUevent e, CUstream h) {
  ENTER("cuEventRecord");
  CHECK_CTX();
  if (!e) return STOKE__CUDA_ERROR_INVALID_HANDLE;
  /* "event and stream must be on the same CUDA context"
  ** (cudaEventRecord's reference; the driver's cuEventRecord answers
  ** CUDA_ERROR_INVALID_HANDLE). */
  if (e->ctx != cur_ctx()) return STOKE__CUDA_ERROR_INVALID_HANDLE;
  STREAM_OF(s, h);
  op *o = op_new(OP_RECORD);
  if (!o) return STOKE__CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&e->mu);
  o->gen = ++e->recorded;
  pthread_mutex_unlock(&e->mu);
  o->ev = e;
  push(s, o);
  return 0;
}

SHIM_API CUresult cuEventQuery(CUevent e) {
  ENTER("cuEventQuery");
  CHECK_CTX();
  if (!e) return STOKE__CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&e->mu);
  bool done = e->completed >= e->recorded;
  pthread_mutex_unlock(&e->mu);
  return done ? 0 : STOKE__CUDA_ERROR_NOT_READY;
}

SHIM_API CUresult cuEventSynchronize(CUevent e) {
  ENTER("cuEventSynchronize");
  CHECK_CTX();
  if (!e) return STOKE__CUDA_ERROR_INVALID_HANDLE;
  /* The driver API: without CU_EVENT_BLOCKING_SYNC "the CPU thread will
  ** busy-wait" in cuEventSynchronize; count such waits. */
  if (!(e->flags & STOKE__CU_EVENT_BLOCKING_SYNC))
    atomic_fetch_add(&c_spinning_syncs, 1);
  pthread_mutex_lock(&e->mu);
  uint64_t gen = e->recorded;
  while (e->completed < gen) pthread_cond_wait(&e->cv, &e->mu);
  pthread_mutex_unlock(&e->mu);
  return 0;
}

SHIM_API CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) {
  ENTER("cuEventElapsedTime_v2");
  CHECK_CTX();
  if (!a || !b || !ms) return STOKE__CUDA_ERROR_INVALID_HANDLE;
  if ((a->flags | b->flags) & STOKE__CU_EVENT_DISABLE_TIMING)
    return STOKE__CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&a->mu);
  uint64_t ra = a->recorded, ca = a->completed;
  int64_t ta = a->t_ns;
  pthread_mutex_unlock(&a->mu);
  pthread_mutex_lock(&b->mu);
  uint64_t rb = b->recorded, cb = b->completed;
  int64_t tb = b->t_ns;
  pthread_mutex_unlock(&b->mu);
  if (!ra || !rb) return STOKE__CUDA_ERROR_INVALID_HANDLE;
  if (ca < ra || cb < rb) return STOKE__CUDA_ERROR_NOT_READY;
  *ms = (float)((double)(tb - ta) / 1e6);
  return 0;
}

/* ---- modules and kernels ------------------------------------------------- */

struct CUfunc_st {
  const char *name;
  int kind; /* OP_NORM or OP_SPIN */
};
static struct CUfunc_st k_norm = {STOKE__K_NORMALIZE, OP_NORM};
static struct CUfunc_st k_spin = {STOKE__K_SPIN, OP_SPIN};

struct CUmod_st {
  bool has_norm, has_spin;
};
static atomic_llong g_modules_live;

static bool has_entry(const char *ptx, const char *name) {
  char pat[96];
  snprintf(pat, sizeof pat, ".entry %s(", name);
  return strstr(ptx, pat) != NULL;
}

SHIM_API CUresult cuModuleLoadData(CUmodule *m, const void *image) {
  ENTER("cuModuleLoadData");
  CHECK_CTX();
  const char *ptx = image;
  if (!ptx || !strstr(ptx, ".version") || !strstr(ptx, ".target"))
    return 218; /* CUDA_ERROR_INVALID_PTX */
  /* PTX ISA 9.0 came with CUDA 13.0 (the PTX ISA's release notes); older
  ** drivers answer CUDA_ERROR_UNSUPPORTED_PTX_VERSION. */
  int isa_major = 0;
  if (sscanf(strstr(ptx, ".version") + 8, "%d", &isa_major) == 1 &&
      isa_major >= 9) {
    pthread_mutex_lock(&g_mu);
    long long drv = g_set.driver_version;
    pthread_mutex_unlock(&g_mu);
    if (drv < 13000) return 222; /* CUDA_ERROR_UNSUPPORTED_PTX_VERSION */
  }
  struct CUmod_st *mod = calloc(1, sizeof *mod);
  if (!mod) return STOKE__CUDA_ERROR_OUT_OF_MEMORY;
  mod->has_norm = has_entry(ptx, STOKE__K_NORMALIZE);
  mod->has_spin = has_entry(ptx, STOKE__K_SPIN);
  atomic_fetch_add(&g_modules_live, 1);
  *m = mod;
  return 0;
}

SHIM_API CUresult cuModuleUnload(CUmodule m) {
  ENTER("cuModuleUnload");
  CHECK_CTX();
  if (!m) return STOKE__CUDA_ERROR_INVALID_HANDLE;
  free(m);
  atomic_fetch_sub(&g_modules_live, 1);
  return 0;
}

SHIM_API CUresult cuModuleGetFunction(CUfunction *f, CUmodule m,
                                      const char *name) {
  ENTER("cuModuleGetFunction");
  CHECK_CTX();
  if (!m || !name) return STOKE__CUDA_ERROR_INVALID_HANDLE;
  if (m->has_norm && strcmp(name, STOKE__K_NORMALIZE) == 0)
    *f = &k_norm;
  else if (m->has_spin && strcmp(name, STOKE__K_SPIN) == 0)
    *f = &k_spin;
  else
    return STOKE__CUDA_ERROR_NOT_FOUND;
  return 0;
}

SHIM_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy,
                                 unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shared_bytes,
                                 CUstream h, void **params, void **extra) {
  ENTER("cuLaunchKernel");
  CHECK_CTX();
  (void)shared_bytes;
  if (!f || !params || extra) return STOKE__CUDA_ERROR_INVALID_VALUE;
  if (!gx || !gy || !gz || !bx || !by || !bz || bx * by * bz > 1024)
    return STOKE__CUDA_ERROR_INVALID_VALUE;
  STREAM_OF(s, h);
  op *o = op_new(f->kind);
  if (!o) return STOKE__CUDA_ERROR_OUT_OF_MEMORY;
  /* Arguments are copied at launch, as the driver does. */
  if (f->kind == OP_NORM) {
    memcpy(&o->src, params[0], sizeof(void *));
    memcpy(&o->dst, params[1], sizeof(void *));
    memcpy(&o->count, params[2], sizeof(uint32_t));
    memcpy(&o->plane, params[3], sizeof(uint32_t));
    memcpy(&o->hwc, params[4], sizeof(int));
    memcpy(&o->f16, params[5], sizeof(int));
    memcpy(&o->lut, params[6], sizeof(void *));
    size_t es = o->f16 ? 2 : 4;
    if (!is_own_device(o->src, o->count) ||
        !is_own_device(o->dst, (size_t)o->count * es) ||
        !is_own_device(o->lut, sizeof *o->lut) ||
        (!o->hwc && o->plane == 0)) {
      const void *in = o->src;
      uint32_t count = o->count;
      free(o);
      return bad_address(STOKE__K_NORMALIZE, in, count);
    }
  } else {
    memcpy(&o->spin_ns, params[0], sizeof(uint64_t));
  }
  push(s, o);
  return 0;
}

/* ---- errors -------------------------------------------------------------- */

static const struct {
  int code;
  const char *name, *text;
} k_errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain."},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

/* The name (or text) of error e. */
static CUresult error_field(CUresult e, bool text, const char **s) {
  for (size_t i = 0; i < sizeof k_errors / sizeof k_errors[0]; i++)
    if (k_errors[i].code == e) {
      *s = text ? k_errors[i].text : k_errors[i].name;
      return 0;
    }
  *s = NULL;
  return STOKE__CUDA_ERROR_INVALID_VALUE;
}

SHIM_API CUresult cuGetErrorName(CUresult e, const char **s) {
  return error_field(e, false, s);
}

SHIM_API CUresult cuGetErrorString(CUresult e, const char **s) {
  return error_field(e, true, s);
}

/* ---- control, for tests -------------------------------------------------- */

/* Settings by name: devices, driver_version, delay_us, seed, total_bytes,
** copy_gbps (bytes per ns; 0: copies take no time), copy_us (each copy
** takes this long besides), hold_pageable_dma (1: the bytes of a
** cuMemcpyHtoD from pageable memory land only at stoke_shim_unhold, so a
** test sees deterministically who reads them too early), legacy_sync (1,
** the default: the legacy stream's implicit ordering with blocking
** streams; 0: none).  Streams
** created
** later use the new delay and bandwidth. */
SHIM_API int stoke_shim_set(const char *key, long long v) {
  int rc = 0;
  pthread_mutex_lock(&g_mu);
  if (strcmp(key, "devices") == 0)
    g_set.devices = v;
  else if (strcmp(key, "driver_version") == 0)
    g_set.driver_version = v;
  else if (strcmp(key, "delay_us") == 0)
    g_set.delay_us = v;
  else if (strcmp(key, "seed") == 0)
    g_set.seed = v;
  else if (strcmp(key, "total_bytes") == 0)
    g_set.total_bytes = v;
  else if (strcmp(key, "copy_gbps") == 0)
    g_set.copy_bytes_per_ns = (double)v;
  else if (strcmp(key, "copy_us") == 0)
    g_set.copy_us = v;
  else if (strcmp(key, "hold_pageable_dma") == 0)
    g_set.hold_pageable_dma = v != 0;
  else if (strcmp(key, "legacy_sync") == 0)
    g_set.legacy_sync = v != 0;
  else
    rc = -1;
  pthread_mutex_unlock(&g_mu);
  return rc;
}

/* Fail the nth call of `symbol` (counting from now) with `code`; n 0
** clears. */
SHIM_API int stoke_shim_fail(const char *symbol, long long nth, int code) {
  pthread_mutex_lock(&g_mu);
  call_count *c = call_slot(symbol);
  if (c) {
    c->fail_nth = nth ? c->n + nth : 0;
    c->fail_code = code;
  }
  pthread_mutex_unlock(&g_mu);
  return c ? 0 : -1;
}

/* Stop stream h at this point of its work until stoke_shim_unhold(). */
SHIM_API int stoke_shim_hold(CUstream h) {
  op *o = op_new(OP_HOLD);
  if (!o) return -1;
  pthread_mutex_lock(&g_hold_mu);
  o->gen = g_hold_gen;
  pthread_mutex_unlock(&g_hold_mu);
  /* Handles 0-2 in the calling thread's context (device 0's without). */
  struct CUstream_st *s;
  if (stream_in(cur_ctx() ? cur_ctx() : &g_ctxs[0], h, &s) != 0) {
    free(o);
    return -1;
  }
  push(s, o);
  return 0;
}

/* Let every hold enqueued so far go. */
SHIM_API void stoke_shim_unhold(void) {
  pthread_mutex_lock(&g_hold_mu);
  g_hold_gen++;
  pthread_cond_broadcast(&g_hold_cv);
  pthread_mutex_unlock(&g_hold_mu);
}

/* Wait until n streams are stopped at a hold. */
SHIM_API void stoke_shim_wait_holding(long long n) {
  pthread_mutex_lock(&g_hold_mu);
  while (g_holding < n) pthread_cond_wait(&g_hold_cv, &g_hold_mu);
  pthread_mutex_unlock(&g_hold_mu);
}

/* Clear every injected failure and zero the counters (not the calls). */
SHIM_API void stoke_shim_reset(void) {
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_n_calls; i++) g_calls[i].fail_nth = 0;
  pthread_mutex_unlock(&g_mu);
  atomic_store(&c_poison_reads, 0);
  atomic_store(&c_changed_sources, 0);
  atomic_store(&c_pageable_async, 0);
  atomic_store(&c_copies, 0);
  atomic_store(&c_copies_during_spin, 0);
  atomic_store(&c_kernels, 0);
  atomic_store(&c_spins, 0);
  atomic_store(&c_spinning_syncs, 0);
  atomic_store(&c_bad_address, 0);
  atomic_store(&c_pageable_sync, 0);
}

/* Counters: poison_reads, changed_sources, pageable_async, copies,
** copies_during_spin, kernels, spins, bad_address, pageable_sync
** (cuMemcpyHtoD calls from pageable memory); live resources:
** pinned, device, device_bytes, streams, events, modules, ctx_refs;
** "calls:SYMBOL": calls of SYMBOL so far; "waits:HANDLE": the
** cuStreamWaitEvent calls on the stream of that (decimal) handle.  -1 for an unknown key. */
SHIM_API long long stoke_shim_get(const char *key) {
  if (strncmp(key, "waits:", 6) == 0) {
    /* A stream created by cuStreamCreate, by its handle in decimal. */
    uintptr_t h = (uintptr_t)strtoull(key + 6, NULL, 10);
    if (h <= 2) return -1;
    return atomic_load(&((struct CUstream_st *)h)->waits);
  }
  if (strncmp(key, "calls:", 6) == 0) {
    pthread_mutex_lock(&g_mu);
    long long n = 0;
    for (size_t i = 0; i < g_n_calls; i++)
      if (strcmp(g_calls[i].name, key + 6) == 0) n = g_calls[i].n;
    pthread_mutex_unlock(&g_mu);
    return n;
  }
  static const struct {
    const char *key;
    atomic_llong *c;
  } counters[] = {{"poison_reads", &c_poison_reads},
                  {"changed_sources", &c_changed_sources},
                  {"pageable_async", &c_pageable_async},
                  {"copies", &c_copies},
                  {"copies_during_spin", &c_copies_during_spin},
                  {"kernels", &c_kernels},
                  {"spins", &c_spins},
                  {"spinning_syncs", &c_spinning_syncs},
                  {"bad_address", &c_bad_address},
                  {"pageable_sync", &c_pageable_sync},
                  {"streams", &g_streams_live},
                  {"events", &g_events_live},
                  {"modules", &g_modules_live}};
  for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
    if (strcmp(key, counters[i].key) == 0) return atomic_load(counters[i].c);
  if (strcmp(key, "pinned") == 0) return count_allocs(MEM_PINNED);
  if (strcmp(key, "device") == 0) return count_allocs(MEM_DEVICE);
  long long v = -1;
  pthread_mutex_lock(&g_mu);
  if (strcmp(key, "device_bytes") == 0) v = g_device_live;
  if (strcmp(key, "ctx_refs") == 0) {
    v = 0;
    for (int i = 0; i < SHIM_MAX_DEVICES; i++) v += g_ctxs[i].refs;
  }
  pthread_mutex_unlock(&g_mu);
  return v;
}
