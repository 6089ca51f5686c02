/* live_files.c — the files a publishing loader writes for `stoke top`, and
** what their readers ask of /proc.
**
** The snapshots live in shared memory (a tmpfs: $XDG_RUNTIME_DIR, which
** systemd makes per user, or /dev/shm), one file per publisher.  Other
** users must neither read them (a command line can hold secrets) nor plant
** files for us to read or links for us to write through: the folder is
** the user's own and closed (0700), every file is created O_EXCL and
** O_NOFOLLOW with mode 0600, and a reader maps only plain files of the
** user's.  A process killed before it could remove its file leaves it
** behind; the readers tell such files by the process's start time, which a
** reused pid does not share. */
#define _GNU_SOURCE
#include "os/os.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A folder we may use: ours, not a link, nobody else's way in. */
static int check_dir(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0)
    return stoke__set_tls_error(STOKE_EIO, "live: %s: %s", path,
                                strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return stoke__set_tls_error(STOKE_EIO, "live: %s is not a folder",
                                path);
  if (st.st_uid != geteuid())
    return stoke__set_tls_error(STOKE_EIO,
                                "live: %s belongs to another user (uid %ld)",
                                path, (long)st.st_uid);
  if (st.st_mode & 077)
    return stoke__set_tls_error(STOKE_EIO,
                                "live: %s is open to others (mode %03o, "
                                "expected 0700)",
                                path, (unsigned)(st.st_mode & 0777));
  return 0;
}

/* XDG_RUNTIME_DIR when it is usable as the base of our folder. */
static const char *xdg_base(void) {
  const char *x = getenv("XDG_RUNTIME_DIR");
  if (!x || x[0] != '/') return NULL;
  struct stat st;
  if (stat(x, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
    return NULL;
  return x;
}

int stoke__live_dir(char *buf, size_t cap, bool create) {
  const char *x = xdg_base();
  int n = x ? snprintf(buf, cap, "%s/stoke", x)
            : snprintf(buf, cap, "/dev/shm/stoke-%ld", (long)geteuid());
  if (n < 0 || (size_t)n >= cap)
    return stoke__set_tls_error(STOKE_EINVAL, "live: folder name too long");
  if (create && mkdir(buf, 0700) != 0 && errno != EEXIST)
    return stoke__set_tls_error(STOKE_EIO, "live: cannot make %s: %s", buf,
                                strerror(errno));
  return check_dir(buf);
}

int stoke__shm_create(const char *path, size_t bytes, void **map) {
  *map = NULL;
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                0600);
  if (fd < 0) return errno;
  int err = 0;
  if (ftruncate(fd, (off_t)bytes) != 0) err = errno;
  void *p = MAP_FAILED;
  if (!err) {
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) err = errno;
  }
  close(fd);
  if (err) {
    unlink(path);
    return err;
  }
  *map = p;
  return 0;
}

int stoke__shm_open_read(const char *path, size_t min_bytes,
                         const void **map, size_t *bytes) {
  *map = NULL;
  *bytes = 0;
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno;
  struct stat st;
  int err = 0;
  if (fstat(fd, &st) != 0)
    err = errno;
  else if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
           (st.st_mode & 077))
    err = EPERM;
  else if ((size_t)st.st_size < min_bytes)
    err = EINVAL;
  void *p = MAP_FAILED;
  if (!err) {
    p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) err = errno;
  }
  close(fd);
  if (err) return err;
  *map = p;
  *bytes = (size_t)st.st_size;
  return 0;
}

void stoke__shm_unmap(const void *map, size_t bytes) {
  if (map) munmap((void *)map, bytes);
}

int stoke__proc_start_ticks(long pid, uint64_t *ticks) {
  char path[64], line[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "re");
  if (!f) return errno == ENOENT ? ESRCH : errno;
  size_t n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[n] = '\0';
  /* The command (field 2) is in parentheses and may hold spaces and ')':
  ** the fields after it start after the last ')'. */
  char *p = strrchr(line, ')');
  if (!p) return EINVAL;
  p++;
  /* Field 3 (the state) is the first after it; 22 is the start time. */
  for (int field = 3; field < 22; field++) {
    p = strchr(p + 1, ' ');
    if (!p) return EINVAL;
  }
  char *end;
  unsigned long long v = strtoull(p + 1, &end, 10);
  if (end == p + 1) return EINVAL;
  *ticks = v;
  return 0;
}

void stoke__proc_cmdline(char *buf, size_t cap) {
  if (cap == 0) return;
  buf[0] = '\0';
  FILE *f = fopen("/proc/self/cmdline", "re");
  if (!f) return;
  size_t n = fread(buf, 1, cap - 1, f);
  fclose(f);
  while (n > 0 && buf[n - 1] == '\0') n--;
  for (size_t i = 0; i < n; i++)
    if (buf[i] == '\0' || buf[i] == '\n' || buf[i] == '\t') buf[i] = ' ';
  buf[n] = '\0';
}

int stoke__live_scan(const char *dir, stoke__live_name *out, size_t cap) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    long pid;
    unsigned id;
    char tail[8];
    if (sscanf(e->d_name, "%ld-%u.%7s", &pid, &id, tail) != 3 || pid <= 0 ||
        strcmp(tail, "live") != 0)
      continue;
    if ((size_t)n < cap) out[n] = (stoke__live_name){pid, id};
    n++;
  }
  closedir(d);
  return n;
}
