/* memory.c — giving mapped file pages back. */
#define _DEFAULT_SOURCE /* madvise, MADV_DONTNEED */
#include "internal.h"

#include <sys/mman.h>
#include <unistd.h>

/* Unmap the whole pages inside [p, p + n) of a read-only file mapping from
** this process.  The page cache keeps them, so a later read refaults
** cheaply; meanwhile they no longer count in the resident set, which keeps
** a loader reading packed shards within its memory budget however large the
** shards are.  Pages shared with a neighbouring sample stay.  Linux's
** posix_madvise(POSIX_MADV_DONTNEED) does nothing, hence madvise. */
void stoke__drop_pages(const void *p, size_t n) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1);
  uintptr_t hi = ((uintptr_t)p + n) & ~(page - 1);
  if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}
