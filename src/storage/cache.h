/* cache.h — a cache that packs as it reads (src/storage/cache.c): the
** encoded samples of a folder or tar source, written by a background
** thread into packed shards under DIR/<key>/ as the loader reads them,
** and read from there (zero copy, mmap) once written.  Internal. */
#ifndef STOKE_STORAGE_CACHE_H
#define STOKE_STORAGE_CACHE_H

#include "storage/blob.h"

typedef struct stoke__cache stoke__cache;

typedef struct stoke__cache_opts {
  const char *dir;          /* the cache's folder (made if missing) */
  uint64_t max_bytes;       /* disk the cache may take; 0: the file
                               system's last 5% only */
  uint64_t shard_bytes;     /* a shard is published at this size (0: 64
                               MiB), or when asked (stoke__cache_cut) */
  uint64_t fingerprint;     /* stoke_source_fingerprint of the source */
  const stoke__sys *sys;    /* the writer's file calls and thread */
  const stoke_allocator *alloc;
} stoke__cache_opts;

/* The queue of samples read but not written yet: at most this many bytes
** (a sample that does not fit is cached in a later epoch). */
#define STOKE__CACHE_QUEUE_BYTES ((uint64_t)32 << 20)
/* Shards a cache may hold; past it nothing more is written. */
#define STOKE__CACHE_MAX_SHARDS 4096

/* Host bytes of a cache over n samples: its map of samples, the queue's
** budget and the shard table. */
uint64_t stoke__cache_host_bytes(size_t n_samples);

/* Open (or start) the cache of set under o->dir: the key hashes the
** fingerprint, the sample count and stoke__blobset_content_key (every
** file's path, size and mtime), so a changed source opens another key.
** The complete shards found there are read; .tmp files of writers that
** are gone are removed; the writer thread starts.  0, or STOKE_EINVAL (a
** packed set), STOKE_EIO (the folder cannot be made or read), STOKE_ENOMEM,
** STOKE_ETHREAD, with err set. */
int stoke__cache_open(const stoke__blobset *set, const stoke__cache_opts *o,
                      stoke__cache **out, char *err, size_t cap);
/* Stop the writer once it has written what is queued (at most
** STOKE__CACHE_QUEUE_BYTES), publish the shard it was writing (complete,
** under its final name) and free.  NULL: no-op. */
void stoke__cache_close(stoke__cache *c);

/* The bytes of sample i: from a published shard (zero copy, valid until
** close), else read from set into r, as stoke__blobset_read, and (the
** first time) rewritten with restart cuts with dec, the caller's decoder,
** and queued for the writer.  Any thread, one reader and decoder per
** thread. */
struct stoke__decoder;
int stoke__cache_read(stoke__cache *c, const stoke__blobset *set, size_t i,
                      stoke__blob_reader *r, struct stoke__decoder *dec,
                      const uint8_t **ptr, size_t *len, char *err,
                      size_t cap);
/* Done with bytes stoke__cache_read gave for sample i. */
void stoke__cache_done(stoke__cache *c, const stoke__blobset *set, size_t i,
                       const uint8_t *ptr, size_t len);
/* Ask the writer to publish the shard it is writing (an epoch ended), in
** the background. */
void stoke__cache_cut(stoke__cache *c);
/* Wait until everything queued so far is written and published (tests). */
void stoke__cache_sync(stoke__cache *c);

typedef struct stoke__cache_stats {
  uint64_t hits;      /* reads served from the cache */
  uint64_t written;   /* samples written by this loader's writer */
  uint64_t dropped;   /* offered but not queued (queue full), or not
                         written (budget, errors) */
  uint64_t bytes;     /* the cache's shards on disk */
  size_t samples;     /* samples the cache holds */
  int full;           /* 1: the budget or the shard table is spent */
  char error[STOKE__ERRMSG_CAP]; /* the writer's first error, or "" (not fatal:
                         the loader reads the source) */
} stoke__cache_stats;

void stoke__cache_stats_get(stoke__cache *c, stoke__cache_stats *out);
/* DIR/<key>: where the shards are. */
const char *stoke__cache_path(const stoke__cache *c);

#endif /* STOKE_STORAGE_CACHE_H */
