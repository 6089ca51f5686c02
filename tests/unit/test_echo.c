/* test_echo.c — data echoing (stoke_config.echo, docs/echo.md).
**
** Batch echoing: every batch the producer makes is handed out echo times
** in a row, the same memory, each sample filled once per epoch.  Example
** echoing: step k * echo + j is copy j of batch k's samples, copy j made
** with the stream stoke__copy_rng(sample's, j) (copy 0 is the sample as
** without echo), each sample in echo steps; image sources decode once for
** every copy and give each copy the pixels a fill of its own would.  Both:
** the steps depend on (seed, epoch, echo, mode) only, never on W or K; the
** statistics count steps and fresh samples apart; a group cut short (end
** of epoch, destroy) gives its slot back; a state saved mid-group resumes
** at the next step with any W. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <sys/stat.h>
#include <jpeglib.h>
#include <spng.h>

#include "decode_fixtures.h"
#include "image_fixtures.h"
#include "test_util.h"
#include "pipeline/pipeline.h"

#define N 10
#define B 3
#define NB 4 /* 3, 3, 3, 1 */
#define E 3
#define SEED 11

typedef struct step {
  size_t number, n;
  size_t idx[B];
  uint64_t rnd[B][2];
  const void *data; /* field RND's memory */
} step;

static void take(step *s, stoke_batch *b) {
  stoke_tensor t;
  TU_OK(stoke_batch_field(b, TU_F_RND, &t));
  s->number = stoke_batch_number(b);
  s->n = stoke_batch_size(b);
  s->data = t.data;
  memcpy(s->idx, stoke_batch_indices(b), s->n * sizeof s->idx[0]);
  memcpy(s->rnd, t.data, s->n * sizeof s->rnd[0]);
}

static stoke_config echo_cfg(stoke_source *src, unsigned W, unsigned K,
                             unsigned echo, int mode) {
  stoke_config c = tu_config(src, W, K, B);
  c.shuffle = 1;
  c.seed = SEED;
  c.echo = echo;
  c.echo_mode = mode;
  return c;
}

/* One epoch's steps into out (NB * echo of them). */
static size_t run_epoch(stoke_loader *l, step *out, size_t cap) {
  stoke_batch *b;
  int rc;
  size_t k = 0;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    TU_CHECK(k < cap, "more than %zu steps", cap);
    take(&out[k++], b);
    stoke_batch_release(b);
  }
  TU_RC_L(l, rc, STOKE_END);
  return k;
}

static void test_batch_echo(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  static step ref[2][NB * E], got[NB * E];
  const unsigned ws[] = {0, 1, 3};
  for (size_t wi = 0; wi < 3; wi++) {
    tu_cb_reset_calls(cb);
    stoke_config c = echo_cfg(src, ws[wi], (unsigned)wi + 1, E,
                              STOKE_ECHO_BATCH);
    stoke_loader *l = tu_loader(&c);
    assert_int_equal(stoke_loader_n_batches(l), NB * E);
    for (int ep = 0; ep < 2; ep++) {
      step *s = wi == 0 ? ref[ep] : got;
      assert_int_equal(run_epoch(l, s, NB * E), NB * E);
      size_t seen[N] = {0};
      for (size_t k = 0; k < NB * E; k++) {
        assert_int_equal(s[k].number, k);
        const step *first = &s[k / E * E];
        /* The same batch, the same memory, echo times in a row. */
        TU_CHECK(s[k].n == first->n && s[k].data == first->data &&
                     !memcmp(s[k].idx, first->idx, s[k].n * sizeof(size_t)) &&
                     !memcmp(s[k].rnd, first->rnd, s[k].n * 16),
                 "W %u: step %zu is not batch %zu's echo", ws[wi], k, k / E);
        for (size_t i = 0; i < s[k].n; i++) seen[s[k].idx[i]]++;
      }
      for (size_t i = 0; i < N; i++) assert_int_equal(seen[i], E);
      for (size_t i = 0; i < N; i++) /* filled once, handed out E times */
        assert_int_equal(tu_cb_calls(cb, (uint64_t)ep, i), 1);
      for (size_t k = 0; wi > 0 && k < NB * E; k++)
        TU_CHECK(got[k].n == ref[ep][k].n &&
                     !memcmp(got[k].idx, ref[ep][k].idx,
                             got[k].n * sizeof(size_t)) &&
                     !memcmp(got[k].rnd, ref[ep][k].rnd, got[k].n * 16),
                 "W %u epoch %d: step %zu differs from W 0's", ws[wi], ep, k);
    }
    stoke_stats st = {.struct_size = sizeof st};
    TU_OK(stoke_loader_stats(l, &st));
    assert_int_equal(st.echo, E);
    assert_int_equal(st.steps, 2 * NB * E);
    assert_int_equal(st.samples, 2 * N * E);
    assert_int_equal(st.fresh_samples, 2 * N);
    stoke_loader_destroy(l);
  }
  stoke_source_destroy(src);
  TU_CHECK(atomic_load(&cb->bad) == 0, "worker saw bad things: %d",
           atomic_load(&cb->bad));
  tu_cb_free(cb);
}

/* The first two draws of copy j of sample i's stream in epoch ep. */
static void copy_draws(uint64_t ep, size_t i, unsigned j, uint64_t out[2]) {
  stoke_rng base, r;
  stoke_rng_init(&base, SEED, ep, i);
  stoke__copy_rng(&base, j, &r);
  out[0] = stoke_rng_u64(&r);
  out[1] = stoke_rng_u64(&r);
}

static void test_example_echo(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  step plain[NB], ref[NB * E], got[NB * E];
  stoke_config c0 = echo_cfg(src, 1, 2, 1, STOKE_ECHO_BATCH);
  stoke_loader *l0 = tu_loader(&c0);
  assert_int_equal(run_epoch(l0, plain, NB), NB);
  stoke_loader_destroy(l0);
  const unsigned ws[] = {0, 2, 3};
  for (size_t wi = 0; wi < 3; wi++) {
    stoke_config c = echo_cfg(src, ws[wi], 2, E, STOKE_ECHO_EXAMPLE);
    stoke_loader *l = tu_loader(&c);
    step *s = wi == 0 ? ref : got;
    assert_int_equal(run_epoch(l, s, NB * E), NB * E);
    for (size_t k = 0; k < NB * E; k++) {
      unsigned j = (unsigned)(k % E);
      const step *p = &plain[k / E];
      TU_CHECK(s[k].n == p->n &&
                   !memcmp(s[k].idx, p->idx, p->n * sizeof(size_t)),
               "step %zu: not batch %zu's samples", k, k / E);
      for (size_t i = 0; i < s[k].n; i++) {
        uint64_t want[2];
        copy_draws(0, s[k].idx[i], j, want);
        TU_CHECK(s[k].rnd[i][0] == want[0] && s[k].rnd[i][1] == want[1],
                 "step %zu sample %zu: not copy %u's stream", k, i, j);
      }
      /* Copy 0 is the sample as without echo; the others differ. */
      if (j == 0)
        assert_memory_equal(s[k].rnd, p->rnd, p->n * 16);
      else
        assert_memory_not_equal(s[k].rnd, p->rnd, p->n * 16);
    }
    if (wi > 0)
      for (size_t k = 0; k < NB * E; k++)
        assert_memory_equal(got[k].rnd, ref[k].rnd, got[k].n * 16);
    stoke_stats st = {.struct_size = sizeof st};
    TU_OK(stoke_loader_stats(l, &st));
    assert_int_equal(st.echo_mode, STOKE_ECHO_EXAMPLE);
    assert_int_equal(st.samples, N * E);
    assert_int_equal(st.fresh_samples, N);
    stoke_loader_destroy(l);
  }
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* The synthetic source: copy 0 of example echo is, byte for byte, the
** sample a plain fill gives (synth_fill writes from the sample's own
** stream, synth_fill_copies copy 0 from stoke__copy_rng(stream, 0)), and
** the other copies differ; a stored tensor's copies are all the same. */
#define SX 4 /* floats in "x" */
static void synth_epoch(int kind, unsigned echo, float *out, size_t *idx) {
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = kind;
  sc.cost_ns = 0;
  sc.n_samples = N;
  sc.ndim = 1;
  sc.shape[0] = SX;
  sc.seed = 5;
  stoke_source *src;
  TU_OK(stoke_source_create_synthetic(&sc, &src));
  stoke_config c = echo_cfg(src, 2, 2, echo, STOKE_ECHO_EXAMPLE);
  stoke_loader *l = tu_loader(&c);
  stoke_batch *b;
  int rc;
  size_t k = 0;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    stoke_tensor t;
    TU_OK(stoke_batch_field(b, 0, &t));
    size_t n = stoke_batch_size(b);
    TU_CHECK(k + n <= N * echo, "more than %u samples", N * echo);
    memcpy(out + k * SX, t.data, n * SX * sizeof(float));
    memcpy(idx + k, stoke_batch_indices(b), n * sizeof *idx);
    k += n;
    stoke_batch_release(b);
  }
  TU_RC_L(l, rc, STOKE_END);
  assert_int_equal(k, N * echo);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
}

static void test_example_echo_synthetic(void **state) {
  (void)state;
  const int kinds[] = {STOKE_SYNTH_SPIN, STOKE_SYNTH_TENSOR};
  for (size_t ki = 0; ki < 2; ki++) {
    float plain[N * SX], echoed[N * E * SX];
    size_t pidx[N], eidx[N * E];
    synth_epoch(kinds[ki], 1, plain, pidx);
    synth_epoch(kinds[ki], E, echoed, eidx);
    /* Step k * E + j is copy j of batch k: its samples sit at offset
    ** (batch start) * E + j * (batch size). */
    for (size_t k = 0, start = 0; start < N; k++, start += B) {
      size_t n = start + B <= N ? B : N - start;
      for (unsigned j = 0; j < E; j++)
        for (size_t i = 0; i < n; i++) {
          size_t at = start * E + j * n + i;
          assert_int_equal(eidx[at], pidx[start + i]);
          const float *got = echoed + at * SX, *want = plain + (start + i) * SX;
          if (j == 0 || kinds[ki] == STOKE_SYNTH_TENSOR)
            TU_CHECK(!memcmp(got, want, SX * sizeof(float)),
                     "kind %d batch %zu copy %u sample %zu: not the plain "
                     "fill's bytes", kinds[ki], k, j, i);
          else
            TU_CHECK(memcmp(got, want, SX * sizeof(float)) != 0,
                     "kind %d batch %zu copy %u sample %zu: the plain "
                     "fill's bytes", kinds[ki], k, j, i);
        }
    }
  }
}

/* Images: the copies decode once, and copy j has the pixels a fill of its
** own with copy j's stream gives. */
static void test_example_echo_images(void **state) {
  (void)state;
  char root[64], folder[256], tarp[256], packp[256];
  tmp_root(root, "echo");
  small_dataset(root, folder, tarp, packp, sizeof folder);
  stoke_source *src =
      tu_open_images(packp, "random-resized-crop=24,flip,chw,u8");
  stoke_config c = tu_config(src, 2, 2, 4);
  c.seed = SEED;
  c.echo = E;
  c.echo_mode = STOKE_ECHO_EXAMPLE;
  c.prefetch_next_epoch = 0; /* READ's count: this epoch's samples only */
  stoke_loader *l = tu_loader(&c);
  size_t px = 3 * 24 * 24;
  uint8_t *one = malloc(px);
  void *scratch = NULL;
  TU_OK(src->ops->scratch_create(src, NULL, &scratch));
  stoke_batch *b;
  int rc, distinct = 0;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    unsigned j = (unsigned)(stoke_batch_number(b) % E);
    stoke_tensor t;
    TU_OK(stoke_batch_field(b, 0, &t));
    for (size_t i = 0; i < stoke_batch_size(b); i++) {
      stoke_sample s;
      memset(&s, 0, sizeof s);
      char err[256];
      s.err = err;
      s.err_cap = sizeof err;
      s.index = stoke_batch_indices(b)[i];
      s.scratch = scratch;
      s.copies = 1;
      int64_t label;
      s.dst[0] = one;
      s.dst[1] = &label;
      stoke_rng base;
      stoke_rng_init(&base, SEED, 0, s.index);
      stoke__copy_rng(&base, j, &s.rng);
      TU_CHECK(src->ops->fill(src, &s) == 0, "fill: %s", err);
      TU_CHECK(!memcmp(one, (uint8_t *)t.data + i * px, px),
               "batch %zu sample %zu: copy %u differs from its own fill",
               stoke_batch_number(b), i, j);
      if (j > 0) {
        stoke_rng_init(&base, SEED, 0, s.index);
        s.rng = base;
        TU_CHECK(src->ops->fill(src, &s) == 0, "fill: %s", err);
        distinct += memcmp(one, (uint8_t *)t.data + i * px, px) != 0;
      }
    }
    stoke_batch_release(b);
  }
  TU_RC_L(l, rc, STOKE_END);
  TU_CHECK(distinct > 0, "no copy differs from copy 0");
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_loader_stats(l, &st));
  /* Read and decoded once per sample, not once per copy. */
  assert_int_equal(st.stage[STOKE_STAGE_READ].count, SMALL_DATASET_N);
  assert_int_equal(st.samples, SMALL_DATASET_N * E);
  src->ops->scratch_destroy(src, NULL, scratch);
  free(one);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tmp_root_remove(root);
}

/* Held views, releases in any order, and groups cut short give their slot
** back: with two slots and the first batch's slot still held by a view,
** the epoch runs on; an early end_epoch and a destroy mid-group leave no
** slot lent (LeakSanitizer checks the loader is freed). */
static void test_releases(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = echo_cfg(src, 2, 1, 4, STOKE_ECHO_BATCH);
  stoke_loader *l = tu_loader(&c);
  stoke_batch *s0, *v1, *v2;
  TU_OK(stoke_loader_next(l, &s0));
  TU_OK(stoke_loader_next(l, &v1)); /* holding both: a view needs no slot */
  assert_ptr_not_equal(s0, v1);
  assert_int_equal(stoke_batch_number(v1), 1);
  stoke_batch_release(s0); /* the slot waits for its views */
  pthread_mutex_lock(&l->mu);
  assert_int_equal(l->n_lent, 1);
  pthread_mutex_unlock(&l->mu);
  TU_OK(stoke_loader_next(l, &v2));
  stoke_batch_release(v2);
  stoke_batch_release(v2); /* twice: the first counts */
  TU_OK(stoke_loader_end_epoch(l)); /* view 3 is never handed out */
  stoke_batch_release(v1);          /* the last: the slot goes back */
  pthread_mutex_lock(&l->mu);
  assert_int_equal(l->n_lent, 0);
  pthread_mutex_unlock(&l->mu);
  step s[NB * 4];
  assert_int_equal(run_epoch(l, s, NB * 4), NB * 4);
  /* A destroy mid-group, with the group's slot released. */
  stoke_batch *b;
  TU_OK(stoke_loader_next(l, &b));
  stoke_batch_release(b);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* Saved at every step of an epoch, restored with other W and K: the rest
** of the epoch is what the uninterrupted run handed out. */
static void test_resume(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  for (int mode = STOKE_ECHO_BATCH; mode <= STOKE_ECHO_EXAMPLE; mode++) {
    step ref[NB * E];
    stoke_config c = echo_cfg(src, 1, 1, E, mode);
    stoke_loader *l = tu_loader(&c);
    assert_int_equal(run_epoch(l, ref, NB * E), NB * E);
    stoke_loader_destroy(l);
    for (size_t cut = 0; cut <= NB * E; cut++) {
      stoke_config cs = echo_cfg(src, 2, 2, E, mode);
      stoke_loader *a = tu_loader(&cs);
      stoke_batch *b;
      for (size_t k = 0; k < cut; k++) {
        TU_OK(stoke_loader_next(a, &b));
        stoke_batch_release(b);
      }
      stoke_loader_state st;
      TU_OK(stoke_loader_state_save(a, &st));
      assert_int_equal(st.batches_done, cut);
      TU_CHECK(st.order_key != 0, "echo leaves no mark in the state");
      uint8_t blob[STOKE_STATE_BYTES];
      size_t nb;
      TU_OK(stoke_loader_state_encode(&st, blob, sizeof blob, &nb));
      stoke_loader_destroy(a);
      stoke_loader_state back;
      TU_OK(stoke_loader_state_decode(blob, nb, &back));
      stoke_config cr = echo_cfg(src, 3, 1, E, mode);
      stoke_loader *r = tu_loader(&cr);
      TU_OK(stoke_loader_state_restore(r, &back));
      step got[NB * E];
      size_t k = run_epoch(r, got, NB * E);
      assert_int_equal(k, NB * E - cut);
      for (size_t i = 0; i < k; i++) {
        const step *w = &ref[cut + i];
        TU_CHECK(got[i].number == w->number && got[i].n == w->n &&
                     !memcmp(got[i].idx, w->idx, w->n * sizeof(size_t)) &&
                     !memcmp(got[i].rnd, w->rnd, w->n * 16),
                 "mode %d, cut %zu: step %zu is not the run's step %zu",
                 mode, cut, i, cut + i);
      }
      stoke_loader_destroy(r);
    }
    /* Another echo factor: the position means other steps; next epoch. */
    stoke_config c2 = echo_cfg(src, 1, 1, 2, mode);
    stoke_loader *x = tu_loader(&c2);
    stoke_loader_state st;
    stoke_config c3 = echo_cfg(src, 1, 1, E, mode);
    stoke_loader *y = tu_loader(&c3);
    stoke_batch *b;
    TU_OK(stoke_loader_next(y, &b));
    stoke_batch_release(b);
    TU_OK(stoke_loader_state_save(y, &st));
    TU_OK(stoke_loader_state_restore(x, &st));
    TU_CONTAINS(stoke_errmsg(x), "starts at epoch 1");
    stoke_loader_destroy(x);
    stoke_loader_destroy(y);
  }
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static void test_config(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = echo_cfg(src, 1, 1, 65, STOKE_ECHO_BATCH);
  stoke_loader *l = NULL;
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "echo is 65");
  c = echo_cfg(src, 1, 1, 2, 7);
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "echo_mode is 7");
  c = echo_cfg(src, 1, 1, 2, STOKE_ECHO_EXAMPLE);
  c.device = "cuda";
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "example echoing on a device");
  /* Example echoing's slots hold echo batches: the ledger says so. */
  stoke_host_ledger g1, g3;
  c = echo_cfg(src, 1, 1, 1, STOKE_ECHO_EXAMPLE);
  TU_OK(stoke_host_ledger_compute(&c, &g1));
  c.echo = 3;
  TU_OK(stoke_host_ledger_compute(&c, &g3));
  TU_CHECK(g3.slots_bytes >= g1.slots_bytes + 2 * g1.n_slots * g1.batch_bytes,
           "slots %llu with echo 3, %llu without",
           (unsigned long long)g3.slots_bytes,
           (unsigned long long)g1.slots_bytes);
  l = tu_loader(&c);
  assert_int_equal(stoke_loader_host_bytes(l), g3.total_bytes);
  stoke_loader_destroy(l);
  assert_string_equal(stoke_echo_mode_name(STOKE_ECHO_EXAMPLE), "example");
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batch_echo),
      cmocka_unit_test(test_example_echo),
      cmocka_unit_test(test_example_echo_synthetic),
      cmocka_unit_test(test_example_echo_images),
      cmocka_unit_test(test_releases),
      cmocka_unit_test(test_resume),
      cmocka_unit_test(test_config),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
