/* stoke.h — the only public header of libstoke.
**
** stoke keeps an accelerator fed: worker threads read, decode and transform
** samples straight into batch buffers, prefetch ahead, and hand batches out in
** a deterministic order.  It measures, on every step, the two clocks of the
** consumer contract:
**
**   stoke_batch *b;
**   while (stoke_loader_next(loader, &b) == STOKE_OK) {  // time in next: waiting
**     train_step(b);                                     // until next next:
**     stoke_batch_release(b);                            //   computing
**   }
**
** Conventions (see DESIGN.md):
**  - Functions return 0 (STOKE_OK) or a negative STOKE_E* code; a few return
**    the positive STOKE_END.  Values come back through out-parameters.
**  - Inputs are borrowed for the duration of the call unless a comment says
**    otherwise.  Batches are lent: give them back with stoke_batch_release().
**  - Thread safety: one thread at a time per handle, unless stated.
**  - A handle is unusable in a child created by fork().
*/
#ifndef STOKE_H
#define STOKE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(STOKE_BUILDING_LIBRARY) && defined(__GNUC__)
#define STOKE_API __attribute__((visibility("default")))
#else
#define STOKE_API
#endif

#define STOKE_VERSION_MAJOR 0
#define STOKE_VERSION_MINOR 1
#define STOKE_VERSION_PATCH 0
#define STOKE_VERSION_STRING "0.1.0"

/* The library's version string, e.g. "0.1.0".  Static storage. */
STOKE_API const char *stoke_version(void);

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */

/* X(name, value, text): the one list of error codes. */
#define STOKE_ERRNO_MAP(X)                                                    \
  X(INVAL, -1, "invalid argument")                                            \
  X(NOMEM, -2, "out of memory")                                               \
  X(IO, -3, "input/output error")                                             \
  X(SAMPLE, -4, "a sample could not be produced")                             \
  X(TIMEDOUT, -5, "a sample took longer than the sample timeout")             \
  X(BADSTATE, -6, "the handle is unusable after an earlier fatal error")      \
  X(BUSY, -7, "every batch slot is held by the caller")                       \
  X(BUDGET, -8, "the memory budget is too small for this configuration")      \
  X(NOTSUP, -9, "not supported in this build or on this machine")             \
  X(THREAD, -10, "a thread could not be created")                             \
  X(FORMAT, -11, "malformed input data")                                      \
  X(DEVICE, -12, "a CUDA driver call failed")                                 \
  X(FAILURES, -13, "more bad samples than the failure budget allows")

typedef enum stoke_code {
  STOKE_OK = 0,
  STOKE_END = 1,   /* stoke_loader_next: the epoch is over (not an error) */
  STOKE_AGAIN = 2, /* stoke_loader_next_timed: no batch yet (not an error) */
#define STOKE__ERR_ENUM(name, value, text) STOKE_E##name = value,
  STOKE_ERRNO_MAP(STOKE__ERR_ENUM)
#undef STOKE__ERR_ENUM
} stoke_code;

/* Static text for a code ("unknown error" for one that is not listed). */
STOKE_API const char *stoke_strerror(int code);

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */

/* Allocation hooks.  NULL means malloc/free.  The functions must be
** thread-safe.  They receive every allocation of the library's own code and
** of libspng (routed through spng_ctx_new2), with three exceptions that
** call malloc directly because their APIs take no allocator:
**  - libjpeg-turbo's working memory: per decoder (one per worker) a few KB
**    of tables; per image its row buffers (about 16 rows of the decoded
**    width, 3 bytes a pixel) and, for progressive JPEGs and for stoke
**    pack's lossless rewrite, the whole image's DCT coefficients (2 bytes
**    per coefficient: about 3 bytes a pixel at 4:2:0, 6 at 4:4:4), even
**    when only a crop is decoded.  That is why max_pixels bounds the whole
**    image: it is checked on the header before libjpeg allocates any of it
**    (tests/fault/test_bomb.c watches the process's malloc to check this);
**  - glob(3) while expanding path patterns (a few bytes per path);
**  - thread stacks (1 MiB per worker, mapped by pthreads).
** Memory a hook refuses surfaces as STOKE_ENOMEM (or, inside a worker, as
** a failed sample whose message says "out of memory"). */
typedef struct stoke_allocator {
  void *(*alloc)(void *user, size_t n_bytes);
  void (*free)(void *user, void *ptr);
  void *user;
} stoke_allocator;

/* ------------------------------------------------------------------------ */
/* Data types and fields                                                     */

typedef enum stoke_dtype {
  STOKE_U8 = 1,
  STOKE_I32 = 2,
  STOKE_I64 = 3,
  STOKE_F16 = 4,
  STOKE_F32 = 5,
  STOKE_F64 = 6,
  /* Since 0.2: the other element types of torch tensors and NumPy arrays
  ** that batches of Python datasets carry. */
  STOKE_I8 = 7,
  STOKE_I16 = 8,
  STOKE_BOOL = 9, /* one byte, 0 or 1 */
  STOKE_BF16 = 10 /* bfloat16: the top half of an IEEE float32 */
} stoke_dtype;

/* Bytes of one element of dtype, or 0 for an unknown dtype. */
STOKE_API size_t stoke_dtype_size(int dtype);
/* "u8", "i32", "i64", "f16", "f32", "f64", "i8", "i16", "bool", "bf16";
** "?" for an unknown dtype. */
STOKE_API const char *stoke_dtype_name(int dtype);

#define STOKE_MAX_DIMS 8
#define STOKE_MAX_FIELDS 16 /* fields per sample */

/* The shape of one field of one sample, e.g. image {3,224,224} f32 or the
** label {} i64 (ndim 0, a scalar). */
typedef struct stoke_field_desc {
  const char *name; /* borrowed, copied; NULL: named "f<index>" */
  int dtype;        /* stoke_dtype */
  int ndim;         /* 0..STOKE_MAX_DIMS */
  int64_t shape[STOKE_MAX_DIMS];
} stoke_field_desc;

/* One field of a batch: a C-contiguous array of n samples, i.e. shape
** {n, desc.shape...}.  Valid until the batch is released. */
typedef struct stoke_tensor {
  const char *name;
  void *data;
  int dtype;
  int ndim; /* desc.ndim + 1: the batch dimension first */
  int64_t shape[STOKE_MAX_DIMS + 1];
  size_t n_bytes;
} stoke_tensor;

/* ------------------------------------------------------------------------ */
/* Random numbers                                                            */

/* A counter-based random stream.  Each sample of each epoch gets its own,
** derived from (seed, epoch, sample index) only, so augmentation is the
** same whatever the worker count and timing.  The layout is public so that
** it can live on the stack; treat the fields as private. */
typedef struct stoke_rng {
  uint64_t key;
  uint64_t counter;
} stoke_rng;

/* Make the stream of (seed, a, b): samples use (seed, epoch, index). */
STOKE_API void stoke_rng_init(stoke_rng *rng, uint64_t seed, uint64_t a,
                              uint64_t b);
STOKE_API uint64_t stoke_rng_u64(stoke_rng *rng);
/* Uniform in [0, 1) with 53 random bits. */
STOKE_API double stoke_rng_uniform(stoke_rng *rng);
/* Uniform integer in [0, n), unbiased; n > 0. */
STOKE_API uint64_t stoke_rng_below(stoke_rng *rng, uint64_t n);
/* Standard normal N(0, 1). */
STOKE_API double stoke_rng_normal(stoke_rng *rng);

/* ------------------------------------------------------------------------ */
/* Sources: where sample i comes from                                        */

typedef struct stoke_source stoke_source; /* opaque, reference-counted */
typedef struct stoke_sample stoke_sample; /* opaque, lent to a fill callback */
typedef struct stoke_batch stoke_batch;   /* opaque, see "The loader" */

/* Fill one sample.  Called from worker threads, possibly concurrently for
** different samples; never for the same sample twice in one epoch.  Write
** each field's bytes to stoke_sample_field(s, f).  Return 0, or a nonzero
** value after stoke_sample_fail() to report a bad sample. */
typedef int (*stoke_fill_fn)(void *user, stoke_sample *s);

/* The index of the sample to fill (0..n_samples-1). */
STOKE_API size_t stoke_sample_index(const stoke_sample *s);
/* The epoch being produced. */
STOKE_API uint64_t stoke_sample_epoch(const stoke_sample *s);
/* This sample's random stream (seed, epoch, index); owned by the loader. */
STOKE_API stoke_rng *stoke_sample_rng(stoke_sample *s);
/* Destination of field f: desc bytes, aligned to at least 16 bytes when the
** field's size is a multiple of 16.  NULL for a bad f. */
STOKE_API void *stoke_sample_field(stoke_sample *s, size_t f);
/* From now on, time spent on this sample counts toward `stage` (a
** stoke_stage: READ, DECODE, TRANSFORM, or for samples made by Python code
** PYTHON, GIL_WAIT and COLLATE).  A fill starts in READ. */
STOKE_API void stoke_sample_stage(stoke_sample *s, int stage);
/* Record why this sample failed (printf format); returns STOKE_ESAMPLE. */
STOKE_API int stoke_sample_fail(stoke_sample *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The batch this sample is written into (its number, epoch and size, see
** "Batch views"; borrowed for the call) and the sample's position in it
** (0..size-1).  A fill that collates into memory of its own (one buffer
** per batch) keys it by batch and places the sample by position.  Since
** 0.2. */
STOKE_API const stoke_batch *stoke_sample_batch(const stoke_sample *s);
STOKE_API size_t stoke_sample_position(const stoke_sample *s);

/* In-memory tensors: n_fields arrays of n_samples C-contiguous samples each
** (data[f] holds n_samples * size-of-field bytes).  The arrays are borrowed:
** they must stay valid and unchanged until the source and every loader using
** it are destroyed.  Reads copy straight from them into the batch.  */
STOKE_API int stoke_source_create_tensors(size_t n_samples, size_t n_fields,
                                          const stoke_field_desc *fields,
                                          const void *const *data,
                                          stoke_source **out);

/* A user callback fills each sample.  `user` is borrowed like the arrays
** above. */
STOKE_API int stoke_source_create_callback(size_t n_samples, size_t n_fields,
                                           const stoke_field_desc *fields,
                                           stoke_fill_fn fill, void *user,
                                           stoke_source **out);

/* A callback source with hooks on the worker threads and on whole
** batches, for clients that keep state per thread (an interpreter's thread
** state, a decoder context) or finish a batch as a whole (a collate
** function).  Every hook is optional and called without any lock of the
** loader held; `user` is borrowed like the arrays above.  Since 0.2. */
typedef struct stoke_callback_config {
  size_t struct_size;       /* set by stoke_callback_config_init() */
  size_t n_samples;         /* > 0: the sample indices are 0..n_samples-1
                               (with order_given, the indices the caller
                               gives, which need not all be used) */
  size_t n_fields;
  const stoke_field_desc *fields; /* copied */
  stoke_fill_fn fill;       /* required */
  void *user;
  /* On each worker thread once, before it produces anything, with its
  ** number 0..W-1 (never with W = 0, whose samples are made in the
  ** caller's thread).  Nonzero fails the loader with STOKE_ETHREAD and the
  ** message written to err[0..cap). */
  int (*thread_start)(void *user, unsigned worker, char *err, size_t cap);
  /* On the same thread when it stops (stoke_loader_destroy), if its
  ** thread_start succeeded. */
  void (*thread_stop)(void *user, unsigned worker);
  /* By the thread that wrote the last sample of batch b (every sample
  ** written and visible), before b is ready to be handed out: a collate
  ** step over the whole batch.  Not called for a batch whose epoch was
  ** ended (stoke_loader_end_epoch) before it was complete.  Nonzero fails
  ** the loader with STOKE_ESAMPLE and the message written to err (the
  ** loader adds the batch and epoch).  Its time counts as COLLATE. */
  int (*batch_done)(void *user, const stoke_batch *b, char *err, size_t cap);
  /* When the source is freed (the last reference dropped, any thread). */
  void (*destroy)(void *user);
} stoke_callback_config;

STOKE_API void stoke_callback_config_init(stoke_callback_config *cfg);
/* Errors as stoke_source_create_callback (STOKE_EINVAL for a bad cfg, with
** the message in stoke_errmsg(NULL)).  On failure destroy is not called. */
STOKE_API int stoke_source_create_callback_ex(const stoke_callback_config *cfg,
                                              stoke_source **out);

/* Synthetic sources, for measurement.  Each sample has two fields:
** "x" (f32, shape) filled with uniform noise from its stream, and "y"
** (i64 scalar) = index % n_classes. */
typedef enum stoke_synthetic_kind {
  STOKE_SYNTH_SLEEP = 1,  /* the cost is spent waiting (I/O-like) */
  STOKE_SYNTH_SPIN = 2,   /* the cost is spent burning this thread's CPU */
  STOKE_SYNTH_TENSOR = 3  /* no cost: random features held in memory */
} stoke_synthetic_kind;

typedef enum stoke_cost_dist {
  STOKE_COST_FIXED = 1,     /* every sample costs cost_ns */
  STOKE_COST_EXP = 2,       /* exponential with mean cost_ns */
  STOKE_COST_LOGNORMAL = 3, /* lognormal with mean cost_ns and log-sd sigma */
  STOKE_COST_RARE = 4       /* since 0.2: a share rare_frac of the samples
                               cost rare_factor x the others, the mean
                               cost_ns: rare, very long samples */
} stoke_cost_dist;

typedef struct stoke_synthetic_config {
  size_t struct_size; /* set by stoke_synthetic_config_init() */
  int kind;           /* stoke_synthetic_kind; default SLEEP */
  int64_t cost_ns;    /* mean cost per sample; default 5 ms */
  int dist;           /* stoke_cost_dist; default FIXED */
  double sigma;       /* LOGNORMAL only; default 1.0 */
  size_t n_samples;   /* default 256 */
  int ndim;           /* shape of "x"; default {3, 32, 32} */
  int64_t shape[STOKE_MAX_DIMS];
  unsigned n_classes; /* default 2 */
  uint64_t seed;      /* TENSOR: seed of the in-memory features; default 0 */
  int64_t wait_ns;    /* since 0.2: a fixed wait after the cost, for a mixed
                         sample (SPIN: a CPU-burning decode, then a waiting
                         read); default 0 */
  double rare_frac;   /* RARE: the share of long samples; default 0.02 */
  double rare_factor; /* RARE: how much longer they are; default 20 */
} stoke_synthetic_config;

STOKE_API void stoke_synthetic_config_init(stoke_synthetic_config *cfg);
STOKE_API int stoke_source_create_synthetic(const stoke_synthetic_config *cfg,
                                            stoke_source **out);

/* Image datasets.  Each sample has two fields: "image" (the transform's
** output: {3, H, W} for chw or {H, W, 3} for hwc, in its dtype) and "label"
** (i64).  Per sample: read the encoded bytes, decode only the window the
** crop needs (JPEG: region decoding and DCT-domain scaling at 1/2, 1/4 or
** 1/8 when the crop is that much larger than the output), then resample
** with PIL's bilinear filter (antialiased when shrinking), flip, normalize
** and write straight into the batch.  Random choices come from the sample's
** stream, so a batch is the same whatever the worker count. */
typedef enum stoke_image_kind {
  STOKE_IMAGES_AUTO = 0,   /* a directory: FOLDER; *.tar: TAR; *.stoke: PACKED */
  STOKE_IMAGES_FOLDER = 1, /* torchvision ImageFolder: root/class/x.jpg */
  STOKE_IMAGES_TAR = 2,    /* WebDataset-style shards: a path, a pattern such
                              as train-{0000..0099}.tar, or a glob */
  STOKE_IMAGES_PACKED = 3  /* stoke pack's shards (docs/packed-format.md) */
} stoke_image_kind;

typedef struct stoke_image_config {
  size_t struct_size;    /* set by stoke_image_config_init() */
  int kind;              /* stoke_image_kind; default AUTO */
  const char *transform; /* e.g. "random-resized-crop=224,flip,
                            normalize=imagenet,chw,f32"; default
                            "random-resized-crop=224,flip,chw,u8";
                            copied.  See docs/transforms.md. */
  uint64_t max_pixels;   /* per image, checked on its header; default
                            178956970 (PIL's decompression-bomb limit) */
  uint64_t max_bytes;    /* largest decoded window; default 256 MiB */
  int verify_checksums;  /* PACKED: check every sample's CRC at open */
  const stoke_allocator *alloc; /* the source's own memory (its index of
                            files, names, the transform); NULL =
                            malloc/free; borrowed, must outlive the source.
                            A loader's per-worker decoders and buffers use
                            the loader's allocator.  Since 0.1. */
  /* Since 0.2: the largest image, for the host ledger's per-worker scratch
  ** bound (stoke_host_ledger.scratch_*).  0 x 0: packed shards take it
  ** from their index (exact); folders and tar shards probe the headers of
  ** up to STOKE_SCRATCH_PROBE samples spread over the dataset.  Declared,
  ** it is used as given (STOKE_SCRATCH_DECLARED). */
  uint32_t largest_width, largest_height;
  uint64_t largest_file_bytes; /* declared largest encoded file; 0: probed
                                  with the headers (or the packed index) */
} stoke_image_config;

/* Samples whose headers a folder or tar source reads at open to bound the
** per-worker scratch (since 0.2). */
#define STOKE_SCRATCH_PROBE 64

/* Where a source's scratch bound comes from (stoke_host_ledger.
** scratch_basis; since 0.2). */
typedef enum stoke_scratch_basis {
  STOKE_SCRATCH_NONE = 0,     /* the source keeps no per-worker scratch */
  STOKE_SCRATCH_EXACT = 1,    /* packed shards: the index's largest image */
  STOKE_SCRATCH_PROBED = 2,   /* folder, tar: the largest of a sample of
                                 headers (a larger image later may exceed
                                 it) */
  STOKE_SCRATCH_DECLARED = 3  /* stoke_image_config.largest_* */
} stoke_scratch_basis;

/* "none", "exact", "probed", "declared". */
STOKE_API const char *stoke_scratch_basis_name(int basis);

STOKE_API void stoke_image_config_init(stoke_image_config *cfg);
/* Open an image dataset.  Errors (STOKE_EINVAL, STOKE_EIO, STOKE_EFORMAT,
** STOKE_ENOMEM) leave a message in stoke_errmsg(NULL) naming the file,
** shard or offset, e.g. an empty class folder or a truncated shard; a bad
** transform spec names the offending token.  cfg may be NULL. */
STOKE_API int stoke_source_create_images(const char *path,
                                         const stoke_image_config *cfg,
                                         stoke_source **out);

/* The same over several shard paths (each a path, a pattern or a glob),
** all tar or all packed; their samples in the order given.  An ImageFolder
** is one directory: a list of them is refused.  paths is borrowed. */
STOKE_API int stoke_source_create_images_list(const char *const *paths,
                                              size_t n_paths,
                                              const stoke_image_config *cfg,
                                              stoke_source **out);

/* Classes of an image source (ImageFolder and tar: sorted names; packed:
** none), 0 / NULL for other sources. */
STOKE_API size_t stoke_source_n_classes(const stoke_source *src);
STOKE_API const char *stoke_source_class_name(const stoke_source *src,
                                              size_t c);
/* Files skipped when the dataset was opened (not an image, unsupported
** format, a tar sample without an image or a label), with the reason. */
STOKE_API size_t stoke_source_n_skipped(const stoke_source *src);
STOKE_API const char *stoke_source_skipped(const stoke_source *src, size_t k,
                                           const char **reason);
/* Label of sample index, or -1. */
STOKE_API int64_t stoke_source_label(const stoke_source *src, size_t index);
/* "tensors", "callback", "synthetic", "folder", "tar" or "packed". */
STOKE_API const char *stoke_source_kind(const stoke_source *src);
/* Where sample index lives (file, shard, offset); "" when unknown. */
STOKE_API void stoke_source_describe(const stoke_source *src, size_t index,
                                     char *buf, size_t cap);

typedef enum stoke_image_format {
  STOKE_IMAGE_JPEG = 1,
  STOKE_IMAGE_PNG = 2
} stoke_image_format;

typedef struct stoke_image_info {
  int format;            /* stoke_image_format */
  uint32_t width, height;
  unsigned channels;     /* in the file: 1 gray, 3 colour, 4 CMYK or RGBA */
  int progressive;       /* JPEG progressive or PNG interlaced */
  int restart_cuts;      /* a JPEG whose restart intervals let a crop be
                            decoded alone (those `stoke pack` writes) */
  int has_alpha;
  size_t bytes;          /* encoded size */
} stoke_image_info;

/* Read sample index of an image source and describe its header (nothing is
** decoded).  Errors name the sample and file in stoke_errmsg(NULL).  Any
** thread. */
STOKE_API int stoke_source_probe(const stoke_source *src, size_t index,
                                 stoke_image_info *out);

/* How the packed shards behind an image source were made (since 0.3):
** whether `stoke pack --max-side` resized their images, to what size and
** at what JPEG quality, from the shards' headers. */
typedef struct stoke_pack_info {
  size_t n_shards;
  size_t n_resized;    /* shards whose header records a max side */
  unsigned max_side;   /* the largest recorded max side; 0: none */
  int quality;         /* its JPEG quality; 0: none */
  int mixed;           /* 1: the shards record different sizes or
                          qualities (or some none) */
} stoke_pack_info;

/* Fill *out for a packed source; STOKE_EINVAL for any other source (the
** message in stoke_errmsg(NULL)).  Any thread.  Since 0.3. */
STOKE_API int stoke_source_pack_info(const stoke_source *src,
                                     stoke_pack_info *out);

/* Called after each packed sample; return nonzero to stop (the pack then
** fails and leaves no shard behind). */
typedef int (*stoke_pack_progress_fn)(void *user, size_t done, size_t total,
                                      uint64_t bytes);

typedef struct stoke_pack_config {
  size_t struct_size;        /* set by stoke_pack_config_init() */
  uint64_t shard_bytes;      /* target size of a shard; 0 = one shard */
  /* false (default): JPEGs are rewritten losslessly (the same DCT
  ** coefficients, so the same pixels) as one baseline scan with a restart
  ** marker every 16 pixels (every MCU where an MCU is wider) and optimised
  ** Huffman tables, so that a random
  ** crop decodes from the part of the file that covers it only.  CMYK
  ** files, PNGs and files the rewrite cannot read are stored as they are.
  ** true: every file is stored byte for byte. */
  int keep_bytes;
  /* Threads reading and rewriting samples (0: one per online core); the
  ** shards are the same bytes whatever the count. */
  unsigned n_threads;
  stoke_pack_progress_fn progress; /* NULL: none */
  void *user;                      /* passed to progress */
  const stoke_allocator *alloc;    /* the pack's memory (readers, decoders,
                                      slots, the shard index); NULL =
                                      malloc/free; borrowed */
  /* Pre-resizing (since 0.3): images whose longer side is over max_side
  ** are decoded, resized to max_side (the shorter side in proportion,
  ** rounded) with the transforms' antialiased PIL bilinear filter, and
  ** stored as baseline JPEGs of `quality` with restart cuts; the others
  ** are packed as without it.  Lossy.  Every shard's header records both
  ** (docs/packed-format.md), and stoke inspect shows them.  0 (default):
  ** keep every image's size. */
  unsigned max_side;
  int quality;                     /* 1..100; default 90 */
} stoke_pack_config;

/* shard_bytes 256 MB, JPEGs rewritten, every core, no progress callback. */
STOKE_API void stoke_pack_config_init(stoke_pack_config *cfg);

typedef struct stoke_pack_result {
  size_t n_samples, n_shards;
  uint64_t bytes_in;     /* encoded sample bytes read */
  uint64_t bytes;        /* encoded sample bytes written */
  size_t n_rewritten;    /* JPEGs rewritten with restart markers */
  size_t n_ready;        /* JPEGs with such markers already (at most 16 px
                            or one MCU apart), stored as they were */
  size_t n_kept;         /* JPEGs stored as they were (why: below) */
  char first_kept[512];  /* the first of them and why, or "" */
  char first_shard[512]; /* e.g. "out-00000.stoke" */
  /* Shards an earlier pack left under the same prefix past the last one
  ** written (OUT_PREFIX-NNNNN.stoke), removed so that a glob does not read
  ** them with the new ones. */
  size_t n_stale_removed;
  size_t n_resized;      /* images resized to max_side (since 0.3) */
} stoke_pack_result;

/* Write every sample of an image source, in index order, to packed shards
** OUT_PREFIX-00000.stoke, -00001, ... (cfg NULL: the defaults above).
** Streaming: memory stays bounded whatever the dataset size, and a shard
** appears under its final name only once complete.  Every header is
** probed, so a broken file fails here, naming it. */
STOKE_API int stoke_pack(const stoke_source *src, const char *out_prefix,
                         const stoke_pack_config *cfg,
                         stoke_pack_result *res);

/* The cost (ns) that synthetic sample `index` of `epoch` will have.  A pure
** function of its arguments: tests and the diagnosis use it as ground truth.
** 0 for sources that are not SLEEP or SPIN. */
STOKE_API int64_t stoke_source_synthetic_cost(const stoke_source *src,
                                              uint64_t seed, uint64_t epoch,
                                              size_t index);

STOKE_API size_t stoke_source_n_samples(const stoke_source *src);
STOKE_API size_t stoke_source_n_fields(const stoke_source *src);
/* The description of field f, or NULL.  Owned by the source. */
STOKE_API const stoke_field_desc *stoke_source_field(const stoke_source *src,
                                                     size_t f);
/* Drop the caller's reference.  A loader holds its own reference, so a
** source may be destroyed right after the loader is created.  NULL: no-op. */
STOKE_API void stoke_source_destroy(stoke_source *src);

/* ------------------------------------------------------------------------ */
/* The loader                                                                */

typedef struct stoke_loader stoke_loader; /* opaque */
typedef struct stoke_batch stoke_batch;   /* opaque, lent to the caller */

#define STOKE_WORKERS_AUTO ((unsigned)-1)

/* What a bad sample (a fill that fails: a corrupt file, an I/O error, a
** sample the quarantine lists) does to its batch.  Under SKIP and REPLACE a
** bad sample is a warning, counted in the statistics and kept in
** stoke_loader_failures(), not an error, until the failure budget is
** spent. */
typedef enum stoke_on_error {
  STOKE_ON_ERROR_FAIL = 0,   /* the first bad sample is a fatal error
                                (STOKE_ESAMPLE, naming it); the default */
  STOKE_ON_ERROR_SKIP = 1,   /* the batch goes without it: it is shorter
                                (stoke_batch_size, stoke_batch_n_skipped);
                                a batch left with no sample is not handed
                                out at all */
  STOKE_ON_ERROR_REPLACE = 2 /* another sample takes its place, so the
                                batch keeps its size: the substitute's index
                                is drawn from the bad sample's own random
                                stream (seed, epoch, index), so it is the
                                same whatever the worker count or timing,
                                and it is filled with a random stream of its
                                own; a substitute that fails too is replaced
                                in turn, up to max_replace_tries */
} stoke_on_error;

/* "fail", "skip", "replace"; "?" for another value. */
STOKE_API const char *stoke_on_error_name(int on_error);

typedef struct stoke_config {
  size_t struct_size;      /* set by stoke_config_init(); ABI guard */
  stoke_source *source;    /* required; the loader takes its own reference */
  size_t batch_size;       /* samples per batch; default 32 */
  unsigned n_workers;      /* 0: fill in the caller's thread inside next(),
                              as PyTorch's num_workers=0; default AUTO =
                              online CPUs */
  unsigned prefetch;       /* K: batches prepared ahead of the one the caller
                              holds (K + consumer_slots slots in all);
                              default 2, >= 1 */
  int shuffle;             /* stoke_shuffle: 0 sequential, 1 seeded
                              uniform shuffle, 2 block order; default 0 */
  uint64_t seed;           /* default 0 */
  int drop_last;           /* drop the final partial batch; default 0 */
  unsigned rank, world;    /* shard for distributed training; default 0, 1 */
  int shard_drop_last;     /* world > 1: drop the tail so every rank gets
                              floor(N/world) (1), or pad by repeating the
                              first samples to ceil(N/world) (0, default),
                              as PyTorch's DistributedSampler */
  int in_order;            /* 1 (default): batches in order; 0: a completed
                              batch is handed out first (content unchanged) */
  unsigned warmup_epochs;  /* epochs left out of the statistics; default 0 */
  size_t warmup_steps;     /* steps left out after those; default 0 */
  int64_t sample_timeout_ms; /* a sample running longer makes next() fail
                                with STOKE_ETIMEDOUT naming it; 0 = never
                                (default) */
  uint64_t mem_budget_bytes; /* host bytes the loader may allocate; 0 = no
                                limit (default).  Checked before anything is
                                allocated. */
  int prefetch_next_epoch; /* 1 (default): once every batch of an epoch is
                              claimed, idle workers start on the next one
                              (epoch + 1, or the number set_epoch() gave
                              after the END), so it does not begin with an
                              empty queue; a set_epoch() to another number
                              discards that work.  0: an epoch starts at its
                              first next(), as PyTorch's DataLoader. */
  size_t trace_events;     /* 0 (default): no trace.  Else each thread keeps
                              its latest trace_events spans (32 bytes each)
                              for stoke_loader_write_trace(). */
  size_t max_chunk;        /* most samples a worker claims at once; 0 = auto
                              (sized by measured sample cost) */
  const stoke_allocator *alloc; /* NULL = malloc/free; borrowed, must outlive
                                   the loader */
  unsigned consumer_slots; /* batches the consumer holds at once while
                              prefetch batches are made ahead: slots =
                              prefetch + consumer_slots.  Default 1; 2 for
                              a loop that keeps the previous batch while it
                              asks for the next (Python's for-loop does) */
  /* The device stage (since 0.2): see "The device stage" below. */
  const char *device;      /* NULL, "" or "cpu" (default): host batches;
                              "cuda" or "cuda:N": batches in the memory of
                              CUDA device N (0 for "cuda").  Copied. */
  unsigned device_prefetch;/* batches copied to the device ahead of the ones
                              the caller holds (device_prefetch +
                              consumer_slots device slots); default 1.  0
                              with one consumer slot: a batch is copied only
                              when the previous one is released, so no copy
                              overlaps the step (for comparison). */
  int pin_memory;          /* host slots in page-locked memory: -1 (default)
                              when batches are copied to a device; 1 also
                              without a device, for callers who copy
                              themselves; 0 never (device copies then come
                              from pageable memory: slower, counted in
                              stoke_stats.pageable_copies, and the doctor
                              says so) */
  uintptr_t cuda_stream;   /* the consumer's CUstream as an integer (0 or 1:
                              the legacy default stream, 2: per-thread;
                              from PyTorch, torch.cuda.current_stream()
                              .cuda_stream).  next() makes it wait for the
                              batch's copy, stoke_batch_release() records
                              the release on it, and the EVENTS clock times
                              the steps on it.  Default 0. */
  const char *cuda_library;/* the CUDA driver library to dlopen; NULL
                              (default): $STOKE_CUDA_LIBRARY if set, else
                              "libcuda.so.1".  Copied. */
  int device_normalize;    /* 1 (default): an image field whose transform
                              ends in normalize / f32 or f16 is copied as
                              u8 and normalised on the device (4x fewer
                              bytes over PCIe), bit for bit as on the
                              host; 0: normalised on the host */
  int clock;               /* stoke_clock: what the two clocks measure;
                              default STOKE_CLOCK_AUTO */
  void (*step_sync)(void *user); /* NULL (default), or called at each
                              next() before its clocks are read: it makes
                              the step's device work complete (e.g.
                              torch.cuda.synchronize), so that host wall
                              time is honest (STOKE_CLOCK_SYNC) */
  void *step_sync_user;    /* passed to step_sync */
  /* Bad samples (since 0.2; see stoke_on_error). */
  int on_error;            /* stoke_on_error; default FAIL */
  /* The failure budget of SKIP and REPLACE: bad samples found in one epoch
  ** (this rank) beyond it make next() fail with STOKE_EFAILURES, naming the
  ** last few.  max_failures > 0 is a count; otherwise max_failure_frac > 0
  ** is a share of the epoch's samples (ceil(frac x samples)); both 0: no
  ** limit.  Default: max_failures 0, max_failure_frac 0.01 (1%).  Samples
  ** the quarantine lists are not read and do not count. */
  uint64_t max_failures;
  double max_failure_frac;
  unsigned max_replace_tries; /* REPLACE: substitutes tried per bad sample
                                 before the bad sample is an error
                                 (STOKE_ESAMPLE); default 8, >= 1 */
  /* A quarantine file (docs/quarantine.md), or NULL (default): every bad
  ** sample is appended to it with its reason, and the samples it lists are
  ** not read, in this epoch and later ones, in this run and later runs,
  ** but handled by on_error at once (FAIL: an error naming the file).  It
  ** is created if missing; one made for another dataset (another kind,
  ** sample count or stoke_source_fingerprint) is refused at create.
  ** Copied. */
  const char *quarantine_path;
  int order_given;         /* 0 (default): stoke's own order, a function of
                              (seed, epoch, rank, world) only.  1: the
                              caller gives every epoch's batches with
                              stoke_loader_order_append (a user's sampler);
                              shuffle, rank/world, drop_last and
                              prefetch_next_epoch then do not apply.
                              Since 0.2. */
  /* Online autotuning (since 0.3; docs/autotune.md).  0 (default): W and K
  ** are fixed.  1: the loader starts small (1 worker, prefetch 2) and,
  ** while it runs, reads its own clocks (wait and compute, the workers'
  ** wall and CPU time per sample, the empty ready queue) and changes how
  ** many workers are active and how many batches are made ahead, without
  ** being recreated and without changing what is delivered or its order
  ** (which never depend on W or K).  It goes to the knee: the fewest
  ** workers, then the fewest slots, that remove the stall, adapts again
  ** when the step changes, and rolls back a change that slows the step.
  ** Every decision is kept (stoke_loader_autotune_event) and traced.
  ** n_workers is then the most worker threads it may use (AUTO:
  ** STOKE_AUTOTUNE_MAX_WORKERS(online CPUs)), and autotune_max_prefetch
  ** the deepest prefetch; both are lowered at create to what
  ** mem_budget_bytes allows.  Not with W = 0 or a device stage (yet). */
  int autotune;
  double cpu_budget;       /* autotune: cores the workers may keep busy (CPU
                              seconds per second, the CPU clocks of the
                              workers; workers that wait on I/O or sleep
                              barely count); 0 (default) = the online CPUs.
                              A training step that needs the CPU itself
                              wants less: SPDL measured training slowing
                              once the loader took about 40% of the CPU,
                              so 0.4 x cores there (docs/autotune.md) */
  unsigned autotune_max_prefetch; /* autotune: the deepest prefetch; 0
                                     (default): max(prefetch, 8) */
  /* The storage and sample-cost rungs (since 0.3).
  **
  ** Data echoing (docs/echo.md): each batch the producer makes feeds
  ** `echo` steps, the last resort when the producer cannot keep up even
  ** at the knee.  STOKE_ECHO_BATCH hands the same batch out echo times in
  ** a row (the same memory, so it must not be modified in place);
  ** STOKE_ECHO_EXAMPLE makes each sample of the batch echo times, each
  ** copy with its own random transform (copy 0 with the sample's own
  ** stream, copy j with one derived from it), reading and decoding it
  ** once, and hands the copies out as echo batches in a row, copy j in the
  ** j-th.  Either way an epoch is echo x the batches, every sample is in
  ** echo of them, the order and the contents depend on (seed, epoch, rank,
  ** world, echo, echo_mode) only, and stoke_stats counts the steps and the
  ** fresh samples apart.  Default echo 1 (off), mode BATCH. */
  unsigned echo;
  int echo_mode;           /* stoke_echo_mode */
  /* shuffle = STOKE_SHUFFLE_BLOCK (docs/resume.md, "the block order"):
  ** blocks of consecutive samples of about shuffle_block_bytes of stored
  ** bytes (default 0: 16 MiB) are shuffled, then the samples within each
  ** window of shuffle_window blocks (default 0: 8), and the blocks of the
  ** next window are read ahead (madvise / posix_fadvise WILLNEED). */
  uint64_t shuffle_block_bytes;
  unsigned shuffle_window;
  /* A cache that packs as it reads (docs/cache.md), for folder and tar
  ** image sources: the samples the workers read are written, in the
  ** background and with restart cuts, into packed shards under
  ** cache_dir/<key>/, the key hashing the dataset's fingerprint and every
  ** file's path, size and modification time; later epochs (and later
  ** runs) read them from there.  NULL (default): none.  Copied. */
  const char *cache_dir;
  uint64_t cache_max_bytes; /* disk the cache may take; 0 (default): no
                               limit but the file system's last 5% */
  /* A RAM cache of the samples' finished bytes, for deterministic
  ** transforms (resize + center-crop, no flip: evaluation pipelines): up
  ** to ram_cache_bytes (STOKE_RAM_CACHE_ALL: every sample) hold the first
  ** samples by index, filled as they are produced and copied out in later
  ** epochs; counted in the host ledger and checked against
  ** mem_budget_bytes before it is allocated.  0 (default): none. */
  uint64_t ram_cache_bytes;
  /* How the OS schedules the workers (since 0.3; stoke_worker_policy).
  ** BATCH (default): each worker thread runs under SCHED_BATCH, its nice
  ** value unchanged, so a worker woken by a freed slot never preempts the
  ** training thread; the training thread, woken from its step, still
  ** preempts a worker.  With more CPU-bound workers than cores the default
  ** policy lets the woken workers take the cores from the training loop
  ** for the whole burst that refills the slot: measured on 2 cores with
  ** 0.5 ms CPU samples and a 4 ms step, at 4 to 16 workers each step then
  ** waited 1.3-2.0 ms for a core (epochs 86-98 ms; 66 ms under BATCH, the
  ** same at every W).  NORMAL: the OS default (SCHED_OTHER), for
  ** comparison. */
  int worker_policy;
} stoke_config;

/* How the OS schedules the workers (stoke_config.worker_policy). */
typedef enum stoke_worker_policy {
  STOKE_WORKER_BATCH = 0, /* SCHED_BATCH: never preempt the caller on wake */
  STOKE_WORKER_NORMAL = 1 /* the OS default */
} stoke_worker_policy;

/* "batch", "normal"; "?" otherwise. */
STOKE_API const char *stoke_worker_policy_name(int policy);

/* The default most worker threads of an autotuning loader on `cores`
** online CPUs: enough for samples that mostly wait (storage, network),
** whose knee is far above the core count; the CPU budget keeps CPU-bound
** ones at the cores. */
#define STOKE_AUTOTUNE_MAX_WORKERS(cores)                                    \
  ((cores) * 8u > 64u ? (cores) * 8u : 64u)

/* Data echoing's two forms (stoke_config.echo_mode). */
typedef enum stoke_echo_mode {
  STOKE_ECHO_BATCH = 0,  /* the same batch echo times in a row */
  STOKE_ECHO_EXAMPLE = 1 /* each sample in echo batches, each copy with its
                            own random transform */
} stoke_echo_mode;

/* "batch", "example"; "?" otherwise. */
STOKE_API const char *stoke_echo_mode_name(int mode);

/* The orders of an epoch (stoke_config.shuffle). */
typedef enum stoke_shuffle {
  STOKE_SHUFFLE_NONE = 0,    /* index order */
  STOKE_SHUFFLE_UNIFORM = 1, /* a seeded uniform permutation */
  STOKE_SHUFFLE_BLOCK = 2    /* blocks of consecutive samples shuffled, then
                                the samples within a window of blocks: for
                                datasets larger than the page cache */
} stoke_shuffle;

#define STOKE_RAM_CACHE_ALL UINT64_MAX
#define STOKE_BLOCK_BYTES_DEFAULT ((uint64_t)16 << 20)
#define STOKE_BLOCK_WINDOW_DEFAULT 8

/* What the two clocks of a loader measure (stoke_config.clock). */
typedef enum stoke_clock {
  STOKE_CLOCK_AUTO = 0,   /* EVENTS when a CUDA backend serves and no
                             step_sync is given; SYNC with step_sync; HOST
                             otherwise */
  STOKE_CLOCK_HOST = 1,   /* host wall time around next(): honest for
                             host work, a lie for asynchronous GPU work */
  STOKE_CLOCK_EVENTS = 2, /* CUDA events on cuda_stream: waiting is the
                             stream idle between steps, computing its
                             work; host times are kept as host_wait and
                             host_compute */
  STOKE_CLOCK_SYNC = 3    /* host wall time, after step_sync */
} stoke_clock;

/* Fill cfg with defaults (and cfg->struct_size). */
STOKE_API void stoke_config_init(stoke_config *cfg);

/* Create a loader.  Validates cfg, checks the memory budget, allocates the
** K + 1 batch slots and starts the workers, which wait for the first next().
** On success returns 0 and sets *out; the caller must call
** stoke_loader_destroy().  On failure returns a negative code, sets *out to
** NULL, and stoke_errmsg(NULL) describes the failure on this thread.
** Thread-safety: any thread. */
STOKE_API int stoke_loader_create(const stoke_config *cfg,
                                  stoke_loader **out);

/* Stop the workers, wait for samples in progress to finish and free
** everything.  Batches still lent out stay valid (data, fields, indices)
** and must still be released: the last stoke_batch_release() frees what is
** left, from any thread.  No other call may use l after this.  Safe at any
** point: mid-epoch, after an early break, after an error.  NULL: no-op. */
STOKE_API void stoke_loader_destroy(stoke_loader *l);

/* The next batch of the current epoch.  The first call starts an epoch;
** after the last batch it returns STOKE_END once, and the call after that
** starts the next epoch (epoch + 1, or the one set by stoke_loader_set_epoch).
** Returns STOKE_OK and sets *out to a lent batch, valid until
** stoke_batch_release(); STOKE_END; STOKE_EBUSY when the caller holds every
** slot; or an error (STOKE_ESAMPLE, STOKE_ETIMEDOUT, ...) after which the
** loader is poisoned: later calls return STOKE_EBADSTATE and
** stoke_errmsg(l) keeps the first message, which names the sample.
** Time inside this call is counted as waiting; time from its return to the
** following call as computing.  Thread-safety: one consumer at a time. */
STOKE_API int stoke_loader_next(stoke_loader *l, stoke_batch **out);

/* Like stoke_loader_next, but gives up after timeout_ns (>= 0) without a
** batch and returns STOKE_AGAIN, which is not an error: the step goes on,
** and the next call (of either kind) continues it, so its wait is counted
** once, from the first call.  A caller that must stay responsive (Python,
** for Ctrl-C) loops on it.  With 0 workers the batch is filled inside the
** call and the timeout applies only to waiting for a free slot.  Returns
** what stoke_loader_next returns, STOKE_AGAIN, or STOKE_EINVAL for a
** negative timeout. */
STOKE_API int stoke_loader_next_timed(stoke_loader *l, stoke_batch **out,
                                      int64_t timeout_ns);

/* Give a lent batch back; its slot returns to the pool.  Any thread, any
** order, also after stoke_loader_destroy (see there).  It never blocks for
** long (a lock held only for bookkeeping) and calls no user code, so a
** DLPack deleter or a buffer release may call it.  NULL: no-op. */
STOKE_API void stoke_batch_release(stoke_batch *b);

/* End the epoch in progress now, as a consumer that breaks out of its
** loop means to: batches not yet handed out are dropped (work in flight is
** finished and thrown away), the epoch is recorded with what was
** delivered, and the next next() starts the next epoch.  Lent batches stay
** valid.  No-op between epochs.  Returns 0 or STOKE_EINVAL.  Consumer
** thread. */
STOKE_API int stoke_loader_end_epoch(stoke_loader *l);

/* Set the epoch number of the next epoch to start (like
** DistributedSampler.set_epoch).  Between epochs only: STOKE_EINVAL while an
** epoch is in progress. */
STOKE_API int stoke_loader_set_epoch(stoke_loader *l, uint64_t epoch);

/* Caller-given order (cfg.order_given = 1): the caller, typically iterating
** a sampler, gives the batches of each epoch ahead of the workers, and
** ends the epoch's order when the sampler is exhausted (an infinite sampler
** never ends it).  Batches are given to the epoch in progress, or between
** epochs to the next one; next() starts an epoch with whatever was given.
** Batch k of the epoch has batch_lens[k] samples (1..batch_size; NULL:
** every batch has batch_size), taken in turn from indices, each below the
** source's n_samples; an index may repeat (sampling with replacement).
** Everything is copied.  Only what the workers have not claimed yet is
** kept, so memory stays bounded when the caller stays a few batches ahead.
** Workers with nothing given wait; a next() that would wait for a batch
** that was never given returns STOKE_EINVAL instead of hanging.  An epoch
** left early (stoke_loader_end_epoch) drops the rest of its order.
** Returns 0, or STOKE_EINVAL (not order_given, a bad index or length, or
** after stoke_loader_order_end during the same epoch), with the message in
** stoke_errmsg(l).  Consumer thread.  Since 0.2. */
STOKE_API int stoke_loader_order_append(stoke_loader *l,
                                        const size_t *indices,
                                        const size_t *batch_lens,
                                        size_t n_batches);
/* No more batches in this epoch's order: once the given batches are
** delivered, next() returns STOKE_END.  0 or STOKE_EINVAL.  Since 0.2. */
STOKE_API int stoke_loader_order_end(stoke_loader *l);

/* Batches per epoch for this rank with the current configuration (with
** order_given: those of the last finished epoch, or of the epoch being
** given once its order has ended; 0 before either). */
STOKE_API size_t stoke_loader_n_batches(const stoke_loader *l);
/* Samples per epoch for this rank (after padding or dropping). */
STOKE_API size_t stoke_loader_n_samples(const stoke_loader *l);
/* The configuration in force (defaults resolved, e.g. n_workers).  Its
** strings (device, cuda_library) are the loader's copies: valid while the
** loader lives. */
STOKE_API void stoke_loader_config(const stoke_loader *l, stoke_config *out);
/* The loader's source (borrowed: valid while l lives). */
STOKE_API const stoke_source *stoke_loader_source(const stoke_loader *l);
/* Host bytes allocated for batch slots, worker scratch and the order. */
STOKE_API uint64_t stoke_loader_host_bytes(const stoke_loader *l);

/* Write the spans kept so far (cfg.trace_events) as a Chrome trace (Trace
** Event JSON; open it in Perfetto or chrome://tracing): one track per
** worker with read/decode/transform spans per sample (cheap samples as one
** span per claimed chunk) and slot waits, a consumer track with a wait and
** a compute span per step, and a counter of the ready queue's depth at each
** next().  Returns 0, STOKE_EINVAL when tracing is off, or STOKE_EIO (see
** stoke_errmsg(l)).  Any thread, any time, also while workers run. */
STOKE_API int stoke_loader_write_trace(stoke_loader *l, const char *path);

/* The last detailed message of l, or with NULL of the calling thread's last
** failed create.  Never NULL; "" when there was none. */
STOKE_API const char *stoke_errmsg(const stoke_loader *l);

/* Batch views ---------------------------------------------------------- */

/* Samples in b (batch_size, or fewer in a final partial batch). */
STOKE_API size_t stoke_batch_size(const stoke_batch *b);
/* Position of b in its epoch (0-based) and the epoch number. */
STOKE_API size_t stoke_batch_number(const stoke_batch *b);
STOKE_API uint64_t stoke_batch_epoch(const stoke_batch *b);
/* The source indices of the samples in b, in batch order; owned by b.
** Under REPLACE a substitute's entry is the substitute's index; under SKIP
** the skipped samples are not listed. */
STOKE_API const size_t *stoke_batch_indices(const stoke_batch *b);
/* Bad samples left out of b (on_error SKIP): b holds stoke_batch_size(b)
** samples of the stoke_batch_size(b) + stoke_batch_n_skipped(b) its
** position in the epoch covers.  0 under the other policies.  Since 0.2. */
STOKE_API size_t stoke_batch_n_skipped(const stoke_batch *b);
/* Samples of b that are substitutes for bad ones (on_error REPLACE). */
STOKE_API size_t stoke_batch_n_replaced(const stoke_batch *b);
STOKE_API size_t stoke_batch_n_fields(const stoke_batch *b);
/* Describe field f of b.  STOKE_EINVAL for a bad f. */
STOKE_API int stoke_batch_field(const stoke_batch *b, size_t f,
                                stoke_tensor *out);

/* ------------------------------------------------------------------------ */
/* The device stage                                                          */
/*
** With cfg.device = "cuda[:N]", stoke opens the CUDA driver API
** (libcuda.so.1, with dlopen: nothing of CUDA is needed to build stoke)
** and uses the device's primary context, so its memory, streams and events
** are PyTorch's too.  Host batch slots are page-locked; each completed
** batch is copied to a device slot on stoke's own copy stream as soon as
** one is free, and next() hands out device batches (stoke_tensor.data is
** then a CUdeviceptr) up to device_prefetch ahead.  next() makes
** cfg.cuda_stream wait on the copy (cuStreamWaitEvent): the host never
** blocks on the GPU.  A device slot is reused only after an event recorded
** on the consumer's stream at its release has completed, a host slot only
** after its copy has.  An image field whose transform ends in normalize /
** f32 or f16 is copied as u8 and normalised on the device (with the
** kernels built in: nvcc at build time), bit for bit as on the host.
**
** When CUDA cannot serve (no library, no device, a driver too old) the
** loader runs on host memory all the same; stoke_loader_device() says
** which backend serves and why.
*/

typedef enum stoke_backend {
  STOKE_BACKEND_HOST = 0,   /* host memory from the allocator */
  STOKE_BACKEND_PINNED = 1, /* page-locked host memory; copies are yours */
  STOKE_BACKEND_CUDA = 2    /* batches copied to a CUDA device */
} stoke_backend;

/* "host", "pinned", "cuda"; "?" otherwise. */
STOKE_API const char *stoke_backend_name(int backend);

typedef enum stoke_memory {
  STOKE_MEMORY_HOST = 1,   /* pageable host memory (DLPack kDLCPU) */
  STOKE_MEMORY_PINNED = 2, /* page-locked host memory (kDLCUDAHost) */
  STOKE_MEMORY_CUDA = 3    /* device memory: data is a CUdeviceptr (kDLCUDA) */
} stoke_memory;

typedef struct stoke_device_info {
  size_t struct_size;      /* set by the caller: sizeof(stoke_device_info) */
  int requested;           /* stoke_backend the configuration asked for */
  int backend;             /* stoke_backend serving */
  int device;              /* CUDA ordinal, or -1 */
  char name[96];           /* the device's name, or "" */
  int driver_version;      /* e.g. 13000 for CUDA 13.0; 0 when not opened */
  uint64_t total_bytes;    /* the device's memory */
  uint64_t free_bytes;     /* free when the loader was created */
  size_t n_device_slots;
  uint64_t device_bytes;   /* what the loader allocated on the device */
  int normalize_on_device; /* 1: the image field is normalised there */
  int clock;               /* stoke_clock in force */
  char reason[256];        /* one line: the backend and why, e.g. "host:
                              device cuda asked for, but no CUDA driver
                              library: libcuda.so.1: cannot open ..." */
  char normalize[160];     /* one line: where normalisation runs and why */
} stoke_device_info;

/* What serves l's batches.  0 or STOKE_EINVAL.  Any thread.  Since 0.2. */
STOKE_API int stoke_loader_device(const stoke_loader *l,
                                  stoke_device_info *out);

/* Where b's field data lie: a stoke_memory; *device (may be NULL) gets the
** CUDA ordinal (for CUDA and pinned memory; -1 for host memory).  Since
** 0.2. */
STOKE_API int stoke_batch_memory(const stoke_batch *b, int *device);

/* Make `stream` (a CUstream as an integer, as cfg.cuda_stream) wait until
** b's data are on the device: cuStreamWaitEvent on its copy's event; the
** host does not block.  For DLPack's __dlpack__(stream=...).  next()
** already did it for cfg.cuda_stream.  Host and pinned batches: nothing to
** wait for, 0.  Returns 0, STOKE_EINVAL, or STOKE_EDEVICE (message in
** stoke_errmsg of the loader, which is then poisoned).  Any thread.
** Since 0.2. */
STOKE_API int stoke_batch_wait_stream(stoke_batch *b, uintptr_t stream);

/* Give b back once the work queued so far on `stream` (a CUstream as an
** integer) is done with it: an event is recorded on stream now, and the
** slot is reused only after it has completed; the host does not wait.
** Use it for device batches read by kernels on a stream other than
** cfg.cuda_stream, and for pinned batches copied asynchronously by the
** caller (x.to("cuda", non_blocking=True) then del x: torch does not keep
** memory it did not allocate alive during the copy).  stoke_batch_release
** is this with cfg.cuda_stream for device and pinned batches.  Host
** batches: the same as stoke_batch_release.  Returns 0, STOKE_EINVAL or
** STOKE_EDEVICE (the batch is then released all the same).  Any thread.
** Since 0.2. */
STOKE_API int stoke_batch_release_stream(stoke_batch *b, uintptr_t stream);

/* Wait until every step's events on cfg.cuda_stream (up to the last
** next()) have completed and count them, so that stoke_loader_stats
** includes the last steps; the consumer's thread, between epochs or at
** the end.  Blocks on the GPU, so not inside a training loop.  0,
** STOKE_EDEVICE, or 0 with nothing to do without CUDA.  Since 0.2. */
STOKE_API int stoke_loader_device_sync(stoke_loader *l);

/* Enqueue on cfg.cuda_stream a kernel that spins for ns of GPU time: a
** simulated training step of known length, for benchmarks and tests.
** Returns 0; STOKE_ENOTSUP without the CUDA backend or without the
** kernels (built without nvcc, or the module did not load); or
** STOKE_EDEVICE.  The consumer's thread.  Since 0.2. */
STOKE_API int stoke_loader_gpu_sleep(stoke_loader *l, int64_t ns);

/* ------------------------------------------------------------------------ */
/* Statistics: the two clocks                                                */

typedef enum stoke_stage {
  STOKE_STAGE_READ = 0,      /* bytes of the sample from its source */
  STOKE_STAGE_DECODE = 1,    /* bytes to pixels or tensors */
  STOKE_STAGE_TRANSFORM = 2, /* pixels to the model's input, in the slot */
  STOKE_STAGE_SLOT_WAIT = 3, /* a worker waiting for a free batch slot */
  STOKE_STAGE_COPY = 4,      /* host to device copy */
  /* Since 0.2, the stages of a sample made by Python code (a dataset's
  ** __getitem__ on a worker thread): */
  STOKE_STAGE_PYTHON = 5,    /* inside the Python call (__getitem__, a
                                collate_fn), GIL held or not */
  STOKE_STAGE_GIL_WAIT = 6,  /* waiting to take the GIL before it */
  STOKE_STAGE_COLLATE = 7,   /* the sample into its batch (C collation, or
                                a whole batch through a collate_fn) */
  STOKE_STAGE_COUNT = 8
} stoke_stage;

/* "read", "decode", "transform", "slot_wait", "copy", "python",
** "gil_wait", "collate". */
STOKE_API const char *stoke_stage_name(int stage);

/* Percentiles of a duration histogram (log buckets, <= 1.6% error). */
typedef struct stoke_dist {
  uint64_t count;
  int64_t total_ns;
  int64_t mean_ns, p50_ns, p95_ns, p99_ns, max_ns;
} stoke_dist;

typedef struct stoke_stats {
  size_t struct_size;   /* set by the caller: sizeof(stoke_stats) */
  /* Measured steps (warm-up excluded). */
  uint64_t steps;
  uint64_t samples;
  uint64_t epochs_done;   /* all completed epochs, warm-up included */
  stoke_dist wait;        /* time inside next() per step */
  stoke_dist compute;     /* time between next() calls per step */
  double wait_ratio;      /* wait / (wait + compute) */
  /* Ready queue seen at each next(): batches complete and not yet handed
  ** out. */
  double queue_empty_frac; /* share of next() calls that found none; with
                              the EVENTS clock, share of steps whose stream
                              idled before they started (their batch was
                              not ready on the GPU) */
  double queue_mean_depth;
  uint64_t queue_depth_hist[16]; /* depth 0..14, and 15 for 15 or more */
  /* Producer side, summed over workers (or the caller's thread at W = 0). */
  stoke_dist stage[STOKE_STAGE_COUNT]; /* per sample; SLOT_WAIT per wait */
  int64_t worker_busy_ns;  /* wall time workers spent producing samples */
  int64_t worker_cpu_ns;   /* CPU time they used doing it */
  uint64_t chunks;         /* claims made by workers */
  uint64_t bytes;          /* batch bytes delivered */
  unsigned n_workers;      /* the loader's, for reading the numbers */
  unsigned prefetch;
  /* The device stage (since 0.2).  Copy times and the stream's waits are
  ** CUDA events; everything here is 0 with the plain backend. */
  int backend;             /* stoke_backend serving */
  int clock;               /* stoke_clock in force: what wait and compute
                              above measure */
  unsigned device_prefetch;
  stoke_dist host_wait;    /* EVENTS clock: host time inside next() */
  stoke_dist host_compute; /* EVENTS clock: host time between next()s */
  stoke_dist copy_wait;    /* per step: the consumer's stream waited for the
                              batch's copy (the copy exposed) */
  stoke_dist gpu_idle;     /* per step: the consumer's stream idle between
                              the end of one step and the start of the
                              next (copy_wait included) */
  int64_t copy_hidden_ns;  /* copy time (stage[STOKE_STAGE_COPY]) not
                              exposed: hidden under the steps */
  double copy_overlap;     /* copy_hidden_ns / copy total, 0..1 */
  double gpu_idle_frac;    /* gpu_idle / (gpu_idle + computing) */
  uint64_t copy_bytes;     /* bytes copied to the device */
  uint64_t pageable_copies;/* copies made from pageable host memory */
  uint64_t untimed_steps;  /* steps the events could not time (the stream
                              more than 30 steps behind the host) */
  /* Bad samples since the loader was created, warm-up included (since
  ** 0.2): every one met (failures: fills that failed, substitutes
  ** included; quarantined: not read because the quarantine lists them) and
  ** what the policy did with them (skipped + replaced = failures +
  ** quarantined, unless one ended the run).  Details of the last few:
  ** stoke_loader_failures(). */
  uint64_t failures;
  uint64_t quarantined;
  uint64_t skipped;
  uint64_t replaced;
  /* Since 0.2: the scheduler over the measured window (Linux schedstat of
  ** the process's threads named stoke-w*: the workers and any helper
  ** threads they started, which inherit the name), counting only threads
  ** that ran in it.  threads_active -1: unknown. */
  int threads_active;
  int64_t threads_run_ns;   /* their time on a core */
  int64_t threads_delay_ns; /* their time runnable but not running */
  /* Since 0.3: online autotuning (stoke_config.autotune).  n_workers and
  ** prefetch above are then the ones active now. */
  int autotune;             /* 1: the loader tunes itself */
  unsigned max_workers;     /* threads it may activate (autotune), else
                               n_workers */
  unsigned max_prefetch;    /* deepest prefetch it may use */
  uint64_t autotune_changes;   /* changes applied (rollbacks included) */
  uint64_t autotune_rollbacks; /* changes undone */
  uint64_t autotune_released_bytes; /* slot pages given back to the OS as
                                       prefetch went down (the slots the
                                       active prefetch leaves idle; not
                                       page-locked slots, nor a caller's
                                       allocator's); counted once per slot
                                       each time it goes idle */
  double cpu_budget;        /* cores the workers may keep busy (resolved) */
  /* Data echoing (since 0.3): the loader's echo factor and mode, and the
  ** fresh samples among the measured ones: `samples` counts every sample
  ** handed out, echoes included, `fresh_samples` each produced sample
  ** once (samples / echo over whole groups). */
  unsigned echo;
  int echo_mode;
  uint64_t fresh_samples;
  /* Since 0.3: the worker threads the OS put under the configured policy
  ** (stoke_config.worker_policy); fewer than n_workers under BATCH means
  ** the OS refused SCHED_BATCH (a seccomp filter, another OS) and those
  ** workers run under the default policy. */
  int worker_policy;
  unsigned workers_policy_applied;
  /* Stored images (since 0.3; image sources): the samples produced whose
  ** header said their size, the mean of their pixels and of their longer
  ** side, and the longer side the transform's output needs of a stored
  ** image to lose no detail (stoke pack --max-side): the doctor compares
  ** them (STOKE_ADVICE_PRESIZE). */
  uint64_t images;
  double image_pixels_mean;
  double image_side_mean;
  unsigned image_keep_side;
  /* The caches (since 0.3): samples read from the packed cache and from
  ** the RAM cache, samples written to the packed cache, and its state. */
  uint64_t cache_hits;
  uint64_t ram_cache_hits;
  uint64_t cache_written;
  uint64_t cache_bytes;     /* on disk */
  size_t cache_samples;     /* samples the cache holds */
} stoke_stats;

/* Snapshot of the statistics since warm-up ended.  Any thread. */
STOKE_API int stoke_loader_stats(const stoke_loader *l, stoke_stats *out);

/* One decision of the online autotuner (stoke_config.autotune), with its
** reason and numbers.  Plain data. */
typedef enum stoke_autotune_kind {
  STOKE_AUTOTUNE_GROW = 1,     /* more workers: the consumer waited */
  STOKE_AUTOTUNE_SHRINK = 2,   /* fewer workers: the stall stays removed */
  STOKE_AUTOTUNE_DEEPER = 3,   /* deeper prefetch: waits from the spread */
  STOKE_AUTOTUNE_SHALLOWER = 4,/* shallower prefetch: less memory */
  STOKE_AUTOTUNE_ROLLBACK = 5, /* a change slowed the step: back to the last
                                  known-good configuration */
  STOKE_AUTOTUNE_LIMIT = 6,    /* still waiting, but a budget (CPU, memory,
                                  threads) allows no more */
  STOKE_AUTOTUNE_STEP = 7      /* the consumer's step changed: search again */
} stoke_autotune_kind;

/* "grow", "shrink", "deeper", "shallower", "rollback", "limit", "step". */
STOKE_API const char *stoke_autotune_kind_name(int kind);

typedef struct stoke_autotune_event {
  int kind;                 /* stoke_autotune_kind */
  uint64_t epoch;           /* the epoch being delivered */
  uint64_t step;            /* consumer steps since create */
  int64_t time_ns;          /* since the loader was created */
  unsigned from_workers, to_workers;
  unsigned from_prefetch, to_prefetch;
  double wait_before;       /* waiting share of the step before it */
  double wait_after;        /* measured after it (its next window); -1
                               until measured, or for LIMIT and STEP */
  double wait_predicted;    /* the queue model's, -1 when none */
  int64_t step_before_ns;   /* mean step (wait + compute) before */
  int64_t step_after_ns;    /* measured after; -1 until measured */
  int64_t compute_ns;       /* the consumer's compute per step then */
  char text[256];           /* one line: "epoch 2, step 40: 4 -> 8
                               workers, waiting 38% -> 2% (...)" */
} stoke_autotune_event;

/* Decisions so far (0 without autotune).  Any thread. */
STOKE_API size_t stoke_loader_n_autotune_events(const stoke_loader *l);
/* Decision i (0 = the first).  0 or STOKE_EINVAL.  Any thread.  The
** autotuner keeps the first STOKE_AUTOTUNE_EVENTS_KEPT. */
STOKE_API int stoke_loader_autotune_event(const stoke_loader *l, size_t i,
                                          stoke_autotune_event *out);
#define STOKE_AUTOTUNE_EVENTS_KEPT 4096

/* One bucket of a duration histogram: count values in [lo_ns, hi_ns). */
typedef struct stoke_hist_bucket {
  int64_t lo_ns, hi_ns;
  uint64_t count;
} stoke_hist_bucket;

/* The histogram of the wait inside next() since warm-up ended: its
** non-empty log buckets (about 3% wide), in increasing order.  Writes at
** most cap of them to out and returns how many there are (so a call with
** cap 0 sizes the array).  Any thread. */
STOKE_API size_t stoke_loader_wait_histogram(const stoke_loader *l,
                                             stoke_hist_bucket *out,
                                             size_t cap);

/* One record per finished epoch, warm-up ones included. */
typedef struct stoke_epoch_stats {
  uint64_t epoch;    /* the epoch's number */
  int warmup;        /* 1 if left out of stoke_loader_stats */
  int64_t wall_ns;   /* first next() of the epoch to the one returning END */
  int64_t wait_ns, compute_ns;
  uint64_t batches, samples;
} stoke_epoch_stats;

STOKE_API size_t stoke_loader_n_epoch_stats(const stoke_loader *l);
/* Record i (0 = the first epoch run).  STOKE_EINVAL when out of range. */
STOKE_API int stoke_loader_epoch_stats(const stoke_loader *l, size_t i,
                                       stoke_epoch_stats *out);

/* ------------------------------------------------------------------------ */
/* Bad samples: what failed, where and why (since 0.2)                       */

/* The loader keeps its last STOKE_FAILURES_KEPT bad samples. */
#define STOKE_FAILURES_KEPT 8

/* One bad sample.  Plain data. */
typedef struct stoke_failure {
  size_t index;        /* the sample's index in the source */
  uint64_t epoch;
  size_t batch;        /* the batch's position in the epoch */
  int action;          /* stoke_on_error: what was done with it */
  int quarantined;     /* 1: not read, the quarantine lists it */
  size_t substitute;   /* REPLACE: the sample that took its place, or
                          SIZE_MAX when none did (it failed too, or the
                          tries ran out) */
  char where[256];     /* file, shard and offset (stoke_source_describe) */
  char reason[512];    /* the fill's message, or the quarantine's */
} stoke_failure;

/* Copy the last bad samples of l, oldest first, into out[0..cap) and
** return how many are kept (at most STOKE_FAILURES_KEPT; a call with cap 0
** sizes the array).  The total is in stoke_stats.failures and
** .quarantined.  Any thread.  Since 0.2. */
STOKE_API size_t stoke_loader_failures(const stoke_loader *l,
                                       stoke_failure *out, size_t cap);

/* A 64-bit identity of the dataset behind src: its kind, sample count,
** class names and, for image sources, the names, labels and offsets of
** up to 1024 samples spread over it (file names without their folder, so
** a dataset that moves keeps its identity; the transform is not part of
** it).  Quarantine files and loader states carry it so that one made for
** another dataset is refused.  Any thread.  Since 0.2. */
STOKE_API uint64_t stoke_source_fingerprint(const stoke_source *src);

/* Called by stoke_verify after each sample; return nonzero to stop. */
typedef int (*stoke_verify_progress_fn)(void *user, size_t done, size_t total,
                                        size_t n_bad);

typedef struct stoke_verify_config {
  size_t struct_size;       /* set by stoke_verify_config_init() */
  unsigned n_threads;       /* 0 (default): one per online core */
  /* Write every bad sample here (the quarantine format of
  ** docs/quarantine.md), replacing the file, or NULL (default). */
  const char *quarantine_path;
  stoke_verify_progress_fn progress; /* NULL: none; called from the
                                        calling thread */
  void *user;
} stoke_verify_config;

STOKE_API void stoke_verify_config_init(stoke_verify_config *cfg);

typedef struct stoke_verify_result {
  size_t n_samples;     /* checked */
  size_t n_bad;
  uint64_t bytes;       /* encoded bytes read */
  int stopped;          /* 1: progress asked to stop before the end */
  size_t n_listed;      /* entries of bad[] filled: the first bad samples */
  stoke_failure bad[16];
} stoke_verify_result;

/* Decode every sample of an image source once, whole, at full scale (the
** loader decodes only a crop's window), on n_threads threads, and, for
** packed shards, check every sample's CRC-32, which the hot path does not.
** Bad samples are counted, the first ones kept in res->bad, all of them
** written to cfg->quarantine_path.  Returns 0 (bad samples are results,
** not errors); STOKE_EINVAL for a source that is not an image source;
** STOKE_EIO when the quarantine cannot be written; STOKE_ENOMEM.
** Since 0.2. */
STOKE_API int stoke_verify(const stoke_source *src,
                           const stoke_verify_config *cfg,
                           stoke_verify_result *res);

/* ------------------------------------------------------------------------ */
/* Resume: the loader's position as a few bytes (since 0.2)                  */

/* Where a loader is: the epoch in progress (or the next to start) and how
** many of its batches next() has handed out, with what makes that position
** mean the same samples: the seed, the sharding and batching of the epoch,
** and the dataset's sample count and fingerprint.  Plain data; the blob
** form (stoke_loader_state_encode) is what to store. */
typedef struct stoke_loader_state {
  uint32_t version;        /* STOKE_STATE_VERSION */
  uint64_t seed;
  uint64_t epoch;          /* the epoch to continue */
  uint64_t batches_done;   /* its batches handed out (this rank); at the
                              epoch's n_batches the next next() returns
                              STOKE_END for it */
  uint64_t n_samples;      /* samples in the source */
  uint64_t fingerprint;    /* stoke_source_fingerprint */
  uint64_t batch_size;
  uint32_t rank, world;
  uint32_t shuffle, drop_last, shard_drop_last;
  /* What else fixes the order and the batches of an epoch (since 0.3): a
  ** hash of the block order's block size and window and of the echo
  ** factor and mode; 0 for a uniform or sequential order without echo
  ** (what a state of 0.2 has).  Another key restores at the next epoch,
  ** as another batching does. */
  uint32_t order_key;
} stoke_loader_state;

#define STOKE_STATE_VERSION 1
#define STOKE_STATE_BYTES 80 /* stoke_loader_state_encode's size */

/* The state of l now.  A batch counts as handed out once next() has
** returned it, released or not: a state saved while the caller trains on
** batch k resumes with batch k + 1.  With in_order 0 mid-epoch, the
** batches handed out must be the epoch's first ones (else STOKE_EINVAL:
** the position is not a count; save at an epoch boundary).  Returns 0 or
** STOKE_EINVAL.  The consumer's thread.  Since 0.2. */
STOKE_API int stoke_loader_state_save(const stoke_loader *l,
                                      stoke_loader_state *out);

/* Continue from st: the next next() hands out the batches of st's epoch
** after the first st->batches_done, exactly those an uninterrupted run
** would have, in its order, whatever the worker count, prefetch or
** in_order (and under REPLACE, the same substitutes).  The loader takes
** st's seed.  When the world, rank, batch size, shuffle or drop_last
** differ from st's (elastic resume), the position within the epoch means
** nothing here, and the loader starts at the next epoch's beginning
** (stoke_errmsg(l) says so); every sample of that epoch is then delivered
** exactly once across the new ranks.  Between epochs only (as
** set_epoch): STOKE_EINVAL during one.  A state of another dataset (sample
** count or fingerprint) or of an unknown version: STOKE_EINVAL with a
** message naming both.  The consumer's thread.  Since 0.2. */
STOKE_API int stoke_loader_state_restore(stoke_loader *l,
                                         const stoke_loader_state *st);

/* The state as STOKE_STATE_BYTES little-endian bytes with a magic number,
** the version and a CRC-32: into buf[0..cap), *n = STOKE_STATE_BYTES (also
** when cap is too small: then STOKE_EINVAL).  Pure; any thread. */
STOKE_API int stoke_loader_state_encode(const stoke_loader_state *st,
                                        void *buf, size_t cap, size_t *n);
/* Back from bytes: STOKE_EINVAL for a wrong size, magic, version or CRC
** (stoke_errmsg(NULL) says which).  Any thread. */
STOKE_API int stoke_loader_state_decode(const void *buf, size_t n,
                                        stoke_loader_state *out);

/* ------------------------------------------------------------------------ */
/* The two clocks around any loop                                           */

/* A stoke_twoclock times somebody else's loop (another loader, a generator)
** the way stoke_loader_next times its own: waiting from enter() to leave(),
** computing from leave() to the next enter().  Its statistics are a
** stoke_stats like a loader's, without the producer's stages, so
** stoke_diagnose and the reports read them with the doctor's thresholds.
** The ready queue cannot be seen from outside: a wait of at most
** ready_wait_ns counts as a batch found ready (depth 1), a longer one as
** none (depth 0), so queue_empty_frac is the share of steps (or of rounds,
** see round_steps) that waited.
**
**   stoke_twoclock *tc;
**   stoke_twoclock_create(NULL, &tc);
**   for (;;) {
**     stoke_twoclock_enter(tc);
**     batch = their_next();
**     if (!batch) { stoke_twoclock_end_epoch(tc); break; }
**     stoke_twoclock_leave(tc, batch_len);
**     train_step(batch);     // sync the device first for an honest clock
**   }
**
** Thread-safety: one thread drives enter/leave/end_epoch; the read calls
** (stats, histogram, epochs, trace) may run on any thread meanwhile. */
typedef struct stoke_twoclock stoke_twoclock; /* opaque */

typedef struct stoke_twoclock_config {
  size_t struct_size;    /* set by stoke_twoclock_config_init() */
  unsigned warmup_epochs;/* epochs left out of the statistics; default 1 */
  size_t warmup_steps;   /* steps left out after them; default 0 */
  int64_t ready_wait_ns; /* a wait at most this long found a batch ready;
                            default 2 ms (PyTorch's DataLoader takes about
                            1 ms to hand over a batch already made) */
  unsigned round_steps;  /* judge the queue over rounds of this many steps:
                            W workers that each make whole batches in turn
                            (PyTorch's DataLoader) deliver them in rounds of
                            W, so a starved round waits once and then finds
                            W - 1 batches made at the same time; a round in
                            which any step waited counts as one empty
                            queue.  0 or 1 (default): every step alone */
  unsigned n_workers;    /* the wrapped loader's workers, for the verdict
                            (0: batches made inside next, so starving when
                            waiting); default STOKE_WORKERS_AUTO = unknown */
  unsigned prefetch;     /* its prefetch depth, 0 = unknown (default) */
  size_t trace_events;   /* 0 (default): no trace; else the latest spans
                            kept for stoke_twoclock_write_trace */
  const stoke_allocator *alloc; /* NULL = malloc/free; must outlive it */
} stoke_twoclock_config;

STOKE_API void stoke_twoclock_config_init(stoke_twoclock_config *cfg);
/* cfg NULL: the defaults.  0, or STOKE_EINVAL / STOKE_ENOMEM with the
** message in stoke_errmsg(NULL). */
STOKE_API int stoke_twoclock_create(const stoke_twoclock_config *cfg,
                                    stoke_twoclock **out);
STOKE_API void stoke_twoclock_destroy(stoke_twoclock *c); /* NULL: no-op */
/* The consumer asks for the next batch: the step in progress stops
** computing, its wait starts; the first call of an epoch starts it.
** Returns the timestamp (CLOCK_MONOTONIC ns). */
STOKE_API int64_t stoke_twoclock_enter(stoke_twoclock *c);
/* A batch of n_samples arrived: the wait stops, computing starts. */
STOKE_API int64_t stoke_twoclock_leave(stoke_twoclock *c, size_t n_samples);
/* A whole step timed by another clock, e.g. CUDA events on the
** consumer's stream (wait = the stream idle before the step's work,
** compute = its work), recorded as enter/leave would; the epoch starts
** with the first one.  Feed a clock either this way or by enter/leave,
** not both.  0 or STOKE_EINVAL (negative times). */
STOKE_API int stoke_twoclock_record(stoke_twoclock *c, int64_t wait_ns,
                                    int64_t compute_ns, size_t n_samples);
/* The iteration is over (or was left early): the last step stops
** computing and the epoch is recorded.  No-op outside an epoch.  0, or
** STOKE_ENOMEM when the record could not be kept. */
STOKE_API int stoke_twoclock_end_epoch(stoke_twoclock *c);
/* Measured steps (warm-up excluded); producer fields are 0. */
STOKE_API int stoke_twoclock_stats(const stoke_twoclock *c, stoke_stats *out);
/* As stoke_loader_wait_histogram. */
STOKE_API size_t stoke_twoclock_wait_histogram(const stoke_twoclock *c,
                                               stoke_hist_bucket *out,
                                               size_t cap);
STOKE_API size_t stoke_twoclock_n_epoch_stats(const stoke_twoclock *c);
STOKE_API int stoke_twoclock_epoch_stats(const stoke_twoclock *c, size_t i,
                                         stoke_epoch_stats *out);
/* A Chrome trace of the consumer's wait and compute spans (trace_events
** > 0).  0, STOKE_EINVAL or STOKE_EIO (message in stoke_errmsg(NULL)). */
STOKE_API int stoke_twoclock_write_trace(const stoke_twoclock *c,
                                         const char *path);

/* ------------------------------------------------------------------------ */
/* Diagnosis                                                                 */

typedef enum stoke_verdict {
  STOKE_VERDICT_UNKNOWN = 0, /* too few steps to say */
  STOKE_VERDICT_BUSY = 1,    /* waiting is a small share: the model is the cost */
  STOKE_VERDICT_STARVING = 2,/* the producer's mean rate is below the consumer's */
  STOKE_VERDICT_VARIANCE = 3,/* the mean keeps up, the wait has a long tail */
  STOKE_VERDICT_PYTHON = 4   /* starving because Python code on the workers
                                is serialised by the GIL: more threads do
                                not help (since 0.2) */
} stoke_verdict;

typedef struct stoke_diagnosis {
  int verdict;            /* stoke_verdict */
  double wait_ratio;      /* the numbers the verdict rests on */
  double queue_empty_frac;
  double tail_ratio;      /* wait p99 / max(step p50, 1 ms) */
  char reason[256];       /* one line: the verdict and its numbers */
  /* The queue model (docs/diagnosis.md), since 0.2.  Zero when the snapshot
  ** has no producer measurements. */
  int64_t t_d_ns;         /* producer wall time per sample (read + decode +
                             transform means) */
  int64_t t_cpu_ns;       /* CPU time per sample: t_d * cpu_frac */
  int64_t t_io_ns;        /* off-CPU (waiting) time per sample, queueing for
                             a core taken out */
  double cpu_frac;        /* worker_cpu_ns / worker_busy_ns */
  int64_t t_c_ns;         /* consumer step (compute mean) */
  int64_t copy_ns;        /* host-to-device copy per batch, 0 if unmeasured */
  size_t batch_size;      /* B used by the model */
  double cores_avail;     /* cores left to the workers */
  int64_t producer_batch_ns; /* B*max(t_d'/W_eff, t_cpu/cores_avail) */
  int64_t predicted_step_ns; /* the model's step at this run's W and K */
  int64_t measured_step_ns;  /* (waiting + computing) / steps */
  double model_error;     /* predicted / measured - 1 */
  int bound;              /* stoke_bound: what sets the predicted step */
  /* Samples made by Python code (the PYTHON, GIL_WAIT and COLLATE stages),
  ** since 0.2; 0 for other sources. */
  double gil_wait_frac;   /* GIL_WAIT / (PYTHON + GIL_WAIT + COLLATE) */
  double gil_busy;        /* the GIL's estimated occupancy by the workers:
                             their CPU time per sample x samples per step /
                             the step (about 1 when it is saturated) */
} stoke_diagnosis;

/* Thresholds, documented in docs/diagnosis.md. */
#define STOKE_BUSY_WAIT_RATIO 0.10
#define STOKE_STARVING_EMPTY_FRAC 0.50
/* Python-bound (a starving run of a Python source): the workers wait this
** share of a sample's time for the GIL, or (with 2 workers or more and a
** core to spare) the GIL is this busy while the workers are blocked (off a
** core and not queueing for one) BLOCKED_FRAC of their time or still wait
** GIL_WAIT_SOME of it for the GIL (docs/diagnosis.md). */
#define STOKE_PYTHON_GIL_WAIT_FRAC 0.50
#define STOKE_PYTHON_GIL_BUSY 0.80
#define STOKE_PYTHON_BLOCKED_FRAC 0.25
#define STOKE_PYTHON_GIL_WAIT_SOME 0.15
/* Starving also when a lower bound of the producer's time per batch (the
** queue model's, see stoke_diagnose_model) is this many consumer steps. */
#define STOKE_STARVING_PRODUCER_RATIO 1.2

/* "busy", "starving", "variance", "python-bound", "unknown". */
STOKE_API const char *stoke_verdict_name(int verdict);
/* Judge a snapshot.  Equivalent to stoke_diagnose_ex(st, NULL, 0, out). */
STOKE_API int stoke_diagnose(const stoke_stats *st, stoke_diagnosis *out);

/* What sets the predicted step (stoke_diagnosis.bound, stoke_prediction). */
typedef enum stoke_bound {
  STOKE_BOUND_NONE = 0,
  STOKE_BOUND_CONSUMER = 1, /* t_c: the model is the cost */
  STOKE_BOUND_WORKERS = 2,  /* B*t_d'/W_eff: too few workers in flight */
  STOKE_BOUND_CORES = 3,    /* B*t_cpu/cores_avail: the CPU is saturated */
  STOKE_BOUND_SLOTS = 4,    /* W_eff capped by the K+1 batch slots */
  STOKE_BOUND_INLINE = 5,   /* W = 0: B*t_d + t_c, nothing overlaps */
  STOKE_BOUND_GIL = 6       /* B*t_gil: one GIL for every worker (0.2) */
} stoke_bound;

/* "consumer", "workers", "cores", "slots", "inline", "gil", "none". */
STOKE_API const char *stoke_bound_name(int bound);

/* The queue model's inputs, measured from a snapshot by stoke_model_init()
** and editable before a prediction (e.g. consumer_cpu for a step that burns
** CPU).  Every time is a mean; see docs/diagnosis.md for the formulas. */
typedef struct stoke_model {
  size_t struct_size;     /* set by stoke_model_init() */
  size_t batch_size;      /* B */
  unsigned n_workers;     /* W of the measured run */
  unsigned prefetch;      /* K of the measured run */
  double cores;           /* online CPUs (or the caller's number) */
  double consumer_cpu;    /* cores the consumer's step burns while it
                             computes: 0 for a GPU-like step (default), 1
                             for a step that spins one core */
  int64_t t_d_ns;         /* producer wall time per sample, as measured */
  int64_t t_cpu_ns;       /* CPU per sample */
  int64_t t_io_ns;        /* off-CPU time per sample (contention removed) */
  double sigma;           /* log-sd of the per-sample cost (0 = fixed) */
  int64_t stage_ns[STOKE_STAGE_COUNT]; /* per-sample mean of each stage */
  int64_t t_c_ns;         /* consumer step */
  int64_t copy_ns;        /* copy per batch on the critical path */
  size_t chunk;           /* mean samples per worker claim */
  size_t n_batches;       /* batches per epoch; 0 = unknown (no epoch
                             prediction) */
  int prefetch_next_epoch;/* 1: epochs start with a full queue */
  double run_delay_frac;  /* the workers' time runnable but not running per
                             ns on a core (Linux schedstat of the live
                             threads named stoke-w*), or -1: unknown, t_io
                             then uses the max(1, A/P) estimate */
  /* Since 0.2. */
  unsigned threads_seen;  /* live threads named stoke-w*: the workers and
                             the helper threads they started (a threaded
                             library inside the samples inherits the name);
                             0 when unknown */
  int64_t t_gil_ns;       /* per-sample time that needs the GIL, when the
                             GIL is what limits the producer (a
                             Python-bound run: its CPU time per sample);
                             0 otherwise.  The producer then needs at least
                             B * t_gil per batch whatever W is. */
  double gil_wait_frac;   /* as stoke_diagnosis.gil_wait_frac */
  double gil_busy;        /* as stoke_diagnosis.gil_busy */
  /* Since 0.2: of t_c_ns, the consumer's own wait for a core per step at
  ** the run's W (its thread's schedstat run delay while computing; 0 when
  ** unknown).  A prediction for another W scales it with the workers' CPU
  ** demand there (none at W = 0), so that a step stretched by this run's
  ** workers is not predicted for a run without them. */
  int64_t consumer_delay_ns;
  unsigned echo;          /* the run's data echoing (1: none); the times
                             above are then per delivered sample, the
                             producer's over echo (since 0.3) */
  /* Since 0.2: cores' worth of runnable threads other than the workers
  ** (other processes and the consumer) that competed with them for the
  ** cores while the run measured, from the workers' run delay: with n of
  ** them runnable while producing, on P cores shared fairly per thread,
  ** the delay per ns on a core is r = (n + external) / P - 1.
  ** stoke_model_init() sets it from the loader's window (0 without it);
  ** stoke_predict_step() shares the cores with it (less consumer_cpu,
  ** already left out of the workers' cores) at every W, so that a what-if
  ** for more workers than the run had knows the cores were not all
  ** theirs (issue 13).  Editable: 0 predicts a machine of our own. */
  double external_cpu;
  /* Since 0.3: the shape of the per-sample cost, its quantiles over its
  ** mean (p50, p95, p99, max; deflated as sigma is for queueing for a
  ** core), from the dominant stage's distribution.  The simulation draws
  ** the costs from them (piecewise log-linear between the quantiles,
  ** rescaled to the mean), not from a lognormal, so that a rare, very long
  ** sample (2% of the samples 40x the rest) is predicted as the rare long
  ** wait it is; all 0: the lognormal of sigma. */
  double cost_q[4];
} stoke_model;

/* Fill m from a snapshot.  cfg (borrowed, may be NULL) gives B and
** prefetch_next_epoch; cores 0 means the online CPUs.  While the loader's
** workers are alive, their scheduler statistics (run_delay_frac) tell
** queueing for a core from waiting off it; call it before destroying the
** loader to get them.  Returns 0, or
** STOKE_EINVAL for NULL st/m or a snapshot with no measured steps. */
STOKE_API int stoke_model_init(stoke_model *m, const stoke_stats *st,
                               const stoke_config *cfg, unsigned cores);

typedef struct stoke_prediction {
  unsigned n_workers, prefetch;
  int64_t producer_batch_ns; /* steady-state producer time per batch */
  int64_t step_ns;           /* mean step, variance and slots included */
  int64_t epoch_ns;          /* n_batches * step (+ an empty start); 0 when
                                n_batches is unknown */
  double wait_ratio;         /* predicted waiting share of the step */
  int bound;                 /* stoke_bound */
} stoke_prediction;

/* Predict the run of model m with `workers` and `prefetch` (>= 1) instead:
** the closed form of docs/diagnosis.md for the mean, and a short
** deterministic simulation of the slots and the per-sample spread for the
** waits.  Pure: same inputs, same output.  Returns 0 or STOKE_EINVAL. */
STOKE_API int stoke_predict_step(const stoke_model *m, unsigned workers,
                                 unsigned prefetch, stoke_prediction *out);

/* Deadlines (since 0.2; seed 003's nightly window): do `epochs` epochs fit
** in deadline_ns?  epoch_ns is the time of one epoch (measured, or the
** model's prediction), error the relative error bar to put on it (the
** what-if error of the model, STOKE_WHATIF_ERROR_P90, for a prediction;
** the spread of the measured epochs for a measurement).  FITS when even the
** high end fits, MISSES when even the low end does not, else UNCERTAIN. */
#define STOKE_WHATIF_ERROR_P90 0.15 /* bench/truth.sh: 10.4% measured in
                                       0.3, docs/diagnosis.md */
typedef enum stoke_deadline_verdict {
  STOKE_DEADLINE_FITS = 1,
  STOKE_DEADLINE_UNCERTAIN = 2,
  STOKE_DEADLINE_MISSES = 3
} stoke_deadline_verdict;
typedef struct stoke_deadline {
  int64_t epoch_ns, total_ns;  /* one epoch; epochs x epoch_ns */
  int64_t low_ns, high_ns;     /* total_ns x (1 -/+ error) */
  double error;
  int64_t deadline_ns;
  int verdict;                 /* stoke_deadline_verdict */
  double epochs_in_window;     /* deadline / epoch_ns */
} stoke_deadline;
/* Returns 0, or STOKE_EINVAL for epoch_ns or deadline_ns <= 0, epochs 0 or
** an error outside [0, 1). */
STOKE_API int stoke_deadline_check(int64_t epoch_ns, unsigned epochs,
                                   int64_t deadline_ns, double error,
                                   stoke_deadline *out);
/* "fits", "uncertain", "misses". */
STOKE_API const char *stoke_deadline_verdict_name(int verdict);

/* Like stoke_diagnose, plus the queue model's numbers and its prediction of
** this run.  cfg may be NULL; cores 0 means the online CPUs. */
STOKE_API int stoke_diagnose_ex(const stoke_stats *st,
                                const stoke_config *cfg, unsigned cores,
                                stoke_diagnosis *out);

/* Like stoke_diagnose_ex, from a model the caller filled or edited (e.g.
** consumer_cpu = 1 for a step that spins a core, n_batches).  The verdict
** uses the model's producer floor: max(B * t_d / W_eff, B * max(t_d' /
** W_eff, t_cpu / cores_avail)) >= STOKE_STARVING_PRODUCER_RATIO * (t_c +
** copy) is starving whatever the queue shows.  Returns 0 or STOKE_EINVAL. */
STOKE_API int stoke_diagnose_model(const stoke_stats *st,
                                   const stoke_model *m,
                                   stoke_diagnosis *out);

/* One line of advice, a rung of the escalation ladder. */
typedef enum stoke_advice_kind {
  STOKE_ADVICE_MODEL = 1,     /* busy: the model is the cost */
  STOKE_ADVICE_WORKERS = 2,   /* more workers, up to the knee */
  STOKE_ADVICE_FEWER = 3,     /* oversubscribed: fewer workers, same step */
  STOKE_ADVICE_PIN_COPY = 4,  /* pinned memory and asynchronous copies */
  STOKE_ADVICE_CHEAPER = 5,   /* cheaper per-sample work (dominant stage) */
  STOKE_ADVICE_PREFETCH = 6,  /* deeper prefetch for variance or slots */
  STOKE_ADVICE_ECHO = 7,      /* data echoing, the last resort */
  STOKE_ADVICE_DEVICE_PREFETCH = 8, /* the copy is exposed: copy further
                                      ahead (device_prefetch) */
  /* Since 0.2 (Python datasets, helper threads): */
  STOKE_ADVICE_THREADS = 9,   /* helper threads of a library inside the
                                 samples oversubscribe the cores */
  STOKE_ADVICE_C_TRANSFORMS = 10, /* python-bound: the work into C
                                     transforms that release the GIL */
  STOKE_ADVICE_PYTHON_OPS = 11,   /* python-bound: fewer Python operations
                                     per sample */
  STOKE_ADVICE_PROCESSES = 12,    /* python-bound: processes, last resort */
  STOKE_ADVICE_PRESIZE = 13   /* decoding dominates and the stored images
                                 are much larger than the output: pre-resize
                                 them once (stoke pack --max-side; since
                                 0.3) */
} stoke_advice_kind;

typedef struct stoke_advice {
  int kind;                  /* stoke_advice_kind */
  unsigned n_workers;        /* the setting it proposes (WORKERS, FEWER,
                                PREFETCH: the others keep the run's) */
  unsigned prefetch;
  int stage;                 /* CHEAPER: the dominant stoke_stage */
  unsigned echo;             /* ECHO: times each batch is used */
  unsigned device_prefetch;  /* DEVICE_PREFETCH: the depth it proposes */
  int64_t now_step_ns;       /* the model's step of the run as it is */
  int64_t predicted_step_ns; /* the step if the advice is taken */
  double speedup;            /* now / predicted */
  char text[256];            /* one line with the numbers, worded as in
                                0.3 (the tool's flags); a front end words
                                it its own way: stoke_advice_format */
  unsigned max_side;         /* PRESIZE: the --max-side it proposes (since
                                0.3) */
} stoke_advice;

#define STOKE_MAX_ADVICE 12

/* The escalation ladder for a run: up to `cap` lines into out, most useful
** first, each with the gain the model expects.  *n_out gets the count.
** cfg may be NULL; cores 0 means the online CPUs.  Returns 0 or
** STOKE_EINVAL. */
STOKE_API int stoke_advise(const stoke_stats *st, const stoke_config *cfg,
                           unsigned cores, stoke_advice *out, size_t cap,
                           size_t *n_out);
/* The same from a model the caller filled or edited. */
STOKE_API int stoke_advise_model(const stoke_model *m,
                                 const stoke_stats *st, stoke_advice *out,
                                 size_t cap, size_t *n_out);

/* ------------------------------------------------------------------------ */
/* Memory ledgers: host bytes of a loader, device bytes of a training step  */

/* The host bytes a loader allocates, term by term (DESIGN.md: K x batch
** bytes + W x worker state (+ cache)).  Plain data. */
typedef struct stoke_host_ledger {
  size_t struct_size;      /* set by the caller: sizeof(stoke_host_ledger) */
  size_t n_slots;          /* batch slots: prefetch + consumer_slots */
  unsigned n_workers;      /* resolved (AUTO: online CPUs) */
  uint64_t sample_bytes;   /* all fields of one sample */
  uint64_t batch_bytes;    /* batch_size x sample_bytes */
  uint64_t slots_bytes;    /* n_slots x (batch bytes + indices + header) */
  uint64_t order_bytes;    /* the epoch order and the shuffle scratch */
  uint64_t workers_bytes;  /* per-worker state and statistics (scratch) */
  uint64_t consumer_bytes; /* the consumer's statistics */
  uint64_t total_bytes;    /* the sum: what stoke_loader_host_bytes says */
  uint64_t budget_bytes;   /* cfg->mem_budget_bytes; 0 = no limit */
  uint64_t trace_bytes;    /* span rings when cfg->trace_events > 0 */
  /* The device stage (since 0.2): what the device slots take, as the
  ** loader allocates them when CUDA serves. */
  int pinned;              /* host slots in page-locked memory */
  size_t n_device_slots;   /* device_prefetch + consumer_slots with a device,
                              else 0 */
  uint64_t device_batch_bytes; /* one device slot */
  uint64_t device_bytes;   /* the slots, plus the normalisation's staging
                              buffer and table */
  uint64_t device_free_bytes; /* the device's free memory, checked before
                                 allocation (stoke_loader_ledger of a loader
                                 on a device); 0 when unknown */
  uint64_t failures_bytes; /* the bad-sample log, SKIP's flags and the
                              quarantine's bitmap (since 0.2) */
  /* Since 0.2: the source's per-worker scratch (an image source's read
  ** buffer, decoded window, restart cut and resampler buffers), a bound
  ** from its largest image (docs/tuning.md), times max(W, 1): with no
  ** workers the consumer's thread makes the samples. */
  uint64_t scratch_per_worker;
  uint64_t scratch_bytes;
  int scratch_basis;       /* stoke_scratch_basis */
  uint32_t scratch_width, scratch_height; /* the image the bound is of */
  uint64_t cache_bytes;    /* the RAM cache (ram_cache_bytes, at most the
                              samples' bytes) and the packed cache's map of
                              samples and its write queue (cache_dir)
                              (since 0.3) */
} stoke_host_ledger;

/* The ledger of the loader cfg would create, without creating it: nothing
** is allocated and no thread starts, so a tuner can skip configurations
** over budget for free.  cfg->source is required (it gives the sample size
** and count); n_workers AUTO resolves to the online CPUs.
** Returns 0; STOKE_EINVAL for a bad cfg; or STOKE_EBUDGET when total_bytes
** exceeds cfg->mem_budget_bytes, with *out filled in all the same.  On an
** error stoke_errmsg(NULL) explains it, naming the biggest term.
** Thread-safety: any thread.  Since 0.1. */
STOKE_API int stoke_host_ledger_compute(const stoke_config *cfg,
                                        stoke_host_ledger *out);
/* The ledger of a live loader (its resolved configuration).  0 or
** STOKE_EINVAL.  Any thread.  Since 0.1. */
STOKE_API int stoke_loader_ledger(const stoke_loader *l,
                                  stoke_host_ledger *out);

/* Device memory of a training step: fixed bytes (weights + gradients +
** optimizer state) plus activation bytes per sample of the microbatch,
** against the device's memory less a reserve (allocator fragmentation,
** CUDA context, workspaces).
**
**   usable  = device_bytes - round(reserve_frac x device_bytes)
**   resident(n) = fixed_bytes + n x per_sample_bytes
**   max_microbatch = floor((usable - fixed_bytes) / per_sample_bytes)
**
** All in bytes, so any unit works as long as the inputs agree: 3.2 GB fixed,
** 0.34 GB per sample, 24 GB device, 10% reserve gives 54 whether GB means
** 1e9 or 2^30 bytes (21.6 usable, 3.2 + 54 x 0.34 = 21.56 fits, 55 needs
** 21.90). */
typedef struct stoke_device_ledger {
  uint64_t fixed_bytes;      /* IN: weights + grads + optimizer */
  uint64_t per_sample_bytes; /* IN: activations per sample, > 0 */
  uint64_t device_bytes;     /* IN: the device's memory, > 0 */
  double reserve_frac;       /* IN: share of the device kept free, [0, 1) */
  uint64_t reserve_bytes;    /* OUT */
  uint64_t usable_bytes;     /* OUT: device - reserve */
  uint64_t max_microbatch;   /* OUT: the largest that fits; 0 if none */
} stoke_device_ledger;

/* Fill the OUT fields of l from its IN fields.  Returns 0; STOKE_EINVAL
** for per_sample_bytes or device_bytes 0 or a reserve outside [0, 1);
** STOKE_EBUDGET when not even one sample fits (max_microbatch 0, the OUT
** fields still filled).  stoke_errmsg(NULL) explains an error.
** Thread-safety: any thread.  Since 0.1. */
STOKE_API int stoke_device_ledger_compute(stoke_device_ledger *l);
/* fixed + n x per_sample (saturating). */
STOKE_API uint64_t stoke_device_ledger_resident(const stoke_device_ledger *l,
                                                uint64_t microbatch);

/* ------------------------------------------------------------------------ */
/* Tuning: sweep workers x prefetch x batch size, pick the knee             */

/* Throughput within this share of the best counts as "as good".  The one
** tolerance of the knee: stoke tune's, the doctor's advice and the online
** autotuner all use it through stoke_tune_knee_find (docs/tuning.md). */
#define STOKE_TUNE_TOLERANCE 0.05

/* The adaptive sweep's and the autotuner's absolute bound on workers: past
** it a configuration is a typo, not a plan, whatever the samples wait on
** (256 threads of 1 MiB stacks; the memory budget may lower it).  Since
** 0.2. */
#define STOKE_TUNE_MAX_WORKERS 256

typedef enum stoke_tune_status {
  STOKE_TUNE_PENDING = 0,     /* not measured (yet, or the sweep stopped) */
  STOKE_TUNE_MEASURED = 1,
  STOKE_TUNE_OVER_BUDGET = 2, /* skipped: host ledger over the budget */
  STOKE_TUNE_SKIPPED = 3      /* not run: the queue model, from a measured
                                 neighbour, says it cannot be the knee
                                 (note says why; since 0.2) */
} stoke_tune_status;

/* One configuration of a sweep and what it measured.  Plain data: the knee
** selection works on hand-made tables too. */
typedef struct stoke_tune_point {
  unsigned n_workers;
  unsigned prefetch;
  size_t batch_size;
  uint64_t host_bytes;     /* the host ledger's total */
  int status;              /* stoke_tune_status */
  /* Measured, warm-up excluded (status MEASURED): */
  double samples_per_s;    /* measured samples / measured wall time */
  double epoch_s;          /* mean wall seconds of a measured epoch */
  double wait_ratio;       /* wait / (wait + compute) */
  double queue_empty_frac;
  double worker_cpu_s;     /* CPU time the producers used, per epoch */
  int verdict;             /* stoke_verdict of the measured steps */
  uint64_t steps, samples; /* measured */
  /* Since 0.2.  The queue model's prediction for this point, from the
  ** measured point it was judged by (SKIPPED), or 0; and one line on why
  ** the adaptive sweep ran or skipped it ("ladder", "bisection", "model:
  ** ..."), or "". */
  double predicted_samples_per_s;
  char note[160];
} stoke_tune_point;

/* The knee of a sweep. */
typedef struct stoke_tune_knee {
  size_t index;       /* the chosen point */
  size_t best;        /* the point with the highest throughput */
  int stall_removed;  /* 1: the knee is busy; 0: a consumer was given but no
                         point as fast as the best is busy, so the knee is
                         the cheapest of the fastest; -1: no consumer */
  char reason[256];   /* one line: why this point */
} stoke_tune_knee;

/* Choose the knee of measured points: among the MEASURED points whose
** throughput is at least (1 - tolerance) x the best, keep the busy ones if
** have_consumer and any of them is busy; of those, the cheapest: fewest
** workers, then least host memory, then higher throughput, then the
** earlier index.  Points not MEASURED are ignored.  pts is borrowed.
** Returns 0; STOKE_EINVAL for no measured point, NULL arguments or a
** tolerance outside [0, 1).  Pure; any thread.  Since 0.1. */
STOKE_API int stoke_tune_knee_find(const stoke_tune_point *pts, size_t n,
                                   double tolerance, int have_consumer,
                                   stoke_tune_knee *out);

/* The same rule on the queue model's predictions (since 0.2): the knee of
** model m over W in [w_lo, w_hi] at prefetch k, to one worker, with
** predicted points (busy: predicted wait under STOKE_BUSY_WAIT_RATIO;
** have_consumer: m has a step).  The doctor's advice and `stoke tune` both
** choose with stoke_tune_knee_find, so they cannot disagree on the rule
** (docs/tuning.md).  *out: the knee's predicted point; *knee_out (may be
** NULL): stall_removed and reason.  0 or STOKE_EINVAL.  Pure. */
STOKE_API int stoke_tune_knee_model(const stoke_model *m, unsigned prefetch,
                                    unsigned w_lo, unsigned w_hi,
                                    double tolerance, stoke_tune_point *out,
                                    stoke_tune_knee *knee_out);

/* The model's tuned configuration (since 0.3): the knee over W in [1,
** stoke_tune_knee_w_max(m)] at prefetch 1, 2, 4 and m's own, by
** stoke_tune_knee_find, as the doctor's advice bounds W.  *out: the
** knee's predicted point (n_workers, prefetch).  0 or STOKE_EINVAL. */
STOKE_API int stoke_tune_knee_model_tuned(const stoke_model *m,
                                          stoke_tune_point *out);
/* The most workers the model is asked about: 8 per core left to the
** workers (stoke_model.cores less consumer_cpu), at least m's own W, at
** most 256. */
STOKE_API unsigned stoke_tune_knee_w_max(const stoke_model *m);

/* The consumer's step for a sweep: called between next() and the batch's
** release, in the sweeping thread; its duration is the computing clock. */
typedef void (*stoke_tune_step_fn)(void *user, stoke_batch *b);
/* Called before a point runs (pt->status PENDING) and after it (MEASURED,
** OVER_BUDGET or SKIPPED; a point decided without running gets only this
** call); i counts from 0 to n - 1 (n: the grid, or for the adaptive sweep
** the most points it can record).  Return nonzero to stop the sweep:
** before a point, it does not run; after, no further point runs. */
typedef int (*stoke_tune_progress_fn)(void *user, size_t i, size_t n,
                                      const stoke_tune_point *pt);

typedef struct stoke_tune_config {
  size_t struct_size;        /* set by stoke_tune_config_init() */
  stoke_config base;         /* the loader to vary; base.source required.
                                n_workers, prefetch, batch_size and
                                warmup_* are set per point; points whose
                                ledger exceeds base.mem_budget_bytes are
                                skipped (OVER_BUDGET) */
  const unsigned *workers;   /* the worker counts, or NULL: the adaptive
                                sweep (below), or with adaptive 0 the
                                ladder 0, 1, 2, 4, ... doubling up to
                                max_workers (included) */
  size_t n_workers;
  unsigned max_workers;      /* the ladder's top.  0: adaptive,
                                STOKE_TUNE_MAX_WORKERS (and what the memory
                                budget allows); not adaptive, max(2 x
                                online CPUs, 8) */
  const unsigned *prefetch;  /* prefetch depths, or NULL: 1, 2, 4 */
  size_t n_prefetch;
  const size_t *batch_sizes; /* or NULL: base.batch_size only */
  size_t n_batch_sizes;
  unsigned warmup_epochs;    /* per point, left out; default 1 */
  unsigned min_epochs;       /* measured epochs per point; default 1 */
  int64_t min_measure_ns;    /* and at least this much measured wall time
                                (up to 1000 epochs); default 0 */
  stoke_tune_step_fn step;   /* the consumer's step; NULL: none */
  void *step_user;
  stoke_tune_progress_fn progress; /* NULL: none */
  void *progress_user;
  const volatile int *cancel; /* polled between points (a signal handler
                                 may set it); nonzero stops the sweep; the
                                 point in progress finishes first */
  /* Since 0.2.  The adaptive sweep (default 1; used when workers is NULL):
  ** per batch size, the ladder 0, 1, 2, 4, ... keeps doubling while the
  ** best throughput of a rung still rises by tolerance / 2 over the rung
  ** before (measured, or predicted for the next doubling by the rung's
  ** queue model), the stall is not yet gone (the rung's best point waits
  ** tolerance or more of the step), and the workers mostly wait (past 2 x
  ** the cores, under half of a sample on a core): waiting stages follow
  ** far past the core count, CPU-bound ones stop at it.  Its top is
  ** max_workers, else STOKE_TUNE_MAX_WORKERS, and the largest count whose
  ** host ledger fits base.mem_budget_bytes.  Then it bisects between the
  ** knee's rung and the rung below, so the knee is found to one worker.
  ** The queue model of each measured point (stoke_model_init) skips what
  ** cannot matter, recorded as SKIPPED with the reason: a prefetch depth
  ** that it predicts no faster than the rung's first (tolerance / 2),
  ** unless that point's verdict is variance, and a bisection probe it
  ** predicts below (1 - 2 x tolerance) of the best.  Points are recorded
  ** in the order they are decided.  0: the fixed grid. */
  int adaptive;
  double tolerance;          /* the knee's (STOKE_TUNE_TOLERANCE), which
                                the adaptive sweep's rules use too */
  double consumer_cpu;       /* cores the step burns while it computes,
                                for the model (1 for a spinning step, 0
                                for a GPU-like one: the default) */
} stoke_tune_config;

STOKE_API void stoke_tune_config_init(stoke_tune_config *cfg);

/* The points of cfg's grid in sweep order (batch size, then workers, then
** prefetch; each PENDING with host_bytes and status OVER_BUDGET filled
** from the host ledger).  With pts NULL or cap too small only *n is set
** and STOKE_EINVAL returned when pts is not NULL.  For the adaptive sweep
** *n is the most points it can record (what pts must hold) and pts, when
** given, is zeroed: its points are known only as it goes.  0 or
** STOKE_EINVAL.  Since 0.1. */
STOKE_API int stoke_tune_grid(const stoke_tune_config *cfg,
                              stoke_tune_point *pts, size_t cap, size_t *n);

/* Sweep: for each point of the grid (or as the adaptive sweep decides),
** create one loader, run warm-up then measured epochs through the step,
** and record the point.  pts must hold the whole grid (stoke_tune_grid's
** n).  *n_done counts the points recorded (measured or skipped); fewer than
** the grid when cancelled or stopped by progress, and for the adaptive
** sweep as many as it needed.  Returns 0 (also when stopped early); STOKE_EINVAL;
** or a loader's error (e.g. STOKE_ESAMPLE), after which the points before
** the failing one stay valid and stoke_errmsg(NULL) has the message.
** Blocks the calling thread for the whole sweep.  Since 0.1. */
STOKE_API int stoke_tune_sweep(const stoke_tune_config *cfg,
                               stoke_tune_point *pts, size_t cap,
                               size_t *n_done);

/* The PyTorch DataLoader arguments closest to W workers and prefetch K:
** num_workers = W; prefetch_factor = ceil(K / W) (PyTorch counts batches
** per worker, stoke batches in all; 0 when W = 0, meaning None);
** persistent_workers = W > 0. */
STOKE_API unsigned stoke_tune_prefetch_factor(unsigned n_workers,
                                              unsigned prefetch);

/* ------------------------------------------------------------------------ */
/* Advice in a front end's words (since 0.4)                                  */

/* The numbers an advice rests on, beside its stoke_advice (the action, the
** settings it proposes and the predicted step): enough for a front end to
** write the whole line in its own words.  Plain data; fields a kind does
** not use are 0. */
typedef struct stoke_advice_basis {
  int variant;               /* which reading of the kind: FEWER 0 busy
                                (the knee is enough), 1 oversubscribed;
                                PIN_COPY 0 pageable copies, 1 an exposed
                                copy without the device stage; CHEAPER 0 a
                                stage, 1 the device copy */
  unsigned run_workers;      /* the run's W and K */
  unsigned run_prefetch;
  double cores;              /* the cores the workers may use */
  double cpu_frac;           /* share of a sample's time on a core */
  double wait_ratio;         /* the run's waiting share of the step */
  double sigma;              /* spread of the sample cost (log-normal) */
  int64_t compute_ns;        /* the consumer's step, t_c */
  int64_t copy_ns;           /* the copy on the critical path, per step */
  int64_t copy_mean_ns;      /* the mean copy of a batch */
  double copy_overlap;       /* share of the copy the step hid */
  uint64_t pageable_copies;  /* copies from pageable memory */
  int64_t sample_ns;         /* t_d: a sample's producer time */
  int64_t stage_ns;          /* the named stage's time per sample */
  int64_t gil_ns;            /* t_gil: a sample's time holding the GIL */
  int64_t producer_batch_ns; /* ECHO: a batch with every core */
  unsigned threads_seen;     /* THREADS: threads named stoke-w* */
  double run_delay_frac;     /* THREADS: ns runnable per ns on a core */
  double image_pixels_mean;  /* PRESIZE: the stored images */
  double image_side_mean;
  double pixels_kept_frac;   /* PRESIZE: the pixels decoding would read */
} stoke_advice_basis;

/* The settings an advice names.  A front end words each its own way: the
** tool as flags ("-j 4"), Python as keyword arguments ("num_workers=4"). */
typedef enum stoke_setting {
  STOKE_SETTING_WORKERS = 1,         /* value: the worker count */
  STOKE_SETTING_PREFETCH = 2,        /* value: batches in flight */
  STOKE_SETTING_SAME_WORKERS = 3,    /* "with the workers just proposed",
                                        after PREFETCH; no value */
  STOKE_SETTING_ECHO = 4,            /* value: uses of each batch */
  STOKE_SETTING_PIN_MEMORY = 5,      /* page-locked slots; no value */
  STOKE_SETTING_DEVICE_PREFETCH = 6, /* value: batches on the device */
  STOKE_SETTING_MAX_SIDE = 7,        /* value: the longer side the dataset
                                        is pre-resized to, once */
  STOKE_SETTING_ONE_THREAD = 8,      /* one helper thread per worker (a
                                        threaded library's pool); no value */
  STOKE_SETTING_C_TRANSFORMS = 9     /* stoke's C decode and transforms,
                                        which run without the GIL */
} stoke_setting;

/* How a front end names a setting: name() writes the words for `setting`
** (with `value` where it has one) into buf, n bytes, NUL-terminated;
** `workers` is the worker count the same line proposes (a prefetch counted
** per worker, as PyTorch's prefetch_factor, needs it).  Called on the
** calling thread, during the call that was given it. */
typedef struct stoke_advice_words {
  void (*name)(void *user, int setting, unsigned value, unsigned workers,
               char *buf, size_t n);
  void *user;
} stoke_advice_words;

/* The ladder of stoke_advise_model, and for each line its basis: out[i]
** and basis[i] for i < *n_out (both arrays hold cap).  out[i].text is as
** stoke_advise_model writes it; stoke_advice_format writes the line in a
** front end's words.  Returns 0 or STOKE_EINVAL.  Thread-safety: any
** thread.  Since 0.4. */
STOKE_API int stoke_advise_basis(const stoke_model *m, const stoke_stats *st,
                                 stoke_advice *out, stoke_advice_basis *basis,
                                 size_t cap, size_t *n_out);

/* One line of advice, a and its basis b, in the given words (NULL: those
** of stoke_advice.text) into buf (n bytes, NUL-terminated, truncated to fit).  The
** stage name and the numbers are the library's; every setting it names
** comes from words.  0, or STOKE_EINVAL (a NULL argument, n 0, or a kind it
** does not know, when buf gets "").  Thread-safety: any thread.  Since
** 0.4. */
STOKE_API int stoke_advice_format(const stoke_advice *a,
                                  const stoke_advice_basis *b,
                                  const stoke_advice_words *words, char *buf,
                                  size_t n);

/* ------------------------------------------------------------------------ */
/* A measured run's analysis: what the reports print (since 0.4)              */

/* The measured (not warm-up) epochs of a run, summed up.  Plain data. */
typedef struct stoke_epoch_summary {
  size_t n_measured;    /* epochs that are not warm-up */
  double epoch_s;       /* mean wall seconds of the measured epochs */
  double samples_per_s; /* measured samples / measured seconds */
  double measured_s;    /* wall seconds of the measured epochs */
} stoke_epoch_summary;

/* Sum up epochs[0..n) (stoke_loader_epoch_stats' records).  0, or
** STOKE_EINVAL (out NULL, or epochs NULL with n > 0).  Thread-safety: any
** thread.  Since 0.4. */
STOKE_API int stoke_epochs_summarize(const stoke_epoch_stats *epochs, size_t n,
                                     stoke_epoch_summary *out);

/* Do train_epochs fit in deadline_ns at the measured configuration?  The
** epoch is the measured epochs' mean and the error bar their spread (at
** least 5%, at most 90%); fallback_epoch_ns stands in when no epoch was
** measured.  Then as stoke_deadline_check: 0, or STOKE_EINVAL (nothing to
** go on, or bad arguments).  Thread-safety: any thread.  Since 0.4. */
STOKE_API int stoke_deadline_measured(const stoke_epoch_stats *epochs,
                                      size_t n, unsigned train_epochs,
                                      int64_t deadline_ns,
                                      int64_t fallback_epoch_ns,
                                      stoke_deadline *out);

/* What a run's time costs, and what its waiting costs.  Plain data. */
typedef struct stoke_cost {
  double seconds_per_sample;     /* 0 when nothing was measured */
  double seconds_per_epoch;
  double wait_seconds_per_epoch; /* the consumer's waiting share of it */
  double wait_share;             /* the run's wait ratio */
  double steps_per_s;            /* measured steps and fresh (not echoed) */
  double fresh_samples_per_s;    /* samples per measured second */
  /* With a price (gpu_price_per_hour > 0; else all 0): */
  double gpu_price_per_hour;
  double per_epoch, wait_per_epoch;
  double per_million_samples, wait_per_million_samples;
} stoke_cost;

/* The cost of a run from its steady-state stats and its epochs' summary,
** at gpu_price_per_hour (0: time only).  An accelerator is rented by the
** hour whether it computes or waits, so the wait's share of the bill is the
** money spent while it starves.  0, or STOKE_EINVAL.  Thread-safety: any
** thread.  Since 0.4. */
STOKE_API int stoke_cost_estimate(const stoke_stats *st,
                                  const stoke_epoch_summary *sum,
                                  double gpu_price_per_hour, stoke_cost *out);

/* The what-if grid's axes: worker counts and prefetch depths. */
#define STOKE_WHATIF_MAX 16

typedef struct stoke_whatif_axis {
  unsigned v[STOKE_WHATIF_MAX];
  size_t n;
} stoke_whatif_axis;

/* Add x unless present (at most STOKE_WHATIF_MAX values; more are
** dropped).  Thread-safety: one thread per axis.  Since 0.4. */
STOKE_API void stoke_whatif_axis_add(stoke_whatif_axis *a, unsigned x);
/* Sort, without duplicates.  Since 0.4. */
STOKE_API void stoke_whatif_axis_sort(stoke_whatif_axis *a);

/* A measured run, as stoke_profile_analyse reads it.  Everything is
** borrowed for the call. */
typedef struct stoke_profile_input {
  size_t struct_size;               /* sizeof(stoke_profile_input) */
  const stoke_stats *stats;         /* the steady state; must have steps */
  const stoke_config *config;       /* the configuration in force */
  const stoke_model *live_model;    /* stoke_model_init while the workers
                                       lived (their scheduler statistics),
                                       or NULL */
  size_t n_batches;                 /* per epoch */
  const stoke_epoch_stats *epochs;  /* the run's epochs */
  size_t n_epochs;
  int64_t consumer_run_delay_ns;    /* the consumer thread's run delay over
                                       the measured epochs; < 0 unknown */
  unsigned cores;                   /* 0: the online CPUs */
  double consumer_cpu;              /* cores the consumer's step burns */
} stoke_profile_input;

/* The analysis of a measured run: the queue model and its prediction of the
** run, the what-if table, the advice and, when asked, the deadline.  Plain
** data; the caller sets the grid (ws, ks) and train_epochs/deadline_ns
** before stoke_profile_analyse, which fills the rest. */
typedef struct stoke_profile {
  stoke_model model;
  stoke_prediction now; /* the model's view of this run */
  int64_t measured_step_ns;
  int64_t consumer_delay_ns; /* per step: runnable, not running */
  double measured_epoch_ns;
  double step_error, epoch_error;
  stoke_whatif_axis ws, ks; /* the what-if grid: set before the analysis */
  stoke_prediction what_if[STOKE_WHATIF_MAX][STOKE_WHATIF_MAX];
  stoke_advice advice[STOKE_MAX_ADVICE];
  stoke_advice_basis basis[STOKE_MAX_ADVICE]; /* advice[i]'s numbers */
  size_t n_advice;
  /* N epochs in a window (train_epochs 0: not asked): do they fit, at this
  ** configuration and at the model's knee? */
  unsigned train_epochs;
  int64_t deadline_ns;
  stoke_deadline now_fit, knee_fit;
  unsigned knee_workers, knee_prefetch;
} stoke_profile;

/* The default what-if grid, added to what pr holds, then sorted: with
** default_workers, workers 0, 1, 2, 4, 8, 16, 32 and the run's; with
** default_prefetch, prefetch 1, 2, 4, 8 and the run's.  Since 0.4. */
STOKE_API void stoke_profile_grid(stoke_profile *pr, const stoke_config *eff,
                                  int default_workers, int default_prefetch);

/* Analyse in's run into pr: the model (the live model's scheduler figures
** merged in: the loader is gone, its workers' queueing for a core was
** measured while they lived), its prediction and error, the what-if table
** over pr->ws x pr->ks, the advice, and with pr->train_epochs the
** deadline.  *diag (may be NULL) gets the model's verdict: it knows the
** consumer's CPU, and a consumer that waited for a core is compared by the
** step it asked for.  0, or a STOKE_E* code (STOKE_EINVAL: no measured
** step).  Thread-safety: any thread.  Since 0.4. */
STOKE_API int stoke_profile_analyse(const stoke_profile_input *in,
                                    stoke_profile *pr,
                                    stoke_diagnosis *diag);

/* ------------------------------------------------------------------------ */
/* A simulated consumer: the training step of a measurement (since 0.4)      */

/* What a simulated step does with its time. */
typedef enum stoke_step_kind {
  STOKE_STEP_NONE = 0,  /* nothing: the step takes no time */
  STOKE_STEP_SLEEP = 1, /* idle for the time (a GPU-like step that leaves
                           the CPU to the workers) */
  STOKE_STEP_SPIN = 2   /* burn the time on the calling thread's CPU clock,
                           so on an oversubscribed machine the step costs
                           that much work, not that much wall time */
} stoke_step_kind;

/* Spend ns as a step of the given kind on the calling thread (what the
** tool's --compute sleep:D / spin:D and Python's stoke.tune(step="...") do
** between next() and release).  ns <= 0 returns at once.  0, or
** STOKE_EINVAL for an unknown kind.  Thread-safety: any thread.  Since
** 0.4. */
STOKE_API int stoke_step_simulate(int kind, int64_t ns);

/* The calling thread's run delay so far: nanoseconds it was runnable but
** not running (Linux schedstat), e.g. while workers oversubscribed the
** cores.  0 with *ns set, or STOKE_ENOTSUP where the kernel does not say
** (*ns = -1).  Thread-safety: any thread.  Since 0.4. */
STOKE_API int stoke_thread_run_delay(int64_t *ns);

#ifdef __cplusplus
}
#endif
#endif /* STOKE_H */
