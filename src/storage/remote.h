/* remote.h — what the packed and tar kinds share to read shards given as
** URLs (docs/remote.md).  Private to src/storage/ (and unit tests). */
#ifndef STOKE_STORAGE_REMOTE_H
#define STOKE_STORAGE_REMOTE_H

#include "storage/blob.h"
#include "storage/http.h"

/* The largest remote object a shard may be: its sparse mapping is address
** space only, but a server's answer must not decide how much. */
#define STOKE__REMOTE_MAX_OBJECT (1ull << 40)
/* What the remote read-ahead (prefetch.h) may hold at once. */
#define STOKE__REMOTE_PREFETCH_BYTES (256ull << 20)
/* The most bytes one read-ahead run (one Range request) spans. */
#define STOKE__REMOTE_PREFETCH_RUN (8u << 20)
/* The largest index (and source map) fetched at open for one shard. */
#define STOKE__REMOTE_MAX_INDEX (1ull << 30)

/* Map packed shard url into memory the way packed.c maps a local file: an
** anonymous mapping of the object's size (*map, *len; address space only)
** holding the header, the class table, the source map and the index, each
** fetched by one Range request, and nothing of the data.  The caller
** validates it as a local shard and unmaps it with sys->munmap.  Errors
** name shown (the URL's shown form). */
int stoke__packed_remote_map(stoke__http *h, const stoke__sys *sys,
                             const char *url, const char *shown,
                             uint8_t **map, size_t *len, char *err,
                             size_t cap);

/* Whether any of specs is a URL (then every one must be: a list is one
** store). */
bool stoke__specs_remote(const char *const *specs, size_t n_specs);

/* Open a tar shard given as url: fetched whole into an unlinked file under
** $TMPDIR (or /tmp), whose descriptor *fd the tar kind reads as a local
** shard.  For a server that does not answer Range requests. */
int stoke__tar_remote_spool(stoke__http *h, const stoke__sys *sys,
                            const char *url, int *fd, char *err, size_t cap);

/* A forward-only window over a remote object, for indexing a tar shard
** without fetching it whole: each read of [off, off + n) is served from
** the bytes held, or refills the window from off with one Range request
** of at least n bytes (the window doubles, up to STOKE__TAR_WINDOW_MAX,
** while each refill skips less than a window, and starts again from
** STOKE__TAR_WINDOW_MIN past a larger gap: the bytes skipped between two
** reads, a large member's data, are never fetched).  Reads past the
** object's end are the caller's to refuse: the window clips to it. */
#define STOKE__TAR_WINDOW_MIN (256u << 10)
#define STOKE__TAR_WINDOW_MAX (4u << 20)
typedef struct stoke__tar_window {
  stoke__http *http;      /* borrowed */
  const char *url;        /* borrowed */
  const stoke_allocator *a;
  uint8_t *buf;           /* owned, cap bytes */
  size_t cap;
  uint64_t off;           /* the bytes held: [off, off + len) */
  size_t len;
  size_t want;            /* the next refill's size */
  uint64_t total;         /* the object's size */
  char etag[STOKE__HTTP_ETAG_CAP]; /* its ETag from the first answer, or "" */
  uint64_t fetched;       /* body bytes asked for so far */
} stoke__tar_window;

/* The first request: [0, 512) (a tar's first header) for the object's
** size and ETag.  STOKE_EFORMAT (a server that ignores Range, an object
** shorter than a block) leaves w closed for the caller to spool the
** shard instead. */
int stoke__tar_window_open(stoke__tar_window *w, stoke__http *h,
                           const char *url, const stoke_allocator *a,
                           char *err, size_t cap);
int stoke__tar_window_read(stoke__tar_window *w, void *dst, size_t n,
                           uint64_t off, char *err, size_t cap);
void stoke__tar_window_close(stoke__tar_window *w);

#endif /* STOKE_STORAGE_REMOTE_H */
