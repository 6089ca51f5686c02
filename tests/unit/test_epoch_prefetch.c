/* test_epoch_prefetch.c — workers start the next epoch before the current
** one ends; whatever set_epoch() then says, every epoch delivers exactly
** the order of (seed, epoch), and prefetched work for the wrong epoch is
** discarded, never delivered. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stoke.h"
#include "test_util.h"
/* One white-box wait (gate_opener): the moment a next() has started an
** epoch is not observable through the API. */
#include "pipeline/pipeline.h"

#define N 97

typedef struct rec {
  size_t index;
  uint64_t epoch;
  uint64_t r0;
} rec;

typedef struct counts {
  atomic_int fills;
  int slow; /* nanoseconds of sleep per sample, to keep workers busy */
} counts;

static int fill(void *user, stoke_sample *s) {
  counts *c = user;
  atomic_fetch_add(&c->fills, 1);
  if (c->slow) {
    struct timespec ts = {0, c->slow};
    nanosleep(&ts, NULL);
  }
  rec r = {stoke_sample_index(s), stoke_sample_epoch(s),
           stoke_rng_u64(stoke_sample_rng(s))};
  memcpy(stoke_sample_field(s, 0), &r, sizeof r);
  return 0;
}

static stoke_source *make_source(counts *c) {
  stoke_field_desc d = {.name = "rec", .dtype = STOKE_U8, .ndim = 1,
                        .shape = {sizeof(rec)}};
  stoke_source *src;
  assert_int_equal(stoke_source_create_callback(N, 1, &d, fill, c, &src), 0);
  return src;
}

static stoke_loader *make_loader(stoke_source *src, unsigned workers,
                                 int prefetch_next) {
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = 8;
  cfg.n_workers = workers;
  cfg.prefetch = 3;
  cfg.shuffle = 1;
  cfg.seed = 1234;
  cfg.prefetch_next_epoch = prefetch_next;
  stoke_loader *l;
  assert_int_equal(stoke_loader_create(&cfg, &l), 0);
  return l;
}

/* Run one epoch; write its records to out (N entries). */
static void run_epoch(stoke_loader *l, rec *out, uint64_t want_epoch) {
  stoke_batch *b;
  size_t k = 0;
  int rc;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    stoke_tensor t;
    assert_int_equal(stoke_batch_field(b, 0, &t), 0);
    assert_int_equal(stoke_batch_epoch(b), want_epoch);
    const rec *r = t.data;
    for (size_t i = 0; i < stoke_batch_size(b); i++) {
      assert_true(k < N);
      assert_int_equal(r[i].epoch, want_epoch);
      assert_int_equal(r[i].index, stoke_batch_indices(b)[i]);
      out[k++] = r[i];
    }
    stoke_batch_release(b);
  }
  assert_int_equal(rc, STOKE_END);
  assert_int_equal(k, N);
}

/* The reference: a loader that never prefetches, told the epoch. */
static void reference(uint64_t epoch, rec *out) {
  counts c = {0};
  stoke_source *src = make_source(&c);
  stoke_loader *l = make_loader(src, 0, 0);
  assert_int_equal(stoke_loader_set_epoch(l, epoch), 0);
  run_epoch(l, out, epoch);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
}

static void test_every_set_epoch_pattern(void **state) {
  (void)state;
  /* Epoch sequences: auto-advance, DistributedSampler style (set each
  ** epoch), a jump that discards the prefetch, and a repeated epoch. */
  static const uint64_t seq[] = {0, 1, 2, 7, 7, 3, 4};
  static const int set[] = {0, 0, 1, 1, 1, 1, 0};
  rec *want = calloc(N, sizeof *want), *got = calloc(N, sizeof *got);
  for (unsigned workers = 1; workers <= 6; workers += 5) {
    counts c = {.slow = 100000};
    stoke_source *src = make_source(&c);
    stoke_loader *l = make_loader(src, workers, 1);
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
      if (set[i]) assert_int_equal(stoke_loader_set_epoch(l, seq[i]), 0);
      run_epoch(l, got, seq[i]);
      reference(seq[i], want);
      assert_memory_equal(got, want, N * sizeof *got);
    }
    /* A discarded prefetch costs fills but delivers nothing: fills are at
    ** least the delivered samples. */
    assert_true(atomic_load(&c.fills) >= (int)(N * (sizeof seq / sizeof seq[0])));
    stoke_loader_destroy(l);
    stoke_source_destroy(src);
  }
  free(want);
  free(got);
}

static void test_prefetch_really_happens(void **state) {
  (void)state;
  /* After the last batch of epoch 0 is handed out, and before next()
  ** returns END, workers fill samples of epoch 1: wait for the first such
  ** fill on a condition (the 5 s bound only turns a missing prefetch into a
  ** failure). */
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = tu_config(src, 2, 3, 8);
  c.shuffle = 1;
  c.seed = 1234;
  stoke_loader *l = tu_loader(&c);
  stoke_batch *b;
  size_t batches = stoke_loader_n_batches(l), seen = 0;
  while (seen < batches) {
    assert_int_equal(stoke_loader_next(l, &b), STOKE_OK);
    stoke_batch_release(b);
    seen++;
  }
  long ahead = tu_cb_wait_epoch_calls(cb, 1, 1, 5000000000LL);
  TU_CHECK(ahead > 0, "no sample of epoch 1 filled within 5 s of the last "
           "batch of epoch 0");
  assert_int_equal(stoke_loader_next(l, &b), STOKE_END);
  assert_int_equal(stoke_loader_next(l, &b), STOKE_OK);
  assert_int_equal(stoke_batch_epoch(b), 1);
  stoke_batch_release(b);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static void test_off_means_no_work_ahead(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = tu_config(src, 2, 3, 8);
  c.shuffle = 1;
  c.seed = 1234;
  c.prefetch_next_epoch = 0;
  stoke_loader *l = tu_loader(&c);
  tu_epoch *e = tu_epoch_new();
  tu_epoch_ok(l, cb, e, 1);
  assert_int_equal(tu_cb_epoch_calls(cb, 0), N);
  /* Nothing of epoch 1 may be filled before its first next().  That is a
  ** property of no event, so there is nothing to wait for: give a wrong
  ** loader 20 ms to show itself (a correct one passes whatever the
  ** timing) and, deterministically, destroy it, which joins the workers,
  ** before counting. */
  tu_sleep_ns(20000000);
  stoke_loader_destroy(l);
  assert_int_equal(tu_cb_epoch_calls(cb, 1), 0);
  assert_int_equal(atomic_load(&cb->n_calls), N);
  free(e);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* The audit's hang: set_epoch() to another epoch while workers prefetch the
** next one used to drop the batch being claimed (discard_prefetch cleared
** claim_batch), so its unclaimed samples were never filled, its slot never
** came back, and after K + 1 such jumps next() waited forever (epoch 3
** here, on the audit's machine).  Exactly the audit's reproduction: 64 samples of 1 ms, batch 8,
** W 2, K 2, shuffle; drain each epoch, then set_epoch(100 + 7e).  Each
** epoch must also deliver the order a fresh loader gives that epoch. */
static void test_set_epoch_while_prefetching(void **state) {
  (void)state;
  tu_deadline(__func__, 60);
  const size_t n = 64;
  tu_cb *cb = tu_cb_new(n);
  cb->sleep_ns = 1000000;
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = tu_config(src, 2, 2, 8);
  c.shuffle = 1;
  /* The orders to expect, computed first: the jumps must come right after
  ** each epoch is drained, while the workers are still prefetching. */
  enum { EPOCHS = 8 };
  tu_epoch *got = tu_epoch_new(), *want[EPOCHS];
  stoke_config rc = c;
  rc.n_workers = 0;
  rc.prefetch_next_epoch = 0;
  uint64_t epochs[EPOCHS];
  for (uint64_t e = 0; e < EPOCHS; e++) {
    epochs[e] = e == 0 ? 0 : 100 + 7 * (e - 1);
    want[e] = tu_epoch_new();
    stoke_loader *ref = tu_loader(&rc);
    TU_OK(stoke_loader_set_epoch(ref, epochs[e]));
    tu_epoch_ok(ref, NULL, want[e], 1);
    stoke_loader_destroy(ref);
  }
  stoke_loader *l = tu_loader(&c);
  for (uint64_t e = 0; e < EPOCHS; e++) {
    tu_epoch_ok(l, cb, got, 1);
    TU_CHECK(got->epoch == epochs[e] && got->n_samples == n &&
                 memcmp(got->idx, want[e]->idx, n * sizeof got->idx[0]) == 0,
             "epoch %llu (after %llu jumps): not the order of (seed, epoch)",
             (unsigned long long)epochs[e], (unsigned long long)e);
    if (e + 1 < EPOCHS) TU_OK(stoke_loader_set_epoch(l, 100 + 7 * e));
  }
  stoke_loader_destroy(l);
  free(got);
  for (int e = 0; e < EPOCHS; e++) free(want[e]);
  stoke_source_destroy(src);
  tu_cb_free(cb);
  tu_deadline_end();
}

/* The same hang, made deterministic: fills of the epoch the workers
** prefetch (the one after the epoch drained) wait at a gate, so when
** set_epoch() jumps elsewhere and next() discards the prefetch, the batch
** being claimed is certainly part-claimed (W of its 8 samples).  The gate
** opens once that next() has started the new epoch (a helper thread waits
** for it), and the discarded batch must then come back to the pool.
** Without the fix the K + 1 = 3 slots leaked one per jump and the third
** jump's next() waited forever, every run; the loop above hangs only when
** the timing falls that way (1 run in 3 here). */
typedef struct gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t epoch;   /* fills of this epoch wait while !open */
  int open;
  int waiting;      /* fills at the gate now */
  stoke_loader *l;  /* for the opener */
  uint64_t started; /* the opener opens once this epoch is active */
} gate;

static int gated_fill(void *user, stoke_sample *s) {
  gate *g = user;
  uint64_t ep = stoke_sample_epoch(s);
  pthread_mutex_lock(&g->mu);
  if (ep == g->epoch && !g->open) {
    g->waiting++;
    pthread_cond_broadcast(&g->cv);
    while (!g->open && ep == g->epoch) pthread_cond_wait(&g->cv, &g->mu);
    g->waiting--;
  }
  pthread_mutex_unlock(&g->mu);
  size_t i = stoke_sample_index(s);
  memcpy(stoke_sample_field(s, 0), &i, sizeof i);
  return 0;
}

static void *gate_opener(void *arg) {
  gate *g = arg;
  stoke_loader *l = g->l;
  /* start_epoch() broadcasts work_cv once the epoch is active. */
  pthread_mutex_lock(&l->mu);
  while (!(l->epoch_active && l->epoch == g->started))
    pthread_cond_wait(&l->work_cv, &l->mu);
  pthread_mutex_unlock(&l->mu);
  pthread_mutex_lock(&g->mu);
  g->open = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  return NULL;
}

/* Close the gate on epoch ep (fills still waiting at an older one leave). */
static void gate_close(gate *g, uint64_t ep) {
  pthread_mutex_lock(&g->mu);
  g->epoch = ep;
  g->open = 0;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

static void test_set_epoch_discards_a_part_claimed_batch(void **state) {
  (void)state;
  tu_deadline(__func__, 60);
  enum { W = 2, K = 2, B = 8, JUMPS = 6 };
  const size_t n = 64;
  gate g;
  memset(&g, 0, sizeof g);
  pthread_mutex_init(&g.mu, NULL);
  pthread_cond_init(&g.cv, NULL);
  stoke_field_desc d = {.name = "i", .dtype = STOKE_U8, .ndim = 1,
                        .shape = {sizeof(size_t)}};
  stoke_source *src;
  TU_OK(stoke_source_create_callback(n, 1, &d, gated_fill, &g, &src));
  stoke_config c = tu_config(src, W, K, B);
  c.shuffle = 1;
  c.max_chunk = 1; /* each worker holds one sample of the batch */
  stoke_loader *l = tu_loader(&c);
  g.l = l;
  tu_epoch *e = tu_epoch_new();
  gate_close(&g, 1); /* the workers will prefetch epoch 1 */
  tu_epoch_ok(l, NULL, e, 1);
  for (int j = 0; j < JUMPS; j++) {
    /* Every worker is inside a fill of the prefetched epoch: its first
    ** batch has W of its B samples claimed. */
    pthread_mutex_lock(&g.mu);
    while (g.waiting < W) pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    uint64_t jump = 100 + 7 * (uint64_t)j;
    TU_OK(stoke_loader_set_epoch(l, jump));
    g.started = jump;
    pthread_t opener;
    assert_int_equal(pthread_create(&opener, NULL, gate_opener, &g), 0);
    stoke_batch *b = NULL;
    TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK); /* hung at j == 2 */
    TU_CHECK(stoke_batch_epoch(b) == jump && stoke_batch_number(b) == 0,
             "jump %d: got batch %zu of epoch %llu", j, stoke_batch_number(b),
             (unsigned long long)stoke_batch_epoch(b));
    stoke_batch_release(b);
    pthread_join(opener, NULL);
    /* Epoch `jump` is not all claimed yet (the caller took one batch of 8,
    ** with 3 slots): close the gate on the epoch after it, then drain it. */
    gate_close(&g, jump + 1);
    int rc = tu_run_epoch(l, NULL, e, 0);
    TU_CHECK(rc == STOKE_END && e->n_samples == n - B,
             "jump %d: epoch %llu ended with %s after %zu more samples", j,
             (unsigned long long)jump, tu_code_name(rc), e->n_samples);
  }
  /* Open the last gate so that destroy can join the waiting workers. */
  pthread_mutex_lock(&g.mu);
  g.open = 1;
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
  stoke_loader_destroy(l);
  free(e);
  stoke_source_destroy(src);
  pthread_mutex_destroy(&g.mu);
  pthread_cond_destroy(&g.cv);
  tu_deadline_end();
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_set_epoch_pattern),
      cmocka_unit_test(test_prefetch_really_happens),
      cmocka_unit_test(test_off_means_no_work_ahead),
      cmocka_unit_test(test_set_epoch_while_prefetching),
      cmocka_unit_test(test_set_epoch_discards_a_part_claimed_batch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
