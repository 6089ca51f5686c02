/* clock.c — monotonic and per-thread CPU clocks, sleeping and spinning. */
#define _POSIX_C_SOURCE 200809L
#include "os/os.h"

#include <errno.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static int64_t ts_ns(const struct timespec *ts) {
  return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

int64_t stoke__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts_ns(&ts);
}

int64_t stoke__thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts_ns(&ts);
}

void stoke__sleep_ns(int64_t ns) {
  if (ns <= 0) return;
  /* The default 50 us timer slack would make each sleep late by up to that
  ** much; sleep with 1 us of slack and restore the thread's own (workers
  ** already run with 1 us, see thread.c). */
  int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  if (slack > 1000) prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  /* An absolute deadline, so that a signal's restart does not add time. */
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  int64_t t = ts_ns(&deadline) + ns;
  deadline.tv_sec = t / 1000000000;
  deadline.tv_nsec = t % 1000000000;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) ==
         EINTR) {
  }
  if (slack > 1000) prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
}

void stoke__spin_cpu_ns(int64_t ns) {
  if (ns <= 0) return;
  int64_t end = stoke__thread_cpu_ns() + ns;
  /* Real arithmetic between clock reads, so the work is not just syscalls;
  ** 256 rounds are about a microsecond. */
  volatile uint64_t sink = 0;
  uint64_t x = (uint64_t)ns;
  do {
    for (int i = 0; i < 256; i++) x = stoke__mix64(x);
    sink += x;
  } while (stoke__thread_cpu_ns() < end);
  (void)sink;
}

unsigned stoke__online_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1;
}
