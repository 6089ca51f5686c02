/* regression_driver.c — replays files through a harness's
** LLVMFuzzerTestOneInput with an ordinary compiler, so the checked-in
** corpus (tests/fuzz/corpus/<name>/, every crasher found included) runs
** under plain CTest and the sanitizer builds, without libFuzzer.
**
**   fuzz_regress_<name> DIR|FILE...    every file, in name order
**
** Exits 0 when every input ran (a property failure aborts), 1 when an
** argument cannot be read or holds no input at all. */
#define _DEFAULT_SOURCE /* DT_REG */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return -1;
  }
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  if (!buf) return -1;
  /* An exact-size copy: a read past the input is an ASan error. */
  uint8_t *exact = malloc(n ? n : 1);
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

static int cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  size_t total = 0;
  for (int a = 1; a < argc; a++) {
    struct stat st;
    if (stat(argv[a], &st) != 0) {
      perror(argv[a]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (run_file(argv[a]) != 0) return 1;
      total++;
      continue;
    }
    DIR *d = opendir(argv[a]);
    if (!d) {
      perror(argv[a]);
      return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      if (n == cap) names = realloc(names, (cap = cap ? 2 * cap : 64) *
                                               sizeof *names);
      names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp);
    for (size_t k = 0; k < n; k++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[a], names[k]);
      if (run_file(path) != 0) return 1;
      free(names[k]);
      total++;
    }
    free(names);
  }
  printf("%zu inputs replayed\n", total);
  return total ? 0 : 1;
}
