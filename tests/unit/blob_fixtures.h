/* blob_fixtures.h — shared by the storage tests (test_blob_*.c): a scratch
** directory per test, removed with everything in it, and an allocator that
** fails on request.  Header-only; the including file defines
** _XOPEN_SOURCE 700 (nftw). */
#ifndef STOKE_TEST_BLOB_FIXTURES_H
#define STOKE_TEST_BLOB_FIXTURES_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int tmpdir_rm_one(const char *p, const struct stat *st, int flag,
                         struct FTW *f) {
  (void)st;
  (void)flag;
  (void)f;
  return remove(p);
}

/* rm -rf dir. */
static void rm_rf(const char *dir) {
  nftw(dir, tmpdir_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A new directory under /tmp; free() the name after rm_rf. */
static char *make_tmp(void) {
  char *d = strdup("/tmp/stoke-blob-XXXXXX");
  assert_non_null(d);
  assert_non_null(mkdtemp(d));
  return d;
}

/* An allocator that fails allocation number fail_at (1-based; 0 = never)
** and counts what is live, for the ENOMEM loops. */
typedef struct failing {
  long n, fail_at, live, faults;
} failing;
static void *f_alloc(void *u, size_t n) {
  failing *f = u;
  if (f->fail_at && ++f->n == f->fail_at) {
    f->faults++;
    return NULL;
  }
  f->live++;
  return malloc(n);
}
static void f_free(void *u, void *p) {
  ((failing *)u)->live--;
  free(p);
}

#endif /* STOKE_TEST_BLOB_FIXTURES_H */
