/* quarantine.c — the file of samples not to read (docs/quarantine.md).
**
**   # stoke quarantine: samples not to read (docs/quarantine.md)
**   stoke-quarantine 1
**   kind packed
**   samples 50000
**   fingerprint 0x9f1c2e3a4b5d6e7f
**   17<TAB>train-00000.stoke sample 17 at offset 1234<TAB>decode: ...
**
** A text file, so that a person can read it, grep it and delete a line to
** let a sample back in.  The header says which dataset the indices belong
** to (kind, sample count, stoke_source_fingerprint); an entry is a sample
** index, then optionally where it lives and why it is bad (tabs and line
** breaks in those become spaces).  Lines starting with '#' are comments.
**
** In memory: one bit per sample of the source (atomic bytes: workers test
** bits while others set them), so a lookup on the hot path is a load.
** Appending is serialised by the quarantine's own mutex (a leaf) and each
** line is flushed as it is written, so a run that is killed keeps what it
** found. */
#define _POSIX_C_SOURCE 200809L
#include "source/source.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os/private_file.h"

#define MAGIC "stoke-quarantine"
#define VERSION 1

struct stoke__quarantine {
  const stoke_allocator *alloc;
  char *path;              /* owned */
  char *tmp_path;          /* REWRITE: written here, renamed at close */
  size_t n_samples;
  atomic_uchar *bits;      /* n_samples bits; relaxed: a set bit only ever
                              means "do not read" */
  pthread_mutex_t mu;      /* leaf: f, n_listed, write_error */
  FILE *f;                 /* open for appending; NULL after an error */
  size_t n_listed;         /* distinct samples listed */
  char write_error[256];   /* the first failed write, or "" */
};

static bool test_bit(const stoke__quarantine *q, size_t i) {
  return (atomic_load_explicit(&q->bits[i / 8], memory_order_relaxed) >>
          (i % 8)) & 1;
}

/* Set bit i; true when it was clear (mu held, so n_listed is exact). */
static bool set_bit(stoke__quarantine *q, size_t i) {
  unsigned char m = (unsigned char)(1u << (i % 8));
  return !(atomic_fetch_or_explicit(&q->bits[i / 8], m,
                                    memory_order_relaxed) & m);
}

/* Copy s into out (cap > 0) with tabs and line breaks made spaces. */
static void clean(const char *s, char *out, size_t cap) {
  size_t k = 0;
  for (; s && *s && k + 1 < cap; s++)
    out[k++] = (*s == '\t' || *s == '\n' || *s == '\r') ? ' ' : *s;
  out[k] = '\0';
}

static int write_header(FILE *f, const stoke_source *src, uint64_t fp) {
  return fprintf(f,
                 "# stoke quarantine: samples not to read "
                 "(docs/quarantine.md)\n"
                 "%s %d\nkind %s\nsamples %zu\nfingerprint 0x%016llx\n"
                 "# index<TAB>where<TAB>why\n",
                 MAGIC, VERSION, src->kind, src->n_samples,
                 (unsigned long long)fp) < 0
             ? -1
             : 0;
}

/* Read an existing file into q's bits, checking its header against the
** source.  Returns 0 or STOKE_EINVAL / STOKE_EFORMAT with err set. */
static int load(stoke__quarantine *q, FILE *f, const stoke_source *src,
                uint64_t fp, char *err, size_t cap) {
  char line[2048];
  unsigned long line_no = 0;
  bool magic = false, have_kind = false, have_n = false, have_fp = false;
  char kind[64] = "";
  unsigned long long n = 0, file_fp = 0;
  while (fgets(line, sizeof line, f)) {
    line_no++;
    size_t len = strlen(line);
    if (len == sizeof line - 1 && line[len - 1] != '\n') {
      /* A long entry: the index is all that matters; skip the rest. */
      int c;
      while ((c = fgetc(f)) != EOF && c != '\n') {
      }
    }
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
      line[--len] = '\0';
    if (len == 0 || line[0] == '#') continue;
    if (!magic) {
      int v = 0;
      if (sscanf(line, MAGIC " %d", &v) != 1 || v != VERSION)
        return stoke__errf(err, cap, STOKE_EFORMAT,
                           "quarantine %s: line %lu: expected '%s %d' first, "
                           "got '%.60s'", q->path, line_no, MAGIC, VERSION,
                           line);
      magic = true;
      continue;
    }
    if (line[0] >= '0' && line[0] <= '9') {
      if (!have_kind || !have_n || !have_fp)
        return stoke__errf(err, cap, STOKE_EFORMAT,
                           "quarantine %s: line %lu: an entry before the "
                           "header's kind, samples and fingerprint",
                           q->path, line_no);
      char *end;
      errno = 0;
      unsigned long long i = strtoull(line, &end, 10);
      if (errno || (*end != '\0' && *end != '\t' && *end != ' ') ||
          i >= q->n_samples)
        return stoke__errf(err, cap, STOKE_EFORMAT,
                           "quarantine %s: line %lu: '%.40s' is not a sample "
                           "index below %zu", q->path, line_no, line,
                           q->n_samples);
      if (set_bit(q, (size_t)i)) q->n_listed++;
      continue;
    }
    if (sscanf(line, "kind %63s", kind) == 1) {
      have_kind = true;
    } else if (sscanf(line, "samples %llu", &n) == 1) {
      have_n = true;
    } else if (sscanf(line, "fingerprint %llx", &file_fp) == 1) {
      have_fp = true;
    } else {
      return stoke__errf(err, cap, STOKE_EFORMAT,
                         "quarantine %s: line %lu: not an entry nor a header "
                         "line: '%.60s'", q->path, line_no, line);
    }
    if (have_kind && have_n && have_fp &&
        (strcmp(kind, src->kind) != 0 || n != src->n_samples ||
         file_fp != fp))
      return stoke__errf(
          err, cap, STOKE_EINVAL,
          "quarantine %s was made for another dataset (%s, %llu samples, "
          "fingerprint 0x%016llx); this one is %s, %zu samples, fingerprint "
          "0x%016llx: use another file", q->path, kind, n,
          (unsigned long long)file_fp, src->kind, src->n_samples,
          (unsigned long long)fp);
  }
  if (ferror(f))
    return stoke__errf(err, cap, STOKE_EIO, "quarantine %s: cannot read: %s",
                       q->path, strerror(errno));
  if (!magic || !have_kind || !have_n || !have_fp)
    return stoke__errf(err, cap, STOKE_EFORMAT,
                       "quarantine %s: no header (expected '%s %d', kind, "
                       "samples, fingerprint)", q->path, MAGIC, VERSION);
  return 0;
}

/* APPEND on an existing file (fd, open and checked): load it, then append
** to the same file: opened again for writing (O_NOFOLLOW), it must be the
** very file that was checked. */
static int read_then_append(stoke__quarantine *q, int fd,
                            const stoke_source *src, uint64_t fingerprint,
                            char *err, size_t cap) {
  FILE *f = fdopen(fd, "r");
  if (!f) {
    close(fd);
    return stoke__errf(err, cap, STOKE_EIO, "quarantine %s: cannot read: %s",
                       q->path, strerror(errno));
  }
  int rc = load(q, f, src, fingerprint, err, cap);
  if (rc == 0) {
    struct stat was, now;
    int wfd = open(q->path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (wfd < 0 || fstat(fd, &was) != 0 || fstat(wfd, &now) != 0 ||
        !(q->f = fdopen(wfd, "a")))
      rc = stoke__errf(err, cap, STOKE_EIO,
                       "quarantine %s: cannot append: %s", q->path,
                       strerror(errno));
    else if (was.st_dev != now.st_dev || was.st_ino != now.st_ino)
      rc = stoke__errf(err, cap, STOKE_EIO,
                       "quarantine %s: replaced while it was read", q->path);
    if (rc != 0 && !q->f && wfd >= 0) close(wfd);
  }
  fclose(f);
  return rc;
}

/* A new file: written under a fresh temporary name (private, O_EXCL,
** O_NOFOLLOW).  publish_now (APPEND on a file that was absent): renamed as
** soon as its header is written, so that a killed run keeps what it found;
** else (REWRITE) renamed at close. */
static int create(stoke__quarantine *q, const stoke_source *src,
                  uint64_t fingerprint, bool publish_now, char *err,
                  size_t cap) {
  size_t n = strlen(q->path) + 64;
  char why[STOKE__ERRMSG_CAP];
  q->tmp_path = stoke__alloc(q->alloc, n);
  if (!q->tmp_path)
    return stoke__errf(err, cap, STOKE_ENOMEM, "quarantine: out of memory");
  int fd;
  int rc = stoke__secure_create(NULL, q->path, STOKE__PRIVATE_FILE_MODE,
                                q->tmp_path, n, &fd, why, sizeof why);
  if (rc != 0) {
    stoke__free(q->alloc, q->tmp_path);
    q->tmp_path = NULL;
    return stoke__errf(err, cap, rc, "quarantine: %s", why);
  }
  /* The file is ours from here: an error below removes it. */
  if (!(q->f = fdopen(fd, "w"))) close(fd);
  if (!q->f || write_header(q->f, src, fingerprint) != 0 ||
      fflush(q->f) != 0)
    return stoke__errf(err, cap, STOKE_EIO,
                       "quarantine %s: cannot write: %s", q->tmp_path,
                       strerror(errno));
  if (publish_now) {
    rc = stoke__secure_publish(NULL, q->tmp_path, q->path, why, sizeof why);
    stoke__free(q->alloc, q->tmp_path);
    q->tmp_path = NULL;
    if (rc != 0) return stoke__errf(err, cap, rc, "quarantine: %s", why);
  }
  return 0;
}

void stoke__quarantine_close(stoke__quarantine *q) {
  if (!q) return;
  const stoke_allocator *a = q->alloc;
  if (q->f) fclose(q->f);
  if (q->tmp_path) {
    /* REWRITE: the new file replaces the old one only once complete. */
    char why[STOKE__ERRMSG_CAP];
    if (q->f && !q->write_error[0])
      stoke__secure_publish(NULL, q->tmp_path, q->path, why, sizeof why);
    else
      remove(q->tmp_path);
  }
  pthread_mutex_destroy(&q->mu);
  stoke__free(a, q->bits);
  stoke__free(a, q->path);
  stoke__free(a, q->tmp_path);
  stoke__free(a, q);
}

int stoke__quarantine_open(const char *path, const stoke_source *src,
                           uint64_t fingerprint, int mode,
                           const stoke_allocator *a, stoke__quarantine **out,
                           char *err, size_t cap) {
  *out = NULL;
  stoke__quarantine *q = stoke__calloc(a, 1, sizeof *q);
  if (!q) return stoke__errf(err, cap, STOKE_ENOMEM, "quarantine: out of memory");
  q->alloc = a;
  q->n_samples = src->n_samples;
  pthread_mutex_init(&q->mu, NULL);
  q->path = stoke__strdup(a, path);
  q->bits = stoke__calloc(a, (src->n_samples + 7) / 8, sizeof *q->bits);
  if (!q->path || !q->bits) {
    stoke__quarantine_close(q);
    return stoke__errf(err, cap, STOKE_ENOMEM, "quarantine: out of memory");
  }
  int rc = 0;
  int fd = -1;
  char why[STOKE__ERRMSG_CAP];
  if (mode == STOKE__QUARANTINE_APPEND) {
    rc = stoke__secure_open_read(NULL, path, STOKE__PRIVATE_FILE_MODE, &fd,
                                 why, sizeof why);
    if (rc == 0) {
      rc = read_then_append(q, fd, src, fingerprint, err, cap);
    } else if (rc == STOKE_EIO && errno == ENOENT) {
      rc = create(q, src, fingerprint, true, err, cap);
    } else {
      stoke__errf(err, cap, rc, "quarantine: %s", why);
    }
  } else {
    rc = create(q, src, fingerprint, false, err, cap);
  }
  if (rc != 0) {
    if (q->f) {
      fclose(q->f);
      q->f = NULL;
    }
    stoke__quarantine_close(q);
    return rc;
  }
  *out = q;
  return 0;
}

bool stoke__quarantine_has(const stoke__quarantine *q, size_t index) {
  return q && index < q->n_samples && test_bit(q, index);
}

void stoke__quarantine_add(stoke__quarantine *q, size_t index,
                           const char *where, const char *why, char *note,
                           size_t note_cap) {
  if (note && note_cap) note[0] = '\0';
  if (!q || index >= q->n_samples) return;
  char w[512], r[1024];
  clean(where, w, sizeof w);
  clean(why, r, sizeof r);
  pthread_mutex_lock(&q->mu);
  if (set_bit(q, index)) {
    q->n_listed++;
    if (q->f && (fprintf(q->f, "%zu\t%s\t%s\n", index, w, r) < 0 ||
                 fflush(q->f) != 0)) {
      snprintf(q->write_error, sizeof q->write_error,
               "cannot write quarantine %s: %s", q->path, strerror(errno));
      fclose(q->f);
      q->f = NULL;
    }
  }
  if (!q->f && note && note_cap)
    snprintf(note, note_cap, "%s", q->write_error);
  pthread_mutex_unlock(&q->mu);
}

void stoke__quarantine_discard(stoke__quarantine *q) {
  if (!q) return;
  pthread_mutex_lock(&q->mu);
  if (!q->write_error[0])
    snprintf(q->write_error, sizeof q->write_error, "discarded");
  pthread_mutex_unlock(&q->mu);
}

size_t stoke__quarantine_count(stoke__quarantine *q) {
  if (!q) return 0;
  pthread_mutex_lock(&q->mu);
  size_t n = q->n_listed;
  pthread_mutex_unlock(&q->mu);
  return n;
}

const char *stoke__quarantine_path(const stoke__quarantine *q) {
  return q ? q->path : "";
}

int stoke__quarantine_error(stoke__quarantine *q, char *buf, size_t cap) {
  if (!q) return 0;
  pthread_mutex_lock(&q->mu);
  int bad = q->write_error[0] != '\0';
  if (bad && buf && cap) snprintf(buf, cap, "%s", q->write_error);
  pthread_mutex_unlock(&q->mu);
  return bad;
}

uint64_t stoke__quarantine_bytes(size_t n_samples) {
  return sizeof(stoke__quarantine) + (n_samples + 7) / 8;
}
