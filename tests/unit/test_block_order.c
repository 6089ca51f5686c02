/* test_block_order.c — shuffle = STOKE_SHUFFLE_BLOCK: blocks of
** consecutive samples shuffled, then the samples within each window of
** blocks; the next window read ahead.
**
** Checked: every sample exactly once per epoch, whatever W, K and
** in_order, also when the last block and the last window are partial
** (a missing sample is named); the same order for the same (seed, epoch), another for
** another epoch; world 2 covers the dataset once between the ranks; each
** window of the permutation is exactly `window` whole blocks (the
** randomness the order gives up, and nothing more); the blocks follow the
** stored bytes (a packed source's sample sizes); every block is advised
** once per epoch (madvise on packed shards, posix_fadvise on tar shards,
** through the source's syscall table) and advice that fails changes
** nothing; a state saved mid-epoch resumes the same order, one made with
** another block size restarts at the next epoch; the ledger counts the
** blocks. */
#define _GNU_SOURCE
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
#include "fault.h"
#include "image_fixtures.h"
#include "source/image.h"
#include "test_util.h"
#include "pipeline/pipeline.h"

#define N 200
#define B 16
#define SEED 3

/* The callback source's samples weigh their fields' bytes: 8 + 16 + 8 +
** 16 = 48, so 480 bytes are blocks of 10 samples. */
#define SAMPLE_BYTES 48
#define PER_BLOCK 10
#define WINDOW 4

static stoke_config block_cfg(stoke_source *src, unsigned W, unsigned K) {
  stoke_config c = tu_config(src, W, K, B);
  c.shuffle = STOKE_SHUFFLE_BLOCK;
  c.shuffle_block_bytes = PER_BLOCK * SAMPLE_BYTES;
  c.shuffle_window = WINDOW;
  c.seed = SEED;
  return c;
}

/* One epoch's indices in delivery order (in order: the epoch's order). */
static size_t epoch_order(stoke_loader *l, size_t *out) {
  stoke_batch *b;
  int rc;
  size_t n = 0;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    memcpy(out + n, stoke_batch_indices(b),
           stoke_batch_size(b) * sizeof *out);
    n += stoke_batch_size(b);
    stoke_batch_release(b);
  }
  TU_RC_L(l, rc, STOKE_END);
  return n;
}

static void test_once_and_deterministic(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  static size_t ref[3][N], got[N];
  const unsigned ws[] = {0, 1, 3};
  for (size_t wi = 0; wi < 3; wi++) {
    stoke_config c = block_cfg(src, ws[wi], (unsigned)wi + 1);
    stoke_loader *l = tu_loader(&c);
    for (int ep = 0; ep < 3; ep++) {
      size_t *o = wi == 0 ? ref[ep] : got;
      assert_int_equal(epoch_order(l, o), N);
      uint8_t seen[N] = {0};
      for (size_t i = 0; i < N; i++) {
        TU_CHECK(o[i] < N && !seen[o[i]], "epoch %d: sample %zu twice", ep,
                 o[i]);
        seen[o[i]] = 1;
      }
      if (wi > 0) assert_memory_equal(got, ref[ep], sizeof got);
    }
    stoke_loader_destroy(l);
  }
  TU_CHECK(memcmp(ref[0], ref[1], sizeof ref[0]) != 0,
           "epochs 0 and 1 have the same order");
  /* Not the uniform order, not the index order. */
  stoke_config cu = block_cfg(src, 1, 1);
  cu.shuffle = STOKE_SHUFFLE_UNIFORM;
  stoke_loader *u = tu_loader(&cu);
  assert_int_equal(epoch_order(u, got), N);
  TU_CHECK(memcmp(got, ref[0], sizeof got) != 0, "block order = uniform");
  stoke_loader_destroy(u);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* A dataset whose blocks and windows do not divide evenly: 203 samples are
** 20 blocks of 10 and one of 3, and 21 blocks are 5 windows of 4 and one
** of 1.  The last, partial block and window are in every epoch, once. */
static void test_partial_last_block_and_window(void **state) {
  (void)state;
  enum { NP = 203 };
  tu_cb *cb = tu_cb_new(NP);
  stoke_source *src = tu_cb_source(cb);
  static size_t got[NP + B];
  const unsigned ws[] = {0, 1, 3};
  for (size_t wi = 0; wi < 3; wi++) {
    stoke_config c = block_cfg(src, ws[wi], 2);
    stoke_loader *l = tu_loader(&c);
    assert_int_equal(l->plan.blocks->n_blocks, 21);
    for (int ep = 0; ep < 2; ep++) {
      size_t n = epoch_order(l, got);
      uint8_t seen[NP] = {0};
      for (size_t i = 0; i < n; i++) {
        TU_CHECK(got[i] < NP && !seen[got[i]],
                 "W=%u epoch %d: sample %zu twice", ws[wi], ep, got[i]);
        seen[got[i]] = 1;
      }
      for (size_t i = 0; i < NP; i++)
        TU_CHECK(seen[i], "W=%u epoch %d: sample %zu (block %zu) missing",
                 ws[wi], ep, i, i / PER_BLOCK);
      assert_int_equal(n, NP);
    }
    stoke_loader_destroy(l);
  }
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* Window w of the permutation is `window` whole blocks, shuffled: the
** randomness the order gives up is the blocks' own. */
static void test_windows_are_whole_blocks(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = block_cfg(src, 2, 2);
  stoke_loader *l = tu_loader(&c);
  assert_int_equal(l->plan.blocks->n_blocks, N / PER_BLOCK);
  assert_int_equal(l->plan.blocks->n_windows, N / PER_BLOCK / WINDOW);
  size_t o[N];
  assert_int_equal(epoch_order(l, o), N);
  size_t per_window = PER_BLOCK * WINDOW;
  int spread = 0;
  for (size_t w = 0; w < N / per_window; w++) {
    uint8_t blocks[N / PER_BLOCK] = {0};
    for (size_t i = w * per_window; i < (w + 1) * per_window; i++)
      blocks[o[i] / PER_BLOCK]++;
    size_t whole = 0;
    for (size_t k = 0; k < N / PER_BLOCK; k++) {
      TU_CHECK(blocks[k] == 0 || blocks[k] == PER_BLOCK,
               "window %zu holds %u of block %zu's samples", w, blocks[k], k);
      whole += blocks[k] == PER_BLOCK;
    }
    assert_int_equal(whole, WINDOW);
    /* Shuffled within the window: not block after block. */
    for (size_t i = w * per_window + 1; i < (w + 1) * per_window; i++)
      spread += o[i] / PER_BLOCK != o[i - 1] / PER_BLOCK;
  }
  TU_CHECK(spread > N / 2, "the windows are not shuffled (%d changes)",
           spread);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static void test_world(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  uint8_t seen[N] = {0};
  for (unsigned r = 0; r < 2; r++) {
    stoke_config c = block_cfg(src, 2, 2);
    c.rank = r;
    c.world = 2;
    stoke_loader *l = tu_loader(&c);
    size_t o[N];
    assert_int_equal(epoch_order(l, o), N / 2);
    for (size_t i = 0; i < N / 2; i++) seen[o[i]]++;
    stoke_loader_destroy(l);
  }
  for (size_t i = 0; i < N; i++) assert_int_equal(seen[i], 1);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static void test_resume(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = block_cfg(src, 1, 1);
  stoke_loader *l = tu_loader(&c);
  size_t ref[N], got[N];
  assert_int_equal(epoch_order(l, ref), N);
  stoke_loader_destroy(l);
  stoke_config cs = block_cfg(src, 3, 2);
  stoke_loader *a = tu_loader(&cs);
  stoke_batch *b;
  for (int k = 0; k < 5; k++) {
    TU_OK(stoke_loader_next(a, &b));
    stoke_batch_release(b);
  }
  stoke_loader_state st;
  TU_OK(stoke_loader_state_save(a, &st));
  assert_int_equal(st.shuffle, STOKE_SHUFFLE_BLOCK);
  uint8_t blob[STOKE_STATE_BYTES];
  size_t nb;
  TU_OK(stoke_loader_state_encode(&st, blob, sizeof blob, &nb));
  stoke_loader_state back;
  TU_OK(stoke_loader_state_decode(blob, nb, &back));
  assert_int_equal(back.shuffle, STOKE_SHUFFLE_BLOCK);
  assert_int_equal(back.order_key, st.order_key);
  stoke_config cr = block_cfg(src, 2, 3);
  stoke_loader *r = tu_loader(&cr);
  TU_OK(stoke_loader_state_restore(r, &back));
  assert_int_equal(epoch_order(r, got), N - 5 * B);
  assert_memory_equal(got, ref + 5 * B, (N - 5 * B) * sizeof got[0]);
  stoke_loader_destroy(r);
  /* Another block size: the position means other samples. */
  cr.shuffle_block_bytes *= 2;
  r = tu_loader(&cr);
  TU_OK(stoke_loader_state_restore(r, &back));
  TU_CONTAINS(stoke_errmsg(r), "starts at epoch 1");
  stoke_loader_destroy(r);
  /* Uniform: another order altogether. */
  cr = block_cfg(src, 2, 3);
  cr.shuffle = STOKE_SHUFFLE_UNIFORM;
  r = tu_loader(&cr);
  TU_OK(stoke_loader_state_restore(r, &back));
  TU_CONTAINS(stoke_errmsg(r), "starts at epoch 1");
  stoke_loader_destroy(r);
  stoke_loader_destroy(a);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- images: sizes, read-ahead ------------------------------------------- */

static char root[64], folder[256], tarp[256], packp[256];

static stoke_source *open_through(const char *path, fault_sys *fs) {
  stoke_image_config ic;
  stoke_image_config_init(&ic);
  ic.transform = "center-crop=16,chw,u8";
  stoke_source *src = NULL;
  int rc = stoke__source_create_images(path, &ic, &fs->table, &src);
  if (rc) fail_msg("open %s: %s", path, stoke_errmsg(NULL));
  return src;
}

static void test_read_ahead(void **state) {
  (void)state;
  /* Packed shards: madvise; tar: posix_fadvise; once per block. */
  const char *paths[] = {packp, tarp};
  for (int k = 0; k < 2; k++) {
    fault_sys fs;
    fault_sys_init(&fs, 0, 0, 0, FAULT_ONCE);
    stoke_source *src = open_through(paths[k], &fs);
    stoke_config c = tu_config(src, 2, 1, 2);
    c.shuffle = STOKE_SHUFFLE_BLOCK;
    c.shuffle_block_bytes = 1; /* a block per sample */
    c.shuffle_window = 2;
    c.prefetch_next_epoch = 0;
    stoke_loader *l = tu_loader(&c);
    /* Blocks of packed samples follow their stored sizes. */
    assert_int_equal(l->plan.blocks->n_blocks, SMALL_DATASET_N);
    size_t o[SMALL_DATASET_N];
    assert_int_equal(epoch_order(l, o), SMALL_DATASET_N);
    long advised = k == 0 ? atomic_load(&fs.madvised)
                          : atomic_load(&fs.fadvised);
    /* Each block once (a packed block spanning two shards twice). */
    TU_CHECK(advised >= SMALL_DATASET_N && advised <= 2 * SMALL_DATASET_N,
             "%s: %ld read-ahead calls for %d blocks", paths[k], advised,
             SMALL_DATASET_N);
    stoke_loader_destroy(l);
    /* The uniform order reads nothing ahead. */
    long before = atomic_load(&fs.madvised) + atomic_load(&fs.fadvised);
    c.shuffle = STOKE_SHUFFLE_UNIFORM;
    l = tu_loader(&c);
    assert_int_equal(epoch_order(l, o), SMALL_DATASET_N);
    assert_int_equal(atomic_load(&fs.madvised) + atomic_load(&fs.fadvised),
                     before);
    stoke_loader_destroy(l);
    stoke_source_destroy(src);
    assert_true(fault_sys_clean(&fs));
  }
  /* Advice that fails changes nothing. */
  size_t want[SMALL_DATASET_N], got[SMALL_DATASET_N];
  for (int f = 0; f < 2; f++) {
    fault_sys fs;
    fault_sys_init(&fs, FS_MADVISE, f ? 1 : 0, EIO, FAULT_FROM_THEN_ON);
    stoke_source *src = open_through(packp, &fs);
    stoke_config c = tu_config(src, 2, 1, 2);
    c.shuffle = STOKE_SHUFFLE_BLOCK;
    c.shuffle_block_bytes = 1;
    stoke_loader *l = tu_loader(&c);
    assert_int_equal(epoch_order(l, f ? got : want), SMALL_DATASET_N);
    if (f) TU_CHECK(atomic_load(&fs.faults) > 0, "no fault injected");
    stoke_loader_destroy(l);
    stoke_source_destroy(src);
  }
  assert_memory_equal(got, want, sizeof got);
}

static void test_ledger(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(N);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = block_cfg(src, 2, 2);
  stoke_host_ledger g, gu;
  TU_OK(stoke_host_ledger_compute(&c, &g));
  stoke_loader *l = tu_loader(&c);
  assert_int_equal(stoke_loader_host_bytes(l), g.total_bytes);
  stoke_loader_destroy(l);
  c.shuffle = STOKE_SHUFFLE_UNIFORM;
  TU_OK(stoke_host_ledger_compute(&c, &gu));
  TU_CHECK(g.order_bytes >= gu.order_bytes + 3 * N * sizeof(size_t),
           "the blocks are not counted: %llu against %llu",
           (unsigned long long)g.order_bytes,
           (unsigned long long)gu.order_bytes);
  c.shuffle = 3;
  l = NULL;
  TU_RC(stoke_loader_create(&c, &l), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "shuffle is 3");
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static int setup(void **state) {
  (void)state;
  tmp_root(root, "block");
  small_dataset(root, folder, tarp, packp, sizeof folder);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  tmp_root_remove(root);
  return 0;
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_once_and_deterministic),
      cmocka_unit_test(test_windows_are_whole_blocks),
      cmocka_unit_test(test_partial_last_block_and_window),
      cmocka_unit_test(test_world),
      cmocka_unit_test(test_resume),
      cmocka_unit_test(test_read_ahead),
      cmocka_unit_test(test_ledger),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
