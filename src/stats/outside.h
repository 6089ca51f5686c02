/* outside.h — the machine's other load while a run measures
** (stats/outside.c), in windows, and the one rule that says when it moved:
** used by the consumer clock (cclock.c: the loader's and stoke_twoclock's
** stoke_stats.outside_*).  The live autotuner takes the same readings
** (os/outside.c) per window of its own and holds its decisions on a finer
** threshold (model/autotune_controller.c).  Nothing here is API. */
#ifndef STOKE_STATS_OUTSIDE_H
#define STOKE_STATS_OUTSIDE_H

#include "os/os.h"
#include "stats/stats.h"

#define STOKE__OUTSIDE_WINDOW_NS 500000000LL /* a window: 0.5 s */
/* The first windows are shorter, each as long as the measuring before it
** but at least this (0.05, 0.05, 0.1, 0.2, 0.4 s, then 0.5 s), so that a
** run that measures 0.1 s has two windows to compare: the truth grid's
** points measure 0.03-0.3 s, and a load that moved within one must be
** seen.  A window's reading is rounded to 10 ms of CPU in all
** (os/outside.c: /proc/uptime), a fifth of a core on 50 ms: below the
** move's 0.5 cores even where both windows err the opposite ways. */
#define STOKE__OUTSIDE_FIRST_NS 50000000LL
/* The open window, from the last closed one to a snapshot, counts as a
** window of its own when it spans at least this (the shortest window)
** and no more than its whole length (longer: the steps stopped, and the
** time since is not the run's). */
#define STOKE__OUTSIDE_TAIL_NS 50000000LL
#define STOKE__OUTSIDE_EVERY 4               /* steps between clock reads */
#define STOKE__OUTSIDE_MOVED_CORES 0.5       /* moved: by this many cores */
#define STOKE__OUTSIDE_MOVED_SHARE 0.15      /* and this share of them */

/* The second signal: this process's threads' run delay (os/schedstat.c),
** in cores' worth of waiting per window.  Beside CPU-bound workers that
** already fill the cores, a new job gets only its fair share and the
** other cores above barely move (a busy loop beside 4 workers on 2 cores
** takes 0.4 of one); what it takes shows as the run's threads waiting more
** and running less by as much.  So the cores taken from the run between
** the windows of least and most delay are the smaller of the delay's rise
** and the fall of the threads' own time on a core: a loader that
** oversubscribes its own cores waits a lot, steadily, and where its
** demand comes in bursts its delay rises and falls with its own time on a
** core (more threads runnable: more running too, where cores were idle,
** or as many, where they were full); neither counts.  Both figures are
** the kernel's ns, with no 10 ms rounding for the threshold to allow for
** (the other load's 0.5 cores is 0.3 and that rounding); a daemon's 5 ms
** on a 50 ms window is a tenth of a core.  So a quarter of a core and a
** tenth of the cores (the live autotuner's finer threshold) count as a
** move: the busy loop's 0.4 is seen, a steady run's jitter is not.
** Limit: a run whose own demand turns from bursts to steady at the same
** mean (half the time 4 threads runnable, then always 2) waits less and
** runs more, as if a load had gone; a steady run does not do that. */
#define STOKE__OUTSIDE_DELAY_CORES 0.25
#define STOKE__OUTSIDE_DELAY_SHARE 0.10

/* The cores taken from (> 0) the run between a window of less delay
** (d_lo, its threads running run_lo cores) and one of more (d_hi,
** run_hi): the delay's rise bounded by the running's fall, never
** negative. */
double stoke__outside_taken(double d_lo, double run_lo, double d_hi,
                            double run_hi);
/* Are they enough to have moved the run's figures (of `cores`)? */
bool stoke__outside_taken_moved(double taken, double cores);

/* Do two loads (in cores, of `cores` online) differ enough to have moved
** a run's figures?  By STOKE__OUTSIDE_MOVED_CORES and by
** STOKE__OUTSIDE_MOVED_SHARE of the cores: a tick's noise on a window of
** a large machine is not a move. */
bool stoke__outside_differs(double a, double b, double cores);

/* The windows of one run.  The open window and the tick count are the
** consumer thread's; the closed windows' summary is written by it and read
** by stats from any thread (atomic, relaxed: stats only; a reader may see
** one window's minimum beside the previous one's maximum). */
typedef struct stoke__outside {
  bool on;                        /* sampling: started and /proc readable */
  uint64_t ticks;
  stoke__outside_reading open;    /* the open window's start */
  int64_t start_ns;               /* when the measuring started */
  int64_t want_ns;                /* the open window's length */
  /* The open window's start and length again, for a snapshot's tail
  ** (any thread): a seqlock, odd while the consumer writes them. */
  atomic_uint_least64_t pub_seq;
  atomic_int_least64_t pub_t, pub_busy, pub_self, pub_want;
  atomic_int_least64_t pub_srun, pub_sdelay;
  atomic_int pub_sthreads;
  atomic_uint_least64_t pub_sids;
  atomic_bool pub_precise;
  _Atomic(const void *) pub_job;
  /* A stage block whose producers are this job's worker processes
  ** (stoke_twoclock_attach_stages), or NULL: their CPU is the job's own,
  ** not the machine's other load.  Set by any thread; open_job is the
  ** block the open window's reading counted. */
  _Atomic(const void *) job;
  const void *open_job;
  atomic_uint_least64_t windows;  /* closed windows */
  atomic_uint_least64_t min_bits, max_bits; /* doubles' bits: cores */
  atomic_uint_least64_t sum_bits, wall_bits; /* cores x ns, ns: the mean */
  /* The run delay's windows (those whose two readings saw the same
  ** threads): the least and most delay, in cores, and the cores the
  ** threads ran in those two windows. */
  atomic_uint_least64_t delay_windows;
  atomic_uint_least64_t dmin_bits, dmax_bits, run_at_dmin_bits,
      run_at_dmax_bits;
} stoke__outside;

/* Start measuring (the warm-up is over).  Consumer thread. */
void stoke__outside_start(stoke__outside *o);
/* The same from a reading taken by the caller (r NULL: none, /proc/stat
** unreadable): the unit tests drive the windows with made-up readings. */
void stoke__outside_start_at(stoke__outside *o,
                             const stoke__outside_reading *r);
/* A measured step handed out at now_ns (the consumer clock's own reading;
** 0: none, then the clock is read every STOKE__OUTSIDE_EVERY steps): a
** window of STOKE__OUTSIDE_WINDOW_NS is closed once it is over.  Consumer
** thread. */
void stoke__outside_tick_slow(stoke__outside *o, int64_t now_ns);
/* Inline: on most steps a compare and nothing else. */
static inline void stoke__outside_tick(stoke__outside *o, int64_t now_ns) {
  if (o->on && (!now_ns || now_ns - o->open.t_ns >= o->want_ns))
    stoke__outside_tick_slow(o, now_ns);
}
/* Close the open window on a reading taken by the caller, if it is over
** (r NULL: /proc/stat became unreadable; sampling stops).  Consumer
** thread. */
void stoke__outside_tick_at(stoke__outside *o,
                            const stoke__outside_reading *r);

/* What it measured so far, as stoke_stats' outside_* (cores: the online
** CPUs the move is judged against), the open window included as a tail
** where it spans STOKE__OUTSIDE_TAIL_NS and at most its length (a reading
** taken now).  Any thread. */
void stoke__outside_stats(const stoke__outside *o, double cores,
                          stoke_stats *st);
/* The same with the tail ending at the caller's reading (NULL: no tail). */
void stoke__outside_stats_at(const stoke__outside *o, double cores,
                             const stoke__outside_reading *now,
                             stoke_stats *st);

#endif /* STOKE_STATS_OUTSIDE_H */
