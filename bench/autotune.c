/* autotune.c (bench) — online autotuning against the exhaustive knee.
**
** One scenario per run: samples that sleep (waiting I/O), spin (a CPU-bound
** decode) or both, at a fixed or lognormal cost, and a consumer step that
** sleeps (a GPU-like step), optionally changing at given steps.
**   --mode sweep   fixed W = 1..max (prefetch 2), each for one warm-up
**                  epoch and --sweep-epochs measured whole epochs,
**                  measured as the autotuner's epochs are (samples over
**                  the steps' two clocks, epoch ends included): the
**                  exhaustive table, its knee (stoke_tune_knee_find).  A
**                  window of 30 steps cut out of an epoch began with the
**                  prefetched queue full, which read a stalling W up to 7%
**                  faster than its steady state (spin 300 us: 6921
**                  samples/s at W = 4, above the 2 cores' 6667).
**   --mode auto    one autotuning loader for --epochs epochs: its
**                  decisions, and per epoch its throughput, W, K, changes
** Output: one JSON object per line ("point", "knee", "epoch", "event",
** "auto"), read by bench/autotune.py. */
#define _POSIX_C_SOURCE 200809L
#include "stoke.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct scen {
  double sleep_us, spin_us; /* per sample, the mean */
  double sigma;             /* lognormal log-sd, 0 = fixed */
  size_t floats;            /* the sample's size, all of it written */
} scen;

/* The process's resident set, MiB (/proc/self/statm), or -1. */
static double rss_mib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, res = -1;
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &res) != 2) res = -1;
    fclose(f);
  }
  return res < 0 ? -1.0 : (double)res * 4096.0 / 1048576.0;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ns(int64_t ns) {
  if (ns <= 0) return;
  struct timespec ts = {.tv_sec = ns / 1000000000LL,
                        .tv_nsec = ns % 1000000000LL};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static void spin_ns(int64_t ns) {
  struct timespec a, b;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  do {
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  } while ((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec) <
           ns);
}

static int fill(void *user, stoke_sample *s) {
  const scen *sc = user;
  double x = 1.0;
  if (sc->sigma > 0) {
    /* Mean 1: exp(sigma * z - sigma^2 / 2), z from the sample's stream. */
    double z = stoke_rng_normal(stoke_sample_rng(s));
    x = exp(sc->sigma * z - sc->sigma * sc->sigma / 2);
  }
  if (sc->spin_us > 0) spin_ns((int64_t)(sc->spin_us * 1e3 * x));
  if (sc->sleep_us > 0) sleep_ns((int64_t)(sc->sleep_us * 1e3 * x));
  float *f = stoke_sample_field(s, 0);
  for (size_t i = 0; i < sc->floats; i++) f[i] = (float)stoke_sample_index(s);
  return 0;
}

static stoke_source *make_source(scen *sc, size_t n) {
  stoke_field_desc fd = {.name = "x", .dtype = STOKE_F32, .ndim = 1,
                         .shape = {(int64_t)sc->floats}};
  stoke_source *src = NULL;
  if (stoke_source_create_callback(n, 1, &fd, fill, sc, &src) != 0) {
    fprintf(stderr, "autotune: %s\n", stoke_errmsg(NULL));
    exit(1);
  }
  return src;
}

/* "200:2,400:16": at step 200 the step becomes 2 ms, at 400 16 ms. */
typedef struct change {
  uint64_t at;
  double ms;
} change;

static double step_ms_at(double base, const change *ch, size_t n,
                         uint64_t step) {
  double ms = base;
  for (size_t i = 0; i < n; i++)
    if (step >= ch[i].at) ms = ch[i].ms;
  return ms;
}

int main(int argc, char **argv) {
  scen sc = {.floats = 16};
  const char *mode = "auto";
  size_t batch = 16, n_batches = 64, sweep_epochs = 2;
  double step_ms = 8;
  unsigned max_w = 12, epochs = 6;
  double cpu_budget = 0;
  change ch[8];
  size_t n_ch = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    if (!strcmp(k, "--mode")) mode = v;
    else if (!strcmp(k, "--sleep-us")) sc.sleep_us = atof(v);
    else if (!strcmp(k, "--spin-us")) sc.spin_us = atof(v);
    else if (!strcmp(k, "--sigma")) sc.sigma = atof(v);
    else if (!strcmp(k, "--sample-kib")) sc.floats = (size_t)atol(v) * 256;
    else if (!strcmp(k, "--step-ms")) step_ms = atof(v);
    else if (!strcmp(k, "-b")) batch = (size_t)atol(v);
    else if (!strcmp(k, "--batches")) n_batches = (size_t)atol(v);
    else if (!strcmp(k, "--sweep-epochs")) sweep_epochs = (size_t)atol(v);
    else if (!strcmp(k, "--max-workers")) max_w = (unsigned)atoi(v);
    else if (!strcmp(k, "--epochs")) epochs = (unsigned)atoi(v);
    else if (!strcmp(k, "--cpu-budget")) cpu_budget = atof(v);
    else if (!strcmp(k, "--change")) {
      char *p = (char *)v;
      while (*p && n_ch < 8) {
        ch[n_ch].at = strtoull(p, &p, 10);
        if (*p == ':') p++;
        ch[n_ch++].ms = strtod(p, &p);
        if (*p == ',') p++;
      }
    } else {
      fprintf(stderr, "autotune: unknown option %s\n", k);
      return 2;
    }
  }
  stoke_source *src = make_source(&sc, batch * n_batches);
  if (!strcmp(mode, "sweep")) {
    stoke_tune_point pts[256];
    size_t n = 0;
    for (unsigned w = 1; w <= max_w && n < 256; w++, n++) {
      stoke_config cfg;
      stoke_config_init(&cfg);
      cfg.source = src;
      cfg.batch_size = batch;
      cfg.n_workers = w;
      cfg.prefetch = 2;
      cfg.warmup_epochs = 1;
      stoke_loader *l;
      if (stoke_loader_create(&cfg, &l) != 0) {
        fprintf(stderr, "autotune: %s\n", stoke_errmsg(NULL));
        return 1;
      }
      stoke_batch *b;
      for (size_t e = 0; e < 1 + sweep_epochs;) {
        int rc = stoke_loader_next(l, &b);
        if (rc == STOKE_END) {
          e++;
          continue;
        }
        if (rc != 0) {
          fprintf(stderr, "autotune: %s\n", stoke_errmsg(l));
          return 1;
        }
        sleep_ns((int64_t)(step_ms * 1e6));
        stoke_batch_release(b);
      }
      stoke_stats st;
      st.struct_size = sizeof st;
      stoke_loader_stats(l, &st);
      /* Samples over the measured steps' two clocks. */
      double wall = (double)(st.wait.total_ns + st.compute.total_ns) / 1e9;
      stoke_tune_point *p = &pts[n];
      memset(p, 0, sizeof *p);
      p->n_workers = w;
      p->prefetch = 2;
      p->batch_size = batch;
      p->host_bytes = stoke_loader_host_bytes(l);
      p->status = STOKE_TUNE_MEASURED;
      p->samples_per_s = wall > 0 ? (double)st.samples / wall : 0;
      p->wait_ratio = st.wait_ratio;
      p->queue_empty_frac = st.queue_empty_frac;
      stoke_diagnosis dg;
      p->verdict = stoke_diagnose(&st, &dg) == 0 ? dg.verdict : 0;
      p->steps = st.steps;
      p->samples = st.samples;
      printf("{\"point\":{\"workers\":%u,\"samples_per_s\":%.1f,"
             "\"wait\":%.4f,\"verdict\":\"%s\"}}\n",
             w, p->samples_per_s, p->wait_ratio,
             stoke_verdict_name(p->verdict));
      fflush(stdout);
      stoke_loader_destroy(l);
    }
    stoke_tune_knee k;
    if (stoke_tune_knee_find(pts, n, STOKE_TUNE_TOLERANCE, 1, &k) != 0)
      return 1;
    printf("{\"knee\":{\"workers\":%u,\"samples_per_s\":%.1f,"
           "\"best_samples_per_s\":%.1f,\"busy\":%d}}\n",
           pts[k.index].n_workers, pts[k.index].samples_per_s,
           pts[k.best].samples_per_s, k.stall_removed);
    stoke_source_destroy(src);
    return 0;
  }

  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = batch;
  cfg.autotune = 1;
  cfg.n_workers = max_w;
  cfg.cpu_budget = cpu_budget;
  cfg.trace_events = 0;
  stoke_loader *l;
  if (stoke_loader_create(&cfg, &l) != 0) {
    fprintf(stderr, "autotune: %s\n", stoke_errmsg(NULL));
    return 1;
  }
  uint64_t step = 0;
  size_t seen_ev = 0;
  for (unsigned e = 0; e < epochs; e++) {
    int64_t t0 = now_ns();
    uint64_t first = step;
    size_t samples = 0;
    stoke_batch *b;
    int rc;
    while ((rc = stoke_loader_next(l, &b)) == 0) {
      samples += stoke_batch_size(b);
      sleep_ns((int64_t)(step_ms_at(step_ms, ch, n_ch, step) * 1e6));
      stoke_batch_release(b);
      step++;
    }
    if (rc != STOKE_END) {
      fprintf(stderr, "autotune: %s\n", stoke_errmsg(l));
      return 1;
    }
    double s = (double)(now_ns() - t0) / 1e9;
    size_t n_ev = stoke_loader_n_autotune_events(l);
    unsigned changes = 0;
    for (; seen_ev < n_ev; seen_ev++) {
      stoke_autotune_event ev;
      stoke_loader_autotune_event(l, seen_ev, &ev);
      if (ev.kind != STOKE_AUTOTUNE_LIMIT && ev.kind != STOKE_AUTOTUNE_STEP &&
          ev.kind != STOKE_AUTOTUNE_OUTSIDE)
        changes++;
      printf("{\"event\":{\"kind\":\"%s\",\"epoch\":%llu,\"step\":%llu,"
             "\"from_workers\":%u,\"to_workers\":%u,\"from_prefetch\":%u,"
             "\"to_prefetch\":%u,\"text\":\"%s\"}}\n",
             stoke_autotune_kind_name(ev.kind),
             (unsigned long long)ev.epoch, (unsigned long long)ev.step,
             ev.from_workers, ev.to_workers, ev.from_prefetch,
             ev.to_prefetch, ev.text);
    }
    stoke_stats st;
    st.struct_size = sizeof st;
    stoke_loader_stats(l, &st);
    /* As the sweep measures a point: samples over the steps' two clocks
    ** (wall_samples_per_s: over the epoch's wall time, its end and start
    ** included). */
    stoke_epoch_stats es;
    double steps_s = stoke_loader_epoch_stats(l, e, &es) == 0
                         ? (double)(es.wait_ns + es.compute_ns) / 1e9
                         : s;
    printf("{\"epoch\":{\"epoch\":%u,\"steps_end\":%llu,\"samples_per_s\":"
           "%.1f,\"wall_samples_per_s\":%.1f,\"workers\":%u,"
           "\"prefetch\":%u,\"changes\":%u,\"step_ms\":%.2f,"
           "\"rss_mib\":%.1f,\"released_mib\":%.1f}}\n",
           e, (unsigned long long)step, (double)samples / steps_s,
           (double)samples / s, st.n_workers, st.prefetch, changes,
           step_ms_at(step_ms, ch, n_ch, first), rss_mib(),
           (double)st.autotune_released_bytes / 1048576.0);
    fflush(stdout);
  }
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  return 0;
}
