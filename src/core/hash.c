/* hash.c — 64-bit mixing and hashing, below every layer that needs it:
** dataset identities, cache keys and the random streams
** (src/sampler/rng.c).  mix64 is SplitMix64's finalizer, a bijection with
** good avalanche. */
#include "core/core.h"

#include <string.h>

/* 2^64 / phi: keeps small inputs (0, 1, 2 ...) far apart before mixing. */
#define GOLDEN 0x9E3779B97F4A7C15ULL

uint64_t stoke__mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

uint64_t stoke__hash_u64(uint64_t h, uint64_t v) {
  return stoke__mix64(h ^ stoke__mix64(v + GOLDEN));
}

uint64_t stoke__hash_str(uint64_t h, const char *s) {
  size_t n = strlen(s);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t w = 0;
    memcpy(&w, s + i, n - i < 8 ? n - i : 8);
    h = stoke__hash_u64(h, w);
  }
  return stoke__hash_u64(h, n);
}
