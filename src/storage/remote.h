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
** shard. */
int stoke__tar_remote_spool(stoke__http *h, const stoke__sys *sys,
                            const char *url, int *fd, char *err, size_t cap);

#endif /* STOKE_STORAGE_REMOTE_H */
