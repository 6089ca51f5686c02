/* blob.h — the storage layer (src/storage/): where the encoded bytes of
** sample i and its label come from, under an image source (src/source/
** image.c).  Private to src/ (and unit tests).
**
** A blobset is N samples, each with encoded bytes (opaque here: decode/
** turns them into pixels), an integer label, a format hint and a
** description for error messages.  Three kinds:
**
**   folder  torchvision's ImageFolder: root/<class>/.../<file>   imagefolder.c
**   tar     WebDataset-style tar shards, indexed at open         tar.c
**   packed  stoke's own random-access shards (mmap, zero copy)  packed.c
**           written by the streaming pack writer                 pack_writer.c
**           (format: docs/packed-format.md)
**
** File access: every open, read, stat, mapping and directory call goes
** through the stoke__sys table given at open (os/syscalls.h; NULL = the
** real calls), kept by the blobset or writer for its life, so that tests
** can fail any one of them.
**
** Thread safety: open/close and the pack writer are one thread at a time.
** Once open, a blobset is immutable: every query, and stoke__blobset_read
** with a distinct stoke__blob_reader per thread, may run concurrently from
** any number of threads.  Reads use pread (never a shared file offset).
**
** Errors: functions return 0 or a negative STOKE_E* and write a message
** naming the file, sample index, offset and cause into err[0..cap) (err may
** be NULL when cap is 0).  The message is always NUL-terminated. */
#ifndef STOKE_STORAGE_BLOB_H
#define STOKE_STORAGE_BLOB_H

#include "core/core.h"
#include "os/syscalls.h"

#include <stdint.h>

typedef struct stoke__blobset stoke__blobset; /* opaque */
struct stoke__http;                           /* storage/http.h */
struct stoke__rcache_counts;                  /* storage/rcache.h */

/* Format hint of a sample's bytes, from its extension (folder, tar) or the
** packed index.  UNKNOWN means: sniff the bytes.  Values are stored in
** packed files: never renumber. */
typedef enum stoke__blob_format {
  STOKE__BLOB_UNKNOWN = 0,
  STOKE__BLOB_JPEG = 1,
  STOKE__BLOB_PNG = 2,
  STOKE__BLOB_WEBP = 3,
  STOKE__BLOB_BMP = 4,
  STOKE__BLOB_FORMAT_COUNT
} stoke__blob_format;

/* "jpeg", "png", "webp", "bmp", "unknown". */
const char *stoke__blob_format_name(int format);

/* Per-worker read state, owned by the worker (embed it anywhere).  The
** buffer grows to the largest sample read through this reader and is
** reused; bytes returned by a read stay valid until the next read through
** the same reader or stoke__blob_reader_free. */
typedef struct stoke__blob_reader {
  const stoke_allocator *alloc; /* borrowed; NULL = malloc/free */
  uint8_t *buf;                 /* owned; cap bytes */
  size_t cap;
} stoke__blob_reader;

void stoke__blob_reader_init(stoke__blob_reader *r, const stoke_allocator *a);
void stoke__blob_reader_free(stoke__blob_reader *r); /* then reusable */

/* ---- opening ------------------------------------------------------------- */

/* ImageFolder: root/<class>/<file>, also in nested folders below a class
** (as torchvision walks them).  Classes are the visible subfolders of root
** sorted byte-wise, labelled 0..C-1; files are sorted byte-wise by
** (folder, name).  .jpg .jpeg .png (any case) are samples; other image
** extensions (.webp .bmp .ppm .pgm .tif .tiff) and any other file are
** skipped and listed with a reason; names starting with '.' are ignored.
** STOKE_EFORMAT when root has no class folder or a class has no sample;
** STOKE_EIO when a folder cannot be read. */
int stoke__blobset_open_folder(const char *root, const stoke_allocator *a,
                               const stoke__sys *sys, stoke__blobset **out,
                               char *err, size_t cap);

/* WebDataset tar shards.  specs[0..n_specs) are paths, brace patterns
** ("train-{0000..0099}.tar", "{a,b}.tar") or globs ("train-*.tar"); see
** stoke__blob_expand.  Members are grouped into samples by key (the
** member's folder + basename up to its first dot), adjacent or not, within
** a shard, in order of first appearance; the field is the rest of the name
** (any case): jpg/jpeg/png/webp/bmp = the image, cls = the label (ASCII
** integer), others ignored.  A sample without an
** image or without a label is skipped and listed.  STOKE_EFORMAT for a
** truncated tar, a bad header checksum, a bad .cls or no sample at all;
** STOKE_EIO when a shard cannot be read. */
int stoke__blobset_open_tar(const char *const *specs, size_t n_specs,
                            const stoke_allocator *a, const stoke__sys *sys,
                            stoke__blobset **out, char *err, size_t cap);

/* Packed shards (docs/packed-format.md), in the order given after
** expansion; sample indices run through the shards in that order.  Every
** shard is mapped and its header, index and footer validated before use.
** flags: STOKE__PACK_VERIFY_CRC checks each sample's CRC-32 on read;
** STOKE__BLOB_LITERAL takes specs as paths, unexpanded (blob_paths). */
#define STOKE__PACK_VERIFY_CRC 1u
#define STOKE__BLOB_LITERAL 2u
int stoke__blobset_open_packed(const char *const *specs, size_t n_specs,
                               unsigned flags, const stoke_allocator *a,
                               const stoke__sys *sys, stoke__blobset **out,
                               char *err, size_t cap);

/* The same, where specs may be http:// or https:// URLs (docs/remote.md):
** remote reads as remote_options say (NULL: the defaults).  A URL is
** expanded for its braces only (a '?' is its query, not a glob), and is
** named everywhere by its shown form (url.h). */
struct stoke__http_options;
int stoke__blobset_open_packed_ex(const char *const *specs, size_t n_specs,
                                  unsigned flags,
                                  const struct stoke__http_options *remote,
                                  const stoke_allocator *a,
                                  const stoke__sys *sys,
                                  stoke__blobset **out, char *err,
                                  size_t cap);
int stoke__blobset_open_tar_ex(const char *const *specs, size_t n_specs,
                               unsigned flags, /* STOKE__BLOB_LITERAL */
                               const struct stoke__http_options *remote,
                               const stoke_allocator *a,
                               const stoke__sys *sys, stoke__blobset **out,
                               char *err, size_t cap);

void stoke__blobset_close(stoke__blobset *s); /* NULL: no-op */

/* ---- queries (any thread) ------------------------------------------------ */

const char *stoke__blobset_kind(const stoke__blobset *s); /* "folder", ... */
/* The files a packed set maps, as given after pattern expansion (shards
** without samples included): their count, *paths borrowed from the set.
** 0 for the other kinds, whose files a pack cannot overwrite (a pack
** writes only PREFIX-NNNNN.stoke). */
size_t stoke__blobset_files(const stoke__blobset *s,
                            const char *const **paths);
size_t stoke__blobset_n_samples(const stoke__blobset *s);
/* i < n_samples (checked by assert only: callers index from the sampler). */
int64_t stoke__blobset_label(const stoke__blobset *s, size_t i);
int stoke__blobset_format(const stoke__blobset *s, size_t i);
/* Width/height from the packed index; 0 = unknown (always, for others). */
void stoke__blobset_dims(const stoke__blobset *s, size_t i, uint32_t *width,
                         uint32_t *height);
/* Encoded bytes of sample i from the index (packed, tar); 0 = unknown
** (folder, without a stat). */
uint64_t stoke__blobset_bytes(const stoke__blobset *s, size_t i);
/* Class names (folder: the folder names; others: none). */
size_t stoke__blobset_n_classes(const stoke__blobset *s);
const char *stoke__blobset_class_name(const stoke__blobset *s, size_t c);
/* Where sample i lives, e.g. "train/dog/img_0042.jpg",
** "shard-0003.tar member dog/0042.jpg at offset 1234567",
** "pack-00001.stoke sample 42 at offset 8192".  Always NUL-terminated. */
void stoke__blobset_describe(const stoke__blobset *s, size_t i, char *buf,
                             size_t cap);
/* Files or tar samples skipped at open, with why ("unsupported image
** format .webp", "not an image", "no label (.cls)").  k < n_skipped. */
size_t stoke__blobset_n_skipped(const stoke__blobset *s);
const char *stoke__blobset_skipped(const stoke__blobset *s, size_t k,
                                   const char **reason);

/* ---- reading (concurrent, one reader per thread) ------------------------- */

/* The bytes of sample i: *ptr, *len.  Packed shards point into the mapping
** (zero copy, valid until close); others read into r's buffer (valid until
** the next read through r; r may be NULL for packed sets only).
** STOKE_EINVAL for i out of range, STOKE_EIO when the file cannot be read
** or has shrunk, STOKE_EFORMAT on a CRC mismatch (packed, when verifying)
** or an empty file (folder), STOKE_ENOMEM when the buffer cannot grow. */
int stoke__blobset_read(const stoke__blobset *s, size_t i,
                        stoke__blob_reader *r, const uint8_t **ptr,
                        size_t *len, char *err, size_t cap);
/* Done with the bytes of sample i from stoke__blobset_read: packed shards
** let their mapped pages leave the resident set; a no-op for the others,
** whose bytes live in the reader's buffer. */
void stoke__blobset_done(const stoke__blobset *s, size_t i,
                         const uint8_t *ptr, size_t len);

/* ---- what the block order, the cache and inspect ask (since 0.3) --------- */

/* Stored (encoded) bytes of sample i: stoke__blobset_bytes (packed and tar
** from their index), else a folder's stat of the file (0 when it cannot be
** looked at). */
uint64_t stoke__blobset_stored_bytes(const stoke__blobset *s, size_t i);
/* ops->held_bytes (the host ledger's storage term), or 0. */
uint64_t stoke__blobset_held_bytes(const stoke__blobset *s);
/* ops->http: the client remote reads go through, or NULL (local shards,
** cached ones, tar shards spooled whole). */
const struct stoke__http *stoke__blobset_http(const stoke__blobset *s);
/* ops->rcache_counts into *out, or false (no remote cache). */
bool stoke__blobset_rcache_counts(const stoke__blobset *s,
                                  struct stoke__rcache_counts *out);
/* Ask the kernel to read samples [first, first + n) ahead, without
** waiting: packed shards madvise(MADV_WILLNEED) their mapped range, tar
** shards and folder files posix_fadvise(WILLNEED).  Advice only: a call
** that fails is ignored. */
void stoke__blobset_read_ahead(const stoke__blobset *s, size_t first,
                               size_t n);
/* A 64-bit key of what the files hold as the file system describes it:
** every file's path (relative to the folder's root, or the shard's base
** name), size and modification time (ns).  Folder and tar; STOKE_EINVAL
** for packed sets, STOKE_EIO when a file cannot be looked at. */
int stoke__blobset_content_key(const stoke__blobset *s, uint64_t *key,
                               char *err, size_t cap);
/* Packed sets: what the shards' headers record of a pre-resize (stoke
** pack --max-side).  STOKE_EINVAL for the other kinds. */
int stoke__blobset_pack_info(const stoke__blobset *s, stoke_pack_info *out);
/* Packed sets written by the cache: the source index of entry i (its
** shard's source map), or SIZE_MAX without one. */
size_t stoke__blobset_source_index(const stoke__blobset *s, size_t i);

/* ---- pack writer (pack_writer.c) ----------------------------------------- */

typedef struct stoke__pack_writer stoke__pack_writer;

/* Write shards "<prefix>-00000.stoke", "<prefix>-00001.stoke", ...; a new
** shard starts when adding a sample would take the current one past
** shard_bytes (a shard holds at least one sample).  align: the data
** alignment, a power of two in 8..65536 (0 = 64).  Memory is bounded by one
** shard's index (40 bytes per sample).  Every shard is written to
** "<name>.tmp" and renamed only by finish; a writer destroyed before finish
** removes its .tmp files, so no half-written dataset ever has final names. */
int stoke__pack_writer_create(const char *prefix, uint64_t shard_bytes,
                              uint32_t align, const stoke_allocator *a,
                              const stoke__sys *sys,
                              stoke__pack_writer **out, char *err,
                              size_t cap);
/* Append one sample (bytes borrowed).  width/height 0 = unknown. */
int stoke__pack_writer_add(stoke__pack_writer *w, const void *bytes,
                           size_t len, int64_t label, uint32_t width,
                           uint32_t height, int format, char *err,
                           size_t cap);
/* Complete the last shard, fsync, rename every shard to its final name,
** remove an earlier pack's shards past the last (stoke__pack_writer_n_stale)
** and fsync the folder.  *n_shards (may be NULL) = shards written.  After an
** error the writer is poisoned: only destroy is allowed. */
/* Store class names (label k is names[k]) in every shard; only before the
** first add.  Names are non-empty; their total size at most 16 MiB. */
int stoke__pack_writer_set_classes(stoke__pack_writer *w,
                                   const char *const *names, size_t n,
                                   char *err, size_t cap);
int stoke__pack_writer_finish(stoke__pack_writer *w, size_t *n_shards,
                              char *err, size_t cap);
/* After finish: shards of an earlier pack that finish removed, named
** "<prefix>-NNNNN.stoke" past the last one this writer wrote (a glob would
** otherwise read them with the new ones). */
size_t stoke__pack_writer_n_stale(const stoke__pack_writer *w);
/* Final path of shard k (k < shards so far), owned by the writer. */
const char *stoke__pack_writer_shard_path(const stoke__pack_writer *w,
                                          size_t k);
/* NULL: no-op.  Before finish: unlinks every .tmp file. */
void stoke__pack_writer_destroy(stoke__pack_writer *w);

/* Record a pre-resize in every shard's header (flag RESIZED): max_side
** 1..65535, quality 1..100.  Only before the first add. */
int stoke__pack_writer_set_resize(stoke__pack_writer *w, unsigned max_side,
                                  int quality, char *err, size_t cap);
/* Publish mode (the packed cache): each shard is fsync'ed and renamed to
** its final name as soon as it is complete (stoke__pack_writer_cut, or a
** full shard), and finish removes no earlier shard.  Shards then also
** carry a source map: every sample must come through
** stoke__pack_writer_add_mapped, and are private files (0600,
** os/private_file.h).  Only before the first add. */
int stoke__pack_writer_set_publish(stoke__pack_writer *w, char *err,
                                   size_t cap);
/* stoke__pack_writer_add, recording the sample's source index in the
** shard's source map (publish mode). */
int stoke__pack_writer_add_mapped(stoke__pack_writer *w, size_t source_index,
                                  const void *bytes, size_t len,
                                  int64_t label, uint32_t width,
                                  uint32_t height, int format, char *err,
                                  size_t cap);
/* Publish mode: complete the shard being written (if it holds a sample)
** and rename it; *published (may be NULL) gets its final path (owned by
** the writer) or NULL when there was none.  The next add starts a new
** shard. */
int stoke__pack_writer_cut(stoke__pack_writer *w, const char **published,
                           char *err, size_t cap);
/* Bytes written to shards so far, data, indices and headers included. */
uint64_t stoke__pack_writer_bytes(const stoke__pack_writer *w);

/* ---- shared helpers (blob.c; CRC-32 and byte order: core/core.h) --------- */

/* Expand specs into paths: each spec's brace groups first ("{a,b}",
** "{0000..0099}" keeping the zero padding of the wider bound, "{9..0}"
** descending; nested groups allowed), then any result containing * ? or [
** through glob() (sorted; no match is an error).  *paths is one allocation
** freed with stoke__free(a, *paths).  STOKE_EINVAL for a malformed
** pattern or more than 1,000,000 paths. */
int stoke__blob_expand(const char *const *specs, size_t n_specs,
                       const stoke_allocator *a, char ***paths,
                       size_t *n_paths, char *err, size_t cap);

/* The shard paths of specs: expanded (stoke__blob_expand), or, when
** flags has STOKE__BLOB_LITERAL, copied as they are (one allocation, the
** same limits): for names that are already paths, such as the keys an S3
** listing gave, where a '{' is part of the name. */
int stoke__blob_paths(const char *const *specs, size_t n_specs,
                      unsigned flags, const stoke_allocator *a,
                      char ***paths, size_t *n_paths, char *err, size_t cap);

/* ---- for the kinds' implementations only (blob.c) ------------------------ */

typedef struct stoke__blob_ops {
  const char *kind;
  int64_t (*label)(const void *impl, size_t i);
  int (*format)(const void *impl, size_t i);
  void (*dims)(const void *impl, size_t i, uint32_t *w, uint32_t *h);
  void (*describe)(const void *impl, size_t i, char *buf, size_t cap);
  int (*read)(const void *impl, size_t i, stoke__blob_reader *r,
              const uint8_t **ptr, size_t *len, char *err, size_t cap);
  void (*destroy)(void *impl, const stoke_allocator *a);
  /* Optional: the caller is done with the bytes read for sample i. */
  void (*done)(const void *impl, size_t i, const uint8_t *ptr, size_t len);
  /* Optional: stoke__blobset_files. */
  size_t (*files)(const void *impl, const char *const **paths);
  /* Optional: stoke__blobset_bytes. */
  uint64_t (*bytes)(const void *impl, size_t i);
  /* Optional (since 0.3): the calls of the same names above
  ** (stored_bytes: where bytes cannot say, as a folder's stat). */
  uint64_t (*stored_bytes)(const void *impl, size_t i);
  void (*read_ahead)(const void *impl, size_t first, size_t n);
  int (*content_key)(const void *impl, uint64_t *key, char *err, size_t cap);
  int (*pack_info)(const void *impl, stoke_pack_info *out);
  size_t (*source_index)(const void *impl, size_t i);
  /* Optional: memory the storage holds for the whole set while it is
  ** open, beside any sample being read: a remote set's read-ahead buffer,
  ** at most its budget.  For the host ledger; 0 without it. */
  uint64_t (*held_bytes)(const void *impl);
  /* Optional: the HTTP client the reads go through while the set is open
  ** (remote packed shards), for the stats' fetch section; NULL: none. */
  const struct stoke__http *(*http)(const void *impl);
  /* Optional: the remote shard cache's counts (storage/rcache.h) when the
  ** set's remote shards were opened through one; false: none. */
  bool (*rcache_counts)(const void *impl,
                        struct stoke__rcache_counts *out);
} stoke__blob_ops;

/* Growable list of strings with optional reasons, for class names and
** skipped files. */
typedef struct stoke__blob_strs {
  char **s;       /* owned: s[i] is "text\0reason\0" in one allocation */
  size_t n, cap;
} stoke__blob_strs;

int stoke__blob_strs_add(stoke__blob_strs *l, const stoke_allocator *a,
                         const char *text, const char *reason);
void stoke__blob_strs_free(stoke__blob_strs *l, const stoke_allocator *a);
/* The texts of l (not their reasons) as one allocation, the pointer array
** then the strings, into *out (freed with stoke__free(a, *out)); l is
** left as it was.  STOKE_ENOMEM. */
int stoke__blob_strs_pack(const stoke__blob_strs *l, const stoke_allocator *a,
                          char ***out);
/* The same, with the count into *n and an error message: what a function
** that hands out a list of paths ends with (l is still the caller's to
** free). */
int stoke__blob_strs_hand_out(const stoke__blob_strs *l,
                              const stoke_allocator *a, char ***out,
                              size_t *n, char *err, size_t cap);

/* Wrap impl into a blobset: takes ownership of impl (destroyed on failure
** too), classes and skipped (emptied). */
int stoke__blobset_wrap(const stoke__blob_ops *ops, void *impl,
                        size_t n_samples, stoke__blob_strs *classes,
                        stoke__blob_strs *skipped, const stoke_allocator *a,
                        stoke__blobset **out, char *err, size_t cap);

/* Grow r's buffer to at least n bytes (STOKE_ENOMEM). */
int stoke__blob_reader_reserve(stoke__blob_reader *r, size_t n);
/* Format from a file extension (without the dot, any case); *supported
** false for image formats we list but do not decode. */
int stoke__blob_format_of_ext(const char *ext, bool *is_image,
                              bool *supported);

/* The packed format's layout (docs/packed-format.md). */
#define STOKE__PACK_MAGIC "STOKEPK1"
#define STOKE__PACK_END_MAGIC "STOKEEND"
#define STOKE__PACK_VERSION 1
#define STOKE__PACK_HEADER 64
#define STOKE__PACK_ENTRY 40
#define STOKE__PACK_FOOTER 32
/* Header flag: a class table follows the header (docs/packed-format.md). */
#define STOKE__PACK_FLAG_CLASSES 1u
#define STOKE__PACK_CLASSES_HEAD 16 /* count, bytes, CRC, reserved */
/* Header flag: images were resized (stoke pack --max-side); the max side
** (u16) and the JPEG quality (u8) are at header bytes 48 and 50. */
#define STOKE__PACK_FLAG_RESIZED 2u
/* Header flag: a source map (each entry's index in the dataset it was
** read from: the packed cache) lies at the offset in header bytes 52..59:
** n_samples u64, then its CRC-32 and 4 zero bytes. */
#define STOKE__PACK_FLAG_SOURCE_MAP 4u
#define STOKE__PACK_FLAGS_KNOWN                                             \
  (STOKE__PACK_FLAG_CLASSES | STOKE__PACK_FLAG_RESIZED |                    \
   STOKE__PACK_FLAG_SOURCE_MAP)

#endif /* STOKE_STORAGE_BLOB_H */
