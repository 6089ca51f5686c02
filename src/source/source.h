/* source.h — what sample i is (src/source/): the sample handle given to
** fills, the table of operations each kind of source implements, the
** source handle, and the quarantine.  Nothing here is API. */
#ifndef STOKE_SOURCE_SOURCE_H
#define STOKE_SOURCE_SOURCE_H

#include "core/core.h"
#include "sampler/sampler.h"

struct stoke__trace;
struct stoke__cache;
struct stoke__http;
struct stoke__rcache_counts;

struct stoke_sample {
  size_t index;
  uint64_t epoch;
  uint64_t seed;          /* the loader's */
  stoke_rng rng;          /* valid once rng_lazy is false */
  /* The stream is not derived yet: the loader leaves it to the first use
  ** (stoke__sample_rng), so a sample whose fill draws nothing (a stored
  ** tensor) skips the key's mixing.  The stream is a pure function of
  ** (seed, epoch, index), so when it is derived changes no drawn value.
  ** false (a zeroed sample): rng is used as it is. */
  bool rng_lazy;
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
  ** unknown), summed into the producer's statistics; the loader zeroes
  ** them again after each fill (src/pipeline/produce.c). */
  uint32_t src_w, src_h;
  struct stoke__cache *cache; /* the loader's packed cache, or NULL */
};

/* The sample's random stream, derived on first use from (seed, epoch,
** index) when the loader left it lazy.  Every read of s->rng goes through
** here. */
static inline stoke_rng *stoke__sample_rng(stoke_sample *s) {
  if (s->rng_lazy) {
    stoke_rng_init(&s->rng, s->seed, s->epoch, s->index);
    s->rng_lazy = false;
  }
  return &s->rng;
}

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
  /* Optional: memory the source holds while it is open, not per worker
  ** (a remote set's read-ahead buffer), for the host ledger. */
  uint64_t (*held_bytes)(const stoke_source *src);
  /* Optional: the class names and sample index's label (image sources,
  ** for stoke_source_n_classes, _class_name and _label); without them a
  ** source has no classes and every label is -1.  index < n_samples. */
  size_t (*n_classes)(const stoke_source *src);
  const char *(*class_name)(const stoke_source *src, size_t c);
  int64_t (*label)(const stoke_source *src, size_t index);
  /* Optional: the HTTP client the fills read through (remote packed
  ** shards), for the loader's fetch statistics; NULL: none. */
  const struct stoke__http *(*http)(const stoke_source *src);
  /* Optional: the remote shard cache's counts since the source opened
  ** (storage/rcache.h), for the loader's stats; false: no remote cache. */
  bool (*rcache_counts)(const stoke_source *src,
                        struct stoke__rcache_counts *out);
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
/* ops->http, or NULL: the source reads nothing remote while it runs. */
const struct stoke__http *stoke__source_http(const stoke_source *src);
/* ops->rcache_counts into *out, or false: the source has no remote cache. */
bool stoke__source_rcache_counts(const stoke_source *src,
                                 struct stoke__rcache_counts *out);

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

/* ---- the quarantine (quarantine.c, docs/quarantine.md) ------------------- */

typedef struct stoke__quarantine stoke__quarantine;

enum {
  STOKE__QUARANTINE_APPEND = 0, /* read the file if it exists (its header
                                   must match src), then append to it */
  STOKE__QUARANTINE_REWRITE = 1 /* write a new file (a temporary beside
                                   PATH, renamed over PATH at close) */
};
/* Files are private (os/private_file.h): made 0600 under a temporary name
** and renamed into place; an existing one owned by another user or
** writable by group or others is refused (STOKE_EINVAL). */

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

#endif /* STOKE_SOURCE_SOURCE_H */
