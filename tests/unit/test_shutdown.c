/* test_shutdown.c — stoke_loader_destroy at every point of a loader's life.
**
** Destroy must stop the workers, wait for samples in progress, and free
** everything; batches still lent out stay valid until released, and the
** last release frees what is left.  Nothing may hang (a watchdog
** kills the binary) or leak: LeakSanitizer checks under ASan, and a counting
** allocator checks here that every allocation made through stoke_allocator
** is given back.  After destroy returns no fill callback may still run.
*/
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>

#include "test_util.h"

static const unsigned k_workers[] = {0, 1, 2, 4, 8, 16};
#define N_WORKERS (sizeof k_workers / sizeof *k_workers)

typedef struct fixture {
  tu_cb *cb;
  stoke_source *src;
  tu_alloc_count count;
  stoke_allocator alloc;
} fixture;

static fixture *fixture_new(size_t n, int64_t sleep_ns) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  f->cb = tu_cb_new(n);
  f->cb->sleep_ns = sleep_ns;
  f->src = tu_cb_source(f->cb);
  f->alloc.alloc = tu_count_alloc;
  f->alloc.free = tu_count_free;
  f->alloc.user = &f->count;
  return f;
}

static void fixture_free(fixture *f) {
  stoke_source_destroy(f->src);
  tu_cb_free(f->cb);
  free(f);
}

static stoke_loader *fixture_loader(fixture *f, unsigned W, unsigned K,
                                    size_t B) {
  stoke_config c = tu_config(f->src, W, K, B);
  c.alloc = &f->alloc;
  c.shuffle = 1;
  c.seed = W;
  stoke_loader *l = tu_loader(&c);
  TU_CHECK(atomic_load(&f->count.allocs) > 0,
           "the loader allocated nothing through stoke_config.alloc");
  TU_CHECK(stoke_loader_host_bytes(l) <= (uint64_t)atomic_load(&f->count.peak_bytes),
           "host_bytes %llu but only %ld bytes came through the allocator",
           (unsigned long long)stoke_loader_host_bytes(l),
           atomic_load(&f->count.peak_bytes));
  return l;
}

/* Destroy l while the caller holds `held` (n_held batches): no fill runs
** after it returns, the held batches are still whole, and once they are
** released nothing is live in the allocator. */
static void destroy_and_check_held(fixture *f, stoke_loader *l,
                                   stoke_batch **held, size_t n_held,
                                   const char *when, unsigned W) {
  stoke_loader_destroy(l);
  TU_CHECK(atomic_load(&f->cb->in_flight) == 0,
           "%s, W %u: a fill is still running after destroy returned", when,
           W);
  long calls = atomic_load(&f->cb->n_calls);
  TU_CHECK(n_held > 0 || atomic_load(&f->count.live) == 0,
           "%s, W %u: %ld allocations (%ld bytes) not freed by destroy", when,
           W, atomic_load(&f->count.live), atomic_load(&f->count.live_bytes));
  for (size_t i = 0; i < n_held; i++) {
    tu_check_batch(held[i], f->cb, NULL);
    TU_CHECK(atomic_load(&f->count.live) > 0,
             "%s, W %u: the loader was freed with %zu batches still held",
             when, W, n_held - i);
    stoke_batch_release(held[i]);
  }
  TU_CHECK(atomic_load(&f->count.live) == 0,
           "%s, W %u: %ld allocations (%ld bytes) not freed after the last "
           "release", when, W, atomic_load(&f->count.live),
           atomic_load(&f->count.live_bytes));
  TU_CHECK(atomic_load(&f->count.allocs) == atomic_load(&f->count.frees),
           "%s, W %u: %ld allocs, %ld frees", when, W,
           atomic_load(&f->count.allocs), atomic_load(&f->count.frees));
  /* No fill can run later: every worker thread is gone (joined). */
  int left = tu_count_threads("stoke-w");
  TU_CHECK(left <= 0, "%s, W %u: %d worker threads still alive after "
           "destroy returned", when, W, left);
  TU_CHECK(atomic_load(&f->cb->n_calls) == calls,
           "%s, W %u: fills ran after destroy returned", when, W);
  TU_CHECK(atomic_load(&f->cb->bad) == 0, "%s, W %u: fill saw bad 0x%x", when,
           W, atomic_load(&f->cb->bad));
}

static void destroy_and_check(fixture *f, stoke_loader *l, const char *when,
                              unsigned W) {
  destroy_and_check_held(f, l, NULL, 0, when, W);
}

static void test_destroy_null(void **state) {
  (void)state;
  stoke_loader_destroy(NULL);
  stoke_batch_release(NULL);
  stoke_source_destroy(NULL);
}

static void test_destroy_after_create(void **state) {
  (void)state;
  for (size_t wi = 0; wi < N_WORKERS; wi++) {
    fixture *f = fixture_new(64, 1000000);
    stoke_loader *l = fixture_loader(f, k_workers[wi], 2, 4);
    destroy_and_check(f, l, "right after create", k_workers[wi]);
    /* The workers wait for the first next(): nothing was filled. */
    TU_CHECK(atomic_load(&f->cb->n_calls) == 0,
             "W %u: %ld samples filled before the first next()",
             k_workers[wi], atomic_load(&f->cb->n_calls));
    fixture_free(f);
  }
}

/* After the first next(), the batch still held, slow samples in flight. */
static void test_destroy_after_first_next(void **state) {
  (void)state;
  for (size_t wi = 0; wi < N_WORKERS; wi++) {
    unsigned W = k_workers[wi];
    fixture *f = fixture_new(200, 2000000); /* 2 ms per sample */
    stoke_loader *l = fixture_loader(f, W, 3, 4);
    stoke_batch *b;
    TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
    tu_check_batch(b, f->cb, NULL);
    if (W == 1) {
      /* The census destroy_and_check relies on sees a worker that ran (a
      ** worker names itself once running; this one filled the batch). */
      int live = tu_count_threads_now("stoke-w");
      TU_CHECK(live < 0 || live == 1, "W 1: %d threads named stoke-w*", live);
    }
    destroy_and_check_held(f, l, &b, 1, "after the first next", W);
    fixture_free(f);
  }
}

/* Mid-epoch with K + 1 batches held (none released). */
static void test_destroy_holding_batches(void **state) {
  (void)state;
  for (size_t wi = 0; wi < N_WORKERS; wi++) {
    unsigned W = k_workers[wi];
    const unsigned K = 2;
    fixture *f = fixture_new(200, 1000000);
    stoke_loader *l = fixture_loader(f, W, K, 4);
    stoke_batch *b[3];
    for (unsigned i = 0; i < K + 1; i++)
      TU_RC_L(l, stoke_loader_next(l, &b[i]), STOKE_OK);
    for (unsigned i = 0; i < K + 1; i++) tu_check_batch(b[i], f->cb, NULL);
    destroy_and_check_held(f, l, b, K + 1, "holding every slot", W);
    fixture_free(f);
  }
}

/* After an early break: some batches taken and released, others in
** flight. */
static void test_destroy_after_break(void **state) {
  (void)state;
  for (size_t wi = 0; wi < N_WORKERS; wi++) {
    unsigned W = k_workers[wi];
    fixture *f = fixture_new(200, 1000000);
    stoke_loader *l = fixture_loader(f, W, 4, 4);
    for (int i = 0; i < 5; i++) {
      stoke_batch *b;
      TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
      tu_check_batch(b, f->cb, NULL);
      stoke_batch_release(b);
    }
    destroy_and_check(f, l, "after an early break", W);
    fixture_free(f);
  }
}

static void test_destroy_after_end(void **state) {
  (void)state;
  for (size_t wi = 0; wi < N_WORKERS; wi++) {
    unsigned W = k_workers[wi];
    fixture *f = fixture_new(30, 200000);
    stoke_loader *l = fixture_loader(f, W, 2, 4);
    tu_epoch *e = tu_epoch_new();
    tu_epoch_ok(l, f->cb, e, 1);
    assert_int_equal(e->n_samples, 30);
    free(e);
    destroy_and_check(f, l, "after STOKE_END", W);
    fixture_free(f);
  }
}

/* 50 short epochs, then destroy; every epoch complete. */
static void test_many_epochs(void **state) {
  (void)state;
  const unsigned workers[] = {0, 3, 16};
  for (size_t wi = 0; wi < 3; wi++) {
    unsigned W = workers[wi];
    fixture *f = fixture_new(20, 0);
    stoke_loader *l = fixture_loader(f, W, 2, 4);
    tu_epoch *e = tu_epoch_new();
    for (uint64_t ep = 0; ep < 50; ep++) {
      tu_epoch_ok(l, f->cb, e, 1);
      TU_CHECK(e->n_samples == 20 && e->n_batches == 5 && e->epoch == ep,
               "W %u epoch %llu: %zu samples, %zu batches, epoch %llu", W,
               (unsigned long long)ep, e->n_samples, e->n_batches,
               (unsigned long long)e->epoch);
    }
    free(e);
    /* 50 epochs, and perhaps part of the 51st (prefetch_next_epoch). */
    long calls = atomic_load(&f->cb->n_calls);
    TU_CHECK(calls >= 50 * 20 && calls <= 51 * 20,
             "W %u: %ld fills for 50 epochs of 20", W, calls);
    destroy_and_check(f, l, "after 50 epochs", W);
    fixture_free(f);
  }
}

/* Many short lives: create, take a few batches (0..3), destroy. */
static void test_create_destroy_churn(void **state) {
  (void)state;
  fixture *f = fixture_new(64, 100000);
  for (int i = 0; i < 40; i++) {
    unsigned W = k_workers[i % N_WORKERS];
    stoke_loader *l = fixture_loader(f, W, 1 + (unsigned)i % 3, 4);
    stoke_batch *held = NULL;
    for (int k = 0; k < i % 4; k++) {
      stoke_batch *b;
      TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
      if (held) stoke_batch_release(held);
      held = b;
    }
    destroy_and_check_held(f, l, &held, held ? 1 : 0, "in churn", W);
  }
  fixture_free(f);
}

/* A sample in progress when destroy is called is waited for: sample 8
** (batch 2, prefetched while the caller holds batch 0) takes 300 ms. */
static void test_destroy_waits_for_slow_sample(void **state) {
  (void)state;
  const unsigned workers[] = {1, 4};
  for (size_t wi = 0; wi < 2; wi++) {
    fixture *f = fixture_new(40, 0);
    f->cb->stuck_index = 8;
    f->cb->stuck_max_ns = 300000000;
    stoke_config c = tu_config(f->src, workers[wi], 2, 4);
    c.alloc = &f->alloc;
    stoke_loader *l = tu_loader(&c);
    stoke_batch *b;
    TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
    TU_CHECK(tu_cb_wait_stuck(f->cb, 1, 5000000000LL),
             "W %u K 2: sample 8 (batch 2) never started while batch 0 was "
             "held", workers[wi]);
    destroy_and_check_held(f, l, &b, 1, "with a slow sample in flight",
                           workers[wi]);
    TU_CHECK(!atomic_load(&f->cb->stuck), "the slow sample did not finish");
    fixture_free(f);
  }
}

/* Releasing from another thread than the consumer's. */
typedef struct relay {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  stoke_batch *q[64];
  size_t head, tail;
  size_t pending; /* handed to the releaser, not yet released */
  int done;
} relay;

static void *releaser(void *arg) {
  relay *r = arg;
  pthread_mutex_lock(&r->mu);
  for (;;) {
    while (r->head == r->tail && !r->done) pthread_cond_wait(&r->cv, &r->mu);
    if (r->head == r->tail && r->done) break;
    stoke_batch *b = r->q[r->head++ % 64];
    pthread_mutex_unlock(&r->mu);
    tu_sleep_ns(100000);
    stoke_batch_release(b);
    pthread_mutex_lock(&r->mu);
    r->pending--;
    pthread_cond_broadcast(&r->cv);
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

static void test_release_from_other_thread(void **state) {
  (void)state;
  fixture *f = fixture_new(120, 0);
  const unsigned K = 3;
  stoke_loader *l = fixture_loader(f, 2, K, 4);
  relay r;
  memset(&r, 0, sizeof r);
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.cv, NULL);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, releaser, &r), 0);
  for (int ep = 0; ep < 2; ep++) {
    size_t got = 0;
    for (;;) {
      stoke_batch *b;
      int rc = stoke_loader_next(l, &b);
      if (rc == STOKE_EBUSY) { /* all K + 1 slots with the releaser */
        pthread_mutex_lock(&r.mu);
        while (r.pending == K + 1) pthread_cond_wait(&r.cv, &r.mu);
        pthread_mutex_unlock(&r.mu);
        continue;
      }
      if (rc == STOKE_END) break;
      TU_RC_L(l, rc, STOKE_OK);
      tu_check_batch(b, f->cb, NULL);
      got++;
      pthread_mutex_lock(&r.mu);
      r.q[r.tail++ % 64] = b;
      r.pending++;
      pthread_cond_broadcast(&r.cv);
      pthread_mutex_unlock(&r.mu);
    }
    assert_int_equal(got, 30);
    /* Wait until the releaser has given every batch back. */
    pthread_mutex_lock(&r.mu);
    while (r.pending) pthread_cond_wait(&r.cv, &r.mu);
    pthread_mutex_unlock(&r.mu);
  }
  pthread_mutex_lock(&r.mu);
  r.done = 1;
  pthread_cond_broadcast(&r.cv);
  pthread_mutex_unlock(&r.mu);
  pthread_join(t, NULL);
  pthread_mutex_destroy(&r.mu);
  pthread_cond_destroy(&r.cv);
  destroy_and_check(f, l, "after releases from another thread", 2);
  fixture_free(f);
}

/* The loader keeps its own reference: the source may go right after create. */
static void test_source_destroyed_after_create(void **state) {
  (void)state;
  /* Callback source. */
  for (unsigned W = 0; W <= 4; W += 4) {
    tu_cb *cb = tu_cb_new(33);
    stoke_source *src = tu_cb_source(cb);
    stoke_config c = tu_config(src, W, 2, 5);
    stoke_loader *l = tu_loader(&c);
    stoke_source_destroy(src);
    tu_epoch *e = tu_epoch_new();
    for (int ep = 0; ep < 2; ep++) {
      tu_epoch_ok(l, cb, e, 1);
      assert_int_equal(e->n_samples, 33);
    }
    free(e);
    stoke_loader_destroy(l);
    tu_cb_free(cb);
  }
  /* Tensor source: bytes still read right. */
  static const int64_t s3[1] = {3};
  stoke_field_desc fd = tu_field("v", STOKE_I32, 1, s3);
  int32_t data[21 * 3];
  for (int i = 0; i < 21 * 3; i++) data[i] = i * 10 + 1;
  const void *d[1] = {data};
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_tensors(21, 1, &fd, d, &src));
  stoke_config c = tu_config(src, 2, 2, 4);
  stoke_loader *l = tu_loader(&c);
  stoke_source_destroy(src);
  stoke_batch *b;
  int rc;
  size_t total = 0;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    stoke_tensor t;
    TU_OK(stoke_batch_field(b, 0, &t));
    const size_t *ix = stoke_batch_indices(b);
    for (size_t s = 0; s < stoke_batch_size(b); s++)
      assert_memory_equal((const int32_t *)t.data + 3 * s, data + 3 * ix[s],
                          3 * sizeof(int32_t));
    total += stoke_batch_size(b);
    stoke_batch_release(b);
  }
  TU_RC_L(l, rc, STOKE_END);
  assert_int_equal(total, 21);
  stoke_loader_destroy(l);
  /* Synthetic SLEEP source with two loaders sharing it. */
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.cost_ns = 100000;
  sc.n_samples = 16;
  sc.ndim = 1;
  sc.shape[0] = 2;
  TU_OK(stoke_source_create_synthetic(&sc, &src));
  c = tu_config(src, 2, 1, 4);
  stoke_loader *l1 = tu_loader(&c), *l2 = tu_loader(&c);
  stoke_source_destroy(src);
  tu_epoch *e = tu_epoch_new();
  tu_epoch_ok(l1, NULL, e, 1);
  assert_int_equal(e->n_samples, 16);
  stoke_loader_destroy(l1);
  tu_epoch_ok(l2, NULL, e, 1);
  assert_int_equal(e->n_samples, 16);
  stoke_loader_destroy(l2);
  free(e);
}

/* After a failed sample, with other samples in flight. */
static void test_destroy_after_error(void **state) {
  (void)state;
  for (size_t wi = 0; wi < N_WORKERS; wi++) {
    unsigned W = k_workers[wi];
    fixture *f = fixture_new(100, 500000);
    f->cb->fail_index = 10;
    stoke_config c = tu_config(f->src, W, 3, 4);
    c.alloc = &f->alloc;
    stoke_loader *l = tu_loader(&c);
    stoke_batch *b;
    int rc;
    while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) stoke_batch_release(b);
    TU_RC_L(l, rc, STOKE_ESAMPLE);
    destroy_and_check(f, l, "after a failed sample", W);
    fixture_free(f);
  }
}

/* Loaders whose create fails give back everything they took. */
static void test_failed_create_frees(void **state) {
  (void)state;
  fixture *f = fixture_new(10, 0);
  stoke_config c = tu_config(f->src, 4, 2, 4);
  c.alloc = &f->alloc;
  c.mem_budget_bytes = 16;
  stoke_loader *l = NULL;
  TU_RC(stoke_loader_create(&c, &l), STOKE_EBUDGET);
  c.mem_budget_bytes = 0;
  c.prefetch = 0;
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  assert_int_equal(atomic_load(&f->count.live), 0);
  fixture_free(f);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_destroy_null),
      cmocka_unit_test(test_destroy_after_create),
      cmocka_unit_test(test_destroy_after_first_next),
      cmocka_unit_test(test_destroy_holding_batches),
      cmocka_unit_test(test_destroy_after_break),
      cmocka_unit_test(test_destroy_after_end),
      cmocka_unit_test(test_many_epochs),
      cmocka_unit_test(test_create_destroy_churn),
      cmocka_unit_test(test_destroy_waits_for_slow_sample),
      cmocka_unit_test(test_release_from_other_thread),
      cmocka_unit_test(test_source_destroyed_after_create),
      cmocka_unit_test(test_destroy_after_error),
      cmocka_unit_test(test_failed_create_frees),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
