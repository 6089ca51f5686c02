/* fuzz.h — what the harnesses share (header-only).
**
** Each tests/fuzz/fuzz_<name>.c defines LLVMFuzzerTestOneInput and is built
** twice: with clang's libFuzzer (STOKE_BUILD_FUZZ, under ASan+UBSan) to
** search, and with regression_driver.c under plain CTest to replay the
** checked-in corpus/<name>/ (every crasher found goes there before its
** fix).  A harness checks properties the code promises, not only that it
** does not crash: FUZZ_ASSERT aborts, which both builds report.
**
** memfs: a stoke__sys table (os/syscalls.h) that serves one in-memory file
** under any path, so the storage readers parse fuzz input without touching
** the disk.  Its mmap is an exact-size heap copy, so a read one byte past
** the mapping is an ASan error rather than a silent read of page padding. */
#ifndef STOKE_FUZZ_H
#define STOKE_FUZZ_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "os/syscalls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond)                                                     \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__,     \
              #cond);                                                         \
      abort();                                                                \
    }                                                                         \
  } while (0)

/* ---- one in-memory file ---------------------------------------------------- */

typedef struct memfs {
  stoke__sys table;
  const uint8_t *data;
  size_t n;
  int open_fds;        /* for the leak property */
  int maps;
} memfs;

#define MEMFS_FD 1000 /* never a real descriptor of the process */

static int mf_open(void *u, const char *path, int flags, unsigned mode) {
  (void)path;
  (void)flags;
  (void)mode;
  ((memfs *)u)->open_fds++;
  return MEMFS_FD;
}
static int mf_close(void *u, int fd) {
  FUZZ_ASSERT(fd == MEMFS_FD);
  ((memfs *)u)->open_fds--;
  return 0;
}
static ssize_t mf_pread(void *u, int fd, void *buf, size_t n, uint64_t off) {
  memfs *m = u;
  FUZZ_ASSERT(fd == MEMFS_FD);
  if (off >= m->n) return 0;
  if (n > m->n - off) n = (size_t)(m->n - off);
  memcpy(buf, m->data + off, n);
  return (ssize_t)n;
}
static ssize_t mf_pwrite(void *u, int fd, const void *b, size_t n,
                         uint64_t off) {
  (void)u;
  (void)fd;
  (void)b;
  (void)n;
  (void)off;
  errno = EROFS;
  return -1;
}
static int mf_fstat(void *u, int fd, struct stat *st) {
  FUZZ_ASSERT(fd == MEMFS_FD);
  memset(st, 0, sizeof *st);
  st->st_mode = S_IFREG | 0644;
  st->st_size = (off_t)((memfs *)u)->n;
  return 0;
}
static int mf_stat(void *u, const char *path, struct stat *st) {
  (void)path;
  return mf_fstat(u, MEMFS_FD, st);
}
static void *mf_mmap(void *u, size_t len, int prot, int flags, int fd,
                     uint64_t off) {
  memfs *m = u;
  (void)prot;
  (void)flags;
  FUZZ_ASSERT(fd == MEMFS_FD && off == 0 && len <= m->n);
  void *p = malloc(len ? len : 1);
  if (!p) return MAP_FAILED;
  memcpy(p, m->data, len);
  m->maps++;
  return p;
}
static int mf_munmap(void *u, void *p, size_t len) {
  (void)len;
  ((memfs *)u)->maps--;
  free(p);
  return 0;
}
static int mf_enosys(void *u, int fd) {
  (void)u;
  (void)fd;
  errno = ENOSYS;
  return -1;
}
static int mf_path_enosys(void *u, const char *a, const char *b) {
  (void)u;
  (void)a;
  (void)b;
  errno = ENOSYS;
  return -1;
}
static int mf_unlink(void *u, const char *path) {
  (void)u;
  (void)path;
  errno = ENOSYS;
  return -1;
}
static DIR *mf_opendir(void *u, const char *path) {
  (void)u;
  (void)path;
  errno = ENOTDIR;
  return NULL;
}
static struct dirent *mf_readdir(void *u, DIR *d) {
  (void)u;
  (void)d;
  return NULL;
}
static int mf_closedir(void *u, DIR *d) {
  (void)u;
  (void)d;
  return 0;
}
static int mf_thread(void *u, pthread_t *t, const pthread_attr_t *a,
                     void *(*fn)(void *), void *arg) {
  (void)u;
  (void)t;
  (void)a;
  (void)fn;
  (void)arg;
  return EAGAIN;
}

static int mf_madvise(void *u, void *p, size_t len, int advice) {
  (void)u;
  (void)p;
  (void)len;
  (void)advice;
  return 0;
}
static int mf_fadvise(void *u, int fd, uint64_t off, uint64_t len,
                      int advice) {
  (void)u;
  (void)fd;
  (void)off;
  (void)len;
  (void)advice;
  return 0;
}
static int mf_mkdir(void *u, const char *path, unsigned mode) {
  (void)u;
  (void)path;
  (void)mode;
  errno = ENOSYS;
  return -1;
}
static int mf_fstatvfs(void *u, int fd, struct statvfs *st) {
  (void)u;
  (void)fd;
  (void)st;
  errno = ENOSYS;
  return -1;
}

static inline void memfs_init(memfs *m, const uint8_t *data, size_t n) {
  memset(m, 0, sizeof *m);
  m->data = data;
  m->n = n;
  m->table = (stoke__sys){
      m,          mf_open,     mf_close,       mf_pread,   mf_pwrite,
      mf_fstat,   mf_stat,     mf_mmap,        mf_munmap,  mf_enosys,
      mf_path_enosys, mf_unlink, mf_opendir, mf_readdir, mf_closedir,
      mf_thread, mf_madvise, mf_fadvise, mf_mkdir, mf_fstatvfs,
  };
}

/* ---- options from the input's last bytes (as spng's harness does) ------- */

typedef struct fuzz_opts {
  uint8_t b[8];
} fuzz_opts;

/* Split the last 8 bytes off as options when there are more than 8. */
static inline size_t fuzz_take_opts(const uint8_t *data, size_t n,
                                    fuzz_opts *o) {
  memset(o, 0, sizeof *o);
  if (n <= sizeof o->b) return n;
  memcpy(o->b, data + n - sizeof o->b, sizeof o->b);
  return n - sizeof o->b;
}

#endif /* STOKE_FUZZ_H */
