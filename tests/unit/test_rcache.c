/* test_rcache.c — the remote shard cache's key and eviction (rcache.h).
**
** The name: the same for the same URL, ETag and size, another when any of
** them changes, and made of the hash only (no part of the URL).  The
** victims: least recently used first (ties by index), entries open never,
** only as many as the budget needs (incoming bytes counted).  The trim on
** a real folder: the least recently used entries go, one held open (a
** shared flock, as a reader holds it) stays, a .tmp whose fetch lock
** nobody holds (a crashed writer's) goes, one whose lock is held stays.
** The fetch itself is t1004-remote-cache.sh's, against nginx. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/rcache.h"

static void test_name(void **state) {
  (void)state;
  char a[STOKE__RCACHE_NAME_CAP], b[STOKE__RCACHE_NAME_CAP];
  const char *u = "http://127.0.0.1:8080/train-00001.stoke";
  stoke__rcache_name(u, "\"5e-1f\"", 4096, ".stoke", a);
  stoke__rcache_name(u, "\"5e-1f\"", 4096, ".stoke", b);
  assert_string_equal(a, b);
  assert_int_equal(strlen(a), 2 + 32 + 6);
  assert_true(strncmp(a, "r-", 2) == 0);
  assert_null(strstr(a, "train"));
  assert_null(strstr(a, "127"));
  stoke__rcache_name(u, "\"5e-20\"", 4096, ".stoke", b);
  assert_string_not_equal(a, b); /* a new ETag: a new entry */
  stoke__rcache_name(u, "\"5e-1f\"", 4097, ".stoke", b);
  assert_string_not_equal(a, b);
  stoke__rcache_name("http://127.0.0.1:8080/train-00002.stoke", "\"5e-1f\"",
                     4096, ".stoke", b);
  assert_string_not_equal(a, b);
  stoke__rcache_name(u, "\"5e-1f\"", 4096, ".tar", b);
  assert_string_equal(b + strlen(b) - 4, ".tar");
}

static void test_victims(void **state) {
  (void)state;
  /* used_ns: 3 is the oldest, then 0, then 1 and 4 (a tie), then 2. */
  stoke__rcache_entry e[5] = {{100, 20, false}, {100, 30, false},
                              {100, 40, false}, {100, 10, false},
                              {100, 30, false}};
  size_t order[5];
  assert_int_equal(stoke__rcache_victims(e, 5, 500, 0, order, NULL), 0);
  assert_int_equal(stoke__rcache_victims(e, 5, 1000, 0, order, NULL), 0);
  size_t k = stoke__rcache_victims(e, 5, 300, 0, order, NULL);
  assert_int_equal(k, 2);
  assert_int_equal(order[0], 3);
  assert_int_equal(order[1], 0);
  /* The kept follow, in LRU order: the tie by index. */
  assert_int_equal(order[2], 1);
  assert_int_equal(order[3], 4);
  assert_int_equal(order[4], 2);
  /* Room for 150 incoming bytes: two more go. */
  k = stoke__rcache_victims(e, 5, 300, 150, order, NULL);
  assert_int_equal(k, 4);
  assert_int_equal(order[2], 1);
  assert_int_equal(order[3], 4);
  /* An open entry is passed over, even the oldest. */
  e[3].open = true;
  k = stoke__rcache_victims(e, 5, 300, 0, order, NULL);
  assert_int_equal(k, 2);
  assert_int_equal(order[0], 0);
  assert_int_equal(order[1], 1);
  /* All open: nothing goes, whatever the budget. */
  for (int i = 0; i < 5; i++) e[i].open = true;
  assert_int_equal(stoke__rcache_victims(e, 5, 1, 0, order, NULL), 0);
  assert_int_equal(stoke__rcache_victims(NULL, 0, 1, 0, order, NULL), 0);
}

/* DIR/remote/NAME, size bytes, last used at t seconds. */
static void make_entry(const char *dir, const char *name, size_t size,
                       time_t t) {
  char p[4096];
  snprintf(p, sizeof p, "%s/remote/%s", dir, name);
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(fd >= 0);
  char buf[256] = {0};
  for (size_t done = 0; done < size; done += sizeof buf)
    assert_true(write(fd, buf, size - done < sizeof buf ? size - done
                                                        : sizeof buf) > 0);
  struct timespec ts[2] = {{t, 0}, {t, 0}};
  assert_int_equal(futimens(fd, ts), 0);
  close(fd);
}

static bool there(const char *dir, const char *name) {
  char p[4096];
  snprintf(p, sizeof p, "%s/remote/%s", dir, name);
  return access(p, F_OK) == 0;
}

static int open_at(const char *dir, const char *name, int flags) {
  char p[4096];
  snprintf(p, sizeof p, "%s/remote/%s", dir, name);
  return open(p, flags, 0600);
}

static void test_trim(void **state) {
  (void)state;
  char dir[] = "/tmp/stoke-test-rcache.XXXXXX";
  assert_non_null(mkdtemp(dir));
  stoke__rcache *c;
  char err[256];
  assert_int_equal(stoke__rcache_open(dir, 2500, NULL, NULL, &c, err,
                                      sizeof err), 0);
  char p[4096];
  struct stat st;
  snprintf(p, sizeof p, "%s/remote", dir);
  assert_int_equal(stat(p, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  make_entry(dir, "r-a.stoke", 1000, 1000); /* the oldest, held open */
  make_entry(dir, "r-b.stoke", 1000, 2000);
  make_entry(dir, "r-c.tar", 1000, 3000);
  make_entry(dir, "r-d.stoke", 1000, 4000);
  make_entry(dir, "r-e.tmp", 10, 4000);  /* a crashed writer's */
  make_entry(dir, "r-f.tmp", 10, 4000);  /* a live writer's */
  make_entry(dir, "other.txt", 5000, 1); /* not an entry: left alone */
  int held = open_at(dir, "r-a.stoke", O_RDONLY);
  assert_true(held >= 0);
  assert_int_equal(flock(held, LOCK_SH), 0);
  int writer = open_at(dir, "r-f.lock", O_RDWR | O_CREAT);
  assert_true(writer >= 0);
  assert_int_equal(flock(writer, LOCK_EX), 0);
  stoke__rcache_trim(c, 0);
  /* 4000 bytes over 2500: a is open, so b and c go (the next oldest). */
  assert_true(there(dir, "r-a.stoke"));
  assert_false(there(dir, "r-b.stoke"));
  assert_false(there(dir, "r-c.tar"));
  assert_true(there(dir, "r-d.stoke"));
  assert_false(there(dir, "r-e.tmp"));
  assert_true(there(dir, "r-f.tmp"));
  assert_true(there(dir, "other.txt"));
  /* The evictions are counted, with their bytes (the stats' rcache_*);
  ** nothing was found or fetched. */
  stoke__rcache_counts n;
  stoke__rcache_counts_get(c, &n);
  assert_int_equal(n.evicted, 2);
  assert_int_equal(n.bytes_evicted, 2000);
  assert_int_equal(n.hits + n.misses + n.uncached, 0);
  stoke__rcache_note_uncached(c);
  stoke__rcache_counts_get(c, &n);
  assert_int_equal(n.uncached, 1);
  /* Closed, a is the least recently used: at close it goes. */
  close(held);
  close(writer);
  make_entry(dir, "r-g.stoke", 1000, 5000);
  stoke__rcache_close(c);
  assert_false(there(dir, "r-a.stoke"));
  assert_true(there(dir, "r-d.stoke"));
  assert_true(there(dir, "r-g.stoke"));
  assert_false(there(dir, "r-f.tmp")); /* its writer is gone now */
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

static void test_refused(void **state) {
  (void)state;
  /* A folder others may write is refused, as the packing cache's. */
  char dir[] = "/tmp/stoke-test-rcache.XXXXXX";
  assert_non_null(mkdtemp(dir));
  char p[4096];
  snprintf(p, sizeof p, "%s/remote", dir);
  assert_int_equal(mkdir(p, 0777), 0);
  assert_int_equal(chmod(p, 0777), 0);
  stoke__rcache *c = NULL;
  char err[256] = "";
  assert_int_not_equal(stoke__rcache_open(dir, 0, NULL, NULL, &c, err,
                                          sizeof err), 0);
  assert_null(c);
  assert_non_null(strstr(err, "remote cache"));
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_name),
      cmocka_unit_test(test_victims),
      cmocka_unit_test(test_trim),
      cmocka_unit_test(test_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
