/* identity.c — stoke_source_fingerprint: which dataset a source reads.
**
** Quarantine files and loader states name sample *indices*; an index only
** means the same sample in the same dataset.  The fingerprint hashes what
** fixes that meaning without reading any file: the kind, the sample count,
** the class names and, for image sources, the label and the place (file
** name, tar member, shard offset) of up to FINGERPRINT_SAMPLES samples
** spread evenly over the indices.  Folders are left out of the places, so
** a dataset copied or mounted elsewhere keeps its fingerprint; the
** transform is left out, so a run may resume at another resolution. */
#include "source/source.h"

#include <string.h>

#define FINGERPRINT_SAMPLES 1024

typedef struct hasher {
  uint64_t h;
} hasher;

static void add_u64(hasher *x, uint64_t v) { x->h = stoke__hash_u64(x->h, v); }
static void add_str(hasher *x, const char *s) { x->h = stoke__hash_str(x->h, s); }

/* The place of a sample without the folders above it: the describe text of
** a folder sample is a path (keep its last component; the label keeps the
** class), that of a tar or packed sample a shard path then " member ..."
** or " sample ..." (keep the shard's base name and the rest). */
static const char *without_folders(const char *kind, const char *where) {
  const char *end = where + strlen(where);
  if (strcmp(kind, "tar") == 0) {
    const char *m = strstr(where, " member ");
    if (m) end = m;
  } else if (strcmp(kind, "packed") == 0) {
    const char *m = strstr(where, " sample ");
    if (m) end = m;
  }
  const char *base = where;
  for (const char *p = where; p < end; p++)
    if (*p == '/') base = p + 1;
  return base;
}

uint64_t stoke_source_fingerprint(const stoke_source *src) {
  if (!src) return 0;
  hasher x = {0x5370ce5eedULL};
  add_str(&x, src->kind ? src->kind : "");
  add_u64(&x, src->n_samples);
  size_t nc = stoke_source_n_classes(src);
  add_u64(&x, nc);
  for (size_t c = 0; c < nc; c++) {
    const char *name = stoke_source_class_name(src, c);
    add_str(&x, name ? name : "");
  }
  if (!src->ops || !src->ops->describe) return x.h;
  size_t n = src->n_samples;
  size_t m = STOKE__MIN(n, (size_t)FINGERPRINT_SAMPLES);
  char where[512];
  for (size_t k = 0; k < m; k++) {
    /* Evenly spread, the first and the last included. */
    size_t i = m == 1 ? 0 : (size_t)((double)k * (double)(n - 1) /
                                     (double)(m - 1));
    where[0] = '\0';
    src->ops->describe(src, i, where, sizeof where);
    add_u64(&x, i);
    add_u64(&x, (uint64_t)stoke_source_label(src, i));
    add_str(&x, without_folders(src->kind, where));
  }
  return x.h;
}
