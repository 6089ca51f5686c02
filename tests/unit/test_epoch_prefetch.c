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
  ** returns END, workers have already filled samples of epoch 1. */
  counts c = {0};
  stoke_source *src = make_source(&c);
  stoke_loader *l = make_loader(src, 2, 1);
  stoke_batch *b;
  size_t batches = stoke_loader_n_batches(l), seen = 0;
  while (seen < batches) {
    assert_int_equal(stoke_loader_next(l, &b), STOKE_OK);
    stoke_batch_release(b);
    seen++;
  }
  /* Give the workers time to run ahead; wait on the count, not a clock. */
  for (int i = 0; i < 2000 && atomic_load(&c.fills) <= N; i++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  assert_true(atomic_load(&c.fills) > N);
  assert_int_equal(stoke_loader_next(l, &b), STOKE_END);
  assert_int_equal(stoke_loader_next(l, &b), STOKE_OK);
  assert_int_equal(stoke_batch_epoch(b), 1);
  stoke_batch_release(b);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
}

static void test_off_means_no_work_ahead(void **state) {
  (void)state;
  counts c = {0};
  stoke_source *src = make_source(&c);
  stoke_loader *l = make_loader(src, 2, 0);
  rec *got = calloc(N, sizeof *got);
  run_epoch(l, got, 0);
  struct timespec ts = {0, 20000000};
  nanosleep(&ts, NULL);
  assert_int_equal(atomic_load(&c.fills), N);
  free(got);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_set_epoch_pattern),
      cmocka_unit_test(test_prefetch_really_happens),
      cmocka_unit_test(test_off_means_no_work_ahead),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
