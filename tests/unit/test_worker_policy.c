/* test_worker_policy.c — stoke_config.worker_policy: the workers run under
** SCHED_BATCH by default (so that waking them never preempts the training
** thread), under the OS default with STOKE_WORKER_NORMAL, and the caller's
** own thread is never changed (W = 0 fills in it).
**
** Every sample asks the OS for the policy of the thread filling it, so the
** check holds for every worker that produced, whichever started first; the
** statistics must count at least those workers as placed. */
#define _GNU_SOURCE /* sched_getscheduler's SCHED_BATCH, gettid */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

#include "test_util.h"

#define N_SAMPLES 96
#define MAX_TIDS 64

typedef struct policy_seen {
  atomic_int batch, other, caller; /* fills by policy; fills in the caller */
  pid_t caller_tid;
  pthread_mutex_t mu;
  pid_t tids[MAX_TIDS];
  int n_tids;
} policy_seen;

static int fill_policy(void *user, stoke_sample *s) {
  policy_seen *p = user;
  int pol = sched_getscheduler(0); /* this thread's, on Linux */
  atomic_fetch_add(pol == SCHED_BATCH ? &p->batch : &p->other, 1);
  pid_t me = gettid();
  if (me == p->caller_tid) atomic_fetch_add(&p->caller, 1);
  pthread_mutex_lock(&p->mu);
  int known = 0;
  for (int i = 0; i < p->n_tids; i++) known |= p->tids[i] == me;
  if (!known && p->n_tids < MAX_TIDS) p->tids[p->n_tids++] = me;
  pthread_mutex_unlock(&p->mu);
  uint8_t *out = stoke_sample_field(s, 0);
  if (out) out[0] = (uint8_t)stoke_sample_index(s);
  return 0;
}

static stoke_source *policy_source(policy_seen *p) {
  memset(p, 0, sizeof *p);
  pthread_mutex_init(&p->mu, NULL);
  p->caller_tid = gettid();
  stoke_field_desc f = tu_field("x", STOKE_U8, 1, (int64_t[]){1});
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_callback(N_SAMPLES, 1, &f, fill_policy, p, &src));
  return src;
}

/* One epoch of W workers under `policy`; the fills' policies in *p. */
static stoke_stats run_epoch(policy_seen *p, unsigned workers, int policy) {
  stoke_source *src = policy_source(p);
  stoke_config c = tu_config(src, workers, 2, 8);
  c.worker_policy = policy;
  stoke_loader *l = tu_loader(&c);
  stoke_source_destroy(src);
  stoke_batch *b;
  size_t n = 0;
  int rc;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    n += stoke_batch_size(b);
    stoke_batch_release(b);
  }
  TU_CHECK(rc == STOKE_END, "epoch ended with %d (%s)", rc, stoke_errmsg(l));
  TU_CHECK(n == N_SAMPLES, "%zu samples delivered, want %d", n, N_SAMPLES);
  stoke_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  TU_OK(stoke_loader_stats(l, &st));
  stoke_loader_destroy(l);
  pthread_mutex_destroy(&p->mu);
  return st;
}

static void default_is_batch(void **state) {
  (void)state;
  stoke_config c;
  stoke_config_init(&c);
  TU_CHECK(c.worker_policy == STOKE_WORKER_BATCH, "default policy %d",
           c.worker_policy);
  assert_string_equal(stoke_worker_policy_name(STOKE_WORKER_BATCH), "batch");
  assert_string_equal(stoke_worker_policy_name(STOKE_WORKER_NORMAL), "normal");
  assert_string_equal(stoke_worker_policy_name(7), "?");
}

static void batch_workers_run_under_sched_batch(void **state) {
  (void)state;
  policy_seen p;
  stoke_stats st = run_epoch(&p, 3, STOKE_WORKER_BATCH);
  /* The next epoch's prefetch may have filled some more: every fill counts. */
  TU_CHECK(atomic_load(&p.batch) >= N_SAMPLES && atomic_load(&p.other) == 0,
           "%d fills under SCHED_BATCH, %d under another policy (%d samples)",
           atomic_load(&p.batch), atomic_load(&p.other), N_SAMPLES);
  TU_CHECK(atomic_load(&p.caller) == 0, "the caller filled %d samples with 3 "
           "workers", atomic_load(&p.caller));
  TU_CHECK(st.worker_policy == STOKE_WORKER_BATCH, "stats policy %d",
           st.worker_policy);
  TU_CHECK(st.workers_policy_applied >= (unsigned)p.n_tids &&
               st.workers_policy_applied <= 3,
           "workers_policy_applied %u; %d workers produced",
           st.workers_policy_applied, p.n_tids);
  /* The caller's thread keeps its own policy. */
  TU_CHECK(sched_getscheduler(0) == SCHED_OTHER, "the caller's policy is %d",
           sched_getscheduler(0));
}

static void normal_workers_keep_the_default(void **state) {
  (void)state;
  policy_seen p;
  stoke_stats st = run_epoch(&p, 3, STOKE_WORKER_NORMAL);
  TU_CHECK(atomic_load(&p.other) >= N_SAMPLES && atomic_load(&p.batch) == 0,
           "%d fills under the default policy, %d under SCHED_BATCH (%d "
           "samples)", atomic_load(&p.other), atomic_load(&p.batch), N_SAMPLES);
  TU_CHECK(st.worker_policy == STOKE_WORKER_NORMAL, "stats policy %d",
           st.worker_policy);
  TU_CHECK(st.workers_policy_applied >= (unsigned)p.n_tids &&
               st.workers_policy_applied <= 3,
           "workers_policy_applied %u; %d workers produced",
           st.workers_policy_applied, p.n_tids);
}

/* W = 0 fills in the caller's thread: its policy is the caller's, and
** stays so. */
static void inline_fill_leaves_the_caller_alone(void **state) {
  (void)state;
  policy_seen p;
  stoke_stats st = run_epoch(&p, 0, STOKE_WORKER_BATCH);
  TU_CHECK(atomic_load(&p.caller) >= N_SAMPLES, "the caller filled %d of %d",
           atomic_load(&p.caller), N_SAMPLES);
  TU_CHECK(atomic_load(&p.batch) == 0, "%d inline fills under SCHED_BATCH",
           atomic_load(&p.batch));
  TU_CHECK(st.workers_policy_applied == 0, "workers_policy_applied %u at W=0",
           st.workers_policy_applied);
  TU_CHECK(sched_getscheduler(0) == SCHED_OTHER, "the caller's policy is %d",
           sched_getscheduler(0));
}

static void unknown_policy_is_refused(void **state) {
  (void)state;
  policy_seen p;
  stoke_source *src = policy_source(&p);
  stoke_config c = tu_config(src, 2, 2, 8);
  c.worker_policy = 2;
  stoke_loader *l = NULL;
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "worker_policy is 2");
  assert_null(l);
  stoke_source_destroy(src);
  pthread_mutex_destroy(&p.mu);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(default_is_batch),
      cmocka_unit_test(batch_workers_run_under_sched_batch),
      cmocka_unit_test(normal_workers_keep_the_default),
      cmocka_unit_test(inline_fill_leaves_the_caller_alone),
      cmocka_unit_test(unknown_policy_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
