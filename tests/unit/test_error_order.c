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

/* A second failure, in an earlier batch, after the first: that batch never
** completes, so the error comes at it (this hung: the consumer waited for
** the failed batch 0 to complete). */
static tu_cb *two_cb;

static int two_fill(void *user, stoke_sample *s) {
  size_t i = stoke_sample_index(s);
  if (i == 4) return stoke_sample_fail(s, "first failure (sample 4)");
  if (i == 0) {
    while (!atomic_load(&two_cb->unstick)) tu_sleep_ns(1000000);
    return stoke_sample_fail(s, "second failure (sample 0)");
  }
  return tu_cb_fill(user, s);
}

static void test_a_later_failure_in_an_earlier_batch(void **state) {
  (void)state;
  two_cb = tu_cb_new(12);
  stoke_field_desc f[TU_N_FIELDS];
  tu_cb_fields(f);
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_callback(12, TU_N_FIELDS, f, two_fill, two_cb,
                                     &src));
  stoke_config cfg = tu_config(src, 4, 4, 2);
  cfg.max_chunk = 1;
  cfg.prefetch_next_epoch = 0;
  stoke_loader *l = tu_loader(&cfg);
  stoke_source_destroy(src);
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next_timed(l, &b, 0), STOKE_AGAIN);
  while (!strstr(stoke_errmsg(l), "failed")) tu_sleep_ns(1000000);
  atomic_store(&two_cb->unstick, 1);
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_ESAMPLE);
  TU_CONTAINS(stoke_errmsg(l), "sample 4");
  stoke_loader_destroy(l);
  tu_cb_free(two_cb);
}

int main(void) {
  tu_watchdog(120);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batches_before_the_error_come_first),
      cmocka_unit_test(test_error_at_once_otherwise),
      cmocka_unit_test(test_a_later_failure_in_an_earlier_batch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
