/* rng.c — counter-based random streams.
**
** A stream is a key (from seed and two coordinates, e.g. epoch and sample
** index) and a counter.  Output n is mix64(key ^ mix64(n)): a pure function
** of (key, n), so no state is shared between samples or threads and any
** sample's stream can be recomputed anywhere, which is what makes batches
** identical whatever the worker count.  mix64 is SplitMix64's finalizer, a
** bijection with good avalanche (src/core/hash.c). */
#include "sampler/sampler.h"

#include <math.h>

#define GOLDEN 0x9E3779B97F4A7C15ULL

void stoke_rng_init(stoke_rng *rng, uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t k = stoke__mix64(seed + GOLDEN);
  k = stoke__mix64(k ^ (a + 2 * GOLDEN));
  k = stoke__mix64(k ^ (b + 3 * GOLDEN));
  rng->key = k;
  rng->counter = 0;
}

/* Example echoing's copies: distinct keys (mix64 is a bijection, and the
** salt keeps j = 1, 2, ... away from the keys substitutes use). */
#define COPY_SALT 0xEC40C0B1E5EC40C0ULL

void stoke__copy_rng(const stoke_rng *base, unsigned j, stoke_rng *out) {
  *out = *base;
  if (j) out->key = stoke__mix64(base->key ^ (COPY_SALT + j * GOLDEN));
}

uint64_t stoke_rng_u64(stoke_rng *rng) {
  uint64_t n = rng->counter++;
  return stoke__mix64(rng->key ^ stoke__mix64(n * GOLDEN + 1));
}

double stoke_rng_uniform(stoke_rng *rng) {
  return (double)(stoke_rng_u64(rng) >> 11) * 0x1.0p-53;
}

uint64_t stoke_rng_below(stoke_rng *rng, uint64_t n) {
  if (n <= 1) return 0;
  /* Rejection from the largest multiple of n: unbiased. */
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = stoke_rng_u64(rng);
  } while (x >= limit);
  return x % n;
}

double stoke_rng_normal(stoke_rng *rng) {
  /* Box-Muller; 1 - u keeps the log's argument in (0, 1]. */
  double u1 = 1.0 - stoke_rng_uniform(rng);
  double u2 = stoke_rng_uniform(rng);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}
