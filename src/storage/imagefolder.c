/* imagefolder.c — torchvision's ImageFolder layout: root/<class>/<file>.
**
** Open walks the tree once: classes are the visible subfolders of root in
** byte order (labels 0..C-1); within a class, files are ordered as
** torchvision orders them, by (folder, name) byte-wise, which is what
** sorted(os.walk(...)) then sorted(fnames) gives for ASCII names.  Folders
** below a class are walked too (symbolic links followed, as torchvision's
** followlinks=True), to a depth of MAX_DEPTH.
**
** Reads open, pread and close the file every time rather than keeping
** descriptors: a million-file dataset would need a million descriptors,
** and the open costs little next to a JPEG decode.
**
** Deviations from torchvision, on purpose: names starting with '.' (files
** and folders, e.g. .ipynb_checkpoints, .DS_Store) are ignored; files that
** are skipped are listed with a reason instead of vanishing. */
#define _DEFAULT_SOURCE /* d_type, DT_* */
#define _POSIX_C_SOURCE 200809L /* posix_fadvise, st_mtim */
#include "storage/blob.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 32

typedef struct folder_sample {
  char *rel;        /* owned: "dog/sub/img.jpg", relative to root */
  uint32_t dir_len; /* bytes of rel before the file name's '/' */
  uint32_t label;
  uint8_t format;
} folder_sample;

typedef struct folder_impl {
  const stoke__sys *sys; /* borrowed: every file and folder call */
  char *root;        /* owned, without a trailing '/' */
  folder_sample *v;  /* owned, n of cap */
  size_t n, cap;
} folder_impl;

static void folder_destroy(void *impl, const stoke_allocator *a) {
  folder_impl *f = impl;
  if (!f) return;
  for (size_t i = 0; i < f->n; i++) stoke__free(a, f->v[i].rel);
  stoke__free(a, f->v);
  stoke__free(a, f->root);
  stoke__free(a, f);
}

static int64_t folder_label(const void *impl, size_t i) {
  return ((const folder_impl *)impl)->v[i].label;
}

static int folder_format(const void *impl, size_t i) {
  return ((const folder_impl *)impl)->v[i].format;
}

static void folder_describe(const void *impl, size_t i, char *buf,
                            size_t cap) {
  const folder_impl *f = impl;
  snprintf(buf, cap, "%s/%s", f->root, f->v[i].rel);
}

static int folder_read(const void *impl, size_t i, stoke__blob_reader *r,
                       const uint8_t **ptr, size_t *len, char *err,
                       size_t cap) {
  const folder_impl *f = impl;
  const char *rel = f->v[i].rel;
  if (!r)
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "folder source: sample %zu: no reader", i);
  char stack[1024], *path = stack;
  size_t need = strlen(f->root) + strlen(rel) + 2;
  if (need > sizeof stack) {
    path = stoke__alloc(r->alloc, need);
    if (!path)
      return stoke__errf(err, cap, STOKE_ENOMEM,
                         "%s/%s (sample %zu): out of memory", f->root,
                         rel, i);
  }
  snprintf(path, need, "%s/%s", f->root, rel);
  int rc = 0;
  const stoke__sys *sys = f->sys;
  int fd = stoke__sys_open(sys, path, O_RDONLY | O_CLOEXEC, 0);
  struct stat st;
  if (fd < 0) {
    rc = stoke__errf(err, cap, STOKE_EIO, "%s (sample %zu): open: %s",
                     path, i, strerror(errno));
  } else if (sys->fstat(sys->user, fd, &st) != 0) {
    rc = stoke__errf(err, cap, STOKE_EIO, "%s (sample %zu): stat: %s",
                     path, i, strerror(errno));
  } else if (st.st_size <= 0) {
    rc = stoke__errf(err, cap, STOKE_EFORMAT,
                     "%s (sample %zu): the file is empty", path, i);
  } else if ((uint64_t)st.st_size > SIZE_MAX / 2) {
    rc = stoke__errf(err, cap, STOKE_EIO, "%s (sample %zu): too large",
                     path, i);
  } else if (stoke__blob_reader_reserve(r, (size_t)st.st_size) != 0) {
    rc = stoke__errf(err, cap, STOKE_ENOMEM,
                     "%s (sample %zu): out of memory for %lld bytes",
                     path, i, (long long)st.st_size);
  } else if (stoke__sys_pread_full(sys, fd, r->buf, (size_t)st.st_size,
                                   0) != 0) {
    rc = stoke__errf(err, cap, STOKE_EIO,
                     "%s (sample %zu): read %lld bytes at offset 0: %s",
                     path, i, (long long)st.st_size,
                     errno ? strerror(errno) : "the file shrank");
  } else {
    *ptr = r->buf;
    *len = (size_t)st.st_size;
  }
  if (fd >= 0) sys->close(sys->user, fd); /* read-only: nothing to lose */
  if (path != stack) stoke__free(r->alloc, path);
  return rc;
}

/* The path of sample i into buf (cap bytes); false when it does not fit. */
static bool folder_path(const folder_impl *f, size_t i, char *buf,
                        size_t cap) {
  int n = snprintf(buf, cap, "%s/%s", f->root, f->v[i].rel);
  return n > 0 && (size_t)n < cap;
}

static uint64_t folder_stored_bytes(const void *impl, size_t i) {
  const folder_impl *f = impl;
  char path[4096];
  struct stat st;
  if (!folder_path(f, i, path, sizeof path) ||
      f->sys->stat(f->sys->user, path, &st) != 0 || st.st_size < 0)
    return 0;
  return (uint64_t)st.st_size;
}

/* Each file opened, advised whole, closed: the kernel reads it ahead. */
static void folder_read_ahead(const void *impl, size_t first, size_t n) {
  const folder_impl *f = impl;
  const stoke__sys *sys = f->sys;
  for (size_t i = first; i < first + n; i++) {
    char path[4096];
    if (!folder_path(f, i, path, sizeof path)) continue;
    int fd = stoke__sys_open(sys, path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) continue;
    sys->fadvise(sys->user, fd, 0, 0, POSIX_FADV_WILLNEED);
    sys->close(sys->user, fd);
  }
}

/* Every file's path below the root, size and modification time. */
static int folder_content_key(const void *impl, uint64_t *key, char *err,
                              size_t cap) {
  const folder_impl *f = impl;
  uint64_t h = stoke__hash_str(0xF01DE4C4C4EULL, "folder");
  for (size_t i = 0; i < f->n; i++) {
    char path[4096];
    struct stat st;
    if (!folder_path(f, i, path, sizeof path))
      return stoke__errf(err, cap, STOKE_EIO, "%s/%s: path too long",
                         f->root, f->v[i].rel);
    if (f->sys->stat(f->sys->user, path, &st) != 0)
      return stoke__errf(err, cap, STOKE_EIO, "%s (sample %zu): stat: %s",
                         path, i, strerror(errno));
    h = stoke__hash_str(h, f->v[i].rel);
    h = stoke__hash_u64(h, (uint64_t)st.st_size);
    h = stoke__hash_u64(h, (uint64_t)st.st_mtim.tv_sec * 1000000000u +
                               (uint64_t)st.st_mtim.tv_nsec);
  }
  *key = h;
  return 0;
}

static const stoke__blob_ops folder_ops = {
    "folder", folder_label, folder_format, NULL,
    folder_describe, folder_read, folder_destroy, NULL, NULL, NULL,
    folder_stored_bytes, folder_read_ahead, folder_content_key, NULL, NULL,
    NULL, NULL, NULL,
};

/* ---- the walk ------------------------------------------------------------ */

typedef struct walk {
  const stoke_allocator *a;
  folder_impl *f;
  stoke__blob_strs *skipped;
  char *err;
  size_t cap;
} walk;

static int cmp_str(const void *x, const void *y) {
  return strcmp(*(char *const *)x, *(char *const *)y);
}

/* torchvision's order: by folder, then by name, byte-wise. */
static int cmp_sample(const void *x, const void *y) {
  const folder_sample *p = x, *q = y;
  size_t n = STOKE__MIN(p->dir_len, q->dir_len);
  int c = memcmp(p->rel, q->rel, n);
  if (c) return c;
  if (p->dir_len != q->dir_len) return p->dir_len < q->dir_len ? -1 : 1;
  return strcmp(p->rel + p->dir_len + 1, q->rel + q->dir_len + 1);
}

static char *join(const stoke_allocator *a, const char *x, const char *y) {
  size_t nx = strlen(x), ny = strlen(y);
  char *s = stoke__alloc(a, nx + ny + 2);
  if (!s) return NULL;
  memcpy(s, x, nx);
  s[nx] = '/';
  memcpy(s + nx + 1, y, ny + 1);
  return s;
}

/* Is root/rel a folder, a regular file, or neither?  Links are followed:
** a dangling one is neither.  STOKE_ENOMEM, or STOKE_EIO with the message
** in err when stat fails otherwise (an unreadable entry must not vanish
** from the dataset as if it were not a file). */
static int entry_type(const folder_impl *f, const char *root,
                      const char *rel, const struct dirent *d,
                      const stoke_allocator *a, char *err, size_t cap) {
  if (d->d_type == DT_DIR) return DT_DIR;
  if (d->d_type == DT_REG) return DT_REG;
  if (d->d_type != DT_UNKNOWN && d->d_type != DT_LNK) return DT_UNKNOWN;
  char *p = join(a, root, rel);
  if (!p)
    return stoke__errf(err, cap, STOKE_ENOMEM,
                       "folder source: out of memory");
  struct stat st;
  int t = DT_UNKNOWN;
  if (f->sys->stat(f->sys->user, p, &st) == 0)
    t = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG
                                                            : DT_UNKNOWN;
  else if (errno != ENOENT && errno != ELOOP)
    t = stoke__errf(err, cap, STOKE_EIO, "folder source: %s: stat: %s", p,
                    strerror(errno));
  stoke__free(a, p);
  return t;
}

static int add_sample(walk *w, char *rel, size_t dir_len, uint32_t label,
                      int format) {
  folder_impl *f = w->f;
  if (f->n == f->cap) {
    size_t cap = f->cap ? f->cap * 2 : 256, bytes;
    if (!stoke__mul_ok(cap, sizeof *f->v, &bytes)) return STOKE_ENOMEM;
    folder_sample *v = stoke__alloc(w->a, bytes);
    if (!v) return STOKE_ENOMEM;
    if (f->n) memcpy(v, f->v, f->n * sizeof *v);
    stoke__free(w->a, f->v);
    f->v = v;
    f->cap = cap;
  }
  f->v[f->n++] = (folder_sample){rel, (uint32_t)dir_len, label,
                                 (uint8_t)format};
  return 0;
}

/* Walk root/dir (relative), adding its files to the samples (label) or to
** the skipped list, then its subfolders. */
static int walk_dir(walk *w, const char *dir, uint32_t label, int depth) {
  const char *root = w->f->root;
  if (depth > MAX_DEPTH)
    return stoke__errf(w->err, w->cap, STOKE_EFORMAT,
                       "folder source: %s/%s: folders nested deeper "
                       "than %d (a symbolic link loop?)", root, dir,
                       MAX_DEPTH);
  char *abs = join(w->a, root, dir);
  if (!abs) return stoke__errf(w->err, w->cap, STOKE_ENOMEM,
                               "folder source: out of memory");
  const stoke__sys *sys = w->f->sys;
  DIR *dp = sys->opendir(sys->user, abs);
  if (!dp) {
    int rc = stoke__errf(w->err, w->cap, STOKE_EIO,
                         "folder source: %s: cannot open folder: %s",
                         abs, strerror(errno));
    stoke__free(w->a, abs);
    return rc;
  }
  stoke__free(w->a, abs);
  stoke__blob_strs subdirs = {0};
  int rc = 0;
  size_t dir_len = strlen(dir);
  struct dirent *d;
  for (errno = 0; rc == 0 && (d = sys->readdir(sys->user, dp)) != NULL;
       errno = 0) {
    if (d->d_name[0] == '.') continue; /* ".", "..", hidden */
    char *rel = join(w->a, dir, d->d_name);
    if (!rel) {
      rc = STOKE_ENOMEM;
      break;
    }
    int t = entry_type(w->f, root, rel, d, w->a, w->err, w->cap);
    if (t < 0) {
      rc = t;
    } else if (t == DT_DIR) {
      rc = stoke__blob_strs_add(&subdirs, w->a, rel, NULL);
    } else if (t != DT_REG) {
      rc = stoke__blob_strs_add(w->skipped, w->a, rel, "not a regular file");
    } else {
      const char *dot = strrchr(d->d_name, '.');
      bool is_image = false, supported = false;
      int format = STOKE__BLOB_UNKNOWN;
      if (dot) format = stoke__blob_format_of_ext(dot + 1, &is_image,
                                                  &supported);
      if (supported) {
        rc = add_sample(w, rel, dir_len, label, format);
        if (rc == 0) rel = NULL; /* owned by the sample now */
      } else if (is_image) {
        char why[64];
        snprintf(why, sizeof why, "unsupported image format %s", dot);
        rc = stoke__blob_strs_add(w->skipped, w->a, rel, why);
      } else {
        rc = stoke__blob_strs_add(w->skipped, w->a, rel,
                                  "not an image (.jpg .jpeg .png)");
      }
    }
    stoke__free(w->a, rel);
  }
  if (rc == 0 && errno != 0)
    rc = stoke__errf(w->err, w->cap, STOKE_EIO,
                     "folder source: %s/%s: readdir: %s", root, dir,
                     strerror(errno));
  else if (rc == STOKE_ENOMEM)
    stoke__errf(w->err, w->cap, rc, "folder source: out of memory");
  sys->closedir(sys->user, dp); /* read-only: nothing to lose */
  if (rc == 0) {
    if (subdirs.n) qsort(subdirs.s, subdirs.n, sizeof(char *), cmp_str);
    for (size_t k = 0; k < subdirs.n && rc == 0; k++)
      rc = walk_dir(w, subdirs.s[k], label, depth + 1);
  }
  stoke__blob_strs_free(&subdirs, w->a);
  return rc;
}

int stoke__blobset_open_folder(const char *root, const stoke_allocator *a,
                               const stoke__sys *sys, stoke__blobset **out,
                               char *err, size_t cap) {
  *out = NULL;
  if (!root || !root[0])
    return stoke__errf(err, cap, STOKE_EINVAL,
                       "folder source: root is empty");
  folder_impl *f = stoke__calloc(a, 1, sizeof *f);
  stoke__blob_strs classes = {0}, skipped = {0};
  int rc = 0;
  if (!f || !(f->root = stoke__strdup(a, root))) {
    rc = stoke__errf(err, cap, STOKE_ENOMEM,
                     "folder source: out of memory");
    goto fail;
  }
  f->sys = sys = stoke__sys_or_real(sys);
  size_t n_root = strlen(f->root);
  while (n_root > 1 && f->root[n_root - 1] == '/') f->root[--n_root] = 0;

  /* Classes: the visible folders of root; files there are not samples. */
  DIR *dp = sys->opendir(sys->user, f->root);
  if (!dp) {
    rc = stoke__errf(err, cap, STOKE_EIO,
                     "folder source: %s: cannot open folder: %s",
                     f->root, strerror(errno));
    goto fail;
  }
  struct dirent *d;
  for (errno = 0; rc == 0 && (d = sys->readdir(sys->user, dp)) != NULL;
       errno = 0) {
    if (d->d_name[0] == '.') continue;
    int t = entry_type(f, f->root, d->d_name, d, a, err, cap);
    if (t < 0) rc = t;
    else if (t == DT_DIR)
      rc = stoke__blob_strs_add(&classes, a, d->d_name, NULL);
    else
      rc = stoke__blob_strs_add(&skipped, a, d->d_name,
                                "not in a class folder");
  }
  int read_errno = errno;
  sys->closedir(sys->user, dp);
  if (rc == STOKE_ENOMEM) {
    rc = stoke__errf(err, cap, rc, "folder source: out of memory");
    goto fail;
  }
  if (rc) goto fail; /* the message is set */
  if (read_errno) {
    rc = stoke__errf(err, cap, STOKE_EIO, "folder source: %s: readdir: %s",
                     f->root, strerror(read_errno));
    goto fail;
  }
  if (classes.n == 0) {
    rc = stoke__errf(err, cap, STOKE_EFORMAT,
                     "folder source: %s has no class folder (expected "
                     "root/<class>/<image>)", f->root);
    goto fail;
  }
  if (classes.n > UINT32_MAX) {
    rc = stoke__errf(err, cap, STOKE_EFORMAT,
                     "folder source: %s: too many classes", f->root);
    goto fail;
  }
  qsort(classes.s, classes.n, sizeof(char *), cmp_str);

  walk w = {a, f, &skipped, err, cap};
  for (size_t c = 0; c < classes.n; c++) {
    size_t first = f->n, first_skip = skipped.n;
    rc = walk_dir(&w, classes.s[c], (uint32_t)c, 0);
    if (rc) goto fail;
    if (f->n == first) {
      /* torchvision raises FileNotFoundError here: say which and why. */
      size_t n_skip = skipped.n - first_skip;
      if (n_skip == 0)
        rc = stoke__errf(err, cap, STOKE_EFORMAT,
                         "folder source: class folder %s/%s (class %zu) "
                         "has no image file (.jpg .jpeg .png)", f->root,
                         classes.s[c], c);
      else {
        const char *p = skipped.s[first_skip];
        rc = stoke__errf(err, cap, STOKE_EFORMAT,
                         "folder source: class folder %s/%s (class %zu) "
                         "has no image file (.jpg .jpeg .png); %zu "
                         "file(s) skipped, e.g. %s: %s", f->root,
                         classes.s[c], c, n_skip, p, p + strlen(p) + 1);
      }
      goto fail;
    }
    qsort(f->v + first, f->n - first, sizeof *f->v, cmp_sample);
  }
  if (skipped.n) qsort(skipped.s, skipped.n, sizeof(char *), cmp_str);
  return stoke__blobset_wrap(&folder_ops, f, f->n, &classes, &skipped, a,
                             out, err, cap);
fail:
  folder_destroy(f, a);
  stoke__blob_strs_free(&classes, a);
  stoke__blob_strs_free(&skipped, a);
  return rc;
}
