/* test_synthetic_rare.c — the RARE cost distribution (rare, very long
** samples: the truth grid's variance points) and mixed samples (a cost
** then a wait): the realised costs keep the mean, the share of long ones
** is rare_frac, each is rare_factor x the others; bad settings refused. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "stoke.h"
#include "test_util.h"

static void test_rare(void **state) {
  (void)state;
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  assert_true(sc.rare_frac == 0.02 && sc.rare_factor == 20);
  sc.kind = STOKE_SYNTH_SLEEP;
  sc.dist = STOKE_COST_RARE;
  sc.cost_ns = 1000000;
  sc.rare_frac = 0.05;
  sc.rare_factor = 10;
  sc.n_samples = 20000;
  stoke_source *src = NULL;
  assert_int_equal(stoke_source_create_synthetic(&sc, &src), 0);
  double sum = 0;
  size_t n_rare = 0;
  int64_t lo = INT64_MAX, hi = 0;
  for (size_t i = 0; i < sc.n_samples; i++) {
    int64_t c = stoke_source_synthetic_cost(src, 0, 1, i);
    sum += (double)c;
    if (c < lo) lo = c;
    if (c > hi) hi = c;
  }
  for (size_t i = 0; i < sc.n_samples; i++)
    n_rare += stoke_source_synthetic_cost(src, 0, 1, i) > 2 * lo;
  double mean = sum / (double)sc.n_samples;
  /* base = 1 ms / (0.95 + 0.5) = 0.69 ms, long ones 6.9 ms. */
  assert_true(hi >= 9 * lo && hi <= 11 * lo);
  double share = (double)n_rare / (double)sc.n_samples;
  assert_true(share > 0.04 && share < 0.06);
  assert_true(mean > 0.93e6 && mean < 1.07e6);
  stoke_source_destroy(src);
  sc.rare_frac = 0;
  assert_int_equal(stoke_source_create_synthetic(&sc, &src), STOKE_EINVAL);
  sc.rare_frac = 0.1;
  sc.rare_factor = 0.5;
  assert_int_equal(stoke_source_create_synthetic(&sc, &src), STOKE_EINVAL);
  sc.rare_factor = 10;
  sc.wait_ns = -1;
  assert_int_equal(stoke_source_create_synthetic(&sc, &src), STOKE_EINVAL);
  sc.wait_ns = 0;
  sc.kind = STOKE_SYNTH_TENSOR;
  sc.wait_ns = 1000;
  assert_int_equal(stoke_source_create_synthetic(&sc, &src), STOKE_EINVAL);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_rare)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
