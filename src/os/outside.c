/* outside.c — what the rest of the machine is doing: the busy CPU time of
** every core (/proc/stat) and this process's own CPU time, the two readings
** whose difference over a window is the machine's other load
** (stats/outside.c keeps the windows). */
#define _POSIX_C_SOURCE 200809L
#include "os/os.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* The machine's busy CPU time so far (all cores), or -1. */
static int64_t machine_busy_ns(void) {
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return -1;
  unsigned long long v[8] = {0};
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                 &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
  fclose(f);
  long tck = sysconf(_SC_CLK_TCK);
  if (n < 4 || tck <= 0) return -1;
  /* user nice system idle iowait irq softirq steal: all but idle, iowait */
  unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return (int64_t)(busy * (1000000000ULL / (unsigned long long)tck));
}

int stoke__outside_read(stoke__outside_reading *r) {
  struct timespec ts;
  r->busy_ns = machine_busy_ns();
  if (r->busy_ns < 0 || clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
    return -1;
  r->self_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  r->t_ns = stoke__now_ns();
  return 0;
}

double stoke__outside_cores(const stoke__outside_reading *a,
                            const stoke__outside_reading *b) {
  double wall = (double)(b->t_ns - a->t_ns);
  if (!(wall > 0)) return 0;
  double other = ((double)(b->busy_ns - a->busy_ns) -
                  (double)(b->self_ns - a->self_ns)) / wall;
  return other > 0 ? other : 0; /* the jiffies' rounding against our clock */
}

double stoke__outside_busy_cores(const stoke__outside_reading *a,
                                 const stoke__outside_reading *b) {
  double wall = (double)(b->t_ns - a->t_ns);
  if (!(wall > 0)) return 0;
  double busy = (double)(b->busy_ns - a->busy_ns) / wall;
  return busy > 0 ? busy : 0;
}
