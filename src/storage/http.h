/* http.h — the remote byte source under packed and tar shards given as
** http:// or https:// URLs (libcurl).  Private to src/.
**
** A client holds what every request of one blobset shares: the options,
** one I/O thread driving a libcurl multi handle, a pool of easy handles,
** the multi's connection cache (a connection stays alive between requests,
** so a worker's next range reuses it), DNS and TLS sessions shared, the
** retry budget and the counters.  Any thread may issue requests at once:
** each call queues its request and waits for its own result; the I/O
** thread keeps at most io_concurrency of them in flight, starts the rest
** in FIFO order (a blocking call's ahead of the read-ahead's asynchronous
** ones, every other free slot going to those when both wait), and a
** retry waits out its backoff in a timed queue
** without holding a slot or a thread.  So the number of requests in
** flight is a knob apart from the number of threads asking.
**
** Every request retries what may pass (5xx, 429, a reset or refused
** connection, a stall, a body shorter than asked) with exponential backoff
** and jitter, up to max_attempts, while the client's retry budget lasts.
** What it gives up on is an error naming the URL in its shown form
** (url.h: never its user-info or query), the HTTP status and the attempts.
**
** An s3:// URL (s3.h) is sent to the http(s) URL it maps to, signed with
** SigV4 by libcurl when the settings hold a key; its errors add S3's
** error Code from the answer's XML body ("HTTP 403: SignatureDoesNotMatch").
**
** Memory does not depend on the server: a range lands in the caller's
** buffer of the size asked, a body that would run past it fails the
** request, redirects stop at 5, and a transfer slower than 1 KiB/s for
** stall_timeout_ms fails (and is retried). */
#ifndef STOKE_STORAGE_HTTP_H
#define STOKE_STORAGE_HTTP_H

#include "core/core.h"
#include "os/syscalls.h"
#include "stats/stats.h"

#include <stdint.h>

typedef struct stoke__http_options {
  const char *ca_path;         /* a CA bundle file or a hashed folder of CA
                                  certificates; NULL: the system's */
  bool insecure;               /* TLS without verifying the server */
  unsigned io_concurrency;     /* requests in flight; 0 = 8, at most
                                  STOKE_IO_CONCURRENCY_MAX */
  uint32_t connect_timeout_ms; /* 0 = 10 s */
  uint32_t stall_timeout_ms;   /* 0 = 30 s */
  unsigned max_attempts;       /* per request, the first included; 0 = 5 */
  unsigned retry_budget;       /* retries for the client's life; 0 = 1000 */
  uint32_t backoff_ms;         /* before the first retry; 0 = 100 ms */
  /* The S3 settings for s3:// URLs (s3.h), copied; NULL: an s3:// URL is
  ** refused. */
  const struct stoke__s3_conf *s3;
  /* The remote shard cache (rcache.h), read by the blobsets, never by the
  ** client: a folder of whole shards keyed by URL and ETag; NULL: none. */
  const char *cache_dir;
  uint64_t cache_max_bytes; /* its budget; 0: unbounded */
} stoke__http_options;

/* What a client did, for the stats and the tests. */
typedef struct stoke__http_counts {
  uint64_t requests;  /* attempts, retries included */
  uint64_t retries;
  uint64_t throttled; /* 429 and 503 answers */
  uint64_t bytes;     /* body bytes received */
  uint64_t busy_ns;   /* the attempts' wall times summed: over a span of
                         wall time, the mean number in flight */
  uint64_t body_ns;   /* of busy_ns, the time after each attempt's first
                         byte (receiving its body), summed */
  unsigned io_concurrency; /* the client's now, resolved (0 became 8) */
  unsigned waiting;   /* requests asked and not yet answered: queued,
                         in flight or waiting to retry */
} stoke__http_counts;

typedef struct stoke__http stoke__http;

/* o may be NULL (the defaults); o->ca_path is copied. */
int stoke__http_create(const stoke__http_options *o, const stoke_allocator *a,
                       stoke__http **out, char *err, size_t cap);
void stoke__http_destroy(stoke__http *h); /* NULL: no-op */

/* GET bytes [off, off + len) of url into buf (exactly len bytes; len > 0).
** *total (may be NULL): the object's size from the Content-Range answer.
** STOKE_EIO when it gives up, STOKE_EFORMAT when the server ignores Range
** or the object is shorter, STOKE_ENOMEM. */
int stoke__http_get_range(stoke__http *h, const char *url, uint64_t off,
                          size_t len, void *buf, uint64_t *total, char *err,
                          size_t cap);

/* The same without waiting: queued (FIFO, with the blocking calls') and
** 0 returned at once; done(arg, rc) is called once, from the client's I/O
** thread, when it ended (rc as get_range's; the message is dropped: a
** read that needs these bytes asks again and reports its own).  url and
** buf are borrowed until then; done must not block on other requests.
** Nonzero (STOKE_ENOMEM, STOKE_EIO once destroy began, an s3:// URL
** without settings): nothing queued, done never called.  A request still
** queued or in flight at destroy ends with STOKE_EIO. */
typedef void (*stoke__http_done_fn)(void *arg, int rc);
int stoke__http_get_range_async(stoke__http *h, const char *url,
                                uint64_t off, size_t len, void *buf,
                                stoke__http_done_fn done, void *arg);

/* The same, with the answer's ETag in etag[STOKE__HTTP_ETAG_CAP] ("" when
** it sent none, or a longer one), for the remote cache (rcache.h). */
#define STOKE__HTTP_ETAG_CAP 128
int stoke__http_get_range_etag(stoke__http *h, const char *url,
                               uint64_t off, size_t len, void *buf,
                               uint64_t *total, char *etag, char *err,
                               size_t cap);

/* GET all of url into buf[0..cap) (*n: its size); more than cap is
** STOKE_EFORMAT.  For S3's listings. */
int stoke__http_get_body(stoke__http *h, const char *url, void *buf,
                         size_t cap, size_t *n, char *err, size_t ecap);

/* The S3 settings' listing page size (s3.h's test knob); 0 = S3's. */
unsigned stoke__http_s3_max_keys(const stoke__http *h);

/* GET all of url into fd from offset 0 (pwrite through sys), at most max
** bytes (more is STOKE_EFORMAT); *bytes = the object's size. */
int stoke__http_get_file(stoke__http *h, const char *url,
                         const stoke__sys *sys, int fd, uint64_t max,
                         uint64_t *bytes, char *err, size_t cap);

/* Run fn(i, arg, e, ecap) for i in [0, n) on up to io_concurrency threads
** at once (the calling thread among them), each call with a message
** buffer of its own; the first nonzero result is returned, its message
** copied into err, and it stops the rest from starting.  For fetches at
** open (shards' indices, tar spools) that would otherwise wait on one
** round trip after another. */
int stoke__http_parallel(const stoke__http *h, size_t n,
                         int (*fn)(size_t i, void *arg, char *e, size_t ecap),
                         void *arg, char *err, size_t cap);

/* The requests in flight at most, from now on: n in 1..
** STOKE_IO_CONCURRENCY_MAX (0: the default 8; more: the maximum).  Those
** already in flight finish; the next ones start under the new limit, and
** the multi's connection limits follow.  Any thread, any time (the tuner
** moves it without a new client). */
void stoke__http_set_io_concurrency(stoke__http *h, unsigned n);

void stoke__http_counts_get(const stoke__http *h, stoke__http_counts *out);
/* The limit in force now (counts_get's io_concurrency, one atomic load:
** for the read-ahead, which asks at every batch and every submit). */
unsigned stoke__http_io_concurrency(const stoke__http *h);
/* Adds the attempts' latencies (ns, each attempt's wall time in the multi
** handle, retries each one) into *acc. */
void stoke__http_latency_read(const stoke__http *h, stoke__hist_snap *acc);

#endif /* STOKE_STORAGE_HTTP_H */
