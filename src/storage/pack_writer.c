/* pack_writer.c — writing packed shards (docs/packed-format.md), streaming.
**
** Sample bytes go to the current shard's file as they are added, at their
** aligned offsets (pwrite; the gaps stay holes, which read as zeros), and
** only the current shard's index, 40 bytes per sample, is kept in memory:
** memory is bounded by the shard size, not the dataset's.  When the next
** sample would take the shard past its target size, the shard is
** completed: index, footer, then the header (so that a file without its
** magic is one that was never completed), fsync, close.
**
** Every shard stays "NAME.tmp" until finish, which renames them all and
** fsyncs the folder; destroy before finish unlinks them.  So a failed or
** abandoned write never leaves a file with a final name, and a dataset
** with final names is complete (a rename that fails in finish takes the
** shards already renamed back).  finish also removes the shards an earlier
** pack left under the same prefix past this one's last (see remove_stale). */
#define _POSIX_C_SOURCE 200809L
#include "storage/blob.h"
#include "os/private_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct stoke__pack_writer {
  const stoke_allocator *a;
  const stoke__sys *sys;    /* borrowed: every file call */
  char *prefix;             /* owned */
  uint64_t shard_bytes;     /* target size of a shard */
  uint32_t align;
  uint64_t data_off;        /* max(4096, align) */
  stoke__blob_strs finals;  /* final path of every shard begun */
  int fd;                   /* the current shard's .tmp, or -1 */
  uint64_t pos;             /* end of the current shard's data */
  uint8_t *index;           /* owned: n entries of cap, current shard */
  size_t n, cap;
  uint8_t *classes;         /* owned: the class table, or NULL */
  size_t classes_len;
  size_t n_stale;           /* shards of an earlier pack removed by finish */
  bool finished;
  bool failed;              /* poisoned: only destroy */
  unsigned max_side;        /* flag RESIZED, or 0 */
  int quality;
  bool publish;             /* rename each shard once complete; source maps */
  uint64_t *map;            /* publish: the current shard's source indices,
                               n of map_cap */
  size_t map_cap;
  size_t published;         /* publish: shards renamed so far */
  uint64_t bytes;           /* written so far */
};

/* Shard paths are at most PATH_CAP bytes (checked in begin_shard), so the
** .tmp name fits on the stack: renaming and unlinking never allocate, and
** so can neither fail nor leave a .tmp behind for lack of memory. */
#define PATH_CAP 4096
#define TMP_CAP (PATH_CAP + 8)

static void tmp_name(const char *final, char *out) {
  snprintf(out, TMP_CAP, "%s.tmp", final);
}

static int fail(stoke__pack_writer *w, int code, char *err, size_t cap,
                const char *what, const char *path) {
  w->failed = true;
  return stoke__errf(err, cap, code, "pack writer: %s%s%s%s%s", path,
                     path[0] ? ": " : "", what,
                     code == STOKE_EIO ? ": " : "",
                     code == STOKE_EIO ? strerror(errno) : "");
}

int stoke__pack_writer_create(const char *prefix, uint64_t shard_bytes,
                              uint32_t align, const stoke_allocator *a,
                              const stoke__sys *sys,
                              stoke__pack_writer **out, char *err,
                              size_t cap) {
  *out = NULL;
  if (align == 0) align = 64;
  if (!prefix || !prefix[0])
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "pack writer: the prefix is empty");
  if (align < 8 || align > 65536 || (align & (align - 1)))
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "pack writer: alignment %u is not a power of two "
                       "in 8..65536", align);
  if (shard_bytes == 0)
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "pack writer: the shard size is 0");
  stoke__pack_writer *w = stoke__calloc(a, 1, sizeof *w);
  if (!w || !(w->prefix = stoke__strdup(a, prefix))) {
    stoke__free(a, w);
    return stoke__errf(err, cap, STOKE_ENOMEM,
                       "pack writer: out of memory");
  }
  w->a = a;
  w->sys = stoke__sys_or_real(sys);
  w->shard_bytes = shard_bytes;
  w->align = align;
  w->data_off = STOKE__MAX(4096u, align);
  w->fd = -1;
  *out = w;
  return 0;
}

int stoke__pack_writer_set_classes(stoke__pack_writer *w,
                                   const char *const *names, size_t n,
                                   char *err, size_t cap) {
  if (w->failed || w->finished || w->finals.n > 0)
    return stoke__errf(err, cap, STOKE_EBADSTATE,
                       "pack writer: class names go before the first "
                       "sample");
  size_t bytes = 0;
  for (size_t k = 0; k < n; k++) {
    size_t len = names[k] ? strlen(names[k]) : 0;
    if (len == 0)
      return stoke__errf(err, cap, STOKE_EINVAL,
                         "pack writer: class %zu has no name", k);
    bytes += len + 1;
    if (bytes > (size_t)16 << 20)
      return stoke__errf(err, cap, STOKE_EINVAL,
                         "pack writer: class names over 16 MiB");
  }
  stoke__free(w->a, w->classes);
  w->classes = NULL;
  w->classes_len = 0;
  if (n == 0) return 0;
  uint8_t *t = stoke__alloc(w->a, STOKE__PACK_CLASSES_HEAD + bytes);
  if (!t)
    return stoke__errf(err, cap, STOKE_ENOMEM,
                       "pack writer: out of memory");
  uint8_t *o = t + STOKE__PACK_CLASSES_HEAD;
  for (size_t k = 0; k < n; k++) {
    size_t len = strlen(names[k]) + 1;
    memcpy(o, names[k], len);
    o += len;
  }
  stoke__put_le32(t, (uint32_t)n);
  stoke__put_le32(t + 4, (uint32_t)bytes);
  stoke__put_le32(t + 8, stoke__crc32(0, t + STOKE__PACK_CLASSES_HEAD,
                                      bytes));
  stoke__put_le32(t + 12, 0);
  w->classes = t;
  w->classes_len = STOKE__PACK_CLASSES_HEAD + bytes;
  /* The data still starts on a page (or align) boundary after the table. */
  uint64_t page = STOKE__MAX(4096u, w->align);
  w->data_off = (STOKE__PACK_HEADER + w->classes_len + page - 1) / page * page;
  return 0;
}

static int begin_shard(stoke__pack_writer *w, char *err, size_t cap) {
  char final[PATH_CAP], tmp[TMP_CAP];
  int n = snprintf(final, sizeof final, "%s-%05zu.stoke", w->prefix,
                   w->finals.n);
  if (n < 0 || (size_t)n >= sizeof final)
    return fail(w, STOKE_EINVAL, err, cap, "path too long", w->prefix);
  tmp_name(final, tmp);
  if (stoke__blob_strs_add(&w->finals, w->a, final, NULL))
    return fail(w, STOKE_ENOMEM, err, cap, "out of memory", "");
  /* O_EXCL: two writers with one prefix must not write one file;
  ** O_NOFOLLOW: nor one through a link planted under its name.  The
  ** cache's shards (publish mode) are private: 0600. */
  w->fd = stoke__sys_open(w->sys, tmp, O_WRONLY | O_CREAT | O_EXCL |
                          O_NOFOLLOW | O_CLOEXEC,
                          w->publish ? STOKE__PRIVATE_FILE_MODE : 0644);
  int rc = 0;
  if (w->fd < 0) {
    w->finals.n--; /* nothing to unlink */
    stoke__free(w->a, w->finals.s[w->finals.n]);
    rc = fail(w, STOKE_EIO, err, cap, "create", tmp);
  }
  w->pos = w->data_off;
  w->n = 0;
  return rc;
}

static int rename_shard(stoke__pack_writer *w, size_t k, char *err,
                        size_t cap);

/* Index, footer, header last; fsync; close.  The file keeps its .tmp
** (publish mode: renamed now). */
static int end_shard(stoke__pack_writer *w, char *err, size_t cap) {
  const char *final = w->finals.s[w->finals.n - 1];
  /* Publish mode: the source map after the last sample, then the index. */
  uint64_t map_off = (w->pos + 7) & ~(uint64_t)7;
  size_t map_bytes = w->publish ? 8 * w->n + 8 : 0;
  uint8_t *map = NULL;
  if (w->publish) {
    map = stoke__alloc(w->a, map_bytes);
    if (!map) return fail(w, STOKE_ENOMEM, err, cap, "out of memory", "");
    for (size_t i = 0; i < w->n; i++) stoke__put_le64(map + 8 * i, w->map[i]);
    stoke__put_le32(map + 8 * w->n, stoke__crc32(0, map, 8 * w->n));
    stoke__put_le32(map + 8 * w->n + 4, 0);
  }
  uint64_t index_off = (map_off + map_bytes + 7) & ~(uint64_t)7;
  size_t index_bytes = w->n * STOKE__PACK_ENTRY;
  uint8_t foot[STOKE__PACK_FOOTER] = {0}, head[STOKE__PACK_HEADER] = {0};
  stoke__put_le64(foot, index_off);
  stoke__put_le64(foot + 8, w->n);
  stoke__put_le32(foot + 16, stoke__crc32(0, w->index, index_bytes));
  memcpy(foot + 24, STOKE__PACK_END_MAGIC, 8);
  memcpy(head, STOKE__PACK_MAGIC, 8);
  stoke__put_le32(head + 8, STOKE__PACK_VERSION);
  stoke__put_le32(head + 12,
                  (w->classes ? STOKE__PACK_FLAG_CLASSES : 0) |
                      (w->max_side ? STOKE__PACK_FLAG_RESIZED : 0) |
                      (w->publish ? STOKE__PACK_FLAG_SOURCE_MAP : 0));
  if (w->max_side) {
    head[48] = (uint8_t)w->max_side;
    head[49] = (uint8_t)(w->max_side >> 8);
    head[50] = (uint8_t)w->quality;
  }
  if (w->publish) stoke__put_le64(head + 52, map_off);
  stoke__put_le64(head + 16, w->n);
  stoke__put_le64(head + 24, w->data_off);
  stoke__put_le64(head + 32, index_off);
  stoke__put_le32(head + 40, w->align);
  stoke__put_le32(head + 44, STOKE__PACK_ENTRY);
  stoke__put_le32(head + 60, stoke__crc32(0, head, 60));
  const char *what = NULL;
  const stoke__sys *sys = w->sys;
  if (w->classes && stoke__sys_pwrite_full(sys, w->fd, w->classes,
                                           w->classes_len,
                                           STOKE__PACK_HEADER))
    what = "write the class table";
  else if (map && stoke__sys_pwrite_full(sys, w->fd, map, map_bytes, map_off))
    what = "write the source map";
  else if (index_bytes && stoke__sys_pwrite_full(sys, w->fd, w->index,
                                                 index_bytes, index_off))
    what = "write the index";
  else if (stoke__sys_pwrite_full(sys, w->fd, foot, sizeof foot,
                                  index_off + index_bytes))
    what = "write the footer";
  else if (stoke__sys_pwrite_full(sys, w->fd, head, sizeof head, 0))
    what = "write the header";
  else if (sys->fsync(sys->user, w->fd))
    what = "fsync";
  int e = errno; /* the failed call's, for fail() */
  stoke__free(w->a, map);
  if (!what)
    w->bytes += index_off + index_bytes + sizeof foot - w->pos +
                sizeof head + w->classes_len;
  /* Written data: a close error (NFS reports write-back failures there)
  ** fails the shard. */
  if (sys->close(sys->user, w->fd) != 0 && !what) {
    what = "close";
    e = errno;
  }
  w->fd = -1;
  if (what) {
    char tmp[TMP_CAP];
    tmp_name(final, tmp);
    errno = e;
    return fail(w, STOKE_EIO, err, cap, what, tmp);
  }
  return w->publish ? rename_shard(w, w->finals.n - 1, err, cap) : 0;
}

/* Publish mode: shard k under its final name now, and the folder synced
** so that the name is durable. */
static int sync_dir(const stoke__pack_writer *w);

static int rename_shard(stoke__pack_writer *w, size_t k, char *err,
                        size_t cap) {
  char tmp[TMP_CAP];
  tmp_name(w->finals.s[k], tmp);
  if (w->sys->rename(w->sys->user, tmp, w->finals.s[k]) != 0)
    return fail(w, STOKE_EIO, err, cap, "rename", tmp);
  w->published = k + 1;
  if (sync_dir(w) != 0)
    return fail(w, STOKE_EIO, err, cap, "fsync of the folder",
                w->finals.s[k]);
  return 0;
}

static int add(stoke__pack_writer *w, size_t source_index, const void *bytes,
               size_t len, int64_t label, uint32_t width, uint32_t height,
               int format, char *err, size_t cap);

int stoke__pack_writer_add(stoke__pack_writer *w, const void *bytes,
                           size_t len, int64_t label, uint32_t width,
                           uint32_t height, int format, char *err,
                           size_t cap) {
  if (w->publish)
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "pack writer: publish mode takes samples with their "
                       "source index");
  return add(w, 0, bytes, len, label, width, height, format, err, cap);
}

int stoke__pack_writer_add_mapped(stoke__pack_writer *w, size_t source_index,
                                  const void *bytes, size_t len,
                                  int64_t label, uint32_t width,
                                  uint32_t height, int format, char *err,
                                  size_t cap) {
  if (!w->publish)
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "pack writer: source indices need publish mode");
  return add(w, source_index, bytes, len, label, width, height, format, err,
             cap);
}

static int add(stoke__pack_writer *w, size_t source_index, const void *bytes,
               size_t len, int64_t label, uint32_t width, uint32_t height,
               int format, char *err, size_t cap) {
  if (w->failed || w->finished)
    return stoke__errf(err, cap, STOKE_EBADSTATE, "pack writer: %s",
                       w->finished ? "already finished"
                                       : "unusable after an earlier error");
  if (format < 0 || format >= STOKE__BLOB_FORMAT_COUNT)
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "pack writer: sample %zu: unknown format %d",
                       w->n, format);
  if (len > 0 && !bytes)
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "pack writer: bytes is NULL");
  uint64_t a1 = w->align - 1;
  if (w->fd >= 0 && w->n > 0) {
    /* The shard's size with this sample: aligned data, index, footer. */
    uint64_t off = (w->pos + a1) & ~a1;
    uint64_t size = off + len + 8 + (w->n + 1) * STOKE__PACK_ENTRY +
                    STOKE__PACK_FOOTER;
    if (size > w->shard_bytes) {
      int rc = end_shard(w, err, cap);
      if (rc) return rc;
    }
  }
  if (w->fd < 0) {
    int rc = begin_shard(w, err, cap);
    if (rc) return rc;
  }
  if (w->n == w->cap) {
    size_t ncap = w->cap ? w->cap * 2 : 1024, bytes_needed;
    uint8_t *idx = NULL;
    if (stoke__mul_ok(ncap, STOKE__PACK_ENTRY, &bytes_needed))
      idx = stoke__alloc(w->a, bytes_needed);
    if (!idx) return fail(w, STOKE_ENOMEM, err, cap, "out of memory", "");
    if (w->n) memcpy(idx, w->index, w->n * STOKE__PACK_ENTRY);
    stoke__free(w->a, w->index);
    w->index = idx;
    w->cap = ncap;
  }
  if (w->publish && w->n == w->map_cap) {
    size_t ncap = w->map_cap ? w->map_cap * 2 : 1024;
    uint64_t *m = stoke__calloc(w->a, ncap, sizeof *m);
    if (!m) return fail(w, STOKE_ENOMEM, err, cap, "out of memory", "");
    if (w->n) memcpy(m, w->map, w->n * sizeof *m);
    stoke__free(w->a, w->map);
    w->map = m;
    w->map_cap = ncap;
  }
  uint64_t off = (w->pos + a1) & ~a1;
  if (len && stoke__sys_pwrite_full(w->sys, w->fd, bytes, len, off)) {
    char tmp[TMP_CAP];
    tmp_name(w->finals.s[w->finals.n - 1], tmp);
    return fail(w, STOKE_EIO, err, cap, "write a sample", tmp);
  }
  uint8_t *e = w->index + w->n * STOKE__PACK_ENTRY;
  stoke__put_le64(e, off);
  stoke__put_le64(e + 8, len);
  stoke__put_le64(e + 16, (uint64_t)label);
  stoke__put_le32(e + 24, width);
  stoke__put_le32(e + 28, height);
  stoke__put_le32(e + 32, (uint32_t)format);
  stoke__put_le32(e + 36, stoke__crc32(0, bytes, len));
  if (w->publish) w->map[w->n] = source_index;
  w->n++;
  w->pos = off + len;
  w->bytes += len;
  return 0;
}

static bool before_first_add(const stoke__pack_writer *w) {
  return !w->failed && !w->finished && w->finals.n == 0;
}

int stoke__pack_writer_set_resize(stoke__pack_writer *w, unsigned max_side,
                                  int quality, char *err, size_t cap) {
  if (!before_first_add(w))
    return stoke__errf(err, cap, STOKE_EBADSTATE,
                       "pack writer: the resize goes before the first "
                       "sample");
  if (max_side < 1 || max_side > 65535 || quality < 1 || quality > 100)
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "pack writer: max side %u (1..65535) or quality %d "
                       "(1..100) out of range", max_side, quality);
  w->max_side = max_side;
  w->quality = quality;
  return 0;
}

int stoke__pack_writer_set_publish(stoke__pack_writer *w, char *err,
                                   size_t cap) {
  if (!before_first_add(w))
    return stoke__errf(err, cap, STOKE_EBADSTATE,
                       "pack writer: publish mode goes before the first "
                       "sample");
  w->publish = true;
  return 0;
}

int stoke__pack_writer_cut(stoke__pack_writer *w, const char **published,
                           char *err, size_t cap) {
  if (published) *published = NULL;
  if (w->failed || w->finished || !w->publish)
    return stoke__errf(err, cap, STOKE_EBADSTATE,
                       "pack writer: cut needs a live writer in publish "
                       "mode");
  if (w->fd < 0 || w->n == 0) return 0;
  int rc = end_shard(w, err, cap);
  if (rc == 0 && published) *published = w->finals.s[w->finals.n - 1];
  return rc;
}

uint64_t stoke__pack_writer_bytes(const stoke__pack_writer *w) {
  return w->bytes;
}

/* fsync the folder holding the prefix, so that the renames are durable. */
static int sync_dir(const stoke__pack_writer *w) {
  char dir[PATH_CAP];
  const char *slash = strrchr(w->prefix, '/');
  if (!slash)
    strcpy(dir, ".");
  else if (slash == w->prefix)
    strcpy(dir, "/");
  else
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - w->prefix), w->prefix);
  const stoke__sys *sys = w->sys;
  int fd = stoke__sys_open(sys, dir, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return -1;
  int rc = sys->fsync(sys->user, fd);
  int e = errno;
  sys->close(sys->user, fd);
  errno = e;
  return rc;
}

/* Re-packing under a prefix that held more shards (a smaller --shard-size
** before, or more samples) replaces PREFIX-00000 .. PREFIX-(n-1) but would
** leave the earlier pack's PREFIX-n, PREFIX-(n+1), ... in place, and a glob
** such as PREFIX-*.stoke would read them with the new shards: samples twice
** and samples that no longer exist, without an error (the class tables
** agree).  So they are removed: only files named as this writer names
** shards and starting with the shard magic, from index n on while they
** exist. */
/* Returns 0 (*removed counts them), or -1 with errno and the path in
** `where` when a candidate could not be checked or removed: a stale shard
** left in place is a wrong dataset, so that is an error, not an end. */
static int remove_stale(stoke__pack_writer *w, char *where, size_t cap) {
  const stoke__sys *sys = w->sys;
  for (size_t k = w->finals.n;; k++) {
    char path[PATH_CAP];
    int n = snprintf(path, sizeof path, "%s-%05zu.stoke", w->prefix, k);
    if (n < 0 || (size_t)n >= sizeof path)
      return 0;
    snprintf(where, cap, "%s", path);
    int fd = stoke__sys_open(sys, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
    if (fd < 0)
      return errno == ENOENT || errno == ELOOP ? 0 : -1; /* ELOOP: a link */
    char magic[8];
    int rd = stoke__sys_pread_full(sys, fd, magic, sizeof magic, 0);
    int e = errno;
    sys->close(sys->user, fd);
    if (rd != 0 && e != 0) {
      errno = e;
      return -1;
    }
    if (rd != 0 || memcmp(magic, STOKE__PACK_MAGIC, sizeof magic) != 0)
      return 0; /* not a shard (too short, other bytes): not ours */
    if (sys->unlink(sys->user, path) != 0)
      return -1;
    w->n_stale++;
  }
}

int stoke__pack_writer_finish(stoke__pack_writer *w, size_t *n_shards,
                              char *err, size_t cap) {
  if (n_shards) *n_shards = 0;
  if (w->failed || w->finished)
    return stoke__errf(err, cap, STOKE_EBADSTATE, "pack writer: %s",
                       w->finished ? "already finished"
                                       : "unusable after an earlier error");
  if (w->fd >= 0) {
    int rc = end_shard(w, err, cap);
    if (rc) return rc;
  }
  for (size_t k = w->published; k < w->finals.n; k++) {
    const char *final = w->finals.s[k];
    char tmp[TMP_CAP];
    tmp_name(final, tmp);
    if (w->sys->rename(w->sys->user, tmp, final) != 0) {
      /* The shards before k are complete but the dataset is not: take
      ** them back, so that no final name of a partial pack stays (destroy
      ** unlinks the .tmp files from k on). */
      int e = errno;
      for (size_t j = 0; j < k; j++)
        w->sys->unlink(w->sys->user, w->finals.s[j]);
      errno = e;
      return fail(w, STOKE_EIO, err, cap, "rename", tmp);
    }
  }
  w->finished = true;
  /* From here on the shards are complete under their final names; what
  ** fails is the clean-up of an earlier pack or durability, and the
  ** message says so. */
  char where[PATH_CAP];
  if (!w->publish && remove_stale(w, where, sizeof where) != 0)
    return stoke__errf(err, cap, STOKE_EIO,
                       "pack writer: %s: cannot remove this earlier pack's "
                       "shard: %s (the %zu new shards are complete; remove "
                       "it, or a glob reads it with them)", where,
                       strerror(errno), w->finals.n);
  if (w->finals.n && sync_dir(w) != 0)
    return stoke__errf(err, cap, STOKE_EIO,
                       "pack writer: %s: fsync of the folder: %s (the %zu "
                       "shards are complete; their names may not be "
                       "durable)", w->prefix, strerror(errno), w->finals.n);
  if (n_shards) *n_shards = w->finals.n;
  return 0;
}

size_t stoke__pack_writer_n_stale(const stoke__pack_writer *w) {
  return w->n_stale;
}

const char *stoke__pack_writer_shard_path(const stoke__pack_writer *w,
                                          size_t k) {
  return k < w->finals.n ? w->finals.s[k] : NULL;
}

void stoke__pack_writer_destroy(stoke__pack_writer *w) {
  if (!w) return;
  const stoke_allocator *a = w->a;
  if (w->fd >= 0) w->sys->close(w->sys->user, w->fd);
  if (!w->finished) {
    /* Unlink .tmp files; after a failed finish some may already carry
    ** their final names, but those are complete shards (as are the ones
    ** publish mode renamed). */
    for (size_t k = w->published; k < w->finals.n; k++) {
      char tmp[TMP_CAP];
      tmp_name(w->finals.s[k], tmp);
      w->sys->unlink(w->sys->user, tmp);
    }
  }
  stoke__blob_strs_free(&w->finals, a);
  stoke__free(a, w->index);
  stoke__free(a, w->map);
  stoke__free(a, w->classes);
  stoke__free(a, w->prefix);
  stoke__free(a, w);
}
