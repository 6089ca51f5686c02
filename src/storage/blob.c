/* blob.c — what the blobset kinds share: the handle and its queries, the
** per-worker reader, path expansion (braces and globs) and small
** helpers.  Each kind (imagefolder.c, tar.c, packed.c) builds an immutable
** impl and wraps it here; after open nothing is written, so every query and
** every read with its own reader may run on any thread. */
#define _POSIX_C_SOURCE 200809L
#include "storage/blob.h"
#include "storage/url.h"

#include <assert.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EXPANDED 1000000

struct stoke__blobset {
  const stoke__blob_ops *ops;
  void *impl;                /* owned, the kind's own state */
  const stoke_allocator *alloc;
  size_t n_samples;
  stoke__blob_strs classes;  /* reason unused */
  stoke__blob_strs skipped;  /* path + reason */
};

const char *stoke__blob_format_name(int format) {
  switch (format) {
  case STOKE__BLOB_JPEG: return "jpeg";
  case STOKE__BLOB_PNG: return "png";
  case STOKE__BLOB_WEBP: return "webp";
  case STOKE__BLOB_BMP: return "bmp";
  default: return "unknown";
  }
}

static bool ext_is(const char *ext, const char *want) {
  for (; *ext && *want; ext++, want++) {
    char c = *ext;
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (c != *want) return false;
  }
  return *ext == 0 && *want == 0;
}

int stoke__blob_format_of_ext(const char *ext, bool *is_image,
                              bool *supported) {
  /* torchvision's IMG_EXTENSIONS; only JPEG and PNG are decoded here. */
  static const struct {
    const char *ext;
    int format;
    bool supported;
  } table[] = {
      {"jpg", STOKE__BLOB_JPEG, true},     {"jpeg", STOKE__BLOB_JPEG, true},
      {"png", STOKE__BLOB_PNG, true},      {"webp", STOKE__BLOB_WEBP, false},
      {"bmp", STOKE__BLOB_BMP, false},     {"ppm", STOKE__BLOB_UNKNOWN, false},
      {"pgm", STOKE__BLOB_UNKNOWN, false}, {"tif", STOKE__BLOB_UNKNOWN, false},
      {"tiff", STOKE__BLOB_UNKNOWN, false},
  };
  for (size_t k = 0; k < sizeof table / sizeof table[0]; k++)
    if (ext_is(ext, table[k].ext)) {
      *is_image = true;
      *supported = table[k].supported;
      return table[k].format;
    }
  *is_image = false;
  *supported = false;
  return STOKE__BLOB_UNKNOWN;
}

/* ---- string lists ------------------------------------------------------- */

int stoke__blob_strs_add(stoke__blob_strs *l, const stoke_allocator *a,
                         const char *text, const char *reason) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16, bytes;
    if (!stoke__mul_ok(cap, sizeof(char *), &bytes)) return STOKE_ENOMEM;
    char **s = stoke__alloc(a, bytes);
    if (!s) return STOKE_ENOMEM;
    if (l->n) memcpy(s, l->s, l->n * sizeof(char *));
    stoke__free(a, l->s);
    l->s = s;
    l->cap = cap;
  }
  size_t nt = strlen(text) + 1, nr = reason ? strlen(reason) + 1 : 1;
  char *e = stoke__alloc(a, nt + nr);
  if (!e) return STOKE_ENOMEM;
  memcpy(e, text, nt);
  if (reason)
    memcpy(e + nt, reason, nr);
  else
    e[nt] = 0;
  l->s[l->n++] = e;
  return 0;
}

int stoke__blob_strs_pack(const stoke__blob_strs *l, const stoke_allocator *a,
                          char ***out) {
  size_t bytes = l->n * sizeof(char *);
  for (size_t j = 0; j < l->n; j++) bytes += strlen(l->s[j]) + 1;
  char **block = stoke__alloc(a, bytes ? bytes : 1);
  if (!block) return STOKE_ENOMEM;
  char *str = (char *)(block + l->n);
  for (size_t j = 0; j < l->n; j++) {
    size_t n = strlen(l->s[j]) + 1;
    memcpy(str, l->s[j], n);
    block[j] = str;
    str += n;
  }
  *out = block;
  return 0;
}

int stoke__blob_strs_hand_out(const stoke__blob_strs *l,
                              const stoke_allocator *a, char ***out,
                              size_t *n, char *err, size_t cap) {
  if (stoke__blob_strs_pack(l, a, out))
    return stoke__errf(err, cap, STOKE_ENOMEM, "out of memory");
  *n = l->n;
  return 0;
}

void stoke__blob_strs_free(stoke__blob_strs *l, const stoke_allocator *a) {
  for (size_t i = 0; i < l->n; i++) stoke__free(a, l->s[i]);
  stoke__free(a, l->s);
  memset(l, 0, sizeof *l);
}

/* ---- the handle ---------------------------------------------------------- */

int stoke__blobset_wrap(const stoke__blob_ops *ops, void *impl,
                        size_t n_samples, stoke__blob_strs *classes,
                        stoke__blob_strs *skipped, const stoke_allocator *a,
                        stoke__blobset **out, char *err, size_t cap) {
  *out = NULL;
  stoke__blobset *s = stoke__calloc(a, 1, sizeof *s);
  if (!s) {
    ops->destroy(impl, a);
    if (classes) stoke__blob_strs_free(classes, a);
    if (skipped) stoke__blob_strs_free(skipped, a);
    return stoke__errf(err, cap, STOKE_ENOMEM,
                       "%s source: out of memory", ops->kind);
  }
  s->ops = ops;
  s->impl = impl;
  s->alloc = a;
  s->n_samples = n_samples;
  if (classes) {
    s->classes = *classes;
    memset(classes, 0, sizeof *classes);
  }
  if (skipped) {
    s->skipped = *skipped;
    memset(skipped, 0, sizeof *skipped);
  }
  *out = s;
  return 0;
}

void stoke__blobset_close(stoke__blobset *s) {
  if (!s) return;
  const stoke_allocator *a = s->alloc;
  s->ops->destroy(s->impl, a);
  stoke__blob_strs_free(&s->classes, a);
  stoke__blob_strs_free(&s->skipped, a);
  stoke__free(a, s);
}

const char *stoke__blobset_kind(const stoke__blobset *s) {
  return s->ops->kind;
}

size_t stoke__blobset_files(const stoke__blobset *s,
                            const char *const **paths) {
  *paths = NULL;
  return s->ops->files ? s->ops->files(s->impl, paths) : 0;
}

size_t stoke__blobset_n_samples(const stoke__blobset *s) {
  return s->n_samples;
}

int64_t stoke__blobset_label(const stoke__blobset *s, size_t i) {
  assert(i < s->n_samples);
  return s->ops->label(s->impl, i);
}

int stoke__blobset_format(const stoke__blobset *s, size_t i) {
  assert(i < s->n_samples);
  return s->ops->format(s->impl, i);
}

void stoke__blobset_dims(const stoke__blobset *s, size_t i, uint32_t *width,
                         uint32_t *height) {
  assert(i < s->n_samples);
  *width = 0;
  *height = 0;
  if (s->ops->dims) s->ops->dims(s->impl, i, width, height);
}

uint64_t stoke__blobset_bytes(const stoke__blobset *s, size_t i) {
  assert(i < s->n_samples);
  return s->ops->bytes ? s->ops->bytes(s->impl, i) : 0;
}

size_t stoke__blobset_n_classes(const stoke__blobset *s) {
  return s->classes.n;
}

const char *stoke__blobset_class_name(const stoke__blobset *s, size_t c) {
  return c < s->classes.n ? s->classes.s[c] : NULL;
}

void stoke__blobset_describe(const stoke__blobset *s, size_t i, char *buf,
                             size_t cap) {
  if (cap == 0) return;
  if (i >= s->n_samples) {
    snprintf(buf, cap, "%s sample %zu (out of range)", s->ops->kind, i);
    return;
  }
  buf[0] = 0;
  s->ops->describe(s->impl, i, buf, cap);
}

size_t stoke__blobset_n_skipped(const stoke__blobset *s) {
  return s->skipped.n;
}

const char *stoke__blobset_skipped(const stoke__blobset *s, size_t k,
                                   const char **reason) {
  if (k >= s->skipped.n) {
    if (reason) *reason = NULL;
    return NULL;
  }
  const char *path = s->skipped.s[k];
  if (reason) *reason = path + strlen(path) + 1;
  return path;
}

int stoke__blobset_read(const stoke__blobset *s, size_t i,
                        stoke__blob_reader *r, const uint8_t **ptr,
                        size_t *len, char *err, size_t cap) {
  *ptr = NULL;
  *len = 0;
  if (i >= s->n_samples)
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "%s source: sample %zu out of range (%zu samples)",
                       s->ops->kind, i, s->n_samples);
  return s->ops->read(s->impl, i, r, ptr, len, err, cap);
}

uint64_t stoke__blobset_stored_bytes(const stoke__blobset *s, size_t i) {
  assert(i < s->n_samples);
  uint64_t b = stoke__blobset_bytes(s, i); /* the index's, when it has it */
  if (!b && s->ops->stored_bytes) b = s->ops->stored_bytes(s->impl, i);
  return b;
}

uint64_t stoke__blobset_held_bytes(const stoke__blobset *s) {
  return s->ops->held_bytes ? s->ops->held_bytes(s->impl) : 0;
}

const struct stoke__http *stoke__blobset_http(const stoke__blobset *s) {
  return s->ops->http ? s->ops->http(s->impl) : NULL;
}

bool stoke__blobset_rcache_counts(const stoke__blobset *s,
                                  struct stoke__rcache_counts *out) {
  return s->ops->rcache_counts && s->ops->rcache_counts(s->impl, out);
}

void stoke__blobset_read_ahead(const stoke__blobset *s, size_t first,
                               size_t n) {
  if (!s->ops->read_ahead || first >= s->n_samples) return;
  if (n > s->n_samples - first) n = s->n_samples - first;
  if (n) s->ops->read_ahead(s->impl, first, n);
}

int stoke__blobset_content_key(const stoke__blobset *s, uint64_t *key,
                               char *err, size_t cap) {
  if (!s->ops->content_key)
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "%s source: no content key (the cache reads folder "
                       "and tar sources)", s->ops->kind);
  return s->ops->content_key(s->impl, key, err, cap);
}

int stoke__blobset_pack_info(const stoke__blobset *s, stoke_pack_info *out) {
  memset(out, 0, sizeof *out);
  if (!s->ops->pack_info) return STOKE_EINVAL;
  return s->ops->pack_info(s->impl, out);
}

size_t stoke__blobset_source_index(const stoke__blobset *s, size_t i) {
  assert(i < s->n_samples);
  return s->ops->source_index ? s->ops->source_index(s->impl, i) : SIZE_MAX;
}

void stoke__blobset_done(const stoke__blobset *s, size_t i,
                         const uint8_t *ptr, size_t len) {
  if (s->ops->done && ptr) s->ops->done(s->impl, i, ptr, len);
}

/* ---- the reader ---------------------------------------------------------- */

void stoke__blob_reader_init(stoke__blob_reader *r, const stoke_allocator *a) {
  r->alloc = a;
  r->buf = NULL;
  r->cap = 0;
}

void stoke__blob_reader_free(stoke__blob_reader *r) {
  stoke__free(r->alloc, r->buf);
  r->buf = NULL;
  r->cap = 0;
}

int stoke__blob_reader_reserve(stoke__blob_reader *r, size_t n) {
  if (n <= r->cap) return 0;
  /* Grow by half again so that a run of slowly growing samples does not
  ** reallocate each time; the old bytes need not be kept. */
  size_t want = n + n / 2;
  if (want < n) want = n;
  uint8_t *b = stoke__alloc(r->alloc, want);
  if (!b) return STOKE_ENOMEM;
  stoke__free(r->alloc, r->buf);
  r->buf = b;
  r->cap = want;
  return 0;
}

/* ---- path expansion ------------------------------------------------------ */

typedef struct expander {
  const stoke_allocator *a;
  stoke__blob_strs out;
  char *err;
  size_t cap;
  const char *spec; /* the spec being expanded, for messages */
} expander;

static bool parse_bound(const char *s, size_t n, long long *v) {
  if (n == 0 || n > 18) return false;
  size_t i = 0;
  if (s[0] == '-') {
    if (n == 1) return false;
    i = 1;
  }
  long long x = 0;
  for (; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    x = x * 10 + (s[i] - '0');
  }
  *v = s[0] == '-' ? -x : x;
  return true;
}

static int expand_rec(expander *e, const char *s, int depth);

/* Emit prefix + alt + suffix and expand it further. */
static int expand_join(expander *e, const char *pre, size_t n_pre,
                       const char *alt, size_t n_alt, const char *suf,
                       int depth) {
  size_t n_suf = strlen(suf);
  char *t = stoke__alloc(e->a, n_pre + n_alt + n_suf + 1);
  if (!t) return STOKE_ENOMEM;
  memcpy(t, pre, n_pre);
  memcpy(t + n_pre, alt, n_alt);
  memcpy(t + n_pre + n_alt, suf, n_suf + 1);
  int rc = expand_rec(e, t, depth + 1);
  stoke__free(e->a, t);
  return rc;
}

static int expand_rec(expander *e, const char *s, int depth) {
  if (depth > 64)
    return stoke__errf(e->err, e->cap, STOKE_EINVAL,
                       "path pattern \"%s\": braces nested too deeply",
                       e->spec);
  const char *open = strchr(s, '{');
  if (!open) {
    if (e->out.n >= MAX_EXPANDED)
      return stoke__errf(e->err, e->cap, STOKE_EINVAL,
                         "path pattern \"%s\" expands to more than %d "
                         "paths", e->spec, MAX_EXPANDED);
    int rc = stoke__blob_strs_add(&e->out, e->a, s, NULL);
    if (rc) return stoke__errf(e->err, e->cap, rc, "out of memory");
    return 0;
  }
  /* The matching close brace, and the top-level commas between. */
  const char *close = NULL;
  int level = 0;
  bool comma = false;
  for (const char *p = open; *p; p++) {
    if (*p == '{') level++;
    else if (*p == '}' && --level == 0) {
      close = p;
      break;
    } else if (*p == ',' && level == 1)
      comma = true;
  }
  if (!close)
    return stoke__errf(e->err, e->cap, STOKE_EINVAL,
                       "path pattern \"%s\": unmatched '{'", e->spec);
  size_t n_pre = (size_t)(open - s);
  const char *body = open + 1, *suf = close + 1;
  size_t n_body = (size_t)(close - body);
  if (comma) {
    const char *start = body;
    level = 0;
    for (const char *p = body; p <= close; p++) {
      if (*p == '{') level++;
      else if (*p == '}' && level > 0) level--;
      else if ((*p == ',' && level == 0) || p == close) {
        int rc = expand_join(e, s, n_pre, start, (size_t)(p - start), suf,
                             depth);
        if (rc) return rc;
        start = p + 1;
      }
    }
    return 0;
  }
  const char *dots = NULL;
  for (const char *p = body; p + 1 < close; p++)
    if (p[0] == '.' && p[1] == '.') {
      dots = p;
      break;
    }
  long long lo, hi;
  if (!dots || !parse_bound(body, (size_t)(dots - body), &lo) ||
      !parse_bound(dots + 2, (size_t)(close - dots - 2), &hi))
    return stoke__errf(e->err, e->cap, STOKE_EINVAL,
                       "path pattern \"%s\": \"{%.*s}\" is neither a "
                       "list {a,b} nor a range {0..9}", e->spec,
                       (int)n_body, body);
  /* bash's rule: a bound written with a leading zero pads every number to
  ** the width of the wider bound ("{0000..0099}" gives "0042"). */
  size_t n_lo = (size_t)(dots - body), n_hi = (size_t)(close - dots - 2);
  bool pad = (n_lo > 1 && body[body[0] == '-'] == '0') ||
             (n_hi > 1 && dots[2 + (dots[2] == '-')] == '0');
  int width = pad ? (int)STOKE__MAX(n_lo, n_hi) : 0;
  unsigned long long count =
      (unsigned long long)(lo <= hi ? hi - lo : lo - hi) + 1;
  if (count > MAX_EXPANDED || e->out.n + count > MAX_EXPANDED)
    return stoke__errf(e->err, e->cap, STOKE_EINVAL,
                       "path pattern \"%s\" expands to more than %d "
                       "paths", e->spec, MAX_EXPANDED);
  for (unsigned long long k = 0; k < count; k++) {
    long long v = lo <= hi ? lo + (long long)k : lo - (long long)k;
    char num[32];
    int n = snprintf(num, sizeof num, "%0*lld", width, v);
    int rc = expand_join(e, s, n_pre, num, (size_t)n, suf, depth);
    if (rc) return rc;
  }
  return 0;
}

static bool has_glob(const char *s) { return strpbrk(s, "*?[") != NULL; }

int stoke__blob_paths(const char *const *specs, size_t n_specs,
                      unsigned flags, const stoke_allocator *a,
                      char ***paths, size_t *n_paths, char *err, size_t cap) {
  if (!(flags & STOKE__BLOB_LITERAL))
    return stoke__blob_expand(specs, n_specs, a, paths, n_paths, err, cap);
  *paths = NULL;
  *n_paths = 0;
  if (!specs || n_specs == 0)
    return stoke__errf(err, cap, STOKE_EINVAL, "no paths given");
  if (n_specs > MAX_EXPANDED)
    return stoke__errf(err, cap, STOKE_EINVAL, "more than %d paths",
                       MAX_EXPANDED);
  stoke__blob_strs all = {0};
  int rc = 0;
  for (size_t k = 0; k < n_specs && rc == 0; k++)
    if (!specs[k] || !specs[k][0])
      rc = stoke__errf(err, cap, STOKE_EINVAL, "path %zu is empty", k);
    else if (stoke__blob_strs_add(&all, a, specs[k], NULL))
      rc = stoke__errf(err, cap, STOKE_ENOMEM, "out of memory");
  if (rc == 0)
    rc = stoke__blob_strs_hand_out(&all, a, paths, n_paths, err, cap);
  stoke__blob_strs_free(&all, a);
  return rc;
}

int stoke__blob_expand(const char *const *specs, size_t n_specs,
                       const stoke_allocator *a, char ***paths,
                       size_t *n_paths, char *err, size_t cap) {
  *paths = NULL;
  *n_paths = 0;
  if (!specs || n_specs == 0)
    return stoke__errf(err, cap, STOKE_EINVAL, "no paths given");
  expander e = {a, {0}, err, cap, NULL};
  stoke__blob_strs all = {0};
  int rc = 0;
  for (size_t k = 0; k < n_specs && rc == 0; k++) {
    if (!specs[k] || !specs[k][0]) {
      rc = stoke__errf(err, cap, STOKE_EINVAL, "path %zu is empty", k);
      break;
    }
    e.spec = specs[k];
    rc = expand_rec(&e, specs[k], 0);
    for (size_t j = 0; j < e.out.n && rc == 0; j++) {
      const char *p = e.out.s[j];
      if (!has_glob(p) || stoke__url_is_remote(p)) {
        if (stoke__blob_strs_add(&all, a, p, NULL))
          rc = stoke__errf(err, cap, STOKE_ENOMEM, "out of memory");
        continue;
      }
      glob_t g;
      int grc = glob(p, 0, NULL, &g);
      if (grc == GLOB_NOMATCH)
        rc = stoke__errf(err, cap, STOKE_EINVAL,
                         "path pattern \"%s\" matches no file", p);
      else if (grc != 0)
        rc = stoke__errf(err, cap, STOKE_EIO,
                         "path pattern \"%s\": glob failed (%s)", p,
                         grc == GLOB_NOSPACE ? "out of memory"
                                                 : "read error");
      else {
        /* glob() sorts with strcoll; the library never calls setlocale,
        ** so in the C locale this is byte order. */
        for (size_t m = 0; m < g.gl_pathc && rc == 0; m++) {
          if (all.n >= MAX_EXPANDED)
            rc = stoke__errf(err, cap, STOKE_EINVAL,
                             "path patterns match more than %d paths",
                             MAX_EXPANDED);
          else if (stoke__blob_strs_add(&all, a, g.gl_pathv[m], NULL))
            rc = stoke__errf(err, cap, STOKE_ENOMEM, "out of memory");
        }
      }
      if (grc == 0) globfree(&g);
    }
    stoke__blob_strs_free(&e.out, a);
  }
  stoke__blob_strs_free(&e.out, a);
  if (rc == 0)
    rc = stoke__blob_strs_hand_out(&all, a, paths, n_paths, err, cap);
  stoke__blob_strs_free(&all, a);
  return rc;
}
