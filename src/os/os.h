/* os.h — what stoke asks of the operating system (src/os/): clocks,
** sleeping and spinning, memory advice, named threads, scheduler
** statistics, and the table of system calls (os/syscalls.h) that file
** access and thread starts go through.  Only src/os/ is OS-specific.
** Nothing here is API. */
#ifndef STOKE_OS_OS_H
#define STOKE_OS_OS_H

#include "core/core.h"

/* ---- clocks and memory (clock.c, memory.c) ------------------------------- */

int64_t stoke__now_ns(void);        /* CLOCK_MONOTONIC */
int64_t stoke__thread_cpu_ns(void); /* CLOCK_THREAD_CPUTIME_ID */
/* Sleep ns (restarting after signals). */
void stoke__sleep_ns(int64_t ns);
/* Burn ns of this thread's CPU time (not wall time: on a busy machine the
** call takes longer, as real CPU-bound work would). */
void stoke__spin_cpu_ns(int64_t ns);
unsigned stoke__online_cpus(void);
/* Drop the whole pages of a read-only file mapping inside [p, p + n) from
** the resident set (memory.c). */
void stoke__drop_pages(const void *p, size_t n);
/* Advise transparent huge pages for the 2 MiB pages inside [p, p + n) of
** anonymous memory (memory.c); advice only. */
void stoke__advise_huge(void *p, size_t n);
/* Gives the whole pages inside [p, p + n) back to the OS (private memory:
** they read as zeros when touched again); the bytes released. */
uint64_t stoke__release_pages(void *p, size_t n);
/* The memory this process may have: the machine's RAM, or less where its
** cgroup (v2 memory.max) says so.  0 when neither can be read. */
uint64_t stoke__memory_bytes(void);

/* ---- threads (thread.c) -------------------------------------------------- */

/* The table of system calls that file access and thread starts go through
** (os/syscalls.h); NULL wherever one is taken means the real calls. */
typedef struct stoke__sys stoke__sys;

typedef struct stoke__thread stoke__thread; /* wraps pthread_t */
/* Start fn(arg) on a thread named `name` (at most 15 chars) with an explicit
** stack size, through sys's thread_create (NULL: pthread_create); the
** thread's timer slack is set to 1 us so that sleeps and condition waits
** wake on time.  Returns 0, STOKE_ENOMEM or STOKE_ETHREAD. */
int stoke__thread_start(stoke__thread **out, const stoke_allocator *a,
                        const stoke__sys *sys, const char *name,
                        void *(*fn)(void *), void *arg);
void stoke__thread_join(stoke__thread *t, const stoke_allocator *a);
/* Puts the calling thread under SCHED_BATCH (its nice value kept): threads
** it wakes are not preempted by it on wake-up.  0, or the errno. */
int stoke__thread_sched_batch(void);

/* ---- scheduler statistics (schedstat.c) ---------------------------------- */

/* Sum the run time and the run delay (runnable, not running) of this
** process's threads whose name starts with prefix.  Returns the threads
** found, or -1 where the OS does not say (then both are 0). */
int stoke__schedstat_threads(const char *prefix, int64_t *run_ns,
                             int64_t *delay_ns);

typedef struct stoke__sched_thread {
  long tid;
  int64_t run_ns, delay_ns; /* since the thread started */
} stoke__sched_thread;

/* Those threads one by one (at most cap); the count, or -1. */
int stoke__schedstat_list(const char *prefix, stoke__sched_thread *out,
                          size_t cap);
/* Over a window from base to now: the threads that ran in it (their run
** time grew) and their run time and run delay in it. */
int stoke__schedstat_window(const stoke__sched_thread *base, size_t n_base,
                            const stoke__sched_thread *now, size_t n_now,
                            int64_t *run_ns, int64_t *delay_ns);

/* ---- the machine's other load (outside.c) ------------------------------- */

/* One reading: the machine's busy CPU time (every core, all but idle and
** iowait: the online CPUs' time less /proc/uptime's idle, to 10 ms in
** all, or else /proc/stat's busy states, to a tick per core and state),
** this process's CPU time (every thread), and when.  Two readings of
** different kinds (precise) are not compared. */
typedef struct stoke__outside_reading {
  int64_t t_ns, busy_ns, self_ns;
  bool precise;                  /* busy_ns from /proc/uptime */
  /* This process's threads (/proc/self/task/<tid>/schedstat): their time
  ** on a core and their run delay (runnable, waiting for one) so far,
  ** summed, and which threads they were: sched_threads of them (-1:
  ** unknown, or more than STOKE__SCHED_MAX_THREADS), sched_ids a sum of
  ** their ids mixed.  Two readings of different threads are not compared
  ** (a thread that ended takes its sums with it). */
  int64_t sched_run_ns, sched_delay_ns;
  int sched_threads;
  uint64_t sched_ids;
} stoke__outside_reading;

/* The most threads a reading reads: one small file each, at every window's
** close, about 2.5 us each (21 threads: 51 us, on a 2-core Intel Xeon VM),
** so 0.3 ms at most, under 1% of the shortest window (50 ms).  A process
** with more has no delay figures. */
#define STOKE__SCHED_MAX_THREADS 128

/* Take a reading: 0, or -1 where /proc/stat cannot be read (then the
** outside load is unknown).  Two small file reads' cost; the sched_*
** fields are left unknown (sched_threads -1). */
int stoke__outside_read(stoke__outside_reading *r);
/* Fill the sched_* fields of a reading (schedstat.c): one small file read
** per thread of this process.  0, or -1 with sched_threads -1 (no
** schedstat, or more than STOKE__SCHED_MAX_THREADS threads). */
int stoke__outside_read_sched(stoke__outside_reading *r);
/* Over readings a to b, the cores' worth this process's threads waited
** for a core (*delay) and ran (*run): false where they cannot be compared
** (unknown, or not the same threads). */
bool stoke__outside_sched_cores(const stoke__outside_reading *a,
                                const stoke__outside_reading *b,
                                double *delay, double *run);
/* The cores the rest of the machine kept busy between readings a and b
** (never negative: the kernel's ticks round against the process clock). */
double stoke__outside_cores(const stoke__outside_reading *a,
                            const stoke__outside_reading *b);
/* The cores the whole machine kept busy between them, this process
** included: with the other load it tells another job's arrival (the
** machine busier) from this process taking or giving back cores that
** other jobs then used (the machine as busy). */
double stoke__outside_busy_cores(const stoke__outside_reading *a,
                                 const stoke__outside_reading *b);

/* ---- a simulated consumer (busy.c) ---------------------------------------- */

/* The calling thread's run delay in ns from /proc/thread-self/schedstat,
** or -1 when the kernel does not say (the public stoke_thread_run_delay
** and stoke_step_simulate are busy.c's too). */
int64_t stoke__thread_run_delay_ns(void);


/* ---- the live view's files (live_files.c) -------------------------------- */

/* The user's folder for published snapshots into buf[0..cap):
** $XDG_RUNTIME_DIR/stoke when XDG_RUNTIME_DIR is an absolute path to a
** folder of the user's, else /dev/shm/stoke-UID.  With `create` it is
** made (mode 0700) when missing.  It must be a folder (not a link), the
** user's, and closed to group and others.  0, STOKE_EINVAL (cap), or
** STOKE_EIO with the reason in the thread's error. */
int stoke__live_dir(char *buf, size_t cap, bool create);

/* A new file of `bytes` zero bytes at path (O_EXCL, O_NOFOLLOW, mode 0600),
** mapped shared and writable into *map.  0 or the errno (EEXIST: taken). */
int stoke__shm_create(const char *path, size_t bytes, void **map);
/* Map an existing file read-only, if it is a plain file of the user's,
** closed to others, at least min_bytes long (O_NOFOLLOW): *map, *bytes.
** 0 or the errno (EPERM: not the user's or open to others; EINVAL: too
** short). */
int stoke__shm_open_read(const char *path, size_t min_bytes,
                         const void **map, size_t *bytes);
void stoke__shm_unmap(const void *map, size_t bytes);

/* The start time of process pid (field 22 of /proc/PID/stat, clock ticks
** since boot): 0 with *ticks set, ESRCH when there is no such process, or
** another errno where /proc does not say. */
int stoke__proc_start_ticks(long pid, uint64_t *ticks);
/* This process's command line, its arguments joined by spaces and cut to
** cap - 1 bytes ("" where /proc does not say). */
void stoke__proc_cmdline(char *buf, size_t cap);

/* The files in folder dir named PID-ID.live: at most cap of them into pids
** and ids; returns how many there are, or -1 when dir cannot be read. */
typedef struct stoke__live_name {
  long pid;
  unsigned id;
} stoke__live_name;
int stoke__live_scan(const char *dir, stoke__live_name *out, size_t cap);

#endif /* STOKE_OS_OS_H */
