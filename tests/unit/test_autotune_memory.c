/* test_autotune_memory.c — "the least memory": when the autotuner's
** prefetch goes down, the slots it leaves idle give their pages back to the
** OS, so the resident set falls with it (mincore says which pages are
** resident: nothing here is timed), and a slot used again later fills
** correctly.  White box: stoke__autotuner_force sets W and K (the controller
** decides them from timing, which a test must not depend on). */
#define _DEFAULT_SOURCE /* mincore */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sys/mman.h>
#include <unistd.h>

#include "test_util.h"
#include "pipeline/pipeline.h"
#include "model/autotune_controller.h"

#define B 8
/* A sample of 64 x 1024 f32: 256 KiB, 2 MiB a slot. */
#define ROWS 64
#define COLS 1024

/* Resident pages of the whole pages inside [p, p + n). */
static size_t resident_pages(const void *p, size_t n, size_t *pages) {
  size_t ps = (size_t)sysconf(_SC_PAGESIZE);
  uintptr_t lo = ((uintptr_t)p + ps - 1) & ~(uintptr_t)(ps - 1);
  uintptr_t hi = ((uintptr_t)p + n) & ~(uintptr_t)(ps - 1);
  *pages = hi > lo ? (hi - lo) / ps : 0;
  if (!*pages) return 0;
  unsigned char *v = calloc(*pages, 1);
  assert_non_null(v);
  assert_int_equal(mincore((void *)lo, hi - lo, v), 0);
  size_t r = 0;
  for (size_t i = 0; i < *pages; i++) r += v[i] & 1;
  free(v);
  return r;
}

static stoke_source *big_source(void) {
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = STOKE_SYNTH_SLEEP;
  sc.cost_ns = 20000;
  sc.n_samples = 96;
  sc.ndim = 2;
  sc.shape[0] = ROWS;
  sc.shape[1] = COLS;
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_synthetic(&sc, &src));
  return src;
}

/* The rest of an epoch; returns the samples seen. */
static size_t drain_epoch(stoke_loader *l) {
  size_t n = 0;
  stoke_batch *b;
  int rc;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    n += stoke_batch_size(b);
    stoke_batch_release(b);
  }
  assert_int_equal(rc, STOKE_END);
  return n;
}

/* Waits (on the loader's state, not on a clock's promise) until `want`
** slots hold a finished batch: the queue is as deep as the prefetch lets
** it be, whatever the machine's speed (TSan's included). */
static void wait_ready(stoke_loader *l, size_t want) {
  for (;;) {
    size_t ready = 0;
    pthread_mutex_lock(&l->mu);
    for (size_t i = 0; i < l->n_slots; i++)
      ready += l->slots[i].state == STOKE__SLOT_READY;
    pthread_mutex_unlock(&l->mu);
    if (ready >= want) return;
    tu_sleep_ns(1000000);
  }
}

static void idle_slots_give_their_pages_back(void **state) {
  (void)state;
  stoke_source *src = big_source();
  stoke_config c;
  stoke_config_init(&c);
  c.source = src;
  c.batch_size = B;
  c.n_workers = 4;
  c.autotune = 1;
  c.autotune_max_prefetch = 6;
  /* Nothing runs between epochs, so the slots can be looked at after one
  ** (under mu all the same). */
  c.prefetch_next_epoch = 0;
  stoke_loader *l = tu_loader(&c);
  size_t bytes = stoke__slot_field_bytes(l, 0);
  assert_true(bytes >= (size_t)B * ROWS * COLS * 4);
  assert_int_equal(l->n_slots, 7); /* the deepest prefetch + the consumer's */
  stoke__autotuner_force(l, 4, 6);
  /* Hold one batch until the 6 the prefetch allows are ready: every slot
  ** is then filled. */
  stoke_batch *first;
  TU_OK(stoke_loader_next(l, &first));
  wait_ready(l, 6);
  size_t n = stoke_batch_size(first);
  stoke_batch_release(first);
  assert_int_equal(n + drain_epoch(l), 96);
  size_t touched = 0, pages = 0;
  for (size_t i = 0; i < l->n_slots; i++)
    touched += resident_pages(l->slots[i].data[0], bytes, &pages) > pages / 2;
  TU_CHECK(touched == l->n_slots, "%zu of %zu slots filled at prefetch 6",
           touched, l->n_slots);

  stoke__autotuner_force(l, 4, 1);
  assert_int_equal(drain_epoch(l), 96);
  /* At prefetch 1 at most 1 + consumer_slots slots are in use at once: the
  ** others are released and stay so, and the slots' resident set is about
  ** two slots' (an allocator may touch the first page of a slot it hands
  ** out: ASan's malloc fill does). */
  size_t released = 0, resident = 0, all = 0;
  for (size_t i = 0; i < l->n_slots; i++) {
    stoke_batch *b = &l->slots[i];
    size_t r = resident_pages(b->data[0], bytes, &pages);
    resident += r;
    all += pages;
    pthread_mutex_lock(&l->mu);
    bool was_released = b->pages_released;
    pthread_mutex_unlock(&l->mu);
    if (was_released) {
      released++;
      TU_CHECK(r <= 1, "slot %zu released, %zu of %zu pages resident", i, r,
               pages);
    }
  }
  TU_CHECK(released >= l->n_slots - 2, "%zu of %zu slots released",
           released, l->n_slots);
  TU_CHECK(resident <= 2 * pages + l->n_slots,
           "%zu of %zu slot pages resident at prefetch 1 (%zu a slot)",
           resident, all, pages);
  stoke_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  TU_OK(stoke_loader_stats(l, &st));
  /* Of the slots filled at prefetch 6, at most 2 stay in use. */
  TU_CHECK(st.autotune_released_bytes >=
                   (uint64_t)(touched - 2) * pages *
                       (uint64_t)sysconf(_SC_PAGESIZE) &&
               st.autotune_released_bytes <= (uint64_t)l->n_slots * bytes,
           "autotune_released_bytes %llu (a slot: %zu pages)",
           (unsigned long long)st.autotune_released_bytes, pages);

  /* Deeper again: the released slots fill again, with the right samples. */
  stoke__autotuner_force(l, 4, 6);
  size_t seen[96] = {0};
  stoke_batch *b;
  int rc;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    for (size_t j = 0; j < stoke_batch_size(b); j++)
      seen[stoke_batch_indices(b)[j]]++;
    stoke_batch_release(b);
  }
  assert_int_equal(rc, STOKE_END);
  for (size_t i = 0; i < 96; i++) TU_CHECK(seen[i] == 1, "sample %zu x%zu", i, seen[i]);
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(idle_slots_give_their_pages_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
