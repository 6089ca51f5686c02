/* test_resume.c — stoke_loader_state: save, restore, encode, decode.
**
** The guarantee: a loader restored from a state hands out exactly the
** batches an uninterrupted run had not handed out yet, each with the same
** samples and random values, whatever the worker count, prefetch depth or
** in_order of either side, also under REPLACE, and whatever seed the new
** loader was created with.  Cut points: a fresh loader, between epochs
** (after END), the first batch, the middle, before and after the last
** batch, with the next epoch's prefetch in flight on the saving side and
** on the restoring side.  Elastic: a state of world 2 resumes in world 3 at
** the next epoch, whose samples the three ranks cover exactly once.
** Another dataset, a damaged blob, a restore mid-epoch and an out-of-order
** position that is not a prefix are refused with a message.
*/
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

#define N 50
#define B 8
#define NB 7     /* batches per epoch: 6 of 8 and one of 2 */
#define EPOCHS 3 /* epochs 0, 1, 2 */
#define SEED 5

typedef struct rec {
  size_t n;
  size_t idx[B];
  uint64_t rnd[B];
  int seen;
} rec;

typedef struct run {
  rec r[EPOCHS][NB];
} run;

static uint8_t g_bad[N]; /* bad samples of the REPLACE runs */

static stoke_config cfg(stoke_source *src, unsigned W, unsigned K,
                        int in_order, uint64_t seed, int on_error) {
  stoke_config c = tu_config(src, W, K, B);
  c.shuffle = 1;
  c.seed = seed;
  c.in_order = in_order;
  c.on_error = on_error;
  c.max_failure_frac = 0;
  return c;
}

static void take(rec *r, stoke_batch *b) {
  stoke_tensor t;
  TU_OK(stoke_batch_field(b, TU_F_RND, &t));
  const int64_t *rnd = t.data;
  r->n = stoke_batch_size(b);
  memcpy(r->idx, stoke_batch_indices(b), r->n * sizeof r->idx[0]);
  for (size_t k = 0; k < r->n; k++) memcpy(&r->rnd[k], &rnd[2 * k], 8);
}

/* The uninterrupted run: W 0, K 1, in order, epochs 0..2. */
static void reference(stoke_source *src, int on_error, run *out) {
  memset(out, 0, sizeof *out);
  stoke_config c = cfg(src, 0, 1, 1, SEED, on_error);
  stoke_loader *l = tu_loader(&c);
  for (int e = 0; e < EPOCHS; e++) {
    stoke_batch *b;
    int rc;
    size_t k = 0;
    while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
      assert_int_equal(stoke_batch_number(b), k);
      take(&out->r[e][k++], b);
      stoke_batch_release(b);
    }
    TU_RC_L(l, rc, STOKE_END);
    assert_int_equal(k, NB);
  }
  stoke_loader_destroy(l);
}

/* A cut: the saving loader ran `epoch` epochs to their END, then took `c`
** batches of the next (c == NB: all of them, END not yet returned). */
typedef struct cut {
  int epoch;
  size_t c;
} cut;

static const cut k_cuts[] = {{0, 0}, {1, 0}, {1, 1}, {1, 3},
                             {1, 6}, {1, 7}, {2, 0}, {2, 7}};

/* Check batch b (of a resumed run) against the reference and mark it. */
static void check_against(run *ref, stoke_batch *b, const char *what) {
  uint64_t e = stoke_batch_epoch(b);
  size_t k = stoke_batch_number(b);
  TU_CHECK(e < EPOCHS && k < NB, "%s: batch %zu of epoch %llu", what, k,
           (unsigned long long)e);
  rec got;
  take(&got, b);
  rec *want = &ref->r[e][k];
  TU_CHECK(!want->seen, "%s: batch %zu of epoch %llu handed out twice", what,
           k, (unsigned long long)e);
  want->seen = 1;
  TU_CHECK(got.n == want->n &&
               memcmp(got.idx, want->idx, got.n * sizeof got.idx[0]) == 0 &&
               memcmp(got.rnd, want->rnd, got.n * sizeof got.rnd[0]) == 0,
           "%s: batch %zu of epoch %llu differs from the uninterrupted run",
           what, k, (unsigned long long)e);
}

/* Run the saving side to the cut (checking what it hands out), then save
** the state through the blob. */
static void run_to_cut(stoke_source *src, cut ct, unsigned W, unsigned K,
                       int on_error, run *ref, uint8_t blob[STOKE_STATE_BYTES],
                       const char *what) {
  stoke_config c = cfg(src, W, K, 1, SEED, on_error);
  stoke_loader *l = tu_loader(&c);
  stoke_batch *b;
  for (int e = 0; e < ct.epoch; e++) {
    int rc;
    while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
      check_against(ref, b, what);
      stoke_batch_release(b);
    }
    TU_RC_L(l, rc, STOKE_END);
  }
  stoke_batch *held = NULL;
  for (size_t k = 0; k < ct.c; k++) {
    if (held) stoke_batch_release(held);
    TU_RC_L(l, stoke_loader_next(l, &held), STOKE_OK);
    check_against(ref, held, what);
  }
  /* Saved while the caller holds the cut's last batch: with W > 0 and the
  ** epoch all claimed, the next epoch is being prefetched meanwhile. */
  stoke_loader_state st;
  TU_OK(stoke_loader_state_save(l, &st));
  assert_int_equal(st.epoch, (uint64_t)ct.epoch);
  assert_int_equal(st.batches_done, ct.c);
  assert_int_equal(st.seed, SEED);
  size_t n = 0;
  TU_OK(stoke_loader_state_encode(&st, blob, STOKE_STATE_BYTES, &n));
  assert_int_equal(n, STOKE_STATE_BYTES);
  stoke_batch_release(held);
  stoke_loader_destroy(l);
}

/* Restore the blob into a new loader (created with another seed; `warm`:
** after an epoch of its own, its prefetch in flight) and run to the end of
** epoch 2, checking each batch. */
static void resume(stoke_source *src, const uint8_t *blob, unsigned W,
                   unsigned K, int in_order, int warm, int on_error, run *ref,
                   const char *what) {
  stoke_loader_state st;
  TU_OK(stoke_loader_state_decode(blob, STOKE_STATE_BYTES, &st));
  stoke_config c = cfg(src, W, K, in_order, 999, on_error);
  stoke_loader *l = tu_loader(&c);
  stoke_batch *b;
  if (warm) {
    TU_OK(stoke_loader_set_epoch(l, 40));
    int rc;
    while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) stoke_batch_release(b);
    TU_RC_L(l, rc, STOKE_END);
  }
  TU_RC_L(l, stoke_loader_state_restore(l, &st), STOKE_OK);
  assert_string_equal(stoke_errmsg(l), "");
  /* Saving right away gives the state back. */
  stoke_loader_state again;
  TU_OK(stoke_loader_state_save(l, &again));
  assert_memory_equal(&again, &st, sizeof st);
  for (uint64_t e = st.epoch; e < EPOCHS; e++) {
    int rc;
    while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
      TU_CHECK(stoke_batch_epoch(b) == e, "%s: batch of epoch %llu in %llu",
               what, (unsigned long long)stoke_batch_epoch(b),
               (unsigned long long)e);
      check_against(ref, b, what);
      stoke_batch_release(b);
    }
    TU_RC_L(l, rc, STOKE_END);
  }
  stoke_loader_destroy(l);
}

static void check_all_seen(run *ref, const char *what) {
  for (int e = 0; e < EPOCHS; e++)
    for (size_t k = 0; k < NB; k++) {
      TU_CHECK(ref->r[e][k].seen, "%s: batch %zu of epoch %d never handed out",
               what, k, e);
      ref->r[e][k].seen = 0;
    }
}

static void resume_matrix(int on_error) {
  tu_cb *cb = tu_cb_new(N);
  if (on_error == STOKE_ON_ERROR_REPLACE) cb->fail_set = g_bad;
  stoke_source *src = tu_cb_source(cb);
  run *ref = calloc(1, sizeof *ref);
  reference(src, on_error, ref);
  static const struct {
    unsigned W, K;
    int in_order, warm;
  } sides[] = {{0, 1, 1, 0}, {1, 1, 1, 0}, {3, 4, 1, 0},
               {4, 2, 0, 0}, {2, 3, 1, 1}, {0, 2, 1, 1}};
  for (size_t ci = 0; ci < sizeof k_cuts / sizeof *k_cuts; ci++)
    for (size_t si = 0; si < sizeof sides / sizeof *sides; si++) {
      char what[160];
      snprintf(what, sizeof what,
               "%s, cut at batch %zu of epoch %d, resumed with W %u K %u%s%s",
               stoke_on_error_name(on_error), k_cuts[ci].c, k_cuts[ci].epoch,
               sides[si].W, sides[si].K,
               sides[si].in_order ? "" : " out of order",
               sides[si].warm ? " into a loader prefetching" : "");
      uint8_t blob[STOKE_STATE_BYTES];
      /* Saved with W 2 K 2 (prefetch in flight at the epoch's end). */
      run_to_cut(src, k_cuts[ci], 2, 2, on_error, ref, blob, what);
      resume(src, blob, sides[si].W, sides[si].K, sides[si].in_order,
             sides[si].warm, on_error, ref, what);
      check_all_seen(ref, what);
    }
  free(ref);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static void test_resume_exact(void **state) {
  (void)state;
  resume_matrix(STOKE_ON_ERROR_FAIL);
}

static void test_resume_exact_under_replace(void **state) {
  (void)state;
  memset(g_bad, 0, sizeof g_bad);
  g_bad[2] = g_bad[19] = g_bad[33] = 1;
  resume_matrix(STOKE_ON_ERROR_REPLACE);
}

/* World 2 -> 3: the next epoch, every sample once across the new ranks. */
static void test_resume_elastic(void **state) {
  (void)state;
  const size_t n = 60;
  tu_cb *cb = tu_cb_new(n);
  stoke_source *src = tu_cb_source(cb);
  for (int mid = 0; mid <= 1; mid++) {
    stoke_config c = cfg(src, 2, 2, 1, SEED, STOKE_ON_ERROR_FAIL);
    c.world = 2;
    c.rank = 0;
    stoke_loader *l = tu_loader(&c);
    tu_epoch *e = tu_epoch_new();
    tu_epoch_ok(l, cb, e, 1); /* epoch 0 */
    stoke_batch *b;
    if (mid) {
      TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK); /* epoch 1, batch 0 */
      stoke_batch_release(b);
    }
    stoke_loader_state st;
    TU_OK(stoke_loader_state_save(l, &st));
    stoke_loader_destroy(l);
    uint64_t want = mid ? 2 : 1; /* mid-epoch: the next one */
    int seen[60] = {0};
    for (unsigned r = 0; r < 3; r++) {
      stoke_config c3 = cfg(src, r, 3, 1, 77, STOKE_ON_ERROR_FAIL);
      c3.world = 3;
      c3.rank = r;
      l = tu_loader(&c3);
      TU_OK(stoke_loader_state_restore(l, &st));
      if (mid)
        TU_CONTAINS(stoke_errmsg(l), "so this loader starts at epoch 2");
      else
        assert_string_equal(stoke_errmsg(l), "");
      tu_epoch_ok(l, NULL, e, 1);
      assert_int_equal(e->epoch, want);
      for (size_t k = 0; k < e->n_samples; k++) seen[e->idx[k]]++;
      stoke_loader_destroy(l);
    }
    /* The order is the world-3 order of (seed 5, epoch). */
    for (size_t i = 0; i < n; i++)
      TU_CHECK(seen[i] == 1, "sample %zu delivered %d times across the 3 "
               "ranks of epoch %llu", i, seen[i], (unsigned long long)want);
    free(e);
  }
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static void test_refusals(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N), *cb2 = tu_cb_new(N + 1);
  stoke_source *src = tu_cb_source(cb), *other = tu_cb_source(cb2);
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.n_samples = N;
  stoke_source *synth;
  TU_OK(stoke_source_create_synthetic(&sc, &synth));
  stoke_config c = cfg(src, 1, 2, 1, SEED, STOKE_ON_ERROR_FAIL);
  stoke_loader *l = tu_loader(&c);
  stoke_loader_state st;
  TU_OK(stoke_loader_state_save(l, &st));
  assert_int_equal(st.version, STOKE_STATE_VERSION);
  assert_int_equal(st.n_samples, N);
  assert_true(st.fingerprint == stoke_source_fingerprint(src));
  /* Mid-epoch: refused. */
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  TU_RC_L(l, stoke_loader_state_restore(l, &st), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(l), "call it between epochs");
  stoke_batch_release(b);
  stoke_loader_destroy(l);
  /* Another dataset: another count, or the same count of another kind. */
  stoke_config c2 = cfg(other, 0, 1, 1, SEED, STOKE_ON_ERROR_FAIL);
  l = tu_loader(&c2);
  TU_RC_L(l, stoke_loader_state_restore(l, &st), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(l), "made for another dataset (50 samples");
  TU_CONTAINS(stoke_errmsg(l), "callback source has 51 samples");
  stoke_loader_destroy(l);
  stoke_config c3 = cfg(synth, 0, 1, 1, SEED, STOKE_ON_ERROR_FAIL);
  l = tu_loader(&c3);
  TU_RC_L(l, stoke_loader_state_restore(l, &st), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(l), "synthetic source has 50 samples, fingerprint");
  stoke_loader_destroy(l);
  /* Unknown version, a position past the epoch. */
  l = tu_loader(&c);
  stoke_loader_state bad = st;
  bad.version = 9;
  TU_RC_L(l, stoke_loader_state_restore(l, &bad), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(l), "version 9");
  bad = st;
  bad.batches_done = NB + 1;
  TU_RC_L(l, stoke_loader_state_restore(l, &bad), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(l), "8 batches done in epoch 0, but it has 7");
  stoke_loader_destroy(l);

  /* The blob: a round trip, then each kind of damage. */
  uint8_t blob[STOKE_STATE_BYTES + 1];
  size_t n = 0;
  TU_RC(stoke_loader_state_encode(&st, blob, 10, &n), STOKE_EINVAL);
  assert_int_equal(n, STOKE_STATE_BYTES);
  TU_OK(stoke_loader_state_encode(&st, blob, sizeof blob, &n));
  stoke_loader_state back;
  TU_OK(stoke_loader_state_decode(blob, n, &back));
  assert_memory_equal(&back, &st, sizeof st);
  TU_RC(stoke_loader_state_decode(blob, n + 1, &back), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "81 bytes, a stoke state has 80");
  blob[30] ^= 4;
  TU_RC(stoke_loader_state_decode(blob, n, &back), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "CRC-32 mismatch");
  blob[30] ^= 4;
  blob[0] = 'x';
  TU_RC(stoke_loader_state_decode(blob, n, &back), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "not a stoke loader state");
  stoke_source_destroy(src);
  stoke_source_destroy(other);
  stoke_source_destroy(synth);
  tu_cb_free(cb);
  tu_cb_free(cb2);
}

/* Out of order, a position is a count only when the batches handed out
** are the epoch's first ones: batch 0 is held at a gate, so another comes
** first, and saving then is refused; at the epoch's end it is not. */
static void test_out_of_order_save(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c0 = cfg(src, 0, 1, 1, SEED, STOKE_ON_ERROR_FAIL);
  stoke_loader *l = tu_loader(&c0);
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  cb->stuck_index = (long)stoke_batch_indices(b)[0];
  stoke_batch_release(b);
  stoke_loader_destroy(l);
  stoke_config c = cfg(src, 3, 3, 0, SEED, STOKE_ON_ERROR_FAIL);
  l = tu_loader(&c);
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  TU_CHECK(stoke_batch_number(b) != 0, "batch 0 came first");
  stoke_loader_state st;
  TU_RC_L(l, stoke_loader_state_save(l, &st), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(l), "are not its first ones");
  stoke_batch_release(b);
  tu_cb_unstick(cb);
  int rc;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) stoke_batch_release(b);
  TU_RC_L(l, rc, STOKE_END);
  TU_OK(stoke_loader_state_save(l, &st));
  assert_int_equal(st.epoch, 1);
  assert_int_equal(st.batches_done, 0);
  stoke_loader_destroy(l);
  cb->stuck_index = -1;
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_resume_exact),
      cmocka_unit_test(test_resume_exact_under_replace),
      cmocka_unit_test(test_resume_elastic),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_out_of_order_save),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
