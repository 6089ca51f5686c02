/* export.c — Prometheus text and JSON lines (see export.h). */
#define _POSIX_C_SOURCE 200809L
#include "stats/export.h"

#include "os/os.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* JSON lines' and the metrics' schema: it goes up when a key or a metric
** changes meaning or goes away, not when one is added. */
#define EXPORT_SCHEMA_VERSION 1

static double sec(int64_t ns) { return (double)ns / 1e9; }

/* A label value escaped as the exposition format (and JSON) want it:
** backslash, double quote and newline. */
static void print_escaped(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '\\' || *s == '"')
      fprintf(f, "\\%c", *s);
    else if (*s == '\n')
      fputs("\\n", f);
    else if ((unsigned char)*s < 0x20)
      fprintf(f, "\\u%04x", (unsigned char)*s); /* JSON; none in names */
    else
      fputc(*s, f);
  }
}

static const char *loader_name(const stoke__export_labels *lb) {
  return lb->loader && *lb->loader ? lb->loader : "loader";
}

static void labels(FILE *f, const stoke__export_labels *lb,
                   const char *quantile) {
  fprintf(f, "{rank=\"%u\",loader=\"", lb->rank);
  print_escaped(f, loader_name(lb));
  fputc('"', f);
  if (quantile) fprintf(f, ",quantile=\"%s\"", quantile);
  fputc('}', f);
}

static void head(FILE *f, const char *name, const char *type,
                 const char *help) {
  fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample(FILE *f, const char *name, const char *suffix,
                   const stoke__export_labels *lb, const char *quantile,
                   double v) {
  fprintf(f, "%s%s", name, suffix);
  labels(f, lb, quantile);
  fprintf(f, " %.9g\n", v);
}

/* A summary of one distribution: quantiles, _sum and _count. */
static void summary(FILE *f, const char *name, const char *help,
                    const stoke_dist *d, const stoke__export_labels *lb) {
  head(f, name, "summary", help);
  sample(f, name, "", lb, "0.5", sec(d->p50_ns));
  sample(f, name, "", lb, "0.95", sec(d->p95_ns));
  sample(f, name, "", lb, "0.99", sec(d->p99_ns));
  sample(f, name, "_sum", lb, NULL, sec(d->total_ns));
  sample(f, name, "_count", lb, NULL, (double)d->count);
}

int stoke__metrics_print(FILE *f, const stoke_stats *st,
                         const stoke__export_labels *lb) {
  head(f, "stoke_wait_seconds_total", "counter",
       "Time the training loop waited for its next batch (measured steps, "
       "warm-up left out).");
  sample(f, "stoke_wait_seconds_total", "", lb, NULL, sec(st->wait.total_ns));
  head(f, "stoke_compute_seconds_total", "counter",
       "Time the training loop computed between batches (measured steps).");
  sample(f, "stoke_compute_seconds_total", "", lb, NULL,
         sec(st->compute.total_ns));
  head(f, "stoke_steps_total", "counter", "Measured steps.");
  sample(f, "stoke_steps_total", "", lb, NULL, (double)st->steps);
  head(f, "stoke_samples_total", "counter", "Samples of the measured steps.");
  sample(f, "stoke_samples_total", "", lb, NULL, (double)st->samples);
  head(f, "stoke_epochs_total", "counter",
       "Epochs completed, warm-up included.");
  sample(f, "stoke_epochs_total", "", lb, NULL, (double)st->epochs_done);
  summary(f, "stoke_step_seconds",
          "One step: the wait for its batch and the compute on it.",
          &st->step, lb);
  summary(f, "stoke_wait_seconds", "The wait for each batch.", &st->wait, lb);
  head(f, "stoke_wait_ratio", "gauge",
       "Share of the step spent waiting for data (measured steps).");
  sample(f, "stoke_wait_ratio", "", lb, NULL, st->wait_ratio);
  head(f, "stoke_queue_empty_ratio", "gauge",
       "Share of next() calls that found no batch ready.");
  sample(f, "stoke_queue_empty_ratio", "", lb, NULL, st->queue_empty_frac);
  if (st->n_workers != STOKE_WORKERS_AUTO) { /* AUTO: not known */
    head(f, "stoke_workers", "gauge", "Worker threads in use.");
    sample(f, "stoke_workers", "", lb, NULL, (double)st->n_workers);
  }
  if (st->outside_windows) {
    /* The machine's other load (docs/diagnosis.md): beside the loader's
    ** own figures, so that a dashboard shows when they were disturbed. */
    head(f, "stoke_outside_load_cores", "gauge",
         "Cores the rest of the machine kept busy while measuring (mean "
         "since the warm-up).");
    sample(f, "stoke_outside_load_cores", "", lb, NULL,
           st->outside_mean_cores);
    head(f, "stoke_outside_load_moved", "gauge",
         "1 when the other load moved enough to shift the figures, else 0.");
    sample(f, "stoke_outside_load_moved", "", lb, NULL,
           st->outside_moved ? 1.0 : 0.0);
  }
  if (st->fetch_remote) {
    /* The remote fetch stage (docs/remote.md), counted from the loader's
    ** start.  The latencies' quantiles are gauges, not a summary: the
    ** attempts' summed latency is not kept. */
    head(f, "stoke_fetch_requests_total", "counter",
         "HTTP(S) attempts of the remote shards, retries included.");
    sample(f, "stoke_fetch_requests_total", "", lb, NULL,
           (double)st->fetch_requests);
    head(f, "stoke_fetch_retries_total", "counter",
         "Attempts that were retries.");
    sample(f, "stoke_fetch_retries_total", "", lb, NULL,
           (double)st->fetch_retries);
    head(f, "stoke_fetch_throttled_total", "counter",
         "Attempts answered 429 or 503.");
    sample(f, "stoke_fetch_throttled_total", "", lb, NULL,
           (double)st->fetch_throttled);
    head(f, "stoke_fetch_bytes_total", "counter", "Body bytes received.");
    sample(f, "stoke_fetch_bytes_total", "", lb, NULL,
           (double)st->fetch_bytes);
    head(f, "stoke_fetch_latency_p50_seconds", "gauge",
         "Median latency of an attempt (connection, first byte and body).");
    sample(f, "stoke_fetch_latency_p50_seconds", "", lb, NULL,
           st->fetch_latency_p50_ms / 1e3);
    head(f, "stoke_fetch_latency_p95_seconds", "gauge",
         "95th percentile latency of an attempt.");
    sample(f, "stoke_fetch_latency_p95_seconds", "", lb, NULL,
           st->fetch_latency_p95_ms / 1e3);
    head(f, "stoke_fetch_in_flight", "gauge",
         "Mean number of requests in flight.");
    sample(f, "stoke_fetch_in_flight", "", lb, NULL, st->fetch_in_flight);
  }
  if (st->rcache_used) {
    /* The remote shard cache (docs/remote.md, "The cache"): counted when
    ** the source opened its shards, so these move only across runs; a
    ** dashboard reads the hit rate and what the cache spared the link. */
    static const struct {
      const char *name, *help;
      size_t off;
    } rc[] = {
        {"stoke_remote_cache_hits_total",
         "Remote shards found in the local cache.",
         offsetof(stoke_stats, rcache_hits)},
        {"stoke_remote_cache_misses_total",
         "Remote shards fetched whole into the local cache.",
         offsetof(stoke_stats, rcache_misses)},
        {"stoke_remote_cache_uncached_total",
         "Remote shards read uncached (the server gave no ETag).",
         offsetof(stoke_stats, rcache_uncached)},
        {"stoke_remote_cache_hit_bytes_total",
         "Bytes of the shards found in the cache (spared the network).",
         offsetof(stoke_stats, rcache_bytes_cached)},
        {"stoke_remote_cache_fetched_bytes_total",
         "Bytes of the shards fetched into the cache.",
         offsetof(stoke_stats, rcache_bytes_fetched)},
        {"stoke_remote_cache_evictions_total",
         "Cache entries removed to keep within its byte budget.",
         offsetof(stoke_stats, rcache_evicted)},
        {"stoke_remote_cache_evicted_bytes_total",
         "Bytes of the entries evicted.",
         offsetof(stoke_stats, rcache_bytes_evicted)},
    };
    for (size_t i = 0; i < sizeof rc / sizeof rc[0]; i++) {
      uint64_t v;
      memcpy(&v, (const char *)st + rc[i].off, sizeof v);
      head(f, rc[i].name, "counter", rc[i].help);
      sample(f, rc[i].name, "", lb, NULL, (double)v);
    }
  }
  return ferror(f) ? STOKE_EIO : 0;
}

int stoke__metrics_write(const char *path, const stoke_stats *st,
                         const stoke__export_labels *lb, char *err,
                         size_t err_cap) {
  /* The temporary sits beside the target: rename() is atomic only within
  ** one file system, and the collector skips names not ending in .prom. */
  char tmp[4096];
  int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  if (n < 0 || (size_t)n >= sizeof tmp) {
    snprintf(err, err_cap, "metrics file %s: path too long", path);
    return STOKE_EIO;
  }
  FILE *f = fopen(tmp, "w");
  if (!f) {
    snprintf(err, err_cap, "cannot write metrics file %s: %s", tmp,
             strerror(errno));
    return STOKE_EIO;
  }
  int rc = stoke__metrics_print(f, st, lb);
  if (fclose(f) != 0) rc = STOKE_EIO;
  if (rc == 0 && rename(tmp, path) != 0) rc = STOKE_EIO;
  if (rc != 0) {
    snprintf(err, err_cap, "cannot write metrics file %s: %s", path,
             strerror(errno));
    unlink(tmp);
  }
  return rc;
}

static void line_head(FILE *f, const char *kind,
                      const stoke__export_labels *lb) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  fprintf(f, "{\"schema_version\":%d,\"kind\":\"%s\",\"time\":%.3f,"
             "\"rank\":%u,\"loader\":\"",
          EXPORT_SCHEMA_VERSION, kind,
          (double)ts.tv_sec + (double)ts.tv_nsec / 1e9, lb->rank);
  print_escaped(f, loader_name(lb));
  fputc('"', f);
}

/* One JSON line (kind "steps"): the steady state so far, at `step` (steps
** handed out in all, warm-up included) of `epoch`.  Not flushed: the
** exporter flushes once per batch of lines. */
static void steps_line(FILE *f, const stoke_stats *st,
                       const stoke__export_labels *lb, uint64_t epoch,
                       uint64_t step) {
  line_head(f, "steps", lb);
  fprintf(f, ",\"epoch\":%llu,\"step\":%llu,\"steps\":%llu,\"samples\":%llu,"
             "\"wait_s\":%.9g,\"compute_s\":%.9g,\"wait_ratio\":%.6g,"
             "\"queue_empty_frac\":%.6g,\"wait_p50_ms\":%.6g,"
             "\"wait_p95_ms\":%.6g,\"step_p50_ms\":%.6g,"
             "\"step_p95_ms\":%.6g,\"workers\":%u}\n",
          (unsigned long long)epoch, (unsigned long long)step,
          (unsigned long long)st->steps, (unsigned long long)st->samples,
          sec(st->wait.total_ns), sec(st->compute.total_ns), st->wait_ratio,
          st->queue_empty_frac, (double)st->wait.p50_ns / 1e6,
          (double)st->wait.p95_ns / 1e6, (double)st->step.p50_ns / 1e6,
          (double)st->step.p95_ns / 1e6,
          st->n_workers == STOKE_WORKERS_AUTO ? 0 : st->n_workers);
}

int stoke__jsonl_epoch(FILE *f, const stoke_epoch_stats *e,
                       const stoke__export_labels *lb) {
  line_head(f, "epoch", lb);
  fprintf(f, ",\"epoch\":%llu,\"warmup\":%s,\"warmup_ended\":%s,"
             "\"seconds\":%.9g,\"wait_s\":%.9g,\"compute_s\":%.9g,"
             "\"batches\":%llu,\"samples\":%llu}\n",
          (unsigned long long)e->epoch, e->warmup ? "true" : "false",
          e->warmup == 2 ? "true" : "false", sec(e->wall_ns),
          sec(e->wait_ns), sec(e->compute_ns),
          (unsigned long long)e->batches, (unsigned long long)e->samples);
  return fflush(f) == 0 && !ferror(f) ? 0 : STOKE_EIO;
}

/* ---- the schedule -------------------------------------------------------- */

#define DEFAULT_EVERY_NS 10000000000LL /* metrics: 10 s */
#define DEFAULT_EVERY_STEPS 100        /* JSON lines */
/* The exporter's thread takes a snapshot for JSON lines at most this
** often; the lines due meanwhile wait for the next one.  A training step
** of a millisecond or more never notices (100 steps take 100 ms), but a loop
** of microsecond steps would have the thread snapshot (tens of
** microseconds: every histogram read) without rest, on the cores the loop
** needs. */
#define LINE_BATCH_NS 10000000LL       /* 10 ms */

static void snapshot(const stoke__exporter *e, stoke_stats *st) {
  memset(st, 0, sizeof *st);
  st->struct_size = sizeof *st;
  e->fill(e->ctx, st); /* out of memory: zeros this time */
}

/* The lines due and not yet written, from one snapshot (write_mu held). */
static void write_lines(stoke__exporter *e) {
  pthread_mutex_lock(&e->mu);
  uint64_t due = e->due_step, epoch = e->due_epoch;
  pthread_mutex_unlock(&e->mu);
  if (!e->jsonl || due <= e->written_step) return;
  stoke_stats st;
  snapshot(e, &st);
  for (uint64_t s = e->written_step + e->every_steps; s <= due;
       s += e->every_steps)
    steps_line(e->jsonl, &st, &e->lb, epoch, s);
  e->written_step = due;
  if (fflush(e->jsonl) != 0 || ferror(e->jsonl)) e->failures++;
}

/* The metrics file from a new snapshot (write_mu held). */
static void write_metrics(stoke__exporter *e) {
  if (!e->metrics_path) return;
  char err[256];
  stoke_stats st;
  snapshot(e, &st);
  if (stoke__metrics_write(e->metrics_path, &st, &e->lb, err, sizeof err) !=
      0)
    e->failures++;
}

static struct timespec mono_at(int64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
  return ts;
}

/* The exporter's thread: the lines as they come due, the metrics on its
** timer, until stop (and what is due then). */
static void *exporter_main(void *arg) {
  stoke__exporter *e = arg;
  uint64_t seen = 0;           /* the latest line due it has written */
  int64_t lines_not_before = 0; /* LINE_BATCH_NS after its last snapshot */
  pthread_mutex_lock(&e->mu);
  for (;;) {
    int64_t now = stoke__now_ns();
    bool lines = e->due_step != seen;
    bool lines_now = lines && (e->stop || now >= lines_not_before);
    bool metrics = e->metrics_path && now >= e->next_ns;
    if (!lines_now && !metrics) {
      if (e->stop) break;
      int64_t until_ns = lines ? lines_not_before : INT64_MAX;
      if (e->metrics_path && e->next_ns < until_ns) until_ns = e->next_ns;
      /* Lines already due wait for the batch's time: a new one need not
      ** wake it (in a fast loop that would be a wake-up every line). */
      e->waiting = !lines;
      if (until_ns != INT64_MAX) {
        struct timespec until = mono_at(until_ns);
        pthread_cond_timedwait(&e->cv, &e->mu, &until);
      } else {
        pthread_cond_wait(&e->cv, &e->mu);
      }
      e->waiting = false;
      continue;
    }
    if (lines_now) seen = e->due_step;
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_lock(&e->write_mu);
    if (lines_now) {
      write_lines(e);
      lines_not_before = stoke__now_ns() + LINE_BATCH_NS;
    }
    if (metrics) {
      write_metrics(e);
      e->next_ns = stoke__now_ns() + e->every_ns;
    }
    pthread_mutex_unlock(&e->write_mu);
    pthread_mutex_lock(&e->mu);
  }
  pthread_mutex_unlock(&e->mu);
  return NULL;
}

int stoke__exporter_init(stoke__exporter *e, const stoke_allocator *a,
                         const char *metrics_path, int64_t every_ns,
                         const char *jsonl_path, uint64_t every_steps,
                         const char *loader, unsigned rank,
                         const stoke_stats *zero,
                         stoke__export_fill_fn fill, void *ctx, char *err,
                         size_t err_cap) {
  memset(e, 0, sizeof *e);
  if (!metrics_path && !jsonl_path) return 0;
  e->fill = fill;
  e->ctx = ctx;
  if ((metrics_path && !(e->metrics_path = stoke__strdup(a, metrics_path))) ||
      (jsonl_path && !(e->jsonl_path = stoke__strdup(a, jsonl_path))) ||
      (loader && !(e->loader = stoke__strdup(a, loader)))) {
    snprintf(err, err_cap, "metrics: out of memory");
    return STOKE_ENOMEM;
  }
  e->lb.rank = rank;
  e->lb.loader = e->loader;
  e->every_ns = every_ns > 0 ? every_ns : DEFAULT_EVERY_NS;
  if (jsonl_path) {
    e->every_steps = every_steps ? every_steps : DEFAULT_EVERY_STEPS;
    e->next_line = e->every_steps;
  }
  pthread_condattr_t ca;
  if (pthread_condattr_init(&ca) != 0) goto no_sync;
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  bool cv = pthread_cond_init(&e->cv, &ca) == 0;
  pthread_condattr_destroy(&ca);
  if (!cv) goto no_sync;
  if (pthread_mutex_init(&e->mu, NULL) != 0) {
    pthread_cond_destroy(&e->cv);
    goto no_sync;
  }
  if (pthread_mutex_init(&e->write_mu, NULL) != 0) {
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    goto no_sync;
  }
  e->have_sync = true;
  if (jsonl_path) {
    e->jsonl = fopen(jsonl_path, "a");
    if (!e->jsonl) {
      snprintf(err, err_cap, "cannot open JSON lines file %s: %s",
               jsonl_path, strerror(errno));
      return STOKE_EIO;
    }
  }
  if (metrics_path) {
    int rc = stoke__metrics_write(metrics_path, zero, &e->lb, err, err_cap);
    if (rc != 0) return rc;
    e->next_ns = stoke__now_ns() + e->every_ns;
  }
  return 0;
no_sync:
  snprintf(err, err_cap, "metrics: out of memory");
  return STOKE_ENOMEM;
}

void stoke__exporter_start(stoke__exporter *e, const stoke_allocator *a) {
  if (!stoke__exporter_on(e) || !e->have_sync || e->thread || e->stop)
    return;
  stoke__thread *t = NULL;
  if (stoke__thread_start(&t, a, NULL, "stoke-export", exporter_main, e) != 0)
    return; /* the driving thread writes */
  pthread_mutex_lock(&e->mu);
  e->thread = t;
  pthread_mutex_unlock(&e->mu);
}

void stoke__exporter_line_due(stoke__exporter *e) {
  e->next_line += e->every_steps;
  pthread_mutex_lock(&e->mu);
  e->due_step = e->steps;
  e->due_epoch = e->epochs;
  bool threaded = e->thread != NULL;
  /* A signal without a sleeper costs no system call; the thread, busy,
  ** finds the new line when it looks again. */
  if (e->waiting) pthread_cond_signal(&e->cv);
  pthread_mutex_unlock(&e->mu);
  if (!threaded) {
    pthread_mutex_lock(&e->write_mu);
    write_lines(e);
    pthread_mutex_unlock(&e->write_mu);
  }
}

void stoke__exporter_epoch(stoke__exporter *e, const stoke_epoch_stats *rec) {
  if (!stoke__exporter_on(e)) return;
  pthread_mutex_lock(&e->mu);
  bool threaded = e->thread != NULL;
  pthread_mutex_unlock(&e->mu);
  pthread_mutex_lock(&e->write_mu);
  write_lines(e);
  if (e->jsonl && rec && stoke__jsonl_epoch(e->jsonl, rec, &e->lb) != 0)
    e->failures++;
  /* The metrics follow their timer and the stop, not the epochs: a
  ** snapshot, a file and a rename at every epoch's end cost the loop's
  ** thread 7% of the in-memory tensor benchmark (bench/publish.sh
  ** PUBLISH_ALL=1, epochs of 85 us).  Without the writer's thread, the
  ** timer is looked at here. */
  if (!threaded && e->metrics_path) {
    int64_t now = stoke__now_ns();
    if (now >= e->next_ns) {
      write_metrics(e);
      e->next_ns = now + e->every_ns;
    }
  }
  pthread_mutex_unlock(&e->write_mu);
  e->epochs++;
}

/* Stop the writer thread and join it (mu, then no lock); true when this
** call was the first to stop it. */
static bool halt(stoke__exporter *e, const stoke_allocator *a) {
  pthread_mutex_lock(&e->mu);
  bool first = !e->stop;
  e->stop = true;
  stoke__thread *t = e->thread;
  e->thread = NULL;
  pthread_cond_signal(&e->cv);
  pthread_mutex_unlock(&e->mu);
  if (t) stoke__thread_join(t, a);
  return first;
}

void stoke__exporter_stop(stoke__exporter *e, const stoke_allocator *a) {
  if (!stoke__exporter_on(e) || !e->have_sync) return;
  if (!halt(e, a)) return;
  pthread_mutex_lock(&e->write_mu);
  write_lines(e);
  write_metrics(e); /* the last metrics, at the end */
  pthread_mutex_unlock(&e->write_mu);
}

void stoke__exporter_free(stoke__exporter *e, const stoke_allocator *a) {
  if (e->have_sync) {
    halt(e, a);
    pthread_mutex_destroy(&e->write_mu);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
  }
  if (e->jsonl) fclose(e->jsonl);
  stoke__free(a, e->metrics_path);
  stoke__free(a, e->jsonl_path);
  stoke__free(a, e->loader);
  memset(e, 0, sizeof *e);
}
