/* state_file.c — a loader state kept in a file (stoke.h), made and read
** as a private file (os/private_file.h): a state planted by another user
** would move a victim's run to where the planter chose. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "os/private_file.h"
#include "stoke.h"

#define PATH_CAP 4096

int stoke_loader_state_save_file(const stoke_loader_state *st,
                                 const char *path) {
  if (!st || !path)
    return stoke__set_tls_error(STOKE_EINVAL, "state: NULL argument");
  uint8_t buf[STOKE_STATE_BYTES];
  size_t n;
  int rc = stoke_loader_state_encode(st, buf, sizeof buf, &n);
  if (rc != 0) return rc;
  const stoke__sys *sys = stoke__sys_real();
  char tmp[PATH_CAP], why[STOKE__ERRMSG_CAP];
  int fd;
  rc = stoke__secure_create(sys, path, STOKE__PRIVATE_FILE_MODE, tmp,
                            sizeof tmp, &fd, why, sizeof why);
  if (rc != 0) return stoke__set_tls_error(rc, "state: %s", why);
  bool ok = stoke__sys_pwrite_full(sys, fd, buf, n, 0) == 0 &&
            sys->fsync(sys->user, fd) == 0;
  int e = errno;
  ok &= sys->close(sys->user, fd) == 0;
  if (!ok) {
    sys->unlink(sys->user, tmp);
    return stoke__set_tls_error(STOKE_EIO, "state: cannot write %s: %s", tmp,
                                strerror(e));
  }
  rc = stoke__secure_publish(sys, tmp, path, why, sizeof why);
  return rc ? stoke__set_tls_error(rc, "state: %s", why) : 0;
}

int stoke_loader_state_load_file(const char *path, stoke_loader_state *out) {
  if (!path || !out)
    return stoke__set_tls_error(STOKE_EINVAL, "state: NULL argument");
  const stoke__sys *sys = stoke__sys_real();
  char why[STOKE__ERRMSG_CAP];
  int fd;
  int rc = stoke__secure_open_read(sys, path, STOKE__PRIVATE_FILE_MODE, &fd,
                                   why, sizeof why);
  if (rc != 0) return stoke__set_tls_error(rc, "%s", why);
  /* One byte more than a state, to tell a longer file from a state. */
  uint8_t buf[STOKE_STATE_BYTES + 1];
  size_t n = 0;
  ssize_t got;
  while (n < sizeof buf &&
         (got = sys->pread(sys->user, fd, buf + n, sizeof buf - n, n)) != 0) {
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int e = errno;
      sys->close(sys->user, fd);
      return stoke__set_tls_error(STOKE_EIO, "%s: cannot read: %s", path,
                                  strerror(e));
    }
    n += (size_t)got;
  }
  sys->close(sys->user, fd);
  rc = stoke_loader_state_decode(buf, n, out);
  if (rc != 0) {
    /* Every message of a file names it first. */
    snprintf(why, sizeof why, "%s", stoke_errmsg(NULL));
    stoke__set_tls_error(rc, "%s: %s", path, why);
  }
  return rc;
}
