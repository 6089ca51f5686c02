/* fuzz_tar.c — the tar reader (src/storage/tar.c) on any bytes: ustar, GNU
** long names, pax records, base-256 sizes, grouping into samples, .cls
** labels.  Properties: a refused shard names why and leaves nothing open;
** every sample of an accepted one reads its bytes from inside the file. */
#include "fuzz.h"
#include "storage/blob.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  memfs fs;
  memfs_init(&fs, data, n);
  const char *specs[] = {"fuzz.tar"};
  stoke__blobset *s = NULL;
  char err[512];
  int rc = stoke__blobset_open_tar(specs, 1, NULL, &fs.table, &s, err,
                                   sizeof err);
  if (rc != 0) {
    FUZZ_ASSERT(s == NULL && fs.open_fds == 0);
    FUZZ_ASSERT(rc == STOKE_EFORMAT || rc == STOKE_ENOMEM);
    FUZZ_ASSERT(err[0] != 0);
    return 0;
  }
  size_t ns = stoke__blobset_n_samples(s);
  FUZZ_ASSERT(ns > 0 && ns <= n / 1024);
  for (size_t k = 0; k < stoke__blobset_n_skipped(s); k++) {
    const char *why;
    FUZZ_ASSERT(stoke__blobset_skipped(s, k, &why) != NULL && why);
  }
  stoke__blob_reader r;
  stoke__blob_reader_init(&r, NULL);
  for (size_t i = 0; i < ns; i++) {
    char where[256];
    stoke__blobset_describe(s, i, where, sizeof where);
    (void)stoke__blobset_label(s, i);
    const uint8_t *p;
    size_t len;
    rc = stoke__blobset_read(s, i, &r, &p, &len, err, sizeof err);
    FUZZ_ASSERT(rc == 0 && len <= n);
  }
  stoke__blob_reader_free(&r);
  stoke__blobset_close(s);
  FUZZ_ASSERT(fs.open_fds == 0);
  return 0;
}
