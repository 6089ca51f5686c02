/* outside.c — the machine's other load while a run measures.
**
** The run's figures (the producer's times, the queue model's what-ifs)
** hold for the cores the run had; another job starting or ending on the
** machine meanwhile moves them.  So the consumer clock samples, in windows
** of STOKE__OUTSIDE_WINDOW_NS from the end of the warm-up, the CPU the
** machine spent less the CPU of this process (os/outside.c): what the rest
** of the machine used, in cores.  Load that moved between windows by
** STOKE__OUTSIDE_MOVED_CORES (and STOKE__OUTSIDE_MOVED_SHARE of the cores)
** is said in the verdict and the JSON (report/), with how far it may have
** moved the figures: the cores it took or gave back against those the run
** had at the quietest window.  A window costs two small file reads; a
** step, a compare with the time the consumer clock already read (a step
** timed by someone else: a clock read every STOKE__OUTSIDE_EVERY steps).
** (Moved here from report/, and the readings to os/outside.c, so that
** every front end gets the figures from the library and the live
** autotuner, below report/, takes the same readings.) */
#include "stats/outside.h"

#include <math.h>
#include <string.h>

bool stoke__outside_differs(double a, double b, double cores) {
  double d = fabs(a - b);
  return d >= STOKE__OUTSIDE_MOVED_CORES &&
         d >= STOKE__OUTSIDE_MOVED_SHARE * cores;
}

static uint64_t bits(double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  return u;
}

static double value(const atomic_uint_least64_t *a) {
  uint64_t u = stoke__counter_get(a);
  double v;
  memcpy(&v, &u, sizeof v);
  return v;
}

static void put(atomic_uint_least64_t *a, double v) {
  atomic_store_explicit(a, bits(v), memory_order_relaxed);
}

/* A reading, with the job's worker processes' CPU counted as its own. */
static int read_job(stoke__outside *o, stoke__outside_reading *r,
                    const void **job) {
  if (stoke__outside_read(r) != 0) return -1;
  *job = atomic_load_explicit(&o->job, memory_order_acquire);
  if (*job) r->self_ns += stoke__stage_block_cpu_ns(*job);
  return 0;
}

void stoke__outside_start(stoke__outside *o) {
  o->ticks = 0;
  atomic_store_explicit(&o->windows, 0, memory_order_relaxed);
  put(&o->min_bits, 0);
  put(&o->max_bits, 0);
  put(&o->sum_bits, 0);
  put(&o->wall_bits, 0);
  o->on = read_job(o, &o->open, &o->open_job) == 0;
}

void stoke__outside_tick_slow(stoke__outside *o, int64_t now_ns) {
  if (!o->on) return;
  if (!now_ns) {
    if (++o->ticks % STOKE__OUTSIDE_EVERY != 0) return;
    now_ns = stoke__now_ns();
  }
  if (now_ns - o->open.t_ns < STOKE__OUTSIDE_WINDOW_NS) return;
  stoke__outside_reading now;
  const void *job;
  if (read_job(o, &now, &job) != 0) {
    o->on = false;
    return;
  }
  if (job != o->open_job) {
    /* Worker processes attached (or gone) within the window: its two
    ** readings count different CPU as the job's, so it is no window. */
    o->open = now;
    o->open_job = job;
    return;
  }
  double other = stoke__outside_cores(&o->open, &now);
  double wall = (double)(now.t_ns - o->open.t_ns);
  uint64_t n = stoke__counter_get(&o->windows);
  if (n == 0 || other < value(&o->min_bits)) put(&o->min_bits, other);
  if (n == 0 || other > value(&o->max_bits)) put(&o->max_bits, other);
  put(&o->sum_bits, value(&o->sum_bits) + other * wall);
  put(&o->wall_bits, value(&o->wall_bits) + wall);
  stoke__counter_add(&o->windows, 1);
  o->open = now;
}

void stoke__outside_stats(const stoke__outside *o, double cores,
                          stoke_stats *st) {
  uint64_t n = stoke__counter_get(&o->windows);
  double lo = value(&o->min_bits), hi = value(&o->max_bits);
  double wall = value(&o->wall_bits);
  if (cores < 1) cores = 1;
  st->outside_windows = (unsigned)n;
  st->outside_window_s = STOKE__OUTSIDE_WINDOW_NS / 1e9;
  st->outside_mean_cores = wall > 0 ? value(&o->sum_bits) / wall : 0;
  st->outside_min_cores = n ? lo : 0;
  st->outside_max_cores = n ? hi : 0;
  st->outside_moved = n >= 2 && stoke__outside_differs(lo, hi, cores);
  /* The cores it took or gave back over those the run had at the
  ** quietest window. */
  double had = cores - lo;
  if (had < 1) had = 1;
  double shift = (hi - lo) / had;
  st->outside_shift_frac = st->outside_moved ? (shift > 1 ? 1 : shift) : 0;
}
