/* test_scratch_bound.c — the host ledger's per-worker source scratch
** (issue 13, item 3): the bound's basis for each storage (exact from a
** packed index, probed from folder and tar headers, declared by the user),
** and the ledger's total holding everything the loader allocates through
** its allocator, scratch included, over whole epochs of random crops.
** Without the scratch term the ledger is short of what the loader
** allocates (checked here too). */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>
#include <spng.h>

#include "decode_fixtures.h"
#include "image_fixtures.h"
#include "test_util.h"
#include "stoke.h"

static char root[64], folder[192], tarpath[192], packed[192];

static int setup(void **state) {
  (void)state;
  tmp_root(root, "scratch");
  small_dataset(root, folder, tarpath, packed, sizeof folder);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  return tmp_root_remove(root);
}

static stoke_source *open_images(const char *path,
                                 const stoke_image_config *ic) {
  stoke_source *src = NULL;
  if (stoke_source_create_images(path, ic, &src) != 0)
    fail_msg("open %s: %s", path, stoke_errmsg(NULL));
  return src;
}

/* The ledger of W workers, and the peak of what the loader allocated
** through its allocator over three epochs. */
static void run(stoke_source *src, unsigned w, stoke_host_ledger *g,
                long *peak) {
  tu_alloc_count count = {0};
  stoke_allocator a = {tu_count_alloc, tu_count_free, &count};
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = 3;
  cfg.n_workers = w;
  cfg.prefetch = 2;
  cfg.shuffle = 1;
  cfg.alloc = &a;
  g->struct_size = sizeof *g;
  assert_int_equal(stoke_host_ledger_compute(&cfg, g), 0);
  stoke_loader *l = tu_loader(&cfg);
  for (int e = 0; e < 3; e++) {
    stoke_batch *b;
    int rc;
    while ((rc = stoke_loader_next(l, &b)) == 0) stoke_batch_release(b);
    assert_int_equal(rc, STOKE_END);
  }
  stoke_host_ledger lg;
  lg.struct_size = sizeof lg;
  assert_int_equal(stoke_loader_ledger(l, &lg), 0);
  assert_int_equal(lg.total_bytes, g->total_bytes);
  assert_int_equal(stoke_loader_host_bytes(l), g->total_bytes);
  stoke_loader_destroy(l);
  *peak = atomic_load(&count.peak_bytes);
}

static void check_storage(const char *path, int basis) {
  stoke_source *src = open_images(path, NULL);
  for (unsigned w = 0; w <= 3; w += 3) {
    stoke_host_ledger g;
    long peak;
    run(src, w, &g, &peak);
    assert_int_equal(g.scratch_basis, basis);
    /* The dataset's largest sides: 80 wide (ant/b.jpg), 64 high. */
    assert_int_equal(g.scratch_width, 80);
    assert_int_equal(g.scratch_height, 64);
    assert_true(g.scratch_per_worker > 0);
    assert_int_equal(g.scratch_bytes,
                     (uint64_t)(w ? w : 1) * g.scratch_per_worker);
    if ((uint64_t)peak > g.total_bytes)
      fail_msg("%s, %u workers: the loader allocated %ld bytes, the ledger "
               "says %llu", path, w, peak,
               (unsigned long long)g.total_bytes);
    /* The scratch is a real share of it: without it, short. */
    if ((uint64_t)peak <= g.total_bytes - g.scratch_bytes)
      fail_msg("%s, %u workers: %ld bytes allocated fit the ledger without "
               "its %llu bytes of scratch", path, w, peak,
               (unsigned long long)g.scratch_bytes);
  }
  stoke_source_destroy(src);
}

static void test_packed_exact(void **state) {
  (void)state;
  check_storage(packed, STOKE_SCRATCH_EXACT);
}

static void test_folder_probed(void **state) {
  (void)state;
  check_storage(folder, STOKE_SCRATCH_PROBED);
}

static void test_tar_probed(void **state) {
  (void)state;
  check_storage(tarpath, STOKE_SCRATCH_PROBED);
}

static void test_declared(void **state) {
  (void)state;
  stoke_image_config ic;
  stoke_image_config_init(&ic);
  ic.largest_width = 4000;
  ic.largest_height = 3000;
  stoke_source *src = open_images(folder, &ic);
  stoke_host_ledger g;
  long peak;
  run(src, 2, &g, &peak);
  assert_int_equal(g.scratch_basis, STOKE_SCRATCH_DECLARED);
  assert_int_equal(g.scratch_width, 4000);
  assert_int_equal(g.scratch_height, 3000);
  /* A 12-megapixel photo: tens of MB a worker, pixels alone 36 MB. */
  assert_true(g.scratch_per_worker > 36000000ull);
  assert_true((uint64_t)peak <= g.total_bytes);
  assert_string_equal(stoke_scratch_basis_name(g.scratch_basis), "declared");
  /* The budget check counts it: a budget without room for it refuses. */
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = 3;
  cfg.n_workers = 2;
  cfg.prefetch = 2;
  cfg.mem_budget_bytes = g.total_bytes - g.scratch_bytes / 2;
  stoke_host_ledger g2;
  g2.struct_size = sizeof g2;
  assert_int_equal(stoke_host_ledger_compute(&cfg, &g2), STOKE_EBUDGET);
  assert_non_null(strstr(stoke_errmsg(NULL), "scratch"));
  stoke_source_destroy(src);
  assert_string_equal(stoke_scratch_basis_name(STOKE_SCRATCH_EXACT), "exact");
  assert_string_equal(stoke_scratch_basis_name(99), "none");
}

/* A source without images keeps no scratch: the ledger's term is 0. */
static void test_no_scratch(void **state) {
  (void)state;
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = STOKE_SYNTH_TENSOR;
  sc.n_samples = 16;
  stoke_source *src = NULL;
  assert_int_equal(stoke_source_create_synthetic(&sc, &src), 0);
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.n_workers = 2;
  stoke_host_ledger g;
  g.struct_size = sizeof g;
  assert_int_equal(stoke_host_ledger_compute(&cfg, &g), 0);
  assert_int_equal(g.scratch_bytes, 0);
  assert_int_equal(g.scratch_basis, STOKE_SCRATCH_NONE);
  stoke_source_destroy(src);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_packed_exact),
      cmocka_unit_test(test_folder_probed),
      cmocka_unit_test(test_tar_probed),
      cmocka_unit_test(test_declared),
      cmocka_unit_test(test_no_scratch),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
