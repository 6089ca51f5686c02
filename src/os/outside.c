/* outside.c — what the rest of the machine is doing: the busy CPU time of
** every core (from /proc/uptime's idle time, else /proc/stat's busy
** ticks) and this process's own CPU time, the two readings
** whose difference over a window is the machine's other load
** (stats/outside.c keeps the windows; schedstat.c adds how long this
** process's threads ran and waited for a core). */
#define _POSIX_C_SOURCE 200809L
#include "os/os.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* /proc/stat's first line: the machine's busy CPU time so far (all
** cores, all but idle and iowait) and its iowait, or -1. */
static int64_t stat_busy_ns(int64_t *iowait_ns) {
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return -1;
  unsigned long long v[8] = {0};
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                 &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
  fclose(f);
  long tck = sysconf(_SC_CLK_TCK);
  if (n < 4 || tck <= 0) return -1;
  unsigned long long unit = 1000000000ULL / (unsigned long long)tck;
  *iowait_ns = n >= 5 ? (int64_t)(v[4] * unit) : 0;
  /* user nice system idle iowait irq softirq steal: all but idle, iowait */
  unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return (int64_t)(busy * unit);
}

/* The idle time of every CPU so far, /proc/uptime's second field: summed
** by the kernel in ns from the idle entries and exits, and rounded to
** 10 ms once, where /proc/stat's busy fields are ticks sampled per core
** and rounded per core and field (a fifth of a core and more on a 0.1 s
** window of 2 cores: too coarse for the short windows of a short run).
** -1 where it cannot be read. */
static int64_t uptime_idle_ns(void) {
  FILE *f = fopen("/proc/uptime", "r");
  if (!f) return -1;
  unsigned long long s = 0, cs = 0;
  int n = fscanf(f, "%*s %llu.%2llu", &s, &cs);
  fclose(f);
  if (n != 2) return -1;
  return (int64_t)(s * 1000000000ULL + cs * 10000000ULL);
}

int stoke__outside_read(stoke__outside_reading *r) {
  struct timespec ts;
  int64_t idle = uptime_idle_ns();
  int64_t now = stoke__now_ns();
  int64_t iowait = 0;
  int64_t busy = stat_busy_ns(&iowait);
  if (busy < 0 || clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
    return -1;
  r->precise = idle >= 0;
  /* The busy time from the idle time: the online CPUs' time less their
  ** idle and iowait (iowait is /proc/stat's, per core, but mostly still:
  ** a process waiting on a disk is no load). */
  r->busy_ns = r->precise
                   ? (int64_t)stoke__online_cpus() * now - idle - iowait
                   : busy;
  r->self_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  r->t_ns = now;
  /* The threads' files are read only where asked for
  ** (stoke__outside_read_sched): the live autotuner's readings need none. */
  r->sched_run_ns = r->sched_delay_ns = 0;
  r->sched_ids = 0;
  r->sched_threads = -1;
  return 0;
}

double stoke__outside_cores(const stoke__outside_reading *a,
                            const stoke__outside_reading *b) {
  double wall = (double)(b->t_ns - a->t_ns);
  if (!(wall > 0) || a->precise != b->precise) return 0;
  double other = ((double)(b->busy_ns - a->busy_ns) -
                  (double)(b->self_ns - a->self_ns)) / wall;
  return other > 0 ? other : 0; /* the jiffies' rounding against our clock */
}

double stoke__outside_busy_cores(const stoke__outside_reading *a,
                                 const stoke__outside_reading *b) {
  double wall = (double)(b->t_ns - a->t_ns);
  if (!(wall > 0) || a->precise != b->precise) return 0;
  double busy = (double)(b->busy_ns - a->busy_ns) / wall;
  return busy > 0 ? busy : 0;
}
