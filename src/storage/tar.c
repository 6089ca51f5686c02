/* tar.c — WebDataset-style tar shards.
**
** Open indexes every shard by reading its 512-byte headers with pread (the
** member data is skipped, never loaded; only .cls labels and long-name or
** pax records are read).  Members are grouped into samples by WebDataset's
** rule: the key is the member's folder plus its basename up to the first
** dot, the field is the rest.  Members with the same key are one sample
** wherever they are in the shard: WebDataset needs them adjacent (tar
** --sort=name), but GNU tar stores a folder in readdir order, and a shard
** that silently loses half its labels is worse than a small per-shard
** table of keys.  Samples come in order of their key's first member and
** never span shards.
**
** Supported headers: v7/ustar (with the 155-byte prefix), GNU 'L' long
** names, pax 'x' records (path=, size=) and 'g' (ignored); GNU base-256
** sizes.  A bad checksum, a header or member cut off by the end of the
** file, or a missing end-of-archive marker is an error naming the shard
** and the offset: tar has no index, so a damaged shard cannot be trusted
** past the damage.
**
** A sample without a supported image or without a .cls label is skipped
** and listed (stoke__blobset_skipped) rather than failing the open: a
** dataset with a few caption-only samples stays usable, and the count is
** there to check.
**
** Each shard's descriptor stays open for the blobset's life (shards are
** few); reads pread into the worker's buffer.
**
** A shard given as a URL (http://, https://, s3://) is streamed, never
** kept whole: open indexes it through a forward-only window of Range
** requests (remote.h; the shards side by side, io_concurrency at once),
** which fetches the headers and the small members between them and skips
** a large member's data; then each sample is one Range request into the
** worker's buffer, and the block order's read-ahead asks for runs of
** consecutive samples (prefetch.h), as for a remote packed shard.  No disk,
** and the memory the read-ahead's budget.  A server that ignores Range
** gets the shard fetched whole into an unlinked temporary file instead;
** with a cache folder (rcache.h) each shard is fetched whole into it, once,
** and read there as a local shard. */
#define _POSIX_C_SOURCE 200809L
#include "storage/blob.h"
#include "storage/prefetch.h"
#include "storage/rcache.h"
#include "storage/remote.h"
#include "storage/url.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLOCK 512
#define MAX_LONGNAME 65536     /* a GNU 'L' entry's data */
#define MAX_PAX (1u << 20)     /* a pax 'x' entry's data */
#define MAX_CLS 64             /* a .cls label's text */

typedef struct tar_sample {
  char *name;       /* owned: the image member's name */
  uint64_t offset;  /* of the image's data in its shard */
  uint64_t len;
  int64_t label;
  uint32_t shard;
  uint8_t format;
} tar_sample;

typedef struct tar_impl {
  const stoke__sys *sys; /* borrowed: every file call */
  char **paths;     /* owned, one block (stoke__blob_expand) */
  int *fds;         /* owned, n_shards */
  size_t n_shards;
  tar_sample *v;    /* owned, n of cap */
  size_t n, cap;
  stoke__rcache *rcache; /* owned; remote shards with a cache_dir, or NULL:
                            their fds are then cache entries (rcache.h) */
  stoke__http *http;     /* owned; remote shards only, else NULL */
  stoke__prefetch *pf;   /* owned; the streamed shards' read-ahead, or NULL */
  char **urls;           /* owned, n_shards (each owned), remote only: the
                            URL a streamed shard is read from, NULL for one
                            read from its descriptor */
  uint64_t *keys;        /* owned, n_shards, remote only: a streamed shard's
                            size and ETag hashed, 0 without an ETag */
} tar_impl;

static void tar_destroy(void *impl, const stoke_allocator *a) {
  tar_impl *t = impl;
  if (!t) return;
  for (size_t i = 0; i < t->n; i++) stoke__free(a, t->v[i].name);
  stoke__free(a, t->v);
  if (t->fds)
    for (size_t k = 0; k < t->n_shards; k++)
      if (t->fds[k] >= 0) t->sys->close(t->sys->user, t->fds[k]);
  stoke__rcache_close(t->rcache); /* after the closes: it evicts */
  stoke__prefetch_destroy(t->pf);
  stoke__http_destroy(t->http); /* after the read-ahead, which uses it */
  if (t->urls)
    for (size_t k = 0; k < t->n_shards; k++) stoke__free(a, t->urls[k]);
  stoke__free(a, t->urls);
  stoke__free(a, t->keys);
  stoke__free(a, t->fds);
  stoke__free(a, t->paths);
  stoke__free(a, t);
}

static int64_t tar_label(const void *impl, size_t i) {
  return ((const tar_impl *)impl)->v[i].label;
}

static int tar_format(const void *impl, size_t i) {
  return ((const tar_impl *)impl)->v[i].format;
}

static void tar_describe(const void *impl, size_t i, char *buf, size_t cap) {
  const tar_impl *t = impl;
  const tar_sample *s = &t->v[i];
  snprintf(buf, cap, "%s member %s at offset %llu", t->paths[s->shard],
           s->name, (unsigned long long)s->offset);
}

static int tar_read(const void *impl, size_t i, stoke__blob_reader *r,
                    const uint8_t **ptr, size_t *len, char *err, size_t cap) {
  const tar_impl *t = impl;
  const tar_sample *s = &t->v[i];
  if (!r)
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "tar source: sample %zu: no reader", i);
  if (s->len > SIZE_MAX / 2 ||
      stoke__blob_reader_reserve(r, (size_t)s->len) != 0)
    return stoke__errf(err, cap, STOKE_ENOMEM,
                       "%s member %s (sample %zu): out of memory for "
                       "%llu bytes", t->paths[s->shard], s->name, i,
                       (unsigned long long)s->len);
  const char *url = t->urls ? t->urls[s->shard] : NULL;
  if (url && s->len) { /* streamed: read ahead, or one Range request */
    if (!(t->pf && stoke__prefetch_take(t->pf, s->shard, s->offset,
                                        s->len, r->buf))) {
      int rc = stoke__http_get_range(t->http, url, s->offset,
                                     (size_t)s->len, r->buf, NULL, err, cap);
      if (rc) return rc;
    }
  } else if (!url && stoke__sys_pread_full(t->sys, t->fds[s->shard], r->buf,
                            (size_t)s->len, s->offset) != 0)
    return stoke__errf(err, cap, STOKE_EIO,
                       "%s member %s (sample %zu): read %llu bytes at "
                       "offset %llu: %s", t->paths[s->shard], s->name, i,
                       (unsigned long long)s->len,
                       (unsigned long long)s->offset,
                       errno ? strerror(errno) : "the shard shrank");
  *ptr = r->buf;
  *len = (size_t)s->len;
  return 0;
}

static uint64_t tar_bytes(const void *impl, size_t i) {
  return ((const tar_impl *)impl)->v[i].len;
}

/* Consecutive samples of a shard are one range of its file: a hint to
** the kernel, or for a streamed shard one Range request to the
** read-ahead (runs of at most STOKE__REMOTE_PREFETCH_RUN bytes). */
static void tar_read_ahead(const void *impl, size_t first, size_t n) {
  const tar_impl *t = impl;
  for (size_t i = first; i < first + n;) {
    const tar_sample *a = &t->v[i];
    const char *url = t->urls ? t->urls[a->shard] : NULL;
    uint64_t payload = a->len;
    size_t j = i;
    while (j + 1 < first + n && t->v[j + 1].shard == a->shard &&
           t->v[j + 1].offset >= t->v[j].offset + t->v[j].len &&
           (!url ||
            t->v[j + 1].offset + t->v[j + 1].len - a->offset <=
                STOKE__REMOTE_PREFETCH_RUN))
      payload += t->v[++j].len;
    const tar_sample *b = &t->v[j];
    uint64_t len = b->offset + b->len - a->offset;
    if (!url)
      t->sys->fadvise(t->sys->user, t->fds[a->shard], a->offset, len,
                      POSIX_FADV_WILLNEED);
    else if (t->pf && len)
      stoke__prefetch_request(t->pf, url, a->shard, a->offset, len, payload);
    i = j + 1;
  }
}

/* Every shard's base name, size and modification time. */
static int tar_content_key(const void *impl, uint64_t *key, char *err,
                           size_t cap) {
  const tar_impl *t = impl;
  uint64_t h = stoke__hash_str(0x7A4C4C4EULL, "tar");
  for (size_t k = 0; k < t->n_shards; k++) {
    if (t->urls && t->urls[k]) { /* streamed: its size and ETag */
      if (!t->keys[k])
        return stoke__errf(err, cap, STOKE_EINVAL, "%s: the server sent "
                           "no ETag: a changed object cannot be told",
                           t->paths[k]);
      h = stoke__hash_u64(h, t->keys[k]);
      continue;
    }
    struct stat st;
    if (t->sys->fstat(t->sys->user, t->fds[k], &st) != 0)
      return stoke__errf(err, cap, STOKE_EIO, "%s: stat: %s", t->paths[k],
                         strerror(errno));
    const char *base = strrchr(t->paths[k], '/');
    h = stoke__hash_str(h, base ? base + 1 : t->paths[k]);
    h = stoke__hash_u64(h, (uint64_t)st.st_size);
    h = stoke__hash_u64(h, (uint64_t)st.st_mtim.tv_sec * 1000000000u +
                               (uint64_t)st.st_mtim.tv_nsec);
  }
  *key = h;
  return 0;
}

static bool tar_rcache_counts(const void *impl, stoke__rcache_counts *out);

/* Streamed shards: the read-ahead buffer's budget (prefetch.c never holds
** more). */
static uint64_t tar_held_bytes(const void *impl) {
  const tar_impl *t = impl;
  return t->pf ? STOKE__REMOTE_PREFETCH_BYTES : 0;
}

static const struct stoke__http *tar_http(const void *impl) {
  const tar_impl *t = impl;
  return t->pf ? t->http : NULL;
}

static const stoke__blob_ops tar_ops = {
    "tar", tar_label, tar_format, NULL, tar_describe, tar_read, tar_destroy,
    NULL, NULL, tar_bytes, NULL, tar_read_ahead, tar_content_key, NULL,
    NULL, tar_held_bytes, tar_http, tar_rcache_counts,
};

/* ---- header fields ------------------------------------------------------- */

/* An octal field (NUL/space terminated) or a GNU base-256 one. */
static bool parse_num(const uint8_t *f, size_t n, uint64_t *out) {
  uint64_t v = 0;
  if (f[0] & 0x80) {
    if (f[0] != 0x80) return false; /* negative or > 2^64: refuse */
    for (size_t i = 1; i < n; i++) {
      if (v >> 56) return false;
      v = (v << 8) | f[i];
    }
    *out = v;
    return true;
  }
  size_t i = 0;
  while (i < n && f[i] == ' ') i++;
  bool any = false;
  for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
    if (v >> 60) return false;
    v = v * 8 + (uint64_t)(f[i] - '0');
    any = true;
  }
  if (i < n && f[i] != 0 && f[i] != ' ') return false;
  (void)any; /* an empty field is 0, as GNU tar reads it */
  *out = v;
  return true;
}

static bool checksum_ok(const uint8_t *h, uint64_t *stored,
                        uint64_t *computed) {
  uint64_t u = 0;
  int64_t s = 0;
  for (int i = 0; i < BLOCK; i++) {
    uint8_t c = (i >= 148 && i < 156) ? ' ' : h[i];
    u += c;
    s += (int8_t)c; /* some old tars summed signed chars */
  }
  *computed = u;
  *stored = 0;
  if (!parse_num(h + 148, 8, stored)) return false;
  return *stored == u || (int64_t)*stored == s;
}

static bool all_zero(const uint8_t *h) {
  for (int i = 0; i < BLOCK; i++)
    if (h[i]) return false;
  return true;
}

/* ---- indexing one shard -------------------------------------------------- */

typedef struct group {
  char *key;        /* owned */
  size_t key_len;
  char *img_name;   /* owned */
  uint64_t img_off, img_len;
  int img_format;
  bool has_img;
  char *unsup_ext;  /* owned: an unsupported image seen, for the reason */
  bool has_label;
  int64_t label;
} group;

/* One shard's samples and skipped keys, in order: shards are indexed side
** by side, then joined in shard order. */
typedef struct shard_out {
  tar_sample *v;    /* owned, n of cap */
  size_t n, cap;
  stoke__blob_strs skipped;
} shard_out;

typedef struct indexer {
  const stoke_allocator *a;
  tar_impl *t;
  shard_out *out;
  size_t shard;
  const char *path;
  int fd;                  /* a file's, or -1: read through win */
  stoke__tar_window *win;  /* a streamed shard's, else NULL */
  uint64_t size;
  char *err;
  size_t cap;
  group *gs;        /* owned: the shard's samples, in order of first
                    ** appearance */
  size_t n_g, cap_g;
  uint32_t *ht;     /* owned: open addressing, group index + 1, 0 = empty */
  size_t ht_cap;    /* a power of two, or 0 */
} indexer;

static void groups_free(indexer *x) {
  for (size_t k = 0; k < x->n_g; k++) {
    group *g = &x->gs[k];
    stoke__free(x->a, g->key);
    stoke__free(x->a, g->img_name);
    stoke__free(x->a, g->unsup_ext);
  }
  stoke__free(x->a, x->gs);
  stoke__free(x->a, x->ht);
  x->gs = NULL;
  x->ht = NULL;
  x->n_g = x->cap_g = x->ht_cap = 0;
}

static int oom(indexer *x) {
  return stoke__errf(x->err, x->cap, STOKE_ENOMEM,
                     "tar source: %s: out of memory", x->path);
}

/* FNV-1a: keys are short paths; any decent spread will do. */
static uint64_t hash_key(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
  return h;
}

static int rehash(indexer *x) {
  size_t cap = x->ht_cap ? x->ht_cap * 2 : 64;
  uint32_t *ht = stoke__calloc(x->a, cap, sizeof *ht);
  if (!ht) return oom(x);
  for (size_t k = 0; k < x->n_g; k++) {
    size_t i = hash_key(x->gs[k].key, x->gs[k].key_len) & (cap - 1);
    while (ht[i]) i = (i + 1) & (cap - 1);
    ht[i] = (uint32_t)(k + 1);
  }
  stoke__free(x->a, x->ht);
  x->ht = ht;
  x->ht_cap = cap;
  return 0;
}

/* The shard's sample with this key, created if new. */
static int find_group(indexer *x, const char *key, size_t key_len,
                      group **out) {
  if ((x->n_g + 1) * 2 > x->ht_cap) {
    if (x->n_g >= UINT32_MAX / 2)
      return stoke__errf(x->err, x->cap, STOKE_EFORMAT,
                         "tar source: %s: too many members", x->path);
    int rc = rehash(x);
    if (rc) return rc;
  }
  size_t mask = x->ht_cap - 1, i = hash_key(key, key_len) & mask;
  for (; x->ht[i]; i = (i + 1) & mask) {
    group *g = &x->gs[x->ht[i] - 1];
    if (g->key_len == key_len && memcmp(g->key, key, key_len) == 0) {
      *out = g;
      return 0;
    }
  }
  if (x->n_g == x->cap_g) {
    size_t cap = x->cap_g ? x->cap_g * 2 : 64;
    group *gs = stoke__calloc(x->a, cap, sizeof *gs);
    if (!gs) return oom(x);
    if (x->n_g) memcpy(gs, x->gs, x->n_g * sizeof *gs);
    stoke__free(x->a, x->gs);
    x->gs = gs;
    x->cap_g = cap;
  }
  group *g = &x->gs[x->n_g];
  memset(g, 0, sizeof *g);
  g->key = stoke__alloc(x->a, key_len + 1);
  if (!g->key) return oom(x);
  memcpy(g->key, key, key_len);
  g->key[key_len] = 0;
  g->key_len = key_len;
  x->ht[i] = (uint32_t)(++x->n_g);
  *out = g;
  return 0;
}

/* Emit a complete sample, or list it as skipped. */
static int group_finish(indexer *x, group *g) {
  if (g->has_img && g->has_label) {
    shard_out *t = x->out;
    if (t->n == t->cap) {
      size_t cap = t->cap ? t->cap * 2 : 256, bytes;
      tar_sample *v = NULL;
      if (stoke__mul_ok(cap, sizeof *v, &bytes))
        v = stoke__alloc(x->a, bytes);
      if (!v) return oom(x);
      if (t->n) memcpy(v, t->v, t->n * sizeof *v);
      stoke__free(x->a, t->v);
      t->v = v;
      t->cap = cap;
    }
    t->v[t->n++] = (tar_sample){g->img_name, g->img_off, g->img_len,
                                g->label, (uint32_t)x->shard,
                                (uint8_t)g->img_format};
    g->img_name = NULL; /* owned by the sample now */
    return 0;
  }
  char what[1100], why[96];
  snprintf(what, sizeof what, "%s: %s", x->path, g->key);
  if (!g->has_img && g->unsup_ext)
    snprintf(why, sizeof why, "unsupported image format .%s", g->unsup_ext);
  else if (!g->has_img)
    snprintf(why, sizeof why, "no image (.jpg .jpeg .png)");
  else
    snprintf(why, sizeof why, "no label (.cls)");
  if (stoke__blob_strs_add(&x->out->skipped, x->a, what, why))
    return oom(x);
  return 0;
}

/* [off, off + n) of the shard being indexed: 0, or -1 with errno (a file)
** or an error in x->err (streamed: the request's, naming the URL). */
static int shard_read(indexer *x, void *buf, size_t n, uint64_t off,
                      int *rc) {
  if (x->win) {
    *rc = stoke__tar_window_read(x->win, buf, n, off, x->err, x->cap);
    return *rc ? -1 : 0;
  }
  *rc = 0;
  return stoke__sys_pread_full(x->t->sys, x->fd, buf, n, off);
}

static int parse_cls(indexer *x, const char *name, uint64_t off,
                     uint64_t len, int64_t *label) {
  char text[MAX_CLS + 1];
  if (len == 0 || len > MAX_CLS)
    return stoke__errf(x->err, x->cap, STOKE_EFORMAT,
                       "tar source: %s member %s at offset %llu: a .cls "
                       "label of %llu bytes (expected 1..%d)", x->path,
                       name, (unsigned long long)off,
                       (unsigned long long)len, MAX_CLS);
  int got;
  if (shard_read(x, text, (size_t)len, off, &got) != 0)
    return got ? got : stoke__errf(x->err, x->cap, STOKE_EIO,
                       "tar source: %s member %s at offset %llu: read: "
                       "%s", x->path, name, (unsigned long long)off,
                       errno ? strerror(errno) : "the shard shrank");
  text[len] = 0;
  char *p = text, *end;
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  errno = 0;
  long long v = strtoll(p, &end, 10);
  bool ok = end != p && errno == 0;
  while (ok && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
    end++;
  if (!ok || *end != 0) {
    for (char *q = text; *q; q++)
      if ((unsigned char)*q < 0x20 || (unsigned char)*q > 0x7e) *q = '?';
    return stoke__errf(x->err, x->cap, STOKE_EFORMAT,
                       "tar source: %s member %s at offset %llu: label "
                       "\"%s\" is not an integer", x->path, name,
                       (unsigned long long)off, text);
  }
  *label = v;
  return 0;
}

static bool field_is(const char *f, const char *want) {
  for (; *f && *want; f++, want++)
    if ((*f >= 'A' && *f <= 'Z' ? *f - 'A' + 'a' : *f) != *want) return false;
  return *f == 0 && *want == 0;
}

/* A regular file member: a field of the sample with its key. */
static int member(indexer *x, char *name, uint64_t off, uint64_t len) {
  while (name[0] == '.' && name[1] == '/') name += 2;
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  const char *dot = strchr(base, '.');
  /* No field, or no key (".x"): not part of a sample, as in WebDataset. */
  if (!dot || dot == base) return 0;
  const char *field = dot + 1;
  group *g = NULL;
  int rc = find_group(x, name, (size_t)(dot - name), &g);
  if (rc) return rc;
  bool is_image, supported;
  int format = stoke__blob_format_of_ext(field, &is_image, &supported);
  if (supported) {
    if (g->has_img) return 0; /* the first image is the sample's */
    g->img_name = stoke__strdup(x->a, name);
    if (!g->img_name) return oom(x);
    g->img_off = off;
    g->img_len = len;
    g->img_format = format;
    g->has_img = true;
  } else if (is_image) {
    if (!g->unsup_ext && !(g->unsup_ext = stoke__strdup(x->a, field)))
      return oom(x);
  } else if (field_is(field, "cls")) {
    rc = parse_cls(x, name, off, len, &g->label);
    if (rc) return rc;
    g->has_label = true;
  }
  return 0;
}

/* Parse pax records "LEN key=value\n" for path and size. */
static int parse_pax(indexer *x, const char *d, size_t n, uint64_t hoff,
                     char **path, uint64_t *size, bool *has_size) {
  size_t p = 0;
  while (p < n) {
    size_t rec = 0, q = p;
    while (q < n && d[q] >= '0' && d[q] <= '9' && rec < n) {
      rec = rec * 10 + (size_t)(d[q] - '0');
      q++;
    }
    if (q == p || q >= n || d[q] != ' ' || rec == 0 || rec > n - p ||
        d[p + rec - 1] != '\n')
      return stoke__errf(x->err, x->cap, STOKE_EFORMAT,
                         "tar source: %s: pax header at offset %llu: "
                         "malformed record at byte %zu", x->path,
                         (unsigned long long)hoff, p);
    const char *kv = d + q + 1, *end = d + p + rec - 1;
    const char *eq = memchr(kv, '=', (size_t)(end - kv));
    if (eq) {
      size_t kn = (size_t)(eq - kv), vn = (size_t)(end - eq - 1);
      if (kn == 4 && memcmp(kv, "path", 4) == 0) {
        stoke__free(x->a, *path);
        *path = stoke__alloc(x->a, vn + 1);
        if (!*path) return oom(x);
        memcpy(*path, eq + 1, vn);
        (*path)[vn] = 0;
      } else if (kn == 4 && memcmp(kv, "size", 4) == 0) {
        uint64_t v = 0;
        bool ok = vn > 0 && vn < 20;
        for (size_t i = 0; ok && i < vn; i++) {
          char c = eq[1 + i];
          ok = c >= '0' && c <= '9';
          v = v * 10 + (uint64_t)(c - '0');
        }
        if (!ok)
          return stoke__errf(x->err, x->cap, STOKE_EFORMAT,
                             "tar source: %s: pax header at offset "
                             "%llu: bad size", x->path,
                             (unsigned long long)hoff);
        *size = v;
        *has_size = true;
      }
    }
    p += rec;
  }
  return 0;
}

static int index_shard(indexer *x) {
  uint8_t h[BLOCK];
  uint64_t off = 0;
  char *long_name = NULL, *pax_path = NULL;
  uint64_t pax_size = 0;
  bool has_pax_size = false;
  int rc = 0;
  for (;;) {
    if (off + BLOCK > x->size) {
      rc = stoke__errf(x->err, x->cap, STOKE_EFORMAT,
                       off == x->size
                               ? "tar source: %s: truncated: no "
                                 "end-of-archive marker at offset %llu"
                               : "tar source: %s: truncated: header at "
                                 "offset %llu cut off by the end of the "
                                 "file", x->path, (unsigned long long)off);
      break;
    }
    int got;
    if (shard_read(x, h, BLOCK, off, &got) != 0) {
      rc = got ? got : stoke__errf(x->err, x->cap, STOKE_EIO,
                       "tar source: %s: read header at offset %llu: %s",
                       x->path, (unsigned long long)off,
                       errno ? strerror(errno) : "the shard shrank");
      break;
    }
    if (all_zero(h)) break; /* end of archive (the second block is moot) */
    uint64_t stored, computed, size;
    if (!checksum_ok(h, &stored, &computed)) {
      rc = stoke__errf(x->err, x->cap, STOKE_EFORMAT,
                       "tar source: %s: bad header checksum at offset "
                       "%llu (stored %llo, computed %llo): not a tar or "
                       "damaged", x->path, (unsigned long long)off,
                       (unsigned long long)stored,
                       (unsigned long long)computed);
      break;
    }
    if (!parse_num(h + 124, 12, &size)) {
      rc = stoke__errf(x->err, x->cap, STOKE_EFORMAT,
                       "tar source: %s: bad size field in header at "
                       "offset %llu", x->path, (unsigned long long)off);
      break;
    }
    char type = (char)h[156];
    if (has_pax_size && type != 'x' && type != 'g' && type != 'L')
      size = pax_size;
    uint64_t data = off + BLOCK;
    if (size > x->size || data > x->size - size) {
      rc = stoke__errf(x->err, x->cap, STOKE_EFORMAT,
                       "tar source: %s: truncated: the member at offset "
                       "%llu has %llu bytes but the shard ends at %llu",
                       x->path, (unsigned long long)off,
                       (unsigned long long)size,
                       (unsigned long long)x->size);
      break;
    }
    uint64_t next = data + (size + BLOCK - 1) / BLOCK * BLOCK;
    if (type == 'L' || type == 'x') {
      size_t max = type == 'L' ? MAX_LONGNAME : MAX_PAX;
      if (size == 0 || size > max) {
        rc = stoke__errf(x->err, x->cap, STOKE_EFORMAT,
                         "tar source: %s: %s header at offset %llu has "
                         "%llu bytes (expected 1..%zu)", x->path,
                         type == 'L' ? "GNU long-name" : "pax",
                         (unsigned long long)off,
                         (unsigned long long)size, max);
        break;
      }
      char *d = stoke__alloc(x->a, (size_t)size + 1);
      if (!d) {
        rc = oom(x);
        break;
      }
      if (shard_read(x, d, (size_t)size, data, &got) != 0) {
        stoke__free(x->a, d);
        rc = got ? got : stoke__errf(x->err, x->cap, STOKE_EIO,
                         "tar source: %s: read at offset %llu: %s",
                         x->path, (unsigned long long)data,
                         errno ? strerror(errno) : "the shard shrank");
        break;
      }
      d[size] = 0;
      if (type == 'L') {
        stoke__free(x->a, long_name);
        long_name = d; /* NUL-terminated within its data */
      } else {
        rc = parse_pax(x, d, (size_t)size, off, &pax_path, &pax_size,
                       &has_pax_size);
        stoke__free(x->a, d);
        if (rc) break;
      }
      off = next;
      continue;
    }
    if (type == 'g') { /* global pax records: nothing we use */
      off = next;
      continue;
    }
    if (type == '0' || type == '\0' || type == '7') {
      char name[256 + 2];
      const char *use = long_name ? long_name : pax_path;
      if (!use) {
        /* ustar: prefix "/" name when the magic says so. */
        size_t nn = strnlen((const char *)h, 100);
        size_t np = 0;
        /* Only POSIX ustar ("ustar\0"): old GNU tars ("ustar  ") keep
        ** access and change times where the prefix would be. */
        if (memcmp(h + 257, "ustar", 6) == 0)
          np = strnlen((const char *)h + 345, 155);
        size_t k = 0;
        if (np) {
          memcpy(name, h + 345, np);
          name[np] = '/';
          k = np + 1;
        }
        memcpy(name + k, h, nn);
        name[k + nn] = 0;
        use = name;
      }
      char *owned = stoke__strdup(x->a, use);
      if (!owned) {
        rc = oom(x);
        break;
      }
      rc = member(x, owned, data, size);
      stoke__free(x->a, owned);
      if (rc) break;
    }
    /* Folders, links and the rest carry no sample data. */
    stoke__free(x->a, long_name);
    stoke__free(x->a, pax_path);
    long_name = pax_path = NULL;
    has_pax_size = false;
    off = next;
  }
  stoke__free(x->a, long_name);
  stoke__free(x->a, pax_path);
  for (size_t k = 0; rc == 0 && k < x->n_g; k++)
    rc = group_finish(x, &x->gs[k]);
  groups_free(x);
  return rc;
}

int stoke__blobset_open_tar(const char *const *specs, size_t n_specs,
                            const stoke_allocator *a, const stoke__sys *sys,
                            stoke__blobset **out, char *err, size_t cap) {
  return stoke__blobset_open_tar_ex(specs, n_specs, 0, NULL, a, sys, out, err,
                                    cap);
}

/* Remote shards at open, side by side (stoke__http_parallel keeps the
** first error's message); each indexes into its own shard_out. */
typedef struct remote_all {
  tar_impl *t;
  shard_out *outs;
  const stoke_allocator *a;
} remote_all;

/* A shard the server will not stream (it ignores Range): fetched whole
** into a spool, read from then on as a local shard. */
static int spool_one(remote_all *o, size_t k, char *e, size_t ecap) {
  tar_impl *t = o->t;
  int rc = stoke__tar_remote_spool(t->http, t->sys, t->urls[k], &t->fds[k],
                                   e, ecap);
  stoke__free(o->a, t->urls[k]);
  t->urls[k] = NULL; /* read from its descriptor */
  return rc;
}

/* A streamed shard: indexed through a window of Range requests; its URL
** stays for the reads. */
static int stream_one(remote_all *o, size_t k, char *e, size_t ecap) {
  tar_impl *t = o->t;
  stoke__tar_window w;
  int rc = stoke__tar_window_open(&w, t->http, t->urls[k], o->a, e, ecap);
  if (rc == STOKE_EFORMAT) return spool_one(o, k, e, ecap);
  if (rc) return rc;
  t->keys[k] = w.etag[0] ? stoke__hash_u64(stoke__hash_str(k + 1, w.etag),
                                           w.total) | 1
                         : 0;
  indexer x = {o->a, t, &o->outs[k], k, t->paths[k], -1, &w, w.total, e,
               ecap, NULL, 0, 0, NULL, 0};
  rc = index_shard(&x);
  stoke__tar_window_close(&w);
  return rc;
}

/* A remote tar shard through the cache: one byte asks the server for its
** size and ETag (the key); without an ETag it is streamed, uncached. */
static int cached_one(remote_all *o, size_t k, char *e, size_t ecap) {
  tar_impl *t = o->t;
  uint8_t one;
  uint64_t total = UINT64_MAX;
  char etag[STOKE__HTTP_ETAG_CAP];
  int rc = stoke__http_get_range_etag(t->http, t->urls[k], 0, 1, &one,
                                      &total, etag, e, ecap);
  if (rc) return rc;
  if (!etag[0] || total == UINT64_MAX || total > STOKE__REMOTE_MAX_OBJECT) {
    stoke__rcache_note_uncached(t->rcache);
    return stream_one(o, k, e, ecap);
  }
  rc = stoke__rcache_get(t->rcache, t->http, t->urls[k], t->paths[k], ".tar",
                         total, etag, &t->fds[k], e, ecap);
  if (rc == 0) {
    stoke__free(o->a, t->urls[k]);
    t->urls[k] = NULL; /* read from the cache entry */
  }
  return rc;
}

static int remote_one(size_t k, void *arg, char *e, size_t ecap) {
  remote_all *o = arg;
  if (!o->t->urls[k]) return 0;
  return o->t->rcache ? cached_one(o, k, e, ecap) : stream_one(o, k, e, ecap);
}

/* Keep each URL for the requests and show only its shown form (the path
** every message gives), then index every streamed shard, fetch the rest
** into the cache (or a spool), and start the read-ahead when a shard is
** read remotely. */
static int open_remote(tar_impl *t, shard_out *outs,
                       const stoke__http_options *remote,
                       const stoke_allocator *a, char *err, size_t cap) {
  int rc = 0;
  t->urls = stoke__calloc(a, t->n_shards, sizeof *t->urls);
  t->keys = stoke__calloc(a, t->n_shards, sizeof *t->keys);
  if (!t->urls || !t->keys)
    return stoke__errf(err, cap, STOKE_ENOMEM, "tar source: out of memory");
  for (size_t k = 0; k < t->n_shards; k++) {
    if (!stoke__url_is_remote(t->paths[k])) continue;
    if (!(t->urls[k] = stoke__strdup(a, t->paths[k])))
      return stoke__errf(err, cap, STOKE_ENOMEM, "tar source: out of "
                         "memory");
    stoke__url_redact(t->paths[k], t->paths[k], strlen(t->paths[k]) + 1);
  }
  if (remote && remote->cache_dir)
    rc = stoke__rcache_open(remote->cache_dir, remote->cache_max_bytes,
                            t->sys, a, &t->rcache, err, cap);
  if (rc == 0) rc = stoke__http_create(remote, a, &t->http, err, cap);
  remote_all o = {t, outs, a};
  if (rc == 0)
    rc = stoke__http_parallel(t->http, t->n_shards, remote_one, &o, err,
                              cap);
  if (rc) return rc;
  bool streamed = false;
  for (size_t k = 0; k < t->n_shards; k++)
    if (t->urls[k]) streamed = true;
  if (!streamed) { /* all in the cache or spooled: no request from here on */
    stoke__http_destroy(t->http);
    t->http = NULL;
    return 0;
  }
  /* Read-ahead's runs in flight: as many as the client's limit, read at
  ** each submit (the live autotuner moves it), up to its most. */
  if (stoke__prefetch_create(t->http, STOKE_IO_CONCURRENCY_MAX,
                             STOKE__REMOTE_PREFETCH_BYTES, a, &t->pf))
    return stoke__errf(err, cap, STOKE_ETHREAD, "tar source: cannot "
                       "start the remote read-ahead");
  return 0;
}

/* Every shard's samples and skipped keys into t and *skipped, in shard
** order; outs is emptied (freed with outs_free all the same). */
static int join_shards(tar_impl *t, shard_out *outs, stoke__blob_strs *skipped,
                       const stoke_allocator *a, char *err, size_t cap) {
  size_t n = 0;
  for (size_t k = 0; k < t->n_shards; k++) n += outs[k].n;
  size_t bytes;
  if (n && (!stoke__mul_ok(n, sizeof *t->v, &bytes) ||
            !(t->v = stoke__alloc(a, bytes))))
    return stoke__errf(err, cap, STOKE_ENOMEM, "tar source: out of memory");
  t->cap = n;
  for (size_t k = 0; k < t->n_shards; k++) {
    shard_out *s = &outs[k];
    if (s->n) memcpy(t->v + t->n, s->v, s->n * sizeof *s->v);
    t->n += s->n;
    s->n = 0; /* the names are t's now */
    for (size_t i = 0; i < s->skipped.n; i++) {
      const char *text = s->skipped.s[i];
      if (stoke__blob_strs_add(skipped, a, text, text + strlen(text) + 1))
        return stoke__errf(err, cap, STOKE_ENOMEM, "tar source: out of "
                           "memory");
    }
  }
  return 0;
}

static void outs_free(shard_out *outs, size_t n, const stoke_allocator *a) {
  if (!outs) return;
  for (size_t k = 0; k < n; k++) {
    for (size_t i = 0; i < outs[k].n; i++) stoke__free(a, outs[k].v[i].name);
    stoke__free(a, outs[k].v);
    stoke__blob_strs_free(&outs[k].skipped, a);
  }
  stoke__free(a, outs);
}

int stoke__blobset_open_tar_ex(const char *const *specs, size_t n_specs,
                               unsigned flags,
                               const stoke__http_options *remote,
                               const stoke_allocator *a,
                               const stoke__sys *sys, stoke__blobset **out,
                               char *err, size_t cap) {
  *out = NULL;
  stoke__blob_strs skipped = {0};
  shard_out *outs = NULL;
  tar_impl *t = stoke__calloc(a, 1, sizeof *t);
  if (!t)
    return stoke__errf(err, cap, STOKE_ENOMEM,
                       "tar source: out of memory");
  t->sys = sys = stoke__sys_or_real(sys);
  if (flags & ~STOKE__BLOB_LITERAL) {
    stoke__free(a, t);
    return stoke__errf(err, cap, STOKE_EINVAL, "tar source: unknown flags "
                       "%x", flags);
  }
  int rc = stoke__blob_paths(specs, n_specs, flags, a, &t->paths,
                             &t->n_shards, err, cap);
  if (rc) goto fail;
  if (t->n_shards > UINT32_MAX) {
    rc = stoke__errf(err, cap, STOKE_EINVAL, "tar source: too many "
                     "shards");
    goto fail;
  }
  t->fds = stoke__alloc(a, t->n_shards * sizeof(int));
  outs = stoke__calloc(a, t->n_shards, sizeof *outs);
  if (!t->fds || !outs) {
    rc = stoke__errf(err, cap, STOKE_ENOMEM, "tar source: out of memory");
    goto fail;
  }
  for (size_t k = 0; k < t->n_shards; k++) t->fds[k] = -1;
  if (stoke__specs_remote(specs, n_specs)) {
    rc = open_remote(t, outs, remote, a, err, cap);
    if (rc) goto fail;
  }
  for (size_t k = 0; k < t->n_shards; k++) {
    if (t->urls && t->urls[k]) continue; /* streamed: indexed already */
    const char *path = t->paths[k];
    int fd = t->fds[k]; /* a remote shard's spool or cache entry, or none */
    t->fds[k] = -1;
    if (fd < 0) fd = stoke__sys_open(sys, path, O_RDONLY | O_CLOEXEC, 0);
    struct stat st;
    if (fd < 0 || sys->fstat(sys->user, fd, &st) != 0) {
      rc = stoke__errf(err, cap, STOKE_EIO, "tar source: %s: %s: %s", path,
                       fd < 0 ? "open" : "stat", strerror(errno));
      if (fd >= 0) sys->close(sys->user, fd);
      goto fail;
    }
    t->fds[k] = fd;
    if (!S_ISREG(st.st_mode)) {
      rc = stoke__errf(err, cap, STOKE_EINVAL,
                       "tar source: %s: not a regular file", path);
      goto fail;
    }
    indexer x = {a, t, &outs[k], k, path, fd, NULL, (uint64_t)st.st_size,
                 err, cap, NULL, 0, 0, NULL, 0};
    rc = index_shard(&x);
    if (rc) goto fail;
  }
  rc = join_shards(t, outs, &skipped, a, err, cap);
  outs_free(outs, t->n_shards, a);
  outs = NULL;
  if (rc) goto fail;
  if (t->n == 0) {
    const char *why = NULL, *what = skipped.n ? skipped.s[0] : NULL;
    if (what) why = what + strlen(what) + 1;
    rc = stoke__errf(err, cap, STOKE_EFORMAT,
                     "tar source: no sample with an image and a .cls "
                     "label in %zu shard(s) (first: %s)%s%s%s%s",
                     t->n_shards, t->paths[0], what ? "; e.g. " : "",
                     what ? what : "", what ? ": " : "", why ? why : "");
    goto fail;
  }
  return stoke__blobset_wrap(&tar_ops, t, t->n, NULL, &skipped, a, out, err,
                             cap);
fail:
  outs_free(outs, t->n_shards, a);
  tar_destroy(t, a);
  stoke__blob_strs_free(&skipped, a);
  return rc;
}

/* The remote cache's counts, when remote shards were opened through one. */
static bool tar_rcache_counts(const void *impl, stoke__rcache_counts *out) {
  const tar_impl *t = impl;
  if (!t->rcache) return false;
  stoke__rcache_counts_get(t->rcache, out);
  return true;
}
