/* prefetch.c — remote read-ahead (prefetch.h): a list of runs under one
** mutex, each run submitted to the client without waiting (its I/O thread
** calls back when it landed), readers waiting for runs in flight.  No
** thread of the prefetcher's own blocks in a transfer. */
#define _POSIX_C_SOURCE 200809L
#include "storage/prefetch.h"

#include <pthread.h>
#include <string.h>

enum { RUN_QUEUED, RUN_FETCHING, RUN_DONE, RUN_FAILED };

typedef struct run {
  struct run *next;  /* the list, oldest first */
  stoke__prefetch *p;  /* its prefetcher, for the landing callback */
  const char *url;   /* borrowed */
  uint32_t shard;
  uint64_t off, len;
  uint64_t payload;  /* the samples' bytes in it */
  uint64_t taken;    /* bytes taken by readers */
  unsigned uses;     /* requests for it: freed when uses x payload bytes
                        are taken (the next epoch may ask for a block
                        this one still reads) */
  uint8_t *buf;      /* owned, len bytes */
  int state;
  int waiters;       /* readers waiting on it: not freed under them */
} run;

#define MAX_IN_FLIGHT 64

struct stoke__prefetch {
  stoke__http *http;
  const stoke_allocator *alloc;
  uint64_t max_bytes;
  pthread_mutex_t mu;
  pthread_cond_t landed;  /* a run was fetched or failed */
  run *head;
  uint64_t bytes;         /* buffered: the runs' len */
  bool stop;
  unsigned max_in_flight; /* runs submitted at once, at most (the create's
                             threads); the client's limit now, if lower */
  unsigned in_flight;
  uint64_t runs, served;
};

static void run_free(stoke__prefetch *p, run **link) {
  run *r = *link;
  *link = r->next;
  p->bytes -= r->len;
  stoke__free(p->alloc, r->buf);
  stoke__free(p->alloc, r);
}

static void submit_queued(stoke__prefetch *p);

/* From the client's I/O thread: a run landed or failed. */
static void landed(void *arg, int rc) {
  run *r = arg;
  stoke__prefetch *p = r->p;
  pthread_mutex_lock(&p->mu);
  r->state = rc == 0 ? RUN_DONE : RUN_FAILED;
  if (rc == 0) p->runs++;
  p->in_flight--;
  if (!p->stop) submit_queued(p);
  pthread_cond_broadcast(&p->landed);
  pthread_mutex_unlock(&p->mu);
}

/* Under mu: queued runs submitted, oldest first, while fewer than
** max_in_flight are (the client bounds what is on the wire; this bound
** leaves room in its queue for the readers' own reads). */
static void submit_queued(stoke__prefetch *p) {
  /* The client's limit is read each time: the live autotuner moves it
  ** (io_autotuner.c), and the runs follow. */
  unsigned most = STOKE__MIN(p->max_in_flight,
                             STOKE__MAX(stoke__http_io_concurrency(p->http), 1u));
  for (run *r = p->head; r && p->in_flight < most; r = r->next) {
    if (r->state != RUN_QUEUED) continue;
    r->state = RUN_FETCHING;
    p->in_flight++;
    if (stoke__http_get_range_async(p->http, r->url, r->off, (size_t)r->len,
                                    r->buf, landed, r) != 0) {
      r->state = RUN_FAILED; /* the reader reads it itself, and reports */
      p->in_flight--;
    }
  }
}

int stoke__prefetch_create(stoke__http *h, unsigned threads,
                           uint64_t max_bytes, const stoke_allocator *a,
                           stoke__prefetch **out) {
  *out = NULL;
  stoke__prefetch *p = stoke__calloc(a, 1, sizeof *p);
  if (!p) return STOKE_ENOMEM;
  p->http = h;
  p->alloc = a;
  p->max_bytes = max_bytes;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->landed, NULL);
  if (threads > MAX_IN_FLIGHT) threads = MAX_IN_FLIGHT;
  p->max_in_flight = threads ? threads : 1;
  *out = p;
  return 0;
}

void stoke__prefetch_destroy(stoke__prefetch *p) {
  if (!p) return;
  /* Runs in flight land (the client calls back) before their buffers go;
  ** queued ones are never submitted. */
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  while (p->in_flight) pthread_cond_wait(&p->landed, &p->mu);
  pthread_mutex_unlock(&p->mu);
  while (p->head) run_free(p, &p->head);
  pthread_cond_destroy(&p->landed);
  pthread_mutex_destroy(&p->mu);
  stoke__free(p->alloc, p);
}

/* Make room for len bytes by freeing fetched runs nobody waits on, oldest
** first; false when there is still no room. */
static bool make_room(stoke__prefetch *p, uint64_t len) {
  for (run **link = &p->head; *link && p->bytes + len > p->max_bytes;) {
    run *r = *link;
    if ((r->state == RUN_DONE || r->state == RUN_FAILED) && !r->waiters)
      run_free(p, link);
    else
      link = &r->next;
  }
  return p->bytes + len <= p->max_bytes;
}

void stoke__prefetch_request(stoke__prefetch *p, const char *url,
                             uint32_t shard, uint64_t off, uint64_t len,
                             uint64_t payload) {
  if (len == 0 || len > p->max_bytes || len > SIZE_MAX) return;
  pthread_mutex_lock(&p->mu);
  run **tail = &p->head;
  for (run *r = p->head; r; r = r->next) {
    if (r->shard == shard && r->off < off + len && off < r->off + r->len) {
      /* Asked for already: the same run once more is one more use of
      ** it; another overlap is dropped. */
      if (r->off == off && r->len == len && r->state != RUN_FAILED)
        r->uses++;
      pthread_mutex_unlock(&p->mu);
      return;
    }
    tail = &r->next;
  }
  run *r = NULL;
  if (make_room(p, len)) {
    for (tail = &p->head; *tail;) tail = &(*tail)->next; /* room moved it */
    r = stoke__calloc(p->alloc, 1, sizeof *r);
    if (r && !(r->buf = stoke__alloc(p->alloc, (size_t)len))) {
      stoke__free(p->alloc, r);
      r = NULL;
    }
  }
  if (r) {
    r->p = p;
    r->url = url;
    r->shard = shard;
    r->off = off;
    r->len = len;
    r->payload = payload;
    r->uses = 1;
    r->state = RUN_QUEUED;
    *tail = r;
    p->bytes += len;
    if (!p->stop) submit_queued(p);
  }
  pthread_mutex_unlock(&p->mu);
}

bool stoke__prefetch_take(stoke__prefetch *p, uint32_t shard, uint64_t off,
                          uint64_t len, void *dst) {
  bool copied = false;
  pthread_mutex_lock(&p->mu);
  run **link = &p->head;
  while (*link && !((*link)->shard == shard && (*link)->off <= off &&
                    off + len <= (*link)->off + (*link)->len))
    link = &(*link)->next;
  run *r = *link;
  if (r) {
    r->waiters++;
    while (r->state == RUN_QUEUED || r->state == RUN_FETCHING)
      pthread_cond_wait(&p->landed, &p->mu);
    r->waiters--;
    if (r->state == RUN_DONE) {
      memcpy(dst, r->buf + (off - r->off), (size_t)len);
      copied = true;
      p->served++;
      r->taken += len;
    }
    /* The list may have changed while waiting: find r's link again. */
    for (link = &p->head; *link != r;) link = &(*link)->next;
    if (!r->waiters &&
        (r->state == RUN_FAILED || r->taken >= r->uses * r->payload))
      run_free(p, link);
  }
  pthread_mutex_unlock(&p->mu);
  return copied;
}

void stoke__prefetch_counts(stoke__prefetch *p, uint64_t *runs,
                            uint64_t *served) {
  pthread_mutex_lock(&p->mu);
  *runs = p->runs;
  *served = p->served;
  pthread_mutex_unlock(&p->mu);
}
