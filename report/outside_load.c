/* outside_load.c — the machine's other load while a run measures.
**
** The run's figures (the producer's times, the queue model's what-ifs)
** hold for the cores the run had; another job starting or ending on the
** machine meanwhile moves them.  So the run samples, in windows of
** REPORT_OUTSIDE_WINDOW_NS while it measures, the CPU the machine spent
** (/proc/stat: every state but idle and iowait) less the CPU of this process
** (its own clock, every thread of it: the loader and the training loop):
** what the rest of the machine used, in cores.  Load that moved between
** windows by REPORT_OUTSIDE_MOVED_CORES (or REPORT_OUTSIDE_MOVED_SHARE of
** the cores) is said in the verdict and the JSON, with how far it may have
** moved the figures: the cores it took or gave back against those the run
** had at the quietest window.  A window costs two small file reads; the
** run's consumer asks every REPORT_OUTSIDE_EVERY steps, and the clock is
** read only then. */
#define _POSIX_C_SOURCE 200809L
#include "report.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t process_cpu_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return -1;
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

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

static bool sample(int64_t *t, int64_t *busy, int64_t *self) {
  *busy = machine_busy_ns();
  *self = process_cpu_ns();
  *t = mono_ns();
  return *busy >= 0 && *self >= 0;
}

void report_outside_start(report_outside *o) {
  memset(o, 0, sizeof *o);
  o->on = sample(&o->t_ns, &o->busy_ns, &o->self_ns);
}

/* Close the window when it is long enough (always when `last`). */
static void window(report_outside *o, int64_t now, bool last) {
  if (!o->on || now - o->t_ns < (last ? REPORT_OUTSIDE_WINDOW_NS / 4
                                      : REPORT_OUTSIDE_WINDOW_NS))
    return;
  int64_t t, busy, self;
  if (!sample(&t, &busy, &self)) {
    o->on = false;
    return;
  }
  double wall = (double)(t - o->t_ns);
  double other = ((double)(busy - o->busy_ns) - (double)(self - o->self_ns)) /
                 wall;
  if (other < 0) other = 0; /* the jiffies' rounding against our clock */
  if (o->windows == 0 || other < o->min_cores) o->min_cores = other;
  if (o->windows == 0 || other > o->max_cores) o->max_cores = other;
  o->sum_cores += other * wall;
  o->sum_wall += wall;
  o->windows++;
  o->t_ns = t;
  o->busy_ns = busy;
  o->self_ns = self;
}

void report_outside_tick(report_outside *o) {
  if (!o->on || ++o->ticks % REPORT_OUTSIDE_EVERY != 0) return;
  window(o, mono_ns(), false);
}

void report_outside_end(report_outside *o) {
  window(o, mono_ns(), true);
  o->on = false;
}

double report_outside_mean(const report_outside *o) {
  return o->sum_wall > 0 ? o->sum_cores / o->sum_wall : 0;
}

bool report_outside_moved(const report_outside *o, double cores,
                          double *shift) {
  double moved = o->max_cores - o->min_cores;
  double had = cores - o->min_cores; /* the run's cores at the quietest */
  if (had < 1) had = 1;
  if (shift) *shift = o->windows >= 2 ? (moved / had > 1 ? 1 : moved / had)
                                      : 0;
  return o->windows >= 2 && moved >= REPORT_OUTSIDE_MOVED_CORES &&
         moved >= REPORT_OUTSIDE_MOVED_SHARE * cores;
}

/* The cores the shift is measured against: 1 where the system does not
** say (report_online_cores' 0), so that the share rule stays a rule. */
static double online_cores(void) {
  double n = report_online_cores();
  return n > 0 ? n : 1;
}

cJSON *report_outside_json(const report_outside *o) {
  cJSON *j = cJSON_CreateObject();
  if (!j) return NULL;
  double shift = 0;
  bool moved = report_outside_moved(o, online_cores(), &shift);
  cJSON_AddNumberToObject(j, "windows", (double)o->windows);
  cJSON_AddNumberToObject(j, "window_s", REPORT_OUTSIDE_WINDOW_NS / 1e9);
  cJSON_AddNumberToObject(j, "mean_cores", report_outside_mean(o));
  /* Before a window both are 0 (report_outside_start and cli_run clear
  ** the struct). */
  cJSON_AddNumberToObject(j, "min_cores", o->min_cores);
  cJSON_AddNumberToObject(j, "max_cores", o->max_cores);
  cJSON_AddBoolToObject(j, "moved", moved);
  cJSON_AddNumberToObject(j, "shift_frac", moved ? shift : 0);
  return j;
}

void report_outside_print(FILE *f, const report_outside *o) {
  double cores = online_cores(), shift = 0;
  if (!report_outside_moved(o, cores, &shift)) return;
  fprintf(f,
          "note: the machine's other load moved from %.1f to %.1f cores (of "
          "%.0f) while this run measured: its figures may be off by up to "
          "%.0f%%\n",
          o->min_cores, o->max_cores, cores, 100 * shift);
}
