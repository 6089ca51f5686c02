/* test_given_order.c — an epoch order the caller gives (cfg.order_given),
** and the callback source's hooks (thread_start/stop, batch_done, the
** sample's batch and position).
**
** Orders are checked exactly: every batch as given (indices, lengths, in
** order), whatever the worker count, with workers started before the
** order exists and orders given while workers wait for them.  Nothing is
** timed. */
#define _POSIX_C_SOURCE 200809L
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>

#include "test_util.h"

static stoke_loader *given_loader(tu_cb *cb, unsigned workers, size_t batch,
                                  unsigned prefetch) {
  stoke_source *src = tu_cb_source(cb);
  stoke_config cfg = tu_config(src, workers, prefetch, batch);
  cfg.order_given = 1;
  stoke_loader *l = tu_loader(&cfg);
  stoke_source_destroy(src);
  return l;
}

/* The order of an epoch: n_batches batches of lens[k] samples; sample j of
** the epoch is (j * 7 + 3) % n, repeats allowed. */
static size_t make_order(size_t n, size_t n_samples, size_t *idx) {
  for (size_t j = 0; j < n_samples; j++) idx[j] = (j * 7 + 3) % n;
  return n_samples;
}

static void check_epoch(const tu_epoch *e, const size_t *idx,
                        const size_t *lens, size_t n_batches) {
  TU_CHECK(e->n_batches == n_batches, "%zu batches delivered, %zu given",
           e->n_batches, n_batches);
  size_t off = 0;
  for (size_t k = 0; k < n_batches; k++) {
    TU_CHECK(e->batch_number[k] == k, "batch %zu delivered as %zu", k,
             e->batch_number[k]);
    TU_CHECK(e->batch_size[k] == lens[k], "batch %zu has %zu samples, %zu "
             "given", k, e->batch_size[k], lens[k]);
    for (size_t j = 0; j < lens[k]; j++)
      TU_CHECK(e->idx[off + j] == idx[off + j],
               "batch %zu sample %zu: index %zu, given %zu", k, j,
               e->idx[off + j], idx[off + j]);
    off += lens[k];
  }
}

/* Batches as given, any worker count, lengths varying, indices repeating;
** the order given in several calls, some while workers wait. */
static void test_batches_as_given(void **state) {
  (void)state;
  static const unsigned workers[] = {0, 1, 4};
  for (size_t wi = 0; wi < 3; wi++) {
    tu_cb *cb = tu_cb_new(50);
    stoke_loader *l = given_loader(cb, workers[wi], 8, 2);
    size_t lens[12] = {8, 3, 8, 1, 8, 8, 5, 8, 2, 8, 8, 7};
    size_t idx[128];
    size_t total = 0;
    for (size_t k = 0; k < 12; k++) total += lens[k];
    make_order(50, total, idx);
    for (uint64_t ep = 0; ep < 2; ep++) {
      /* Four batches first, the rest one call at a time while delivering. */
      TU_OK(stoke_loader_order_append(l, idx, lens, 4));
      size_t given = 4, off = 0;
      for (size_t k = 0; k < 4; k++) off += lens[k];
      tu_epoch *e = tu_epoch_new();
      for (;;) {
        if (given < 12) {
          TU_OK(stoke_loader_order_append(l, idx + off, lens + given, 1));
          off += lens[given++];
          if (given == 12) TU_OK(stoke_loader_order_end(l));
        }
        stoke_batch *b;
        int rc = stoke_loader_next(l, &b);
        if (rc == STOKE_END) break;
        TU_RC_L(l, rc, STOKE_OK);
        tu_check_batch(b, cb, e);
        TU_CHECK(stoke_batch_epoch(b) == ep, "epoch %llu",
                 (unsigned long long)stoke_batch_epoch(b));
        stoke_batch_release(b);
      }
      check_epoch(e, idx, lens, 12);
      TU_CHECK(stoke_loader_n_batches(l) == 12, "n_batches %zu",
               stoke_loader_n_batches(l));
      TU_CHECK(stoke_loader_n_samples(l) == total, "n_samples %zu",
               stoke_loader_n_samples(l));
      free(e);
    }
    TU_CHECK(atomic_load(&cb->bad) == 0, "bad %d", atomic_load(&cb->bad));
    stoke_loader_destroy(l);
    tu_cb_free(cb);
  }
}

/* batch_lens NULL: full batches; an epoch whose order is empty ends at
** once; a long epoch given a few batches ahead keeps memory bounded (the
** claimed prefix is dropped) and is delivered exactly. */
static void test_long_epoch_and_empty(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(1000);
  stoke_loader *l = given_loader(cb, 2, 4, 2);
  TU_OK(stoke_loader_order_end(l));
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_END);
  TU_CHECK(stoke_loader_n_batches(l) == 0, "n_batches %zu",
           stoke_loader_n_batches(l));
  size_t next_index = 0, delivered = 0, n_batches = 500;
  size_t given = 0;
  for (;;) {
    while (given < n_batches && given < delivered + 4) {
      size_t idx[4];
      for (int j = 0; j < 4; j++) idx[j] = (next_index++) % 1000;
      TU_OK(stoke_loader_order_append(l, idx, NULL, 1));
      if (++given == n_batches) TU_OK(stoke_loader_order_end(l));
    }
    int rc = stoke_loader_next(l, &b);
    if (rc == STOKE_END) break;
    TU_RC_L(l, rc, STOKE_OK);
    const size_t *ix = stoke_batch_indices(b);
    TU_CHECK(stoke_batch_size(b) == 4, "size %zu", stoke_batch_size(b));
    for (int j = 0; j < 4; j++)
      TU_CHECK(ix[j] == (delivered * 4 + (size_t)j) % 1000,
               "batch %zu sample %d: %zu", delivered, j, ix[j]);
    delivered++;
    stoke_batch_release(b);
  }
  TU_CHECK(delivered == n_batches, "delivered %zu", delivered);
  stoke_host_ledger g;
  TU_OK(stoke_loader_ledger(l, &g));
  TU_CHECK(g.order_bytes == 0, "order_bytes %llu",
           (unsigned long long)g.order_bytes);
  stoke_loader_destroy(l);
  tu_cb_free(cb);
}

/* Misuse is refused with a message, and a next() with nothing given does
** not hang. */
static void test_errors(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(10);
  stoke_source *src = tu_cb_source(cb);
  stoke_config cfg = tu_config(src, 1, 2, 4);
  stoke_loader *own = tu_loader(&cfg);
  size_t idx[4] = {0, 1, 2, 3};
  TU_RC_L(own, stoke_loader_order_append(own, idx, NULL, 1), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(own), "without order_given");
  TU_RC_L(own, stoke_loader_order_end(own), STOKE_EINVAL);
  stoke_loader_destroy(own);
  cfg.order_given = 2;
  stoke_loader *l = NULL;
  TU_RC(stoke_loader_create(&cfg, &l), STOKE_EINVAL);
  stoke_source_destroy(src);

  static const unsigned workers[] = {0, 2};
  for (size_t wi = 0; wi < 2; wi++) {
    l = given_loader(cb, workers[wi], 4, 1);
    size_t bad_idx[4] = {0, 1, 10, 3};
    TU_RC_L(l, stoke_loader_order_append(l, bad_idx, NULL, 1), STOKE_EINVAL);
    TU_CONTAINS(stoke_errmsg(l), "index 10 (entry 2)");
    size_t lens[1] = {5};
    TU_RC_L(l, stoke_loader_order_append(l, idx, lens, 1), STOKE_EINVAL);
    TU_CONTAINS(stoke_errmsg(l), "has 5 samples");
    lens[0] = 0;
    TU_RC_L(l, stoke_loader_order_append(l, idx, lens, 1), STOKE_EINVAL);
    TU_RC_L(l, stoke_loader_order_append(l, NULL, NULL, 1), STOKE_EINVAL);
    /* Nothing given: next() says so instead of waiting forever. */
    stoke_batch *b;
    TU_RC_L(l, stoke_loader_next(l, &b), STOKE_EINVAL);
    TU_CONTAINS(stoke_errmsg(l), "never given");
    /* One batch, then starved again, then ended. */
    TU_OK(stoke_loader_order_append(l, idx, NULL, 1));
    TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
    stoke_batch_release(b);
    TU_RC_L(l, stoke_loader_next(l, &b), STOKE_EINVAL);
    TU_OK(stoke_loader_order_end(l));
    TU_RC_L(l, stoke_loader_order_append(l, idx, NULL, 1), STOKE_EINVAL);
    TU_CONTAINS(stoke_errmsg(l), "was ended");
    TU_RC_L(l, stoke_loader_next(l, &b), STOKE_END);
    /* The next epoch takes appends again. */
    TU_OK(stoke_loader_order_append(l, idx, NULL, 1));
    TU_OK(stoke_loader_order_end(l));
    TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
    TU_CHECK(stoke_batch_epoch(b) == 1, "epoch %llu",
             (unsigned long long)stoke_batch_epoch(b));
    stoke_batch_release(b);
    TU_RC_L(l, stoke_loader_next(l, &b), STOKE_END);
    stoke_loader_destroy(l);
  }
  tu_cb_free(cb);
}

/* Leaving an epoch early drops the rest of its order: the next epoch
** delivers only what is given for it, from batch 0. */
static void test_break_drops_the_rest(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(64);
  stoke_loader *l = given_loader(cb, 3, 4, 2);
  size_t idx[64];
  for (size_t i = 0; i < 64; i++) idx[i] = i;
  TU_OK(stoke_loader_order_append(l, idx, NULL, 16));
  TU_OK(stoke_loader_order_end(l));
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  stoke_batch_release(b);
  TU_OK(stoke_loader_end_epoch(l));
  size_t second[8] = {63, 62, 61, 60, 59, 58, 57, 56};
  TU_OK(stoke_loader_order_append(l, second, NULL, 2));
  TU_OK(stoke_loader_order_end(l));
  tu_epoch *e = tu_epoch_new();
  TU_RC_L(l, tu_run_epoch(l, cb, e, 1), STOKE_END);
  size_t lens[2] = {4, 4};
  check_epoch(e, second, lens, 2);
  TU_CHECK(e->epoch == 1, "epoch %llu", (unsigned long long)e->epoch);
  free(e);
  stoke_loader_destroy(l);
  tu_cb_free(cb);
}

/* ---- hooks ------------------------------------------------------------------ */

typedef struct hooks {
  tu_cb *cb;
  atomic_int started[8], stopped[8];
  atomic_int wrong_thread;  /* a hook ran on a thread not named stoke-wN */
  atomic_int fail_start;    /* worker to fail, or -1 */
  long fail_batch;          /* batch_done of this batch fails, or -1 */
  atomic_int done[4][16];   /* batch_done per (epoch, batch number) */
  atomic_int done_bad;      /* batch_done saw a sample not written */
  atomic_int pos_bad;       /* a fill saw a wrong batch/position */
  atomic_int refused;       /* the failing start has run */
} hooks;

static int thread_is(unsigned worker) {
  char name[32], want[32];
  pthread_getname_np(pthread_self(), name, sizeof name);
  snprintf(want, sizeof want, "stoke-w%u", worker);
  return strcmp(name, want) == 0;
}

static int hook_start(void *user, unsigned worker, char *err, size_t cap) {
  hooks *h = user;
  if (worker >= 8 || !thread_is(worker)) atomic_store(&h->wrong_thread, 1);
  int fail = atomic_load(&h->fail_start);
  if ((int)worker == fail) {
    snprintf(err, cap, "hook refused worker %u", worker);
    atomic_store(&h->refused, 1);
    return -1;
  }
  /* The others start once it has failed: else they could make the whole
  ** epoch before it (the loader is poisoned from then on). */
  if (fail >= 0)
    for (int t = 0; t < 10000 && !atomic_load(&h->refused); t++)
      tu_sleep_ns(1000000);
  atomic_fetch_add(&h->started[worker % 8], 1);
  return 0;
}

static void hook_stop(void *user, unsigned worker) {
  hooks *h = user;
  if (!thread_is(worker)) atomic_store(&h->wrong_thread, 1);
  atomic_fetch_add(&h->stopped[worker % 8], 1);
}

static int hook_fill(void *user, stoke_sample *s) {
  hooks *h = user;
  const stoke_batch *b = stoke_sample_batch(s);
  size_t pos = stoke_sample_position(s);
  if (!b || pos >= stoke_batch_size(b) ||
      stoke_batch_indices(b)[pos] != stoke_sample_index(s) ||
      stoke_batch_epoch(b) != stoke_sample_epoch(s))
    atomic_store(&h->pos_bad, 1);
  return tu_cb_fill(h->cb, s);
}

static int hook_done(void *user, const stoke_batch *b, char *err,
                     size_t cap) {
  hooks *h = user;
  size_t k = stoke_batch_number(b);
  uint64_t e = stoke_batch_epoch(b);
  if (k < 16 && e < 4) atomic_fetch_add(&h->done[e][k], 1);
  stoke_tensor t;
  if (stoke_batch_field(b, TU_F_IDX, &t) != 0) {
    atomic_store(&h->done_bad, 1);
    return 0;
  }
  const int64_t *idx = t.data;
  for (size_t j = 0; j < stoke_batch_size(b); j++)
    if (idx[j] != (int64_t)stoke_batch_indices(b)[j])
      atomic_store(&h->done_bad, 1);
  if ((long)k == h->fail_batch) {
    snprintf(err, cap, "collate refused");
    return -1;
  }
  return 0;
}

static stoke_source *hook_source(hooks *h, size_t n) {
  memset(h, 0, sizeof *h);
  h->cb = tu_cb_new(n);
  atomic_init(&h->fail_start, -1);
  h->fail_batch = -1;
  stoke_field_desc f[TU_N_FIELDS];
  tu_cb_fields(f);
  stoke_callback_config cc;
  stoke_callback_config_init(&cc);
  cc.n_samples = n;
  cc.n_fields = TU_N_FIELDS;
  cc.fields = f;
  cc.fill = hook_fill;
  cc.user = h;
  cc.thread_start = hook_start;
  cc.thread_stop = hook_stop;
  cc.batch_done = hook_done;
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_callback_ex(&cc, &src));
  return src;
}

/* thread_start once per worker on its own thread before any sample,
** thread_stop once at destroy; batch_done once per batch after every
** sample is written; each fill sees its batch and position. */
/* A given batch that SKIP empties is passed over, and the epoch ends when
** the given order says, not at the plan's batch count: with 8 samples in
** batches of 4 the plan has 2 batches, and the third given one was lost
** (next() returned the END after the empty second). */
static void test_skipped_batch_keeps_given_epoch(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(8);
  static const uint8_t bad[8] = {0, 0, 0, 0, 1, 1, 1, 1};
  cb->fail_set = bad;
  stoke_source *src = tu_cb_source(cb);
  stoke_config cfg = tu_config(src, 0, 2, 4);
  cfg.order_given = 1;
  cfg.on_error = STOKE_ON_ERROR_SKIP;
  cfg.max_failures = 100;
  stoke_loader *l = tu_loader(&cfg);
  stoke_source_destroy(src);
  size_t idx[12] = {0, 1, 2, 3, 4, 5, 6, 7, 3, 2, 1, 0};
  size_t lens[3] = {4, 4, 4};
  TU_OK(stoke_loader_order_append(l, idx, lens, 3));
  TU_OK(stoke_loader_order_end(l));
  stoke_batch *b;
  TU_OK(stoke_loader_next(l, &b));
  assert_int_equal(stoke_batch_number(b), 0);
  stoke_batch_release(b);
  TU_OK(stoke_loader_next(l, &b)); /* batch 1 is all skipped */
  assert_int_equal(stoke_batch_number(b), 2);
  assert_int_equal(stoke_batch_size(b), 4);
  assert_int_equal(stoke_batch_indices(b)[0], 3);
  stoke_batch_release(b);
  TU_RC(stoke_loader_next(l, &b), STOKE_END);
  stoke_loader_destroy(l);
  tu_cb_free(cb);
}

static void test_hooks(void **state) {
  (void)state;
  static const unsigned workers[] = {0, 1, 4};
  for (size_t wi = 0; wi < 3; wi++) {
    hooks h;
    stoke_source *src = hook_source(&h, 40);
    stoke_config cfg = tu_config(src, workers[wi], 2, 6);
    stoke_loader *l = tu_loader(&cfg);
    stoke_source_destroy(src);
    for (int ep = 0; ep < 2; ep++) {
      tu_epoch *e = tu_epoch_new();
      TU_RC_L(l, tu_run_epoch(l, h.cb, e, 1), STOKE_END);
      TU_CHECK(e->n_batches == 7, "%zu batches", e->n_batches);
      /* Every batch delivered was done exactly once before it was. */
      for (size_t k = 0; k < e->n_batches; k++)
        TU_CHECK(atomic_load(&h.done[ep][k]) == 1,
                 "epoch %d batch %zu done %d times", ep, k,
                 atomic_load(&h.done[ep][k]));
      free(e);
    }
    stoke_loader_destroy(l);
    for (unsigned w = 0; w < 8; w++) {
      int want = w < workers[wi] ? 1 : 0;
      TU_CHECK(atomic_load(&h.started[w]) == want,
               "W=%u: worker %u started %d times", workers[wi], w,
               atomic_load(&h.started[w]));
      TU_CHECK(atomic_load(&h.stopped[w]) == want,
               "W=%u: worker %u stopped %d times", workers[wi], w,
               atomic_load(&h.stopped[w]));
    }
    TU_CHECK(!atomic_load(&h.wrong_thread), "a hook ran on another thread");
    TU_CHECK(!atomic_load(&h.done_bad), "batch_done saw unwritten samples");
    TU_CHECK(!atomic_load(&h.pos_bad), "a fill saw a wrong batch/position");
    TU_CHECK(atomic_load(&h.cb->bad) == 0, "bad %d", atomic_load(&h.cb->bad));
    tu_cb_free(h.cb);
  }
}

/* A failing thread_start poisons the loader with ETHREAD and its message;
** a failing batch_done with ESAMPLE naming the batch. */
static void test_hook_failures(void **state) {
  (void)state;
  hooks h;
  stoke_source *src = hook_source(&h, 40);
  atomic_store(&h.fail_start, 1);
  stoke_config cfg = tu_config(src, 3, 2, 6);
  stoke_loader *l = tu_loader(&cfg);
  stoke_source_destroy(src);
  stoke_batch *b;
  int rc;
  do {
    rc = stoke_loader_next(l, &b);
    if (rc == STOKE_OK) stoke_batch_release(b);
  } while (rc == STOKE_OK);
  TU_RC_L(l, rc, STOKE_ETHREAD);
  TU_CONTAINS(stoke_errmsg(l), "worker 1 could not start: hook refused "
                               "worker 1");
  stoke_loader_destroy(l);
  TU_CHECK(atomic_load(&h.stopped[1]) == 0, "a failed start was stopped");
  TU_CHECK(atomic_load(&h.stopped[0]) == 1, "worker 0 not stopped");
  tu_cb_free(h.cb);

  static const unsigned workers[] = {0, 2};
  for (size_t wi = 0; wi < 2; wi++) {
    src = hook_source(&h, 40);
    h.fail_batch = 2;
    cfg = tu_config(src, workers[wi], 2, 6);
    cfg.prefetch_next_epoch = 0;
    l = tu_loader(&cfg);
    stoke_source_destroy(src);
    size_t got = 0;
    while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
      got++;
      stoke_batch_release(b);
    }
    TU_RC_L(l, rc, STOKE_ESAMPLE);
    TU_CHECK(got <= 2, "%zu batches delivered past a failed batch 2", got);
    TU_CONTAINS(stoke_errmsg(l), "batch 2 (epoch 0) failed: collate refused");
    stoke_loader_destroy(l);
    tu_cb_free(h.cb);
  }
}

/* Samples timed in the Python stages show up in the statistics under
** those stages and count toward the producer's time. */
static int py_fill(void *user, stoke_sample *s) {
  (void)user;
  stoke_sample_stage(s, STOKE_STAGE_GIL_WAIT);
  tu_sleep_ns(200000);
  stoke_sample_stage(s, STOKE_STAGE_PYTHON);
  tu_sleep_ns(300000);
  stoke_sample_stage(s, STOKE_STAGE_COLLATE);
  tu_sleep_ns(100000);
  stoke_sample_stage(s, STOKE_STAGE_SLOT_WAIT); /* not a sample stage */
  int64_t *x = stoke_sample_field(s, 0);
  *x = (int64_t)stoke_sample_index(s);
  return 0;
}

static void test_python_stages(void **state) {
  (void)state;
  stoke_field_desc f = tu_field("x", STOKE_I64, 0, NULL);
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_callback(24, 1, &f, py_fill, NULL, &src));
  stoke_config cfg = tu_config(src, 2, 2, 4);
  cfg.prefetch_next_epoch = 0; /* exact counts: no sample of epoch 1 */
  stoke_loader *l = tu_loader(&cfg);
  stoke_source_destroy(src);
  tu_epoch *e = tu_epoch_new();
  TU_RC_L(l, tu_run_epoch(l, NULL, e, 1), STOKE_END);
  free(e);
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_loader_stats(l, &st));
  TU_CHECK(st.stage[STOKE_STAGE_READ].count == 24, "read %llu",
           (unsigned long long)st.stage[STOKE_STAGE_READ].count);
  for (int s = STOKE_STAGE_PYTHON; s <= STOKE_STAGE_COLLATE; s++)
    TU_CHECK(st.stage[s].count == 24, "%s counted %llu", stoke_stage_name(s),
             (unsigned long long)st.stage[s].count);
  TU_CHECK(st.stage[STOKE_STAGE_SLOT_WAIT].count == 0 ||
               st.stage[STOKE_STAGE_SLOT_WAIT].mean_ns < 100000000,
           "slot_wait took the sample's time");
  /* Each stage holds at least its own sleep, which a loaded machine can
  ** only lengthen (comparing the stages with each other failed there: a
  ** 100 us sleep took longer than a 300 us one). */
  static const struct { int stage; int64_t ns; } slept[] = {
      {STOKE_STAGE_GIL_WAIT, 200000},
      {STOKE_STAGE_PYTHON, 300000},
      {STOKE_STAGE_COLLATE, 100000}};
  for (size_t k = 0; k < sizeof slept / sizeof *slept; k++)
    TU_CHECK(st.stage[slept[k].stage].total_ns >= 24 * slept[k].ns,
             "%s %lld ns < 24 sleeps of %lld ns",
             stoke_stage_name(slept[k].stage),
             (long long)st.stage[slept[k].stage].total_ns,
             (long long)slept[k].ns);
  stoke_model m;
  TU_OK(stoke_model_init(&m, &st, &cfg, 0));
  int64_t sum = 0;
  for (int s = STOKE_STAGE_READ; s < STOKE_STAGE_COUNT; s++)
    if (s != STOKE_STAGE_SLOT_WAIT && s != STOKE_STAGE_COPY)
      sum += m.stage_ns[s];
  /* Each mean is rounded down to the ns on its own. */
  TU_CHECK(llabs(m.t_d_ns - sum) <= STOKE_STAGE_COUNT, "t_d %lld is not the sum of the sample stages "
           "%lld", (long long)m.t_d_ns, (long long)sum);
  TU_CHECK(m.gil_wait_frac > 0 && m.gil_wait_frac < 1, "gil_wait_frac %f",
           m.gil_wait_frac);
  assert_string_equal(stoke_stage_name(STOKE_STAGE_PYTHON), "python");
  assert_string_equal(stoke_stage_name(STOKE_STAGE_GIL_WAIT), "gil_wait");
  assert_string_equal(stoke_stage_name(STOKE_STAGE_COLLATE), "collate");
  stoke_loader_destroy(l);
}

int main(void) {
  tu_watchdog(300);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batches_as_given),
      cmocka_unit_test(test_long_epoch_and_empty),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_break_drops_the_rest),
      cmocka_unit_test(test_skipped_batch_keeps_given_epoch),
      cmocka_unit_test(test_hooks),
      cmocka_unit_test(test_hook_failures),
      cmocka_unit_test(test_python_stages),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
