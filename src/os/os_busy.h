/* os_busy.h — a simulated consumer's step and the calling thread's run
** delay, for the public stoke_step_simulate and stoke_thread_run_delay
** (src/os/busy.c).  The sleeping and spinning themselves are clock.c's. */
#ifndef STOKE_OS_BUSY_H
#define STOKE_OS_BUSY_H

#include <stdint.h>

/* The calling thread's run delay in ns from /proc/thread-self/schedstat,
** or -1 when the kernel does not say. */
int64_t stoke__thread_run_delay_ns(void);

#endif /* STOKE_OS_BUSY_H */
