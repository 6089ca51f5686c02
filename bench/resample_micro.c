/* resample_micro.c — microseconds per sample of stoke__tf_apply alone, on
** the benchmark workload: RandomResizedCrop(224) boxes of a photo-sized
** RGB image (440x365 by default), one thread, outputs written round-robin
** into a 64-slot batch buffer (as the loader writes slots, mostly missing
** the cache).  Plans are made before timing; the number is the median of
** several rounds over the same plans, in thread CPU time.  Not part of the
** CMake build or CI:
**
**   cmake --build build-tf -j2 --target stoke_static
**   cc -O2 -DBENCH_ISA -Isrc -Iinclude bench/resample_micro.c \
**      build-tf/libstoke.a -lm -lpthread -o /tmp/resample_micro
**   /tmp/resample_micro [W H [samples [rounds]]]
**
** BENCH_VERBOSE=1 prints every round's time on stderr.
**
** Built with -DBENCH_ISA, it also takes the path to time as an environment
** variable, STOKE_TF_ISA=scalar|sse41|avx2 (stoke__tf_scratch.isa: the CPU
** must have it). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "transform/transform.h"

/* The thread's CPU time, not wall time: on a shared machine, time spent
** descheduled is not the transform's. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Smooth ramps plus hash noise: a photo's statistics do not matter to the
** resampler's speed, only its size does. */
static uint8_t *make_image(int w, int h) {
  uint8_t *px = malloc((size_t)w * h * 3);
  if (!px) exit(1);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < 3; c++) {
        uint32_t v = ((uint32_t)(x * 7 + y * 13 + c) + 1u) * 2654435761u;
        px[((size_t)y * w + x) * 3 + c] =
            (uint8_t)((x + 2 * y + 40 * c) % 256 / 2 + (v >> 26));
      }
  return px;
}

static void run(const char *text, const uint8_t *px, int w, int h,
                int samples, int rounds) {
  stoke__tf_spec spec;
  if (stoke__tf_parse(text, &spec)) {
    fprintf(stderr, "%s\n", stoke__tls_error());
    exit(1);
  }
  stoke__tf_plan *plans = malloc(sizeof *plans * (size_t)samples);
  size_t slot = stoke__tf_out_bytes(&spec);
  enum { SLOTS = 64 };
  char *batch = malloc(slot * SLOTS);
  double *t = malloc(sizeof *t * (size_t)rounds);
  if (!plans || !batch || !t) exit(1);
  memset(batch, 0, slot * SLOTS);
  for (int i = 0; i < samples; i++) {
    stoke_rng rng;
    stoke_rng_init(&rng, 1, 0, (uint64_t)i);
    if (stoke__tf_plan_make(&spec, w, h, &rng, &plans[i])) exit(1);
  }
  stoke__tf_image img = {.px = px, .w = w, .h = h, .stride = 3 * (size_t)w,
                         .scale = 1.0};
  stoke__tf_scratch s;
  stoke__tf_scratch_init(&s, NULL);
#ifdef BENCH_ISA
  const char *isa = getenv("STOKE_TF_ISA");
  if (isa && strcmp(isa, "scalar") == 0) s.isa = STOKE__TF_ISA_SCALAR;
  if (isa && strcmp(isa, "sse41") == 0) s.isa = STOKE__TF_ISA_SSE41;
  if (isa && strcmp(isa, "avx2") == 0) s.isa = STOKE__TF_ISA_AVX2;
#endif
  /* A warm-up round grows the scratch. */
  for (int r = -1; r < rounds; r++) {
    double t0 = now_s();
    for (int i = 0; i < samples; i++)
      if (stoke__tf_apply(&spec, &plans[i], &img, &s,
                          batch + (size_t)(i % SLOTS) * slot)) {
        fprintf(stderr, "%s\n", stoke__tls_error());
        exit(1);
      }
    if (r >= 0) t[r] = (now_s() - t0) / samples * 1e6;
  }
  if (getenv("BENCH_VERBOSE"))
    for (int r = 0; r < rounds; r++) fprintf(stderr, " %.1f", t[r]);
  qsort(t, (size_t)rounds, sizeof *t, cmp_double);
  /* A checksum, so that a change of output shows here too. */
  uint64_t sum = 0;
  for (size_t i = 0; i < slot * SLOTS; i++)
    sum = sum * 31 + (unsigned char)batch[i];
  printf("%-58s %7.1f us/sample (min %.1f)  sum %016llx\n", text,
         t[rounds / 2], t[0], (unsigned long long)sum);
  stoke__tf_scratch_free(&s);
  free(t);
  free(batch);
  free(plans);
}

int main(int argc, char **argv) {
  int w = argc > 2 ? atoi(argv[1]) : 440, h = argc > 2 ? atoi(argv[2]) : 365;
  int samples = argc > 3 ? atoi(argv[3]) : 1000;
  int rounds = argc > 4 ? atoi(argv[4]) : 7;
  if (w < 1 || h < 1 || samples < 1 || rounds < 1) return 2;
  uint8_t *px = make_image(w, h);
  run("random-resized-crop=224,flip,chw,u8", px, w, h, samples, rounds);
  run("random-resized-crop=224,flip,normalize=imagenet,chw,f32", px, w, h,
      samples, rounds);
  run("random-resized-crop=224,flip,normalize=imagenet,chw,f16", px, w, h,
      samples, rounds);
  run("random-resized-crop=224,flip,hwc,u8", px, w, h, samples, rounds);
  free(px);
  return 0;
}
