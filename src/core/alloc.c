/* alloc.c — every allocation of the library goes through here, with the
** loader's allocator hooks (or malloc/free), so that tests can fail the
** n-th allocation and callers can account for memory. */
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

void *stoke__alloc(const stoke_allocator *a, size_t n) {
  if (n == 0) n = 1;
  if (a && a->alloc) return a->alloc(a->user, n);
  return malloc(n);
}

void *stoke__calloc(const stoke_allocator *a, size_t count, size_t size) {
  size_t n;
  if (!stoke__mul_ok(count, size, &n)) return NULL;
  void *p = stoke__alloc(a, n);
  if (p) memset(p, 0, n);
  return p;
}

void stoke__free(const stoke_allocator *a, void *p) {
  if (!p) return;
  if (a && a->free) {
    a->free(a->user, p);
    return;
  }
  free(p);
}

/* The hooks give no alignment beyond malloc's, so over-allocate by one
** cache line and keep the original pointer just below the aligned one. */
void *stoke__alloc_aligned(const stoke_allocator *a, size_t n) {
  size_t total = n + STOKE__CACHELINE + sizeof(void *);
  if (total < n) return NULL;
  char *raw = stoke__alloc(a, total);
  if (!raw) return NULL;
  uintptr_t base = (uintptr_t)(raw + sizeof(void *));
  uintptr_t aligned = (base + STOKE__CACHELINE - 1) &
                      ~(uintptr_t)(STOKE__CACHELINE - 1);
  ((void **)aligned)[-1] = raw;
  return (void *)aligned;
}

void stoke__free_aligned(const stoke_allocator *a, void *p) {
  if (!p) return;
  stoke__free(a, ((void **)p)[-1]);
}

char *stoke__strdup(const stoke_allocator *a, const char *s) {
  size_t n = strlen(s) + 1;
  char *d = stoke__alloc(a, n);
  if (d) memcpy(d, s, n);
  return d;
}

bool stoke__mul_ok(size_t a, size_t b, size_t *out) {
  if (b != 0 && a > SIZE_MAX / b) return false;
  *out = a * b;
  return true;
}

bool stoke__grow(const stoke_allocator *a, void **p, size_t *cap, size_t n,
                 size_t size, size_t max) {
  if (n < *cap) return true;
  if (max && *cap >= max) return false;
  size_t want = *cap ? 2 * *cap : 16;
  if (max && want > max) want = max;
  void *q = stoke__calloc(a, want, size);
  if (!q) return false;
  if (n) memcpy(q, *p, n * size);
  stoke__free(a, *p);
  *p = q;
  *cap = want;
  return true;
}
