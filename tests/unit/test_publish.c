#define _GNU_SOURCE
/* test_publish.c — the live view's snapshots: the sequence lock never
** hands out a torn snapshot while a writer writes, a file of a process gone
** (or of a reused pid) is recognised and removed, nobody else's file or
** folder is read, and a loader or a two-clock that publishes has its file
** while it lives and none after. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"
#include "os/os.h"
#include "stats/publish.h"

/* Each test gets its own XDG_RUNTIME_DIR, so the folder is $it/stoke. */
static char run_dir[256], live_dir[300];

static int setup(void **state) {
  (void)state;
  snprintf(run_dir, sizeof run_dir, "%s/stoke-publish-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(run_dir)) return -1;
  chmod(run_dir, 0700);
  setenv("XDG_RUNTIME_DIR", run_dir, 1);
  unsetenv("STOKE_PUBLISH");
  snprintf(live_dir, sizeof live_dir, "%s/stoke", run_dir);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", run_dir);
  return system(cmd) == 0 ? 0 : -1;
}

static int count_files(void) {
  stoke__live_name names[16];
  int n = stoke__live_scan(live_dir, names, 16);
  return n < 0 ? 0 : n;
}

/* ---- the sequence lock --------------------------------------------------- */

/* Snapshot number k: every field the test checks says k. */
static void snapshot_k(stoke_live *s, uint64_t k) {
  memset(s, 0, sizeof *s);
  s->struct_size = sizeof *s;
  s->kind = STOKE_LIVE_LOADER;
  s->publishes = k;
  s->stats.steps = k;
  s->stats.samples = 3 * k;
  s->stats.wait.total_ns = (int64_t)k * 7;
  for (int i = 0; i < STOKE_LIVE_HIST; i++) s->wait_hist[i] = k + (uint64_t)i;
  snprintf(s->command, sizeof s->command, "writer %llu",
           (unsigned long long)k);
  s->events[STOKE_LIVE_EVENTS - 1].step = k; /* the payload's far end */
}

static int whole(const stoke_live *s) {
  uint64_t k = s->publishes;
  char want[64];
  snprintf(want, sizeof want, "writer %llu", (unsigned long long)k);
  if (s->stats.steps != k || s->stats.samples != 3 * k ||
      s->stats.wait.total_ns != (int64_t)k * 7 ||
      s->events[STOKE_LIVE_EVENTS - 1].step != k ||
      strcmp(s->command, want) != 0)
    return 0;
  for (int i = 0; i < STOKE_LIVE_HIST; i++)
    if (s->wait_hist[i] != k + (uint64_t)i) return 0;
  return 1;
}

typedef struct writer_arg {
  void *map;
  uint64_t writes;
  atomic_bool done;
} writer_arg;

static void *writer_main(void *p) {
  writer_arg *w = p;
  stoke_live s;
  uint64_t *buf = malloc(stoke__live_file_bytes());
  for (uint64_t k = 1; k <= w->writes; k++) {
    snapshot_k(&s, k);
    stoke__live_write(w->map, &s, buf);
  }
  free(buf);
  atomic_store(&w->done, true);
  return NULL;
}

static void test_reader_never_sees_a_torn_snapshot(void **state) {
  (void)state;
  void *map = aligned_alloc(64, (stoke__live_file_bytes() + 63) / 64 * 64);
  assert_non_null(map);
  memset(map, 0, stoke__live_file_bytes());
  stoke__live_file_init(map, 1234, 99);
  stoke_live got;
  /* Nothing written yet. */
  assert_int_equal(stoke__live_read(map, stoke__live_file_bytes(), &got),
                   EAGAIN);
  writer_arg w = {.map = map, .writes = 20000};
  atomic_init(&w.done, false);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, writer_main, &w), 0);
  uint64_t reads = 0, last = 0;
  int torn = 0, backwards = 0;
  while (!atomic_load(&w.done) || reads == 0) {
    int rc = stoke__live_read(map, stoke__live_file_bytes(), &got);
    if (rc == EAGAIN) continue; /* none yet, or the writer kept it busy */
    assert_int_equal(rc, 0);     /* never a bad checksum */
    reads++;
    if (!whole(&got)) torn++;
    if (got.publishes < last) backwards++;
    last = got.publishes;
  }
  pthread_join(t, NULL);
  assert_int_equal(torn, 0);
  assert_int_equal(backwards, 0);
  assert_true(reads > 0);
  /* The last one is there, whole. */
  assert_int_equal(stoke__live_read(map, stoke__live_file_bytes(), &got), 0);
  assert_int_equal(got.publishes, w.writes);
  assert_true(whole(&got));
  long pid;
  uint64_t start;
  assert_int_equal(stoke__live_owner(map, stoke__live_file_bytes(), &pid,
                                     &start), 0);
  assert_int_equal(pid, 1234);
  assert_int_equal(start, 99);
  free(map);
}

/* A writer that lost its core half way through a write: the sequence
** number odd for far longer than a write takes. */
typedef struct slow_writer {
  void *map;
  int64_t pause_ns;
} slow_writer;

static void *slow_writer_main(void *p) {
  slow_writer *w = p;
  stoke_live s;
  uint64_t *buf = malloc(stoke__live_file_bytes());
  snapshot_k(&s, 2);
  struct timespec nap = {(time_t)(w->pause_ns / 1000000000),
                         (long)(w->pause_ns % 1000000000)};
  nanosleep(&nap, NULL);
  stoke__live_write_finish(w->map, &s, buf);
  free(buf);
  return NULL;
}

/* The reader waits out a write held up for 300 ms (stress CI: `stoke top
** PID` said "publishes no loader" of a living one, its reader having given
** up after a fixed count of yields), and gives up on one never finished
** (its writer killed half way) after STOKE__LIVE_READ_WAIT_NS, not never. */
static void test_reader_waits_out_a_preempted_writer(void **state) {
  (void)state;
  void *map = aligned_alloc(64, (stoke__live_file_bytes() + 63) / 64 * 64);
  assert_non_null(map);
  memset(map, 0, stoke__live_file_bytes());
  stoke__live_file_init(map, 1234, 99);
  uint64_t *buf = malloc(stoke__live_file_bytes());
  stoke_live s, got;
  snapshot_k(&s, 1);
  stoke__live_write(map, &s, buf);
  /* The write begun here, finished by the thread 300 ms on. */
  stoke__live_write_begin(map);
  slow_writer w = {.map = map, .pause_ns = 300 * 1000000LL};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, slow_writer_main, &w), 0);
  assert_int_equal(stoke__live_read(map, stoke__live_file_bytes(), &got), 0);
  assert_int_equal(got.publishes, 2);
  assert_true(whole(&got));
  pthread_join(t, NULL);
  /* Half way for good: EAGAIN, after the wait. */
  stoke__live_write_begin(map);
  int64_t t0 = stoke__now_ns();
  assert_int_equal(stoke__live_read(map, stoke__live_file_bytes(), &got),
                   EAGAIN);
  assert_true(stoke__now_ns() - t0 >= STOKE__LIVE_READ_WAIT_NS);
  stoke__live_write_finish(map, &s, buf);
  assert_int_equal(stoke__live_read(map, stoke__live_file_bytes(), &got), 0);
  assert_int_equal(got.publishes, 1);
  free(buf);
  free(map);
}

static void test_checksum_and_header_guard(void **state) {
  (void)state;
  size_t bytes = stoke__live_file_bytes();
  unsigned char *map = aligned_alloc(64, (bytes + 63) / 64 * 64);
  memset(map, 0, bytes);
  stoke_live s, got;
  /* No magic yet: not a snapshot file. */
  assert_int_equal(stoke__live_read(map, bytes, &got), EINVAL);
  stoke__live_file_init(map, 1, 1);
  uint64_t *buf = malloc(bytes);
  snapshot_k(&s, 5);
  stoke__live_write(map, &s, buf);
  assert_int_equal(stoke__live_read(map, bytes, &got), 0);
  /* Too short a mapping is refused. */
  assert_int_equal(stoke__live_read(map, bytes - 8, &got), EINVAL);
  /* A byte changed in the payload (not by the writer) fails the CRC. */
  map[bytes - 64] ^= 0x40;
  assert_int_equal(stoke__live_read(map, bytes, &got), EINVAL);
  free(buf);
  free(map);
}

static void test_rebin(void **state) {
  (void)state;
  stoke_hist_bucket b[3] = {{100, 200, 2},            /* < 1 us: bin 0 */
                            {1490000, 1510000, 5},    /* 1.5 ms */
                            {INT64_C(1) << 50, (INT64_C(1) << 50) + 1, 1}};
  uint64_t bins[STOKE_LIVE_HIST];
  stoke__live_rebin(b, 3, bins);
  assert_int_equal(bins[0], 2);
  assert_int_equal(bins[42], 5); /* floor(4 * log2(1500)) */
  assert_int_equal(bins[STOKE_LIVE_HIST - 1], 1);
  uint64_t sum = 0;
  for (int i = 0; i < STOKE_LIVE_HIST; i++) sum += bins[i];
  assert_int_equal(sum, 8);
}

/* ---- files: stale, reused, others' --------------------------------------- */

/* A snapshot file for pid with its start time, as a publisher makes it. */
static void plant(long pid, unsigned id, uint64_t start, mode_t mode) {
  char dir[400], path[512];
  assert_int_equal(stoke__live_dir(dir, sizeof dir, true), 0);
  snprintf(path, sizeof path, "%s/%ld-%u.live", dir, pid, id);
  void *map;
  assert_int_equal(stoke__shm_create(path, stoke__live_file_bytes(), &map),
                   0);
  stoke__live_file_init(map, pid, start);
  stoke_live s;
  uint64_t *buf = malloc(stoke__live_file_bytes());
  snapshot_k(&s, 1);
  s.pid = (int)pid;
  s.id = id;
  stoke__live_write(map, &s, buf);
  free(buf);
  stoke__shm_unmap(map, stoke__live_file_bytes());
  if (mode != 0600) assert_int_equal(chmod(path, mode), 0);
}

static long dead_pid(void) {
  pid_t p = fork();
  if (p == 0) _exit(0);
  assert_true(p > 0);
  waitpid(p, NULL, 0);
  return (long)p;
}

static void test_stale_files_are_skipped_and_removed(void **state) {
  (void)state;
  uint64_t start;
  assert_int_equal(stoke__proc_start_ticks((long)getpid(), &start), 0);
  long gone = dead_pid();
  assert_int_equal(stoke__proc_start_ticks(gone, &start), ESRCH);
  assert_int_equal(stoke__proc_start_ticks((long)getpid(), &start), 0);
  plant(gone, 0, 1, 0600);             /* its process is gone */
  plant((long)getpid(), 1, start + 1, 0600); /* our pid, an older process */
  plant((long)getpid(), 2, start, 0600);     /* ours: alive */
  assert_int_equal(count_files(), 3);
  stoke_live v[8];
  size_t n = stoke_live_list(0, v, 8);
  assert_int_equal(n, 1);
  assert_int_equal(v[0].pid, getpid());
  assert_int_equal(v[0].id, 2);
  assert_int_equal(v[0].struct_size, sizeof v[0]);
  assert_int_equal(count_files(), 1); /* the two stale ones removed */
  /* Only one pid's. */
  assert_int_equal(stoke_live_list((int)getpid(), v, 8), 1);
  assert_int_equal(stoke_live_list((int)gone, v, 8), 0);
}

static void test_permissions(void **state) {
  (void)state;
  char dir[400];
  assert_int_equal(stoke_live_dir(dir, sizeof dir, 1), 0);
  assert_string_equal(dir, live_dir);
  struct stat st;
  assert_int_equal(lstat(dir, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  uint64_t start;
  assert_int_equal(stoke__proc_start_ticks((long)getpid(), &start), 0);
  /* A file open to others is not read (nor removed). */
  plant((long)getpid(), 0, start, 0644);
  stoke_live v[4];
  assert_int_equal(stoke_live_list(0, v, 4), 0);
  assert_int_equal(count_files(), 1);
  /* A link in place of a file is not followed. */
  char path[512], target[512];
  snprintf(target, sizeof target, "%s/%ld-0.live", dir, (long)getpid());
  snprintf(path, sizeof path, "%s/%ld-1.live", dir, (long)getpid());
  assert_int_equal(chmod(target, 0600), 0);
  assert_int_equal(symlink(target, path), 0);
  assert_int_equal(stoke_live_list(0, v, 4), 1);
  assert_int_equal(v[0].id, 0);
  /* Nor is a new file made through a link. */
  void *map;
  assert_int_equal(stoke__shm_create(path, 64, &map), EEXIST);
  /* A folder open to others is refused, with the reason. */
  assert_int_equal(chmod(dir, 0755), 0);
  assert_int_equal(stoke_live_dir(dir, sizeof dir, 1), STOKE_EIO);
  TU_CONTAINS(stoke_errmsg(NULL), "open to others");
  assert_int_equal(stoke_live_list(0, v, 4), 0);
  assert_int_equal(chmod(dir, 0700), 0);
  /* Too small a buffer. */
  char tiny[4];
  assert_int_equal(stoke_live_dir(tiny, sizeof tiny, 0), STOKE_EINVAL);
  /* Without a usable XDG_RUNTIME_DIR: /dev/shm/stoke-UID. */
  setenv("XDG_RUNTIME_DIR", "relative/path", 1);
  assert_int_not_equal(stoke_live_dir(dir, sizeof dir, 0), STOKE_EINVAL);
  char want[64];
  snprintf(want, sizeof want, "/dev/shm/stoke-%ld", (long)geteuid());
  assert_string_equal(dir, want);
  setenv("XDG_RUNTIME_DIR", run_dir, 1);
}

/* ---- publishers: a loader and a two-clock -------------------------------- */

static stoke_loader *make_loader(int publish, int *rc) {
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = STOKE_SYNTH_TENSOR;
  sc.n_samples = 64;
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_synthetic(&sc, &src));
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = 8;
  cfg.n_workers = 1;
  cfg.warmup_epochs = 0;
  cfg.publish = publish;
  stoke_loader *l = NULL;
  *rc = stoke_loader_create(&cfg, &l);
  stoke_source_destroy(src);
  return l;
}

/* Wait (a hang guard, not a timing) until pid's snapshot has `steps`. */
static int wait_published(int kind, uint64_t steps, stoke_live *out) {
  for (int i = 0; i < 3000; i++) {
    if (stoke_live_list((int)getpid(), out, 1) == 1 && out->kind == kind &&
        out->stats.steps >= steps)
      return 1;
    tu_sleep_ns(10 * 1000000LL);
  }
  return 0;
}

static void run_steps(stoke_loader *l, int n) {
  for (int i = 0; i < n; i++) {
    stoke_batch *b;
    int rc = stoke_loader_next(l, &b);
    if (rc == STOKE_END) continue;
    TU_RC_L(l, rc, STOKE_OK);
    stoke_batch_release(b);
  }
}

static void test_loader_publishes_while_it_lives(void **state) {
  (void)state;
  int rc;
  stoke_loader *l = make_loader(STOKE_PUBLISH_ON, &rc);
  TU_OK(rc);
  run_steps(l, 5);
  stoke_live s;
  assert_true(wait_published(STOKE_LIVE_LOADER, 5, &s));
  assert_int_equal(s.pid, getpid());
  assert_true(s.publishes >= 1);
  assert_int_equal(s.stats.n_workers, 1);
  uint64_t waits = 0;
  for (int i = 0; i < STOKE_LIVE_HIST; i++) waits += s.wait_hist[i];
  assert_true(waits >= 5);
  TU_CONTAINS(s.command, "test_publish");
  assert_int_equal(count_files(), 1);
  char path[512];
  snprintf(path, sizeof path, "%s/%d-%u.live", live_dir, s.pid, s.id);
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  /* A second loader of the process takes the next id. */
  stoke_loader *l2 = make_loader(STOKE_PUBLISH_ON, &rc);
  TU_OK(rc);
  assert_int_equal(count_files(), 2);
  stoke_loader_destroy(l2);
  stoke_loader_destroy(l);
  assert_int_equal(count_files(), 0);
}

static void test_publish_setting(void **state) {
  (void)state;
  int rc;
  /* Off by default; STOKE_PUBLISH=1 turns the default on; OFF stays off. */
  stoke_loader *l = make_loader(STOKE_PUBLISH_DEFAULT, &rc);
  TU_OK(rc);
  assert_int_equal(count_files(), 0);
  stoke_loader_destroy(l);
  setenv("STOKE_PUBLISH", "1", 1);
  l = make_loader(STOKE_PUBLISH_DEFAULT, &rc);
  TU_OK(rc);
  assert_int_equal(count_files(), 1);
  stoke_loader_destroy(l);
  l = make_loader(STOKE_PUBLISH_OFF, &rc);
  TU_OK(rc);
  assert_int_equal(count_files(), 0);
  stoke_loader_destroy(l);
  unsetenv("STOKE_PUBLISH");
  /* Bad values. */
  l = make_loader(2, &rc);
  assert_null(l);
  assert_int_equal(rc, STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "publish");
  stoke_twoclock_config tc;
  stoke_twoclock_config_init(&tc);
  tc.publish = -2;
  stoke_twoclock *c = NULL;
  assert_int_equal(stoke_twoclock_create(&tc, &c), STOKE_EINVAL);
  /* A folder that cannot be used: the loader runs, unpublished. */
  char dir[400];
  assert_int_equal(stoke_live_dir(dir, sizeof dir, 1), 0);
  assert_int_equal(chmod(dir, 0750), 0);
  l = make_loader(STOKE_PUBLISH_ON, &rc);
  TU_OK(rc);
  run_steps(l, 3);
  stoke_loader_destroy(l);
  assert_int_equal(chmod(dir, 0700), 0);
  assert_int_equal(count_files(), 0);
}

static void test_twoclock_publishes(void **state) {
  (void)state;
  stoke_twoclock_config tc;
  stoke_twoclock_config_init(&tc);
  tc.warmup_epochs = 0;
  tc.publish = STOKE_PUBLISH_ON;
  stoke_twoclock *c = NULL;
  TU_OK(stoke_twoclock_create(&tc, &c));
  for (int i = 0; i < 4; i++) {
    stoke_twoclock_enter(c);
    stoke_twoclock_leave(c, 16);
  }
  stoke_twoclock_enter(c);
  stoke_twoclock_leave(c, 16);
  stoke_live s;
  assert_true(wait_published(STOKE_LIVE_TWOCLOCK, 4, &s));
  assert_string_equal(stoke_live_kind_name(s.kind), "twoclock");
  assert_int_equal(s.stats.samples % 16, 0);
  stoke_twoclock_destroy(c);
  assert_int_equal(count_files(), 0);
}

int main(void) {
  tu_watchdog(120);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reader_never_sees_a_torn_snapshot),
      cmocka_unit_test(test_reader_waits_out_a_preempted_writer),
      cmocka_unit_test(test_checksum_and_header_guard),
      cmocka_unit_test(test_rebin),
      cmocka_unit_test_setup_teardown(test_stale_files_are_skipped_and_removed,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_permissions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_loader_publishes_while_it_lives,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_publish_setting, setup, teardown),
      cmocka_unit_test_setup_teardown(test_twoclock_publishes, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
