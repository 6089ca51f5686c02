/* http.c — the remote byte source (http.h): one I/O thread per client
** drives a libcurl multi handle, so that the requests in flight are a
** number of their own (io_concurrency), not a number of threads; retries
** wait in a timed queue under a budget, and answers are checked against
** what was asked before a byte is believed. */
#define _POSIX_C_SOURCE 200809L
#include "storage/http.h"
#include "storage/s3.h"
#include "storage/url.h"
#include "os/os.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define MAX_REDIRECTS 5L
#define STALL_BYTES_PER_S 1024L /* below this for stall_timeout: stalled */
#define MAX_BACKOFF_MS 10000u
#define SHOWN_CAP 512
#define TARGET_CAP 8192   /* the http(s) URL an s3:// URL maps to */
#define MOVED_BUCKETS 16  /* buckets of one client known in other regions */
#define ERROR_BODY_CAP 1024 /* of an error answer: S3's XML names its Code */
/* An s3:// answer may be an error whose XML body is longer than the range
** asked (a 64-byte header read): let one this large start, so that its
** Code can be read; the body callback still bounds what lands. */
#define S3_MIN_MAXFILESIZE (64u << 10)
/* SHA-256 of an empty payload: S3 wants x-amz-content-sha256 signed, and
** libcurl 7.x does not send it. */
#define EMPTY_SHA256 \
  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct stoke__http {
  const stoke_allocator *alloc;
  stoke__http_options o;
  char *ca_path;           /* owned copy of o.ca_path */
  stoke__s3_conf *s3;      /* owned copy of *o.s3, or NULL */
  bool ca_is_dir;
  CURLSH *share;           /* DNS and TLS sessions of every handle */
  pthread_mutex_t share_lock[CURL_LOCK_DATA_LAST];
  CURL **pool;             /* idle handles (the I/O thread's only) */
  size_t n_pool;
  /* The I/O thread and what it shares with the callers, under q_lock:
  ** requests wait in two FIFO queues, at most `limit` are in flight in
  ** the multi handle, and a retried one waits in timed (its backoff)
  ** without holding a thread or a slot.  `now` holds the requests a
  ** thread is blocked on (a worker's sample that was not read ahead, the
  ** fetches at open) and retries that are due; `ahead` the read-ahead's
  ** (get_range_async).  A free slot goes to `now` first, but when both
  ** wait, every other one goes to `ahead` (ahead_turn): a miss does not
  ** wait behind every run read ahead, and the runs are never starved by
  ** misses (which would leave every worker reading alone). */
  CURLM *multi;
  pthread_t io;
  bool io_started;
  pthread_mutex_t q_lock;
  pthread_cond_t users_cv;  /* destroy waits here for callers to leave */
  struct rqueue { struct request *head, *tail; } now, ahead;
  bool ahead_turn;
  struct request *timed;    /* unsorted; a few at once */
  unsigned users;           /* callers inside a blocking call */
  atomic_uint waiting;      /* of them, requests submitted, not done */
  bool stopping;
  atomic_uint limit;        /* io_concurrency now (set_io_concurrency) */
  pid_t pid;                /* the process that made it: a forked child
                               has no I/O thread, so its requests fail at
                               once instead of waiting for ever */
  unsigned multi_limit;     /* what the multi was last told (I/O thread) */
  unsigned in_flight;       /* I/O thread only */
  atomic_uint budget;      /* retries left */
  atomic_uint_fast64_t requests, retries, throttled, bytes;
  /* The attempts' time after their first byte (curl's total less its
  ** start-transfer time), summed: of latency.sum, the share spent
  ** receiving bodies rather than connecting and waiting for the server,
  ** which tells a saturated link from a slow answer. */
  atomic_uint_fast64_t body_ns;
  stoke__hist latency;     /* per attempt; ~29 KiB, one per client */
  /* The buckets S3 said live in another region than the settings' (an
  ** answer's x-amz-bucket-region), so that each later request goes and
  ** is signed there at once; a few buckets a source, under their lock. */
  pthread_mutex_t moved_lock;
  struct {
    char bucket[64], region[64];
  } moved[MOVED_BUCKETS];
  size_t n_moved;
};

/* ---- the share's locks --------------------------------------------------- */

static void share_lock(CURL *c, curl_lock_data d, curl_lock_access a,
                       void *user) {
  (void)c;
  (void)a;
  stoke__http *h = user;
  pthread_mutex_lock(&h->share_lock[d]);
}

static void share_unlock(CURL *c, curl_lock_data d, void *user) {
  (void)c;
  stoke__http *h = user;
  pthread_mutex_unlock(&h->share_lock[d]);
}

/* ---- create / destroy ---------------------------------------------------- */

static void defaults(stoke__http_options *o) {
  if (!o->io_concurrency) o->io_concurrency = STOKE_IO_CONCURRENCY_DEFAULT;
  if (o->io_concurrency > STOKE_IO_CONCURRENCY_MAX)
    o->io_concurrency = STOKE_IO_CONCURRENCY_MAX;
  if (!o->connect_timeout_ms) o->connect_timeout_ms = 10000;
  if (!o->stall_timeout_ms) o->stall_timeout_ms = 30000;
  if (!o->max_attempts) o->max_attempts = 5;
  if (!o->retry_budget) o->retry_budget = 1000;
  if (!o->backoff_ms) o->backoff_ms = 100;
}

static void *io_main(void *user);

int stoke__http_create(const stoke__http_options *o, const stoke_allocator *a,
                       stoke__http **out, char *err, size_t cap) {
  *out = NULL;
  /* Thread-safe since curl 7.84 and reference-counted: each client holds
  ** one reference, so the library keeps no state of its own. */
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    return stoke__errf(err, cap, STOKE_EIO, "remote source: libcurl would "
                       "not initialise");
  stoke__http *h = stoke__calloc(a, 1, sizeof *h);
  if (!h) {
    curl_global_cleanup();
    return stoke__errf(err, cap, STOKE_ENOMEM, "remote source: out of "
                       "memory");
  }
  h->alloc = a;
  if (o) h->o = *o;
  defaults(&h->o);
  for (int d = 0; d < CURL_LOCK_DATA_LAST; d++)
    pthread_mutex_init(&h->share_lock[d], NULL);
  pthread_mutex_init(&h->moved_lock, NULL);
  pthread_mutex_init(&h->q_lock, NULL);
  pthread_cond_init(&h->users_cv, NULL);
  atomic_init(&h->budget, h->o.retry_budget);
  atomic_init(&h->requests, 0);
  atomic_init(&h->retries, 0);
  atomic_init(&h->throttled, 0);
  atomic_init(&h->bytes, 0);
  atomic_init(&h->body_ns, 0);
  atomic_init(&h->limit, h->o.io_concurrency);
  h->pid = getpid();
  atomic_init(&h->waiting, 0);
  int rc = 0;
  if (h->o.ca_path) {
    h->ca_path = stoke__strdup(a, h->o.ca_path);
    h->o.ca_path = h->ca_path;
    if (!h->ca_path) rc = STOKE_ENOMEM;
    size_t n = h->ca_path ? strlen(h->ca_path) : 0;
    h->ca_is_dir = n && h->ca_path[n - 1] == '/';
  }
  if (rc == 0 && h->o.s3) {
    h->s3 = stoke__alloc(a, sizeof *h->s3);
    if (h->s3) *h->s3 = *h->o.s3;
    else rc = STOKE_ENOMEM;
    h->o.s3 = h->s3;
  }
  /* As many idle handles as may ever be in flight (the limit may rise). */
  h->pool = rc ? NULL
               : stoke__calloc(a, STOKE_IO_CONCURRENCY_MAX, sizeof(CURL *));
  h->share = h->pool ? curl_share_init() : NULL;
  h->multi = h->share ? curl_multi_init() : NULL;
  if (!h->multi) {
    stoke__http_destroy(h);
    return stoke__errf(err, cap, STOKE_ENOMEM, "remote source: out of "
                       "memory");
  }
  curl_share_setopt(h->share, CURLSHOPT_LOCKFUNC, share_lock);
  curl_share_setopt(h->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
  curl_share_setopt(h->share, CURLSHOPT_USERDATA, h);
  /* DNS and TLS sessions shared (the multi's connection cache keeps the
  ** connections themselves, reused by whichever handle runs next). */
  curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  if (pthread_create(&h->io, NULL, io_main, h) != 0) {
    stoke__http_destroy(h);
    return stoke__errf(err, cap, STOKE_EIO, "remote source: could not "
                       "start its I/O thread");
  }
  h->io_started = true;
  *out = h;
  return 0;
}

void stoke__http_destroy(stoke__http *h) {
  if (!h) return;
  /* In a forked child the I/O thread is not there to join, the locks may
  ** have been held by the parent's threads at the fork, and the
  ** connections' sockets are the parent's too (a TLS close from here
  ** would end the parent's session): the client is left as it is, its
  ** memory the child's to lose when it exits. */
  if (getpid() != h->pid) return;
  if (h->io_started) {
    /* The I/O thread fails what is queued or in flight and leaves; then
    ** the callers it woke leave their calls before the memory goes. */
    pthread_mutex_lock(&h->q_lock);
    h->stopping = true;
    pthread_mutex_unlock(&h->q_lock);
    curl_multi_wakeup(h->multi);
    pthread_join(h->io, NULL);
    pthread_mutex_lock(&h->q_lock);
    while (h->users) pthread_cond_wait(&h->users_cv, &h->q_lock);
    pthread_mutex_unlock(&h->q_lock);
  }
  for (size_t k = 0; k < h->n_pool; k++) curl_easy_cleanup(h->pool[k]);
  if (h->multi) curl_multi_cleanup(h->multi);
  if (h->share) curl_share_cleanup(h->share);
  for (int d = 0; d < CURL_LOCK_DATA_LAST; d++)
    pthread_mutex_destroy(&h->share_lock[d]);
  pthread_mutex_destroy(&h->moved_lock);
  pthread_mutex_destroy(&h->q_lock);
  pthread_cond_destroy(&h->users_cv);
  stoke__free(h->alloc, h->pool);
  stoke__free(h->alloc, h->ca_path);
  /* The secret and the token do not outlive the client in its memory. */
  stoke__s3_conf_free(h->alloc, h->s3);
  stoke__free(h->alloc, h);
  curl_global_cleanup();
}

unsigned stoke__http_s3_max_keys(const stoke__http *h) {
  return h->s3 ? h->s3->max_keys : 0;
}

void stoke__http_set_io_concurrency(stoke__http *h, unsigned n) {
  if (!n) n = STOKE_IO_CONCURRENCY_DEFAULT;
  if (n > STOKE_IO_CONCURRENCY_MAX) n = STOKE_IO_CONCURRENCY_MAX;
  atomic_store_explicit(&h->limit, n, memory_order_release);
  /* A rise lets queued requests start now, not at the next completion. */
  curl_multi_wakeup(h->multi);
}

void stoke__http_counts_get(const stoke__http *h, stoke__http_counts *out) {
  stoke__http *m = (stoke__http *)h; /* atomics are read, not changed */
  out->requests = atomic_load(&m->requests);
  out->retries = atomic_load(&m->retries);
  out->throttled = atomic_load(&m->throttled);
  out->bytes = atomic_load(&m->bytes);
  out->busy_ns = stoke__counter_get(&m->latency.sum);
  out->body_ns = atomic_load(&m->body_ns);
  out->io_concurrency = atomic_load_explicit(&m->limit, memory_order_acquire);
  out->waiting = atomic_load(&m->waiting);
}

unsigned stoke__http_io_concurrency(const stoke__http *h) {
  return atomic_load_explicit(&((stoke__http *)h)->limit,
                              memory_order_acquire);
}

void stoke__http_latency_read(const stoke__http *h, stoke__hist_snap *acc) {
  stoke__hist_read(&h->latency, acc);
}

/* ---- handles (the I/O thread's only) ------------------------------------- */

static CURL *handle_take(stoke__http *h) {
  return h->n_pool ? h->pool[--h->n_pool] : curl_easy_init();
}

/* Back to the pool, or closed when as many idle ones as the limit are kept
** (the limit was lowered); the connections stay in the multi's cache. */
static void handle_give(stoke__http *h, CURL *c) {
  unsigned limit = atomic_load_explicit(&h->limit, memory_order_acquire);
  if (h->n_pool < limit && h->n_pool < STOKE_IO_CONCURRENCY_MAX)
    h->pool[h->n_pool++] = c;
  else
    curl_easy_cleanup(c);
}

/* ---- one transfer -------------------------------------------------------- */

typedef struct sink {
  uint8_t *buf;            /* range: the caller's buffer of cap bytes */
  const stoke__sys *sys;   /* file: pwrite to fd */
  int fd;
  uint64_t cap;            /* bytes that may arrive */
  uint64_t got;
  bool overflow;           /* the server sent more than cap */
  int io_errno;            /* a pwrite failed */
  uint64_t total;          /* Content-Range's size, or UINT64_MAX */
  long status;             /* of the last status line seen */
  char ebody[ERROR_BODY_CAP]; /* the start of an error answer's body */
  size_t n_ebody;
  char etag[STOKE__HTTP_ETAG_CAP]; /* the answer's ETag, or "" */
  char bucket_region[64];  /* S3's x-amz-bucket-region, or "" */
} sink;

static size_t on_body(char *data, size_t size, size_t n, void *user) {
  sink *k = user;
  size_t bytes = size * n;
  if (k->status >= 300) {
    /* An error answer's body is kept apart (its start only), never in the
    ** caller's buffer: it is a message, not the object. */
    size_t room = sizeof k->ebody - 1 - k->n_ebody;
    size_t m = bytes < room ? bytes : room;
    memcpy(k->ebody + k->n_ebody, data, m);
    k->n_ebody += m;
    k->ebody[k->n_ebody] = 0;
    return bytes;
  }
  if (bytes > k->cap - k->got) {
    k->overflow = true;
    return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
  }
  if (k->buf) {
    memcpy(k->buf + k->got, data, bytes);
  } else {
    for (size_t done = 0; done < bytes;) {
      ssize_t w = k->sys->pwrite(k->sys->user, k->fd, data + done,
                                 bytes - done, k->got + done);
      if (w <= 0) {
        k->io_errno = w < 0 ? errno : EIO;
        return 0;
      }
      done += (size_t)w;
    }
  }
  k->got += bytes;
  return bytes;
}

/* "ETag: \"abc\"": kept as sent, trimmed, for the remote cache's key
** (rcache.h); one longer than the buffer is not kept (no key, no cache). */
static void etag_header(sink *k, const char *line, size_t bytes) {
  if (bytes < 5 || strncasecmp(line, "etag:", 5) != 0) return;
  const char *v = line + 5, *end = line + bytes;
  while (v < end && (*v == ' ' || *v == '\t')) v++;
  size_t n = 0;
  while (v + n < end && v[n] != '\r' && v[n] != '\n') n++;
  while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
  if (n >= sizeof k->etag) return;
  memcpy(k->etag, v, n);
  k->etag[n] = 0;
}

/* "x-amz-bucket-region: eu-west-1": where S3 says the bucket is (on a
** wrong region's 301 or 400); one that is no region name is not kept. */
static void bucket_region_header(sink *k, const char *line, size_t bytes) {
  static const char name[] = "x-amz-bucket-region:";
  size_t m = sizeof name - 1;
  if (bytes <= m || strncasecmp(line, name, m) != 0) return;
  const char *v = line + m, *end = line + bytes;
  while (v < end && (*v == ' ' || *v == '\t')) v++;
  size_t n = 0;
  while (v + n < end && v[n] != '\r' && v[n] != '\n' && v[n] != ' ') n++;
  if (n == 0 || n >= sizeof k->bucket_region) return;
  memcpy(k->bucket_region, v, n);
  k->bucket_region[n] = 0;
  if (!stoke__s3_region_ok(k->bucket_region)) k->bucket_region[0] = 0;
}

/* "Content-Range: bytes 0-63/123456": the size after the slash. */
static size_t on_header(char *line, size_t size, size_t n, void *user) {
  sink *k = user;
  size_t bytes = size * n;
  static const char name[] = "content-range:";
  /* "HTTP/1.1 403 Forbidden": each answer's (a redirect's too) first line. */
  if (bytes > 9 && memcmp(line, "HTTP/", 5) == 0) {
    const char *sp = memchr(line, ' ', bytes);
    k->status = sp && sp + 1 < line + bytes ? strtol(sp + 1, NULL, 10) : 0;
    k->n_ebody = 0;
  }
  if (bytes > sizeof name && bytes < 256) {
    char t[256];
    memcpy(t, line, bytes);
    t[bytes] = 0;
    bool match = true;
    for (size_t i = 0; i + 1 < sizeof name && match; i++) {
      char c = t[i];
      if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
      match = c == name[i];
    }
    const char *slash = match ? strchr(t, '/') : NULL;
    if (slash && slash[1] >= '0' && slash[1] <= '9')
      k->total = strtoull(slash + 1, NULL, 10);
  }
  etag_header(k, line, bytes);
  bucket_region_header(k, line, bytes);
  return bytes;
}

static void setup(stoke__http *h, CURL *c, const char *url, sink *k,
                  char *curl_err) {
  curl_easy_reset(c); /* keeps the connection; drops the last options */
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_SHARE, h->share);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, MAX_REDIRECTS);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   (long)h->o.connect_timeout_ms);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, STALL_BYTES_PER_S);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME,
                   (long)((h->o.stall_timeout_ms + 999) / 1000));
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, h->o.insecure ? 0L : 1L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, h->o.insecure ? 0L : 2L);
  if (h->ca_path)
    curl_easy_setopt(c, h->ca_is_dir ? CURLOPT_CAPATH : CURLOPT_CAINFO,
                     h->ca_path);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, k);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, k);
  /* A body of known size past what may arrive fails before its first byte
  ** (the write callback would stop it anyway). */
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)k->cap);
}

/* Transient: worth another attempt. */
static bool transient_curl(CURLcode e) {
  switch (e) {
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_CONNECT:
  case CURLE_OPERATION_TIMEDOUT:
  case CURLE_PARTIAL_FILE:
  case CURLE_GOT_NOTHING:
  case CURLE_SEND_ERROR:
  case CURLE_RECV_ERROR:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM:
    return true;
  default:
    return false;
  }
}

static bool transient_status(long status) {
  return status == 408 || status == 429 || (status >= 500 && status < 600);
}

/* Equal jitter: half the exponential delay, plus up to the other half
** drawn from the request's own hash (no shared random state).  The
** request waits it out in the timed queue, not in a sleeping thread. */
static uint64_t backoff_ms(const stoke__http *h, const char *url,
                           uint64_t off, unsigned attempt) {
  uint64_t ms = h->o.backoff_ms;
  for (unsigned k = 1; k < attempt && ms < MAX_BACKOFF_MS; k++) ms *= 2;
  if (ms > MAX_BACKOFF_MS) ms = MAX_BACKOFF_MS;
  uint64_t r = stoke__hash_u64(stoke__hash_str(0, url), off ^ attempt);
  return ms / 2 + (ms / 2 ? stoke__mix64(r) % (ms / 2 + 1) : 0);
}

/* What the last attempt saw, for the message when it gives up. */
typedef struct outcome {
  CURLcode code;
  long status;
  char curl_err[CURL_ERROR_SIZE];
} outcome;

/* One request from submission to its result.  The caller's fields are
** set before it is queued and not touched by the caller again until
** `done` (under q_lock); in between, only the I/O thread touches it. */
typedef struct request {
  const char *url;         /* as given: what messages show (redacted) */
  const char *target;      /* what libcurl is given: url, or its mapping */
  bool s3;
  uint64_t off, len;       /* range; len 0 = the whole object */
  sink k;
  char region[64];         /* an s3:// request's: where it goes, signed */
  char bucket[64];
  char target_buf[TARGET_CAP]; /* an s3:// URL's mapping */
  char *err;               /* the caller's message buffer */
  size_t cap;
  /* The I/O thread's. */
  struct request *next;    /* in a queue (now, ahead) or timed */
  CURL *c;                 /* while in flight */
  struct curl_slist *headers;
  char range[64];
  int64_t t0, due_ns;      /* started; due again (timed) */
  outcome o;
  unsigned attempt;
  bool spent, followed;
  /* An asynchronous request's (get_range_async): called at its end in
  ** place of waking a caller; its message lands in own_err. */
  stoke__http_done_fn done_fn;
  void *done_arg;
  char own_err[STOKE__ERRMSG_CAP];
  /* The result, set before done. */
  int rc;
  bool done;
  pthread_cond_t cv;       /* with q_lock: the caller waits for done */
} request;

/* An s3:// request: SigV4 by libcurl when there is a key (else unsigned,
** for a public bucket).  The key id, the secret and the token go to
** libcurl only.  False when the header list cannot be made. */
static bool s3_sign(const stoke__http *h, CURL *c, const request *q,
                    struct curl_slist **headers) {
  const stoke__s3_conf *s3 = h->s3;
  const sink *k = &q->k;
  if (k->cap < S3_MIN_MAXFILESIZE)
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE,
                     (curl_off_t)S3_MIN_MAXFILESIZE);
  if (!s3->key_id[0]) return true;
  char provider[96], token[sizeof s3->token + 32];
  snprintf(provider, sizeof provider, "aws:amz:%s:s3", q->region);
  curl_easy_setopt(c, CURLOPT_AWS_SIGV4, provider);
  curl_easy_setopt(c, CURLOPT_USERNAME, s3->key_id);
  curl_easy_setopt(c, CURLOPT_PASSWORD, s3->secret);
  struct curl_slist *l =
      curl_slist_append(NULL, "x-amz-content-sha256: " EMPTY_SHA256);
  if (l && s3->token[0]) {
    snprintf(token, sizeof token, "x-amz-security-token: %s", s3->token);
    struct curl_slist *t = curl_slist_append(l, token);
    stoke__s3_wipe(token, sizeof token); /* not left on the stack */
    if (!t) {
      curl_slist_free_all(l);
      return false;
    }
    l = t;
  }
  if (!l) return false;
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, l);
  *headers = l;
  return true;
}

/* An attempt's start: the handle set up and added to the multi.  0, or
** a negative error (the request then ends with it). */
static int attempt_start(stoke__http *h, request *q) {
  sink *k = &q->k;
  k->got = 0;
  k->overflow = false;
  k->io_errno = 0;
  k->total = UINT64_MAX;
  k->status = 0;
  k->n_ebody = 0;
  k->ebody[0] = 0;
  k->etag[0] = 0;
  k->bucket_region[0] = 0;
  outcome *o = &q->o;
  o->code = CURLE_OK; /* what fail() reads, should this attempt not start */
  o->status = 0;
  o->curl_err[0] = 0;
  q->attempt++;
  CURL *c = handle_take(h);
  if (!c) return STOKE_ENOMEM;
  setup(h, c, q->target, k, o->curl_err);
  curl_easy_setopt(c, CURLOPT_PRIVATE, q);
  q->headers = NULL;
  if (q->s3 && !s3_sign(h, c, q, &q->headers)) {
    handle_give(h, c);
    return STOKE_ENOMEM;
  }
  if (q->len) {
    snprintf(q->range, sizeof q->range, "%llu-%llu",
             (unsigned long long)q->off,
             (unsigned long long)(q->off + q->len - 1));
    curl_easy_setopt(c, CURLOPT_RANGE, q->range);
  }
  atomic_fetch_add(&h->requests, 1);
  q->t0 = stoke__now_ns();
  if (curl_multi_add_handle(h->multi, c) != CURLM_OK) {
    curl_slist_free_all(q->headers);
    q->headers = NULL;
    handle_give(h, c);
    return STOKE_ENOMEM;
  }
  q->c = c;
  h->in_flight++;
  return 0;
}

/* An attempt's end (its transfer done with code): 0 done, 1 transient
** (retry), or a negative error.  The handle goes back to the pool. */
static int attempt_end(stoke__http *h, request *q, CURLcode code) {
  sink *k = &q->k;
  outcome *o = &q->o;
  CURL *c = q->c;
  curl_multi_remove_handle(h->multi, c);
  q->c = NULL;
  h->in_flight--;
  o->code = code;
  int64_t dt = stoke__now_ns() - q->t0;
  stoke__hist_add_shared(&h->latency, dt > 0 ? (uint64_t)dt : 0);
  curl_off_t first_us = 0, total_us = 0;
  if (curl_easy_getinfo(c, CURLINFO_STARTTRANSFER_TIME_T, &first_us) ==
          CURLE_OK &&
      curl_easy_getinfo(c, CURLINFO_TOTAL_TIME_T, &total_us) == CURLE_OK &&
      first_us > 0 && total_us > first_us) {
    /* Never more than the attempt's own wall time (curl's clock is its
    ** own): the share stays a share. */
    uint64_t body = (uint64_t)(total_us - first_us) * 1000u;
    if (dt > 0 && body > (uint64_t)dt) body = (uint64_t)dt;
    atomic_fetch_add(&h->body_ns, body);
  }
  curl_slist_free_all(q->headers);
  q->headers = NULL;
  o->status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &o->status);
  handle_give(h, c);
  atomic_fetch_add(&h->bytes, k->got);
  if (o->status == 429 || o->status == 503) atomic_fetch_add(&h->throttled, 1);
  if (k->io_errno) return STOKE_EIO;
  if (o->code == CURLE_OK && o->status >= 200 && o->status < 300) {
    if (q->len && o->status != 206) return STOKE_EFORMAT; /* Range ignored */
    if (q->len && k->got < q->len) return 1;              /* short body */
    return 0;
  }
  if (k->overflow || o->code == CURLE_FILESIZE_EXCEEDED) return STOKE_EFORMAT;
  if (o->code == CURLE_OK) return transient_status(o->status) ? 1 : STOKE_EIO;
  /* A status with a curl error (a body cut off) counts as the status. */
  if (o->status && !transient_status(o->status) && o->status >= 300)
    return STOKE_EIO;
  return transient_curl(o->code) ? 1 : STOKE_EIO;
}

static int fail(const request *q, int code, const outcome *o,
                unsigned attempts, bool budget_spent, char *err,
                size_t cap) {
  char shown[SHOWN_CAP], what[96] = "", status[48] = "";
  stoke__url_redact(q->url, shown, sizeof shown);
  if (q->len)
    snprintf(what, sizeof what, " bytes %llu-%llu",
             (unsigned long long)q->off,
             (unsigned long long)(q->off + q->len - 1));
  if (o->status) snprintf(status, sizeof status, "HTTP %ld", o->status);
  const char *why;
  char s3_code[64] = "";
  if (q->s3 && o->status >= 300)
    stoke__s3_error_code(q->k.ebody, q->k.n_ebody, s3_code, sizeof s3_code);
  if (code == STOKE_EFORMAT && q->len && o->status == 200)
    why = "the server ignored the Range request (expected 206)";
  else if (code == STOKE_EFORMAT && q->k.overflow)
    why = "the server sent more than asked";
  else if (code == STOKE_EFORMAT && o->code == CURLE_FILESIZE_EXCEEDED)
    why = "the answer is larger than allowed";
  else if (code == STOKE_EFORMAT)
    why = "the server ignored the Range request (expected 206)";
  else if (o->code != CURLE_OK)
    why = o->curl_err[0] ? o->curl_err : curl_easy_strerror(o->code);
  else if (o->status == 429 || o->status == 503)
    why = "throttled";
  else if (s3_code[0])
    why = s3_code; /* S3's Code: NoSuchKey, AccessDenied, ... */
  else if (o->status >= 300)
    why = "error answer";
  else
    why = "short body";
  /* curl's own text may quote the URL it was given: never show it. */
  if (stoke__url_shows_secret(q->url, why) ||
      stoke__url_shows_secret(q->target, why))
    why = curl_easy_strerror(o->code);
  return stoke__errf(err, cap, code,
                     "GET %s%s: %s%s%s after %u attempt%s%s", shown, what,
                     status, status[0] ? ": " : "", why, attempts,
                     attempts == 1 ? "" : "s",
                     budget_spent ? " (the retry budget is spent)" : "");
}

/* ---- buckets in other regions ------------------------------------------- */

/* The region bucket's requests go to: one S3 named for it, else the
** settings'. */
static void bucket_region(stoke__http *h, const char *bucket,
                          char region[64]) {
  snprintf(region, 64, "%s", h->s3->region);
  pthread_mutex_lock(&h->moved_lock);
  for (size_t k = 0; k < h->n_moved; k++)
    if (!strcmp(h->moved[k].bucket, bucket))
      snprintf(region, 64, "%s", h->moved[k].region);
  pthread_mutex_unlock(&h->moved_lock);
}

/* Remember that bucket is in region (a full table forgets nothing: that
** bucket's requests then each follow the answer again). */
static void bucket_moved(stoke__http *h, const char *bucket,
                         const char *region) {
  pthread_mutex_lock(&h->moved_lock);
  size_t k = 0;
  while (k < h->n_moved && strcmp(h->moved[k].bucket, bucket)) k++;
  if (k < MOVED_BUCKETS) {
    snprintf(h->moved[k].bucket, sizeof h->moved[k].bucket, "%s", bucket);
    snprintf(h->moved[k].region, sizeof h->moved[k].region, "%s", region);
    if (k == h->n_moved) h->n_moved++;
  }
  pthread_mutex_unlock(&h->moved_lock);
}

/* Where the answer says the bucket is, when that is another region than
** the one asked: S3 answers a wrong region's request with 301
** PermanentRedirect (virtual-hosted), 400 AuthorizationHeaderMalformed
** (the signature's scope) or 307, with x-amz-bucket-region, or (when it
** sends no such header) the region named only in the XML body's
** <Region>, read from the error body's start the client keeps
** (ERROR_BODY_CAP bytes: S3's error bodies are a few hundred).  Into
** region; false when it names none, or the one asked. */
static bool wrong_region(const request *q, const outcome *o,
                         char region[64]) {
  region[0] = 0;
  if (!q->s3 || !(o->status == 301 || o->status == 307 || o->status == 400))
    return false;
  if (q->k.bucket_region[0])
    snprintf(region, 64, "%s", q->k.bucket_region);
  else
    (void)stoke__s3_error_region(q->k.ebody, q->k.n_ebody, region);
  return region[0] && strcmp(region, q->region) != 0;
}

/* ---- the I/O thread ------------------------------------------------------ */

/* The request's end: its result, and its caller woken.  The I/O thread
** does not touch q after this (it lives on the caller's stack). */
static void complete(stoke__http *h, request *q, int rc) {
  if (q->done_fn) { /* no caller waits: the request is the client's */
    atomic_fetch_sub(&h->waiting, 1);
    q->done_fn(q->done_arg, rc);
    stoke__free(h->alloc, q);
    return;
  }
  pthread_mutex_lock(&h->q_lock);
  q->rc = rc;
  q->done = true;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&h->q_lock);
}

static int closed(const request *q) {
  char shown[SHOWN_CAP];
  stoke__url_redact(q->url, shown, sizeof shown);
  return stoke__errf(q->err, q->cap, STOKE_EIO, "GET %s: the remote source "
                     "was closed", shown);
}

/* A client used in a process forked from the one that made it: the child
** has the client's memory but not its I/O thread (fork copies only the
** calling thread), so nothing would ever answer. */
static int forked(const stoke__http *h, const char *url, char *err,
                  size_t cap) {
  char shown[SHOWN_CAP];
  stoke__url_redact(url, shown, sizeof shown);
  return stoke__errf(err, cap, STOKE_EINVAL, "GET %s: the remote source was "
                     "opened in process %ld, and this is process %ld (a fork "
                     "keeps no I/O thread): open it in the process that "
                     "reads it (e.g. in a worker's worker_init_fn)", shown,
                     (long)h->pid, (long)getpid());
}

/* Under q_lock.  A retry (or a request sent on to S3's region) goes to
** the front of `now`: it has waited its turn. */
static void push_front(stoke__http *h, request *q) {
  q->next = h->now.head;
  h->now.head = q;
  if (!h->now.tail) h->now.tail = q;
}

static void push_back(struct rqueue *r, request *q) {
  q->next = NULL;
  if (r->tail) r->tail->next = q;
  else r->head = q;
  r->tail = q;
}

static request *pop_from(struct rqueue *r) {
  request *q = r->head;
  if (q) {
    r->head = q->next;
    if (!r->head) r->tail = NULL;
  }
  return q;
}

static bool any_pending(const stoke__http *h) {
  return h->now.head || h->ahead.head;
}

/* The next request to start: `now` first, every other one `ahead` when
** both wait. */
static request *pop_front(stoke__http *h) {
  if (h->now.head && h->ahead.head) {
    bool to_ahead = h->ahead_turn;
    h->ahead_turn = !h->ahead_turn;
    return pop_from(to_ahead ? &h->ahead : &h->now);
  }
  return pop_from(h->now.head ? &h->now : &h->ahead);
}

/* After an attempt ended with rc (attempt_end's): the request is done,
** waits in the timed queue for its retry (no thread sleeps, no slot is
** held), goes again at once to the region S3 named, or fails. */
static void after_attempt(stoke__http *h, request *q, int rc) {
  if (rc == 1 && q->attempt < h->o.max_attempts) {
    unsigned left = atomic_load(&h->budget);
    do {
      q->spent = left == 0;
    } while (!q->spent &&
             !atomic_compare_exchange_weak(&h->budget, &left, left - 1));
    if (!q->spent) {
      atomic_fetch_add(&h->retries, 1);
      uint64_t ms = backoff_ms(h, q->url, q->off, q->attempt);
      q->due_ns = stoke__now_ns() + (int64_t)ms * 1000000;
      pthread_mutex_lock(&h->q_lock);
      q->next = h->timed;
      h->timed = q;
      pthread_mutex_unlock(&h->q_lock);
      return;
    }
  }
  /* A bucket in another region: once, to where S3 said (a redirect, not
  ** a retry: the budget is not charged), and every later request of the
  ** bucket goes there first. */
  char moved_to[64];
  if (rc != 0 && !q->followed && wrong_region(q, &q->o, moved_to)) {
    q->followed = true;
    snprintf(q->region, sizeof q->region, "%s", moved_to);
    bucket_moved(h, q->bucket, q->region);
    int m = stoke__s3_http_url_in(h->s3, q->region, q->url, q->target_buf,
                                  sizeof q->target_buf, q->err, q->cap);
    if (m) {
      complete(h, q, m);
      return;
    }
    pthread_mutex_lock(&h->q_lock);
    push_front(h, q);
    pthread_mutex_unlock(&h->q_lock);
    return;
  }
  if (rc == 0) {
    complete(h, q, 0);
    return;
  }
  complete(h, q, fail(q, rc == 1 ? STOKE_EIO : rc, &q->o, q->attempt,
                      q->spent, q->err, q->cap));
}

/* The multi's connection limits follow io_concurrency: as many
** connections as requests in flight, to one host or in all, and as many
** kept alive for reuse. */
static void multi_limits(stoke__http *h, unsigned limit) {
  if (limit == h->multi_limit) return;
  curl_multi_setopt(h->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)limit);
  curl_multi_setopt(h->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)limit);
  curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)limit);
  h->multi_limit = limit;
}

/* At destroy: every request still queued, waiting or in flight fails. */
static void io_drain(stoke__http *h, request **active) {
  pthread_mutex_lock(&h->q_lock);
  /* Both queues as one list: `now`'s, then `ahead`'s. */
  if (h->now.tail) h->now.tail->next = h->ahead.head;
  request *rest = h->now.head ? h->now.head : h->ahead.head;
  request *timed = h->timed;
  h->now.head = h->now.tail = h->ahead.head = h->ahead.tail = NULL;
  h->timed = NULL;
  pthread_mutex_unlock(&h->q_lock);
  for (unsigned k = 0; k < STOKE_IO_CONCURRENCY_MAX; k++) {
    request *q = active[k];
    if (!q) continue;
    curl_multi_remove_handle(h->multi, q->c);
    curl_slist_free_all(q->headers);
    handle_give(h, q->c);
    q->c = NULL;
    active[k] = NULL;
    complete(h, q, closed(q));
  }
  h->in_flight = 0;
  for (request *l = rest; l;) {
    request *q = l;
    l = l->next;
    complete(h, q, closed(q));
  }
  for (request *l = timed; l;) {
    request *q = l;
    l = l->next;
    complete(h, q, closed(q));
  }
}

static void *io_main(void *user) {
  stoke__http *h = user;
  /* The requests in flight, by slot, for destroy (curl 7.88 cannot list
  ** a multi's handles); never more than STOKE_IO_CONCURRENCY_MAX. */
  request *active[STOKE_IO_CONCURRENCY_MAX] = {0};
  pthread_mutex_lock(&h->q_lock);
  while (!h->stopping) {
    /* Retries that are due go first: they have waited their turn. */
    int64_t now = stoke__now_ns(), next_due = INT64_MAX;
    for (request **pp = &h->timed; *pp;) {
      request *q = *pp;
      if (q->due_ns <= now) {
        *pp = q->next;
        push_front(h, q);
      } else {
        if (q->due_ns < next_due) next_due = q->due_ns;
        pp = &q->next;
      }
    }
    unsigned limit = atomic_load_explicit(&h->limit, memory_order_acquire);
    multi_limits(h, limit);
    while (h->in_flight < limit && any_pending(h)) {
      request *q = pop_front(h);
      pthread_mutex_unlock(&h->q_lock);
      int rc = attempt_start(h, q);
      if (rc) {
        char shown[SHOWN_CAP];
        stoke__url_redact(q->url, shown, sizeof shown);
        complete(h, q, stoke__errf(q->err, q->cap, rc, "GET %s: out of "
                                   "memory", shown));
      } else {
        unsigned k = 0;
        while (active[k]) k++; /* in_flight <= limit: a slot is free */
        active[k] = q;
      }
      pthread_mutex_lock(&h->q_lock);
    }
    pthread_mutex_unlock(&h->q_lock);

    int running = 0;
    curl_multi_perform(h->multi, &running);
    bool ended = false;
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(h->multi, &left))) {
      if (m->msg != CURLMSG_DONE) continue;
      /* m is freed by the handle's removal: read it first. */
      CURL *c = m->easy_handle;
      CURLcode code = m->data.result;
      request *q = NULL;
      curl_easy_getinfo(c, CURLINFO_PRIVATE, (char **)&q);
      for (unsigned k = 0; k < STOKE_IO_CONCURRENCY_MAX; k++)
        if (active[k] == q) active[k] = NULL;
      after_attempt(h, q, attempt_end(h, q, code));
      ended = true;
    }
    /* An attempt ended: a slot is free, or a retry was queued (with a
    ** due time not yet in next_due): look again at once. */
    int ms = 1000;
    if (ended) {
      ms = 0;
    } else if (next_due != INT64_MAX) {
      int64_t wait = (next_due - stoke__now_ns()) / 1000000 + 1;
      ms = wait < 0 ? 0 : wait > 1000 ? 1000 : (int)wait;
    }
    if (ms) curl_multi_poll(h->multi, NULL, 0, ms, NULL);
    pthread_mutex_lock(&h->q_lock);
  }
  pthread_mutex_unlock(&h->q_lock);
  io_drain(h, active);
  return NULL;
}

/* What libcurl is sent for q: its URL, or the http(s) URL of an s3:// one
** in its bucket's region. */
static int prepare(stoke__http *h, request *q, char *err, size_t cap) {
  q->err = err;
  q->cap = cap;
  q->target = q->url;
  q->s3 = stoke__url_is_s3(q->url);
  if (q->s3) {
    char shown[SHOWN_CAP];
    stoke__url_redact(q->url, shown, sizeof shown);
    if (!h->s3)
      return stoke__errf(err, cap, STOKE_EINVAL, "GET %s: no S3 settings "
                         "for an s3:// URL", shown);
    stoke__s3_bucket_of(q->url, q->bucket);
    bucket_region(h, q->bucket, q->region);
    int rc = stoke__s3_http_url_in(h->s3, q->region, q->url, q->target_buf,
                                   sizeof q->target_buf, err, cap);
    if (rc) return rc;
    q->target = q->target_buf;
  }
  return 0;
}

/* Submit q and wait for its result: the blocking calls below. */
static int perform(stoke__http *h, request *q, char *err, size_t cap) {
  if (getpid() != h->pid) return forked(h, q->url, err, cap);
  int rc = prepare(h, q, err, cap);
  if (rc) return rc;
  pthread_cond_init(&q->cv, NULL);
  pthread_mutex_lock(&h->q_lock);
  if (h->stopping) {
    pthread_mutex_unlock(&h->q_lock);
    pthread_cond_destroy(&q->cv);
    return closed(q);
  }
  h->users++;
  atomic_fetch_add(&h->waiting, 1);
  push_back(&h->now, q);
  pthread_mutex_unlock(&h->q_lock);
  curl_multi_wakeup(h->multi);
  pthread_mutex_lock(&h->q_lock);
  while (!q->done) pthread_cond_wait(&q->cv, &h->q_lock);
  atomic_fetch_sub(&h->waiting, 1);
  if (--h->users == 0 && h->stopping) pthread_cond_broadcast(&h->users_cv);
  pthread_mutex_unlock(&h->q_lock);
  pthread_cond_destroy(&q->cv);
  return q->rc;
}

int stoke__http_get_range_async(stoke__http *h, const char *url,
                                uint64_t off, size_t len, void *buf,
                                stoke__http_done_fn done, void *arg) {
  /* No I/O thread here: it would never be called back.  The caller (the
  ** read-ahead) then reads the sample itself, and that blocking read
  ** names the fork. */
  if (getpid() != h->pid) return STOKE_EINVAL;
  request *q = stoke__calloc(h->alloc, 1, sizeof *q);
  if (!q) return STOKE_ENOMEM;
  q->url = url;
  q->off = off;
  q->len = len;
  q->k.buf = buf;
  q->k.cap = len;
  q->done_fn = done;
  q->done_arg = arg;
  int rc = prepare(h, q, q->own_err, sizeof q->own_err);
  pthread_mutex_lock(&h->q_lock);
  if (rc == 0 && h->stopping) rc = STOKE_EIO;
  if (rc == 0) {
    atomic_fetch_add(&h->waiting, 1);
    push_back(&h->ahead, q);
  }
  pthread_mutex_unlock(&h->q_lock);
  if (rc) {
    stoke__free(h->alloc, q);
    return rc;
  }
  curl_multi_wakeup(h->multi);
  return 0;
}

/* A request of the caller's: on the heap, not the stack (about 11 KiB
** with its buffers), zeroed. */
static request *request_new(stoke__http *h, const char *url, uint64_t off,
                            uint64_t len, char *err, size_t cap) {
  request *q = stoke__calloc(h->alloc, 1, sizeof *q);
  if (!q) {
    stoke__errf(err, cap, STOKE_ENOMEM, "remote source: out of memory");
    return NULL;
  }
  q->url = url;
  q->off = off;
  q->len = len;
  return q;
}

int stoke__http_get_range(stoke__http *h, const char *url, uint64_t off,
                          size_t len, void *buf, uint64_t *total, char *err,
                          size_t cap) {
  /* The ETag variant's request, its tag left unread. */
  uint64_t t = 0;
  char etag[STOKE__HTTP_ETAG_CAP];
  int rc = stoke__http_get_range_etag(h, url, off, len, buf, &t, etag, err,
                                      cap);
  if (rc == 0 && total) *total = t;
  return rc;
}

int stoke__http_get_range_etag(stoke__http *h, const char *url,
                               uint64_t off, size_t len, void *buf,
                               uint64_t *total, char *etag, char *err,
                               size_t cap) {
  /* h may be destroyed once perform returns (its callers are told). */
  const stoke_allocator *a = h->alloc;
  request *q = request_new(h, url, off, len, err, cap);
  if (!q) return STOKE_ENOMEM;
  q->k.buf = buf;
  q->k.cap = len;
  int rc = perform(h, q, err, cap);
  if (rc == 0) *total = q->k.total;
  memcpy(etag, rc == 0 ? q->k.etag : "", rc == 0 ? sizeof q->k.etag : 1);
  stoke__free(a, q);
  return rc;
}

int stoke__http_get_file(stoke__http *h, const char *url,
                         const stoke__sys *sys, int fd, uint64_t max,
                         uint64_t *bytes, char *err, size_t cap) {
  const stoke_allocator *a = h->alloc;
  request *q = request_new(h, url, 0, 0, err, cap);
  if (!q) return STOKE_ENOMEM;
  q->k.sys = sys;
  q->k.fd = fd;
  q->k.cap = max;
  int rc = perform(h, q, err, cap);
  *bytes = rc == 0 ? q->k.got : 0;
  stoke__free(a, q);
  return rc;
}

int stoke__http_get_body(stoke__http *h, const char *url, void *buf,
                         size_t cap, size_t *n, char *err, size_t ecap) {
  const stoke_allocator *a = h->alloc;
  request *q = request_new(h, url, 0, 0, err, ecap);
  if (!q) return STOKE_ENOMEM;
  q->k.buf = buf;
  q->k.cap = cap;
  int rc = perform(h, q, err, ecap);
  *n = rc == 0 ? (size_t)q->k.got : 0;
  stoke__free(a, q);
  return rc;
}

/* ---- parallel fetches at open -------------------------------------------- */

typedef struct par {
  int (*fn)(size_t i, void *arg, char *e, size_t ecap);
  void *arg;
  size_t n;
  atomic_size_t next;
  atomic_int rc;
  char *err; /* written once, by the call whose result is kept */
  size_t cap;
} par;

static void *par_run(void *user) {
  par *p = user;
  for (;;) {
    if (atomic_load(&p->rc)) break;
    size_t i = atomic_fetch_add(&p->next, 1);
    if (i >= p->n) break;
    char e[STOKE__ERRMSG_CAP] = "";
    int rc = p->fn(i, p->arg, e, sizeof e);
    int zero = 0;
    /* Only the first failure wins the exchange, so only it writes err;
    ** the caller reads it after joining every thread. */
    if (rc && atomic_compare_exchange_strong(&p->rc, &zero, rc) && p->cap)
      snprintf(p->err, p->cap, "%s", e);
  }
  return NULL;
}

int stoke__http_parallel(const stoke__http *h, size_t n,
                         int (*fn)(size_t i, void *arg, char *e, size_t ecap),
                         void *arg, char *err, size_t cap) {
  par p = {fn, arg, n, 0, 0, err, cap};
  atomic_init(&p.next, 0);
  atomic_init(&p.rc, 0);
  enum { MAX_THREADS = 64 };
  pthread_t t[MAX_THREADS];
  unsigned limit = atomic_load_explicit(&((stoke__http *)h)->limit,
                                        memory_order_acquire);
  size_t want = STOKE__MIN((size_t)limit, n);
  if (want > MAX_THREADS) want = MAX_THREADS;
  size_t started = 0;
  for (; started + 1 < want; started++)
    if (pthread_create(&t[started], NULL, par_run, &p) != 0) break;
  par_run(&p); /* this thread too; with no thread started, it does all */
  for (size_t k = 0; k < started; k++) pthread_join(t[k], NULL);
  return atomic_load(&p.rc);
}
