#define _POSIX_C_SOURCE 200809L
/* test_lifetime.c — what a binding (Python) relies on: batches that outlive
** the loader, releases from other threads, and a next() that gives up after
** a timeout without losing the step's clock. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include "test_util.h"

/* A loader destroyed while the caller holds batches: their data, fields
** and indices stay valid, and the last release frees everything (the
** counting allocator sees every byte back). */
static void test_batches_outlive_destroy(void **state) {
  (void)state;
  tu_alloc_count count = {0};
  stoke_allocator a = {tu_count_alloc, tu_count_free, &count};
  tu_cb *cb = tu_cb_new(64);
  stoke_source *src = tu_cb_source(cb);
  stoke_config cfg = tu_config(src, 2, 3, 8);
  cfg.alloc = &a;
  stoke_loader *l = tu_loader(&cfg);
  stoke_source_destroy(src);
  stoke_batch *held[3];
  for (int i = 0; i < 3; i++) TU_RC_L(l, stoke_loader_next(l, &held[i]), 0);
  stoke_loader_destroy(l);
  assert_true(atomic_load(&count.live) > 0); /* the held slots remain */
  for (int i = 0; i < 3; i++) {
    stoke_tensor t;
    assert_int_equal(stoke_batch_field(held[i], TU_F_IDX, &t), 0);
    assert_int_equal(t.shape[0], 8);
    const int64_t *idx = t.data;
    const size_t *ind = stoke_batch_indices(held[i]);
    for (size_t k = 0; k < 8; k++) {
      assert_int_equal(idx[k], (int64_t)(i * 8 + (int)k));
      assert_int_equal(ind[k], (size_t)(i * 8) + k);
    }
    tu_check_batch(held[i], cb, 0);
  }
  stoke_batch_release(held[1]);
  stoke_batch_release(held[0]);
  assert_true(atomic_load(&count.live) > 0);
  stoke_batch_release(held[2]); /* the last one frees the loader */
  assert_int_equal(atomic_load(&count.live), 0);
  assert_int_equal(atomic_load(&count.allocs), atomic_load(&count.frees));
  assert_int_equal(atomic_load(&cb->bad), 0);
  tu_cb_free(cb);
}

typedef struct releaser {
  stoke_batch *b;
  pthread_barrier_t *go;
} releaser;

static void *release_main(void *arg) {
  releaser *r = arg;
  pthread_barrier_wait(r->go);
  stoke_batch_release(r->b);
  return NULL;
}

/* Releases on other threads racing with destroy: whoever is last frees
** (ASan and TSan watch the ordering; the allocator counts). */
static void test_release_races_destroy(void **state) {
  (void)state;
  for (int round = 0; round < 50; round++) {
    tu_alloc_count count = {0};
    stoke_allocator a = {tu_count_alloc, tu_count_free, &count};
    tu_cb *cb = tu_cb_new(32);
    stoke_source *src = tu_cb_source(cb);
    stoke_config cfg = tu_config(src, 2, 2, 4);
    cfg.alloc = &a;
    stoke_loader *l = tu_loader(&cfg);
    stoke_source_destroy(src);
    enum { N = 3 };
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, N + 1);
    releaser r[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
      TU_RC_L(l, stoke_loader_next(l, &r[i].b), 0);
      r[i].go = &go;
      assert_int_equal(pthread_create(&th[i], NULL, release_main, &r[i]), 0);
    }
    pthread_barrier_wait(&go);
    stoke_loader_destroy(l);
    for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);
    assert_int_equal(atomic_load(&count.live), 0);
    tu_cb_free(cb);
  }
}

/* With every batch slow, next_timed gives up with STOKE_AGAIN (not an
** error), the loader stays usable, and the step that was retried is
** counted once, its wait from the first call. */
static void test_next_timed(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(8);
  cb->sleep_ns = 30 * 1000000; /* a batch of 4 on 1 worker: 120 ms */
  stoke_source *src = tu_cb_source(cb);
  stoke_config cfg = tu_config(src, 1, 1, 4);
  cfg.prefetch_next_epoch = 0;
  stoke_loader *l = tu_loader(&cfg);
  stoke_batch *b = NULL;
  assert_int_equal(stoke_loader_next_timed(l, &b, -1), STOKE_EINVAL);
  int64_t t0 = tu_now_ns();
  int again = 0, rc;
  while ((rc = stoke_loader_next_timed(l, &b, 5 * 1000000)) == STOKE_AGAIN) {
    assert_null(b);
    again++;
  }
  int64_t waited = tu_now_ns() - t0;
  TU_RC_L(l, rc, STOKE_OK);
  assert_true(again >= 2); /* 120 ms of work, 5 ms per call */
  tu_check_batch(b, cb, 0);
  stoke_batch_release(b);
  /* The second batch through plain next(): the mix works. */
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  stoke_batch_release(b);
  TU_RC_L(l, stoke_loader_next_timed(l, &b, 0), STOKE_END);
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_loader_stats(l, &st));
  assert_int_equal(st.steps, 2);
  /* The first step's wait spans every retry (it started before t0). */
  assert_true(st.wait.max_ns >= (int64_t)(0.98 * (double)waited));
  assert_true(st.wait.total_ns <= (int64_t)(1.1 * (double)(tu_now_ns() - t0)));
  assert_int_equal(st.queue_depth_hist[0], 2); /* each step found none */
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* A zero timeout is a poll: a ready batch comes back at once. */
static void test_next_timed_poll(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(16);
  stoke_source *src = tu_cb_source(cb);
  stoke_config cfg = tu_config(src, 2, 2, 4);
  stoke_loader *l = tu_loader(&cfg);
  size_t got = 0;
  for (;;) {
    stoke_batch *b;
    int rc = stoke_loader_next_timed(l, &b, 0);
    if (rc == STOKE_AGAIN) continue;
    if (rc == STOKE_END) break;
    TU_RC_L(l, rc, STOKE_OK);
    tu_check_batch(b, cb, 0);
    got += stoke_batch_size(b);
    stoke_batch_release(b);
  }
  assert_int_equal(got, 16);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* Breaking out of an epoch after k batches, again and again: every next
** epoch is whole and exactly once, and no slot leaks (a leak would hang
** the loop, which the watchdog turns into a failure). */
static void test_end_epoch_early_break(void **state) {
  (void)state;
  static const unsigned ws[] = {0, 1, 2, 4};
  static const unsigned ks[] = {1, 2, 3};
  tu_epoch *e = tu_epoch_new();
  for (size_t wi = 0; wi < 4; wi++)
    for (size_t ki = 0; ki < 3; ki++)
      for (int epb = 0; epb < 2; epb++) {
        tu_cb *cb = tu_cb_new(64);
        cb->sleep_ns = 200000; /* work stays in flight at the break */
        stoke_source *src = tu_cb_source(cb);
        stoke_config cfg = tu_config(src, ws[wi], ks[ki], 8);
        cfg.shuffle = 1;
        cfg.prefetch_next_epoch = epb;
        stoke_loader *l = tu_loader(&cfg);
        uint64_t epoch = 0;
        for (int round = 0; round < 6; round++, epoch++) {
          size_t take = (size_t)round % 8; /* 0 .. 7 of 8 batches */
          for (size_t k = 0; k < take; k++) {
            stoke_batch *b;
            TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
            assert_int_equal(stoke_batch_epoch(b), epoch);
            assert_int_equal(stoke_batch_number(b), k);
            tu_check_batch(b, cb, NULL);
            stoke_batch_release(b);
          }
          TU_OK(stoke_loader_end_epoch(l));
          TU_OK(stoke_loader_end_epoch(l)); /* between epochs: no-op */
          if (take > 0) epoch++; /* else no epoch had started */
          tu_epoch_ok(l, cb, e, 1); /* the next epoch, whole */
          assert_int_equal(e->epoch, epoch);
          assert_int_equal(e->n_samples, 64);
          int seen[64] = {0};
          for (size_t i = 0; i < 64; i++) seen[e->idx[i]]++;
          for (size_t i = 0; i < 64; i++) assert_int_equal(seen[i], 1);
        }
        assert_int_equal(atomic_load(&cb->bad), 0);
        stoke_loader_destroy(l);
        stoke_source_destroy(src);
        tu_cb_free(cb);
      }
  free(e);
}

/* A break while the caller still holds a batch of the abandoned epoch:
** it stays valid and its release is not mistaken for the next epoch's. */
static void test_end_epoch_holding(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(32);
  stoke_source *src = tu_cb_source(cb);
  stoke_config cfg = tu_config(src, 2, 2, 4);
  stoke_loader *l = tu_loader(&cfg);
  stoke_batch *held;
  TU_RC_L(l, stoke_loader_next(l, &held), STOKE_OK);
  TU_OK(stoke_loader_end_epoch(l));
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  assert_int_equal(stoke_batch_epoch(b), 1);
  assert_int_equal(stoke_batch_number(b), 0);
  tu_check_batch(held, cb, NULL);
  assert_int_equal(stoke_batch_epoch(held), 0);
  stoke_batch_release(held);
  stoke_batch_release(b);
  tu_epoch *e = tu_epoch_new();
  /* The rest of epoch 1 (7 batches), then END. */
  int rc = tu_run_epoch(l, cb, e, 0);
  TU_RC_L(l, rc, STOKE_END);
  assert_int_equal(e->n_batches, 7);
  assert_int_equal(stoke_loader_n_epoch_stats(l), 2);
  stoke_epoch_stats es;
  TU_OK(stoke_loader_epoch_stats(l, 0, &es));
  assert_int_equal(es.batches, 1); /* the abandoned epoch as delivered */
  free(e);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* Issue 12's reproduction: set_epoch to another number while workers are
** still prefetching the next epoch leaked a slot (the batch being claimed
** into lost its unclaimed samples) and after K + 1 jumps next() hung. */
static void test_set_epoch_during_prefetch(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(64);
  cb->sleep_ns = 1000000; /* 1 ms a sample */
  stoke_source *src = tu_cb_source(cb);
  stoke_config cfg = tu_config(src, 2, 2, 8);
  cfg.shuffle = 1;
  stoke_loader *l = tu_loader(&cfg);
  tu_epoch *e = tu_epoch_new();
  for (uint64_t k = 0; k < 8; k++) {
    tu_epoch_ok(l, cb, e, 1);
    assert_int_equal(e->n_samples, 64);
    TU_OK(stoke_loader_set_epoch(l, 100 + 7 * k));
  }
  free(e);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* consumer_slots: a consumer that keeps the previous batch while asking
** for the next (Python's for-loop) still gets `prefetch` batches made
** ahead; with the default one slot, holding two leaves none to make the
** third in and next() says so. */
static void test_consumer_slots(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(32);
  stoke_source *src = tu_cb_source(cb);
  for (unsigned held = 1; held <= 2; held++) {
    stoke_config cfg = tu_config(src, 2, 1, 4);
    cfg.consumer_slots = held;
    stoke_loader *l = tu_loader(&cfg);
    stoke_host_ledger g = {.struct_size = sizeof g};
    TU_OK(stoke_loader_ledger(l, &g));
    assert_int_equal(g.n_slots, 1 + held);
    stoke_batch *a, *b, *c;
    TU_RC_L(l, stoke_loader_next(l, &a), STOKE_OK);
    TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
    int rc = stoke_loader_next(l, &c);
    if (held == 1) {
      TU_RC_L(l, rc, STOKE_EBUSY);
      TU_CONTAINS(stoke_errmsg(l), "held by the caller");
    } else {
      TU_RC_L(l, rc, STOKE_OK);
      tu_check_batch(c, cb, NULL);
      stoke_batch_release(c);
    }
    stoke_batch_release(a);
    stoke_batch_release(b);
    stoke_loader_destroy(l);
  }
  stoke_config bad = tu_config(src, 1, 1, 4);
  bad.consumer_slots = 0;
  stoke_loader *l = NULL;
  TU_RC(stoke_loader_create(&bad, &l), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "consumer_slots");
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batches_outlive_destroy),
      cmocka_unit_test(test_release_races_destroy),
      cmocka_unit_test(test_next_timed),
      cmocka_unit_test(test_next_timed_poll),
      cmocka_unit_test(test_end_epoch_early_break),
      cmocka_unit_test(test_end_epoch_holding),
      cmocka_unit_test(test_set_epoch_during_prefetch),
      cmocka_unit_test(test_consumer_slots),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
