/* test_util.h — shared helpers of the loader unit tests (header-only).
**
** Include after <cmocka.h>; the including file defines _POSIX_C_SOURCE
** before its first include.  Everything goes through include/stoke.h only.
**
**  - TU_RC / TU_OK: check a return code, printing both codes by name and the
**    relevant stoke_errmsg() on failure.
**  - tu_cb: a callback source whose fill writes, for sample i of epoch e,
**      "idx" i64 {}     = i
**      "rnd" i64 {2}    = the first two u64 of stoke_sample_rng(s)
**      "ep"  i64 {}     = e
**      "pat" u8  {16}   = tu_pat(i, e, j)  (a 16-byte field: alignment check)
**    counts fills per index, can fail one sample or make samples slow, and
**    records anything wrong seen inside the worker in `bad` (assertions
**    must not run on worker threads).
**  - tu_epoch / tu_run_epoch: run one epoch to STOKE_END, check each batch's
**    views (and the tu_cb fields against stoke_batch_indices) and record the
**    delivered indices and random values.
**  - tu_watchdog / tu_deadline: fail a hung binary fast, with a message.
**  - tu_cb_wait_*: wait for what a worker did on a condition, not a sleep;
**    tu_count_threads: a census of this process's threads.
*/
#ifndef STOKE_TEST_UTIL_H
#define STOKE_TEST_UTIL_H

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stoke.h"

/* ---- return codes --------------------------------------------------------- */

static inline const char *tu_code_name(int rc) {
  switch (rc) {
  case STOKE_OK: return "STOKE_OK";
  case STOKE_END: return "STOKE_END";
#define TU__NAME(name, value, text)                                           \
  case STOKE_E##name: return "STOKE_E" #name;
    STOKE_ERRNO_MAP(TU__NAME)
#undef TU__NAME
  default: return "?";
  }
}

/* Check that expr returns want; on failure show both codes and the message of
** loader l (NULL: the thread's last create error). */
#define TU_RC_L(l, expr, want)                                                \
  do {                                                                        \
    int tu_rc_ = (expr);                                                      \
    int tu_want_ = (want);                                                    \
    if (tu_rc_ != tu_want_)                                                   \
      fail_msg("%s: got %d %s, want %d %s (errmsg: \"%s\")", #expr, tu_rc_,   \
               tu_code_name(tu_rc_), tu_want_, tu_code_name(tu_want_),        \
               stoke_errmsg(l));                                              \
  } while (0)
#define TU_RC(expr, want) TU_RC_L(NULL, expr, want)
#define TU_OK(expr) TU_RC_L(NULL, expr, STOKE_OK)

/* assert with a printf message. */
#define TU_CHECK(cond, ...)                                                   \
  do {                                                                        \
    if (!(cond)) {                                                            \
      print_error("check failed: %s\n", #cond);                               \
      fail_msg(__VA_ARGS__);                                                  \
    }                                                                         \
  } while (0)

#define TU_CONTAINS(hay, needle)                                              \
  TU_CHECK(strstr((hay), (needle)) != NULL,                                   \
           "message \"%s\" does not contain \"%s\"", (hay), (needle))

/* ---- time ----------------------------------------------------------------- */

static inline int64_t tu_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void tu_sleep_ns(int64_t ns) {
  if (ns <= 0) return;
  struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* ---- the watchdog ----------------------------------------------------------
**
** Every unit test binary calls tu_watchdog(TU_WATCHDOG_S) first thing in
** main(): a hang then fails the binary within that time, with a message on
** stderr naming what hung, instead of costing CTest's 600 s timeout.  stdout
** becomes line-buffered so that cmocka's "[ RUN      ] test_name" line is
** out before a hang.  A test that can hang by design of what it checks
** (a deadlock it guards against) arms a tighter deadline naming itself with
** tu_deadline(__func__, s) and ends it with tu_deadline_end(). */

/* Seconds: about 50 times the slowest binary in a plain build (about 1 s).
** The sanitizers slow the slowest (test_transform) to 11 s (ASan) and 56 s
** (TSan) on a quiet 2-core machine, and a busy one (ctest -j2 beside other
** jobs, load 16) by as much again as 8 times: 56 s became 450 s, and a
** 400 s watchdog failed a binary that was only slow.  So under the
** sanitizers the watchdog is as long as it can be while still firing
** before CTest's 600 s timeout, which names nothing. */
#if defined(__SANITIZE_THREAD__)
#define TU_WATCHDOG_S 560
#elif defined(__SANITIZE_ADDRESS__)
#define TU_WATCHDOG_S 480
#else
#define TU_WATCHDOG_S 60
#endif

static const char *tu__watch_what = "the test binary";
static unsigned tu__watch_s;      /* the deadline's length, for the message */
static unsigned tu__binary_s;     /* the binary's */
static int64_t tu__binary_end_ns; /* the binary's deadline (monotonic) */

static inline size_t tu__put(char *buf, size_t at, size_t cap,
                             const char *s) {
  while (*s && at + 1 < cap) buf[at++] = *s++;
  return at;
}

/* Async-signal-safe: write(2) and _exit(2) only. */
static void tu__watchdog_fired(int sig) {
  (void)sig;
  char msg[512], num[16];
  size_t n = 0, k = 0;
  unsigned v = tu__watch_s;
  do num[k++] = (char)('0' + v % 10); while ((v /= 10) && k < sizeof num);
  n = tu__put(msg, n, sizeof msg, "\nwatchdog: ");
  n = tu__put(msg, n, sizeof msg, tu__watch_what);
  n = tu__put(msg, n, sizeof msg, " still running after ");
  while (k) msg[n++] = num[--k];
  n = tu__put(msg, n, sizeof msg, " s: it hangs (the last '[ RUN ]' line "
                                  "names the test); failing now\n");
  ssize_t w = write(2, msg, n);
  (void)w;
  _exit(1);
}

static inline void tu__arm(const char *what, unsigned seconds) {
  tu__watch_what = what;
  tu__watch_s = seconds;
  alarm(seconds);
}

static inline void tu_watchdog(unsigned seconds) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = tu__watchdog_fired;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, NULL);
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  tu__binary_s = seconds;
  tu__binary_end_ns =
      (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + (int64_t)seconds * 1000000000;
  tu__arm("the test binary", seconds);
}

/* A tighter deadline for one test (what: its name, static storage). */
static inline void tu_deadline(const char *what, unsigned seconds) {
  tu__arm(what, seconds);
}

/* Back to the binary's deadline (what is left of it). */
static inline void tu_deadline_end(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t left = tu__binary_end_ns -
                 ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
  unsigned s = left > 1000000000 ? (unsigned)(left / 1000000000) : 1;
  tu__arm("the test binary", s);
  tu__watch_s = tu__binary_s;
}

/* ---- threads -------------------------------------------------------------- */

/* Threads of this process whose name starts with prefix, from
** /proc/self/task; -1 where /proc does not say.  A loader's workers are
** joined by destroy, so none named stoke-w* may be left once it returns: a
** check that needs no waiting.  (Workers name themselves once running; a
** sanitizer may add threads of its own, so do not count them all.) */
static inline int tu_count_threads_now(const char *prefix) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    char path[64], name[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%.20s/comm", de->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue; /* the thread ended meanwhile */
    if (fgets(name, sizeof name, f) &&
        strncmp(name, prefix, strlen(prefix)) == 0)
      n++;
    fclose(f);
  }
  closedir(d);
  return n;
}

/* The census, allowing the kernel its bookkeeping: a thread that
** pthread_join has seen exit can stay listed in /proc/self/task for a
** moment, until the kernel releases it (seen under ASan on a loaded
** machine: 1 run in about 30).  A thread really left stays counted: the
** census is retried for up to a second, then its count is returned. */
static inline int tu_count_threads(const char *prefix) {
  int n = tu_count_threads_now(prefix);
  for (int tries = 0; n > 0 && tries < 200; tries++) {
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
    n = tu_count_threads_now(prefix);
  }
  return n;
}

/* ---- fields --------------------------------------------------------------- */

static inline stoke_field_desc tu_field(const char *name, int dtype, int ndim,
                                        const int64_t *shape) {
  stoke_field_desc d;
  memset(&d, 0, sizeof d);
  d.name = name;
  d.dtype = dtype;
  d.ndim = ndim;
  for (int i = 0; i < ndim && i < STOKE_MAX_DIMS; i++) d.shape[i] = shape[i];
  return d;
}

static inline size_t tu_field_bytes(const stoke_field_desc *d) {
  size_t n = stoke_dtype_size(d->dtype);
  for (int i = 0; i < d->ndim; i++) n *= (size_t)d->shape[i];
  return n;
}

/* ---- the callback source -------------------------------------------------- */

enum {
  TU_F_IDX = 0,
  TU_F_RND = 1,
  TU_F_EP = 2,
  TU_F_PAT = 3,
  TU_N_FIELDS = 4,
  TU_PAT_BYTES = 16
};

/* Bits of tu_cb.bad: what a worker saw that it should not have. */
enum {
  TU_BAD_FIELD_NULL = 1,   /* stoke_sample_field(s, f) NULL for a valid f */
  TU_BAD_ALIGN = 2,        /* a 16-byte field not 16-byte aligned */
  TU_BAD_FIELD_OOB = 4,    /* stoke_sample_field(s, n_fields) not NULL */
  TU_BAD_INDEX = 8,        /* index >= n_samples */
  TU_BAD_FAIL_RC = 16,     /* stoke_sample_fail did not return ESAMPLE */
  TU_BAD_RNG_NULL = 32     /* stoke_sample_rng returned NULL */
};

static inline uint8_t tu_pat(size_t i, uint64_t e, size_t j) {
  return (uint8_t)(i * 7u + e * 31u + j * 13u + 1u);
}

#define TU_CB_EPOCHS 64

typedef struct tu_cb {
  size_t n;                 /* samples */
  atomic_int *calls;        /* fills per (epoch, index): TU_CB_EPOCHS x n;
                               see tu_cb_calls, tu_cb_reset_calls */
  atomic_long n_calls;      /* all fills */
  atomic_int bad;           /* TU_BAD_* bits */
  atomic_int in_flight;     /* fills running now */
  atomic_int max_in_flight; /* most seen at once */
  /* Behaviour, set before the loader starts. */
  long fail_index;          /* -1: none; this sample fails */
  const uint8_t *fail_set;  /* NULL, or n flags: those samples fail too */
  const char *fail_cause;   /* its stoke_sample_fail text */
  int64_t sleep_ns;         /* samples sleep this long ... */
  size_t sleep_every;       /* ... every one (0/1) or those with i % it == 0 */
  long stuck_index;         /* -1: none; this sample waits for `unstick` */
  atomic_int stuck;         /* 1 while the stuck sample is waiting */
  atomic_int unstick;       /* set by the test (tu_cb_unstick) to let it
                               finish */
  int64_t stuck_max_ns;     /* it gives up waiting after this long */
  /* Synchronisation with the test: every fill and every change of `stuck`
  ** broadcasts cv under mu, so a test waits for "sample k has started" or
  ** "n fills of epoch e" on a condition, never by sleeping and looking. */
  pthread_mutex_t mu;
  pthread_cond_t cv;        /* CLOCK_MONOTONIC */
} tu_cb;

static inline tu_cb *tu_cb_new(size_t n) {
  tu_cb *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->n = n;
  c->calls = calloc(TU_CB_EPOCHS * (n ? n : 1), sizeof *c->calls);
  for (size_t i = 0; i < TU_CB_EPOCHS * n; i++) atomic_init(&c->calls[i], 0);
  atomic_init(&c->n_calls, 0);
  atomic_init(&c->bad, 0);
  atomic_init(&c->in_flight, 0);
  atomic_init(&c->max_in_flight, 0);
  atomic_init(&c->stuck, 0);
  atomic_init(&c->unstick, 0);
  c->fail_index = -1;
  c->fail_cause = "tu-injected-failure";
  c->stuck_index = -1;
  c->stuck_max_ns = 10 * 1000000000LL;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, &ca);
  pthread_condattr_destroy(&ca);
  return c;
}

static inline void tu_cb_free(tu_cb *c) {
  if (!c) return;
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  free(c->calls);
  free(c);
}

static inline struct timespec tu__deadline_ts(int64_t timeout_ns) {
  int64_t t = tu_now_ns() + timeout_ns;
  struct timespec ts = {(time_t)(t / 1000000000), (long)(t % 1000000000)};
  return ts;
}

/* Wake whoever waits on c (a fill finished, `stuck` changed). */
static inline void tu_cb_signal(tu_cb *c) {
  pthread_mutex_lock(&c->mu);
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* Let the stuck sample finish. */
static inline void tu_cb_unstick(tu_cb *c) {
  pthread_mutex_lock(&c->mu);
  atomic_store(&c->unstick, 1);
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* Wait until `stuck` equals want, at most timeout_ns; returns whether it
** does. */
static inline int tu_cb_wait_stuck(tu_cb *c, int want, int64_t timeout_ns) {
  struct timespec ts = tu__deadline_ts(timeout_ns);
  pthread_mutex_lock(&c->mu);
  while (atomic_load(&c->stuck) != want)
    if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) != 0) break;
  int ok = atomic_load(&c->stuck) == want;
  pthread_mutex_unlock(&c->mu);
  return ok;
}

/* Forget all fill counts; call when no fill can run (e.g. right after a
** loader is created: its workers wait for the first next()).  Counts are
** kept per epoch because workers may fill the next epoch's samples before
** the current one ends (stoke_config.prefetch_next_epoch). */
static inline void tu_cb_reset_calls(tu_cb *c) {
  for (size_t i = 0; i < TU_CB_EPOCHS * c->n; i++)
    atomic_store(&c->calls[i], 0);
  atomic_store(&c->max_in_flight, 0);
}

/* Fills of sample i for epoch e so far (epochs >= TU_CB_EPOCHS: not kept). */
static inline int tu_cb_calls(const tu_cb *c, uint64_t e, size_t i) {
  if (e >= TU_CB_EPOCHS || i >= c->n) return -1;
  return atomic_load(&c->calls[e * c->n + i]);
}

/* Fills of all samples for epoch e so far. */
static inline long tu_cb_epoch_calls(const tu_cb *c, uint64_t e) {
  long sum = 0;
  for (size_t i = 0; i < c->n; i++) sum += tu_cb_calls(c, e, i);
  return sum;
}

/* Wait until at least `want` fills of epoch e have run, at most timeout_ns;
** returns the count then. */
static inline long tu_cb_wait_epoch_calls(tu_cb *c, uint64_t e, long want,
                                          int64_t timeout_ns) {
  struct timespec ts = tu__deadline_ts(timeout_ns);
  pthread_mutex_lock(&c->mu);
  long got;
  while ((got = tu_cb_epoch_calls(c, e)) < want)
    if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) != 0) break;
  got = tu_cb_epoch_calls(c, e);
  pthread_mutex_unlock(&c->mu);
  return got;
}

static inline int tu_cb_fill(void *user, stoke_sample *s) {
  tu_cb *c = user;
  int now = atomic_fetch_add(&c->in_flight, 1) + 1;
  int seen = atomic_load(&c->max_in_flight);
  while (now > seen &&
         !atomic_compare_exchange_weak(&c->max_in_flight, &seen, now)) {
  }
  size_t i = stoke_sample_index(s);
  uint64_t e = stoke_sample_epoch(s);
  atomic_fetch_add(&c->n_calls, 1);
  int rc = 0;
  if (i >= c->n) {
    atomic_fetch_or(&c->bad, TU_BAD_INDEX);
    goto out;
  }
  if (e < TU_CB_EPOCHS) atomic_fetch_add(&c->calls[e * c->n + i], 1);
  tu_cb_signal(c);
  if (c->sleep_ns > 0 && (c->sleep_every <= 1 || i % c->sleep_every == 0))
    tu_sleep_ns(c->sleep_ns);
  if ((long)i == c->stuck_index) {
    struct timespec ts = tu__deadline_ts(c->stuck_max_ns);
    pthread_mutex_lock(&c->mu);
    atomic_store(&c->stuck, 1);
    pthread_cond_broadcast(&c->cv);
    while (!atomic_load(&c->unstick))
      if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) != 0) break;
    atomic_store(&c->stuck, 0);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
  }
  if ((long)i == c->fail_index || (c->fail_set && c->fail_set[i])) {
    rc = stoke_sample_fail(s, "%s (sample %zu)", c->fail_cause, i);
    if (rc != STOKE_ESAMPLE) atomic_fetch_or(&c->bad, TU_BAD_FAIL_RC);
    if (rc == 0) rc = -1;
    goto out;
  }
  int64_t *idx = stoke_sample_field(s, TU_F_IDX);
  int64_t *rnd = stoke_sample_field(s, TU_F_RND);
  int64_t *ep = stoke_sample_field(s, TU_F_EP);
  uint8_t *pat = stoke_sample_field(s, TU_F_PAT);
  stoke_rng *rng = stoke_sample_rng(s);
  if (!idx || !rnd || !ep || !pat) {
    atomic_fetch_or(&c->bad, TU_BAD_FIELD_NULL);
    goto out;
  }
  if (!rng) {
    atomic_fetch_or(&c->bad, TU_BAD_RNG_NULL);
    goto out;
  }
  if ((uintptr_t)pat % 16 != 0) atomic_fetch_or(&c->bad, TU_BAD_ALIGN);
  if (stoke_sample_field(s, TU_N_FIELDS) != NULL)
    atomic_fetch_or(&c->bad, TU_BAD_FIELD_OOB);
  *idx = (int64_t)i;
  uint64_t r0 = stoke_rng_u64(rng), r1 = stoke_rng_u64(rng);
  memcpy(&rnd[0], &r0, 8);
  memcpy(&rnd[1], &r1, 8);
  *ep = (int64_t)e;
  for (size_t j = 0; j < TU_PAT_BYTES; j++) pat[j] = tu_pat(i, e, j);
out:
  atomic_fetch_sub(&c->in_flight, 1);
  return rc;
}

static inline void tu_cb_fields(stoke_field_desc f[TU_N_FIELDS]) {
  static const int64_t two[1] = {2}, pat[1] = {TU_PAT_BYTES};
  f[TU_F_IDX] = tu_field("idx", STOKE_I64, 0, NULL);
  f[TU_F_RND] = tu_field("rnd", STOKE_I64, 1, two);
  f[TU_F_EP] = tu_field("ep", STOKE_I64, 0, NULL);
  f[TU_F_PAT] = tu_field("pat", STOKE_U8, 1, pat);
}

/* A callback source over c (c->n samples). */
static inline stoke_source *tu_cb_source(tu_cb *c) {
  stoke_field_desc f[TU_N_FIELDS];
  tu_cb_fields(f);
  stoke_source *src = NULL;
  int rc = stoke_source_create_callback(c->n, TU_N_FIELDS, f, tu_cb_fill, c,
                                        &src);
  if (rc != STOKE_OK || !src)
    fail_msg("stoke_source_create_callback: %d %s (%s)", rc, tu_code_name(rc),
             stoke_errmsg(NULL));
  return src;
}

/* An image source over path with transform (NULL: the default), or the
** test fails naming the library's message. */
static inline stoke_source *tu_open_images(const char *path,
                                           const char *transform) {
  stoke_image_config ic;
  stoke_image_config_init(&ic);
  if (transform) ic.transform = transform;
  stoke_source *src = NULL;
  int rc = stoke_source_create_images(path, &ic, &src);
  if (rc != 0) fail_msg("open %s: %s", path, stoke_errmsg(NULL));
  return src;
}

/* ---- loaders -------------------------------------------------------------- */

static inline stoke_config tu_config(stoke_source *src, unsigned workers,
                                     unsigned prefetch, size_t batch) {
  stoke_config c;
  stoke_config_init(&c);
  c.source = src;
  c.n_workers = workers;
  c.prefetch = prefetch;
  c.batch_size = batch;
  return c;
}

static inline stoke_loader *tu_loader(const stoke_config *cfg) {
  stoke_loader *l = NULL;
  int rc = stoke_loader_create(cfg, &l);
  if (rc != STOKE_OK || !l)
    fail_msg("stoke_loader_create: %d %s (%s)", rc, tu_code_name(rc),
             stoke_errmsg(NULL));
  return l;
}

/* l's stats now; a failure fails the test with l's errmsg.  The struct is
** poisoned first, so that a field the library leaves unwritten shows (as
** 0xee bytes) instead of passing as 0. */
static inline stoke_stats tu_stats(const stoke_loader *l) {
  stoke_stats st;
  memset(&st, 0xee, sizeof st);
  st.struct_size = sizeof st;
  TU_RC_L(l, stoke_loader_stats(l, &st), STOKE_OK);
  return st;
}

/* ---- epochs --------------------------------------------------------------- */

#define TU_MAX_SAMPLES 2048
#define TU_MAX_BATCHES 2048

/* One epoch as delivered, in delivery order. */
typedef struct tu_epoch {
  uint64_t epoch;          /* stoke_batch_epoch of its batches */
  size_t n_batches;
  size_t n_samples;
  size_t batch_size[TU_MAX_BATCHES];
  size_t batch_number[TU_MAX_BATCHES];
  size_t batch_off[TU_MAX_BATCHES]; /* first sample of the batch in idx[] */
  size_t idx[TU_MAX_SAMPLES];       /* stoke_batch_indices */
  uint64_t rnd[TU_MAX_SAMPLES][2];  /* tu_cb only */
} tu_epoch;

static inline tu_epoch *tu_epoch_new(void) {
  tu_epoch *e = calloc(1, sizeof *e);
  if (!e) fail_msg("out of memory");
  return e;
}

/* Check every view of b; with cb, also check the tu_cb fields against
** stoke_batch_indices (epoch `ep`).  Records into e when e is not NULL. */
static inline void tu_check_batch(stoke_batch *b, const tu_cb *cb,
                                  tu_epoch *e) {
  size_t n = stoke_batch_size(b);
  const size_t *ix = stoke_batch_indices(b);
  uint64_t ep = stoke_batch_epoch(b);
  TU_CHECK(n > 0, "empty batch %zu", stoke_batch_number(b));
  TU_CHECK(ix != NULL, "stoke_batch_indices is NULL");
  if (cb) {
    TU_CHECK(stoke_batch_n_fields(b) == TU_N_FIELDS, "n_fields %zu",
             stoke_batch_n_fields(b));
    stoke_tensor t[TU_N_FIELDS];
    stoke_field_desc d[TU_N_FIELDS];
    tu_cb_fields(d);
    for (size_t f = 0; f < TU_N_FIELDS; f++) {
      memset(&t[f], 0, sizeof t[f]);
      TU_OK(stoke_batch_field(b, f, &t[f]));
      TU_CHECK(t[f].name && strcmp(t[f].name, d[f].name) == 0,
               "field %zu name \"%s\", want \"%s\"", f,
               t[f].name ? t[f].name : "(null)", d[f].name);
      TU_CHECK(t[f].dtype == d[f].dtype, "field %zu dtype %d", f, t[f].dtype);
      TU_CHECK(t[f].ndim == d[f].ndim + 1, "field %zu ndim %d", f, t[f].ndim);
      TU_CHECK(t[f].shape[0] == (int64_t)n, "field %zu shape[0] %lld != %zu",
               f, (long long)t[f].shape[0], n);
      for (int k = 0; k < d[f].ndim; k++)
        TU_CHECK(t[f].shape[k + 1] == d[f].shape[k], "field %zu shape[%d]", f,
                 k + 1);
      TU_CHECK(t[f].n_bytes == n * tu_field_bytes(&d[f]),
               "field %zu n_bytes %zu, want %zu", f, t[f].n_bytes,
               n * tu_field_bytes(&d[f]));
      TU_CHECK(t[f].data != NULL, "field %zu data NULL", f);
    }
    stoke_tensor bad;
    TU_RC(stoke_batch_field(b, TU_N_FIELDS, &bad), STOKE_EINVAL);
    const int64_t *idx = t[TU_F_IDX].data;
    const int64_t *rnd = t[TU_F_RND].data;
    const int64_t *eps = t[TU_F_EP].data;
    const uint8_t *pat = t[TU_F_PAT].data;
    for (size_t k = 0; k < n; k++) {
      TU_CHECK(idx[k] == (int64_t)ix[k],
               "batch %zu sample %zu: field idx %lld, indices[] %zu",
               stoke_batch_number(b), k, (long long)idx[k], ix[k]);
      TU_CHECK(eps[k] == (int64_t)ep,
               "batch %zu sample %zu: filled for epoch %lld, batch epoch %llu",
               stoke_batch_number(b), k, (long long)eps[k],
               (unsigned long long)ep);
      for (size_t j = 0; j < TU_PAT_BYTES; j++)
        TU_CHECK(pat[k * TU_PAT_BYTES + j] == tu_pat(ix[k], ep, j),
                 "batch %zu sample %zu: pat byte %zu wrong",
                 stoke_batch_number(b), k, j);
      if (e && e->n_samples + k < TU_MAX_SAMPLES) {
        memcpy(&e->rnd[e->n_samples + k][0], &rnd[2 * k], 8);
        memcpy(&e->rnd[e->n_samples + k][1], &rnd[2 * k + 1], 8);
      }
    }
  }
  if (e) {
    TU_CHECK(e->n_batches < TU_MAX_BATCHES, "too many batches");
    TU_CHECK(e->n_samples + n <= TU_MAX_SAMPLES, "too many samples");
    if (e->n_batches == 0) e->epoch = ep;
    TU_CHECK(ep == e->epoch, "batch epoch %llu in epoch %llu",
             (unsigned long long)ep, (unsigned long long)e->epoch);
    e->batch_size[e->n_batches] = n;
    e->batch_number[e->n_batches] = stoke_batch_number(b);
    e->batch_off[e->n_batches] = e->n_samples;
    memcpy(&e->idx[e->n_samples], ix, n * sizeof *ix);
    e->n_batches++;
    e->n_samples += n;
  }
}

/* Run l until STOKE_END (or an error, returned), checking and recording every
** batch.  With in_order, batch numbers must be 0, 1, 2, ...  Returns the code
** that ended the epoch. */
static inline int tu_run_epoch(stoke_loader *l, const tu_cb *cb, tu_epoch *e,
                               int in_order) {
  memset(e, 0, sizeof *e);
  for (;;) {
    stoke_batch *b = NULL;
    int rc = stoke_loader_next(l, &b);
    if (rc != STOKE_OK) return rc;
    TU_CHECK(b != NULL, "next returned OK and a NULL batch");
    size_t before = e->n_batches;
    tu_check_batch(b, cb, e);
    if (in_order)
      TU_CHECK(e->batch_number[before] == before,
               "in-order batch %zu has number %zu", before,
               e->batch_number[before]);
    stoke_batch_release(b);
  }
}

/* Run one epoch and insist it ends with STOKE_END. */
static inline void tu_epoch_ok(stoke_loader *l, const tu_cb *cb, tu_epoch *e,
                               int in_order) {
  int rc = tu_run_epoch(l, cb, e, in_order);
  if (rc != STOKE_END)
    fail_msg("epoch ended with %d %s, want STOKE_END (errmsg: \"%s\")", rc,
             tu_code_name(rc), stoke_errmsg(l));
}

/* The bad-sample counters of l's statistics are exactly these. */
static inline void tu_expect_bad_counts(const stoke_loader *l,
                                        uint64_t failures,
                                        uint64_t quarantined, uint64_t skipped,
                                        uint64_t replaced) {
  stoke_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  TU_OK(stoke_loader_stats(l, &st));
  TU_CHECK(st.failures == failures && st.quarantined == quarantined &&
               st.skipped == skipped && st.replaced == replaced,
           "bad samples: %llu failures, %llu quarantined, %llu skipped, %llu "
           "replaced; want %llu, %llu, %llu, %llu",
           (unsigned long long)st.failures,
           (unsigned long long)st.quarantined,
           (unsigned long long)st.skipped, (unsigned long long)st.replaced,
           (unsigned long long)failures, (unsigned long long)quarantined,
           (unsigned long long)skipped, (unsigned long long)replaced);
}

/* A counting allocator: every pointer handed out must come back. */
typedef struct tu_alloc_count {
  atomic_long allocs, frees, live, live_bytes, peak_bytes;
} tu_alloc_count;

typedef struct tu__alloc_hdr {
  size_t n;
  size_t pad; /* keeps the user pointer 16-byte aligned */
} tu__alloc_hdr;

static inline void *tu_count_alloc(void *user, size_t n) {
  tu_alloc_count *c = user;
  tu__alloc_hdr *h = aligned_alloc(16, (sizeof *h + n + 15) / 16 * 16);
  if (!h) return NULL;
  h->n = n;
  atomic_fetch_add(&c->allocs, 1);
  atomic_fetch_add(&c->live, 1);
  long now = atomic_fetch_add(&c->live_bytes, (long)n) + (long)n;
  long peak = atomic_load(&c->peak_bytes);
  while (now > peak && !atomic_compare_exchange_weak(&c->peak_bytes, &peak, now)) {
  }
  return h + 1;
}

static inline void tu_count_free(void *user, void *p) {
  tu_alloc_count *c = user;
  if (!p) return;
  tu__alloc_hdr *h = (tu__alloc_hdr *)p - 1;
  atomic_fetch_add(&c->frees, 1);
  atomic_fetch_sub(&c->live, 1);
  atomic_fetch_sub(&c->live_bytes, (long)h->n);
  free(h);
}

/* ---- hand-made snapshots for the model and the advice ------------------ */

/* A snapshot of a loader with B = 8, `steps` steps, per-sample producer
** cost t_d (cpu_frac of it on a core), consumer step t_c, wait share w. */
static inline stoke_stats tu_snap(unsigned workers, unsigned prefetch, int64_t t_d,
                                   double cpu_frac, int64_t t_c, double wait_ratio,
                                   double empty) {
  stoke_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  st.steps = 100;
  st.samples = 800;
  st.n_workers = workers;
  st.prefetch = prefetch;
  st.wait_ratio = wait_ratio;
  st.queue_empty_frac = empty;
  st.compute.count = 100;
  st.compute.mean_ns = st.compute.p50_ns = t_c;
  st.compute.total_ns = 100 * t_c;
  int64_t wait_mean = (int64_t)((double)t_c * wait_ratio / (1 - wait_ratio));
  st.wait.count = 100;
  st.wait.mean_ns = st.wait.p50_ns = st.wait.p99_ns = wait_mean;
  st.wait.total_ns = 100 * wait_mean;
  stoke_dist *r = &st.stage[STOKE_STAGE_READ];
  r->count = 800;
  r->mean_ns = r->p50_ns = r->p95_ns = r->p99_ns = r->max_ns = t_d;
  r->total_ns = 800 * t_d;
  st.worker_busy_ns = 800 * t_d;
  st.worker_cpu_ns = (int64_t)(cpu_frac * (double)st.worker_busy_ns);
  st.chunks = 800;
  return st;
}

#endif /* STOKE_TEST_UTIL_H */
