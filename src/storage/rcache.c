/* rcache.c — the remote shard cache (rcache.h). */
#define _GNU_SOURCE /* O_CLOEXEC, O_NOFOLLOW */
#include "storage/rcache.h"
#include "os/private_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct stoke__rcache {
  char *dir; /* owned: DIR/remote */
  uint64_t max;
  /* The folder's bytes at the last trim plus what this cache fetched
  ** since: a fetch lists the folder (a stat and a lock test per entry)
  ** only when this says the budget may be passed, not every time. */
  _Atomic uint64_t known;
  /* stoke__rcache_counts, each added to by the thread that did it (the
  ** shards are opened side by side). */
  _Atomic uint64_t hits, misses, uncached, evicted;
  _Atomic uint64_t bytes_hit, bytes_fetched, bytes_evicted;
  const stoke__sys *sys;
  const stoke_allocator *a;
};

void stoke__rcache_name(const char *shown, const char *etag, uint64_t size,
                        const char *ext, char out[STOKE__RCACHE_NAME_CAP]) {
  /* Two differently seeded hashes: 128 bits, so that distinct objects
  ** never meet in one name in practice. */
  uint64_t h[2];
  for (int k = 0; k < 2; k++) {
    h[k] = stoke__hash_str((uint64_t)k + 0x5243414348ull, shown);
    h[k] = stoke__hash_str(h[k], etag);
    h[k] = stoke__hash_u64(h[k], size);
  }
  snprintf(out, STOKE__RCACHE_NAME_CAP, "r-%016llx%016llx%s",
           (unsigned long long)h[0], (unsigned long long)h[1], ext);
}

typedef struct ranked {
  int64_t used_ns;
  size_t i;
  bool victim;
} ranked;

static int by_use(const void *x, const void *y) {
  const ranked *a = x, *b = y;
  if (a->used_ns != b->used_ns) return a->used_ns < b->used_ns ? -1 : 1;
  return a->i < b->i ? -1 : a->i > b->i;
}

size_t stoke__rcache_victims(const stoke__rcache_entry *e, size_t n,
                             uint64_t max, uint64_t incoming, size_t *order,
                             const stoke_allocator *a) {
  ranked *r = n ? stoke__calloc(a, n, sizeof *r) : NULL;
  uint64_t total = incoming;
  for (size_t i = 0; i < n; i++) {
    total += e[i].size;
    if (r) r[i] = (ranked){e[i].used_ns, i, false};
  }
  if (!r) { /* out of memory, or nothing: evict nothing, in index order */
    for (size_t i = 0; i < n; i++) order[i] = i;
    return 0;
  }
  qsort(r, n, sizeof *r, by_use);
  /* Victims first, in LRU order, until the rest fit; the kept after. */
  size_t k = 0;
  for (size_t j = 0; j < n; j++)
    if (total > max && !e[r[j].i].open) {
      total -= e[r[j].i].size;
      r[j].victim = true;
      order[k++] = r[j].i;
    }
  size_t w = k;
  for (size_t j = 0; j < n; j++)
    if (!r[j].victim) order[w++] = r[j].i;
  stoke__free(a, r);
  return k;
}

int stoke__rcache_open(const char *dir, uint64_t max_bytes,
                       const stoke__sys *sys, const stoke_allocator *a,
                       stoke__rcache **out, char *err, size_t cap) {
  *out = NULL;
  sys = stoke__sys_or_real(sys);
  size_t n = strlen(dir) + sizeof "/remote";
  stoke__rcache *c = stoke__calloc(a, 1, sizeof *c);
  char *d = c ? stoke__calloc(a, n, 1) : NULL;
  if (!d) {
    stoke__free(a, c);
    return stoke__errf(err, cap, STOKE_ENOMEM, "remote cache: out of memory");
  }
  snprintf(d, n, "%s/remote", dir);
  c->dir = d;
  c->max = max_bytes;
  c->sys = sys;
  c->a = a;
  char e[STOKE__ERRMSG_CAP];
  int rc = stoke__private_mkdirs(sys, d, STOKE__PRIVATE_DIR_MODE, e, sizeof e);
  if (rc) {
    stoke__rcache_close(c);
    return stoke__errf(err, cap, rc, "remote cache: %s", e);
  }
  stoke__rcache_trim(c, 0); /* what the folder holds: c->known */
  *out = c;
  return 0;
}

void stoke__rcache_close(stoke__rcache *c) {
  if (!c) return;
  stoke__rcache_trim(c, 0);
  stoke__free(c->a, c->dir);
  stoke__free(c->a, c);
}

/* c->dir/name, or false when it does not fit. */
static bool path_of(const stoke__rcache *c, const char *name, char *out) {
  int w = snprintf(out, PATH_MAX, "%s/%s", c->dir, name);
  return w > 0 && w < PATH_MAX;
}

/* The entry's name with its extension replaced by sfx (".lock", ".tmp"). */
static bool sibling(const stoke__rcache *c, const char *name, const char *sfx,
                    char *out) {
  char s[STOKE__RCACHE_NAME_CAP + 8];
  const char *dot = strchr(name, '.');
  size_t stem = dot ? (size_t)(dot - name) : strlen(name);
  if (stem + strlen(sfx) >= sizeof s) return false;
  memcpy(s, name, stem);
  strcpy(s + stem, sfx);
  return path_of(c, s, out);
}

/* An entry file, opened and checked; -1 when absent, damaged (size) or not
** ours (then removed, so it is fetched again). */
static int open_entry(const stoke__rcache *c, const char *path,
                      uint64_t size) {
  int fd;
  char e[STOKE__ERRMSG_CAP];
  if (stoke__secure_open_read(c->sys, path, STOKE__PRIVATE_FILE_MODE, &fd, e,
                              sizeof e))
    return -1;
  struct stat st;
  if (c->sys->fstat(c->sys->user, fd, &st) != 0 ||
      (uint64_t)st.st_size != size) {
    c->sys->close(c->sys->user, fd);
    c->sys->unlink(c->sys->user, path);
    return -1;
  }
  return fd;
}

/* Fetch url into tmp, then publish it as path. */
static int fetch(stoke__rcache *c, stoke__http *h, const char *url,
                 const char *shown, uint64_t size, const char *tmp,
                 const char *path, char *err, size_t cap) {
  const stoke__sys *sys = c->sys;
  sys->unlink(sys->user, tmp); /* under the lock: a crashed writer's */
  int fd = stoke__sys_open(sys, tmp,
                           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
                               O_CLOEXEC, STOKE__PRIVATE_FILE_MODE);
  if (fd < 0)
    return stoke__errf(err, cap, STOKE_EIO, "remote cache: %s: cannot "
                       "create a file in %s: %s", shown, c->dir,
                       strerror(errno));
  uint64_t got = 0;
  int rc = stoke__http_get_file(h, url, sys, fd, size, &got, err, cap);
  if (rc == 0 && got != size)
    rc = stoke__errf(err, cap, STOKE_EFORMAT, "remote cache: %s: %llu "
                     "bytes fetched, the server said %llu (changed?)", shown,
                     (unsigned long long)got, (unsigned long long)size);
  if (rc == 0 && sys->fsync(sys->user, fd) != 0)
    rc = stoke__errf(err, cap, STOKE_EIO, "remote cache: %s: fsync: %s",
                     shown, strerror(errno));
  sys->close(sys->user, fd);
  if (rc == 0 && sys->rename(sys->user, tmp, path) != 0)
    rc = stoke__errf(err, cap, STOKE_EIO, "remote cache: %s: rename into "
                     "%s: %s", shown, c->dir, strerror(errno));
  if (rc) {
    sys->unlink(sys->user, tmp);
    return rc;
  }
  /* The rename itself made durable: else a crash could lose the entry
  ** (never half of it) after its fetch lock went. */
  int dfd = stoke__sys_open(sys, c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                            0);
  if (dfd >= 0) {
    sys->fsync(sys->user, dfd);
    sys->close(sys->user, dfd);
  }
  return 0;
}

int stoke__rcache_get(stoke__rcache *c, stoke__http *h, const char *url,
                      const char *shown, const char *ext, uint64_t size,
                      const char *etag, int *fd, char *err, size_t cap) {
  *fd = -1;
  const stoke__sys *sys = c->sys;
  char name[STOKE__RCACHE_NAME_CAP], path[PATH_MAX], lock[PATH_MAX],
      tmp[PATH_MAX];
  stoke__rcache_name(shown, etag, size, ext, name);
  if (!path_of(c, name, path) || !sibling(c, name, ".lock", lock) ||
      !sibling(c, name, ".tmp", tmp))
    return stoke__errf(err, cap, STOKE_EINVAL, "remote cache: %s: the "
                       "folder's name is too long", c->dir);
  int lfd = stoke__sys_open(sys, lock,
                            O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                            STOKE__PRIVATE_FILE_MODE);
  if (lfd < 0 || flock(lfd, LOCK_EX) != 0) {
    int rc = stoke__errf(err, cap, STOKE_EIO, "remote cache: %s: lock in "
                         "%s: %s", shown, c->dir, strerror(errno));
    if (lfd >= 0) sys->close(sys->user, lfd);
    return rc;
  }
  int rc = 0;
  int f = open_entry(c, path, size);
  if (f >= 0) {
    /* There already (another process's or thread's download included:
    ** this one waited for it on the lock, and fetched nothing). */
    atomic_fetch_add(&c->hits, 1);
    atomic_fetch_add(&c->bytes_hit, size);
  } else {
    if (c->max && atomic_load(&c->known) + size > c->max)
      stoke__rcache_trim(c, size);
    rc = fetch(c, h, url, shown, size, tmp, path, err, cap);
    if (rc == 0) {
      atomic_fetch_add(&c->known, size);
      atomic_fetch_add(&c->misses, 1);
      atomic_fetch_add(&c->bytes_fetched, size);
    }
    if (rc == 0 && (f = open_entry(c, path, size)) < 0)
      rc = stoke__errf(err, cap, STOKE_EIO, "remote cache: %s: the entry "
                       "just written in %s is gone", shown, c->dir);
  }
  /* Held shared before the fetch lock goes: eviction passes over it. */
  if (rc == 0) {
    flock(f, LOCK_SH);
    futimens(f, NULL); /* its last use, for the LRU order */
    *fd = f;
  }
  sys->close(sys->user, lfd);
  return rc;
}

/* Whether the entry at path may go now: nobody holds it.  Its descriptor,
** locked exclusively, in *fd, or -1. */
static bool take(const stoke__rcache *c, const char *path, int *fd) {
  *fd = stoke__sys_open(c->sys, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (*fd < 0) return false;
  if (flock(*fd, LOCK_EX | LOCK_NB) == 0) return true;
  c->sys->close(c->sys->user, *fd);
  *fd = -1;
  return false;
}

static bool is_entry(const char *n) {
  size_t len = strlen(n);
  return strncmp(n, "r-", 2) == 0 &&
         ((len > 6 && strcmp(n + len - 6, ".stoke") == 0) ||
          (len > 4 && strcmp(n + len - 4, ".tar") == 0));
}

/* A .tmp whose fetch lock nobody holds is a crashed writer's. */
static void clean_tmp(const stoke__rcache *c, const char *name) {
  char lock[PATH_MAX], tmp[PATH_MAX];
  if (!sibling(c, name, ".lock", lock) || !path_of(c, name, tmp)) return;
  int lfd = stoke__sys_open(c->sys, lock, O_RDONLY | O_NOFOLLOW | O_CLOEXEC,
                            0);
  if (lfd < 0) {
    c->sys->unlink(c->sys->user, tmp); /* no lock: no writer */
    return;
  }
  if (flock(lfd, LOCK_EX | LOCK_NB) == 0) c->sys->unlink(c->sys->user, tmp);
  c->sys->close(c->sys->user, lfd);
}

typedef struct listed {
  char name[STOKE__RCACHE_NAME_CAP];
} listed;

/* The entries in the folder (and the crashed writers' .tmp removed):
** *names and e, n of them; false when out of memory. */
static bool list(const stoke__rcache *c, DIR *d, listed **names,
                 stoke__rcache_entry **e, size_t *n) {
  const stoke__sys *sys = c->sys;
  size_t cap = 0;
  *names = NULL;
  *e = NULL;
  *n = 0;
  struct dirent *de;
  while ((de = sys->readdir(sys->user, d)) != NULL) {
    const char *nm = de->d_name;
    size_t len = strlen(nm);
    if (len >= STOKE__RCACHE_NAME_CAP) continue;
    if (strncmp(nm, "r-", 2) == 0 && len > 4 &&
        strcmp(nm + len - 4, ".tmp") == 0) {
      clean_tmp(c, nm);
      continue;
    }
    if (!is_entry(nm)) continue;
    char path[PATH_MAX];
    struct stat st;
    if (!path_of(c, nm, path) || sys->stat(sys->user, path, &st) != 0)
      continue;
    if (*n == cap) {
      size_t m = cap ? 2 * cap : 64;
      listed *nn = stoke__calloc(c->a, m, sizeof *nn);
      stoke__rcache_entry *ne = stoke__calloc(c->a, m, sizeof *ne);
      if (!nn || !ne) {
        stoke__free(c->a, nn);
        stoke__free(c->a, ne);
        return false;
      }
      if (*n) {
        memcpy(nn, *names, *n * sizeof *nn);
        memcpy(ne, *e, *n * sizeof *ne);
      }
      stoke__free(c->a, *names);
      stoke__free(c->a, *e);
      *names = nn;
      *e = ne;
      cap = m;
    }
    memcpy((*names)[*n].name, nm, len + 1);
    (*e)[*n] = (stoke__rcache_entry){
        (uint64_t)st.st_size,
        (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec, false};
    int fd;
    (*e)[*n].open = !take(c, path, &fd);
    if (fd >= 0) sys->close(sys->user, fd);
    (*n)++;
  }
  return true;
}

void stoke__rcache_counts_get(const stoke__rcache *c,
                              stoke__rcache_counts *out) {
  stoke__rcache *m = (stoke__rcache *)c; /* atomics are read, not changed */
  out->hits = atomic_load(&m->hits);
  out->misses = atomic_load(&m->misses);
  out->uncached = atomic_load(&m->uncached);
  out->evicted = atomic_load(&m->evicted);
  out->bytes_hit = atomic_load(&m->bytes_hit);
  out->bytes_fetched = atomic_load(&m->bytes_fetched);
  out->bytes_evicted = atomic_load(&m->bytes_evicted);
}

void stoke__rcache_note_uncached(stoke__rcache *c) {
  atomic_fetch_add(&c->uncached, 1);
}

void stoke__rcache_trim(stoke__rcache *c, uint64_t incoming) {
  const stoke__sys *sys = c->sys;
  DIR *d = sys->opendir(sys->user, c->dir);
  if (!d) return;
  listed *names;
  stoke__rcache_entry *e;
  size_t n;
  bool ok = list(c, d, &names, &e, &n);
  sys->closedir(sys->user, d);
  size_t *order = ok && n ? stoke__calloc(c->a, n, sizeof *order) : NULL;
  size_t k = 0;
  uint64_t total = 0;
  for (size_t j = 0; ok && j < n; j++) total += e[j].size;
  if (order && c->max)
    k = stoke__rcache_victims(e, n, c->max, incoming, order, c->a);
  for (size_t j = 0; j < k; j++) {
    char path[PATH_MAX];
    int fd;
    /* Taken again: someone may have opened it since it was listed. */
    if (path_of(c, names[order[j]].name, path) && take(c, path, &fd)) {
      sys->unlink(sys->user, path);
      sys->close(sys->user, fd);
      total -= e[order[j]].size;
      atomic_fetch_add(&c->evicted, 1);
      atomic_fetch_add(&c->bytes_evicted, e[order[j]].size);
    }
  }
  if (ok) atomic_store(&c->known, total);
  stoke__free(c->a, order);
  stoke__free(c->a, names);
  stoke__free(c->a, e);
}
