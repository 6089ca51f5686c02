/* publish.c — the live view: snapshots of a loader's (or a two-clock's)
** statistics in a shared-memory file, for `stoke top`.
**
** DESIGN
** Threads: the publisher's own (stoke-pub) wakes every
** STOKE_LIVE_PERIOD_MS, asks its owner for the statistics (the owner's
** stats calls are safe from any thread) and writes them into the file;
** the loader's consumer and workers do nothing for it, so a step costs
** nothing more when publishing is on.  Readers are other processes
** (`stoke top`) or any thread.
** The file: a header (magic, version, sizes, the writer's pid and start
** time, the sequence number) and the payload, a stoke_live and its CRC-32,
** as 64-bit words.  The sequence lock: the writer makes the number odd,
** writes the words, makes it even again; a reader copies the words between
** two reads of the number and keeps the copy only when both are the same
** even number, else it retries.  Every word is a relaxed atomic, so a
** reader racing the writer is not undefined behaviour, only a copy it
** throws away; the fences order the words against the number.
** Lifetime: stop joins the thread and removes the file; a killed process's
** file stays until a reader finds its pid gone or reused (stoke_live_list)
** and removes it. */
#define _GNU_SOURCE
#include "stats/publish.h"

#include "os/os.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LIVE_MAGIC 0x4c4b5453u /* "STKL" */
/* Up when the header or stoke_live changes shape. */
#define LIVE_VERSION 1u

#define PAYLOAD_WORDS ((sizeof(stoke_live) + 7) / 8)
#define FILE_WORDS (PAYLOAD_WORDS + 1) /* + the CRC's word */

typedef struct live_header {
  atomic_uint_least32_t magic; /* LIVE_MAGIC once the header is whole */
  uint32_t version;
  uint32_t header_bytes;       /* sizeof(live_header) */
  uint32_t payload_bytes;      /* sizeof(stoke_live) */
  int64_t pid;
  uint64_t start_ticks;        /* the pid's start (/proc/PID/stat) */
  atomic_uint_least64_t seq;   /* odd while the words are written */
} live_header;

typedef struct live_file {
  live_header h;
  atomic_uint_least64_t word[FILE_WORDS];
} live_file;

bool stoke__publish_wanted(int publish) {
  if (publish == STOKE_PUBLISH_ON) return true;
  if (publish != STOKE_PUBLISH_DEFAULT) return false;
  const char *e = getenv("STOKE_PUBLISH");
  /* Off unless asked for: bench/publish.sh measures what it costs. */
  return e && strcmp(e, "1") == 0;
}

size_t stoke__live_file_bytes(void) { return sizeof(live_file); }

void stoke__live_file_init(void *map, long pid, uint64_t start_ticks) {
  live_file *f = map;
  f->h.version = LIVE_VERSION;
  f->h.header_bytes = sizeof f->h;
  f->h.payload_bytes = sizeof(stoke_live);
  f->h.pid = pid;
  f->h.start_ticks = start_ticks;
  atomic_store_explicit(&f->h.seq, 0, memory_order_relaxed);
  /* Release: a reader that sees the magic sees the fields above. */
  atomic_store_explicit(&f->h.magic, LIVE_MAGIC, memory_order_release);
}

void stoke__live_write_begin(void *map) {
  live_file *f = map;
  uint64_t seq = atomic_load_explicit(&f->h.seq, memory_order_relaxed);
  atomic_store_explicit(&f->h.seq, seq + 1, memory_order_relaxed);
  /* The odd number is seen before any word changes: finish stores each
  ** word with release and the reader loads each with acquire (no fence:
  ** gcc's TSan does not support atomic_thread_fence, -Wtsan). */
}

void stoke__live_write_finish(void *map, const stoke_live *s, uint64_t *buf) {
  live_file *f = map;
  buf[PAYLOAD_WORDS - 1] = 0; /* the padding after the struct, if any */
  memcpy(buf, s, sizeof *s);
  buf[PAYLOAD_WORDS] = stoke__crc32(0, buf, PAYLOAD_WORDS * 8);
  for (size_t i = 0; i < FILE_WORDS; i++)
    atomic_store_explicit(&f->word[i], buf[i], memory_order_release);
  /* Release: the words are seen before the even number. */
  uint64_t seq = atomic_load_explicit(&f->h.seq, memory_order_relaxed);
  atomic_store_explicit(&f->h.seq, seq + 1, memory_order_release);
}

void stoke__live_write(void *map, const stoke_live *s, uint64_t *buf) {
  stoke__live_write_begin(map);
  stoke__live_write_finish(map, s, buf);
}

static bool header_ok(const live_file *f, size_t bytes) {
  if (bytes < sizeof *f) return false;
  /* Acquire: pairs with the magic's release in stoke__live_file_init. */
  uint32_t magic = atomic_load_explicit(
      &((live_file *)f)->h.magic, memory_order_acquire);
  return magic == LIVE_MAGIC && f->h.version == LIVE_VERSION &&
         f->h.header_bytes == sizeof f->h &&
         f->h.payload_bytes == sizeof(stoke_live);
}

int stoke__live_owner(const void *map, size_t bytes, long *pid,
                      uint64_t *start_ticks) {
  const live_file *f = map;
  if (!header_ok(f, bytes)) return EINVAL;
  *pid = (long)f->h.pid;
  *start_ticks = f->h.start_ticks;
  return 0;
}

int stoke__live_read(const void *map, size_t bytes, stoke_live *out) {
  live_file *f = (live_file *)map;
  if (!header_ok(f, bytes)) return EINVAL;
  uint64_t buf[FILE_WORDS];
  /* A write takes microseconds every 200 ms, but on a loaded machine the
  ** writer can lose its core half way for a scheduler slice or more: a
  ** reader that gave up after a fixed number of yields then missed a
  ** living loader (`stoke top PID` said "publishes no loader" beside CPU
  ** hogs).  So the reader waits by time: yields first, then short sleeps,
  ** for up to STOKE__LIVE_READ_WAIT_NS; only a writer stopped half way
  ** (killed, or frozen by a debugger) outlasts that. */
  int64_t deadline = 0;
  for (unsigned tries = 0;; tries++) {
    if (tries >= 64) {
      int64_t now = stoke__now_ns();
      if (deadline == 0) deadline = now + STOKE__LIVE_READ_WAIT_NS;
      else if (now >= deadline) return EAGAIN;
      struct timespec nap = {0, 200 * 1000};
      nanosleep(&nap, NULL);
    }
    uint64_t s1 = atomic_load_explicit(&f->h.seq, memory_order_acquire);
    if (s1 == 0) return EAGAIN; /* nothing written yet */
    if (s1 & 1) {
      sched_yield();
      continue;
    }
    /* Acquire: each word is read before the number is read again, and a
    ** word of a write in progress brings that write's odd number with it
    ** (its release store); no fence, which gcc's TSan does not support. */
    for (size_t i = 0; i < FILE_WORDS; i++)
      buf[i] = atomic_load_explicit(&f->word[i], memory_order_acquire);
    uint64_t s2 = atomic_load_explicit(&f->h.seq, memory_order_relaxed);
    if (s1 != s2) continue;
    if (buf[PAYLOAD_WORDS] != stoke__crc32(0, buf, PAYLOAD_WORDS * 8))
      return EINVAL;
    memcpy(out, buf, sizeof *out);
    return 0;
  }
}

void stoke__live_rebin(const stoke_hist_bucket *b, size_t n,
                       uint64_t out[STOKE_LIVE_HIST]) {
  memset(out, 0, STOKE_LIVE_HIST * sizeof *out);
  for (size_t i = 0; i < n; i++) {
    double mid_us = ((double)b[i].lo_ns + (double)b[i].hi_ns) / 2 / 1000.0;
    int k = mid_us <= 1 ? 0 : (int)floor(4 * log2(mid_us));
    if (k >= STOKE_LIVE_HIST) k = STOKE_LIVE_HIST - 1;
    out[k] += b[i].count;
  }
}

/* ---- the publisher ------------------------------------------------------- */

struct stoke__publisher {
  const stoke_allocator *alloc;
  stoke__live_fill_fn fill;
  void *ctx;
  void *map;                 /* the file, mapped */
  char path[512];
  stoke_live snap;           /* the publisher thread's */
  uint64_t buf[FILE_WORDS];  /* the publisher thread's */
  stoke_hist_bucket *scratch;/* STOKE__HIST_BUCKETS of them */
  pthread_mutex_t mu;
  pthread_cond_t cv;         /* signalled by stop */
  bool stop;                 /* protected by mu */
  stoke__thread *thread;
};

static void publish_once(stoke__publisher *p) {
  stoke_live *s = &p->snap;
  memset(&s->stats, 0, sizeof s->stats);
  s->stats.struct_size = sizeof s->stats;
  s->n_autotune = 0;
  s->n_events = 0;
  memset(s->events, 0, sizeof s->events);
  p->fill(p->ctx, s, p->scratch, STOKE__HIST_BUCKETS);
  s->time_ns = stoke__now_ns();
  s->publishes++;
  stoke__live_write(p->map, s, p->buf);
}

static void *publisher_main(void *arg) {
  stoke__publisher *p = arg;
  pthread_mutex_lock(&p->mu);
  while (!p->stop) {
    pthread_mutex_unlock(&p->mu);
    publish_once(p);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += STOKE_LIVE_PERIOD_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&p->mu);
    while (!p->stop &&
           pthread_cond_timedwait(&p->cv, &p->mu, &until) != ETIMEDOUT) {
    }
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* Make PID-ID.live with the first free id.  A file of ours from a process
** that had our pid before (a reused pid) is removed and its name taken. */
static int create_file(stoke__publisher *p, const char *dir, long pid,
                       uint64_t start, unsigned *id) {
  size_t bytes = stoke__live_file_bytes();
  for (unsigned i = 0; i < 1024; i++) {
    snprintf(p->path, sizeof p->path, "%s/%ld-%u.live", dir, pid, i);
    int err = stoke__shm_create(p->path, bytes, &p->map);
    if (err == 0) {
      *id = i;
      return 0;
    }
    if (err != EEXIST) return err;
    const void *old;
    size_t old_bytes;
    long old_pid;
    uint64_t old_start;
    if (stoke__shm_open_read(p->path, 0, &old, &old_bytes) != 0) continue;
    bool stale = stoke__live_owner(old, old_bytes, &old_pid, &old_start) == 0 &&
                 old_pid == pid && old_start != start;
    stoke__shm_unmap(old, old_bytes);
    if (stale && unlink(p->path) == 0) i--; /* the same id again */
  }
  return EEXIST;
}

stoke__publisher *stoke__publisher_start(const stoke_allocator *a, int kind,
                                         stoke__live_fill_fn fill,
                                         void *ctx) {
  char dir[400];
  uint64_t start = 0;
  long pid = (long)getpid();
  if (stoke__live_dir(dir, sizeof dir, true) != 0 ||
      stoke__proc_start_ticks(pid, &start) != 0)
    return NULL;
  stoke__publisher *p = stoke__calloc(a, 1, sizeof *p);
  if (!p) return NULL;
  p->alloc = a;
  p->fill = fill;
  p->ctx = ctx;
  p->scratch = stoke__calloc(a, STOKE__HIST_BUCKETS, sizeof *p->scratch);
  unsigned id = 0;
  if (!p->scratch || create_file(p, dir, pid, start, &id) != 0) {
    stoke__free(a, p->scratch);
    stoke__free(a, p);
    return NULL;
  }
  p->snap.struct_size = sizeof p->snap;
  p->snap.kind = kind;
  p->snap.pid = (int)pid;
  p->snap.id = id;
  p->snap.created_ns = stoke__now_ns();
  stoke__proc_cmdline(p->snap.command, sizeof p->snap.command);
  stoke__live_file_init(p->map, pid, start);
  pthread_condattr_t ca;
  bool sync = pthread_condattr_init(&ca) == 0;
  if (sync) {
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    sync = pthread_mutex_init(&p->mu, NULL) == 0;
    if (sync && pthread_cond_init(&p->cv, &ca) != 0) {
      pthread_mutex_destroy(&p->mu);
      sync = false;
    }
    pthread_condattr_destroy(&ca);
  }
  if (!sync || stoke__thread_start(&p->thread, a, NULL, "stoke-pub",
                                   publisher_main, p) != 0) {
    if (sync) {
      pthread_cond_destroy(&p->cv);
      pthread_mutex_destroy(&p->mu);
    }
    unlink(p->path);
    stoke__shm_unmap(p->map, stoke__live_file_bytes());
    stoke__free(a, p->scratch);
    stoke__free(a, p);
    return NULL;
  }
  return p;
}

void stoke__publisher_stop(stoke__publisher *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
  stoke__thread_join(p->thread, p->alloc);
  /* The name first: a reader listing now no longer finds it. */
  unlink(p->path);
  stoke__shm_unmap(p->map, stoke__live_file_bytes());
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  stoke__free(p->alloc, p->scratch);
  stoke__free(p->alloc, p);
}

/* ---- the readers (the public stoke_live_* calls) ------------------------- */

const char *stoke_live_kind_name(int kind) {
  switch (kind) {
  case STOKE_LIVE_LOADER: return "loader";
  case STOKE_LIVE_TWOCLOCK: return "twoclock";
  default: return "?";
  }
}

int stoke_live_dir(char *buf, size_t cap, int create) {
  if (!buf) return stoke__set_tls_error(STOKE_EINVAL, "live: buf is NULL");
  return stoke__live_dir(buf, cap, create != 0);
}

/* Read one file: 0 with *out, or nonzero to skip it (removing it when its
** process is gone or its pid was reused). */
static int read_one(const char *path, long name_pid, stoke_live *out) {
  const void *map;
  size_t bytes;
  if (stoke__shm_open_read(path, 0, &map, &bytes) != 0) return -1;
  long pid = name_pid;
  uint64_t start = 0, now = 0;
  int own = stoke__live_owner(map, bytes, &pid, &start);
  int alive = stoke__proc_start_ticks(pid, &now);
  int rc = -1;
  if (alive == ESRCH || (own == 0 && alive == 0 && now != start) ||
      (own == 0 && pid != name_pid)) {
    /* Gone or reused (or a file renamed under another pid): stale. */
    unlink(path);
  } else if (own == 0 && stoke__live_read(map, bytes, out) == 0) {
    out->struct_size = sizeof *out;
    rc = 0;
  }
  stoke__shm_unmap(map, bytes);
  return rc;
}

static int by_pid_id(const void *a, const void *b) {
  const stoke__live_name *x = a, *y = b;
  if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

size_t stoke_live_list(int pid, stoke_live *out, size_t cap) {
  char dir[400];
  if (stoke__live_dir(dir, sizeof dir, false) != 0) return 0;
  enum { MAX_FILES = 4096 };
  stoke__live_name *names = calloc(MAX_FILES, sizeof *names);
  if (!names) return 0;
  int n = stoke__live_scan(dir, names, MAX_FILES);
  if (n > MAX_FILES) n = MAX_FILES;
  if (n > 0) qsort(names, (size_t)n, sizeof *names, by_pid_id);
  size_t got = 0;
  for (int i = 0; i < n && got < cap; i++) {
    if (pid > 0 && names[i].pid != pid) continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%ld-%u.live", dir, names[i].pid,
             names[i].id);
    if (read_one(path, names[i].pid, &out[got]) == 0) got++;
  }
  free(names);
  return got;
}
