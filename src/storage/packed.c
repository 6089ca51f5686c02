/* packed.c — reading stoke's packed shards (docs/packed-format.md).
**
** Each shard is mapped read-only for the blobset's life and fully
** validated at open (header, footer, index CRC, every entry's bounds and
** order), so a read is only arithmetic: it returns a pointer into the
** mapping, with no copy and no system call.  The page cache is the buffer;
** the kernel may evict and fault pages in again as memory requires.
**
** The mapping is immutable and never unmapped before close, so concurrent
** reads need no lock.  A file truncated by someone else while mapped would
** raise SIGBUS on access: shards are written once (pack_writer.c renames
** complete files into place) and must not be modified while in use.
**
** A shard given as an http:// or https:// URL (remote.h) is mapped
** sparsely: only its metadata is fetched at open, into an anonymous
** mapping validated as a file's would be, and each read is one Range
** request into the worker's buffer, its CRC-32 always checked (the bytes
** crossed a network). */
#define _DEFAULT_SOURCE /* MADV_WILLNEED */
#define _POSIX_C_SOURCE 200809L
#include "storage/blob.h"
#include "storage/prefetch.h"
#include "storage/rcache.h"
#include "storage/remote.h"
#include "storage/url.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct pack_shard {
  const char *path;      /* borrowed from packed_impl.paths */
  const uint8_t *map;    /* owned mapping of map_len bytes, or NULL */
  size_t map_len;
  const uint8_t *index;  /* into map */
  uint64_t n;            /* entries */
  size_t first;          /* global index of entry 0 */
  const uint8_t *classes; /* the class table's names, into map, or NULL */
  uint32_t n_classes, classes_bytes;
  unsigned max_side;     /* flag RESIZED: the header's max side, or 0 */
  int quality;
  const uint8_t *source_map; /* flag SOURCE_MAP: n u64, into map, or NULL */
  const char *url;       /* remote: the URL to fetch (owned by packed_impl.
                            urls), path being its shown form; or NULL */
  int hold_fd;           /* a remote shard read from the cache (rcache.h):
                            its entry, whose shared lock keeps eviction off
                            it while mapped; or -1 */
} pack_shard;

/* Decoded samples' pages are given back to the page cache in bulk, once
** every PACK_DROP_EVERY bytes, not sample by sample: each madvise of a
** mapping shared by several threads costs a TLB shootdown (an interrupt to
** every other core), which per sample was 4% of a loader's time.  The
** resident set then grows by at most that much over what is in flight. */
#define PACK_DROP_EVERY ((size_t)16 << 20)

typedef struct pack_residency {
  atomic_size_t since_drop; /* bytes decoded since the last drop */
  atomic_bool *touched;     /* per shard: read since the last drop */
} pack_residency;

typedef struct packed_impl {
  const stoke__sys *sys; /* borrowed: every file call */
  char **paths;          /* owned, one block */
  size_t n_paths;        /* paths given (n_shards drops the empty ones) */
  pack_shard *shards;    /* owned, n_shards */
  size_t n_shards;
  size_t n;              /* samples in all shards */
  unsigned flags;        /* STOKE__PACK_* */
  pack_residency *res;   /* owned; mutable through the const impl */
  stoke__http *http;     /* owned; remote shards only, else NULL */
  stoke__prefetch *pf;   /* owned; remote shards' read-ahead, or NULL */
  char **urls;           /* owned, n_paths (each owned), remote only */
  stoke__rcache *rcache; /* owned; remote shards with a cache_dir, or NULL */
  bool remote_reads;     /* a shard is read remotely (not all cached) */
} packed_impl;

static void shard_unmap(const packed_impl *p, pack_shard *s) {
  if (s->map) p->sys->munmap(p->sys->user, (void *)s->map, s->map_len);
  s->map = NULL;
  if (s->hold_fd >= 0) p->sys->close(p->sys->user, s->hold_fd);
  s->hold_fd = -1;
}

static void packed_destroy(void *impl, const stoke_allocator *a) {
  packed_impl *p = impl;
  if (!p) return;
  /* The read-ahead threads first: a request in flight reads its shard's
  ** URL (p->urls) and the shard table, which are freed below (TSan saw
  ** the URL freed under a running fetch, t1006). */
  stoke__prefetch_destroy(p->pf);
  p->pf = NULL;
  if (p->shards)
    for (size_t k = 0; k < p->n_shards; k++)
      shard_unmap(p, &p->shards[k]);
  stoke__rcache_close(p->rcache); /* after the unmaps: it evicts */
  if (p->res) stoke__free(a, (void *)p->res->touched);
  stoke__free(a, p->res);
  stoke__free(a, p->shards);
  stoke__free(a, p->paths);
  if (p->urls)
    for (size_t k = 0; k < p->n_paths; k++) stoke__free(a, p->urls[k]);
  stoke__free(a, p->urls);
  stoke__http_destroy(p->http); /* after the read-ahead, which uses it */
  stoke__free(a, p);
}

/* The shard holding global sample i, and i's entry in it. */
static const pack_shard *locate(const packed_impl *p, size_t i,
                                const uint8_t **entry, size_t *local) {
  size_t lo = 0, hi = p->n_shards;
  while (hi - lo > 1) { /* the last shard with first <= i */
    size_t mid = lo + (hi - lo) / 2;
    if (p->shards[mid].first <= i)
      lo = mid;
    else
      hi = mid;
  }
  const pack_shard *s = &p->shards[lo];
  *local = i - s->first;
  *entry = s->index + *local * STOKE__PACK_ENTRY;
  return s;
}

static int64_t packed_label(const void *impl, size_t i) {
  const uint8_t *e;
  size_t local;
  locate(impl, i, &e, &local);
  return (int64_t)stoke__le64(e + 16);
}

static int packed_format(const void *impl, size_t i) {
  const uint8_t *e;
  size_t local;
  locate(impl, i, &e, &local);
  return (int)stoke__le32(e + 32);
}

static void packed_dims(const void *impl, size_t i, uint32_t *w,
                        uint32_t *h) {
  const uint8_t *e;
  size_t local;
  locate(impl, i, &e, &local);
  *w = stoke__le32(e + 24);
  *h = stoke__le32(e + 28);
}

static uint64_t packed_bytes(const void *impl, size_t i) {
  const uint8_t *e;
  size_t local;
  locate(impl, i, &e, &local);
  return stoke__le64(e + 8);
}

static void packed_describe(const void *impl, size_t i, char *buf,
                            size_t cap) {
  const uint8_t *e;
  size_t local;
  const pack_shard *s = locate(impl, i, &e, &local);
  snprintf(buf, cap, "%s sample %zu at offset %llu", s->path, local,
           (unsigned long long)stoke__le64(e));
}

/* A remote shard's sample: from the read-ahead, or one Range request
** into r's buffer, checked against the index's CRC-32; a mismatch is
** fetched once more (a transfer damaged on the way) before it counts as a
** damaged sample. */
static int remote_read(const packed_impl *p, const pack_shard *s,
                       const uint8_t *e, size_t local, size_t i,
                       stoke__blob_reader *r, const uint8_t **ptr,
                       size_t *len, char *err, size_t cap) {
  uint64_t off = stoke__le64(e), n = stoke__le64(e + 8);
  uint32_t want = stoke__le32(e + 36), got = 0;
  if (!r)
    return stoke__errf(err, cap, STOKE_EINVAL, "%s sample %zu: a remote "
                       "shard is read into a reader's buffer", s->path,
                       local);
  if (n == 0) {
    *ptr = r->buf;
    *len = 0;
    return 0;
  }
  if (n > SIZE_MAX || stoke__blob_reader_reserve(r, (size_t)n))
    return stoke__errf(err, cap, STOKE_ENOMEM, "%s sample %zu: out of "
                       "memory for %llu bytes", s->path, local,
                       (unsigned long long)n);
  /* Two copies at most: the one read ahead (the block order's window) or
  ** the server's, then the server's after a damaged one. */
  bool ahead = p->pf && stoke__prefetch_take(p->pf, (uint32_t)(s - p->shards),
                                             off, n, r->buf);
  for (int copy = 0; copy < 2; copy++) {
    if (copy > 0 || !ahead) {
      int rc = stoke__http_get_range(p->http, s->url, off, (size_t)n, r->buf,
                                     NULL, err, cap);
      if (rc) return rc;
    }
    got = stoke__crc32(0, r->buf, (size_t)n);
    if (got == want) {
      *ptr = r->buf;
      *len = (size_t)n;
      return 0;
    }
  }
  return stoke__errf(err, cap, STOKE_EFORMAT,
                     "%s sample %zu (index %zu) at offset %llu: CRC-32 "
                     "mismatch (stored %08x, computed %08x) twice: the %llu "
                     "bytes are damaged", s->path, local, i,
                     (unsigned long long)off, want, got,
                     (unsigned long long)n);
}

static int packed_read(const void *impl, size_t i, stoke__blob_reader *r,
                       const uint8_t **ptr, size_t *len, char *err,
                       size_t cap) {
  const packed_impl *p = impl;
  const uint8_t *e;
  size_t local;
  const pack_shard *s = locate(p, i, &e, &local);
  uint64_t off = stoke__le64(e), n = stoke__le64(e + 8);
  if (s->url) return remote_read(p, s, e, local, i, r, ptr, len, err, cap);
  const uint8_t *bytes = s->map + off; /* bounds checked at open */
  if (p->flags & STOKE__PACK_VERIFY_CRC) {
    uint32_t want = stoke__le32(e + 36);
    uint32_t got = stoke__crc32(0, bytes, (size_t)n);
    if (got != want)
      return stoke__errf(err, cap, STOKE_EFORMAT,
                         "%s sample %zu (index %zu) at offset %llu: "
                         "CRC-32 mismatch (stored %08x, computed %08x): "
                         "the %llu bytes are damaged", s->path, local, i,
                         (unsigned long long)off, want, got,
                         (unsigned long long)n);
  }
  (void)r;
  atomic_bool *t = &p->res->touched[s - p->shards];
  if (!atomic_load_explicit(t, memory_order_relaxed))
    atomic_store_explicit(t, true, memory_order_relaxed);
  *ptr = bytes;
  *len = (size_t)n;
  return 0;
}

/* Decoded: every PACK_DROP_EVERY bytes, the data pages of the shards read
** since the last time leave the resident set (the page cache keeps them),
** so a loader over large shards stays within its memory budget.  A sample
** another worker is decoding meanwhile just faults its pages in again. */
static void packed_done(const void *impl, size_t i, const uint8_t *ptr,
                        size_t len) {
  const packed_impl *p = impl;
  (void)i;
  (void)ptr;
  pack_residency *r = p->res;
  size_t now = atomic_fetch_add_explicit(&r->since_drop, len,
                                         memory_order_relaxed) + len;
  if (now < PACK_DROP_EVERY ||
      !atomic_compare_exchange_strong(&r->since_drop, &now, 0))
    return; /* not yet, or another thread got there first */
  for (size_t k = 0; k < p->n_shards; k++)
    if (atomic_exchange_explicit(&r->touched[k], false,
                                 memory_order_relaxed) &&
        !p->shards[k].url) /* an anonymous mapping would lose its index */
      stoke__drop_pages(p->shards[k].map,
                        (size_t)(p->shards[k].index - p->shards[k].map));
}

/* Samples [lo, hi] of remote shard s, as runs of consecutive samples of at
** most STOKE__REMOTE_PREFETCH_RUN bytes, each one Range request to the
** prefetcher. */
static void remote_read_ahead(const packed_impl *p, const pack_shard *s,
                              size_t lo, size_t hi) {
  if (!p->pf) return;
  uint32_t shard = (uint32_t)(s - p->shards);
  size_t k = lo;
  while (k <= hi) {
    const uint8_t *e = s->index + k * STOKE__PACK_ENTRY;
    uint64_t start = stoke__le64(e), end = start + stoke__le64(e + 8);
    uint64_t payload = stoke__le64(e + 8);
    for (k++; k <= hi; k++) {
      const uint8_t *f = s->index + k * STOKE__PACK_ENTRY;
      uint64_t f_end = stoke__le64(f) + stoke__le64(f + 8);
      if (f_end - start > STOKE__REMOTE_PREFETCH_RUN) break;
      end = f_end;
      payload += stoke__le64(f + 8);
    }
    stoke__prefetch_request(p->pf, s->url, shard, start, end - start,
                            payload);
  }
}

/* The mapped pages of samples [first, first + n), shard by shard: a block
** of consecutive samples is one range of each shard it spans. */
static void packed_read_ahead(const void *impl, size_t first, size_t n) {
  const packed_impl *p = impl;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  size_t end = first + n;
  while (first < end) {
    const uint8_t *e;
    size_t local;
    const pack_shard *s = locate(p, first, &e, &local);
    size_t last = STOKE__MIN(end, s->first + (size_t)s->n) - 1;
    if (s->url) { /* Range requests for the runs, read ahead */
      remote_read_ahead(p, s, first - s->first, last - s->first);
      first = last + 1;
      continue;
    }
    const uint8_t *le = s->index + (last - s->first) * STOKE__PACK_ENTRY;
    uintptr_t lo = (uintptr_t)(s->map + stoke__le64(e)) & ~(page - 1);
    uintptr_t hi = (uintptr_t)(s->map + stoke__le64(le) + stoke__le64(le + 8));
    if (hi > lo)
      p->sys->madvise(p->sys->user, (void *)lo, hi - lo, MADV_WILLNEED);
    first = last + 1;
  }
}

static int packed_pack_info(const void *impl, stoke_pack_info *out) {
  const packed_impl *p = impl;
  out->n_shards = p->n_shards;
  for (size_t k = 0; k < p->n_shards; k++) {
    const pack_shard *s = &p->shards[k];
    if (k > 0 && (s->max_side != p->shards[0].max_side ||
                  s->quality != p->shards[0].quality))
      out->mixed = 1;
    if (!s->max_side) continue;
    out->n_resized++;
    if (s->max_side > out->max_side) {
      out->max_side = s->max_side;
      out->quality = s->quality;
    }
  }
  return 0;
}

static size_t packed_source_index(const void *impl, size_t i) {
  const uint8_t *e;
  size_t local;
  const pack_shard *s = locate(impl, i, &e, &local);
  return s->source_map ? (size_t)stoke__le64(s->source_map + 8 * local)
                       : SIZE_MAX;
}

static size_t packed_files(const void *impl, const char *const **paths) {
  const packed_impl *p = impl;
  *paths = (const char *const *)p->paths;
  return p->n_paths;
}

/* Remote shards: the read-ahead buffer's budget (prefetch.c never holds
** more); local ones are mapped, and their pages are the kernel's. */
static uint64_t packed_held_bytes(const void *impl) {
  const packed_impl *p = impl;
  return p->pf ? STOKE__REMOTE_PREFETCH_BYTES : 0;
}

static const struct stoke__http *packed_http(const void *impl) {
  const packed_impl *p = impl;
  return p->remote_reads ? p->http : NULL;
}

static bool packed_rcache_counts(const void *impl,
                                 stoke__rcache_counts *out) {
  const packed_impl *p = impl;
  if (!p->rcache) return false;
  stoke__rcache_counts_get(p->rcache, out);
  return true;
}

static const stoke__blob_ops packed_ops = {
    "packed",          packed_label,        packed_format,
    packed_dims,       packed_describe,     packed_read,
    packed_destroy,    packed_done,         packed_files,
    packed_bytes,      NULL,                packed_read_ahead,
    NULL,              packed_pack_info,    packed_source_index,
    packed_held_bytes, packed_http,         packed_rcache_counts,
};

/* ---- validation ---------------------------------------------------------- */

#define BAD(...) stoke__errf(err, cap, STOKE_EFORMAT, __VA_ARGS__)

/* The class table between the header and the data: its count, size and
** CRC, and exactly that many non-empty NUL-terminated names. */
static int validate_classes(pack_shard *s, uint64_t data_off, char *err,
                            size_t cap) {
  const char *path = s->path;
  const uint8_t *t = s->map + STOKE__PACK_HEADER;
  uint64_t room = data_off - STOKE__PACK_HEADER;
  if (room < STOKE__PACK_CLASSES_HEAD)
    return BAD("packed source: %s: no room for the class table before the "
               "data at %llu", path, (unsigned long long)data_off);
  uint32_t nc = stoke__le32(t), nb = stoke__le32(t + 4);
  if (nb > room - STOKE__PACK_CLASSES_HEAD)
    return BAD("packed source: %s: class table of %u bytes runs into the "
               "data at %llu", path, nb, (unsigned long long)data_off);
  const uint8_t *names = t + STOKE__PACK_CLASSES_HEAD;
  uint32_t crc = stoke__crc32(0, names, nb);
  if (crc != stoke__le32(t + 8))
    return BAD("packed source: %s: class table CRC-32 mismatch (stored "
               "%08x, computed %08x): damaged class names", path,
               stoke__le32(t + 8), crc);
  uint32_t k = 0;
  for (size_t i = 0; i < nb; k++) {
    const uint8_t *z = memchr(names + i, 0, nb - i);
    if (!z || z == names + i)
      return BAD("packed source: %s: class name %u is empty or not "
                 "terminated", path, k);
    i = (size_t)(z - names) + 1;
  }
  if (k != nc || nc == 0)
    return BAD("packed source: %s: the class table says %u classes and "
               "holds %u names", path, nc, k);
  s->classes = names;
  s->n_classes = nc;
  s->classes_bytes = nb;
  return 0;
}

/* Check everything about a mapped shard that a read will rely on. */
static int validate(pack_shard *s, char *err, size_t cap) {
  const uint8_t *m = s->map;
  uint64_t size = s->map_len;
  const char *path = s->path;
  if (size < STOKE__PACK_HEADER + STOKE__PACK_FOOTER)
    return BAD("packed source: %s: %llu bytes, too small to be a packed "
               "shard (truncated?)", path, (unsigned long long)size);
  if (memcmp(m, STOKE__PACK_MAGIC, 8) != 0)
    return BAD("packed source: %s: bad magic at offset 0 (not a packed "
               "shard, or its header was never written)", path);
  uint32_t version = stoke__le32(m + 8), flags = stoke__le32(m + 12);
  if (version != STOKE__PACK_VERSION)
    return BAD("packed source: %s: format version %u, this reader knows %d",
               path, version, STOKE__PACK_VERSION);
  uint32_t hcrc = stoke__crc32(0, m, 60);
  if (hcrc != stoke__le32(m + 60))
    return BAD("packed source: %s: header CRC-32 mismatch (stored %08x, "
               "computed %08x): damaged header", path, stoke__le32(m + 60),
               hcrc);
  if (flags & ~STOKE__PACK_FLAGS_KNOWN)
    return BAD("packed source: %s: unknown flags %08x (written by a newer "
               "stoke?)", path, flags);
  /* Bytes 48..59 were reserved (zero) before the flags that use them. */
  if (flags & STOKE__PACK_FLAG_RESIZED) {
    unsigned side = (unsigned)m[48] | (unsigned)m[49] << 8;
    int quality = m[50];
    if (side == 0 || quality < 1 || quality > 100)
      return BAD("packed source: %s: resized to max side %u at quality %d: "
                 "not a size and a JPEG quality", path, side, quality);
    s->max_side = side;
    s->quality = quality;
  }
  uint64_t n = stoke__le64(m + 16), data_off = stoke__le64(m + 24);
  uint64_t index_off = stoke__le64(m + 32);
  uint32_t align = stoke__le32(m + 40), entry = stoke__le32(m + 44);
  if (entry != STOKE__PACK_ENTRY)
    return BAD("packed source: %s: entry size %u, expected %d", path, entry,
               STOKE__PACK_ENTRY);
  if (align < 8 || align > 65536 || (align & (align - 1)))
    return BAD("packed source: %s: alignment %u is not a power of two in "
               "8..65536", path, align);
  if (data_off < STOKE__PACK_HEADER || data_off % align)
    return BAD("packed source: %s: data offset %llu is not a multiple of "
               "%u past the header", path, (unsigned long long)data_off,
               align);
  if (index_off < data_off || index_off % 8)
    return BAD("packed source: %s: index offset %llu is before the data "
               "(%llu) or unaligned", path, (unsigned long long)index_off,
               (unsigned long long)data_off);
  if (index_off > size || n > (size - index_off) / STOKE__PACK_ENTRY)
    return BAD("packed source: %s: index at offset %llu (%llu entries) "
               "runs past the end of the file (%llu bytes): truncated or "
               "damaged", path, (unsigned long long)index_off,
               (unsigned long long)n, (unsigned long long)size);
  /* Only now is data_off <= index_off <= size known: the class table
  ** (before the data) lies inside the file. */
  if (flags & STOKE__PACK_FLAG_CLASSES) {
    int rc = validate_classes(s, data_off, err, cap);
    if (rc) return rc;
  }
  uint64_t want = index_off + n * STOKE__PACK_ENTRY + STOKE__PACK_FOOTER;
  if (want != size)
    return BAD("packed source: %s: the header says the file is %llu bytes, "
               "it has %llu: %s", path, (unsigned long long)want,
               (unsigned long long)size,
               want > size ? "truncated" : "trailing bytes");
  const uint8_t *f = m + size - STOKE__PACK_FOOTER;
  if (memcmp(f + 24, STOKE__PACK_END_MAGIC, 8) != 0)
    return BAD("packed source: %s: bad footer magic at offset %llu: "
               "truncated or damaged", path,
               (unsigned long long)(size - STOKE__PACK_FOOTER));
  if (stoke__le64(f) != index_off || stoke__le64(f + 8) != n)
    return BAD("packed source: %s: the footer (index offset %llu, %llu "
               "samples) disagrees with the header (%llu, %llu)", path,
               (unsigned long long)stoke__le64(f),
               (unsigned long long)stoke__le64(f + 8),
               (unsigned long long)index_off, (unsigned long long)n);
  const uint8_t *index = m + index_off;
  if (flags & STOKE__PACK_FLAG_SOURCE_MAP) {
    uint64_t map_off = stoke__le64(m + 52);
    if (map_off % 8 || map_off < data_off || map_off > index_off ||
        index_off - map_off < 8 || n > (index_off - map_off - 8) / 8)
      return BAD("packed source: %s: source map at offset %llu (%llu "
                 "entries) is not inside the data section [%llu, %llu)",
                 path, (unsigned long long)map_off, (unsigned long long)n,
                 (unsigned long long)data_off,
                 (unsigned long long)index_off);
    const uint8_t *map = m + map_off;
    uint32_t mcrc = stoke__crc32(0, map, (size_t)(8 * n));
    if (mcrc != stoke__le32(map + 8 * n))
      return BAD("packed source: %s: source map CRC-32 mismatch (stored "
                 "%08x, computed %08x): damaged map at offset %llu", path,
                 stoke__le32(map + 8 * n), mcrc,
                 (unsigned long long)map_off);
    s->source_map = map;
  }
  uint32_t icrc = stoke__crc32(0, index, (size_t)(n * STOKE__PACK_ENTRY));
  if (icrc != stoke__le32(f + 16))
    return BAD("packed source: %s: index CRC-32 mismatch (stored %08x, "
               "computed %08x): damaged index at offset %llu", path,
               stoke__le32(f + 16), icrc, (unsigned long long)index_off);
  uint64_t prev_end = data_off;
  for (uint64_t k = 0; k < n; k++) {
    const uint8_t *e = index + k * STOKE__PACK_ENTRY;
    uint64_t off = stoke__le64(e), len = stoke__le64(e + 8);
    uint32_t format = stoke__le32(e + 32);
    if (off % align)
      return BAD("packed source: %s: entry %llu: offset %llu is not a "
                 "multiple of %u", path, (unsigned long long)k,
                 (unsigned long long)off, align);
    if (off < prev_end)
      return BAD("packed source: %s: entry %llu: offset %llu overlaps the "
                 "previous sample or the header (which ends at %llu): "
                 "entries must be sorted and disjoint", path,
                 (unsigned long long)k, (unsigned long long)off,
                 (unsigned long long)prev_end);
    if (off > index_off || len > index_off - off)
      return BAD("packed source: %s: entry %llu: %llu bytes at offset %llu "
                 "run past the data section (ends at %llu)", path,
                 (unsigned long long)k, (unsigned long long)len,
                 (unsigned long long)off, (unsigned long long)index_off);
    if (format >= STOKE__BLOB_FORMAT_COUNT)
      return BAD("packed source: %s: entry %llu: unknown format %u", path,
                 (unsigned long long)k, format);
    int64_t label = (int64_t)stoke__le64(e + 16);
    if (s->n_classes && (label < 0 || label >= (int64_t)s->n_classes))
      return BAD("packed source: %s: entry %llu: label %lld is not one of "
                 "the %u classes", path, (unsigned long long)k,
                 (long long)label, s->n_classes);
    prev_end = off + len;
  }
  s->index = index;
  s->n = n;
  return 0;
}

/* Shards of one dataset carry one class table, or none: the names of the
** first, checked against every other. */
static int shared_classes(const packed_impl *p, const stoke_allocator *a,
                          stoke__blob_strs *out, char *err, size_t cap) {
  const pack_shard *s0 = &p->shards[0];
  for (size_t k = 1; k < p->n_shards; k++) {
    const pack_shard *s = &p->shards[k];
    if (s->n_classes != s0->n_classes ||
        s->classes_bytes != s0->classes_bytes ||
        (s->classes && memcmp(s->classes, s0->classes, s->classes_bytes)))
      return BAD("packed source: %s and %s have different class tables "
                 "(%u and %u classes): shards of different datasets?",
                 s0->path, s->path, s0->n_classes, s->n_classes);
  }
  const char *name = (const char *)s0->classes;
  for (uint32_t c = 0; c < s0->n_classes; c++) {
    if (stoke__blob_strs_add(out, a, name, NULL))
      return stoke__errf(err, cap, STOKE_ENOMEM,
                         "packed source: out of memory");
    name += strlen(name) + 1;
  }
  return 0;
}

int stoke__blobset_open_packed(const char *const *specs, size_t n_specs,
                               unsigned flags, const stoke_allocator *a,
                               const stoke__sys *sys, stoke__blobset **out,
                               char *err, size_t cap) {
  return stoke__blobset_open_packed_ex(specs, n_specs, flags, NULL, a, sys,
                                       out, err, cap);
}

/* Map a local shard file whole, read-only. */
static int map_local(packed_impl *p, pack_shard *s, char *err, size_t cap) {
  const stoke__sys *sys = p->sys;
  int fd = stoke__sys_open(sys, s->path, O_RDONLY | O_CLOEXEC, 0);
  struct stat st;
  if (fd < 0 || sys->fstat(sys->user, fd, &st) != 0) {
    int rc = stoke__errf(err, cap, STOKE_EIO, "packed source: %s: %s: %s",
                         s->path, fd < 0 ? "open" : "stat", strerror(errno));
    if (fd >= 0) sys->close(sys->user, fd);
    return rc;
  }
  if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > SIZE_MAX ||
      st.st_size < STOKE__PACK_HEADER + STOKE__PACK_FOOTER) {
    sys->close(sys->user, fd);
    return BAD("packed source: %s: %s", s->path,
               S_ISREG(st.st_mode) ? "too small to be a packed shard "
                                     "(truncated?)"
                                   : "not a regular file");
  }
  void *m = sys->mmap(sys->user, (size_t)st.st_size, PROT_READ,
                      MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  sys->close(sys->user, fd); /* the mapping keeps the file */
  if (m == MAP_FAILED)
    return stoke__errf(err, cap, STOKE_EIO, "packed source: %s: mmap: %s",
                       s->path, strerror(map_errno));
  s->map = m;
  s->map_len = (size_t)st.st_size;
  return 0;
}

/* A remote shard through the cache: its first 64 bytes ask the server
** for its size and ETag (the key), then the entry is mapped as a local
** shard's file and read with no request.  A server that sends no ETag
** cannot tell a changed object: that shard is read remotely, uncached. */
static int map_cached(packed_impl *p, pack_shard *s, char *e, size_t ecap) {
  uint8_t head[STOKE__PACK_HEADER];
  uint64_t total = UINT64_MAX;
  char etag[STOKE__HTTP_ETAG_CAP];
  int rc = stoke__http_get_range_etag(p->http, s->url, 0, sizeof head, head,
                                      &total, etag, e, ecap);
  if (rc) return rc;
  if (!etag[0]) {
    stoke__rcache_note_uncached(p->rcache);
    uint8_t *m;
    size_t len;
    rc = stoke__packed_remote_map(p->http, p->sys, s->url, s->path, &m, &len,
                                  e, ecap);
    if (rc == 0) {
      s->map = m;
      s->map_len = len;
    }
    return rc;
  }
  if (total == UINT64_MAX || total < STOKE__PACK_HEADER + STOKE__PACK_FOOTER ||
      total > STOKE__REMOTE_MAX_OBJECT || total > SIZE_MAX)
    return stoke__errf(e, ecap, STOKE_EFORMAT, "packed source: %s: the "
                       "server says %llu bytes: not a packed shard", s->path,
                       (unsigned long long)total);
  int fd;
  rc = stoke__rcache_get(p->rcache, p->http, s->url, s->path, ".stoke",
                         total, etag, &fd, e, ecap);
  if (rc) return rc;
  void *m = p->sys->mmap(p->sys->user, (size_t)total, PROT_READ, MAP_PRIVATE,
                         fd, 0);
  if (m == MAP_FAILED) {
    rc = stoke__errf(e, ecap, STOKE_EIO, "packed source: %s: mmap of its "
                     "cache entry: %s", s->path, strerror(errno));
    p->sys->close(p->sys->user, fd);
    return rc;
  }
  s->map = m;
  s->map_len = (size_t)total;
  s->hold_fd = fd;
  s->url = NULL; /* read as a local shard from here on */
  return 0;
}

/* Remote shard k's map, one of those fetched side by side
** (stoke__http_parallel keeps the first error's message). */
static int map_one(size_t k, void *arg, char *e, size_t ecap) {
  packed_impl *p = arg;
  pack_shard *s = &p->shards[k];
  if (!s->url) return 0;
  if (p->rcache) return map_cached(p, s, e, ecap);
  uint8_t *m;
  size_t len;
  int rc = stoke__packed_remote_map(p->http, p->sys, s->url, s->path, &m,
                                    &len, e, ecap);
  if (rc == 0) {
    s->map = m;
    s->map_len = len;
  }
  return rc;
}

/* Keep each URL for the requests and show only its shown form (the path
** every message and stoke__blobset_files gives), then map every remote
** shard. */
static int open_remote(packed_impl *p, const stoke__http_options *remote,
                       const stoke_allocator *a, char *err, size_t cap) {
  int rc = stoke__http_create(remote, a, &p->http, err, cap);
  if (rc) return rc;
  if (remote && remote->cache_dir) {
    rc = stoke__rcache_open(remote->cache_dir, remote->cache_max_bytes,
                            p->sys, a, &p->rcache, err, cap);
    if (rc) return rc;
  }
  p->urls = stoke__calloc(a, p->n_paths, sizeof *p->urls);
  if (!p->urls)
    return stoke__errf(err, cap, STOKE_ENOMEM, "packed source: out of "
                       "memory");
  for (size_t k = 0; k < p->n_paths; k++) {
    if (!stoke__url_is_remote(p->paths[k])) continue;
    if (!(p->urls[k] = stoke__strdup(a, p->paths[k])))
      return stoke__errf(err, cap, STOKE_ENOMEM, "packed source: out of "
                         "memory");
    stoke__url_redact(p->paths[k], p->paths[k], strlen(p->paths[k]) + 1);
    p->shards[k].url = p->urls[k];
  }
  /* Read-ahead's runs in flight: as many as the client's limit, read at
  ** each submit (the live autotuner moves it), up to its most. */
  if (stoke__prefetch_create(p->http, STOKE_IO_CONCURRENCY_MAX,
                             STOKE__REMOTE_PREFETCH_BYTES,
                             a, &p->pf))
    return stoke__errf(err, cap, STOKE_ETHREAD, "packed source: cannot "
                       "start the remote read-ahead threads");
  rc = stoke__http_parallel(p->http, p->n_shards, map_one, p, err, cap);
  if (rc) return rc;
  /* Every shard in the cache: nothing is read remotely while the set is
  ** open, so no read-ahead (its threads and its buffer in the ledger) and
  ** no fetch section, as for local shards. */
  for (size_t k = 0; k < p->n_shards; k++)
    if (p->shards[k].url) p->remote_reads = true;
  if (!p->remote_reads) {
    stoke__prefetch_destroy(p->pf);
    p->pf = NULL;
  }
  return 0;
}

int stoke__blobset_open_packed_ex(const char *const *specs, size_t n_specs,
                                  unsigned flags,
                                  const stoke__http_options *remote,
                                  const stoke_allocator *a,
                                  const stoke__sys *sys,
                                  stoke__blobset **out, char *err,
                                  size_t cap) {
  *out = NULL;
  stoke__blob_strs classes = {0}; /* before any goto fail */
  if (flags & ~(STOKE__PACK_VERIFY_CRC | STOKE__BLOB_LITERAL))
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "packed source: unknown flags %x", flags);
  packed_impl *p = stoke__calloc(a, 1, sizeof *p);
  if (!p)
    return stoke__errf(err, cap, STOKE_ENOMEM,
                       "packed source: out of memory");
  p->flags = flags;
  p->sys = sys = stoke__sys_or_real(sys);
  int rc = stoke__blob_paths(specs, n_specs, flags, a, &p->paths,
                             &p->n_shards, err, cap);
  if (rc) goto fail;
  p->n_paths = p->n_shards;
  p->shards = stoke__calloc(a, p->n_shards, sizeof *p->shards);
  if (!p->shards) {
    rc = stoke__errf(err, cap, STOKE_ENOMEM,
                     "packed source: out of memory");
    goto fail;
  }
  for (size_t k = 0; k < p->n_shards; k++) {
    p->shards[k].path = p->paths[k];
    p->shards[k].hold_fd = -1;
  }
  if (stoke__specs_remote(specs, n_specs)) {
    rc = open_remote(p, remote, a, err, cap);
    if (rc) goto fail;
  }
  for (size_t k = 0; k < p->n_shards; k++) {
    pack_shard *s = &p->shards[k];
    if (!s->url && !s->map) { /* a cached remote one is mapped already */
      rc = map_local(p, s, err, cap);
      if (rc) goto fail;
    }
    rc = validate(s, err, cap);
    if (rc) goto fail;
    if (s->n > SIZE_MAX - p->n) {
      rc = BAD("packed source: too many samples");
      goto fail;
    }
    s->first = p->n;
    p->n += (size_t)s->n;
  }
  if (p->n == 0) {
    rc = BAD("packed source: no sample in %zu shard(s) (first: %s)",
             p->n_shards, p->paths[0]);
    goto fail;
  }
  /* Empty shards would confuse locate() (several with the same first):
  ** drop them, keeping their mappings freed. */
  size_t w = 0;
  for (size_t k = 0; k < p->n_shards; k++) {
    if (p->shards[k].n == 0) {
      shard_unmap(p, &p->shards[k]);
      continue;
    }
    p->shards[w++] = p->shards[k];
  }
  p->n_shards = w;
  rc = shared_classes(p, a, &classes, err, cap);
  if (rc) goto fail;
  p->res = stoke__calloc(a, 1, sizeof *p->res);
  atomic_bool *touched =
      p->res ? stoke__calloc(a, p->n_shards, sizeof *touched) : NULL;
  if (!touched) {
    rc = stoke__errf(err, cap, STOKE_ENOMEM,
                     "packed source: out of memory");
    goto fail;
  }
  atomic_init(&p->res->since_drop, 0);
  for (size_t k = 0; k < p->n_shards; k++) atomic_init(&touched[k], false);
  p->res->touched = touched;
  return stoke__blobset_wrap(&packed_ops, p, p->n, &classes, NULL, a, out,
                             err, cap);
fail:
  stoke__blob_strs_free(&classes, a);
  packed_destroy(p, a);
  return rc;
}
