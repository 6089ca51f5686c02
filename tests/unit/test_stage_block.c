/* test_stage_block.c — stages measured outside the library's threads
** (stoke_stage_block) and fed to a stoke_twoclock: the block's checks, the
** stages counted from the end of the warm-up as a loader counts its
** workers', the ready queue the caller gives, and worker processes in the
** stats.  What stoke.DataLoader(worker_type="process") stands on
** (tests/python/test_stoke_dataloader_procstats.py runs it live), and the
** workers' CPU counted as the job's own in the machine's other load.
** Nothing here is timed: every duration is a recorded number, or CPU
** time the kernel accounts. */
#define _GNU_SOURCE /* MAP_ANONYMOUS */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#include <sys/mman.h>
#include <sys/wait.h>

#include "os/os.h"
#include "stats/outside.h"

#define MS 1000000LL

static void *block_new(unsigned n, size_t *bytes) {
  *bytes = stoke_stage_block_bytes(n);
  assert_true(*bytes > 0);
  void *mem = aligned_alloc(64, (*bytes + 63) / 64 * 64);
  assert_non_null(mem);
  TU_OK(stoke_stage_block_init(mem, *bytes, n));
  return mem;
}

/* A Python sample as a worker process times it: read, python, gil_wait 0,
** collate; busy the sum, CPU as given. */
static void sample(void *mem, unsigned w, int64_t python, int64_t cpu) {
  int64_t ns[STOKE_STAGE_COUNT];
  for (int s = 0; s < STOKE_STAGE_COUNT; s++) ns[s] = -1;
  ns[STOKE_STAGE_READ] = 10000;
  ns[STOKE_STAGE_PYTHON] = python;
  ns[STOKE_STAGE_GIL_WAIT] = 0;
  ns[STOKE_STAGE_COLLATE] = 20000;
  TU_OK(stoke_stage_block_record(mem, w, ns, 30000 + python, cpu));
}

static stoke_twoclock *make(unsigned warmup, unsigned workers) {
  stoke_twoclock_config cfg;
  stoke_twoclock_config_init(&cfg);
  cfg.warmup_epochs = warmup;
  cfg.warmup_end_steps = 0; /* whole warm-up epochs */
  cfg.warmup_end_ns = 0;
  cfg.n_workers = workers;
  cfg.prefetch = 4;
  /* An hour: a step the scheduler held up is still one found ready when
  ** the depth is inferred (test_given_depth's last step). */
  cfg.ready_wait_ns = 3600000 * MS;
  stoke_twoclock *c = NULL;
  TU_OK(stoke_twoclock_create(&cfg, &c));
  return c;
}

static void step(stoke_twoclock *c, long depth) {
  stoke_twoclock_enter(c);
  if (depth >= 0) TU_OK(stoke_twoclock_depth(c, (size_t)depth));
  stoke_twoclock_leave(c, 8);
}

static stoke_stats stats_of(const stoke_twoclock *c) {
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_twoclock_stats(c, &st));
  return st;
}

static void test_block_checks(void **state) {
  (void)state;
  assert_int_equal(stoke_stage_block_bytes(0), 0);
  assert_true(stoke_stage_block_bytes(2) > stoke_stage_block_bytes(1));
  size_t bytes;
  void *mem = block_new(2, &bytes);
  assert_int_equal(stoke_stage_block_init(NULL, bytes, 2), STOKE_EINVAL);
  assert_int_equal(stoke_stage_block_init(mem, bytes - 1, 2), STOKE_EINVAL);
  assert_int_equal(stoke_stage_block_init((char *)mem + 4, bytes - 8, 1),
                   STOKE_EINVAL);
  int64_t ns[STOKE_STAGE_COUNT] = {0};
  /* Producer 2 of 2 is outside; memory that is not a block is refused. */
  assert_int_equal(stoke_stage_block_record(mem, 2, ns, 0, 0), STOKE_EINVAL);
  assert_int_equal(stoke_stage_block_record(mem, 0, NULL, 0, 0), STOKE_EINVAL);
  stoke_twoclock *c = make(0, 2);
  char junk[256] = {0};
  assert_int_equal(stoke_twoclock_attach_stages(c, junk, 1), STOKE_EINVAL);
  assert_int_equal(stoke_stage_block_record(junk, 0, ns, 0, 0), STOKE_EINVAL);
  assert_int_equal(stoke_twoclock_attach_stages(NULL, mem, 1), STOKE_EINVAL);
  assert_int_equal(stoke_twoclock_depth(NULL, 1), STOKE_EINVAL);
  stoke_twoclock_destroy(c);
  free(mem);
}

/* The warm-up epoch's samples are left out, as a loader leaves out its
** workers' warm-up: the stages are the measured epoch's only. */
static void test_stages_after_warmup(void **state) {
  (void)state;
  size_t bytes;
  void *mem = block_new(2, &bytes);
  stoke_twoclock *c = make(1, 2);
  TU_OK(stoke_twoclock_attach_stages(c, mem, 1));
  for (int i = 0; i < 5; i++) sample(mem, 0, 1 * MS, 1 * MS);
  step(c, 0);
  step(c, 0);
  stoke_twoclock_enter(c);
  TU_OK(stoke_twoclock_end_epoch(c));
  stoke_stats st = stats_of(c);
  assert_int_equal(st.steps, 0);
  assert_int_equal(st.stage[STOKE_STAGE_PYTHON].count, 0); /* warming up */
  step(c, 1); /* the warm-up ends here: the 5 samples are the base */
  for (int i = 0; i < 8; i++) sample(mem, (unsigned)(i % 2), 3 * MS, 2 * MS);
  step(c, 1);
  stoke_twoclock_enter(c);
  TU_OK(stoke_twoclock_end_epoch(c));
  st = stats_of(c);
  assert_int_equal(st.steps, 2);
  assert_int_equal(st.stage[STOKE_STAGE_PYTHON].count, 8);
  assert_int_equal(st.stage[STOKE_STAGE_PYTHON].total_ns, 8 * 3 * MS);
  assert_int_equal(st.stage[STOKE_STAGE_READ].count, 8);
  assert_int_equal(st.stage[STOKE_STAGE_COLLATE].count, 8);
  assert_int_equal(st.stage[STOKE_STAGE_GIL_WAIT].count, 8);
  assert_int_equal(st.stage[STOKE_STAGE_GIL_WAIT].total_ns, 0);
  assert_int_equal(st.stage[STOKE_STAGE_DECODE].count, 0); /* not timed */
  assert_int_equal(st.worker_busy_ns, 8 * (30000 + 3 * MS));
  assert_int_equal(st.worker_cpu_ns, 8 * 2 * MS);
  assert_int_equal(st.chunks, 8);
  assert_int_equal(st.worker_processes, 2);
  assert_int_equal(st.n_workers, 2);
  /* Detached: the stages are gone, and so are the processes. */
  TU_OK(stoke_twoclock_attach_stages(c, NULL, 1));
  st = stats_of(c);
  assert_int_equal(st.stage[STOKE_STAGE_PYTHON].count, 0);
  assert_int_equal(st.worker_processes, 0);
  stoke_twoclock_destroy(c);
  free(mem);
}

/* Attached while already measuring (no warm-up): counted from then on. */
static void test_attach_counts_from_now(void **state) {
  (void)state;
  size_t bytes;
  void *mem = block_new(1, &bytes);
  stoke_twoclock *c = make(0, 1);
  sample(mem, 0, 1 * MS, 1 * MS); /* before the attach: not the clock's */
  TU_OK(stoke_twoclock_attach_stages(c, mem, 0));
  sample(mem, 0, 1 * MS, 1 * MS);
  step(c, 0);
  stoke_stats st = stats_of(c);
  assert_int_equal(st.stage[STOKE_STAGE_PYTHON].count, 1);
  assert_int_equal(st.worker_processes, 0); /* processes = 0: threads */
  stoke_twoclock_destroy(c);
  free(mem);
}

/* The depth the caller gives replaces the one inferred from the wait: a
** step that returned at once (inferred: a batch was ready) but found the
** queue empty counts as empty. */
static void test_given_depth(void **state) {
  (void)state;
  stoke_twoclock *c = make(0, 2);
  for (int i = 0; i < 4; i++) step(c, 0);
  stoke_stats st = stats_of(c);
  assert_true(st.queue_empty_frac == 1.0);
  for (int i = 0; i < 4; i++) step(c, 3);
  st = stats_of(c);
  assert_true(st.queue_empty_frac == 0.5);
  assert_true(st.queue_mean_depth == 1.5);
  assert_int_equal(st.queue_depth_hist[3], 4);
  /* Not given: inferred again (a wait under ready_wait: depth 1). */
  step(c, -1);
  st = stats_of(c);
  assert_int_equal(st.queue_depth_hist[1], 1);
  stoke_twoclock_destroy(c);
}

/* One producer records while the consumer's side reads (the live view's
** publisher reads from its own thread): no lock between them, every sample
** counted once it is recorded (TSan checks the rest). */
#define RACE_SAMPLES 20000
static void *producer(void *mem) {
  for (int i = 0; i < RACE_SAMPLES; i++) sample(mem, 1, 1000 + i % 7, 500);
  return NULL;
}

static void test_reads_beside_a_writer(void **state) {
  (void)state;
  size_t bytes;
  void *mem = block_new(2, &bytes);
  stoke_twoclock *c = make(0, 2);
  TU_OK(stoke_twoclock_attach_stages(c, mem, 1));
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, producer, mem), 0);
  uint64_t last = 0;
  for (int i = 0; i < 200; i++) {
    stoke_stats st = stats_of(c);
    assert_true(st.stage[STOKE_STAGE_PYTHON].count >= last); /* never back */
    last = st.stage[STOKE_STAGE_PYTHON].count;
  }
  pthread_join(t, NULL);
  stoke_stats st = stats_of(c);
  assert_int_equal(st.stage[STOKE_STAGE_PYTHON].count, RACE_SAMPLES);
  assert_int_equal(st.chunks, RACE_SAMPLES);
  stoke_twoclock_destroy(c);
  free(mem);
}

/* The machine's other load leaves out the job's own worker processes: a
** child that burns CPU and records it in the block, as a worker process
** does, is the job's own for a window that has the block attached, and
** other load for one that has not.  Both windows read /proc/stat at the
** same moments, so whatever else the machine does counts alike in both:
** they differ by the child's recorded CPU (the attached one floored at 0).
** The child burns a given CPU time, not a wall time, so the claim holds
** on a loaded machine too. */
static void test_worker_cpu_is_the_jobs_own(void **state) {
  (void)state;
  size_t bytes = stoke_stage_block_bytes(1);
  void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(mem != MAP_FAILED);
  TU_OK(stoke_stage_block_init(mem, bytes, 1));
  stoke__outside with, without;
  memset(&with, 0, sizeof with);
  memset(&without, 0, sizeof without);
  atomic_store(&with.job, (const void *)mem);
  stoke__outside_start(&with);
  stoke__outside_start(&without);
  assert_true(with.on && without.on); /* /proc/stat is there */
  int64_t t0 = stoke__now_ns();
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct timespec ts;
    int64_t cpu = 0;
    volatile uint64_t x = 0;
    while (cpu < 400 * MS && stoke__now_ns() - t0 < 10000 * MS) {
      for (int i = 0; i < 100000; i++) x += (uint64_t)i;
      clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
      cpu = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    }
    int64_t ns[STOKE_STAGE_COUNT];
    for (int k = 0; k < STOKE_STAGE_COUNT; k++) ns[k] = -1;
    ns[STOKE_STAGE_PYTHON] = cpu;
    _exit(stoke_stage_block_record(mem, 0, ns, cpu, cpu) == 0 ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  int64_t cpu = stoke__stage_block_cpu_ns(mem);
  assert_true(cpu >= 400 * MS);
  /* Close both windows at once, past STOKE__OUTSIDE_WINDOW_NS. */
  while (stoke__now_ns() - t0 < STOKE__OUTSIDE_WINDOW_NS + 50 * MS)
    tu_sleep_ns(10 * MS);
  int64_t now = stoke__now_ns();
  stoke__outside_tick_slow(&with, now);
  stoke__outside_tick_slow(&without, now);
  stoke_stats a, b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  /* No tail (the open window since `now`): one window each. */
  stoke__outside_stats_at(&with, 2, NULL, &a);
  stoke__outside_stats_at(&without, 2, NULL, &b);
  assert_int_equal(a.outside_windows, 1);
  assert_int_equal(b.outside_windows, 1);
  double child = (double)cpu / (double)(now - t0); /* cores */
  print_message("child %.2f cores; other load %.2f attached, %.2f not\n",
                child, a.outside_mean_cores, b.outside_mean_cores);
  /* without = rest + child, with = max(0, rest) (rest: everything else,
  ** alike in both): they differ by the child, less /proc/stat's rounding
  ** (a tick, 10 ms, of a window of at least 0.55 s). */
  assert_true(b.outside_mean_cores - a.outside_mean_cores >= 0.8 * child);
  munmap(mem, bytes);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_block_checks),
      cmocka_unit_test(test_stages_after_warmup),
      cmocka_unit_test(test_attach_counts_from_now),
      cmocka_unit_test(test_given_depth),
      cmocka_unit_test(test_reads_beside_a_writer),
      cmocka_unit_test(test_worker_cpu_is_the_jobs_own),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
