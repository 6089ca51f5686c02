/* private_file.c — private files and folders (os/private_file.h). */
#define _POSIX_C_SOURCE 200809L
#include "os/private_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define PATH_CAP 4096

int stoke__check_private(const struct stat *st, const char *path,
                         bool want_dir, unsigned mode, char *err, size_t cap) {
  unsigned have = (unsigned)st->st_mode & 07777;
  if (want_dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode))
    return stoke__errf(err, cap, STOKE_EINVAL, "%s: not a %s (owner uid %ld, "
                       "mode %04o): refused", path,
                       want_dir ? "folder" : "regular file",
                       (long)st->st_uid, have);
  if (st->st_uid != geteuid())
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "%s: owned by uid %ld, not by you (uid %ld), mode "
                       "%04o: refused, as another user could have written "
                       "it", path, (long)st->st_uid, (long)geteuid(), have);
  /* Group and others may write only as far as the mode asked for. */
  if (have & 022u & ~mode)
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "%s: owner uid %ld, mode %04o lets group or others "
                       "write it: refused (chmod go-w %s)", path,
                       (long)st->st_uid, have, path);
  return 0;
}

static int check_fd(const stoke__sys *s, int fd, const char *path,
                    bool want_dir, unsigned mode, char *err, size_t cap) {
  struct stat st;
  if (s->fstat(s->user, fd, &st) != 0)
    return stoke__errf(err, cap, STOKE_EIO, "%s: fstat: %s", path,
                       strerror(errno));
  return stoke__check_private(&st, path, want_dir, mode, err, cap);
}

int stoke__check_private_dir(const stoke__sys *s, const char *path,
                             unsigned mode, char *err, size_t cap) {
  s = stoke__sys_or_real(s);
  int fd = stoke__sys_open(s, path,
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (fd < 0) {
    int e = errno;
    stoke__errf(err, cap, STOKE_EIO, "%s: %s", path, strerror(e));
    errno = e;
    return STOKE_EIO;
  }
  int rc = check_fd(s, fd, path, true, mode, err, cap);
  s->close(s->user, fd);
  return rc;
}

int stoke__private_mkdirs(const stoke__sys *s, const char *path,
                          unsigned mode, char *err, size_t cap) {
  s = stoke__sys_or_real(s);
  char p[PATH_CAP];
  if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
    return stoke__errf(err, cap, STOKE_EINVAL, "%s: path too long", path);
  for (char *c = p + 1;; c++) {
    bool end = *c == '\0';
    if (*c == '/' || end) {
      *c = '\0';
      /* Only the folders made here get the mode: the folders above the
      ** user's path are theirs (/tmp, a home). */
      if (p[0] && s->mkdir(s->user, p, mode) != 0 && errno != EEXIST)
        return stoke__errf(err, cap, STOKE_EIO, "mkdir %s: %s", p,
                           strerror(errno));
      if (end) break;
      *c = '/';
    }
  }
  return stoke__check_private_dir(s, path, mode, err, cap);
}

int stoke__secure_open_read(const stoke__sys *s, const char *path,
                            unsigned mode, int *fd, char *err, size_t cap) {
  s = stoke__sys_or_real(s);
  *fd = stoke__sys_open(s, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (*fd < 0) {
    int e = errno;
    stoke__errf(err, cap, STOKE_EIO, "%s: %s", path, strerror(e));
    errno = e;
    return STOKE_EIO;
  }
  int rc = check_fd(s, *fd, path, false, mode, err, cap);
  if (rc != 0) {
    s->close(s->user, *fd);
    *fd = -1;
  }
  return rc;
}

int stoke__secure_create(const stoke__sys *s, const char *path,
                         unsigned mode, char *tmp, size_t tmp_cap, int *fd,
                         char *err, size_t cap) {
  s = stoke__sys_or_real(s);
  *fd = -1;
  /* A name nobody can guess ahead, so a planted link is unlikely to be in
  ** the way; O_EXCL|O_NOFOLLOW makes a planted one an error, never a
  ** write through it. */
  uint64_t token = stoke__mix64((uint64_t)stoke__now_ns() ^
                                ((uint64_t)getpid() << 32) ^
                                (uint64_t)(uintptr_t)tmp);
  if (snprintf(tmp, tmp_cap, "%s.tmp-%ld-%08llx", path, (long)getpid(),
               (unsigned long long)(token >> 32)) >= (int)tmp_cap)
    return stoke__errf(err, cap, STOKE_EINVAL, "%s: path too long", path);
  *fd = stoke__sys_open(s, tmp,
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        mode);
  if (*fd < 0)
    return stoke__errf(err, cap, STOKE_EIO, "cannot create %s: %s", tmp,
                       strerror(errno));
  return 0;
}

int stoke__secure_publish(const stoke__sys *s, const char *tmp,
                          const char *path, char *err, size_t cap) {
  s = stoke__sys_or_real(s);
  if (s->rename(s->user, tmp, path) == 0) return 0;
  int e = errno;
  s->unlink(s->user, tmp);
  return stoke__errf(err, cap, STOKE_EIO, "cannot rename %s to %s: %s", tmp,
                     path, strerror(e));
}
