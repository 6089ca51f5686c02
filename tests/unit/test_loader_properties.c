/* test_loader_properties.c — the loader's promises, checked as properties.
**
** Every sample of an epoch is delivered exactly once per rank, in an order
** that depends on (seed, epoch, rank, world) only — never on the worker count
** W, the prefetch depth K or timing — and each sample's random stream is
** (seed, epoch, index).  Samples are cheap (a callback writing its index), so
** the many configurations run in a few seconds, also under sanitizers.
*/
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

static const unsigned k_workers[] = {0, 1, 2, 3, 5, 8, 16};
static const unsigned k_prefetch[] = {1, 2, 3, 5, 8};

/* Fills per index must equal deliveries per index (each delivered sample was
** filled once, nothing else was filled), and no worker saw anything odd. */
static void check_fills(const tu_cb *cb, const tu_epoch *e, unsigned workers) {
  int *seen = calloc(cb->n, sizeof *seen);
  assert_non_null(seen);
  for (size_t k = 0; k < e->n_samples; k++) {
    TU_CHECK(e->idx[k] < cb->n, "delivered index %zu >= N %zu", e->idx[k],
             cb->n);
    seen[e->idx[k]]++;
  }
  for (size_t i = 0; i < cb->n; i++)
    TU_CHECK(tu_cb_calls(cb, e->epoch, i) == seen[i],
             "sample %zu filled %d times for epoch %llu, delivered %d times",
             i, tu_cb_calls(cb, e->epoch, i), (unsigned long long)e->epoch,
             seen[i]);
  free(seen);
  TU_CHECK(atomic_load(&cb->bad) == 0, "a fill saw bad state: bits 0x%x",
           atomic_load(&cb->bad));
  int most = atomic_load(&cb->max_in_flight);
  TU_CHECK(most <= (int)(workers ? workers : 1),
           "%d fills ran at once with W = %u", most, workers);
}

/* A loader over cb's source; the fill counts start from zero. */
static stoke_loader *cb_loader(tu_cb *cb, const stoke_config *c) {
  stoke_loader *l = tu_loader(c);
  tu_cb_reset_calls(cb); /* workers wait for the first next() */
  return l;
}

/* Run one checked epoch of l (each epoch number once per loader). */
static void run_checked(stoke_loader *l, tu_cb *cb, tu_epoch *e,
                        unsigned workers, int in_order) {
  tu_epoch_ok(l, cb, e, in_order);
  check_fills(cb, e, workers);
}

/* The per-sample random values must be the stream (seed, epoch, index). */
static void check_rng(const tu_epoch *e, uint64_t seed) {
  for (size_t k = 0; k < e->n_samples; k++) {
    stoke_rng r;
    stoke_rng_init(&r, seed, e->epoch, e->idx[k]);
    uint64_t r0 = stoke_rng_u64(&r), r1 = stoke_rng_u64(&r);
    TU_CHECK(e->rnd[k][0] == r0 && e->rnd[k][1] == r1,
             "sample %zu of epoch %llu: rng values are not the stream "
             "(seed %llu, epoch, index)",
             e->idx[k], (unsigned long long)e->epoch,
             (unsigned long long)seed);
  }
}

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

/* ---- defaults ------------------------------------------------------------- */

static void test_config_defaults(void **state) {
  (void)state;
  stoke_config c;
  memset(&c, 0xab, sizeof c);
  stoke_config_init(&c);
  assert_int_equal(c.struct_size, sizeof c);
  assert_null(c.source);
  assert_int_equal(c.batch_size, 32);
  assert_int_equal(c.n_workers, STOKE_WORKERS_AUTO);
  assert_int_equal(c.prefetch, 2);
  assert_int_equal(c.shuffle, 0);
  assert_int_equal(c.seed, 0);
  assert_int_equal(c.drop_last, 0);
  assert_int_equal(c.rank, 0);
  assert_int_equal(c.world, 1);
  assert_int_equal(c.shard_drop_last, 0);
  assert_int_equal(c.in_order, 1);
  assert_int_equal(c.warmup_epochs, 0);
  assert_int_equal(c.warmup_steps, 0);
  assert_int_equal(c.sample_timeout_ms, 0);
  assert_int_equal(c.mem_budget_bytes, 0);
  assert_int_equal(c.prefetch_next_epoch, 1);
  assert_int_equal(c.max_chunk, 0);
  assert_null(c.alloc);

  /* AUTO resolves to a worker count in [1, online CPUs]. */
  tu_cb *cb = tu_cb_new(10);
  stoke_source *src = tu_cb_source(cb);
  stoke_config in;
  stoke_config_init(&in);
  in.source = src;
  in.batch_size = 4;
  stoke_loader *l = cb_loader(cb, &in);
  stoke_config got;
  memset(&got, 0, sizeof got);
  stoke_loader_config(l, &got);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  TU_CHECK(got.n_workers >= 1 && got.n_workers != STOKE_WORKERS_AUTO &&
               (online <= 0 || got.n_workers <= (unsigned)online),
           "AUTO resolved to %u workers (%ld online)", got.n_workers, online);
  assert_int_equal(got.batch_size, 4);
  assert_int_equal(got.prefetch, 2);
  assert_int_equal(got.world, 1);
  assert_int_equal(got.in_order, 1);
  assert_int_equal(stoke_loader_n_batches(l), 3);
  assert_int_equal(stoke_loader_n_samples(l), 10);
  tu_epoch *e = tu_epoch_new();
  run_checked(l, cb, e, got.n_workers, 1);
  assert_int_equal(e->n_samples, 10);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
  free(e);
}

/* ---- batching ------------------------------------------------------------- */

/* Batch sizes that do and do not divide N, drop_last on and off: batch sizes,
** batch count and sample count agree with n_batches / n_samples; without
** shuffle the order is 0..N-1 and batch numbers count up from 0. */
static void test_batching(void **state) {
  (void)state;
  const size_t N = 100;
  const size_t batches[] = {1, 7, 10, 32, 99, 100, 101, 150};
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  tu_epoch *e = tu_epoch_new();
  for (size_t bi = 0; bi < sizeof batches / sizeof *batches; bi++) {
    for (int drop = 0; drop <= 1; drop++) {
      for (int shuffle = 0; shuffle <= 1; shuffle++) {
        size_t B = batches[bi];
        unsigned W = (unsigned)((bi + (size_t)drop) % 3); /* 0, 1, 2 */
        stoke_config c = tu_config(src, W, 2, B);
        c.drop_last = drop;
        c.shuffle = shuffle;
        c.seed = 3;
        stoke_loader *l = cb_loader(cb, &c);
        size_t want_batches = drop ? N / B : ceil_div(N, B);
        size_t want_samples = drop ? (N / B) * B : N;
        TU_CHECK(stoke_loader_n_batches(l) == want_batches,
                 "B %zu drop %d: n_batches %zu, want %zu", B, drop,
                 stoke_loader_n_batches(l), want_batches);
        TU_CHECK(stoke_loader_n_samples(l) == want_samples,
                 "B %zu drop %d: n_samples %zu, want %zu", B, drop,
                 stoke_loader_n_samples(l), want_samples);
        for (int ep = 0; ep < 2; ep++) {
          run_checked(l, cb, e, W, 1);
          if (e->n_batches) assert_int_equal(e->epoch, (uint64_t)ep);
          TU_CHECK(e->n_batches == want_batches,
                   "B %zu drop %d: %zu batches delivered, want %zu", B, drop,
                   e->n_batches, want_batches);
          TU_CHECK(e->n_samples == want_samples,
                   "B %zu drop %d: %zu samples delivered, want %zu", B, drop,
                   e->n_samples, want_samples);
          for (size_t k = 0; k < e->n_batches; k++) {
            size_t want = (k + 1 < e->n_batches || drop || N % B == 0)
                              ? B
                              : N % B;
            TU_CHECK(e->batch_size[k] == want,
                     "B %zu drop %d: batch %zu has %zu samples, want %zu", B,
                     drop, k, e->batch_size[k], want);
          }
          /* Distinct indices; without shuffle exactly 0, 1, 2, ... */
          char seen[100] = {0};
          for (size_t k = 0; k < e->n_samples; k++) {
            TU_CHECK(!seen[e->idx[k]], "index %zu delivered twice", e->idx[k]);
            seen[e->idx[k]] = 1;
            if (!shuffle)
              TU_CHECK(e->idx[k] == k, "sequential position %zu has %zu", k,
                       e->idx[k]);
          }
        }
        stoke_loader_destroy(l);
      }
    }
  }
  free(e);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- independence of W and K ----------------------------------------------- */

typedef struct prop_cfg {
  size_t n, batch;
  int shuffle;
  uint64_t seed;
  unsigned world, rank;
  int drop_last, shard_drop;
  size_t max_chunk;
} prop_cfg;

static const prop_cfg k_cfgs[] = {
    {100, 10, 0, 0, 1, 0, 0, 0, 0},  {100, 7, 1, 1, 1, 0, 0, 0, 0},
    {100, 7, 1, 2, 1, 0, 1, 0, 0},   {97, 8, 1, 3, 3, 1, 0, 0, 0},
    {97, 8, 1, 4, 3, 2, 1, 1, 0},    {101, 5, 1, 5, 2, 1, 0, 1, 1},
    {64, 16, 1, 6, 2, 0, 0, 0, 3},   {53, 64, 0, 0, 1, 0, 0, 0, 0},
    {150, 3, 1, 7, 1, 0, 0, 0, 2},   {31, 4, 0, 9, 3, 0, 0, 0, 0},
};

/* (W, K) pairs: every W and every K appears; (0, 1) is the reference. */
static const unsigned k_pairs[][2] = {{0, 1}, {0, 3}, {1, 1}, {1, 2},
                                      {2, 3}, {3, 5}, {5, 8}, {8, 2},
                                      {16, 1}, {16, 8}, {3, 1}};

static stoke_loader *prop_loader(tu_cb *cb, stoke_source *src,
                                 const prop_cfg *p, unsigned W, unsigned K) {
  stoke_config c = tu_config(src, W, K, p->batch);
  c.shuffle = p->shuffle;
  c.seed = p->seed;
  c.world = p->world;
  c.rank = p->rank;
  c.drop_last = p->drop_last;
  c.shard_drop_last = p->shard_drop;
  c.max_chunk = p->max_chunk;
  c.prefetch_next_epoch = (int)(W + K) % 2; /* both values, spread */
  return cb_loader(cb, &c);
}

static void test_order_independent_of_workers(void **state) {
  (void)state;
  const size_t n_pairs = sizeof k_pairs / sizeof *k_pairs;
  tu_epoch *ref[2] = {tu_epoch_new(), tu_epoch_new()};
  tu_epoch *e = tu_epoch_new();
  for (size_t ci = 0; ci < sizeof k_cfgs / sizeof *k_cfgs; ci++) {
    const prop_cfg *p = &k_cfgs[ci];
    tu_cb *cb = tu_cb_new(p->n);
    stoke_source *src = tu_cb_source(cb);
    for (size_t pi = 0; pi < n_pairs; pi++) {
      unsigned W = k_pairs[pi][0], K = k_pairs[pi][1];
      stoke_loader *l = prop_loader(cb, src, p, W, K);
      for (int ep = 0; ep < 2; ep++) {
        tu_epoch *dst = pi == 0 ? ref[ep] : e;
        run_checked(l, cb, dst, W, 1);
        check_rng(dst, p->seed);
        TU_CHECK(dst->n_samples == stoke_loader_n_samples(l),
                 "cfg %zu W %u K %u: delivered %zu, n_samples %zu", ci, W, K,
                 dst->n_samples, stoke_loader_n_samples(l));
        TU_CHECK(dst->n_batches == stoke_loader_n_batches(l),
                 "cfg %zu W %u K %u: %zu batches, n_batches %zu", ci, W, K,
                 dst->n_batches, stoke_loader_n_batches(l));
        if (pi == 0) continue;
        TU_CHECK(e->n_samples == ref[ep]->n_samples &&
                     e->n_batches == ref[ep]->n_batches,
                 "cfg %zu W %u K %u epoch %d: %zu samples in %zu batches, "
                 "W=0 K=1 gave %zu in %zu",
                 ci, W, K, ep, e->n_samples, e->n_batches,
                 ref[ep]->n_samples, ref[ep]->n_batches);
        for (size_t k = 0; k < e->n_batches; k++)
          TU_CHECK(e->batch_size[k] == ref[ep]->batch_size[k],
                   "cfg %zu W %u K %u: batch %zu size differs", ci, W, K, k);
        for (size_t k = 0; k < e->n_samples; k++) {
          TU_CHECK(e->idx[k] == ref[ep]->idx[k],
                   "cfg %zu W %u K %u epoch %d: position %zu is sample %zu, "
                   "with W=0 K=1 sample %zu",
                   ci, W, K, ep, k, e->idx[k], ref[ep]->idx[k]);
          TU_CHECK(e->rnd[k][0] == ref[ep]->rnd[k][0] &&
                       e->rnd[k][1] == ref[ep]->rnd[k][1],
                   "cfg %zu W %u K %u: random values of sample %zu differ",
                   ci, W, K, e->idx[k]);
        }
      }
      stoke_loader_destroy(l);
    }
    stoke_source_destroy(src);
    tu_cb_free(cb);
  }
  free(ref[0]);
  free(ref[1]);
  free(e);
}

/* Every W and K value on one configuration, in every combination. */
static void test_all_workers_prefetch(void **state) {
  (void)state;
  const prop_cfg p = {60, 7, 1, 21, 1, 0, 0, 0, 0};
  tu_cb *cb = tu_cb_new(p.n);
  stoke_source *src = tu_cb_source(cb);
  tu_epoch *ref = tu_epoch_new(), *e = tu_epoch_new();
  stoke_loader *l = prop_loader(cb, src, &p, 0, 1);
  run_checked(l, cb, ref, 0, 1);
  stoke_loader_destroy(l);
  for (size_t wi = 0; wi < sizeof k_workers / sizeof *k_workers; wi++) {
    for (size_t ki = 0; ki < sizeof k_prefetch / sizeof *k_prefetch; ki++) {
      unsigned W = k_workers[wi], K = k_prefetch[ki];
      l = prop_loader(cb, src, &p, W, K);
      run_checked(l, cb, e, W, 1);
      assert_int_equal(e->n_samples, ref->n_samples);
      TU_CHECK(memcmp(e->idx, ref->idx, e->n_samples * sizeof *e->idx) == 0,
               "W %u K %u: order differs from W=0 K=1", W, K);
      TU_CHECK(memcmp(e->rnd, ref->rnd, e->n_samples * sizeof *e->rnd) == 0,
               "W %u K %u: random values differ from W=0 K=1", W, K);
      stoke_loader_destroy(l);
    }
  }
  free(ref);
  free(e);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- sharding ------------------------------------------------------------- */

/* Ranks, as PyTorch's DistributedSampler: with the world = 1 order g of the
** same (seed, epoch), the multiset of all ranks' samples is g[j % N] for
** j < total, where total is floor(N/world)*world (shard_drop_last) or
** ceil(N/world)*world (padding repeats the first samples of g).  Each rank
** gets total/world samples, none twice. */
static void test_sharding(void **state) {
  (void)state;
  const size_t sizes[] = {1, 2, 7, 12, 100, 101};
  const uint64_t seeds[] = {0, 42};
  tu_epoch *g = tu_epoch_new(), *e = tu_epoch_new();
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
    size_t N = sizes[si];
    tu_cb *cb = tu_cb_new(N);
    stoke_source *src = tu_cb_source(cb);
    int *want = calloc(N, sizeof *want), *got = calloc(N, sizeof *got);
    assert_non_null(want);
    assert_non_null(got);
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
      for (size_t sd = 0; sd < 2; sd++) {
        uint64_t seed = seeds[sd], epoch = shuffle ? 3 : 0;
        /* The global order: world 1. */
        stoke_config c = tu_config(src, 0, 1, 4);
        c.shuffle = shuffle;
        c.seed = seed;
        stoke_loader *l = cb_loader(cb, &c);
        TU_OK(stoke_loader_set_epoch(l, epoch));
        run_checked(l, cb, g, 0, 1);
        stoke_loader_destroy(l);
        assert_int_equal(g->n_samples, N);
        for (unsigned world = 1; world <= 3; world++) {
          for (int sdrop = 0; sdrop <= 1; sdrop++) {
            if (sdrop && N < world) continue; /* ranks would be empty */
            size_t total = sdrop ? N / world * world : ceil_div(N, world) * world;
            size_t L = total / world;
            memset(want, 0, N * sizeof *want);
            memset(got, 0, N * sizeof *got);
            for (size_t j = 0; j < total; j++) want[g->idx[j % N]]++;
            for (unsigned rank = 0; rank < world; rank++) {
              unsigned W = (rank + world + (unsigned)sdrop) % 3 == 0 ? 2 : 0;
              c = tu_config(src, W, 2, 4);
              c.shuffle = shuffle;
              c.seed = seed;
              c.world = world;
              c.rank = rank;
              c.shard_drop_last = sdrop;
              l = cb_loader(cb, &c);
              TU_OK(stoke_loader_set_epoch(l, epoch));
              TU_CHECK(stoke_loader_n_samples(l) == L,
                       "N %zu world %u rank %u sdrop %d: n_samples %zu, want "
                       "%zu",
                       N, world, rank, sdrop, stoke_loader_n_samples(l), L);
              TU_CHECK(stoke_loader_n_batches(l) == ceil_div(L, 4),
                       "N %zu world %u rank %u: n_batches %zu, want %zu", N,
                       world, rank, stoke_loader_n_batches(l), ceil_div(L, 4));
              run_checked(l, cb, e, W, 1);
              stoke_loader_destroy(l);
              TU_CHECK(e->n_samples == L,
                       "N %zu world %u rank %u sdrop %d shuffle %d: rank got "
                       "%zu samples, want %zu",
                       N, world, rank, sdrop, shuffle, e->n_samples, L);
              TU_CHECK(e->epoch == epoch, "epoch %llu",
                       (unsigned long long)e->epoch);
              for (size_t k = 0; k < e->n_samples; k++) {
                for (size_t m = 0; m < k; m++)
                  TU_CHECK(e->idx[m] != e->idx[k],
                           "N %zu world %u rank %u: sample %zu twice", N,
                           world, rank, e->idx[k]);
                got[e->idx[k]]++;
              }
            }
            for (size_t i = 0; i < N; i++)
              TU_CHECK(got[i] == want[i],
                       "N %zu world %u sdrop %d shuffle %d seed %llu: sample "
                       "%zu delivered %d times over all ranks, want %d "
                       "(DistributedSampler: pad with the first samples of "
                       "the order, or drop its tail)",
                       N, world, sdrop, shuffle, (unsigned long long)seed, i,
                       got[i], want[i]);
          }
        }
      }
    }
    free(want);
    free(got);
    stoke_source_destroy(src);
    tu_cb_free(cb);
  }
  free(g);
  free(e);
}

/* Ranks differ from each other (for N divisible by world: disjoint and
** covering), and a rank's order is the same whatever W. */
static void test_ranks_disjoint_cover(void **state) {
  (void)state;
  const size_t N = 90;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  tu_epoch *e = tu_epoch_new(), *e2 = tu_epoch_new();
  for (unsigned world = 2; world <= 3; world++) {
    char owner[90];
    memset(owner, 0, sizeof owner);
    for (unsigned rank = 0; rank < world; rank++) {
      stoke_config c = tu_config(src, 3, 2, 8);
      c.shuffle = 1;
      c.seed = 11;
      c.world = world;
      c.rank = rank;
      stoke_loader *l = cb_loader(cb, &c);
      run_checked(l, cb, e, 3, 1);
      stoke_loader_destroy(l);
      c.n_workers = 0;
      l = cb_loader(cb, &c);
      run_checked(l, cb, e2, 0, 1);
      stoke_loader_destroy(l);
      assert_int_equal(e->n_samples, N / world);
      TU_CHECK(memcmp(e->idx, e2->idx, e->n_samples * sizeof *e->idx) == 0,
               "world %u rank %u: W=3 and W=0 orders differ", world, rank);
      for (size_t k = 0; k < e->n_samples; k++) {
        TU_CHECK(owner[e->idx[k]] == 0,
                 "world %u: sample %zu on rank %d and rank %u", world,
                 e->idx[k], owner[e->idx[k]] - 1, rank);
        owner[e->idx[k]] = (char)(rank + 1);
      }
    }
    for (size_t i = 0; i < N; i++)
      TU_CHECK(owner[i] != 0, "world %u: sample %zu on no rank", world, i);
  }
  free(e);
  free(e2);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- random values and epochs ------------------------------------------- */

static void test_sample_rng_values(void **state) {
  (void)state;
  const size_t N = 60;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  tu_epoch *ep[3] = {tu_epoch_new(), tu_epoch_new(), tu_epoch_new()};
  uint64_t v[3][60][2];
  for (int run = 0; run < 3; run++) {
    /* run 0: seed 77 epoch 0; run 1: seed 77 epoch 1; run 2: seed 78 ep 0 */
    stoke_config c = tu_config(src, 3, 2, 8);
    c.shuffle = run & 1;
    c.seed = run == 2 ? 78 : 77;
    stoke_loader *l = cb_loader(cb, &c);
    run_checked(l, cb, ep[run], 3, 1);
    if (run == 1) run_checked(l, cb, ep[run], 3, 1);
    stoke_loader_destroy(l);
    assert_int_equal(ep[run]->epoch, run == 1 ? 1 : 0);
    check_rng(ep[run], c.seed);
    assert_int_equal(ep[run]->n_samples, N);
    for (size_t k = 0; k < N; k++) {
      v[run][ep[run]->idx[k]][0] = ep[run]->rnd[k][0];
      v[run][ep[run]->idx[k]][1] = ep[run]->rnd[k][1];
    }
  }
  for (size_t i = 0; i < N; i++) {
    TU_CHECK(v[0][i][0] != v[1][i][0], "sample %zu: same value in epochs 0/1",
             i);
    TU_CHECK(v[0][i][0] != v[2][i][0], "sample %zu: same value for seeds "
             "77/78", i);
    TU_CHECK(v[0][i][0] != v[0][i][1], "sample %zu: stream repeats", i);
    if (i) TU_CHECK(v[0][i][0] != v[0][i - 1][0], "samples %zu, %zu share "
                    "a stream", i - 1, i);
  }
  for (int r = 0; r < 3; r++) free(ep[r]);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static int same_order(const tu_epoch *a, const tu_epoch *b) {
  return a->n_samples == b->n_samples &&
         memcmp(a->idx, b->idx, a->n_samples * sizeof *a->idx) == 0;
}

static int is_identity(const tu_epoch *a) {
  for (size_t k = 0; k < a->n_samples; k++)
    if (a->idx[k] != k) return 0;
  return 1;
}

static void test_shuffle_epochs(void **state) {
  (void)state;
  const size_t N = 100;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  tu_epoch *a[3], *b[2], *s = tu_epoch_new(), *q = tu_epoch_new();
  for (int i = 0; i < 3; i++) a[i] = tu_epoch_new();
  for (int i = 0; i < 2; i++) b[i] = tu_epoch_new();

  stoke_config c = tu_config(src, 2, 2, 10);
  c.shuffle = 1;
  c.seed = 5;
  stoke_loader *l = cb_loader(cb, &c);
  for (int i = 0; i < 3; i++) {
    run_checked(l, cb, a[i], 2, 1);
    assert_int_equal(a[i]->epoch, (uint64_t)i);
    assert_int_equal(a[i]->n_samples, N);
    TU_CHECK(!is_identity(a[i]), "shuffled epoch %d is 0..N-1", i);
  }
  stoke_loader_destroy(l);
  TU_CHECK(!same_order(a[0], a[1]) && !same_order(a[1], a[2]) &&
               !same_order(a[0], a[2]),
           "shuffled orders repeat across epochs");

  c.n_workers = 5;
  c.prefetch = 1;
  l = cb_loader(cb, &c);
  for (int i = 0; i < 2; i++) {
    run_checked(l, cb, b[i], 5, 1);
    TU_CHECK(same_order(a[i], b[i]),
             "epoch %d: two loaders with seed 5 gave different orders", i);
  }
  stoke_loader_destroy(l);

  c.seed = 6;
  l = cb_loader(cb, &c);
  run_checked(l, cb, s, 5, 1);
  stoke_loader_destroy(l);
  TU_CHECK(!same_order(a[0], s), "seeds 5 and 6 gave the same order");

  c.shuffle = 0;
  l = cb_loader(cb, &c);
  for (int i = 0; i < 2; i++) {
    run_checked(l, cb, q, 5, 1);
    TU_CHECK(is_identity(q), "unshuffled epoch %d is not 0..N-1", i);
  }
  stoke_loader_destroy(l);

  for (int i = 0; i < 3; i++) free(a[i]);
  for (int i = 0; i < 2; i++) free(b[i]);
  free(s);
  free(q);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* set_epoch picks the next epoch's number and hence its order; without it
** epochs count up by one. */
static void test_set_epoch(void **state) {
  (void)state;
  const size_t N = 50;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  tu_epoch *a[6], *e = tu_epoch_new();
  stoke_config c = tu_config(src, 2, 2, 6);
  c.shuffle = 1;
  c.seed = 1234;
  stoke_loader *l = cb_loader(cb, &c);
  for (int i = 0; i < 6; i++) {
    a[i] = tu_epoch_new();
    run_checked(l, cb, a[i], 2, 1);
    assert_int_equal(a[i]->epoch, (uint64_t)i);
  }
  stoke_loader_destroy(l);

  /* Also with the next epoch prefetched: a different set_epoch() must
  ** discard that work, the same one (5 after 4) may use it. */
  for (int pne = 0; pne <= 1; pne++) {
    c.prefetch_next_epoch = pne;
    l = cb_loader(cb, &c);
    TU_OK(stoke_loader_set_epoch(l, 4));
    run_checked(l, cb, e, 2, 1);
    assert_int_equal(e->epoch, 4);
    TU_CHECK(same_order(e, a[4]), "pne %d: set_epoch(4): order is not "
             "epoch 4's", pne);
    check_rng(e, 1234);
    TU_OK(stoke_loader_set_epoch(l, 5)); /* the epoch it would run anyway */
    run_checked(l, cb, e, 2, 1);
    assert_int_equal(e->epoch, 5);
    TU_CHECK(same_order(e, a[5]), "pne %d: the epoch after 4 is not 5", pne);
    check_rng(e, 1234);
    TU_OK(stoke_loader_set_epoch(l, 2));
    run_checked(l, cb, e, 2, 1);
    assert_int_equal(e->epoch, 2);
    TU_CHECK(same_order(e, a[2]), "pne %d: set_epoch(2): order is not "
             "epoch 2's", pne);
    check_rng(e, 1234);
    run_checked(l, cb, e, 2, 1); /* 3, no set_epoch */
    assert_int_equal(e->epoch, 3);
    TU_CHECK(same_order(e, a[3]), "pne %d: the epoch after 2 is not 3", pne);
    TU_OK(stoke_loader_set_epoch(l, 0));
    TU_OK(stoke_loader_set_epoch(l, 1)); /* the last call wins */
    run_checked(l, cb, e, 2, 1);
    assert_int_equal(e->epoch, 1);
    TU_CHECK(same_order(e, a[1]), "pne %d: set_epoch(1): order is not "
             "epoch 1's", pne);
    check_rng(e, 1234);
    stoke_loader_destroy(l);
  }

  for (int i = 0; i < 6; i++) free(a[i]);
  free(e);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* prefetch_next_epoch = 1: while the caller holds the last batch of epoch 0
** (the epoch is still in progress), the workers start epoch 1 without
** another next() (waited for on a condition); = 0: nothing of epoch 1 is
** filled until next() starts it (checked after a pause: a correct loader
** never fills it, so the pause cannot make this flaky). */
static void test_prefetch_next_epoch(void **state) {
  (void)state;
  const size_t N = 40;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  tu_epoch *e = tu_epoch_new();
  for (int pne = 0; pne <= 1; pne++) {
    stoke_config c = tu_config(src, 2, 2, 4);
    c.shuffle = 1;
    c.seed = 17;
    c.prefetch_next_epoch = pne;
    stoke_loader *l = cb_loader(cb, &c);
    stoke_config got;
    stoke_loader_config(l, &got);
    assert_int_equal(got.prefetch_next_epoch, pne);
    /* Epoch 0 up to its last batch, which stays held. */
    stoke_batch *last = NULL;
    for (size_t k = 0; k < stoke_loader_n_batches(l); k++) {
      if (last) stoke_batch_release(last);
      last = NULL;
      TU_RC_L(l, stoke_loader_next(l, &last), STOKE_OK);
      tu_check_batch(last, cb, NULL);
    }
    long ahead = 0;
    if (pne) {
      ahead = tu_cb_wait_epoch_calls(cb, 1, 1, 5000000000LL);
      TU_CHECK(ahead > 0, "prefetch_next_epoch 1: no sample of epoch 1 "
               "filled within 5 s while the last batch of epoch 0 is held");
    } else {
      /* The absence of an event: an observation window, not a wait for
      ** something (a correct loader passes whatever the timing). */
      tu_sleep_ns(30000000);
      ahead = tu_cb_epoch_calls(cb, 1);
      TU_CHECK(ahead == 0, "prefetch_next_epoch 0: %ld samples of epoch 1 "
               "filled before its first next()", ahead);
    }
    stoke_batch_release(last);
    stoke_batch *b = NULL;
    TU_RC_L(l, stoke_loader_next(l, &b), STOKE_END);
    run_checked(l, cb, e, 2, 1); /* epoch 1: each sample filled once */
    assert_int_equal(e->epoch, 1);
    assert_int_equal(e->n_samples, N);
    check_rng(e, 17);
    stoke_loader_destroy(l);
  }
  free(e);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- out of order ------------------------------------------------------- */

/* in_order = 0: a batch that is complete is handed out before an earlier
** one that is not, and every batch's content is the in-order batch of the
** same number.  To make "out of order" certain rather than likely, the
** first sample of batch 0 is held at a gate (tu_cb's stuck sample) until
** next() has handed out another batch: with W >= 2 the other workers
** complete later batches meanwhile, and an in-order loader would only give
** batch 0 (after the gate's 10 s bound, so a wrong loader fails, never
** hangs).  W = 1 is checked for content only: its one worker is the one
** at the gate. */
static void test_out_of_order(void **state) {
  (void)state;
  const size_t N = 120;
  tu_cb *cb = tu_cb_new(N);
  cb->sleep_ns = 300000; /* every 7th sample is slow: batches finish */
  cb->sleep_every = 7;   /* at different times */
  stoke_source *src = tu_cb_source(cb);
  tu_epoch *ref = tu_epoch_new(), *e = tu_epoch_new();
  stoke_config c = tu_config(src, 0, 1, 5);
  c.shuffle = 1;
  c.seed = 9;
  for (int ep = 0; ep < 2; ep++) {
    cb->stuck_index = -1;
    stoke_loader *lr = cb_loader(cb, &c);
    TU_OK(stoke_loader_set_epoch(lr, (uint64_t)ep));
    run_checked(lr, cb, ref, 0, 1);
    stoke_loader_destroy(lr);
    for (unsigned W = 1; W <= 4; W += 3) {
      stoke_config co = c;
      co.n_workers = W;
      co.prefetch = 4;
      co.in_order = 0;
      atomic_store(&cb->unstick, 0);
      cb->stuck_index = W > 1 ? (long)ref->idx[0] : -1;
      stoke_loader *l = cb_loader(cb, &co);
      TU_OK(stoke_loader_set_epoch(l, (uint64_t)ep));
      memset(e, 0, sizeof *e);
      stoke_batch *b = NULL;
      TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
      size_t first = stoke_batch_number(b);
      tu_check_batch(b, cb, e);
      stoke_batch_release(b);
      tu_cb_unstick(cb);
      if (W > 1)
        TU_CHECK(first != 0,
                 "W %u out of order, epoch %d: batch 0 (sample %ld at a "
                 "gate) came first", W, ep, cb->stuck_index);
      int rc;
      while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
        tu_check_batch(b, cb, e);
        stoke_batch_release(b);
      }
      TU_RC_L(l, rc, STOKE_END);
      check_fills(cb, e, W);
      stoke_loader_destroy(l);
      TU_CHECK(e->n_batches == ref->n_batches && e->n_samples == ref->n_samples,
               "W %u out of order: %zu batches %zu samples, in order %zu %zu",
               W, e->n_batches, e->n_samples, ref->n_batches, ref->n_samples);
      size_t out_of_place = 0;
      char seen[64] = {0};
      for (size_t k = 0; k < e->n_batches; k++) {
        size_t num = e->batch_number[k];
        out_of_place += num != k;
        TU_CHECK(num < ref->n_batches, "batch number %zu out of range", num);
        TU_CHECK(!seen[num], "batch number %zu delivered twice", num);
        seen[num] = 1;
        TU_CHECK(e->batch_size[k] == ref->batch_size[num],
                 "batch %zu: size %zu, in order %zu", num, e->batch_size[k],
                 ref->batch_size[num]);
        TU_CHECK(memcmp(&e->idx[e->batch_off[k]], &ref->idx[ref->batch_off[num]],
                        e->batch_size[k] * sizeof(size_t)) == 0,
                 "W %u: batch %zu content differs from the in-order batch", W,
                 num);
        TU_CHECK(memcmp(&e->rnd[e->batch_off[k]], &ref->rnd[ref->batch_off[num]],
                        e->batch_size[k] * sizeof e->rnd[0]) == 0,
                 "W %u: batch %zu random values differ from in order", W,
                 num);
      }
      if (W > 1)
        TU_CHECK(out_of_place > 0, "W %u: every batch came in order", W);
    }
  }
  cb->stuck_index = -1;
  free(ref);
  free(e);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- release order ------------------------------------------------------ */

/* Batches may be held K + 1 at a time and released in any order; contents
** of held batches stay intact while later ones are produced. */
static void test_hold_and_release_any_order(void **state) {
  (void)state;
  const size_t N = 96;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  for (unsigned W = 0; W <= 3; W += 3) {
    const unsigned K = 3;
    stoke_config c = tu_config(src, W, K, 4);
    c.shuffle = 1;
    c.seed = 2;
    stoke_loader *l = cb_loader(cb, &c);
    tu_epoch *e = tu_epoch_new();
    stoke_batch *held[4];
    size_t n_held = 0, got = 0, round = 0;
    for (;;) {
      stoke_batch *b = NULL;
      int rc = stoke_loader_next(l, &b);
      if (rc == STOKE_END) break;
      TU_RC_L(l, rc, STOKE_OK);
      held[n_held++] = b;
      got++;
      if (n_held == K + 1) {
        /* Re-check every held batch, then release in a rotating order. */
        for (size_t i = 0; i < n_held; i++) tu_check_batch(held[i], cb, NULL);
        size_t first = round++ % n_held;
        for (size_t i = 0; i < n_held; i++) {
          size_t j = (first + i * 3) % n_held;
          if (held[j]) {
            tu_check_batch(held[j], cb, e);
            stoke_batch_release(held[j]);
            held[j] = NULL;
          }
        }
        for (size_t i = 0; i < n_held; i++)
          if (held[i]) {
            tu_check_batch(held[i], cb, e);
            stoke_batch_release(held[i]);
          }
        n_held = 0;
      }
    }
    for (size_t i = 0; i < n_held; i++) {
      tu_check_batch(held[i], cb, e);
      stoke_batch_release(held[i]);
    }
    assert_int_equal(got, stoke_loader_n_batches(l));
    assert_int_equal(e->n_samples, N);
    char seen[96] = {0};
    for (size_t k = 0; k < N; k++) {
      TU_CHECK(!seen[e->idx[k]], "sample %zu twice", e->idx[k]);
      seen[e->idx[k]] = 1;
    }
    TU_CHECK(atomic_load(&cb->bad) == 0, "bad 0x%x", atomic_load(&cb->bad));
    stoke_loader_destroy(l);
    free(e);
  }
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- in-memory tensors ---------------------------------------------------- */

static uint8_t tensor_byte(size_t f, size_t i, size_t j) {
  return (uint8_t)((f * 131u + i * 17u + j * 5u + 3u) ^ (i >> 3));
}

static void test_tensor_source_bytes(void **state) {
  (void)state;
  const size_t N = 53;
  static const int64_t s3[] = {3}, s22[] = {2, 2}, s5[] = {5}, s2[] = {2},
                       s1[] = {1};
  stoke_field_desc f[6] = {
      tu_field("a_u8", STOKE_U8, 1, s3),  tu_field("b_f32", STOKE_F32, 2, s22),
      tu_field("c_i64", STOKE_I64, 0, NULL), tu_field("d_f64", STOKE_F64, 1, s5),
      tu_field("e_f16", STOKE_F16, 1, s2), tu_field("f_i32", STOKE_I32, 1, s1),
  };
  uint8_t *data[6];
  for (size_t k = 0; k < 6; k++) {
    size_t sz = tu_field_bytes(&f[k]);
    data[k] = malloc(N * sz);
    assert_non_null(data[k]);
    for (size_t i = 0; i < N; i++)
      for (size_t j = 0; j < sz; j++) data[k][i * sz + j] = tensor_byte(k, i, j);
  }
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_tensors(N, 6, f, (const void *const *)data, &src));
  assert_int_equal(stoke_source_n_samples(src), N);
  assert_int_equal(stoke_source_n_fields(src), 6);
  for (unsigned W = 0; W <= 3; W += 3) {
    stoke_config c = tu_config(src, W, 2, 7);
    c.shuffle = 1;
    c.seed = 8;
    stoke_loader *l = tu_loader(&c);
    char seen[53] = {0};
    size_t total = 0;
    for (int ep = 0; ep < 2; ep++) {
      memset(seen, 0, sizeof seen);
      stoke_batch *b;
      int rc;
      while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
        size_t n = stoke_batch_size(b);
        const size_t *ix = stoke_batch_indices(b);
        assert_int_equal(stoke_batch_n_fields(b), 6);
        for (size_t k = 0; k < 6; k++) {
          stoke_tensor t;
          TU_OK(stoke_batch_field(b, k, &t));
          size_t sz = tu_field_bytes(&f[k]);
          assert_string_equal(t.name, f[k].name);
          assert_int_equal(t.dtype, f[k].dtype);
          assert_int_equal(t.ndim, f[k].ndim + 1);
          assert_int_equal(t.shape[0], (int64_t)n);
          for (int d = 0; d < f[k].ndim; d++)
            assert_int_equal(t.shape[d + 1], f[k].shape[d]);
          assert_int_equal(t.n_bytes, n * sz);
          const uint8_t *p = t.data;
          for (size_t s = 0; s < n; s++)
            TU_CHECK(memcmp(p + s * sz, data[k] + ix[s] * sz, sz) == 0,
                     "W %u field %s sample %zu (batch %zu pos %zu): bytes "
                     "differ from the source array",
                     W, f[k].name, ix[s], stoke_batch_number(b), s);
        }
        for (size_t s = 0; s < n; s++) {
          TU_CHECK(!seen[ix[s]], "sample %zu twice", ix[s]);
          seen[ix[s]] = 1;
        }
        total += n;
        stoke_batch_release(b);
      }
      TU_RC_L(l, rc, STOKE_END);
    }
    assert_int_equal(total, 2 * N);
    stoke_loader_destroy(l);
  }
  stoke_source_destroy(src);
  for (size_t k = 0; k < 6; k++) free(data[k]);
}

/* ---- synthetic TENSOR ----------------------------------------------------- */

/* x (5 floats) and y of every sample of one epoch of src. */
static void synth_epoch(stoke_source *src, uint64_t epoch, float x[][5],
                        int64_t *y, size_t n) {
  stoke_config c = tu_config(src, 2, 2, 8);
  c.shuffle = 1;
  c.seed = 4;
  stoke_loader *l = tu_loader(&c);
  TU_OK(stoke_loader_set_epoch(l, epoch));
  char *seen = calloc(n, 1);
  assert_non_null(seen);
  stoke_batch *b;
  int rc;
  size_t total = 0;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    assert_int_equal(stoke_batch_n_fields(b), 2);
    stoke_tensor tx, ty;
    TU_OK(stoke_batch_field(b, 0, &tx));
    TU_OK(stoke_batch_field(b, 1, &ty));
    assert_string_equal(tx.name, "x");
    assert_string_equal(ty.name, "y");
    assert_int_equal(tx.dtype, STOKE_F32);
    assert_int_equal(ty.dtype, STOKE_I64);
    assert_int_equal(ty.ndim, 1);
    size_t bn = stoke_batch_size(b);
    const size_t *ix = stoke_batch_indices(b);
    for (size_t s = 0; s < bn; s++) {
      TU_CHECK(!seen[ix[s]], "sample %zu twice", ix[s]);
      seen[ix[s]] = 1;
      memcpy(x[ix[s]], (const float *)tx.data + 5 * s, 5 * sizeof(float));
      y[ix[s]] = ((const int64_t *)ty.data)[s];
    }
    total += bn;
    stoke_batch_release(b);
  }
  TU_RC_L(l, rc, STOKE_END);
  assert_int_equal(total, n);
  free(seen);
  stoke_loader_destroy(l);
}

static stoke_source *synth_tensor(uint64_t seed) {
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = STOKE_SYNTH_TENSOR;
  sc.n_samples = 40;
  sc.ndim = 1;
  sc.shape[0] = 5;
  sc.n_classes = 3;
  sc.seed = seed;
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_synthetic(&sc, &src));
  return src;
}

static void test_synthetic_tensor_deterministic(void **state) {
  (void)state;
  enum { N = 40 };
  static float x[4][N][5];
  static int64_t y[4][N];
  stoke_source *a = synth_tensor(11), *b = synth_tensor(11),
               *c = synth_tensor(12);
  synth_epoch(a, 0, x[0], y[0], N);
  synth_epoch(a, 1, x[1], y[1], N); /* features held in memory: same */
  synth_epoch(b, 0, x[2], y[2], N); /* same seed: same */
  synth_epoch(c, 0, x[3], y[3], N); /* other seed: different */
  for (size_t i = 0; i < N; i++) {
    for (int r = 0; r < 4; r++)
      TU_CHECK(y[r][i] == (int64_t)(i % 3), "y of sample %zu is %lld", i,
               (long long)y[r][i]);
    for (int j = 0; j < 5; j++)
      TU_CHECK(isfinite(x[0][i][j]), "x of sample %zu not finite", i);
    TU_CHECK(memcmp(x[0][i], x[1][i], sizeof x[0][i]) == 0,
             "TENSOR sample %zu changed between epochs", i);
    TU_CHECK(memcmp(x[0][i], x[2][i], sizeof x[0][i]) == 0,
             "TENSOR sample %zu differs for the same seed", i);
    TU_CHECK(memcmp(x[0][i], x[3][i], sizeof x[0][i]) != 0,
             "TENSOR sample %zu is the same for seeds 11 and 12", i);
    if (i) TU_CHECK(memcmp(x[0][i], x[0][i - 1], sizeof x[0][i]) != 0,
                    "TENSOR samples %zu and %zu are equal", i - 1, i);
  }
  stoke_source_destroy(a);
  stoke_source_destroy(b);
  stoke_source_destroy(c);
}


/* The VmFlags line of the mapping of /proc/self/smaps that holds addr, in
** flags (cap bytes); false when none does. */
static bool smaps_flags(uintptr_t addr, char *flags, size_t cap) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return false;
  char line[512];
  bool inside = false, found = false;
  while (!found && fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') &&
        line[0] != 'V')
      inside = addr >= lo && addr < hi;
    else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
      size_t n = strlen(line + 8);
      if (n >= cap) n = cap - 1;
      memcpy(flags, line + 8, n);
      flags[n] = '\0';
      found = true;
    }
  }
  fclose(f);
  return found;
}

/* Batch buffers from malloc ask for transparent huge pages: a 602 KB image
** sample spans 147 small pages, each a TLB miss when written and again when
** the consumer copies the batch.  The kernel shows the advice as "hg" on
** the advised range in /proc/self/smaps.  Skipped on kernels without THP. */
static void test_batch_buffers_huge_page_advice(void **state) {
  (void)state;
  if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0) {
    skip();
    return;
  }
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = STOKE_SYNTH_TENSOR;
  sc.n_samples = 8;
  sc.ndim = 3;
  sc.shape[0] = 3;
  sc.shape[1] = 256;
  sc.shape[2] = 256; /* 768 KiB a sample, 6 MiB a batch of 8 */
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_synthetic(&sc, &src));
  stoke_config c = tu_config(src, 0, 1, 8);
  stoke_loader *l = tu_loader(&c);
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  stoke_tensor x;
  TU_OK(stoke_batch_field(b, 0, &x));
  const uintptr_t huge = (uintptr_t)2 << 20;
  uintptr_t inner = ((uintptr_t)x.data + huge - 1) & ~(huge - 1);
  assert_true(inner + huge <= (uintptr_t)x.data + x.n_bytes);
  char flags[512];
  TU_CHECK(smaps_flags(inner, flags, sizeof flags),
           "no mapping holds the batch buffer at %p", (void *)inner);
  TU_CHECK(strstr(flags, " hg") != NULL,
           "batch buffer without huge-page advice, VmFlags:%s", flags);
  stoke_batch_release(b);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_config_defaults),
      cmocka_unit_test(test_batching),
      cmocka_unit_test(test_order_independent_of_workers),
      cmocka_unit_test(test_all_workers_prefetch),
      cmocka_unit_test(test_sharding),
      cmocka_unit_test(test_ranks_disjoint_cover),
      cmocka_unit_test(test_sample_rng_values),
      cmocka_unit_test(test_shuffle_epochs),
      cmocka_unit_test(test_set_epoch),
      cmocka_unit_test(test_prefetch_next_epoch),
      cmocka_unit_test(test_out_of_order),
      cmocka_unit_test(test_hold_and_release_any_order),
      cmocka_unit_test(test_tensor_source_bytes),
      cmocka_unit_test(test_synthetic_tensor_deterministic),
      cmocka_unit_test(test_batch_buffers_huge_page_advice),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
