/* publish.h — the live view (src/stats/publish.c): the snapshot file, its
** sequence lock, and the thread that publishes a loader's or a two-clock's
** statistics for `stoke top`.  Nothing here is API (stoke_live_* is). */
#ifndef STOKE_STATS_PUBLISH_H
#define STOKE_STATS_PUBLISH_H

#include "stats/stats.h"

/* Whether a publish setting (stoke_publish) means on: STOKE_PUBLISH
** decides the default. */
bool stoke__publish_wanted(int publish);

/* What the publisher asks of its owner, on the publisher's thread, about
** every STOKE_LIVE_PERIOD_MS: out->stats, out->wait_hist (see
** stoke__live_rebin) and the autotuner's fields; scratch has room for cap
** histogram buckets.  The publisher sets the rest. */
typedef void (*stoke__live_fill_fn)(void *ctx, stoke_live *out,
                                    stoke_hist_bucket *scratch, size_t cap);

typedef struct stoke__publisher stoke__publisher;

/* Make the snapshot file and start the thread that fills it (the first
** snapshot at once).  NULL when the folder, the file, the memory or the
** thread cannot be had: publishing is never worth failing a loader for.
** fill(ctx, ...) must stay callable until stoke__publisher_stop. */
stoke__publisher *stoke__publisher_start(const stoke_allocator *a, int kind,
                                         stoke__live_fill_fn fill,
                                         void *ctx);
/* Join the thread, remove the file, free.  NULL: no-op. */
void stoke__publisher_stop(stoke__publisher *p);

/* A histogram's buckets (stoke__hist_buckets' order) into the snapshot's
** quarter-octave bins, each counted at its bucket's midpoint. */
void stoke__live_rebin(const stoke_hist_bucket *b, size_t n,
                       uint64_t out[STOKE_LIVE_HIST]);

/* ---- the file and its sequence lock (used by the publisher and the
** readers; the unit tests drive them directly) ------------------------- */

/* Bytes of a snapshot file. */
size_t stoke__live_file_bytes(void);
/* A new file's header: whose it is (pid and its start time).  The magic
** goes in last, so a reader sees either nothing or a whole header. */
void stoke__live_file_init(void *map, long pid, uint64_t start_ticks);
/* Write snapshot s under the sequence lock (one writer per file); buf has
** room for the payload's words (stoke__live_file_bytes). */
void stoke__live_write(void *map, const stoke_live *s, uint64_t *buf);
/* The write in its two halves (stoke__live_write is begin then finish):
** begin makes the sequence number odd, finish writes the words and makes
** it even.  Apart only so that a test can stop a writer half way. */
void stoke__live_write_begin(void *map);
void stoke__live_write_finish(void *map, const stoke_live *s, uint64_t *buf);
/* Whose file it is: 0, or EINVAL when it is not (yet) a snapshot file of
** this version. */
int stoke__live_owner(const void *map, size_t bytes, long *pid,
                      uint64_t *start_ticks);
/* How long a reader waits for a write in progress to end. */
#define STOKE__LIVE_READ_WAIT_NS (2 * 1000000000LL)
/* Read the latest snapshot: 0; EAGAIN when none is written yet or a write
** stayed half done for STOKE__LIVE_READ_WAIT_NS; EINVAL when the file is
** not of this version or its checksum is wrong. */
int stoke__live_read(const void *map, size_t bytes, stoke_live *out);

#endif /* STOKE_STATS_PUBLISH_H */
