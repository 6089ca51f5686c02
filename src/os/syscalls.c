/* syscalls.c — the real system calls behind stoke__sys (see syscalls.h),
** and the retry loops every caller shares. */
#define _DEFAULT_SOURCE /* madvise */
#define _POSIX_C_SOURCE 200809L
#include "os/syscalls.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

static int real_open(void *u, const char *path, int flags, unsigned mode) {
  (void)u;
  return open(path, flags, (mode_t)mode);
}
static int real_close(void *u, int fd) {
  (void)u;
  return close(fd);
}
static ssize_t real_pread(void *u, int fd, void *buf, size_t n,
                          uint64_t off) {
  (void)u;
  return pread(fd, buf, n, (off_t)off);
}
static ssize_t real_pwrite(void *u, int fd, const void *buf, size_t n,
                           uint64_t off) {
  (void)u;
  return pwrite(fd, buf, n, (off_t)off);
}
static int real_fstat(void *u, int fd, struct stat *st) {
  (void)u;
  return fstat(fd, st);
}
static int real_stat(void *u, const char *path, struct stat *st) {
  (void)u;
  return stat(path, st);
}
static void *real_mmap(void *u, size_t len, int prot, int flags, int fd,
                       uint64_t off) {
  (void)u;
  return mmap(NULL, len, prot, flags, fd, (off_t)off);
}
static int real_munmap(void *u, void *p, size_t len) {
  (void)u;
  return munmap(p, len);
}
static int real_fsync(void *u, int fd) {
  (void)u;
  return fsync(fd);
}
static int real_rename(void *u, const char *from, const char *to) {
  (void)u;
  return rename(from, to);
}
static int real_unlink(void *u, const char *path) {
  (void)u;
  return unlink(path);
}
static DIR *real_opendir(void *u, const char *path) {
  (void)u;
  return opendir(path);
}
static struct dirent *real_readdir(void *u, DIR *d) {
  (void)u;
  return readdir(d);
}
static int real_closedir(void *u, DIR *d) {
  (void)u;
  return closedir(d);
}
static int real_thread_create(void *u, pthread_t *t,
                              const pthread_attr_t *attr,
                              void *(*fn)(void *), void *arg) {
  (void)u;
  return pthread_create(t, attr, fn, arg);
}

static int real_madvise(void *u, void *p, size_t len, int advice) {
  (void)u;
  return madvise(p, len, advice);
}
static int real_fadvise(void *u, int fd, uint64_t off, uint64_t len,
                        int advice) {
  (void)u;
  return posix_fadvise(fd, (off_t)off, (off_t)len, advice);
}
static int real_mkdir(void *u, const char *path, unsigned mode) {
  (void)u;
  return mkdir(path, (mode_t)mode);
}
static int real_fstatvfs(void *u, int fd, struct statvfs *st) {
  (void)u;
  return fstatvfs(fd, st);
}

/* Constant: the one table every handle without its own shares. */
static const stoke__sys real_table = {
    NULL,          real_open,    real_close,   real_pread,   real_pwrite,
    real_fstat,    real_stat,    real_mmap,    real_munmap,  real_fsync,
    real_rename,   real_unlink,  real_opendir, real_readdir, real_closedir,
    real_thread_create, real_madvise, real_fadvise, real_mkdir,
    real_fstatvfs,
};

const stoke__sys *stoke__sys_real(void) { return &real_table; }

int stoke__sys_open(const stoke__sys *s, const char *path, int flags,
                    unsigned mode) {
  for (;;) {
    int fd = s->open(s->user, path, flags, mode);
    if (fd >= 0 || errno != EINTR) return fd;
  }
}

int stoke__sys_pread_full(const stoke__sys *s, int fd, void *buf, size_t n,
                          uint64_t off) {
  uint8_t *p = buf;
  while (n > 0) {
    ssize_t got = s->pread(s->user, fd, p, n, off);
    if (got < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (got == 0) {
      errno = 0; /* the file ended early */
      return -1;
    }
    p += got;
    n -= (size_t)got;
    off += (uint64_t)got;
  }
  return 0;
}

int stoke__sys_pwrite_full(const stoke__sys *s, int fd, const void *buf,
                           size_t n, uint64_t off) {
  const uint8_t *p = buf;
  while (n > 0) {
    ssize_t put = s->pwrite(s->user, fd, p, n, off);
    if (put < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (put == 0) {
      errno = ENOSPC; /* pwrite(2) of n > 0 bytes writing none */
      return -1;
    }
    p += put;
    n -= (size_t)put;
    off += (uint64_t)put;
  }
  return 0;
}
