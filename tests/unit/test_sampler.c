/* test_sampler.c — the epoch order: a permutation, a pure function of
** (seed, epoch, rank, world), with DistributedSampler's padding rules. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "os/os.h"
#include "stats/stats.h"
#include "sampler/sampler.h"
#include "source/source.h"
#include "test_util.h"

static stoke__plan make_plan(size_t n, size_t b, int shuffle, unsigned rank,
                             unsigned world, int shard_drop, int drop) {
  stoke__plan p = {.n_source = n, .batch_size = b, .shuffle = shuffle,
                   .seed = 42, .rank = rank, .world = world,
                   .shard_drop_last = shard_drop, .drop_last = drop};
  assert_int_equal(stoke__plan_init(&p), 0);
  return p;
}

static size_t *order_of(const stoke__plan *p, uint64_t epoch) {
  size_t *perm = calloc(p->n_source, sizeof *perm);
  size_t *order = calloc(p->per_rank, sizeof *order);
  stoke__plan_order(p, epoch, perm, order);
  free(perm);
  return order;
}

static void test_sequential_is_identity(void **state) {
  (void)state;
  stoke__plan p = make_plan(10, 3, 0, 0, 1, 0, 0);
  assert_int_equal(p.per_rank, 10);
  assert_int_equal(p.n_batches, 4);
  assert_int_equal(stoke__plan_batch_len(&p, 3), 1);
  assert_int_equal(stoke__plan_batch_len(&p, 4), 0);
  size_t *o = order_of(&p, 5);
  for (size_t i = 0; i < 10; i++) assert_int_equal(o[i], i);
  free(o);
}

static void test_shuffle_is_a_permutation_and_pure(void **state) {
  (void)state;
  for (size_t n = 1; n < 300; n += 37) {
    stoke__plan p = make_plan(n, 4, 1, 0, 1, 0, 0);
    size_t *a = order_of(&p, 3), *b = order_of(&p, 3), *c = order_of(&p, 4);
    char *seen = calloc(n, 1);
    for (size_t i = 0; i < n; i++) {
      assert_true(a[i] < n);
      assert_int_equal(seen[a[i]], 0);
      seen[a[i]] = 1;
    }
    assert_memory_equal(a, b, n * sizeof *a);
    if (n > 8) assert_memory_not_equal(a, c, n * sizeof *a);
    free(a);
    free(b);
    free(c);
    free(seen);
  }
}

static void test_seed_changes_the_order(void **state) {
  (void)state;
  stoke__plan p = make_plan(100, 4, 1, 0, 1, 0, 0);
  stoke__plan q = p;
  q.seed = 43;
  size_t *a = order_of(&p, 0), *b = order_of(&q, 0);
  assert_memory_not_equal(a, b, 100 * sizeof *a);
  free(a);
  free(b);
}

/* DistributedSampler: pad to ceil(N/world)*world with the permutation's
** first entries, rank r takes positions r, r+world, ... */
static void test_shards_pad_like_distributed_sampler(void **state) {
  (void)state;
  const size_t n = 10;
  const unsigned world = 4; /* 12 positions: 2 padded */
  stoke__plan p0 = make_plan(n, 2, 1, 0, world, 0, 0);
  stoke__plan single = make_plan(n, 2, 1, 0, 1, 0, 0);
  size_t *full = order_of(&single, 7);
  assert_int_equal(p0.per_rank, 3);
  for (unsigned r = 0; r < world; r++) {
    stoke__plan p = make_plan(n, 2, 1, r, world, 0, 0);
    size_t *o = order_of(&p, 7);
    for (size_t i = 0; i < p.per_rank; i++)
      assert_int_equal(o[i], full[(r + i * world) % n]);
    free(o);
  }
  free(full);
}

static void test_shards_drop_tail_and_are_disjoint(void **state) {
  (void)state;
  const size_t n = 11;
  const unsigned world = 3;
  char *seen = calloc(n, 1);
  for (unsigned r = 0; r < world; r++) {
    stoke__plan p = make_plan(n, 2, 1, r, world, 1, 0);
    assert_int_equal(p.per_rank, 3);
    size_t *o = order_of(&p, 1);
    for (size_t i = 0; i < p.per_rank; i++) {
      assert_int_equal(seen[o[i]], 0);
      seen[o[i]] = 1;
    }
    free(o);
  }
  size_t covered = 0;
  for (size_t i = 0; i < n; i++) covered += seen[i];
  assert_int_equal(covered, 9); /* 11 - the 2 dropped */
  free(seen);
}

static void test_plan_errors(void **state) {
  (void)state;
  stoke__plan p = {.n_source = 2, .batch_size = 1, .rank = 0, .world = 3,
                   .shard_drop_last = 1};
  assert_int_equal(stoke__plan_init(&p), STOKE_EINVAL);
  assert_non_null(strstr(stoke__tls_error(), "no samples"));
  stoke__plan q = {.n_source = 5, .batch_size = 8, .world = 1,
                   .drop_last = 1};
  assert_int_equal(stoke__plan_init(&q), 0); /* as PyTorch: no batches */
  assert_int_equal(q.n_batches, 0);
  stoke__plan r = {.n_source = 17, .batch_size = 8, .world = 1,
                   .drop_last = 1};
  assert_int_equal(stoke__plan_init(&r), 0);
  assert_int_equal(r.n_batches, 2);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sequential_is_identity),
      cmocka_unit_test(test_shuffle_is_a_permutation_and_pure),
      cmocka_unit_test(test_seed_changes_the_order),
      cmocka_unit_test(test_shards_pad_like_distributed_sampler),
      cmocka_unit_test(test_shards_drop_tail_and_are_disjoint),
      cmocka_unit_test(test_plan_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
