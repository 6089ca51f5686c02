/* hash.c — 64-bit mixing and hashing, below every layer that needs it:
** dataset identities, cache keys and the random streams
** (src/sampler/rng.c).  mix64 itself is inline, in core.h. */
#include "core/core.h"

#include <string.h>

/* 2^64 / phi: keeps small inputs (0, 1, 2 ...) far apart before mixing. */
#define GOLDEN 0x9E3779B97F4A7C15ULL

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
