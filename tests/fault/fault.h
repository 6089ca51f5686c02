/* fault.h — fault injection shared by the tests (header-only): an allocator
** that fails the n-th allocation, and a system-call table (os/syscalls.h)
** that fails the n-th file call or thread start with a chosen errno,
** returns short reads or EINTR, and counts what is open, so that a test
** can check that nothing leaks.
**
** The including file defines _GNU_SOURCE (or _POSIX_C_SOURCE 200809L)
** before its first include.  Both fakes are thread-safe: the loader's
** workers call them concurrently.
**
**   failing f = {.fail_at = n};            fail allocation n (1-based)
**   stoke_allocator a = {f_alloc, f_free, &f};
**   ... f.faults (injected), f.live (blocks not freed) ...
**
**   fault_sys fs;
**   fault_sys_init(&fs, FS_READS, n, EIO, FAULT_ONCE);
**   ... give &fs.table to stoke__source_create_images / stoke__pack /
**   stoke__loader_create; fs.faults, fs.fatal, fs.fds, fs.maps ...
*/
#ifndef STOKE_TEST_FAULT_H
#define STOKE_TEST_FAULT_H

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "os/syscalls.h"

/* ---- allocation ---------------------------------------------------------- */

/* Fails allocation number fail_at (1-based; 0 = never), and with
** `persistent` every one after it too; counts what is live. */
typedef struct failing {
  atomic_long n;      /* allocations asked for so far */
  long fail_at;
  atomic_long live;   /* blocks allocated and not freed */
  atomic_long faults; /* allocations refused */
  bool persistent;
} failing;

static inline void *f_alloc(void *u, size_t n) {
  failing *f = u;
  long k = atomic_fetch_add(&f->n, 1) + 1;
  if (f->fail_at && (k == f->fail_at || (f->persistent && k > f->fail_at))) {
    atomic_fetch_add(&f->faults, 1);
    return NULL;
  }
  void *p = malloc(n);
  if (p) atomic_fetch_add(&f->live, 1);
  return p;
}

static inline void f_free(void *u, void *p) {
  atomic_fetch_sub(&((failing *)u)->live, 1);
  free(p);
}

/* ---- system calls -------------------------------------------------------- */

/* The calls of the table, as a mask of which ones count toward n. */
enum {
  FS_OPEN = 1 << 0, FS_CLOSE = 1 << 1, FS_PREAD = 1 << 2,
  FS_PWRITE = 1 << 3, FS_FSTAT = 1 << 4, FS_STAT = 1 << 5,
  FS_MMAP = 1 << 6, FS_MUNMAP = 1 << 7, FS_FSYNC = 1 << 8,
  FS_RENAME = 1 << 9, FS_UNLINK = 1 << 10, FS_OPENDIR = 1 << 11,
  FS_READDIR = 1 << 12, FS_CLOSEDIR = 1 << 13, FS_THREAD = 1 << 14,
  FS_MADVISE = 1 << 15, FS_FADVISE = 1 << 16, FS_MKDIR = 1 << 17,
  FS_STATVFS = 1 << 18,
  /* Calls whose failure the library may ignore by design: closing what
  ** was only read, unmapping, unlinking a leftover, read-ahead advice. */
  FS_TOLERATED = FS_CLOSE | FS_MUNMAP | FS_CLOSEDIR | FS_UNLINK |
                 FS_MADVISE | FS_FADVISE,
  FS_ALL_IO = (FS_THREAD << 1) - 1 - FS_THREAD
};

/* What a fault does instead of the call. */
enum {
  FAULT_SHORT = -1, /* err: a read or write of fewer bytes (at least 1) */
  FAULT_BLOCK = -2  /* err: the call hangs until fault_sys_unblock, then
                       runs (a stuck network filesystem) */
};

/* How many counted calls fail: the n-th only, or every one from it on
** (EINTR: a burst of FAULT_BURST, since a signal storm ends). */
enum { FAULT_ONCE = 0, FAULT_FROM_THEN_ON = 1 };
#define FAULT_BURST 3

typedef struct fault_sys {
  stoke__sys table;  /* hand &table to the handle; user points here */
  const stoke__sys *real;
  unsigned mask;     /* FS_* calls that count */
  long fail_at;      /* 1-based among counted calls; 0 = never */
  int mode;          /* FAULT_ONCE or FAULT_FROM_THEN_ON */
  int err;           /* errno to set, or FAULT_SHORT */
  unsigned tolerated; /* calls whose failure may go unreported (default
                         FS_TOLERATED); faults elsewhere count in fatal */
  atomic_long calls;   /* counted calls so far */
  atomic_long faults;  /* injected */
  atomic_long fatal;   /* injected into calls outside FS_TOLERATED */
  atomic_int first_kind; /* FS_* of the first fault, 0 before */
  atomic_long fds, maps, dirs; /* open now through this table */
  atomic_long madvised, fadvised; /* read-ahead advice given */
  pthread_mutex_t mu;  /* FAULT_BLOCK: guards blocked, unblocked */
  pthread_cond_t cv;
  int blocked;         /* calls hanging now */
  bool unblocked;
} fault_sys;

/* Should this call of kind `kind` fail?  Counts it when in the mask. */
static inline bool fs_hit(fault_sys *fs, unsigned kind) {
  if (!(fs->mask & kind) || fs->fail_at == 0) return false;
  long k = atomic_fetch_add(&fs->calls, 1) + 1;
  bool hit = k == fs->fail_at;
  if (fs->mode == FAULT_FROM_THEN_ON && k > fs->fail_at)
    hit = fs->err == EINTR ? k < fs->fail_at + FAULT_BURST : true;
  if (!hit) return false;
  atomic_fetch_add(&fs->faults, 1);
  if (!(kind & fs->tolerated)) atomic_fetch_add(&fs->fatal, 1);
  int zero = 0;
  atomic_compare_exchange_strong(&fs->first_kind, &zero, (int)kind);
  return true;
}

/* The injected errno (a short read or write is not an error; a blocked
** call waits, then runs). */
static inline bool fs_fail(fault_sys *fs) {
  if (fs->err == FAULT_SHORT) return false;
  if (fs->err == FAULT_BLOCK) {
    pthread_mutex_lock(&fs->mu);
    fs->blocked++;
    pthread_cond_broadcast(&fs->cv);
    while (!fs->unblocked) pthread_cond_wait(&fs->cv, &fs->mu);
    fs->blocked--;
    pthread_mutex_unlock(&fs->mu);
    return false;
  }
  errno = fs->err;
  return true;
}

/* FAULT_BLOCK: wait until a call hangs; let every hanging call go. */
static inline void fault_sys_wait_blocked(fault_sys *fs) {
  pthread_mutex_lock(&fs->mu);
  while (fs->blocked == 0) pthread_cond_wait(&fs->cv, &fs->mu);
  pthread_mutex_unlock(&fs->mu);
}
static inline void fault_sys_unblock(fault_sys *fs) {
  pthread_mutex_lock(&fs->mu);
  fs->unblocked = true;
  pthread_cond_broadcast(&fs->cv);
  pthread_mutex_unlock(&fs->mu);
}

static int fs_open(void *u, const char *path, int flags, unsigned mode) {
  fault_sys *fs = u;
  if (fs_hit(fs, FS_OPEN) && fs_fail(fs)) return -1;
  int fd = fs->real->open(NULL, path, flags, mode);
  if (fd >= 0) atomic_fetch_add(&fs->fds, 1);
  return fd;
}
static int fs_close(void *u, int fd) {
  fault_sys *fs = u;
  bool hit = fs_hit(fs, FS_CLOSE);
  /* Linux closes the descriptor even when close reports an error. */
  int rc = fs->real->close(NULL, fd);
  if (rc == 0) atomic_fetch_sub(&fs->fds, 1);
  if (hit && fs_fail(fs)) return -1;
  return rc;
}
static ssize_t fs_pread(void *u, int fd, void *buf, size_t n, uint64_t off) {
  fault_sys *fs = u;
  if (fs_hit(fs, FS_PREAD)) {
    if (fs_fail(fs)) return -1;
    if (n > 1) n /= 2;
  }
  return fs->real->pread(NULL, fd, buf, n, off);
}
static ssize_t fs_pwrite(void *u, int fd, const void *buf, size_t n,
                         uint64_t off) {
  fault_sys *fs = u;
  if (fs_hit(fs, FS_PWRITE)) {
    if (fs_fail(fs)) return -1;
    if (n > 1) n /= 2;
  }
  return fs->real->pwrite(NULL, fd, buf, n, off);
}
static int fs_fstat(void *u, int fd, struct stat *st) {
  fault_sys *fs = u;
  if (fs_hit(fs, FS_FSTAT) && fs_fail(fs)) return -1;
  return fs->real->fstat(NULL, fd, st);
}
static int fs_stat(void *u, const char *path, struct stat *st) {
  fault_sys *fs = u;
  if (fs_hit(fs, FS_STAT) && fs_fail(fs)) return -1;
  return fs->real->stat(NULL, path, st);
}
static void *fs_mmap(void *u, size_t len, int prot, int flags, int fd,
                     uint64_t off) {
  fault_sys *fs = u;
  if (fs_hit(fs, FS_MMAP) && fs_fail(fs)) return MAP_FAILED;
  void *p = fs->real->mmap(NULL, len, prot, flags, fd, off);
  if (p != MAP_FAILED) atomic_fetch_add(&fs->maps, 1);
  return p;
}
static int fs_munmap(void *u, void *p, size_t len) {
  fault_sys *fs = u;
  bool hit = fs_hit(fs, FS_MUNMAP);
  int rc = fs->real->munmap(NULL, p, len);
  if (rc == 0) atomic_fetch_sub(&fs->maps, 1);
  if (hit && fs_fail(fs)) return -1;
  return rc;
}
static int fs_fsync(void *u, int fd) {
  fault_sys *fs = u;
  if (fs_hit(fs, FS_FSYNC) && fs_fail(fs)) return -1;
  return fs->real->fsync(NULL, fd);
}
static int fs_rename(void *u, const char *from, const char *to) {
  fault_sys *fs = u;
  if (fs_hit(fs, FS_RENAME) && fs_fail(fs)) return -1;
  return fs->real->rename(NULL, from, to);
}
static int fs_unlink(void *u, const char *path) {
  fault_sys *fs = u;
  if (fs_hit(fs, FS_UNLINK) && fs_fail(fs)) return -1;
  return fs->real->unlink(NULL, path);
}
static DIR *fs_opendir(void *u, const char *path) {
  fault_sys *fs = u;
  if (fs_hit(fs, FS_OPENDIR) && fs_fail(fs)) return NULL;
  DIR *d = fs->real->opendir(NULL, path);
  if (d) atomic_fetch_add(&fs->dirs, 1);
  return d;
}
static struct dirent *fs_readdir(void *u, DIR *d) {
  fault_sys *fs = u;
  if (fs_hit(fs, FS_READDIR) && fs_fail(fs)) return NULL;
  return fs->real->readdir(NULL, d);
}
static int fs_closedir(void *u, DIR *d) {
  fault_sys *fs = u;
  bool hit = fs_hit(fs, FS_CLOSEDIR);
  int rc = fs->real->closedir(NULL, d);
  if (rc == 0) atomic_fetch_sub(&fs->dirs, 1);
  if (hit && fs_fail(fs)) return -1;
  return rc;
}
static int fs_thread_create(void *u, pthread_t *t, const pthread_attr_t *attr,
                            void *(*fn)(void *), void *arg) {
  fault_sys *fs = u;
  if (fs_hit(fs, FS_THREAD))
    return fs->err == FAULT_SHORT ? EAGAIN : fs->err;
  return fs->real->thread_create(NULL, t, attr, fn, arg);
}

static int fs_madvise(void *u, void *p, size_t len, int advice) {
  fault_sys *fs = u;
  atomic_fetch_add(&fs->madvised, 1);
  if (fs_hit(fs, FS_MADVISE) && fs_fail(fs)) return -1;
  return fs->real->madvise(NULL, p, len, advice);
}
static int fs_fadvise(void *u, int fd, uint64_t off, uint64_t len,
                      int advice) {
  fault_sys *fs = u;
  atomic_fetch_add(&fs->fadvised, 1);
  if (fs_hit(fs, FS_FADVISE) && fs_fail(fs)) return errno;
  return fs->real->fadvise(NULL, fd, off, len, advice);
}
static int fs_mkdir(void *u, const char *path, unsigned mode) {
  fault_sys *fs = u;
  if (fs_hit(fs, FS_MKDIR) && fs_fail(fs)) return -1;
  return fs->real->mkdir(NULL, path, mode);
}
static int fs_fstatvfs(void *u, int fd, struct statvfs *st) {
  fault_sys *fs = u;
  if (fs_hit(fs, FS_STATVFS) && fs_fail(fs)) return -1;
  return fs->real->fstatvfs(NULL, fd, st);
}

/* Fail the fail_at-th call among `mask` (0: none) with err (an errno or
** FAULT_SHORT), once or from then on. */
static inline void fault_sys_init(fault_sys *fs, unsigned mask, long fail_at,
                                  int err, int mode) {
  memset(fs, 0, sizeof *fs); /* (a fault_sys is never re-initialised) */
  fs->real = stoke__sys_real();
  fs->mask = mask;
  fs->fail_at = fail_at;
  fs->err = err;
  fs->mode = mode;
  fs->tolerated = FS_TOLERATED;
  pthread_mutex_init(&fs->mu, NULL);
  pthread_cond_init(&fs->cv, NULL);
  fs->table = (stoke__sys){
      fs,        fs_open,    fs_close,   fs_pread,   fs_pwrite,
      fs_fstat,  fs_stat,    fs_mmap,    fs_munmap,  fs_fsync,
      fs_rename, fs_unlink,  fs_opendir, fs_readdir, fs_closedir,
      fs_thread_create, fs_madvise, fs_fadvise, fs_mkdir, fs_fstatvfs,
  };
}

/* Nothing opened through the table is still open. */
static inline bool fault_sys_clean(fault_sys *fs) {
  return atomic_load(&fs->fds) == 0 && atomic_load(&fs->maps) == 0 &&
         atomic_load(&fs->dirs) == 0;
}

#endif /* STOKE_TEST_FAULT_H */
