/* consumer.c — a C program built against an installed stoke, the way a
** user builds one: through pkg-config or find_package(stoke CONFIG). */
#include <stdio.h>
#include <string.h>

#include <stoke.h>

int main(void) {
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = STOKE_SYNTH_TENSOR;
  sc.n_samples = 100;
  stoke_source *src;
  if (stoke_source_create_synthetic(&sc, &src) != 0) return 1;
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = 16;
  cfg.n_workers = 2;
  stoke_loader *l;
  if (stoke_loader_create(&cfg, &l) != 0) {
    fprintf(stderr, "%s\n", stoke_errmsg(NULL));
    return 1;
  }
  stoke_source_destroy(src);
  size_t samples = 0;
  stoke_batch *b;
  while (stoke_loader_next(l, &b) == STOKE_OK) {
    samples += stoke_batch_size(b);
    stoke_batch_release(b);
  }
  stoke_loader_destroy(l);
  printf("stoke %s: %zu samples\n", stoke_version(), samples);
  return samples == 100 && strcmp(stoke_version(), STOKE_VERSION_STRING) == 0
             ? 0
             : 1;
}
