/* packed_remote.c — packed shards and tar shards over HTTP(S) (remote.h).
**
** A remote packed shard is mapped as a local one is, so that the same
** validation checks it: an anonymous mapping of the object's size, of
** which only the pages of the metadata are ever written (the header, the
** class table, the source map, the index and the footer: a few Range
** requests); the data stays on the server and each sample is one Range
** request at read time (packed.c).
**
** A remote tar shard is indexed through a forward-only window (remote.h)
** and its samples are then Range requests as a packed shard's; only a
** server that ignores Range gets the shard fetched whole into a spool. */
#define _GNU_SOURCE /* O_TMPFILE, MAP_NORESERVE, MAP_ANONYMOUS */
#include "storage/remote.h"
#include "storage/url.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

bool stoke__specs_remote(const char *const *specs, size_t n_specs) {
  for (size_t k = 0; k < n_specs; k++)
    if (specs[k] && stoke__url_is_remote(specs[k])) return true;
  return false;
}

#define BAD(...) stoke__errf(err, cap, STOKE_EFORMAT, __VA_ARGS__)

/* Fetch [off, off + n) into the mapping, when it lies inside. */
static int fetch_into(stoke__http *h, const char *url, uint8_t *m,
                      size_t size, uint64_t off, uint64_t n, char *err,
                      size_t cap) {
  if (n == 0 || off > size || n > size - off) return 0; /* validate says */
  return stoke__http_get_range(h, url, off, (size_t)n, m + off, NULL, err,
                               cap);
}

int stoke__packed_remote_map(stoke__http *h, const stoke__sys *sys,
                             const char *url, const char *shown,
                             uint8_t **map, size_t *len, char *err,
                             size_t cap) {
  *map = NULL;
  *len = 0;
  uint8_t head[STOKE__PACK_HEADER];
  uint64_t total = UINT64_MAX;
  int rc = stoke__http_get_range(h, url, 0, sizeof head, head, &total, err,
                                 cap);
  if (rc) return rc;
  if (total == UINT64_MAX)
    return BAD("packed source: %s: the server did not say the object's size "
               "(no Content-Range)", shown);
  if (total < STOKE__PACK_HEADER + STOKE__PACK_FOOTER)
    return BAD("packed source: %s: %llu bytes, too small to be a packed "
               "shard (truncated?)", shown, (unsigned long long)total);
  if (total > STOKE__REMOTE_MAX_OBJECT || total > SIZE_MAX)
    return BAD("packed source: %s: %llu bytes, more than a shard may be "
               "(%llu)", shown, (unsigned long long)total,
               (unsigned long long)STOKE__REMOTE_MAX_OBJECT);
  size_t size = (size_t)total;
  void *v = sys->mmap(sys->user, size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (v == MAP_FAILED)
    return stoke__errf(err, cap, STOKE_ENOMEM, "packed source: %s: cannot "
                       "reserve %llu bytes of address space: %s", shown,
                       (unsigned long long)total, strerror(errno));
  uint8_t *m = v;
  memcpy(m, head, sizeof head);
  /* Only what the header points at, each bounded before it is asked for;
  ** whether it all fits together is validate()'s to say. */
  uint32_t flags = stoke__le32(head + 12);
  uint64_t n = stoke__le64(head + 16), data_off = stoke__le64(head + 24);
  uint64_t index_off = stoke__le64(head + 32);
  uint64_t map_off = stoke__le64(head + 52);
  if ((flags & STOKE__PACK_FLAG_CLASSES) && data_off > STOKE__PACK_HEADER &&
      data_off - STOKE__PACK_HEADER <= STOKE__REMOTE_MAX_INDEX)
    rc = fetch_into(h, url, m, size, STOKE__PACK_HEADER,
                    data_off - STOKE__PACK_HEADER, err, cap);
  if (rc == 0 && (flags & STOKE__PACK_FLAG_SOURCE_MAP) &&
      n < STOKE__REMOTE_MAX_INDEX / 8)
    rc = fetch_into(h, url, m, size, map_off, 8 * n + 8, err, cap);
  if (rc == 0 && index_off < size &&
      size - index_off <= STOKE__REMOTE_MAX_INDEX)
    rc = fetch_into(h, url, m, size, index_off, size - index_off, err, cap);
  else if (rc == 0 && index_off < size)
    rc = BAD("packed source: %s: an index of %llu bytes, more than %llu",
             shown, (unsigned long long)(size - index_off),
             (unsigned long long)STOKE__REMOTE_MAX_INDEX);
  if (rc) {
    sys->munmap(sys->user, m, size);
    return rc;
  }
  *map = m;
  *len = size;
  return 0;
}

int stoke__tar_remote_spool(stoke__http *h, const stoke__sys *sys,
                            const char *url, int *fd, char *err,
                            size_t cap) {
  *fd = -1;
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  int f = stoke__sys_open(sys, dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (f < 0)
    return stoke__errf(err, cap, STOKE_EIO, "tar source: cannot make a "
                       "temporary file in %s for a remote shard: %s", dir,
                       strerror(errno));
  uint64_t bytes;
  int rc = stoke__http_get_file(h, url, sys, f, STOKE__REMOTE_MAX_OBJECT,
                                &bytes, err, cap);
  if (rc) {
    sys->close(sys->user, f);
    return rc;
  }
  *fd = f;
  return 0;
}

int stoke__tar_window_open(stoke__tar_window *w, stoke__http *h,
                           const char *url, const stoke_allocator *a,
                           char *err, size_t cap) {
  memset(w, 0, sizeof *w);
  w->http = h;
  w->url = url;
  w->a = a;
  w->cap = STOKE__TAR_WINDOW_MIN;
  w->buf = stoke__alloc(a, w->cap);
  if (!w->buf)
    return stoke__errf(err, cap, STOKE_ENOMEM, "tar source: out of memory");
  w->total = UINT64_MAX;
  int rc = stoke__http_get_range_etag(h, url, 0, 512, w->buf, &w->total,
                                      w->etag, err, cap);
  if (rc == 0 && w->total == UINT64_MAX)
    rc = stoke__errf(err, cap, STOKE_EFORMAT, "tar source: the server did "
                     "not say the object's size (no Content-Range)");
  if (rc == 0 && w->total > STOKE__REMOTE_MAX_OBJECT)
    rc = stoke__errf(err, cap, STOKE_EFORMAT, "tar source: %llu bytes, "
                     "more than a shard may be (%llu)",
                     (unsigned long long)w->total,
                     (unsigned long long)STOKE__REMOTE_MAX_OBJECT);
  if (rc) {
    stoke__tar_window_close(w);
    return rc;
  }
  w->len = 512;
  w->want = STOKE__TAR_WINDOW_MIN;
  w->fetched = 512;
  return 0;
}

int stoke__tar_window_read(stoke__tar_window *w, void *dst, size_t n,
                           uint64_t off, char *err, size_t cap) {
  if (off >= w->off && n <= w->len && off - w->off <= w->len - n) {
    memcpy(dst, w->buf + (off - w->off), n);
    return 0;
  }
  /* A refill near the last one's end (what it skips, the rest of a member
  ** cut off by that end, is less than a window) is in a run of small
  ** members: ask for twice as much.  One past a large member starts again
  ** from the smallest: the members there may be large too, and what the
  ** window holds past the next header would be skipped unread. */
  uint64_t end = w->off + w->len, gap = off > end ? off - end : 0;
  if (gap >= w->want) w->want = STOKE__TAR_WINDOW_MIN;
  else if (w->want < STOKE__TAR_WINDOW_MAX) w->want *= 2;
  size_t len = n > w->want ? n : w->want;
  if (off >= w->total) len = 0;
  else if (len > w->total - off) len = (size_t)(w->total - off);
  if (len < n)
    return stoke__errf(err, cap, STOKE_EFORMAT, "tar source: a read of "
                       "%zu bytes at offset %llu past the end (%llu)", n,
                       (unsigned long long)off,
                       (unsigned long long)w->total);
  if (len > w->cap) {
    uint8_t *b = stoke__alloc(w->a, len);
    if (!b)
      return stoke__errf(err, cap, STOKE_ENOMEM, "tar source: out of "
                         "memory for a window of %zu bytes", len);
    stoke__free(w->a, w->buf);
    w->buf = b;
    w->cap = len;
  }
  w->len = 0; /* nothing held should the request fail */
  int rc = stoke__http_get_range(w->http, w->url, off, len, w->buf, NULL,
                                 err, cap);
  if (rc) return rc;
  w->off = off;
  w->len = len;
  w->fetched += len;
  memcpy(dst, w->buf, n);
  return 0;
}

void stoke__tar_window_close(stoke__tar_window *w) {
  stoke__free(w->a, w->buf);
  w->buf = NULL;
  w->cap = w->len = 0;
}
