/* fuzz_packed.c — the packed-shard reader (src/storage/packed.c) on any
** bytes: open validates everything a read relies on, so after a successful
** open every sample reads inside the mapping (ASan checks the exact-size
** copy memfs maps), with and without CRC checks.  Properties: a refused
** shard leaves nothing open; an accepted one gives n_samples readable
** samples whose bytes lie inside the file. */
#include "fuzz.h"
#include "storage/blob.h"

static void try_open(const uint8_t *data, size_t n, unsigned flags) {
  memfs fs;
  memfs_init(&fs, data, n);
  const char *specs[] = {"fuzz.stoke"};
  stoke__blobset *s = NULL;
  char err[512];
  int rc = stoke__blobset_open_packed(specs, 1, flags, NULL, &fs.table, &s,
                                      err, sizeof err);
  if (rc != 0) {
    FUZZ_ASSERT(s == NULL && fs.maps == 0 && fs.open_fds == 0);
    FUZZ_ASSERT(rc == STOKE_EFORMAT || rc == STOKE_ENOMEM);
    FUZZ_ASSERT(memchr(err, 0, sizeof err) != NULL && err[0] != 0);
    return;
  }
  size_t ns = stoke__blobset_n_samples(s);
  FUZZ_ASSERT(ns > 0 && ns <= n / 40);
  for (size_t c = 0; c < stoke__blobset_n_classes(s); c++)
    FUZZ_ASSERT(stoke__blobset_class_name(s, c) != NULL);
  for (size_t i = 0; i < ns; i++) {
    char where[256];
    stoke__blobset_describe(s, i, where, sizeof where);
    (void)stoke__blobset_label(s, i);
    int f = stoke__blobset_format(s, i);
    FUZZ_ASSERT(f >= 0 && f < STOKE__BLOB_FORMAT_COUNT);
    uint32_t w, h;
    stoke__blobset_dims(s, i, &w, &h);
    const uint8_t *p;
    size_t len;
    rc = stoke__blobset_read(s, i, NULL, &p, &len, err, sizeof err);
    FUZZ_ASSERT(rc == 0 || (rc == STOKE_EFORMAT &&
                            (flags & STOKE__PACK_VERIFY_CRC)));
    if (rc == 0) {
      FUZZ_ASSERT(len <= n);
      volatile uint8_t sum = 0; /* touch every byte: ASan sees overreads */
      for (size_t k = 0; k < len; k++) sum ^= p[k];
      (void)sum;
      stoke__blobset_done(s, i, p, len);
    }
  }
  stoke__blobset_close(s);
  FUZZ_ASSERT(fs.maps == 0 && fs.open_fds == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try_open(data, size, 0);
  try_open(data, size, STOKE__PACK_VERIFY_CRC);
  return 0;
}
