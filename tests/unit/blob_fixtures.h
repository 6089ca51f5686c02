/* blob_fixtures.h — shared by the storage tests (test_blob_*.c): a scratch
** directory per test, removed with everything in it, and (fault.h) the
** allocator that fails on request.  Header-only; the including file
** defines _XOPEN_SOURCE 700 (nftw). */
#ifndef STOKE_TEST_BLOB_FIXTURES_H
#define STOKE_TEST_BLOB_FIXTURES_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fault.h" /* failing, f_alloc, f_free */

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

#endif /* STOKE_TEST_BLOB_FIXTURES_H */
