/* owned_config.c — the strings of a loader's config that it reads after
** create (the device, the CUDA library, the cache directory), copied: the
** caller's may be gone by then.  One block holds them all, so the loader
** keeps one pointer and frees one allocation. */
#include "pipeline/pipeline.h"

#include <string.h>

int stoke__config_own_strings(stoke_config *c, const stoke_allocator *a,
                              char **block) {
  const char **fields[] = {&c->device, &c->cuda_library, &c->cache_dir};
  size_t n = sizeof fields / sizeof fields[0], need = 0;
  *block = NULL;
  for (size_t i = 0; i < n; i++)
    if (*fields[i]) need += strlen(*fields[i]) + 1;
  if (need == 0) return 0;
  char *at = stoke__calloc(a, 1, need);
  if (!at) return STOKE_ENOMEM;
  *block = at;
  for (size_t i = 0; i < n; i++) {
    if (!*fields[i]) continue;
    size_t len = strlen(*fields[i]) + 1;
    memcpy(at, *fields[i], len);
    *fields[i] = at;
    at += len;
  }
  return 0;
}
