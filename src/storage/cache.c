/* cache.c — a cache that packs as it reads.
**
** DESIGN
** Reading a folder or tar dataset costs an open and a read per sample
** (and its JPEGs decode from their first byte); stoke's packed shards are
** faster (mmap, no call per sample, crops cut by restart intervals).  The
** cache turns the first into the second on the way: when a worker reads a
** sample the cache does not hold, it copies the bytes into a queue for the
** writer thread, which rewrites JPEGs losslessly with restart cuts (as
** stoke pack does) and appends them to a packed shard under DIR/<key>/.
** A shard is published (fsync'ed, renamed from NAME.tmp to NAME) when it
** reaches shard_bytes or when the loader ends an epoch, then mapped, and
** the samples it holds are read from it from then on.  So the first epoch
** reads the source (and fills the cache in the background), later epochs
** and later runs read the shards.
**
** The key: the source's fingerprint, its sample count and every file's
** path, size and modification time (stoke__blobset_content_key).  A
** changed file gives another key, hence another folder: a changed source
** is never read stale.  Each shard carries a source map (the index of each
** of its samples in the dataset), so its samples can come in any order.
**
** Never half a shard under a final name: a shard is written as NAME.tmp
** and renamed only once complete (pack_writer.c's publish mode).  An
** interrupted run leaves at most .tmp files, named with the writer's
** process id; a later open removes those whose process is gone.  Two
** loaders (or processes) may fill one key at once: their shard names
** differ (pid and a random token), a sample they both wrote is read from
** the first shard that holds it.
**
** Private (os/private_file.h): the folders are made 0700 and the shards
** 0600, as the decoded bytes of a private dataset would otherwise be
** anyone's to read; a cache folder, key folder or shard owned by another
** user or writable by group or others is refused (the open fails, naming
** it), as anyone may compute a key (paths, sizes and mtimes) and plant a
** shard under it.
**
** Bounded: the queue holds at most STOKE__CACHE_QUEUE_BYTES; a sample that
** finds it full is not queued (it is cached in a later epoch), so the
** workers never wait for the disk.  The disk budget (max_bytes, and the
** file system's last 5%) and the shard table (STOKE__CACHE_MAX_SHARDS)
** stop the writing, not the loader.  A write error stops the writing
** too, and is reported in the statistics: the loader goes on reading the
** source.
**
** Threads and locks: the writer thread (stoke-cache) owns the pack
** writer; mu guards the queue and the flags.  The map (one
** atomic word per sample: 0 not held, PENDING queued or being written,
** else shard and entry) is published with release stores after the
** shard's blobset is in the table, and read with acquire loads. */
#define _POSIX_C_SOURCE 200809L
#include "storage/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "decode/decode.h"
#include "os/private_file.h"

#define PENDING UINT64_C(1)
#define ENTRY_BITS 40
#define ENTRY_MASK ((UINT64_C(1) << ENTRY_BITS) - 1)
#define DEFAULT_SHARD_BYTES ((uint64_t)64 << 20)
#define PATH_CAP 4096

typedef struct item {
  struct item *next;
  size_t index;
  size_t len;
  uint32_t width, height;
  int format;      /* STOKE__BLOB_* */
  uint8_t bytes[]; /* len */
} item;

struct stoke__cache {
  const stoke__blobset *set; /* borrowed: the source's */
  const stoke__sys *sys;
  const stoke_allocator *a;
  char path[PATH_CAP];       /* DIR/<key> */
  char prefix[PATH_CAP];     /* DIR/<key>/c-<pid>-<token> */
  size_t n;                  /* samples */
  _Atomic uint64_t *map;     /* n */
  stoke__blobset **shards;   /* STOKE__CACHE_MAX_SHARDS; append-only */
  atomic_size_t n_shards;
  uint64_t max_bytes, shard_bytes;
  stoke__thread *thread;
  /* The writer thread's own. */
  stoke__pack_writer *w;
  uint64_t shard_start;      /* stoke__pack_writer_bytes at its start */

  pthread_mutex_t mu;
  pthread_cond_t cv;         /* the queue, the flags, idle */
  /* Protected by mu. */
  item *head, *tail;
  uint64_t queued;           /* bytes in the queue */
  bool stop, cut, busy;      /* busy: the writer holds an item or cuts */
  bool full;                 /* no more writing (budget, table, error) */
  uint64_t disk;             /* bytes of the cache's shards */
  char error[STOKE__ERRMSG_CAP];
  size_t held;               /* samples the map holds */
  atomic_uint_least64_t hits, written, dropped;
};

uint64_t stoke__cache_host_bytes(size_t n_samples) {
  return (uint64_t)n_samples * sizeof(uint64_t) + STOKE__CACHE_QUEUE_BYTES +
         STOKE__CACHE_MAX_SHARDS * sizeof(stoke__blobset *) +
         sizeof(stoke__cache);
}

static uint64_t encode(size_t shard, size_t entry) {
  return (uint64_t)(shard + 1) << ENTRY_BITS | (uint64_t)entry;
}

/* ---- the shards ----------------------------------------------------------- */

/* Map shard `path` and hand its samples to the map (mu not needed: the
** writer, or open before the writer starts).  Entries for another dataset
** (an index out of range, another label) are ignored. */
static int adopt(stoke__cache *c, const char *path, bool mine, char *err,
                 size_t cap) {
  size_t k = atomic_load_explicit(&c->n_shards, memory_order_relaxed);
  if (k >= STOKE__CACHE_MAX_SHARDS) return STOKE_EBUDGET;
  const char *paths[1] = {path};
  stoke__blobset *s;
  int rc = stoke__blobset_open_packed(paths, 1, 0, c->a, c->sys, &s, err, cap);
  if (rc != 0) return rc;
  c->shards[k] = s;
  atomic_store_explicit(&c->n_shards, k + 1, memory_order_release);
  size_t got = 0;
  for (size_t e = 0; e < stoke__blobset_n_samples(s); e++) {
    size_t i = stoke__blobset_source_index(s, e);
    if (i >= c->n ||
        stoke__blobset_label(s, e) != stoke__blobset_label(c->set, i))
      continue;
    uint64_t want = mine ? PENDING : 0;
    /* Ours: the samples we queued; another's: those nobody holds. */
    if (atomic_compare_exchange_strong_explicit(
            &c->map[i], &want, encode(k, e), memory_order_release,
            memory_order_relaxed))
      got++;
  }
  struct stat st;
  pthread_mutex_lock(&c->mu);
  c->held += got;
  if (c->sys->stat(c->sys->user, path, &st) == 0) c->disk += (uint64_t)st.st_size;
  pthread_mutex_unlock(&c->mu);
  return 0;
}

/* A writer's leftover NAME.tmp ("c-<pid>-..."): its process is gone. */
static bool orphan(const char *name) {
  if (strncmp(name, "c-", 2) != 0) return false;
  long pid = 0;
  for (const char *p = name + 2; *p >= '0' && *p <= '9'; p++)
    pid = pid * 10 + (*p - '0');
  return pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 &&
         errno == ESRCH;
}

/* A shard found under the key: ours and private (os/private_file.h). */
static int check_shard(const stoke__sys *sys, const char *path, char *err,
                       size_t cap) {
  int fd;
  int rc = stoke__secure_open_read(sys, path, STOKE__PRIVATE_FILE_MODE, &fd,
                                   err, cap);
  if (rc == 0) sys->close(sys->user, fd);
  return rc;
}

/* The complete shards already under the key; orphaned .tmp files go. */
static int scan(stoke__cache *c, char *err, size_t cap) {
  const stoke__sys *sys = c->sys;
  DIR *d = sys->opendir(sys->user, c->path);
  if (!d)
    return stoke__errf(err, cap, STOKE_EIO, "cache: %s: %s", c->path,
                       strerror(errno));
  struct dirent *de;
  int rc = 0;
  while (rc == 0 && (de = sys->readdir(sys->user, d)) != NULL) {
    char p[PATH_CAP];
    if (de->d_name[0] == '.' ||
        snprintf(p, sizeof p, "%s/%s", c->path, de->d_name) >= (int)sizeof p)
      continue;
    if (stoke__ends_with(de->d_name, ".stoke.tmp") && orphan(de->d_name)) {
      sys->unlink(sys->user, p);
    } else if (stoke__ends_with(de->d_name, ".stoke")) {
      char why[STOKE__ERRMSG_CAP];
      int arc = check_shard(sys, p, why, sizeof why);
      /* Another's shard, or one others may write: refused, not read. */
      if (arc != 0 && arc != STOKE_EIO) {
        rc = stoke__errf(err, cap, arc, "cache: %s", why);
        break;
      }
      arc = adopt(c, p, false, why, sizeof why);
      /* A damaged shard is left out, not trusted; a full table stops. */
      if (arc == STOKE_ENOMEM) rc = stoke__errf(err, cap, arc, "%s", why);
      if (arc == STOKE_EBUDGET) break;
    }
  }
  sys->closedir(sys->user, d);
  return rc;
}

/* The cache's folder (the user's) and the key's folder, made 0700 if
** absent and refused when another user owns them or may write them: a
** shard planted there would be read as the dataset. */
static int make_dirs(const stoke__sys *sys, const char *root,
                     const char *path, char *err, size_t cap) {
  char why[STOKE__ERRMSG_CAP];
  int rc = stoke__private_mkdirs(sys, root, STOKE__PRIVATE_DIR_MODE, why,
                                 sizeof why);
  if (rc == 0)
    rc = stoke__private_mkdirs(sys, path, STOKE__PRIVATE_DIR_MODE, why,
                               sizeof why);
  return rc ? stoke__errf(err, cap, rc, "cache: %s", why) : 0;
}

/* ---- the writer ------------------------------------------------------------ */

static void stop_writing(stoke__cache *c, const char *why) {
  pthread_mutex_lock(&c->mu);
  c->full = true;
  if (why && !c->error[0]) snprintf(c->error, sizeof c->error, "%s", why);
  pthread_mutex_unlock(&c->mu);
}

/* Publish the shard being written and adopt it. */
static void publish(stoke__cache *c) {
  if (!c->w) return;
  char err[STOKE__ERRMSG_CAP];
  const char *path;
  if (stoke__pack_writer_cut(c->w, &path, err, sizeof err) != 0) {
    stop_writing(c, err);
    stoke__pack_writer_destroy(c->w);
    c->w = NULL;
    return;
  }
  c->shard_start = stoke__pack_writer_bytes(c->w);
  if (path && adopt(c, path, true, err, sizeof err) != 0)
    stop_writing(c, err);
}

/* Room on the file system for another shard, leaving its last 5%. */
static bool disk_room(stoke__cache *c) {
  const stoke__sys *sys = c->sys;
  int fd = stoke__sys_open(sys, c->path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return false;
  struct statvfs v;
  bool ok = true;
  if (sys->fstatvfs(sys->user, fd, &v) == 0) {
    uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
    uint64_t total = (uint64_t)v.f_blocks * v.f_frsize;
    ok = avail > total / 20 + c->shard_bytes;
  }
  sys->close(sys->user, fd);
  return ok;
}

/* Write one sample (the writer thread).  false: it was not written. */
static bool write_one(stoke__cache *c, const item *it) {
  char err[STOKE__ERRMSG_CAP];
  pthread_mutex_lock(&c->mu);
  bool full = c->full;
  uint64_t disk = c->disk;
  pthread_mutex_unlock(&c->mu);
  if (full) return false;
  bool ok = true;
  uint64_t in_shard = c->w ? stoke__pack_writer_bytes(c->w) - c->shard_start
                           : 0;
  if (c->max_bytes && disk + in_shard + it->len + 8192 > c->max_bytes) {
    stop_writing(c, NULL); /* the budget: not an error */
    ok = false;
  } else if (!c->w) {
    if (!disk_room(c)) {
      stop_writing(c, NULL);
      ok = false;
    } else if (stoke__pack_writer_create(c->prefix, UINT64_MAX, 0, c->a,
                                         c->sys, &c->w, err,
                                         sizeof err) != 0 ||
               stoke__pack_writer_set_publish(c->w, err, sizeof err) != 0) {
      stop_writing(c, err);
      stoke__pack_writer_destroy(c->w);
      c->w = NULL;
      ok = false;
    } else {
      c->shard_start = 0;
    }
  }
  if (ok &&
      stoke__pack_writer_add_mapped(c->w, it->index, it->bytes, it->len,
                                    stoke__blobset_label(c->set, it->index),
                                    it->width, it->height, it->format, err,
                                    sizeof err) != 0) {
    stop_writing(c, err);
    stoke__pack_writer_destroy(c->w); /* its .tmp goes */
    c->w = NULL;
    ok = false;
  }
  if (ok) {
    atomic_fetch_add_explicit(&c->written, 1, memory_order_relaxed);
    if (stoke__pack_writer_bytes(c->w) - c->shard_start >= c->shard_bytes)
      publish(c);
  }
  return ok;
}

static void *writer_main(void *arg) {
  stoke__cache *c = arg;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    while (!c->head && !c->stop && !c->cut)
      pthread_cond_wait(&c->cv, &c->mu);
    if (c->stop && !c->head) break; /* what was queued is written first */
    /* An epoch ended: what it wrote is published before anything newer,
    ** so that the next epoch reads it. */
    bool cut = c->cut;
    item *it = NULL;
    if (cut) {
      c->cut = false;
    } else {
      it = c->head;
      c->head = it->next;
      if (!c->head) c->tail = NULL;
      c->queued -= it->len;
    }
    c->busy = true;
    pthread_mutex_unlock(&c->mu);
    if (cut) {
      publish(c);
    } else {
      if (!write_one(c, it)) {
        atomic_store_explicit(&c->map[it->index], 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->dropped, 1, memory_order_relaxed);
      }
      stoke__free(c->a, it);
    }
    pthread_mutex_lock(&c->mu);
    c->busy = false;
    pthread_cond_broadcast(&c->cv);
  }
  /* Stopped, the queue written: the shard in progress is published. */
  pthread_mutex_unlock(&c->mu);
  publish(c);
  return NULL;
}

/* ---- the handle ---------------------------------------------------------- */

static void free_cache(stoke__cache *c) {
  size_t k = atomic_load_explicit(&c->n_shards, memory_order_relaxed);
  for (size_t i = 0; i < k; i++) stoke__blobset_close(c->shards[i]);
  stoke__pack_writer_destroy(c->w);
  stoke__free(c->a, c->shards);
  stoke__free(c->a, (void *)c->map);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  stoke__free(c->a, c);
}

int stoke__cache_open(const stoke__blobset *set, const stoke__cache_opts *o,
                      stoke__cache **out, char *err, size_t cap) {
  *out = NULL;
  uint64_t content;
  int rc = stoke__blobset_content_key(set, &content, err, cap);
  if (rc != 0) return rc;
  size_t n = stoke__blobset_n_samples(set);
  uint64_t key = stoke__hash_u64(stoke__hash_u64(o->fingerprint, n), content);
  const stoke__sys *sys = stoke__sys_or_real(o->sys);
  stoke__cache *c = stoke__calloc(o->alloc, 1, sizeof *c);
  if (!c) return stoke__errf(err, cap, STOKE_ENOMEM, "cache: out of memory");
  c->set = set;
  c->sys = sys;
  c->a = o->alloc;
  c->n = n;
  c->max_bytes = o->max_bytes;
  c->shard_bytes = o->shard_bytes ? o->shard_bytes : DEFAULT_SHARD_BYTES;
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  atomic_init(&c->n_shards, 0);
  atomic_init(&c->hits, 0);
  atomic_init(&c->written, 0);
  atomic_init(&c->dropped, 0);
  uint64_t token = stoke__mix64((uint64_t)stoke__now_ns() ^
                                ((uint64_t)getpid() << 32) ^
                                (uint64_t)(uintptr_t)c);
  if (snprintf(c->path, sizeof c->path, "%s/%016llx", o->dir,
               (unsigned long long)key) >= (int)sizeof c->path ||
      snprintf(c->prefix, sizeof c->prefix, "%s/c-%ld-%08llx", c->path,
               (long)getpid(), (unsigned long long)(token >> 32)) >=
          (int)sizeof c->prefix) {
    free_cache(c);
    return stoke__errf(err, cap, STOKE_EINVAL, "cache: %s: path too long",
                       o->dir);
  }
  c->map = stoke__calloc(c->a, n ? n : 1, sizeof *c->map);
  c->shards = stoke__calloc(c->a, STOKE__CACHE_MAX_SHARDS, sizeof *c->shards);
  if (!c->map || !c->shards) {
    free_cache(c);
    return stoke__errf(err, cap, STOKE_ENOMEM, "cache: out of memory");
  }
  for (size_t i = 0; i < n; i++) atomic_init(&c->map[i], 0);
  rc = make_dirs(sys, o->dir, c->path, err, cap);
  if (rc == 0) rc = scan(c, err, cap);
  if (rc == 0) {
    rc = stoke__thread_start(&c->thread, c->a, sys, "stoke-cache",
                             writer_main, c);
    if (rc != 0)
      stoke__errf(err, cap, rc, "cache: cannot start its writer: %s",
                  stoke_strerror(rc));
  }
  if (rc != 0) {
    free_cache(c);
    return rc;
  }
  *out = c;
  return 0;
}

void stoke__cache_close(stoke__cache *c) {
  if (!c) return;
  pthread_mutex_lock(&c->mu);
  c->stop = true;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  stoke__thread_join(c->thread, c->a);
  free_cache(c);
}

const char *stoke__cache_path(const stoke__cache *c) { return c->path; }

/* ---- reading ---------------------------------------------------------------- */

/* Queue sample i's bytes for the writer, rewritten with restart cuts by
** the reading worker (dec, its decoder), unless the queue is full, the
** writing stopped, or someone queued or wrote it already. */
static void offer(stoke__cache *c, stoke__decoder *dec, size_t i,
                  const uint8_t *bytes, size_t len) {
  uint64_t none = 0;
  if (!atomic_compare_exchange_strong_explicit(&c->map[i], &none, PENDING,
                                               memory_order_relaxed,
                                               memory_order_relaxed))
    return;
  pthread_mutex_lock(&c->mu);
  /* Room for the bytes as read; a rewrite is about their size (the bench
  ** corpus: 106.1 MB in, 107.2 MB out), and may take 10% more. */
  size_t want = len + len / 8 + 1024;
  bool room = !c->full && !c->stop &&
              c->queued + want <= STOKE__CACHE_QUEUE_BYTES;
  if (room) c->queued += want; /* reserved before the allocation */
  pthread_mutex_unlock(&c->mu);
  uint8_t *rewritten = NULL;
  size_t rn = 0;
  char err[STOKE__ERRMSG_CAP];
  /* Restart cuts, as stoke pack; a JPEG the rewrite cannot take is kept. */
  if (room && stoke__jpeg_transcode(dec, bytes, len, &rewritten, &rn, err,
                                    sizeof err) == 0 && rewritten &&
      rn <= want) {
    bytes = rewritten;
    len = rn;
  }
  item *it = room ? stoke__alloc(c->a, sizeof *it + len) : NULL;
  if (!it) {
    if (room) {
      pthread_mutex_lock(&c->mu);
      c->queued -= want;
      pthread_mutex_unlock(&c->mu);
    }
    stoke__free(c->a, rewritten);
    atomic_store_explicit(&c->map[i], 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->dropped, 1, memory_order_relaxed);
    return;
  }
  it->next = NULL;
  it->index = i;
  it->len = len;
  memcpy(it->bytes, bytes, len);
  stoke__free(c->a, rewritten);
  stoke__img_info info;
  memset(&info, 0, sizeof info);
  if (!stoke__decode_peek(it->bytes, len, &info))
    stoke__decode_probe(dec, it->bytes, len, &info, err, sizeof err);
  it->width = info.width;
  it->height = info.height;
  it->format = info.format == STOKE__IMG_JPEG  ? STOKE__BLOB_JPEG
               : info.format == STOKE__IMG_PNG ? STOKE__BLOB_PNG
                                               : STOKE__BLOB_UNKNOWN;
  pthread_mutex_lock(&c->mu);
  c->queued -= want - len; /* what it holds */
  if (c->tail)
    c->tail->next = it;
  else
    c->head = it;
  c->tail = it;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* Sample i's place in a published shard: true and *shard, *entry. */
static bool held(stoke__cache *c, size_t i, stoke__blobset **shard,
                 size_t *entry) {
  uint64_t v = atomic_load_explicit(&c->map[i], memory_order_acquire);
  if (v <= PENDING) return false;
  *shard = c->shards[(v >> ENTRY_BITS) - 1];
  *entry = (size_t)(v & ENTRY_MASK);
  return true;
}

int stoke__cache_read(stoke__cache *c, const stoke__blobset *set, size_t i,
                      stoke__blob_reader *r, stoke__decoder *dec,
                      const uint8_t **ptr, size_t *len, char *err,
                      size_t cap) {
  stoke__blobset *shard;
  size_t entry;
  if (i < c->n && held(c, i, &shard, &entry) &&
      stoke__blobset_read(shard, entry, NULL, ptr, len, err, cap) == 0) {
    atomic_fetch_add_explicit(&c->hits, 1, memory_order_relaxed);
    return 0;
  }
  int rc = stoke__blobset_read(set, i, r, ptr, len, err, cap);
  if (rc == 0 && i < c->n) offer(c, dec, i, *ptr, *len);
  return rc;
}

void stoke__cache_done(stoke__cache *c, const stoke__blobset *set, size_t i,
                       const uint8_t *ptr, size_t len) {
  stoke__blobset *shard;
  size_t entry;
  if (i < c->n && held(c, i, &shard, &entry))
    stoke__blobset_done(shard, entry, ptr, len);
  else
    stoke__blobset_done(set, i, ptr, len);
}

void stoke__cache_cut(stoke__cache *c) {
  pthread_mutex_lock(&c->mu);
  c->cut = true;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

void stoke__cache_sync(stoke__cache *c) {
  pthread_mutex_lock(&c->mu);
  for (;;) {
    /* Everything queued written, then published (a cut goes before the
    ** queue: asked first, it would publish before the writing). */
    while (!c->stop && (c->head || c->busy))
      pthread_cond_wait(&c->cv, &c->mu);
    c->cut = true;
    pthread_cond_broadcast(&c->cv);
    while (!c->stop && (c->cut || c->busy))
      pthread_cond_wait(&c->cv, &c->mu);
    if (c->stop || !c->head) break;
  }
  pthread_mutex_unlock(&c->mu);
}

void stoke__cache_stats_get(stoke__cache *c, stoke__cache_stats *out) {
  memset(out, 0, sizeof *out);
  out->hits = atomic_load_explicit(&c->hits, memory_order_relaxed);
  out->written = atomic_load_explicit(&c->written, memory_order_relaxed);
  out->dropped = atomic_load_explicit(&c->dropped, memory_order_relaxed);
  pthread_mutex_lock(&c->mu);
  out->bytes = c->disk;
  out->samples = c->held;
  out->full = c->full;
  snprintf(out->error, sizeof out->error, "%s", c->error);
  pthread_mutex_unlock(&c->mu);
}
