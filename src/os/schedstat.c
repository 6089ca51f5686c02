/* schedstat.c — how long this process's threads waited for a core.
**
** Linux keeps, per thread, the time it ran and the time it was runnable but
** not running (run delay) in /proc/<pid>/task/<tid>/schedstat.  The queue
** model uses the workers' ratio of the two to tell queueing for a core
** (the machine is saturated, by our workers or by other processes) from
** waiting off the CPU (I/O).  Elsewhere, or without /proc, it reports
** nothing and the model falls back to its estimate.
**
** A loader keeps the list of its process's stoke-w* threads when its
** measurement starts and compares it when its statistics are read: the
** threads that ran in between (its workers and the helper threads they
** started, which inherit their name), not idle ones (another loader's
** workers, a library's lazily made pool that took a worker's name). */
#define _GNU_SOURCE
#include "os/os.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__linux__)
static int read_task(const char *tid, const char *prefix, int64_t *run,
                     int64_t *delay);

int stoke__schedstat_list(const char *prefix, stoke__sched_thread *out,
                          size_t cap) {
  DIR *dir = opendir("/proc/self/task");
  if (!dir) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL && (size_t)n < cap) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int64_t run = 0, delay = 0;
    if (!read_task(e->d_name, prefix, &run, &delay)) continue;
    out[n].tid = atol(e->d_name);
    out[n].run_ns = run;
    out[n].delay_ns = delay;
    n++;
  }
  closedir(dir);
  return n;
}

static int read_task(const char *tid, const char *prefix, int64_t *run,
                     int64_t *delay) {
  char path[64], comm[32];
  snprintf(path, sizeof path, "/proc/self/task/%.16s/comm", tid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int ok = fgets(comm, sizeof comm, f) != NULL;
  fclose(f);
  if (!ok || strncmp(comm, prefix, strlen(prefix)) != 0) return 0;
  snprintf(path, sizeof path, "/proc/self/task/%.16s/schedstat", tid);
  f = fopen(path, "r");
  if (!f) return 0;
  long long r = 0, d = 0;
  ok = fscanf(f, "%lld %lld", &r, &d) == 2;
  fclose(f);
  if (!ok) return 0;
  *run += (int64_t)r;
  *delay += (int64_t)d;
  return 1;
}
#endif

int stoke__schedstat_threads(const char *prefix, int64_t *run_ns,
                             int64_t *delay_ns) {
  *run_ns = 0;
  *delay_ns = 0;
#if defined(__linux__)
  DIR *dir = opendir("/proc/self/task");
  if (!dir) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    n += read_task(e->d_name, prefix, run_ns, delay_ns);
  }
  closedir(dir);
  return n;
#else
  (void)prefix;
  return -1;
#endif
}

#if !defined(__linux__)
int stoke__schedstat_list(const char *prefix, stoke__sched_thread *out,
                          size_t cap) {
  (void)prefix;
  (void)out;
  (void)cap;
  return -1;
}
#endif

int stoke__schedstat_window(const stoke__sched_thread *base, size_t n_base,
                            const stoke__sched_thread *now, size_t n_now,
                            int64_t *run_ns, int64_t *delay_ns) {
  int active = 0;
  *run_ns = *delay_ns = 0;
  for (size_t i = 0; i < n_now; i++) {
    int64_t r = now[i].run_ns, d = now[i].delay_ns;
    for (size_t j = 0; j < n_base; j++)
      if (base[j].tid == now[i].tid) {
        r -= base[j].run_ns;
        d -= base[j].delay_ns;
        break;
      }
    if (r <= 0) continue; /* did not run in the window: idle */
    active++;
    *run_ns += r;
    *delay_ns += d > 0 ? d : 0;
  }
  return active;
}

/* A thread id mixed (splitmix64's finalizer), so that a sum of them tells
** one set of threads from another with the same count. */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

#if defined(__linux__)
/* One thread's schedstat ("run delay slices"), read with plain system
** calls: at a window's close this runs once per thread of the process. */
static bool read_schedstat(int dir_fd, const char *tid, int64_t *run,
                           int64_t *delay) {
  char path[40], buf[96];
  snprintf(path, sizeof path, "%.16s/schedstat", tid);
  int fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  long long r = 0, d = 0;
  if (sscanf(buf, "%lld %lld", &r, &d) != 2) return false;
  *run = (int64_t)r;
  *delay = (int64_t)d;
  return true;
}
#endif

int stoke__outside_read_sched(stoke__outside_reading *r) {
  r->sched_run_ns = r->sched_delay_ns = 0;
  r->sched_ids = 0;
  r->sched_threads = -1;
#if defined(__linux__)
  DIR *dir = opendir("/proc/self/task");
  if (!dir) return -1;
  int n = 0;
  bool ok = true;
  struct dirent *e;
  while (ok && (e = readdir(dir)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    int64_t run, delay;
    /* A thread that ended since the listing is not counted: the set's
    ** ids say so to the next reading. */
    if (!read_schedstat(dirfd(dir), e->d_name, &run, &delay)) continue;
    if (++n > STOKE__SCHED_MAX_THREADS) ok = false;
    r->sched_run_ns += run;
    r->sched_delay_ns += delay;
    r->sched_ids += mix((uint64_t)atol(e->d_name));
  }
  closedir(dir);
  if (!ok || n == 0) {
    r->sched_run_ns = r->sched_delay_ns = 0;
    r->sched_ids = 0;
    return -1;
  }
  r->sched_threads = n;
  return 0;
#else
  return -1;
#endif
}

bool stoke__outside_sched_cores(const stoke__outside_reading *a,
                                const stoke__outside_reading *b,
                                double *delay, double *run) {
  *delay = *run = 0;
  double wall = (double)(b->t_ns - a->t_ns);
  if (!(wall > 0) || a->sched_threads < 0 ||
      a->sched_threads != b->sched_threads || a->sched_ids != b->sched_ids)
    return false;
  double d = (double)(b->sched_delay_ns - a->sched_delay_ns) / wall;
  double r = (double)(b->sched_run_ns - a->sched_run_ns) / wall;
  *delay = d > 0 ? d : 0;
  *run = r > 0 ? r : 0;
  return true;
}
