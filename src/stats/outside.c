/* outside.c — the machine's other load while a run measures.
**
** The run's figures (the producer's times, the queue model's what-ifs)
** hold for the cores the run had; another job starting or ending on the
** machine meanwhile moves them.  So the consumer clock samples, in windows
** of STOKE__OUTSIDE_WINDOW_NS from the end of the warm-up (the first ones
** shorter, from STOKE__OUTSIDE_FIRST_NS, and the open one counted at a
** snapshot: a short run has windows too), the CPU the machine spent less
** the CPU of this process (os/outside.c): what the rest of the machine
** used, in cores.  Load that moved between windows by
** STOKE__OUTSIDE_MOVED_CORES (and STOKE__OUTSIDE_MOVED_SHARE of the cores)
** is said in the verdict and the JSON (report/), with how far it may have
** moved the figures: the cores it took or gave back against those the run
** had at the quietest window.  Beside it, the run delay of this process's
** threads per window (stats/outside.h, STOKE__OUTSIDE_DELAY_CORES): a new
** job on full cores takes its share from the run's threads, which then
** wait, where the other load barely moves.  A window costs two small file
** reads and one per thread of the process (at most
** STOKE__SCHED_MAX_THREADS); a step, a compare with the time the consumer
** clock already read (a step timed by someone else: a clock read every
** STOKE__OUTSIDE_EVERY steps).
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

double stoke__outside_taken(double d_lo, double run_lo, double d_hi,
                            double run_hi) {
  double rise = d_hi - d_lo, fall = run_lo - run_hi;
  double taken = rise < fall ? rise : fall;
  return taken > 0 ? taken : 0;
}

bool stoke__outside_taken_moved(double taken, double cores) {
  return taken >= STOKE__OUTSIDE_DELAY_CORES &&
         taken >= STOKE__OUTSIDE_DELAY_SHARE * cores;
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

/* The job's worker processes' CPU counted as its own in a reading. */
static void add_job(const void *job, stoke__outside_reading *r) {
  if (job) r->self_ns += stoke__stage_block_cpu_ns(job);
}

/* The open window's start, for a snapshot's tail on another thread. */
static void publish_open(stoke__outside *o) {
  uint64_t seq = stoke__counter_get(&o->pub_seq);
  atomic_store_explicit(&o->pub_seq, seq + 1, memory_order_relaxed);
  /* The odd number is seen before any word changes: each word is stored
  ** with release and read_open loads each with acquire (no fence: gcc's
  ** TSan does not support atomic_thread_fence, -Wtsan). */
  atomic_store_explicit(&o->pub_t, o->open.t_ns, memory_order_release);
  atomic_store_explicit(&o->pub_busy, o->open.busy_ns, memory_order_release);
  atomic_store_explicit(&o->pub_self, o->open.self_ns, memory_order_release);
  atomic_store_explicit(&o->pub_want, o->want_ns, memory_order_release);
  atomic_store_explicit(&o->pub_srun, o->open.sched_run_ns,
                        memory_order_release);
  atomic_store_explicit(&o->pub_sdelay, o->open.sched_delay_ns,
                        memory_order_release);
  atomic_store_explicit(&o->pub_sthreads, o->open.sched_threads,
                        memory_order_release);
  atomic_store_explicit(&o->pub_sids, o->open.sched_ids,
                        memory_order_release);
  atomic_store_explicit(&o->pub_precise, o->open.precise,
                        memory_order_release);
  atomic_store_explicit(&o->pub_job, o->open_job, memory_order_release);
  atomic_store_explicit(&o->pub_seq, seq + 2, memory_order_release);
}

/* A new window opens at o->open: as long as the measuring before it,
** between STOKE__OUTSIDE_FIRST_NS and STOKE__OUTSIDE_WINDOW_NS. */
static void open_window(stoke__outside *o) {
  int64_t want = o->open.t_ns - o->start_ns;
  if (want < STOKE__OUTSIDE_FIRST_NS) want = STOKE__OUTSIDE_FIRST_NS;
  if (want > STOKE__OUTSIDE_WINDOW_NS) want = STOKE__OUTSIDE_WINDOW_NS;
  o->want_ns = want;
  publish_open(o);
}

void stoke__outside_start_at(stoke__outside *o,
                             const stoke__outside_reading *r) {
  o->ticks = 0;
  atomic_store_explicit(&o->windows, 0, memory_order_relaxed);
  put(&o->min_bits, 0);
  put(&o->max_bits, 0);
  put(&o->sum_bits, 0);
  put(&o->wall_bits, 0);
  atomic_store_explicit(&o->delay_windows, 0, memory_order_relaxed);
  put(&o->dmin_bits, 0);
  put(&o->dmax_bits, 0);
  put(&o->run_at_dmin_bits, 0);
  put(&o->run_at_dmax_bits, 0);
  o->on = r != NULL;
  if (!o->on) {
    o->want_ns = 0; /* published: no tail */
    publish_open(o);
    return;
  }
  o->open = *r;
  o->open_job = atomic_load_explicit(&o->job, memory_order_acquire);
  add_job(o->open_job, &o->open);
  o->start_ns = o->open.t_ns;
  open_window(o);
}

/* A reading with the threads' run delay (left unknown without schedstat). */
static int read_all(stoke__outside_reading *r) {
  if (stoke__outside_read(r) != 0) return -1;
  (void)stoke__outside_read_sched(r);
  return 0;
}

void stoke__outside_start(stoke__outside *o) {
  stoke__outside_reading r;
  stoke__outside_start_at(o, read_all(&r) == 0 ? &r : NULL);
}

/* One window's load (cores) over wall ns into the closed windows. */
static void close_window(stoke__outside *o, double other, double wall) {
  uint64_t n = stoke__counter_get(&o->windows);
  if (n == 0 || other < value(&o->min_bits)) put(&o->min_bits, other);
  if (n == 0 || other > value(&o->max_bits)) put(&o->max_bits, other);
  put(&o->sum_bits, value(&o->sum_bits) + other * wall);
  put(&o->wall_bits, value(&o->wall_bits) + wall);
  stoke__counter_add(&o->windows, 1);
}

/* One window's run delay and running (cores) into the delay's windows.
** The least and most delay keep the running beside them: the cores
** taken are judged between those two windows. */
static void close_delay(stoke__outside *o, double delay, double run) {
  uint64_t n = stoke__counter_get(&o->delay_windows);
  if (n == 0 || delay < value(&o->dmin_bits)) {
    put(&o->dmin_bits, delay);
    put(&o->run_at_dmin_bits, run);
  }
  if (n == 0 || delay > value(&o->dmax_bits)) {
    put(&o->dmax_bits, delay);
    put(&o->run_at_dmax_bits, run);
  }
  stoke__counter_add(&o->delay_windows, 1);
}

void stoke__outside_tick_at(stoke__outside *o,
                            const stoke__outside_reading *r) {
  if (!o->on) return;
  if (!r) {
    o->on = false;
    o->want_ns = 0;
    publish_open(o);
    return;
  }
  if (r->t_ns - o->open.t_ns < o->want_ns) return;
  stoke__outside_reading now = *r;
  const void *job = atomic_load_explicit(&o->job, memory_order_acquire);
  add_job(job, &now);
  if (job != o->open_job) {
    /* Worker processes attached (or gone) within the window: its two
    ** readings count different CPU as the job's, so it is no window. */
    o->open = now;
    o->open_job = job;
    open_window(o);
    return;
  }
  close_window(o, stoke__outside_cores(&o->open, &now),
               (double)(now.t_ns - o->open.t_ns));
  double delay, run;
  if (stoke__outside_sched_cores(&o->open, &now, &delay, &run))
    close_delay(o, delay, run);
  o->open = now;
  open_window(o);
}

void stoke__outside_tick_slow(stoke__outside *o, int64_t now_ns) {
  if (!o->on) return;
  if (!now_ns) {
    if (++o->ticks % STOKE__OUTSIDE_EVERY != 0) return;
    now_ns = stoke__now_ns();
  }
  if (now_ns - o->open.t_ns < o->want_ns) return;
  stoke__outside_reading now;
  stoke__outside_tick_at(o, read_all(&now) == 0 ? &now : NULL);
}

/* The open window's start, length and job as published (false: being
** written on every try, or sampling never started). */
static bool read_open(const stoke__outside *o, stoke__outside_reading *r,
                      int64_t *want, const void **job) {
  stoke__outside *m = (stoke__outside *)o; /* atomics: read only */
  for (int tries = 0; tries < 8; tries++) {
    uint64_t s1 = atomic_load_explicit(&m->pub_seq, memory_order_acquire);
    if (s1 == 0) return false;
    if (s1 & 1) continue;
    /* Acquire: each word is read before the number is read again (no
    ** fence, which gcc's TSan does not support). */
    r->t_ns = atomic_load_explicit(&m->pub_t, memory_order_acquire);
    r->busy_ns = atomic_load_explicit(&m->pub_busy, memory_order_acquire);
    r->self_ns = atomic_load_explicit(&m->pub_self, memory_order_acquire);
    r->sched_run_ns =
        atomic_load_explicit(&m->pub_srun, memory_order_acquire);
    r->sched_delay_ns =
        atomic_load_explicit(&m->pub_sdelay, memory_order_acquire);
    r->sched_threads =
        atomic_load_explicit(&m->pub_sthreads, memory_order_acquire);
    r->sched_ids = atomic_load_explicit(&m->pub_sids, memory_order_acquire);
    *want = atomic_load_explicit(&m->pub_want, memory_order_acquire);
    r->precise =
        atomic_load_explicit(&m->pub_precise, memory_order_acquire);
    *job = atomic_load_explicit(&m->pub_job, memory_order_acquire);
    if (atomic_load_explicit(&m->pub_seq, memory_order_relaxed) == s1)
      return true;
  }
  return false;
}

void stoke__outside_stats_at(const stoke__outside *o, double cores,
                             const stoke__outside_reading *now,
                             stoke_stats *st) {
  uint64_t n = stoke__counter_get(&o->windows);
  double lo = value(&o->min_bits), hi = value(&o->max_bits);
  double wall = value(&o->wall_bits), sum = value(&o->sum_bits);
  uint64_t dn = stoke__counter_get(&o->delay_windows);
  double dlo = value(&o->dmin_bits), dhi = value(&o->dmax_bits);
  double run_lo = value(&o->run_at_dmin_bits);
  double run_hi = value(&o->run_at_dmax_bits);
  if (cores < 1) cores = 1;
  /* The tail: the open window so far, when it is long enough to say
  ** something and not longer than it would have been (the steps went on
  ** until lately).  A run shorter than a window, or the end of one
  ** after its last whole window, is measured too. */
  stoke__outside_reading open, end;
  int64_t want;
  const void *job;
  if (now && read_open(o, &open, &want, &job)) {
    end = *now;
    add_job(job, &end);
    int64_t span = end.t_ns - open.t_ns;
    if (span >= STOKE__OUTSIDE_TAIL_NS && span <= want &&
        job == atomic_load_explicit(&o->job, memory_order_acquire)) {
      double other = stoke__outside_cores(&open, &end);
      if (n == 0 || other < lo) lo = other;
      if (n == 0 || other > hi) hi = other;
      sum += other * (double)span;
      wall += (double)span;
      n++;
      double delay, run;
      if (stoke__outside_sched_cores(&open, &end, &delay, &run)) {
        if (dn == 0 || delay < dlo) {
          dlo = delay;
          run_lo = run;
        }
        if (dn == 0 || delay > dhi) {
          dhi = delay;
          run_hi = run;
        }
        dn++;
      }
    }
  }
  st->outside_windows = (unsigned)n;
  st->outside_window_s = STOKE__OUTSIDE_WINDOW_NS / 1e9;
  st->outside_mean_cores = wall > 0 ? sum / wall : 0;
  st->outside_min_cores = n ? lo : 0;
  st->outside_max_cores = n ? hi : 0;
  st->outside_other_moved = n >= 2 && stoke__outside_differs(lo, hi, cores);
  st->outside_delay_windows = (unsigned)dn;
  st->outside_delay_min_cores = dn ? dlo : 0;
  st->outside_delay_max_cores = dn ? dhi : 0;
  double taken = dn >= 2 ? stoke__outside_taken(dlo, run_lo, dhi, run_hi) : 0;
  st->outside_taken_cores = taken;
  st->outside_delay_moved =
      dn >= 2 && stoke__outside_taken_moved(taken, cores);
  st->outside_moved = st->outside_other_moved || st->outside_delay_moved;
  /* The cores it took or gave back over those the run had at the
  ** quietest window; for the delay, the cores taken over those the
  ** threads ran at the window of least delay. */
  double had = cores - lo;
  if (had < 1) had = 1;
  double shift = st->outside_other_moved ? (hi - lo) / had : 0;
  double had_run = run_lo > 1 ? run_lo : 1;
  if (st->outside_delay_moved && taken / had_run > shift)
    shift = taken / had_run;
  st->outside_shift_frac = shift > 1 ? 1 : shift;
}

void stoke__outside_stats(const stoke__outside *o, double cores,
                          stoke_stats *st) {
  stoke__outside_reading now;
  bool have = atomic_load_explicit(&((stoke__outside *)o)->pub_seq,
                                   memory_order_acquire) != 0 &&
              read_all(&now) == 0;
  stoke__outside_stats_at(o, cores, have ? &now : NULL, st);
}
