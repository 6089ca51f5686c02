/* busy.c — a simulated consumer: the tool's and the Python module's
** training step (sleep or spin for a time) and the calling thread's run
** delay, the one figure of Linux schedstat a consumer reads about itself.
** The sleep and the spin are the synthetic source's own (clock.c), so a
** step and a sample of the same kind cost time the same way. */
#define _GNU_SOURCE

#include <stdio.h>

#include "os/os.h"

int64_t stoke__thread_run_delay_ns(void) {
  FILE *f = fopen("/proc/thread-self/schedstat", "r");
  if (!f) return -1;
  long long run = 0, delay = -1;
  if (fscanf(f, "%lld %lld", &run, &delay) != 2) delay = -1;
  fclose(f);
  return (int64_t)delay;
}

int stoke_step_simulate(int kind, int64_t ns) {
  switch (kind) {
  case STOKE_STEP_NONE: return 0;
  case STOKE_STEP_SLEEP: stoke__sleep_ns(ns); return 0;
  case STOKE_STEP_SPIN: stoke__spin_cpu_ns(ns); return 0;
  default: return STOKE_EINVAL;
  }
}

int stoke_thread_run_delay(int64_t *ns) {
  if (!ns) return STOKE_EINVAL;
  *ns = stoke__thread_run_delay_ns();
  return *ns < 0 ? STOKE_ENOTSUP : 0;
}
