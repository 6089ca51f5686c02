/* syscalls.h — the table of system calls that every file access and every
** thread start of the library goes through (src/os/syscalls.c), so that
** tests can fail the n-th call with a chosen errno, return short reads or
** EINTR, or refuse to start a thread.
**
** Where the table comes from: no global.  Each handle that touches files
** or starts threads keeps a `const stoke__sys *` given to it when it was
** made, and passes it down to what it creates:
**
**   stoke__source_create_images(path, cfg, sys, &src)   source/image.h
**     -> stoke__blobset_open_{folder,tar,packed}(..., sys, ...)
**        (the blobset keeps it for every read by the loader's workers)
**   stoke__pack(src, prefix, cfg, sys, &res)              source/image.h
**     -> stoke__pack_writer_create(..., sys, ...), its producer threads
**   stoke__loader_create(cfg, sys, &l)                    pipeline.h
**     -> its worker threads
**
** The public entry points (stoke_source_create_images, stoke_pack,
** stoke_loader_create) pass NULL, which every receiver resolves once, at
** creation, to stoke__sys_real(): a constant table of the real calls.  So
** a test injects faults into exactly the handle it made, other tests in the
** same process (and other loaders) are untouched, and the library keeps no
** mutable global state.
**
** Conventions: each entry behaves as the call it names (returns -1, NULL or
** MAP_FAILED with errno set), with the table's `user` pointer first.  The
** callers own the retry policy: EINTR from open, pread and pwrite is
** retried, and short reads and writes continue where they stopped
** (stoke__sys_pread_full); anything else is an error naming the file (and, for
** reads, the offset).  Read-only descriptors' close errors are ignored:
** nothing was written that could be lost.
**
** Not routed: glob(3) in path expansion (its GLOB_ALTDIRFUNC hooks take no
** user pointer, so a per-handle table cannot reach them), and /proc reads
** for scheduler statistics (not data). */
#ifndef STOKE_OS_SYSCALLS_H
#define STOKE_OS_SYSCALLS_H

#include "os/os.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

struct stoke__sys {
  void *user; /* first argument of every entry */
  int (*open)(void *user, const char *path, int flags, unsigned mode);
  int (*close)(void *user, int fd);
  ssize_t (*pread)(void *user, int fd, void *buf, size_t n, uint64_t off);
  ssize_t (*pwrite)(void *user, int fd, const void *buf, size_t n,
                    uint64_t off);
  int (*fstat)(void *user, int fd, struct stat *st);
  int (*stat)(void *user, const char *path, struct stat *st);
  void *(*mmap)(void *user, size_t len, int prot, int flags, int fd,
                uint64_t off);
  int (*munmap)(void *user, void *p, size_t len);
  int (*fsync)(void *user, int fd);
  int (*rename)(void *user, const char *from, const char *to);
  int (*unlink)(void *user, const char *path);
  DIR *(*opendir)(void *user, const char *path);
  struct dirent *(*readdir)(void *user, DIR *d);
  int (*closedir)(void *user, DIR *d);
  /* pthread_create's contract: 0 or an error number (not errno). */
  int (*thread_create)(void *user, pthread_t *t, const pthread_attr_t *attr,
                       void *(*fn)(void *), void *arg);
  /* Read-ahead advice (the block order) and the packed cache (since 0.3).
  ** madvise and posix_fadvise as their calls (posix_fadvise returns an
  ** error number, not -1); the cache's folder and disk budget. */
  int (*madvise)(void *user, void *p, size_t len, int advice);
  int (*fadvise)(void *user, int fd, uint64_t off, uint64_t len, int advice);
  int (*mkdir)(void *user, const char *path, unsigned mode);
  int (*fstatvfs)(void *user, int fd, struct statvfs *st);
};

/* The real calls; a constant table (static storage). */
const stoke__sys *stoke__sys_real(void);
/* sys, or the real calls for NULL: what a handle keeps at creation. */
static inline const stoke__sys *stoke__sys_or_real(const stoke__sys *sys) {
  return sys ? sys : stoke__sys_real();
}

/* open(2), retried on EINTR; -1 with errno. */
int stoke__sys_open(const stoke__sys *s, const char *path, int flags,
                    unsigned mode);
/* pread exactly n bytes at off, retrying on EINTR and short reads; 0, or
** -1 with errno set (errno 0: the file ended before n bytes). */
int stoke__sys_pread_full(const stoke__sys *s, int fd, void *buf, size_t n,
                          uint64_t off);
/* pwrite all n bytes at off, retrying on EINTR and short writes; 0 or -1
** with errno (ENOSPC when the device takes nothing). */
int stoke__sys_pwrite_full(const stoke__sys *s, int fd, const void *buf,
                           size_t n, uint64_t off);

#endif /* STOKE_OS_SYSCALLS_H */
