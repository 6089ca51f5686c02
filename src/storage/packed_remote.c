/* packed_remote.c — packed shards and tar shards over HTTP(S) (remote.h).
**
** A remote packed shard is mapped as a local one is, so that the same
** validation checks it: an anonymous mapping of the object's size, of
** which only the pages of the metadata are ever written (the header, the
** class table, the source map, the index and the footer: a few Range
** requests); the data stays on the server and each sample is one Range
** request at read time (packed.c). */
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
