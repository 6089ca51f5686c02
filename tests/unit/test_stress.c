/* test_stress.c — many threads at once against the loader's life cycle, for
** the sanitizer builds (CI runs it under TSan and ASan) as much as for the
** assertions:
**  - loaders created and destroyed concurrently on one shared source (its
**    reference count, the workers' start and join), each consumer taking a
**    different number of batches, some to the end of an epoch, some
**    breaking early, some still holding a batch at destroy;
**  - a destroy while every worker is inside a sample: no fill may run
**    after destroy returns;
**  - a consumer whose batches are released by another thread, later and
**    in any order, while it keeps asking for more: every sample of every
**    epoch exactly once.
** Synchronisation is by joins and counters, never by sleeping; the only
** sleeps are inside samples (to keep workers busy). */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>

#include "test_util.h"

enum { N_SAMPLES = 96 };

/* ---- concurrent lives ------------------------------------------------------ */

typedef struct life_args {
  stoke_source *src;
  unsigned seed;
  atomic_int *failures; /* a consumer thread cannot assert: it counts */
} life_args;

static void *lives_main(void *p) {
  life_args *a = p;
  for (unsigned k = 0; k < 100; k++) {
    unsigned r = a->seed * 7919u + k * 104729u;
    stoke_config cfg;
    stoke_config_init(&cfg);
    cfg.source = a->src;
    cfg.batch_size = 1 + r % 16;
    cfg.n_workers = r % 4;                 /* 0 (inline) .. 3 */
    cfg.prefetch = 1 + (r >> 3) % 3;
    cfg.shuffle = (int)((r >> 5) & 1);
    cfg.seed = r;
    cfg.prefetch_next_epoch = (int)((r >> 6) & 1);
    stoke_loader *l = NULL;
    if (stoke_loader_create(&cfg, &l) != 0) {
      atomic_fetch_add(a->failures, 1);
      continue;
    }
    size_t want = (r >> 8) % 24; /* batches to take; an epoch has 6..96 */
    stoke_batch *held = NULL, *b;
    for (size_t i = 0; i < want; i++) {
      int rc = stoke_loader_next(l, &b);
      if (rc == STOKE_END) continue; /* the next call starts an epoch */
      if (rc != STOKE_OK || stoke_batch_size(b) == 0 ||
          stoke_batch_size(b) > cfg.batch_size) {
        atomic_fetch_add(a->failures, 1);
        break;
      }
      const size_t *idx = stoke_batch_indices(b);
      for (size_t j = 0; j < stoke_batch_size(b); j++)
        if (idx[j] >= N_SAMPLES) atomic_fetch_add(a->failures, 1);
      if (held) stoke_batch_release(held);
      held = b;
    }
    /* Sometimes a batch is still lent when the loader goes: it outlives
    ** the loader and is released after (the binding's case). */
    if ((r >> 12) & 1) {
      stoke_loader_destroy(l);
      stoke_batch_release(held);
    } else {
      stoke_batch_release(held);
      stoke_loader_destroy(l);
    }
  }
  return NULL;
}

static void test_concurrent_lives(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N_SAMPLES);
  cb->sleep_ns = 20000; /* 20 us every 5th sample: workers overlap */
  cb->sleep_every = 5;
  stoke_source *src = tu_cb_source(cb);
  enum { T = 4 };
  pthread_t th[T];
  life_args args[T];
  atomic_int failures = 0;
  for (unsigned t = 0; t < T; t++) {
    args[t] = (life_args){src, t + 1, &failures};
    assert_int_equal(pthread_create(&th[t], NULL, lives_main, &args[t]), 0);
  }
  for (unsigned t = 0; t < T; t++) pthread_join(th[t], NULL);
  assert_int_equal(atomic_load(&failures), 0);
  assert_int_equal(atomic_load(&cb->bad), 0);
  assert_int_equal(atomic_load(&cb->in_flight), 0);
  stoke_source_destroy(src); /* the last reference: every loader is gone */
  tu_cb_free(cb);
}

/* ---- destroy mid-sample --------------------------------------------------- */

/* Every sample sleeps, so at the first batch every worker is inside one;
** destroy then waits for each and no fill runs after it returns. */
static void test_destroy_mid_sample(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N_SAMPLES);
  cb->sleep_ns = 300000; /* 0.3 ms */
  stoke_source *src = tu_cb_source(cb);
  for (unsigned k = 0; k < 100; k++) {
    stoke_config cfg = tu_config(src, 2 + k % 4, 1 + k % 3, 4);
    stoke_loader *l = tu_loader(&cfg);
    stoke_batch *b;
    if (k % 3) { /* after a batch; else before any next() */
      TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
      if (k % 2) stoke_batch_release(b); /* else kept past destroy */
      stoke_loader_destroy(l);
      if (!(k % 2)) stoke_batch_release(b);
    } else {
      stoke_loader_destroy(l);
    }
    TU_CHECK(atomic_load(&cb->in_flight) == 0,
             "round %u: %d fills still running after destroy", k,
             atomic_load(&cb->in_flight));
  }
  assert_int_equal(atomic_load(&cb->bad), 0);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- batches released by another thread ------------------------------------ */

/* A hand-off queue of batches: the consumer pushes, the releaser pops and
** releases, whenever it gets to them. */
typedef struct handoff {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  stoke_batch *q[64];
  size_t head, len;
  bool done;
} handoff;

static void handoff_push(handoff *h, stoke_batch *b) {
  pthread_mutex_lock(&h->mu);
  h->q[(h->head + h->len++) % 64] = b;
  pthread_cond_signal(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

static void *releaser_main(void *p) {
  handoff *h = p;
  unsigned n = 0;
  pthread_mutex_lock(&h->mu);
  for (;;) {
    while (h->len == 0 && !h->done) pthread_cond_wait(&h->cv, &h->mu);
    if (h->len == 0 && h->done) break;
    /* Every third time, the newest first: releases in any order. */
    stoke_batch *b;
    if (++n % 3 == 0 && h->len > 1) {
      b = h->q[(h->head + h->len - 1) % 64];
    } else {
      b = h->q[h->head];
      h->head = (h->head + 1) % 64;
    }
    h->len--;
    pthread_mutex_unlock(&h->mu);
    stoke_batch_release(b);
    pthread_mutex_lock(&h->mu);
  }
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

static void test_release_elsewhere(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N_SAMPLES);
  stoke_source *src = tu_cb_source(cb);
  stoke_config cfg = tu_config(src, 3, 3, 5);
  cfg.shuffle = 1;
  stoke_loader *l = tu_loader(&cfg);
  handoff h;
  memset(&h, 0, sizeof h);
  pthread_mutex_init(&h.mu, NULL);
  pthread_cond_init(&h.cv, NULL);
  pthread_t rel;
  assert_int_equal(pthread_create(&rel, NULL, releaser_main, &h), 0);
  for (unsigned e = 0; e < 20; e++) {
    unsigned seen[N_SAMPLES] = {0};
    size_t n = 0;
    stoke_batch *b;
    int rc;
    while ((rc = stoke_loader_next(l, &b)) != STOKE_END) {
      if (rc == STOKE_EBUSY) { /* every slot still with the releaser */
        pthread_mutex_lock(&h.mu);
        pthread_cond_signal(&h.cv);
        pthread_mutex_unlock(&h.mu);
        sched_yield();
        continue;
      }
      TU_RC_L(l, rc, STOKE_OK);
      assert_int_equal(stoke_batch_epoch(b), e);
      const size_t *idx = stoke_batch_indices(b);
      const int64_t *v = NULL;
      stoke_tensor t;
      TU_OK(stoke_batch_field(b, TU_F_IDX, &t));
      v = t.data;
      for (size_t j = 0; j < stoke_batch_size(b); j++) {
        assert_true(idx[j] < N_SAMPLES);
        assert_int_equal(v[j], (int64_t)idx[j]); /* the sample's own bytes */
        seen[idx[j]]++;
      }
      n += stoke_batch_size(b);
      handoff_push(&h, b);
    }
    assert_int_equal(n, N_SAMPLES);
    for (size_t i = 0; i < N_SAMPLES; i++) assert_int_equal(seen[i], 1);
  }
  pthread_mutex_lock(&h.mu);
  h.done = true;
  pthread_cond_signal(&h.cv);
  pthread_mutex_unlock(&h.mu);
  pthread_join(rel, NULL);
  stoke_loader_destroy(l);
  assert_int_equal(atomic_load(&cb->bad), 0);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concurrent_lives),
      cmocka_unit_test(test_destroy_mid_sample),
      cmocka_unit_test(test_release_elsewhere),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
