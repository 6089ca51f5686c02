/* thread.c — named worker threads with an explicit stack size, started
** through the syscall table so that tests can refuse any one of them. */
#define _GNU_SOURCE /* pthread_setname_np */
#include "os/syscalls.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/prctl.h>

struct stoke__thread {
  pthread_t tid;
  void *(*fn)(void *);
  void *arg;
  char name[16];
};

/* Enough for a decoder's stack frames; glibc's 8 MiB default per thread is
** address space we do not need with 32 workers. */
#define STOKE__STACK_BYTES (1u << 20)

static void *trampoline(void *p) {
  stoke__thread *t = p;
  pthread_setname_np(pthread_self(), t->name);
  /* The default 50 us timer slack makes every short sleep and condition
  ** wait late; workers wake on time instead (per thread, not global). */
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  return t->fn(t->arg);
}

int stoke__thread_start(stoke__thread **out, const stoke_allocator *a,
                        const stoke__sys *sys, const char *name,
                        void *(*fn)(void *), void *arg) {
  sys = stoke__sys_or_real(sys);
  *out = NULL;
  stoke__thread *t = stoke__calloc(a, 1, sizeof *t);
  if (!t) return STOKE_ENOMEM;
  t->fn = fn;
  t->arg = arg;
  snprintf(t->name, sizeof t->name, "%s", name);
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) {
    stoke__free(a, t);
    return STOKE_ETHREAD;
  }
  pthread_attr_setstacksize(&attr, STOKE__STACK_BYTES);
  int rc = sys->thread_create(sys->user, &t->tid, &attr, trampoline, t);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    stoke__free(a, t);
    return STOKE_ETHREAD;
  }
  *out = t;
  return 0;
}

void stoke__thread_join(stoke__thread *t, const stoke_allocator *a) {
  if (!t) return;
  pthread_join(t->tid, NULL);
  stoke__free(a, t);
}

/* SCHED_BATCH, not a higher nice value: on Linux a woken SCHED_BATCH
** thread never preempts the running one (it waits for the tick), so the
** workers that a freed slot wakes leave the training thread on its core,
** while their share of the cores is unchanged against other processes.  A
** nice value would change that share and, under EEVDF, barely shortens the
** training thread's wait (measured: 1.4 ms a step at nice 5, as at 0). */
int stoke__thread_sched_batch(void) {
  struct sched_param sp = {0};
  int rc = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
  return rc == 0 ? 0 : (rc > 0 ? rc : EINVAL);
}
