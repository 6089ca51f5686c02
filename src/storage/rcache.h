/* rcache.h — the remote shard cache (docs/remote.md#the-cache): whole
** remote shards kept in DIR/remote/, fetched once per node and then read
** as local files.  Private to src/storage/ (and unit tests).
**
** An entry is named by a hash of the URL's shown form (never its
** user-info or query: no secret in a file name), the server's ETag and the
** object's size, so a changed object (a new ETag) is a new entry.  Beside
** each entry NAME.stoke (or .tar) lie NAME.lock and, while it is fetched,
** NAME.tmp:
**  - a fetcher holds NAME.lock exclusively (flock) from its look for the
**    entry to its publication (NAME.tmp written, fsync'ed, renamed), so a
**    second process, or thread, waits for the first's download and reads
**    it; a .tmp found under the lock is a crashed writer's and is removed;
**  - a reader holds a shared flock on the entry itself as long as it has
**    it open, so eviction (which takes it exclusively, without waiting)
**    passes over entries in use;
**  - the last use is the entry's mtime, set at each open: eviction takes
**    the least recently used entries first until the rest fit the budget.
** The budget may be exceeded by the entries open at once (they are never
** evicted) and, until this cache's next trim, by other processes' fetches
** (a fetch trims only when the folder's bytes as this cache last counted
** them, plus its own fetches, would pass it); it is enforced again when
** the blobset closes. */
#ifndef STOKE_STORAGE_RCACHE_H
#define STOKE_STORAGE_RCACHE_H

#include "core/core.h"
#include "os/syscalls.h"
#include "storage/http.h"

#include <stdint.h>

/* "r-" 32 hex digits, then the extension (".stoke", ".tar") and a
** suffix (".lock", ".tmp"). */
#define STOKE__RCACHE_NAME_CAP 64

/* The entry's name (without folder) for a URL's shown form, its ETag, its
** size and the shard's extension (".stoke" or ".tar"). */
void stoke__rcache_name(const char *shown, const char *etag, uint64_t size,
                        const char *ext, char out[STOKE__RCACHE_NAME_CAP]);

/* One entry as eviction sees it. */
typedef struct stoke__rcache_entry {
  uint64_t size;
  int64_t used_ns; /* last use (mtime) */
  bool open;       /* someone holds it: never evicted */
} stoke__rcache_entry;

/* Which entries go so that the others plus `incoming` bytes fit max:
** order[0..n) gets the indices least recently used first (ties by index),
** and the result k says that order[0..k) are evicted (open ones are
** skipped, so they never appear in order[0..k)). */
size_t stoke__rcache_victims(const stoke__rcache_entry *e, size_t n,
                             uint64_t max, uint64_t incoming, size_t *order,
                             const stoke_allocator *a);

typedef struct stoke__rcache stoke__rcache;

/* The cache in dir/remote/ (made 0700, checked private as the packing
** cache's folders); max_bytes 0: unbounded. */
int stoke__rcache_open(const char *dir, uint64_t max_bytes,
                       const stoke__sys *sys, const stoke_allocator *a,
                       stoke__rcache **out, char *err, size_t cap);
/* Evicts down to the budget, then frees (NULL: no-op).  Call it once every
** entry the caller opened is closed. */
void stoke__rcache_close(stoke__rcache *c);

/* The entry for url (shown: its shown form; ext: ".stoke" or ".tar"; size
** and etag from the server, etag not empty), fetched through h when it is
** not there: *fd is it, read-only, with a shared flock held until it is
** closed.  Errors name shown only. */
int stoke__rcache_get(stoke__rcache *c, stoke__http *h, const char *url,
                      const char *shown, const char *ext, uint64_t size,
                      const char *etag, int *fd, char *err, size_t cap);

/* What this cache did since it was opened (the source's open, and its
** close's trim): entries found and fetched, with their bytes, shards the
** cache could not keep (no ETag), entries evicted. */
typedef struct stoke__rcache_counts {
  uint64_t hits, misses, uncached, evicted;
  uint64_t bytes_hit, bytes_fetched, bytes_evicted;
} stoke__rcache_counts;

void stoke__rcache_counts_get(const stoke__rcache *c,
                              stoke__rcache_counts *out);
/* A shard that could not be cached (the server sent no ETag): read
** remotely instead. */
void stoke__rcache_note_uncached(stoke__rcache *c);

/* Evict least recently used entries not open until the rest plus
** incoming fit the budget; remove .tmp files whose writer is gone.  Best
** effort: an entry that cannot be looked at is left. */
void stoke__rcache_trim(stoke__rcache *c, uint64_t incoming);

#endif /* STOKE_STORAGE_RCACHE_H */
