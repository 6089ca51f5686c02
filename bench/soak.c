/* soak.c — a long run of one loader with its resident set sampled
** throughout: memory must stay flat after warm-up (a leak per batch, per
** epoch or per sample shows as a slope).  bench/soak.sh builds and runs it.
**
**   soak synthetic BATCHES [TOL_MIB]          small synthetic batches
**   soak images PATH EPOCHS [TOL_MIB [NAME]]  an image dataset, many epochs
**
** Prints the curve (RSS at each sample point) and a verdict.  What is
** judged is the anonymous resident set (RssAnon: heap, stacks, batch
** slots), where a leak shows.  File pages of packed shards' mappings
** (RssFile) come and go by design, dropped every 16 MiB decoded
** (src/storage/packed.c); they are printed and must stay under 16 MiB plus
** what is in flight plus TOL_MIB.  Flat means, over the samples after
** warm-up (the first 10% of the run):
**   max - min <= TOL_MIB (default 4 MiB), and
**   mean of the last third - mean of the first third <= TOL_MIB / 4,
** so a slow leak fails the second test long before it fails the first.
** Exit 0 when flat, 1 when not, 2 on a usage or library error.  The JSON
** line at the end (prefixed "json: ") has every number. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stoke.h"

#define N_POINTS 60

/* RssAnon and RssFile of /proc/self/status, in MiB. */
static void rss_mib(double *anon, double *file) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb;
  *anon = *file = 0;
  while (f && fgets(line, sizeof line, f)) {
    if (sscanf(line, "RssAnon: %ld kB", &kb) == 1) *anon = kb / 1024.0;
    if (sscanf(line, "RssFile: %ld kB", &kb) == 1) *file = kb / 1024.0;
  }
  if (f) fclose(f);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct curve {
  double at[N_POINTS + 2];   /* batches done at the point */
  double mib[N_POINTS + 2];  /* anonymous resident set then */
  double file[N_POINTS + 2]; /* file-backed resident set then */
  int n;
} curve;

static void point(curve *c, double at) {
  if (c->n < N_POINTS + 2) {
    c->at[c->n] = at;
    rss_mib(&c->mib[c->n], &c->file[c->n]);
    c->n++;
  }
}

/* Print the curve and judge it; returns 0 flat, 1 not. */
static int verdict(const char *what, const curve *c, double tol,
                   double seconds, double batches) {
  int first = c->n / 10; /* warm-up: the first 10% of the points */
  if (first < 1) first = 1;
  double lo = 1e300, hi = 0, file_lo = 1e300, file_hi = 0;
  for (int i = first; i < c->n; i++) {
    if (c->mib[i] < lo) lo = c->mib[i];
    if (c->mib[i] > hi) hi = c->mib[i];
    if (c->file[i] < file_lo) file_lo = c->file[i];
    if (c->file[i] > file_hi) file_hi = c->file[i];
  }
  int m = c->n - first, third = m / 3;
  double a = 0, b = 0;
  for (int i = 0; i < third; i++) {
    a += c->mib[first + i];
    b += c->mib[c->n - 1 - i];
  }
  double growth = third ? (b - a) / third : 0;
  /* Mapped shard pages: dropped every 16 MiB decoded, plus the samples in
  ** flight (a few MiB here). */
  double file_bound = file_lo + 16.0 + 8.0 + tol;
  int flat = hi - lo <= tol && growth <= tol / 4 && file_hi <= file_bound;
  printf("%s: resident set over the run (MiB: anonymous, file-backed; * = "
         "warm-up, left out)\n", what);
  for (int i = 0; i < c->n; i++) {
    int bar = (int)((c->mib[i] - (lo < 1e300 ? lo : 0)) * 8.0 + 0.5);
    if (bar < 0) bar = 0;
    if (bar > 60) bar = 60;
    printf("  %12.0f %8.2f %8.2f %c %.*s\n", c->at[i], c->mib[i], c->file[i],
           i < first ? '*' : ' ', bar,
           "############################################################");
  }
  printf("%s: %.0f batches in %.1f s (%.0f batches/s); after warm-up "
         "anonymous RSS %.2f..%.2f MiB (spread %.2f, tolerance %.2f), last "
         "third - first third %+.3f MiB (tolerance %.2f); file-backed "
         "%.2f..%.2f MiB (bound %.2f): %s\n",
         what, batches, seconds, batches / seconds, lo, hi, hi - lo, tol,
         growth, tol / 4, file_lo, file_hi, file_bound,
         flat ? "FLAT" : "NOT FLAT");
  printf("json: {\"run\": \"%s\", \"batches\": %.0f, \"seconds\": %.2f, "
         "\"anon_min_mib\": %.3f, \"anon_max_mib\": %.3f, \"growth_mib\": "
         "%.4f, \"file_min_mib\": %.3f, \"file_max_mib\": %.3f, "
         "\"tolerance_mib\": %.2f, \"flat\": %s, \"curve\": [",
         what, batches, seconds, lo, hi, growth, file_lo, file_hi, tol,
         flat ? "true" : "false");
  for (int i = 0; i < c->n; i++)
    printf("%s[%.0f, %.3f, %.3f]", i ? ", " : "", c->at[i], c->mib[i],
           c->file[i]);
  printf("]}\n");
  return flat ? 0 : 1;
}

static int fail(const char *what) {
  fprintf(stderr, "soak: %s: %s\n", what, stoke_errmsg(NULL));
  return 2;
}

/* Run `loader` until `total` batches (whole epochs for images), sampling
** every `every` batches. */
static int drive(stoke_loader *l, double total, double every, curve *c,
                 double *done_out) {
  double done = 0, next_point = 0;
  stoke_batch *b;
  for (;;) {
    int rc = stoke_loader_next(l, &b);
    if (rc == STOKE_END) {
      if (done >= total) break;
      continue;
    }
    if (rc != STOKE_OK) {
      fprintf(stderr, "soak: next: %s\n", stoke_errmsg(l));
      return 2;
    }
    stoke_batch_release(b);
    done++;
    if (done >= next_point) {
      point(c, done);
      next_point += every;
    }
  }
  point(c, done);
  *done_out = done;
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: soak synthetic BATCHES [TOL_MIB]\n"
                    "       soak images PATH EPOCHS [TOL_MIB [NAME]]\n");
    return 2;
  }
  int images = strcmp(argv[1], "images") == 0;
  double tol = 4.0;
  stoke_source *src = NULL;
  double total;
  stoke_config cfg;
  stoke_config_init(&cfg);
  if (images) {
    if (argc < 4) return 2;
    if (argc > 4) tol = atof(argv[4]);
    stoke_image_config ic;
    stoke_image_config_init(&ic);
    ic.transform = "random-resized-crop=64,flip,normalize=imagenet,chw,f32";
    if (stoke_source_create_images(argv[2], &ic, &src) != 0)
      return fail(argv[2]);
    cfg.batch_size = 16;
    cfg.n_workers = 2;
    double epochs = atof(argv[3]);
    total = epochs * (double)((stoke_source_n_samples(src) + 15) / 16);
  } else {
    if (argc > 3) tol = atof(argv[3]);
    stoke_synthetic_config sc;
    stoke_synthetic_config_init(&sc);
    sc.kind = STOKE_SYNTH_TENSOR;
    sc.n_samples = 4096;
    sc.ndim = 1;
    sc.shape[0] = 16;
    if (stoke_source_create_synthetic(&sc, &src) != 0)
      return fail("synthetic");
    cfg.batch_size = 4;
    cfg.n_workers = 2;
    total = atof(argv[2]);
  }
  cfg.source = src;
  cfg.shuffle = 1;
  cfg.prefetch = 4;
  stoke_loader *l;
  if (stoke_loader_create(&cfg, &l) != 0) return fail("loader");
  stoke_source_destroy(src);
  curve c = {{0}, {0}, 0};
  double t0 = now_s(), done = 0;
  int rc = drive(l, total, total / N_POINTS, &c, &done);
  double secs = now_s() - t0;
  stoke_loader_destroy(l);
  if (rc) return rc;
  const char *name = images ? (argc > 5 ? argv[5] : "images") : "synthetic";
  return verdict(name, &c, tol, secs, done);
}
