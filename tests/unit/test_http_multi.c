/* test_http_multi.c — the client's I/O thread (storage/http.c): requests in
** flight bounded by io_concurrency whatever the number of threads asking,
** the limit moved at run time, a retry's backoff holding up no other
** request, and destroy with requests queued and in flight; and the
** read-ahead's runs (storage/prefetch.h) asked for twice, kept for both.
**
** The server runs in this process, one thread per connection, and counts
** the requests it is answering at once (the client cannot fake that
** number).  No assertion reads a clock: an overlap the test needs is made
** by holding answers until enough requests arrived (or a long guard
** passes), and an order by holding one answer until another was served. */
#define _POSIX_C_SOURCE 200809L
#include "storage/http.h"
#include "storage/prefetch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

/* ---- a counting server --------------------------------------------------- */

#define MAX_CONN 256
#define MAX_LOG 64
#define GUARD_S 10 /* a hold's end when what it waits for never comes */

static const char BODY[] = "0123456789abcdef";

typedef struct server {
  int fd, port;
  pthread_t accepter;
  pthread_t conn[MAX_CONN];
  size_t n_conn;
  pthread_mutex_t lock;
  pthread_cond_t cv;
  int active, max_active; /* requests being answered at once, and the most */
  int hold_until;         /* /hold/: answer once this many are active */
  int hold_ms;            /* ... or after this long */
  bool released;          /* /gate/: answer once set */
  int fails_left;         /* /503/: answers 503 while > 0 */
  int b_served;           /* /b/ answered */
  char log[MAX_LOG][32];  /* paths in order of arrival */
  size_t n_log;
} server;

static void deadline_in(struct timespec *ts, int ms) {
  clock_gettime(CLOCK_REALTIME, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

static void write_all(int c, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(c, p, n);
    if (w <= 0) return;
    p += w;
    n -= (size_t)w;
  }
}

typedef struct conn_arg {
  server *s;
  int fd;
} conn_arg;

static void *conn_main(void *user) {
  conn_arg *ca = user;
  server *s = ca->s;
  int c = ca->fd;
  free(ca);
  char req[2048];
  size_t got = 0;
  while (got + 1 < sizeof req) {
    ssize_t r = read(c, req + got, sizeof req - 1 - got);
    if (r <= 0) break;
    got += (size_t)r;
    req[got] = 0;
    if (strstr(req, "\r\n\r\n")) break;
  }
  req[got] = 0;
  char path[32] = "";
  sscanf(req, "GET %31s", path);
  bool fail503 = false;
  pthread_mutex_lock(&s->lock);
  if (s->n_log < MAX_LOG) snprintf(s->log[s->n_log++], 32, "%s", path);
  s->active++;
  if (s->active > s->max_active) s->max_active = s->active;
  pthread_cond_broadcast(&s->cv);
  struct timespec ts;
  if (!strncmp(path, "/hold/", 6)) {
    deadline_in(&ts, s->hold_ms);
    /* Until hold_until were answered at once in this burst (max_active
    ** is reset between bursts): then the stragglers go at once. */
    while (s->max_active < s->hold_until &&
           pthread_cond_timedwait(&s->cv, &s->lock, &ts) != ETIMEDOUT) {
    }
  } else if (!strncmp(path, "/gate/", 6)) {
    deadline_in(&ts, GUARD_S * 1000);
    while (!s->released &&
           pthread_cond_timedwait(&s->cv, &s->lock, &ts) != ETIMEDOUT) {
    }
  } else if (!strncmp(path, "/503/", 5)) {
    fail503 = s->fails_left > 0;
    if (fail503) {
      s->fails_left--;
    } else {
      /* The retry waits for /b/: were the retry's backoff holding the
      ** only slot, /b/ could not start, and the order shows it. */
      deadline_in(&ts, GUARD_S * 1000);
      while (!s->b_served &&
             pthread_cond_timedwait(&s->cv, &s->lock, &ts) != ETIMEDOUT) {
      }
    }
  }
  /* No longer counted before the answer leaves: a client that has its
  ** answer never sees its request still counted. */
  s->active--;
  pthread_mutex_unlock(&s->lock);
  char head[256];
  if (fail503) {
    snprintf(head, sizeof head, "HTTP/1.1 503 Service Unavailable\r\n"
             "Content-Length: 0\r\nConnection: close\r\n\r\n");
    write_all(c, head, strlen(head));
  } else {
    snprintf(head, sizeof head, "HTTP/1.1 206 Partial Content\r\n"
             "Content-Range: bytes 0-3/16\r\nContent-Length: 4\r\n"
             "Connection: close\r\n\r\n");
    write_all(c, head, strlen(head));
    write_all(c, BODY, 4);
  }
  if (!strncmp(path, "/b/", 3)) {
    pthread_mutex_lock(&s->lock);
    s->b_served++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->lock);
  }
  close(c);
  return NULL;
}

static void *accept_main(void *user) {
  server *s = user;
  for (;;) {
    int c = accept(s->fd, NULL, NULL);
    if (c < 0) break;
    conn_arg *ca = malloc(sizeof *ca);
    assert_non_null(ca);
    ca->s = s;
    ca->fd = c;
    pthread_mutex_lock(&s->lock);
    bool room = s->n_conn < MAX_CONN;
    if (room && pthread_create(&s->conn[s->n_conn], NULL, conn_main, ca) == 0)
      s->n_conn++;
    else
      room = false;
    pthread_mutex_unlock(&s->lock);
    if (!room) {
      free(ca);
      close(c);
    }
  }
  return NULL;
}

static void server_start(server *s) {
  memset(s, 0, sizeof *s);
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->cv, NULL);
  s->fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(s->fd >= 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof a), 0);
  socklen_t len = sizeof a;
  assert_int_equal(getsockname(s->fd, (struct sockaddr *)&a, &len), 0);
  s->port = ntohs(a.sin_port);
  assert_int_equal(listen(s->fd, 128), 0);
  assert_int_equal(pthread_create(&s->accepter, NULL, accept_main, s), 0);
}

static void server_stop(server *s) {
  pthread_mutex_lock(&s->lock);
  s->released = true;
  s->b_served++;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->lock);
  shutdown(s->fd, SHUT_RDWR);
  pthread_join(s->accepter, NULL);
  for (size_t k = 0; k < s->n_conn; k++) pthread_join(s->conn[k], NULL);
  close(s->fd);
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->cv);
}

/* Under the lock: the server's threads read them under it. */
static void set_field(server *s, int *field, int v) {
  pthread_mutex_lock(&s->lock);
  *field = v;
  pthread_mutex_unlock(&s->lock);
}

static int max_active(server *s, bool reset) {
  pthread_mutex_lock(&s->lock);
  int m = s->max_active;
  if (reset) s->max_active = 0;
  pthread_mutex_unlock(&s->lock);
  return m;
}

/* ---- clients and submitters ---------------------------------------------- */

static stoke__http *client(unsigned io, unsigned attempts, uint32_t backoff) {
  stoke__http_options o = {0};
  o.io_concurrency = io;
  o.max_attempts = attempts;
  o.backoff_ms = backoff;
  o.connect_timeout_ms = 5000;
  o.stall_timeout_ms = 30000;
  stoke__http *h;
  char err[256];
  assert_int_equal(stoke__http_create(&o, NULL, &h, err, sizeof err), 0);
  return h;
}

typedef struct job {
  stoke__http *h;
  char url[128];
  int rc;
  char buf[4];
  char err[512];
} job;

static void *job_main(void *user) {
  job *j = user;
  j->rc = stoke__http_get_range(j->h, j->url, 0, 4, j->buf, NULL, j->err,
                                sizeof j->err);
  return NULL;
}

#define SUBMITTERS 8

/* SUBMITTERS threads, each one GET of /hold/k; all must succeed. */
static void burst(stoke__http *h, const server *s) {
  pthread_t t[SUBMITTERS];
  job j[SUBMITTERS];
  for (int k = 0; k < SUBMITTERS; k++) {
    memset(&j[k], 0, sizeof j[k]);
    j[k].h = h;
    snprintf(j[k].url, sizeof j[k].url, "http://127.0.0.1:%d/hold/%d",
             s->port, k);
    assert_int_equal(pthread_create(&t[k], NULL, job_main, &j[k]), 0);
  }
  for (int k = 0; k < SUBMITTERS; k++) {
    pthread_join(t[k], NULL);
    assert_int_equal(j[k].rc, 0);
    assert_memory_equal(j[k].buf, BODY, 4);
  }
}

/* (a) io_concurrency 2: never more than 2 at the server, 8 threads asking;
** io_concurrency 8: more than 2 (each answer is held until 3 arrived, so
** they overlap however slow the machine; the guard only ends a hold that
** would wait for ever). */
static void test_in_flight_bounded(void **state) {
  (void)state;
  server s;
  server_start(&s);
  set_field(&s, &s.hold_until, 3);
  /* With 2 at most, each hold ends by its guard. */
  set_field(&s, &s.hold_ms, 200);
  stoke__http *h = client(2, 1, 1);
  burst(h, &s);
  assert_true(max_active(&s, true) <= 2);
  stoke__http_counts c;
  stoke__http_counts_get(h, &c);
  assert_int_equal(c.requests, SUBMITTERS);
  assert_int_equal(c.io_concurrency, 2);
  assert_int_equal(c.waiting, 0);
  stoke__http_destroy(h);

  set_field(&s, &s.hold_ms, GUARD_S * 1000);
  h = client(8, 1, 1);
  burst(h, &s);
  assert_true(max_active(&s, true) > 2);
  stoke__http_destroy(h);
  server_stop(&s);
}

/* (c) The limit moved on a live client: 2, then 8, then 2 again. */
static void test_set_io_concurrency(void **state) {
  (void)state;
  server s;
  server_start(&s);
  set_field(&s, &s.hold_until, 3);
  stoke__http *h = client(2, 1, 1);
  set_field(&s, &s.hold_ms, 200);
  burst(h, &s);
  assert_true(max_active(&s, true) <= 2);

  stoke__http_set_io_concurrency(h, 8);
  stoke__http_counts c;
  stoke__http_counts_get(h, &c);
  assert_int_equal(c.io_concurrency, 8);
  set_field(&s, &s.hold_ms, GUARD_S * 1000);
  burst(h, &s);
  assert_true(max_active(&s, true) > 2);

  stoke__http_set_io_concurrency(h, 2);
  set_field(&s, &s.hold_ms, 200);
  burst(h, &s);
  assert_true(max_active(&s, true) <= 2);

  stoke__http_set_io_concurrency(h, 0); /* the default */
  stoke__http_counts_get(h, &c);
  assert_int_equal(c.io_concurrency, STOKE_IO_CONCURRENCY_DEFAULT);
  stoke__http_set_io_concurrency(h, 100000);
  stoke__http_counts_get(h, &c);
  assert_int_equal(c.io_concurrency, STOKE_IO_CONCURRENCY_MAX);
  stoke__http_destroy(h);
  server_stop(&s);
}

static void wait_waiting(stoke__http *h, unsigned n) {
  stoke__http_counts c;
  for (;;) {
    stoke__http_counts_get(h, &c);
    if (c.waiting >= n) return;
    struct timespec ts = {0, 1000000L};
    nanosleep(&ts, NULL);
  }
}

/* Until every request asked of h was answered. */
static void wait_answered(stoke__http *h) {
  for (;;) {
    stoke__http_counts c;
    stoke__http_counts_get(h, &c);
    if (c.waiting == 0) return;
    struct timespec ts = {0, 1000000L};
    nanosleep(&ts, NULL);
  }
}

static void wait_logged(server *s, size_t n) {
  for (;;) {
    pthread_mutex_lock(&s->lock);
    size_t have = s->n_log;
    pthread_mutex_unlock(&s->lock);
    if (have >= n) return;
    struct timespec ts = {0, 1000000L};
    nanosleep(&ts, NULL);
  }
}

/* (b) One slot (io_concurrency 1): /503/ is answered 503 once, and while
** it waits out its backoff /b/ takes the slot and is served; the retry is
** held at the server until /b/ was served, so the order at the server is
** 503, b, 503 only when the backoff held nothing up (a sleeping retry in
** the slot would make it 503, 503, b after the guard). */
static void test_backoff_holds_up_nothing(void **state) {
  (void)state;
  server s;
  server_start(&s);
  set_field(&s, &s.fails_left, 1);
  /* The first retry waits 500..1000 ms: /b/ is queued long before. */
  stoke__http *h = client(1, 3, 1000);
  job a = {.h = h}, b = {.h = h};
  snprintf(a.url, sizeof a.url, "http://127.0.0.1:%d/503/x", s.port);
  snprintf(b.url, sizeof b.url, "http://127.0.0.1:%d/b/x", s.port);
  pthread_t ta, tb;
  assert_int_equal(pthread_create(&ta, NULL, job_main, &a), 0);
  wait_logged(&s, 1); /* /503/ is in flight: /b/ queues behind it */
  assert_int_equal(pthread_create(&tb, NULL, job_main, &b), 0);
  pthread_join(tb, NULL);
  pthread_join(ta, NULL);
  assert_int_equal(a.rc, 0);
  assert_int_equal(b.rc, 0);
  pthread_mutex_lock(&s.lock);
  size_t n_log = s.n_log;
  char log[3][32] = {"", "", ""};
  for (size_t k = 0; k < 3 && k < n_log; k++) memcpy(log[k], s.log[k], 32);
  pthread_mutex_unlock(&s.lock);
  assert_int_equal(n_log, 3);
  assert_string_equal(log[0], "/503/x");
  assert_string_equal(log[1], "/b/x");
  assert_string_equal(log[2], "/503/x");
  stoke__http_counts c;
  stoke__http_counts_get(h, &c);
  assert_int_equal(c.requests, 3);
  assert_int_equal(c.retries, 1);
  assert_int_equal(c.throttled, 1);
  stoke__http_destroy(h);
  server_stop(&s);
}

/* (d) Destroy with one request in flight (held at the server) and three
** queued behind it: every caller returns STOKE_EIO naming its URL, destroy
** returns, nothing leaks (ASan) or races (TSan). */
static void test_destroy_with_requests_queued(void **state) {
  (void)state;
  server s;
  server_start(&s);
  stoke__http *h = client(1, 1, 1);
  enum { N = 4 };
  pthread_t t[N];
  job j[N];
  for (int k = 0; k < N; k++) {
    memset(&j[k], 0, sizeof j[k]);
    j[k].h = h;
    snprintf(j[k].url, sizeof j[k].url,
             "http://u:SECRET@127.0.0.1:%d/gate/%d", s.port, k);
    assert_int_equal(pthread_create(&t[k], NULL, job_main, &j[k]), 0);
  }
  wait_waiting(h, N); /* all four asked */
  wait_logged(&s, 1); /* one in flight */
  stoke__http_destroy(h);
  for (int k = 0; k < N; k++) {
    pthread_join(t[k], NULL);
    assert_int_equal(j[k].rc, STOKE_EIO);
    assert_non_null(strstr(j[k].err, "was closed"));
    assert_non_null(strstr(j[k].err, "/gate/"));
    assert_null(strstr(j[k].err, "SECRET"));
  }
  server_stop(&s);
}

/* The asynchronous request: done is called once per request, from the
** client's thread, with the bytes in place; those still queued or in
** flight at destroy end with STOKE_EIO, and destroy returns. */
typedef struct landing {
  pthread_mutex_t lock;
  int ok, eio, other;
} landing;

static void on_done(void *arg, int rc) {
  landing *l = arg;
  pthread_mutex_lock(&l->lock);
  if (rc == 0) l->ok++;
  else if (rc == STOKE_EIO) l->eio++;
  else l->other++;
  pthread_mutex_unlock(&l->lock);
}

static void test_async(void **state) {
  (void)state;
  server s;
  server_start(&s);
  landing l = {.ok = 0};
  pthread_mutex_init(&l.lock, NULL);
  enum { N = 6 };
  char bufs[N][4], url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/ok/x", s.port);
  stoke__http *h = client(2, 1, 1);
  for (int k = 0; k < N; k++)
    assert_int_equal(stoke__http_get_range_async(h, url, 0, 4, bufs[k],
                                                 on_done, &l), 0);
  /* A blocking request behind them in the FIFO: when it is answered, the
  ** earlier ones have started (and, one slot after another, most ended). */
  char b[4], err[256];
  assert_int_equal(stoke__http_get_range(h, url, 0, 4, b, NULL, err,
                                         sizeof err), 0);
  wait_answered(h);
  pthread_mutex_lock(&l.lock);
  assert_int_equal(l.ok, N);
  pthread_mutex_unlock(&l.lock);
  for (int k = 0; k < N; k++) assert_memory_equal(bufs[k], BODY, 4);
  stoke__http_destroy(h);

  /* Destroy with one held at the server and the rest queued. */
  snprintf(url, sizeof url, "http://127.0.0.1:%d/gate/x", s.port);
  h = client(1, 1, 1);
  landing m = {.ok = 0};
  pthread_mutex_init(&m.lock, NULL);
  for (int k = 0; k < N; k++)
    assert_int_equal(stoke__http_get_range_async(h, url, 0, 4, bufs[k],
                                                 on_done, &m), 0);
  wait_logged(&s, 8); /* 7 above, then the first /gate/ */
  stoke__http_destroy(h);
  assert_int_equal(m.eio, N);
  assert_int_equal(m.ok + m.other, 0);
  pthread_mutex_destroy(&l.lock);
  pthread_mutex_destroy(&m.lock);
  server_stop(&s);
}

static size_t logged(server *s) {
  pthread_mutex_lock(&s->lock);
  size_t n = s->n_log;
  pthread_mutex_unlock(&s->lock);
  return n;
}

typedef struct blocking_get {
  stoke__http *h;
  char url[128];
  int rc;
} blocking_get;

static void *blocking_main(void *user) {
  blocking_get *g = user;
  char b[4], err[256];
  g->rc = stoke__http_get_range(g->h, g->url, 0, 4, b, NULL, err, sizeof err);
  return NULL;
}

/* A thread blocked on a read (a worker's sample that was not read ahead)
** goes ahead of the read-ahead's queued requests: with one slot held at
** the server and four asynchronous requests queued before it, it is the
** next one served, not the fifth; and the queued ones still all land. */
static void test_blocking_before_read_ahead(void **state) {
  (void)state;
  server s;
  server_start(&s);
  stoke__http *h = client(1, 1, 1);
  landing l = {.ok = 0};
  pthread_mutex_init(&l.lock, NULL);
  char gate[128], ok[128], bufs[5][4];
  snprintf(gate, sizeof gate, "http://127.0.0.1:%d/gate/held", s.port);
  snprintf(ok, sizeof ok, "http://127.0.0.1:%d/ok/ahead", s.port);
  assert_int_equal(stoke__http_get_range_async(h, gate, 0, 4, bufs[0],
                                               on_done, &l), 0);
  wait_logged(&s, 1); /* the slot is held at the server */
  for (int k = 1; k < 5; k++)
    assert_int_equal(stoke__http_get_range_async(h, ok, 0, 4, bufs[k],
                                                 on_done, &l), 0);
  blocking_get g = {.h = h};
  snprintf(g.url, sizeof g.url, "http://127.0.0.1:%d/b/now", s.port);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, blocking_main, &g), 0);
  wait_waiting(h, 6); /* all six asked */
  pthread_mutex_lock(&s.lock); /* the gate opens */
  s.released = true;
  pthread_cond_broadcast(&s.cv);
  pthread_mutex_unlock(&s.lock);
  pthread_join(t, NULL);
  assert_int_equal(g.rc, 0);
  wait_answered(h);
  pthread_mutex_lock(&s.lock);
  assert_int_equal(s.n_log, 6);
  assert_string_equal(s.log[0], "/gate/held");
  assert_string_equal(s.log[1], "/b/now"); /* FIFO would make it log[5] */
  pthread_mutex_unlock(&s.lock);
  pthread_mutex_lock(&l.lock);
  assert_int_equal(l.ok, 5);
  pthread_mutex_unlock(&l.lock);
  pthread_mutex_destroy(&l.lock);
  stoke__http_destroy(h);
  server_stop(&s);
}

/* A client used after a fork (the child has no I/O thread): a request
** fails at once, naming both processes, instead of waiting for ever; its
** destroy does not wait either; and the parent's client still works. */
static void test_forked_child_fails_fast(void **state) {
  (void)state;
  server s;
  server_start(&s);
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/ok/x", s.port);
  stoke__http *h = client(2, 1, 1);
  char b[4], err[512];
  assert_int_equal(stoke__http_get_range(h, url, 0, 4, b, NULL, err,
                                         sizeof err), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    alarm(20); /* a hang is a failure by signal, not a stuck test */
    int rc = stoke__http_get_range(h, url, 0, 4, b, NULL, err, sizeof err);
    int ok = rc == STOKE_EINVAL && strstr(err, "opened in process") &&
             strstr(err, "open it in the process that reads it");
    int rc2 = stoke__http_get_range_async(h, url, 0, 4, b, on_done, NULL);
    stoke__http_destroy(h);
    _exit(ok && rc2 == STOKE_EINVAL ? 0 : 1);
  }
  int st = 0;
  assert_int_equal(waitpid(child, &st, 0), child);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  assert_int_equal(stoke__http_get_range(h, url, 0, 4, b, NULL, err,
                                         sizeof err), 0);
  assert_memory_equal(b, BODY, 4);
  stoke__http_destroy(h);
  server_stop(&s);
}

/* A run asked for twice (this epoch's block, and the next epoch's read
** ahead while this one still reads it) is fetched once and kept until
** both uses took their bytes; then freed.  An overlap that is not the
** same run is dropped, never fetched. */
static void test_prefetch_same_run_twice(void **state) {
  (void)state;
  server s;
  server_start(&s);
  char url[128];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/ok/run", s.port);
  stoke__http *h = client(2, 1, 1);
  stoke__prefetch *p;
  assert_int_equal(stoke__prefetch_create(h, 2, 1 << 20, NULL, &p), 0);
  stoke__prefetch_request(p, url, 0, 0, 4, 4);
  stoke__prefetch_request(p, url, 0, 0, 4, 4); /* a second use */
  stoke__prefetch_request(p, url, 0, 2, 2, 2); /* overlaps: dropped */
  char b[4];
  for (int use = 0; use < 2; use++) {
    memset(b, 0, sizeof b);
    assert_true(stoke__prefetch_take(p, 0, 0, 4, b));
    assert_memory_equal(b, BODY, 4);
  }
  /* Both uses taken: freed, so a third read is the caller's own. */
  assert_false(stoke__prefetch_take(p, 0, 0, 4, b));
  uint64_t runs, served;
  stoke__prefetch_counts(p, &runs, &served);
  assert_int_equal(runs, 1);
  assert_int_equal(served, 2);
  assert_int_equal(logged(&s), 1); /* one GET for the three requests */
  /* Once freed, the same range is a new run. */
  stoke__prefetch_request(p, url, 0, 0, 4, 4);
  assert_true(stoke__prefetch_take(p, 0, 0, 4, b));
  assert_int_equal(logged(&s), 2);
  stoke__prefetch_destroy(p);
  stoke__http_destroy(h);
  server_stop(&s);
}

int main(void) {
  /* The server writes to connections destroy has closed. */
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_in_flight_bounded),
      cmocka_unit_test(test_set_io_concurrency),
      cmocka_unit_test(test_backoff_holds_up_nothing),
      cmocka_unit_test(test_destroy_with_requests_queued),
      cmocka_unit_test(test_async),
      cmocka_unit_test(test_prefetch_same_run_twice),
      cmocka_unit_test(test_blocking_before_read_ahead),
      cmocka_unit_test(test_forked_child_fails_fast),
  };
  return cmocka_run_group_tests(tests, 0, 0);
}
