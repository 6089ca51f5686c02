/* test_error_order.c — in order, a failing sample is reported at its own
** batch: the batches before it whose samples were all claimed are handed
** out first (as torch's DataLoader does).  Synchronised on the loader's
** state (its message), never on time. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

static void test_batches_before_the_error_come_first(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(12);
  cb->stuck_index = 0;  /* batch 0 waits for us */
  cb->fail_index = 4;   /* batch 2 fails meanwhile */
  stoke_source *src = tu_cb_source(cb);
  stoke_config cfg = tu_config(src, 4, 4, 2);
  cfg.max_chunk = 1;
  cfg.prefetch_next_epoch = 0;
  stoke_loader *l = tu_loader(&cfg);
  stoke_source_destroy(src);
  stoke_batch *b;
  /* Start the epoch and wait until sample 4 has failed. */
  TU_RC_L(l, stoke_loader_next_timed(l, &b, 0), STOKE_AGAIN);
  while (!strstr(stoke_errmsg(l), "failed")) tu_sleep_ns(1000000);
  /* Batch 0 is still filling, every sample claimed: it is awaited, not
  ** dropped for the error. */
  TU_RC_L(l, stoke_loader_next_timed(l, &b, 20000000), STOKE_AGAIN);
  atomic_store(&cb->unstick, 1);
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  TU_CHECK(stoke_batch_number(b) == 0, "batch %zu", stoke_batch_number(b));
  stoke_batch_release(b);
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  TU_CHECK(stoke_batch_number(b) == 1, "batch %zu", stoke_batch_number(b));
  stoke_batch_release(b);
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_ESAMPLE);
  TU_CONTAINS(stoke_errmsg(l), "sample 4");
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_EBADSTATE);
  stoke_loader_destroy(l);
  tu_cb_free(cb);
}

/* Out of order, or for a batch whose samples were not all claimed, the
** error comes at once. */
static void test_error_at_once_otherwise(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(12);
  cb->stuck_index = 0;
  cb->fail_index = 4;
  stoke_source *src = tu_cb_source(cb);
  stoke_config cfg = tu_config(src, 4, 4, 2);
  cfg.max_chunk = 1;
  cfg.in_order = 0;
  stoke_loader *l = tu_loader(&cfg);
  stoke_source_destroy(src);
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next_timed(l, &b, 0), STOKE_AGAIN);
  while (!strstr(stoke_errmsg(l), "failed")) tu_sleep_ns(1000000);
  int rc;
  while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
    TU_CHECK(stoke_batch_number(b) != 0, "the stuck batch came");
    stoke_batch_release(b);
  }
  TU_RC_L(l, rc, STOKE_ESAMPLE);
  atomic_store(&cb->unstick, 1);
  stoke_loader_destroy(l);
  tu_cb_free(cb);
}

int main(void) {
  tu_watchdog(120);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batches_before_the_error_come_first),
      cmocka_unit_test(test_error_at_once_otherwise),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
