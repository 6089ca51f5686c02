/* test_autotune_loader.c — an autotuning loader changes its active workers
** and prefetch while it runs, and what it delivers never changes: every
** epoch has exactly the batches, order and random streams of a fixed-W
** run, each sample filled once. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sys/prctl.h>

#include "test_util.h"
/* White box: stoke__autotuner_force sets W and K at chosen moments (the public
** controller decides them from timing, which a test must not depend on). */
#include "pipeline/pipeline.h"
#include "model/autotune_controller.h"

#define N 203
#define B 7
#define EPOCHS 4

static stoke_config config(stoke_source *src, int autotune) {
  stoke_config c = tu_config(src, autotune ? 6 : 2, 2, B);
  c.shuffle = 1;
  c.seed = 99;
  c.autotune = autotune;
  c.autotune_max_prefetch = 5;
  return c;
}

typedef struct pair {
  tu_cb *ref_cb, *cb;
  stoke_source *ref_src, *src;
  stoke_loader *ref, *l;
  tu_epoch *want, *got;
} pair;

/* A fixed-W reference and an autotuning loader over the same samples. */
static pair pair_new(int64_t sleep_ns, size_t trace_events) {
  pair p;
  p.ref_cb = tu_cb_new(N);
  p.cb = tu_cb_new(N);
  p.cb->sleep_ns = sleep_ns;
  p.ref_src = tu_cb_source(p.ref_cb);
  p.src = tu_cb_source(p.cb);
  stoke_config rc = config(p.ref_src, 0), ac = config(p.src, 1);
  ac.trace_events = trace_events;
  p.ref = tu_loader(&rc);
  p.l = tu_loader(&ac);
  p.want = tu_epoch_new();
  p.got = tu_epoch_new();
  return p;
}

static void pair_free(pair *p) {
  stoke_loader_destroy(p->l);
  stoke_loader_destroy(p->ref);
  stoke_source_destroy(p->src);
  stoke_source_destroy(p->ref_src);
  tu_cb_free(p->cb);
  tu_cb_free(p->ref_cb);
  free(p->want);
  free(p->got);
}

/* The next batch, or a fast failure naming the samples that never came.
** A loader that lost a chunk (a gated worker dropping what it claimed)
** would otherwise wait to the watchdog: here, once no sample of the epoch
** has been filled for STALL_S seconds (a hang guard, far above any fill),
** the test fails naming every sample of the epoch not filled yet. */
#define STALL_S 20
static int next_or_name_missing(stoke_loader *l, const tu_cb *cb,
                                uint64_t ep, stoke_batch **b) {
  long last = -1;
  int still = 0;
  for (;;) {
    int rc = stoke_loader_next_timed(l, b, 1000000000LL);
    if (rc != STOKE_AGAIN) return rc;
    long now = tu_cb_epoch_calls(cb, ep);
    still = now == last ? still + 1 : 0;
    last = now;
    if (still < STALL_S) continue;
    char missing[512];
    size_t k = 0, n_missing = 0;
    missing[0] = '\0';
    for (size_t i = 0; i < cb->n; i++)
      if (tu_cb_calls(cb, ep, i) == 0) {
        n_missing++;
        if (k + 24 < sizeof missing)
          k += (size_t)snprintf(missing + k, sizeof missing - k, " %zu", i);
      }
    fail_msg("epoch %llu: no progress for %d s; %zu samples never filled:%s",
             (unsigned long long)ep, STALL_S, n_missing, missing);
  }
}

static void run_epoch_forcing(stoke_loader *l, const tu_cb *cb, tu_epoch *e,
                              uint64_t ep, uint64_t *rng) {
  memset(e, 0, sizeof *e);
  for (;;) {
    stoke_batch *b = NULL;
    int rc = next_or_name_missing(l, cb, ep, &b);
    if (rc == STOKE_END) return;
    TU_OK(rc);
    tu_check_batch(b, cb, e);
    if (rng) {
      /* Another W (1..6) and K (1..5) between most steps. */
      *rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
      unsigned w = (unsigned)(*rng >> 33) % 6 + 1;
      unsigned k = (unsigned)(*rng >> 45) % 5 + 1;
      stoke__autotuner_force(l, w, k);
    }
    stoke_batch_release(b);
  }
}

/* ---- a worker gated in the middle of its chunk ------------------------- */

typedef struct mid_chunk {
  tu_cb *cb;
  _Atomic(stoke_loader *) l; /* set once the loader exists */
  atomic_int gated;          /* workers that gated themselves mid-chunk */
} mid_chunk;

/* tu_cb's fill; then, in a worker other than w0, at position 3 of a batch
** (inside a chunk: cheap samples are claimed many at a time), switch the
** workers down to 1, gating the very worker that is filling.  It must
** finish its chunk: the rest of its samples are in the batch. */
static int mid_chunk_fill(void *user, stoke_sample *s) {
  mid_chunk *m = user;
  int rc = tu_cb_fill(m->cb, s);
  char name[17] = "";
  prctl(PR_GET_NAME, name, 0, 0, 0);
  stoke_loader *l = atomic_load(&m->l);
  if (l && stoke_sample_position(s) == 3 &&
      strncmp(name, "stoke-w", 7) == 0 && strcmp(name, "stoke-w0") != 0) {
    stoke__autotuner_force(l, 1, 3);
    atomic_fetch_add(&m->gated, 1);
  }
  return rc;
}

static void test_gated_in_the_middle_of_a_chunk(void **state) {
  (void)state;
  tu_watchdog(TU_WATCHDOG_S);
  enum { NM = 203, BM = 16, MAX_EPOCHS = 40 };
  mid_chunk m = {.cb = tu_cb_new(NM)};
  atomic_init(&m.l, NULL);
  atomic_init(&m.gated, 0);
  stoke_field_desc f[TU_N_FIELDS];
  tu_cb_fields(f);
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_callback(NM, TU_N_FIELDS, f, mid_chunk_fill, &m,
                                     &src));
  stoke_config c = tu_config(src, 3, 3, BM);
  c.autotune = 1;
  c.autotune_max_prefetch = 3;
  c.prefetch_next_epoch = 0; /* each epoch's fills are its own */
  stoke_loader *l = tu_loader(&c);
  stoke__autotuner_force(l, 3, 3);
  atomic_store(&m.l, l);
  tu_epoch *e = tu_epoch_new();
  /* Epochs until several workers were gated inside their chunks (the
  ** first claims of a worker are single samples), at most MAX_EPOCHS. */
  int ep = 0;
  for (; ep < MAX_EPOCHS && (ep < 2 || atomic_load(&m.gated) < 4); ep++) {
    memset(e, 0, sizeof *e);
    stoke_batch *b;
    int rc;
    while ((rc = next_or_name_missing(l, m.cb, (uint64_t)ep, &b)) ==
           STOKE_OK) {
      tu_check_batch(b, m.cb, e);
      stoke__autotuner_force(l, 3, 3); /* the others back on */
      stoke_batch_release(b);
    }
    TU_RC_L(l, rc, STOKE_END);
    for (size_t i = 0; i < NM; i++)
      TU_CHECK(tu_cb_calls(m.cb, (uint64_t)ep, i) == 1,
               "epoch %d: sample %zu filled %d times, want once", ep, i,
               tu_cb_calls(m.cb, (uint64_t)ep, i));
    assert_int_equal(e->n_samples, NM);
  }
  assert_int_equal(atomic_load(&m.cb->bad), 0);
  TU_CHECK(atomic_load(&m.gated) > 0,
           "in %d epochs no worker but w0 filled a batch's 4th sample", ep);
  atomic_store(&m.l, NULL);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(m.cb);
  free(e);
}

/* W and K changed at every step: the same epochs as a fixed W = 2 run. */
static void test_forced_changes_keep_order(void **state) {
  (void)state;
  tu_watchdog(TU_WATCHDOG_S);
  /* Samples that sleep: workers are in flight when they are gated. */
  pair p = pair_new(50000, 0);
  stoke_loader *ref = p.ref, *l = p.l;
  tu_cb *ref_cb = p.ref_cb, *cb = p.cb;
  tu_epoch *want = p.want, *got = p.got;
  uint64_t rng = 7;
  for (int ep = 0; ep < EPOCHS; ep++) {
    run_epoch_forcing(ref, ref_cb, want, (uint64_t)ep, NULL);
    run_epoch_forcing(l, cb, got, (uint64_t)ep, &rng);
    assert_int_equal(got->n_samples, N);
    assert_int_equal(got->n_batches, want->n_batches);
    assert_memory_equal(got->idx, want->idx, N * sizeof got->idx[0]);
    assert_memory_equal(got->rnd, want->rnd, N * sizeof got->rnd[0]);
    for (size_t i = 0; i < got->n_batches; i++)
      assert_int_equal(got->batch_number[i], i);
  }
  /* Exactly once: each (epoch, sample) filled once (no next-epoch
  ** prefetch was discarded: epochs follow in order). */
  for (int ep = 0; ep < EPOCHS; ep++)
    for (size_t i = 0; i < N; i++) assert_int_equal(tu_cb_calls(cb, ep, i), 1);
  assert_int_equal(atomic_load(&cb->bad), 0);
  stoke_stats st = tu_stats(l);
  assert_int_equal(st.autotune, 1);
  assert_int_equal(st.max_workers, 6);
  assert_int_equal(st.max_prefetch, 5);
  assert_true(st.n_workers >= 1 && st.n_workers <= 6);
  /* What was forced is in force (clamped to the most). */
  stoke__autotuner_force(l, 3, 9);
  st = tu_stats(l);
  assert_int_equal(st.n_workers, 3);
  assert_int_equal(st.prefetch, 5);
  pair_free(&p);
}

/* The controller itself, on samples that sleep and a consumer that does
** not compute: it waits at every step, so it grows (whatever the machine's
** load), and the epochs stay those of the fixed run.  Its decisions are in
** the log, the stats and the trace. */
static void test_controller_grows_and_logs(void **state) {
  (void)state;
  tu_watchdog(TU_WATCHDOG_S);
  pair p = pair_new(200000, 4096);
  stoke_loader *ref = p.ref, *l = p.l;
  tu_cb *ref_cb = p.ref_cb, *cb = p.cb;
  tu_epoch *want = p.want, *got = p.got;
  for (int ep = 0; ep < EPOCHS; ep++) {
    run_epoch_forcing(ref, ref_cb, want, (uint64_t)ep, NULL);
    run_epoch_forcing(l, cb, got, (uint64_t)ep, NULL);
    assert_int_equal(got->n_samples, N);
    assert_memory_equal(got->idx, want->idx, N * sizeof got->idx[0]);
    assert_memory_equal(got->rnd, want->rnd, N * sizeof got->rnd[0]);
  }
  for (int ep = 0; ep < EPOCHS; ep++)
    for (size_t i = 0; i < N; i++) assert_int_equal(tu_cb_calls(cb, ep, i), 1);
  size_t n = stoke_loader_n_autotune_events(l);
  assert_true(n >= 1);
  stoke_autotune_event ev;
  TU_OK(stoke_loader_autotune_event(l, 0, &ev));
  assert_int_equal(ev.kind, STOKE_AUTOTUNE_GROW);
  assert_int_equal(ev.from_workers, 1);
  assert_true(ev.to_workers > 1);
  assert_true(ev.wait_before > STOKE__ATC_STALL);
  TU_CONTAINS(ev.text, "workers, waiting");
  TU_CONTAINS(ev.text, "1 -> ");
  TU_RC(stoke_loader_autotune_event(l, n, &ev), STOKE_EINVAL);
  stoke_stats st = tu_stats(l);
  assert_true(st.autotune_changes >= 1);
  assert_true(st.n_workers > 1);
  assert_true(st.cpu_budget >= 1);
  char path[] = "/tmp/stoke-autotune-trace-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  TU_OK(stoke_loader_write_trace(l, path));
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char buf[1 << 20];
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  buf[len] = '\0';
  fclose(f);
  unlink(path);
  TU_CONTAINS(buf, "\"name\":\"autotune: grow\"");
  TU_CONTAINS(buf, "\"ph\":\"i\"");
  pair_free(&p);
}

/* Gating is real: with 2 workers active at most 2 samples are filled at
** once, and with prefetch 1 at most prefetch + consumer_slots = 2 slots
** are in use, whatever the threads and slots made (prefetch 5: 6 slots).
** A next() can meet 2 ready batches: between the release of one batch
** and the next() the caller holds none, so its slot may be filled too (a
** caller preempted there, as under TSan on a busy machine, meets it); it
** can never meet 3. */
static void test_gates_bound_workers_and_slots(void **state) {
  (void)state;
  tu_watchdog(TU_WATCHDOG_S);
  tu_cb *cb = tu_cb_new(N);
  cb->sleep_ns = 100000;
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = config(src, 1);
  c.warmup_epochs = 0;
  stoke_loader *l = tu_loader(&c);
  stoke__autotuner_force(l, 2, 1);
  tu_epoch *e = tu_epoch_new();
  for (int ep = 0; ep < 2; ep++) {
    memset(e, 0, sizeof *e);
    stoke_batch *b;
    int rc;
    while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
      tu_check_batch(b, cb, e);
      tu_sleep_ns(1000000); /* a step slower than the workers: the queue
                               fills up to what the slots allow */
      stoke_batch_release(b);
    }
    assert_int_equal(rc, STOKE_END);
    assert_int_equal(e->n_samples, N);
  }
  assert_true(atomic_load(&cb->max_in_flight) <= 2);
  stoke_stats st = tu_stats(l);
  assert_true(st.steps > 0);
  for (int d = 3; d < 16; d++) assert_int_equal(st.queue_depth_hist[d], 0);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
  free(e);
}

static void test_config_errors_and_budget(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = config(src, 1);
  stoke_loader *l = NULL;
  c.n_workers = 0;
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "autotune needs worker threads");
  c = config(src, 1);
  c.cpu_budget = -1;
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "cpu_budget");
  c = config(src, 2);
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  c = config(src, 1);
  c.device = "cuda";
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "device stage");
  /* Without autotune: no events, max = the fixed ones. */
  c = config(src, 0);
  l = tu_loader(&c);
  assert_int_equal(stoke_loader_n_autotune_events(l), 0);
  stoke_autotune_event ev;
  TU_RC(stoke_loader_autotune_event(l, 0, &ev), STOKE_EINVAL);
  stoke_stats st = tu_stats(l);
  assert_int_equal(st.autotune, 0);
  assert_int_equal(st.max_workers, 2);
  stoke_loader_destroy(l);
  /* A memory budget lowers the deepest prefetch (and the workers) to what
  ** fits, rather than refusing. */
  c = config(src, 1);
  c.autotune_max_prefetch = 64;
  stoke_host_ledger g;
  memset(&g, 0, sizeof g);
  g.struct_size = sizeof g;
  stoke_config small = c;
  small.autotune = 0;
  small.n_workers = 6;
  small.prefetch = 4;
  TU_OK(stoke_host_ledger_compute(&small, &g));
  c.mem_budget_bytes = g.total_bytes;
  l = tu_loader(&c);
  st = tu_stats(l);
  assert_true(st.max_prefetch <= 4);
  assert_true(stoke_loader_host_bytes(l) <= c.mem_budget_bytes);
  stoke_loader_destroy(l);
  assert_string_equal(stoke_autotune_kind_name(STOKE_AUTOTUNE_ROLLBACK),
                      "rollback");
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* Autotuning with echo (each batch handed out twice): what is delivered is
** what a fixed-W loader with the same echo delivers, each sample filled once
** an epoch, and the tuner still decides (the waits of fresh batches). */
static void test_autotune_with_echo(void **state) {
  (void)state;
  tu_watchdog(TU_WATCHDOG_S);
  tu_cb *ref_cb = tu_cb_new(N), *cb = tu_cb_new(N);
  cb->sleep_ns = 200000;
  stoke_source *ref_src = tu_cb_source(ref_cb), *src = tu_cb_source(cb);
  stoke_config rc = config(ref_src, 0), ac = config(src, 1);
  rc.echo = ac.echo = 2;
  stoke_loader *ref = tu_loader(&rc), *l = tu_loader(&ac);
  tu_epoch *want = tu_epoch_new(), *got = tu_epoch_new();
  for (int ep = 0; ep < EPOCHS; ep++) {
    run_epoch_forcing(ref, ref_cb, want, (uint64_t)ep, NULL);
    run_epoch_forcing(l, cb, got, (uint64_t)ep, NULL);
    assert_int_equal(got->n_samples, 2 * N);
    assert_int_equal(got->n_batches, want->n_batches);
    assert_memory_equal(got->idx, want->idx, 2 * N * sizeof got->idx[0]);
    assert_memory_equal(got->rnd, want->rnd, 2 * N * sizeof got->rnd[0]);
    /* Each batch twice in a row. */
    for (size_t i = 0; i + 1 < got->n_batches; i += 2)
      assert_int_equal(got->batch_off[i + 1] - got->batch_off[i],
                       got->batch_size[i]);
  }
  for (int ep = 0; ep < EPOCHS; ep++)
    for (size_t i = 0; i < N; i++) assert_int_equal(tu_cb_calls(cb, ep, i), 1);
  stoke_stats st = tu_stats(l);
  assert_int_equal(st.autotune, 1);
  assert_true(st.n_workers >= 1 && st.n_workers <= st.max_workers);
  assert_true(stoke_loader_n_autotune_events(l) >= 1);
  stoke_autotune_event ev;
  TU_OK(stoke_loader_autotune_event(l, 0, &ev));
  assert_int_equal(ev.kind, STOKE_AUTOTUNE_GROW);
  stoke_loader_destroy(l);
  stoke_loader_destroy(ref);
  stoke_source_destroy(src);
  stoke_source_destroy(ref_src);
  tu_cb_free(cb);
  tu_cb_free(ref_cb);
  free(want);
  free(got);
}

/* The default most workers (n_workers AUTO) and slots, without a memory
** budget, fit in half the memory the process may have; a count the caller
** gave is kept. */
static void test_default_cap_fits_the_machine(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = config(src, 1);
  c.n_workers = STOKE_WORKERS_AUTO;
  stoke_loader *l = tu_loader(&c);
  stoke_stats st = tu_stats(l);
  assert_true(st.max_workers >= 1);
  assert_true(st.max_workers <=
              STOKE_AUTOTUNE_MAX_WORKERS(stoke__online_cpus()));
  assert_true(stoke_loader_host_bytes(l) <= stoke__memory_bytes() / 2);
  stoke_loader_destroy(l);
  c = config(src, 1); /* n_workers 6, as given */
  l = tu_loader(&c);
  st = tu_stats(l);
  assert_int_equal(st.max_workers, 6);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_forced_changes_keep_order),
      cmocka_unit_test(test_gated_in_the_middle_of_a_chunk),
      cmocka_unit_test(test_controller_grows_and_logs),
      cmocka_unit_test(test_gates_bound_workers_and_slots),
      cmocka_unit_test(test_config_errors_and_budget),
      cmocka_unit_test(test_autotune_with_echo),
      cmocka_unit_test(test_default_cap_fits_the_machine),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
