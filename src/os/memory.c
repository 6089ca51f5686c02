/* memory.c — giving mapped file pages back; asking for huge pages. */
#define _DEFAULT_SOURCE /* madvise, MADV_DONTNEED */
#include "os/os.h"

#include <stdio.h>
#include <stdlib.h>
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

/* Ask for transparent huge pages on the 2 MiB-aligned part of [p, p + n).
** A batch buffer is written once per sample across hundreds of KiB (an f32
** 3x224x224 sample is 602 KB: 147 small pages, each a TLB miss and, on
** first touch, a fault) and read again by the consumer's copy to the
** device; with 2 MiB pages both cost a fraction.  Linux's default THP mode,
** "madvise", gives huge pages only to memory that asks.  Advice only: a
** kernel without THP, or one set to "never", ignores it. */
void stoke__advise_huge(void *p, size_t n) {
#ifdef MADV_HUGEPAGE
  const uintptr_t huge = (uintptr_t)2 << 20;
  uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1);
  uintptr_t hi = ((uintptr_t)p + n) & ~(huge - 1);
  if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
  (void)p;
  (void)n;
#endif
}

uint64_t stoke__release_pages(void *p, size_t n) {
  long ps = sysconf(_SC_PAGESIZE);
  uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096;
  uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1);
  uintptr_t hi = ((uintptr_t)p + n) & ~(page - 1);
  if (!p || hi <= lo) return 0;
  return madvise((void *)lo, hi - lo, MADV_DONTNEED) == 0 ? hi - lo : 0;
}

uint64_t stoke__memory_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES), ps = sysconf(_SC_PAGESIZE);
  uint64_t ram = pages > 0 && ps > 0 ? (uint64_t)pages * (uint64_t)ps : 0;
  /* A container on a large host: its limit is what it may have. */
  FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
  if (f) {
    char buf[64] = "";
    if (fgets(buf, sizeof buf, f)) {
      char *end;
      unsigned long long v = strtoull(buf, &end, 10);
      if (end != buf && v > 0 && (ram == 0 || v < ram)) ram = v;
    }
    fclose(f);
  }
  return ram;
}
