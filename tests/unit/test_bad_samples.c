/* test_bad_samples.c — stoke_config.on_error: fail, skip and replace, the
** failure log and the failure budget.
**
**  - FAIL (the default) is what it always was: the first bad sample poisons
**    the loader with the same message; it is also logged and counted.
**  - SKIP: the batch holding a bad sample is one shorter and says so; every
**    other sample is delivered exactly once, with its own fields (the gap is
**    closed); a batch left empty is not handed out.
**  - REPLACE: the batch keeps its size; the substitute is the documented
**    draw from the bad sample's stream, the same for every W and K, filled
**    with a stream of its own; a substitute that fails is replaced in turn,
**    up to max_replace_tries.
**  - The budget (a count, or a share of the epoch) turns a flood into
**    STOKE_EFAILURES naming the last bad samples; it counts per epoch.
*/
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

static const unsigned k_workers[] = {0, 1, 2, 5};

/* The loader of tests here: shuffled, seed 11, no failure budget, and no
** work on the next epoch before it starts, so that the counts are exact. */
static stoke_loader *bad_loader(stoke_source *src, unsigned W, unsigned K,
                                size_t B, int on_error) {
  stoke_config c = tu_config(src, W, K, B);
  c.shuffle = 1;
  c.seed = 11;
  c.on_error = on_error;
  c.max_failure_frac = 0;
  c.prefetch_next_epoch = 0;
  return tu_loader(&c);
}

/* The documented substitute of bad sample `index` in `epoch`: candidates
** from its stream (seed, epoch, index) at counter 2^63 on, passing over
** itself and the samples in `bad`. */
static size_t expected_substitute(uint64_t seed, uint64_t epoch, size_t index,
                                  size_t n, const uint8_t *bad) {
  stoke_rng r;
  stoke_rng_init(&r, seed, epoch, index);
  r.counter = UINT64_C(1) << 63;
  for (int t = 0; t < 8; t++) {
    size_t c = (size_t)stoke_rng_below(&r, n);
    if (c != index && !(bad && bad[c])) return c;
  }
  return SIZE_MAX;
}

static void test_fail_is_the_default_and_unchanged(void **state) {
  (void)state;
  stoke_config d;
  stoke_config_init(&d);
  assert_int_equal(d.on_error, STOKE_ON_ERROR_FAIL);
  assert_int_equal(d.max_failures, 0);
  assert_true(d.max_failure_frac == 0.01);
  assert_int_equal(d.max_replace_tries, 8);
  assert_null(d.quarantine_path);
  assert_string_equal(stoke_on_error_name(STOKE_ON_ERROR_FAIL), "fail");
  assert_string_equal(stoke_on_error_name(STOKE_ON_ERROR_SKIP), "skip");
  assert_string_equal(stoke_on_error_name(STOKE_ON_ERROR_REPLACE), "replace");
  assert_string_equal(stoke_on_error_name(7), "?");

  tu_cb *cb = tu_cb_new(40);
  cb->fail_index = 13;
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = tu_config(src, 0, 2, 4);
  stoke_loader *l = tu_loader(&c);
  int rc;
  stoke_batch *b;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) stoke_batch_release(b);
  TU_RC_L(l, rc, STOKE_ESAMPLE);
  /* Byte for byte the message of the loader before the policies. */
  assert_string_equal(stoke_errmsg(l),
                      "sample 13 (epoch 0, batch 3) failed: "
                      "tu-injected-failure (sample 13)");
  stoke_failure f[STOKE_FAILURES_KEPT];
  assert_int_equal(stoke_loader_failures(l, f, STOKE_FAILURES_KEPT), 1);
  assert_int_equal(f[0].index, 13);
  assert_int_equal(f[0].batch, 3);
  assert_int_equal(f[0].action, STOKE_ON_ERROR_FAIL);
  assert_int_equal(f[0].quarantined, 0);
  assert_true(f[0].substitute == SIZE_MAX);
  TU_CONTAINS(f[0].reason, "tu-injected-failure");
  tu_expect_bad_counts(l, 1, 0, 0, 0);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static void test_bad_config(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(8);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = tu_config(src, 0, 1, 4);
  stoke_loader *l = NULL;
  c.on_error = 3;
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "on_error");
  c.on_error = STOKE_ON_ERROR_SKIP;
  c.max_failure_frac = 1.5;
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "max_failure_frac");
  c.max_failure_frac = 0;
  c.max_replace_tries = 0;
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "max_replace_tries");
  c.max_replace_tries = 1;
  c.quarantine_path = "";
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "quarantine_path");
  assert_null(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- skip ------------------------------------------------------------------ */

static void test_skip_shortens_the_batch(void **state) {
  (void)state;
  const size_t N = 42, B = 4;
  tu_cb *cb = tu_cb_new(N);
  uint8_t bad[42] = {0};
  bad[5] = bad[6] = bad[30] = 1;
  cb->fail_set = bad;
  stoke_source *src = tu_cb_source(cb);
  tu_epoch *e = tu_epoch_new();
  for (size_t wi = 0; wi < sizeof k_workers / sizeof *k_workers; wi++) {
    unsigned W = k_workers[wi];
    stoke_loader *l = bad_loader(src, W, 3, B, STOKE_ON_ERROR_SKIP);
    for (int ep = 0; ep < 3; ep++) {
      memset(e, 0, sizeof *e);
      size_t short_batches = 0, skipped = 0, batches = 0;
      stoke_batch *b;
      int rc;
      while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
        /* The fields match the indices: the gap was closed. */
        tu_check_batch(b, cb, e);
        size_t n = stoke_batch_size(b), k = stoke_batch_n_skipped(b);
        size_t want = stoke_batch_number(b) + 1 < stoke_loader_n_batches(l)
                          ? B
                          : N - B * (stoke_loader_n_batches(l) - 1);
        TU_CHECK(n + k == want, "W %u batch %zu: %zu + %zu skipped != %zu", W,
                 stoke_batch_number(b), n, k, want);
        assert_int_equal(stoke_batch_n_replaced(b), 0);
        short_batches += k > 0;
        skipped += k;
        batches++;
        stoke_batch_release(b);
      }
      TU_RC_L(l, rc, STOKE_END);
      assert_int_equal(batches, stoke_loader_n_batches(l));
      TU_CHECK(skipped == 3 && e->n_samples == N - 3,
               "W %u epoch %d: %zu skipped, %zu delivered", W, ep, skipped,
               e->n_samples);
      assert_true(short_batches >= 2);
      int seen[42] = {0};
      for (size_t k = 0; k < e->n_samples; k++) seen[e->idx[k]]++;
      for (size_t i = 0; i < N; i++)
        TU_CHECK(seen[i] == !bad[i], "W %u epoch %d: sample %zu delivered "
                 "%d times", W, ep, i, seen[i]);
    }
    tu_expect_bad_counts(l, 9, 0, 9, 0);
    stoke_failure f[STOKE_FAILURES_KEPT];
    size_t nf = stoke_loader_failures(l, f, STOKE_FAILURES_KEPT);
    assert_int_equal(nf, STOKE_FAILURES_KEPT);
    for (size_t k = 0; k < nf; k++) {
      TU_CHECK(bad[f[k].index], "logged sample %zu is not bad", f[k].index);
      assert_int_equal(f[k].action, STOKE_ON_ERROR_SKIP);
      TU_CONTAINS(f[k].reason, "tu-injected-failure");
    }
    /* Oldest first: the last entry is of the last epoch. */
    assert_int_equal(f[nf - 1].epoch, 2);
    stoke_loader_destroy(l);
  }
  free(e);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* B = 1: a bad sample empties its batch, which is not handed out; when it
** is the last batch, next() returns STOKE_END at once. */
static void test_skip_an_emptied_batch(void **state) {
  (void)state;
  const size_t N = 10;
  tu_cb *cb = tu_cb_new(N);
  uint8_t bad[10] = {0};
  bad[3] = bad[9] = 1; /* sequential: batches 3 and 9, the last */
  cb->fail_set = bad;
  stoke_source *src = tu_cb_source(cb);
  for (unsigned W = 0; W <= 3; W += 3) {
    stoke_config c = tu_config(src, W, 2, 1);
    c.on_error = STOKE_ON_ERROR_SKIP;
    c.max_failure_frac = 0;
    stoke_loader *l = tu_loader(&c);
    for (int ep = 0; ep < 2; ep++) {
      tu_epoch *e = tu_epoch_new();
      int rc = tu_run_epoch(l, cb, e, 0);
      TU_RC_L(l, rc, STOKE_END);
      assert_int_equal(e->n_batches, 8);
      for (size_t k = 0; k < e->n_batches; k++)
        TU_CHECK(e->batch_number[k] != 3 && e->batch_number[k] != 9,
                 "W %u: empty batch %zu handed out", W, e->batch_number[k]);
      free(e);
    }
    stoke_loader_destroy(l);
  }
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- replace ------------------------------------------------------------- */

static void test_replace_keeps_size_and_determinism(void **state) {
  (void)state;
  const size_t N = 48, B = 6;
  tu_cb *cb = tu_cb_new(N);
  uint8_t bad[48] = {0};
  bad[7] = bad[20] = 1;
  cb->fail_set = bad;
  stoke_source *src = tu_cb_source(cb);
  tu_epoch *ref[2] = {tu_epoch_new(), tu_epoch_new()}, *e = tu_epoch_new();
  const unsigned ks[] = {1, 3};
  int first = 1;
  for (size_t wi = 0; wi < sizeof k_workers / sizeof *k_workers; wi++)
    for (size_t ki = 0; ki < 2; ki++) {
      unsigned W = k_workers[wi], K = ks[ki];
      stoke_loader *l = bad_loader(src, W, K, B, STOKE_ON_ERROR_REPLACE);
      for (int ep = 0; ep < 2; ep++) {
        tu_epoch *got = first ? ref[ep] : e;
        memset(got, 0, sizeof *got);
        stoke_batch *b;
        int rc;
        size_t replaced = 0;
        while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
          tu_check_batch(b, cb, got);
          assert_int_equal(stoke_batch_n_skipped(b), 0);
          replaced += stoke_batch_n_replaced(b);
          stoke_batch_release(b);
        }
        TU_RC_L(l, rc, STOKE_END);
        assert_int_equal(replaced, 2);
        assert_int_equal(got->n_samples, N); /* every batch kept its size */
        if (!first) {
          TU_CHECK(memcmp(got->idx, ref[ep]->idx, N * sizeof got->idx[0]) ==
                           0 &&
                       memcmp(got->rnd, ref[ep]->rnd, N * sizeof got->rnd[0]) ==
                           0,
                   "W %u K %u epoch %d: not the batches of W 0 K 1", W, K, ep);
          continue;
        }
        /* Where a bad sample was, its documented substitute, filled with
        ** a stream that is neither its own nor the bad sample's. */
        size_t subs = 0;
        for (size_t k = 0; k < N; k++) {
          size_t i = got->idx[k];
          int dup = 0;
          for (size_t j = 0; j < N; j++) dup += got->idx[j] == i;
          if (dup == 1) continue;
          /* i appears twice: once in its own place, once as a substitute;
          ** the copies differ in their random values. */
          stoke_rng own;
          stoke_rng_init(&own, 11, (uint64_t)ep, i);
          uint64_t r0 = stoke_rng_u64(&own);
          if (got->rnd[k][0] != r0) {
            subs++;
            int is_sub = 0;
            for (size_t b2 = 0; b2 < N; b2++)
              if (bad[b2] &&
                  expected_substitute(11, (uint64_t)ep, b2, N, bad) == i)
                is_sub = 1;
            TU_CHECK(is_sub, "epoch %d: %zu at %zu is no documented "
                     "substitute", ep, i, k);
            for (size_t b2 = 0; b2 < N; b2++)
              if (bad[b2]) {
                stoke_rng br;
                stoke_rng_init(&br, 11, (uint64_t)ep, b2);
                TU_CHECK(got->rnd[k][0] != stoke_rng_u64(&br),
                         "substitute %zu filled with bad sample %zu's stream",
                         i, b2);
              }
          }
        }
        for (size_t k = 0; k < N; k++)
          TU_CHECK(!bad[got->idx[k]], "epoch %d: bad sample %zu delivered",
                   ep, got->idx[k]);
        assert_int_equal(subs, 2);
      }
      stoke_failure f[STOKE_FAILURES_KEPT];
      size_t nf = stoke_loader_failures(l, f, STOKE_FAILURES_KEPT);
      assert_int_equal(nf, 4);
      for (size_t k = 0; k < nf; k++) {
        assert_int_equal(f[k].action, STOKE_ON_ERROR_REPLACE);
        assert_int_equal(f[k].substitute,
                         expected_substitute(11, f[k].epoch, f[k].index, N,
                                             bad));
      }
      tu_expect_bad_counts(l, nf, 0, 0, nf);
      stoke_loader_destroy(l);
      first = 0;
    }
  free(ref[0]);
  free(ref[1]);
  free(e);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* Substitutes that fail are replaced in turn (and counted); when every
** candidate of max_replace_tries fails, the bad sample is an error. */
static void test_replace_chains_and_gives_up(void **state) {
  (void)state;
  const size_t N = 30;
  tu_cb *cb = tu_cb_new(N);
  uint8_t bad[30] = {0};
  bad[4] = 1;
  /* Make the first two candidates of sample 4 (epoch 0) bad too. */
  stoke_rng r;
  stoke_rng_init(&r, 11, 0, 4);
  r.counter = UINT64_C(1) << 63;
  size_t c0 = (size_t)stoke_rng_below(&r, N), c1 = (size_t)stoke_rng_below(&r, N),
         c2 = (size_t)stoke_rng_below(&r, N);
  if (c0 != 4) bad[c0] = 1;
  if (c1 != 4) bad[c1] = 1;
  cb->fail_set = bad;
  stoke_source *src = tu_cb_source(cb);
  for (unsigned W = 0; W <= 2; W += 2) {
    stoke_loader *l = bad_loader(src, W, 2, 5, STOKE_ON_ERROR_REPLACE);
    tu_epoch *e = tu_epoch_new();
    tu_epoch_ok(l, cb, e, 1);
    int found = 0;
    for (size_t k = 0; k < e->n_samples; k++) {
      TU_CHECK(!bad[e->idx[k]], "bad sample %zu delivered", e->idx[k]);
      found += e->idx[k] == c2;
    }
    /* c2 replaced sample 4 (unless c2 is itself bad or 4: then a later
    ** one did; this seed's draws are checked to be plain). */
    if (!bad[c2] && c2 != 4) assert_true(found >= 1);
    stoke_stats st = {.struct_size = sizeof st};
    TU_OK(stoke_loader_stats(l, &st));
    size_t n_bad = 0;
    for (size_t i = 0; i < N; i++) n_bad += bad[i];
    /* Every bad sample met: each in its own place, plus the failed
    ** candidates (c0, c1) met again as substitutes. */
    assert_true(st.failures >= n_bad + (c0 != 4) + (c1 != 4));
    assert_int_equal(st.replaced, n_bad);
    free(e);
    stoke_loader_destroy(l);
  }
  /* One try, and every other sample bad: no substitute. */
  memset(bad, 1, sizeof bad);
  bad[0] = 0;
  stoke_config c = tu_config(src, 2, 2, 5);
  c.on_error = STOKE_ON_ERROR_REPLACE;
  c.max_replace_tries = 1;
  c.max_failure_frac = 0;
  stoke_loader *l = tu_loader(&c);
  int rc;
  stoke_batch *b;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) stoke_batch_release(b);
  TU_RC_L(l, rc, STOKE_ESAMPLE);
  TU_CONTAINS(stoke_errmsg(l), "no substitute could be filled in 1 try");
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- the budget ------------------------------------------------------------ */

static int run_epochs(stoke_loader *l, int epochs) {
  stoke_batch *b;
  for (int ep = 0; ep < epochs; ep++) {
    int rc;
    while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) stoke_batch_release(b);
    if (rc != STOKE_END) return rc;
  }
  return STOKE_END;
}

/* Workers that spend the budget at once: the message is the first one's,
** budget + 1 bad samples, whichever worker poisons first, and the loader
** fails (every such worker notes its batch, which will not come).  Each
** one's own count won under TSan ("3 in epoch 0" against a budget of 1,
** test_budget, 2 runs in 5), and here in every binary of 500 runs; letting
** only the first poison hung in 5 binaries of 20 (a later batch noted as
** the failed one, the consumer waiting for an earlier one). */
static void test_budget_spent_at_once(void **state) {
  (void)state;
  const size_t N = 96;
  tu_cb *cb = tu_cb_new(N);
  uint8_t bad[96];
  memset(bad, 1, sizeof bad); /* every sample bad: the workers fail together */
  cb->fail_set = bad;
  stoke_source *src = tu_cb_source(cb);
  for (int run = 0; run < 500; run++) {
    stoke_config c = tu_config(src, 8, 2, 8);
    c.on_error = STOKE_ON_ERROR_SKIP;
    c.max_failures = 1;
    stoke_loader *l = tu_loader(&c);
    TU_RC_L(l, run_epochs(l, 1), STOKE_EFAILURES);
    TU_CONTAINS(stoke_errmsg(l), "too many bad samples: 2 in epoch 0, over "
                                 "the failure budget of 1 (max_failures)");
    stoke_loader_destroy(l);
  }
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* The counters and the log hold only what reached the consumer.  With the
** next epoch prefetched (the default), workers meet that epoch's bad
** samples before it starts; counted as they were met, a run's counters
** depended on how far the prefetch had got when it was read or stopped
** (t0701-bad-samples failed so, 1 run in ~30 on a loaded machine).  Here
** the prefetch is waited for, so the old code failed every time. */
typedef struct logged {
  size_t n;
  stoke_failure f[STOKE_FAILURES_KEPT];
} logged;

static void run_prefetched(stoke_source *src, tu_cb *cb, unsigned W,
                           int policy, logged *out) {
  const size_t N = cb->n, B = 4;
  stoke_config c = tu_config(src, W, 6, B); /* 6 slots: a whole epoch */
  c.shuffle = 1;
  c.seed = 7;
  c.on_error = policy;
  c.max_failures = 10;
  c.prefetch_next_epoch = 1;
  tu_cb_reset_calls(cb);
  stoke_loader *l = tu_loader(&c);
  TU_RC_L(l, run_epochs(l, 1), STOKE_END);
  /* Epoch 1 is filled ahead, its two bad samples met (and, with REPLACE,
  ** their substitutes filled), before anyone asks for it. */
  long want = (long)N + (policy == STOKE_ON_ERROR_REPLACE ? 2 : 0);
  long got = tu_cb_wait_epoch_calls(cb, 1, want, 60 * INT64_C(1000000000));
  TU_CHECK(got == want, "W %u: %ld fills of epoch 1 ahead, want %ld", W, got,
           want);
  int skip = policy == STOKE_ON_ERROR_SKIP;
  tu_expect_bad_counts(l, 2, 0, skip ? 2 : 0, skip ? 0 : 2);
  stoke_failure f[STOKE_FAILURES_KEPT];
  size_t nf = stoke_loader_failures(l, f, STOKE_FAILURES_KEPT);
  assert_int_equal(nf, 2);
  for (size_t k = 0; k < nf; k++) assert_int_equal(f[k].epoch, 0);
  /* Handed out, epoch 1 counts. */
  TU_RC_L(l, run_epochs(l, 1), STOKE_END);
  tu_expect_bad_counts(l, 4, 0, skip ? 4 : 0, skip ? 0 : 4);
  out->n = stoke_loader_failures(l, out->f, STOKE_FAILURES_KEPT);
  assert_int_equal(out->n, 4);
  stoke_loader_destroy(l);
}

static void test_counts_only_what_was_handed_out(void **state) {
  (void)state;
  const size_t N = 24;
  tu_cb *cb = tu_cb_new(N);
  uint8_t bad[24] = {0};
  bad[9] = bad[17] = 1;
  cb->fail_set = bad;
  stoke_source *src = tu_cb_source(cb);
  for (int policy = STOKE_ON_ERROR_SKIP; policy <= STOKE_ON_ERROR_REPLACE;
       policy++) {
    logged first, again;
    run_prefetched(src, cb, 1, policy, &first);
    /* The same log, record by record, for any W and every time. */
    static const unsigned ws[] = {1, 3, 3, 1, 3};
    for (size_t r = 0; r < sizeof ws / sizeof *ws; r++) {
      run_prefetched(src, cb, ws[r], policy, &again);
      assert_int_equal(again.n, first.n);
      for (size_t k = 0; k < first.n; k++) {
        const stoke_failure *a = &first.f[k], *b = &again.f[k];
        TU_CHECK(a->index == b->index && a->epoch == b->epoch &&
                     a->batch == b->batch && a->substitute == b->substitute &&
                     a->action == b->action,
                 "policy %d W %u record %zu: sample %zu epoch %llu batch %zu "
                 "substitute %zu, first run sample %zu epoch %llu batch %zu "
                 "substitute %zu", policy, ws[r], k, b->index,
                 (unsigned long long)b->epoch, b->batch, b->substitute,
                 a->index, (unsigned long long)a->epoch, a->batch,
                 a->substitute);
      }
    }
  }
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static void test_budget(void **state) {
  (void)state;
  const size_t N = 100;
  tu_cb *cb = tu_cb_new(N);
  uint8_t bad[100] = {0};
  for (size_t i = 10; i < 15; i++) bad[i] = 1; /* 5 bad, 5% */
  cb->fail_set = bad;
  stoke_source *src = tu_cb_source(cb);
  for (int policy = STOKE_ON_ERROR_SKIP; policy <= STOKE_ON_ERROR_REPLACE;
       policy++)
    for (unsigned W = 0; W <= 3; W += 3) {
      stoke_config c = tu_config(src, W, 2, 8);
      c.shuffle = 1;
      c.on_error = policy;
      /* The default budget, 1% of 100: one bad sample per epoch. */
      stoke_loader *l = tu_loader(&c);
      int rc = run_epochs(l, 1);
      TU_RC_L(l, rc, STOKE_EFAILURES);
      TU_CONTAINS(stoke_errmsg(l), "too many bad samples: 2 in epoch ");
      TU_CONTAINS(stoke_errmsg(l), ", over the failure budget of 1 (1% of "
                                   "100 samples); the last: sample 1");
      stoke_batch *b;
      TU_RC_L(l, stoke_loader_next(l, &b), STOKE_EBADSTATE);
      stoke_loader_destroy(l);
      /* A count: 4 is too few, 5 is enough, in every epoch (the budget
      ** counts per epoch, prefetched epochs included). */
      c.max_failures = 4;
      l = tu_loader(&c);
      TU_RC_L(l, run_epochs(l, 3), STOKE_EFAILURES);
      TU_CONTAINS(stoke_errmsg(l), "over the failure budget of 4 "
                                   "(max_failures)");
      stoke_loader_destroy(l);
      c.max_failures = 5;
      l = tu_loader(&c);
      TU_RC_L(l, run_epochs(l, 4), STOKE_END);
      /* Exactly the four epochs handed out, whatever was prefetched. */
      tu_expect_bad_counts(l, 20, 0, policy == STOKE_ON_ERROR_SKIP ? 20 : 0,
                           policy == STOKE_ON_ERROR_SKIP ? 0 : 20);
      stoke_loader_destroy(l);
      /* A share: 4% is 4, 5% is 5. */
      c.max_failures = 0;
      c.max_failure_frac = 0.04;
      l = tu_loader(&c);
      TU_RC_L(l, run_epochs(l, 2), STOKE_EFAILURES);
      TU_CONTAINS(stoke_errmsg(l), "(4% of 100 samples)");
      stoke_loader_destroy(l);
      c.max_failure_frac = 0.05;
      l = tu_loader(&c);
      TU_RC_L(l, run_epochs(l, 2), STOKE_END);
      stoke_loader_destroy(l);
      /* No limit. */
      c.max_failure_frac = 0;
      l = tu_loader(&c);
      TU_RC_L(l, run_epochs(l, 2), STOKE_END);
      stoke_loader_destroy(l);
    }
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fail_is_the_default_and_unchanged),
      cmocka_unit_test(test_bad_config),
      cmocka_unit_test(test_skip_shortens_the_batch),
      cmocka_unit_test(test_skip_an_emptied_batch),
      cmocka_unit_test(test_replace_keeps_size_and_determinism),
      cmocka_unit_test(test_replace_chains_and_gives_up),
      cmocka_unit_test(test_counts_only_what_was_handed_out),
      cmocka_unit_test(test_budget),
      cmocka_unit_test(test_budget_spent_at_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
