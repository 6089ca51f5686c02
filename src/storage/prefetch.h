/* prefetch.h — reading remote packed shards ahead: the block order's
** read-ahead (stoke__blobset_read_ahead) becomes coalesced Range requests
** for runs of consecutive samples, io_concurrency of them submitted at
** once to the client's I/O thread (no thread blocks in them: not the
** decode workers, nor threads of the prefetcher's own), landing in a
** buffer bounded by max_bytes that the workers' reads take their samples
** from.
** Private to src/storage/.
**
** It changes where bytes come from, never which bytes or their order: a
** sample not (yet) prefetched, or whose run failed, is read by the worker
** itself with its own retries and error.  A run is freed when its samples
** have all been taken; runs left untaken give way to new ones when the
** buffer is full, oldest first. */
#ifndef STOKE_STORAGE_PREFETCH_H
#define STOKE_STORAGE_PREFETCH_H

#include "storage/http.h"

#include <stdint.h>

typedef struct stoke__prefetch stoke__prefetch;

/* At most `threads` runs submitted at once over h (borrowed, must outlive
** the prefetcher; the name is the old one: no thread is started), at most
** max_bytes buffered.  Destroy waits for the runs in flight to land. */
int stoke__prefetch_create(stoke__http *h, unsigned threads,
                           uint64_t max_bytes, const stoke_allocator *a,
                           stoke__prefetch **out);
void stoke__prefetch_destroy(stoke__prefetch *p); /* NULL: no-op */

/* Queue [off, off + len) of url (borrowed for the prefetcher's life) as
** one request; shard names the object, payload is the bytes of the
** samples in it (the rest is alignment: the run is freed when readers
** have taken payload bytes).  The same range again, while its run is held,
** is one more use of it (freed after payload bytes a use).  Dropped,
** without error, when it does not fit or overlaps another run already
** asked for. */
void stoke__prefetch_request(stoke__prefetch *p, const char *url,
                             uint32_t shard, uint64_t off, uint64_t len,
                             uint64_t payload);

/* Copy [off, off + len) of shard into dst from a run that holds it,
** waiting for one in flight: true when copied, false when no run holds it
** (or its fetch failed): then the caller reads it itself. */
bool stoke__prefetch_take(stoke__prefetch *p, uint32_t shard, uint64_t off,
                          uint64_t len, void *dst);

/* Runs fetched, and samples served from them (for the tests). */
void stoke__prefetch_counts(stoke__prefetch *p, uint64_t *runs,
                            uint64_t *served);

#endif /* STOKE_STORAGE_PREFETCH_H */
