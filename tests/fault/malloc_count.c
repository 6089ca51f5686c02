/* malloc_count.c — an LD_PRELOAD shim that remembers the largest single
** request made to malloc, calloc, realloc and the aligned allocators by
** anything in the process (libjpeg-turbo included, whose allocations no
** stoke hook sees), for test_bomb.c.  It forwards to glibc's own entry
** points (__libc_malloc and friends), so it needs no dlsym and no lock.
** Not built under sanitizers, which interpose malloc themselves. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void __libc_free(void *p);

static atomic_size_t largest;

static void note(size_t n) {
  size_t cur = atomic_load_explicit(&largest, memory_order_relaxed);
  while (n > cur && !atomic_compare_exchange_weak(&largest, &cur, n)) {
  }
}

__attribute__((visibility("default"))) size_t
stoke_test_malloc_largest(void) {
  return atomic_load(&largest);
}
__attribute__((visibility("default"))) void stoke_test_malloc_reset(void) {
  atomic_store(&largest, 0);
}

__attribute__((visibility("default"))) void *malloc(size_t n) {
  note(n);
  return __libc_malloc(n);
}
__attribute__((visibility("default"))) void *calloc(size_t count,
                                                    size_t size) {
  size_t n;
  note(__builtin_mul_overflow(count, size, &n) ? (size_t)-1 : n);
  return __libc_calloc(count, size);
}
__attribute__((visibility("default"))) void *realloc(void *p, size_t n) {
  note(n);
  return __libc_realloc(p, n);
}
__attribute__((visibility("default"))) void free(void *p) { __libc_free(p); }
__attribute__((visibility("default"))) void *memalign(size_t align,
                                                      size_t n) {
  note(n);
  return __libc_memalign(align, n);
}
__attribute__((visibility("default"))) void *aligned_alloc(size_t align,
                                                           size_t n) {
  note(n);
  return __libc_memalign(align, n);
}
__attribute__((visibility("default"))) int
posix_memalign(void **out, size_t align, size_t n) {
  note(n);
  void *p = __libc_memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
