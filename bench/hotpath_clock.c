/* hotpath_clock.c — a slower clock for profiling the loader under valgrind.
**
** The loader makes decisions from its own clocks: a sample cheaper than
** 2 us is timed with its chunk instead of on its own, and a chunk is sized
** to take about 50 us.  Under callgrind everything runs some 50 times
** slower, so the in-memory tensor case (about 20 ns a sample natively)
** would take the per-sample path that a native run never takes, and its
** instruction count would describe the wrong code.  Preloaded into the
** profiled process (LD_PRELOAD), this clock_gettime divides the monotonic
** and CPU-time clocks by HOTPATH_CLOCK_DIV (default 1000), so that each
** decision comes out as it does natively.  The wall clock is left alone.
**
** Only for a run without timeouts: a deadline computed from the divided
** clock lies in the past for the kernel.  The hot-path case sets none.
**
**   cc -O2 -shared -fPIC -o hotpath_clock.so hotpath_clock.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

typedef int (*clock_fn)(clockid_t, struct timespec *);

/* Set once, before main and before any thread, by the constructor. */
static clock_fn real_clock_gettime;
static int64_t clock_div = 1000;

__attribute__((constructor)) static void hotpath_clock_init(void) {
  real_clock_gettime = (clock_fn)dlsym(RTLD_NEXT, "clock_gettime");
  const char *e = getenv("HOTPATH_CLOCK_DIV");
  long long v = e ? strtoll(e, NULL, 10) : 0;
  if (v > 0) clock_div = v;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
  if (!real_clock_gettime) hotpath_clock_init();
  int rc = real_clock_gettime(id, ts);
  if (rc != 0 || id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE ||
      id == CLOCK_TAI)
    return rc;
  int64_t ns = ((int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec) / clock_div;
  ts->tv_sec = ns / 1000000000;
  ts->tv_nsec = ns % 1000000000;
  return rc;
}
