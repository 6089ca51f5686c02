/* run.c — one measured run: a synthetic source, a loader and a simulated
** consumer, and its report (a table for people, JSON for machines).
**
** The tool does not time anything itself: the loader measures the two clocks
** (waiting = inside stoke_loader_next, computing = from its return to the
** next call) and the tool only reads them back.  What the tool does own is
** the consumer's step:
**
**   sleep:D  a GPU-like step: the consumer thread is idle for D of wall time
**            and leaves the CPU to the workers;
**   spin:D   a CPU-bound step: the consumer thread burns D of its own CPU
**            time (CLOCK_THREAD_CPUTIME_ID), so that on an oversubscribed
**            machine the step costs D of work, not D of wall time.
*/
#define _XOPEN_SOURCE 700 /* clock_nanosleep, CLOCK_THREAD_CPUTIME_ID */

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

/* ---- specs --------------------------------------------------------------- */

static const char *synth_kind_name(int kind) {
  switch (kind) {
  case STOKE_SYNTH_SLEEP:
    return "sleep";
  case STOKE_SYNTH_SPIN:
    return "spin";
  case STOKE_SYNTH_TENSOR:
    return "tensor";
  }
  return "?";
}

int cli_parse_synthetic(const char *what, const char *s,
                        stoke_synthetic_config *synth) {
  /* KIND:COST+sleep:WAIT: a mixed sample, the cost then a wait. */
  const char *plus = strchr(s, '+');
  synth->wait_ns = 0;
  if (plus) {
    char head[64];
    if (strncmp(plus + 1, "sleep:", 6) != 0 ||
        (size_t)(plus - s) >= sizeof head) {
      cli_error("%s: a mixed sample is KIND:COST+sleep:WAIT, e.g. "
                "spin:0.3ms+sleep:4ms, got '%s'", what, s);
      return -1;
    }
    memcpy(head, s, (size_t)(plus - s));
    head[plus - s] = '\0';
    int64_t wait;
    if (cli_parse_duration(what, plus + 7, NULL, &wait)) return -1;
    if (cli_parse_synthetic(what, head, synth)) return -1;
    if (synth->kind == STOKE_SYNTH_TENSOR) {
      cli_error("%s: tensor takes no wait, got '%s'", what, s);
      return -1;
    }
    synth->wait_ns = wait;
    return 0;
  }
  const char *colon = strchr(s, ':');
  size_t len = colon ? (size_t)(colon - s) : strlen(s);
  int kind;
  if (len == 5 && strncmp(s, "sleep", 5) == 0) {
    kind = STOKE_SYNTH_SLEEP;
  } else if (len == 4 && strncmp(s, "spin", 4) == 0) {
    kind = STOKE_SYNTH_SPIN;
  } else if (len == 6 && strncmp(s, "tensor", 6) == 0) {
    kind = STOKE_SYNTH_TENSOR;
  } else {
    cli_error("%s: unknown synthetic kind '%.*s' (expected sleep:COST, "
              "spin:COST or tensor)",
              what, (int)len, s);
    return -1;
  }
  if (kind == STOKE_SYNTH_TENSOR) {
    if (colon) {
      cli_error("%s: tensor takes no cost, got '%s'", what, s);
      return -1;
    }
    synth->cost_ns = 0;
  } else if (colon) {
    if (cli_parse_duration(what, colon + 1, NULL, &synth->cost_ns))
      return -1;
  } /* else: the library's default cost */
  synth->kind = kind;
  return 0;
}

int cli_parse_cost_dist(const char *what, const char *s,
                        stoke_synthetic_config *synth) {
  if (strcmp(s, "fixed") == 0) {
    synth->dist = STOKE_COST_FIXED;
  } else if (strcmp(s, "exp") == 0) {
    synth->dist = STOKE_COST_EXP;
  } else if (strcmp(s, "lognormal") == 0) {
    synth->dist = STOKE_COST_LOGNORMAL;
  } else if (strncmp(s, "lognormal:", 10) == 0) {
    if (cli_parse_positive(what, s + 10, &synth->sigma))
      return -1;
    synth->dist = STOKE_COST_LOGNORMAL;
  } else if (strncmp(s, "rare:", 5) == 0) {
    /* rare:FRAC:FACTOR, e.g. rare:0.02:20: 2% of the samples 20x longer. */
    char *end;
    double f = strtod(s + 5, &end), r = 0;
    if (*end == ':')
      r = strtod(end + 1, &end);
    if (*end || !(f > 0 && f < 1) || !(r >= 1 && r <= 1e6)) {
      cli_error("%s: expected rare:FRAC:FACTOR with FRAC in (0, 1) and "
                "FACTOR >= 1, e.g. rare:0.02:20, got '%s'", what, s);
      return -1;
    }
    synth->dist = STOKE_COST_RARE;
    synth->rare_frac = f;
    synth->rare_factor = r;
  } else {
    cli_error("%s: unknown cost distribution '%s' (expected fixed, exp, "
              "lognormal:SIGMA or rare:FRAC:FACTOR)",
              what, s);
    return -1;
  }
  return 0;
}

int cli_parse_compute(const char *what, const char *s, int *kind, int64_t *ns) {
  if (strcmp(s, "none") == 0) {
    *kind = CLI_COMPUTE_NONE;
    *ns = 0;
    return 0;
  }
  const char *colon = strchr(s, ':');
  size_t len = colon ? (size_t)(colon - s) : strlen(s);
  int k;
  if (len == 5 && strncmp(s, "sleep", 5) == 0) {
    k = CLI_COMPUTE_SLEEP;
  } else if (len == 4 && strncmp(s, "spin", 4) == 0) {
    k = CLI_COMPUTE_SPIN;
  } else if (len == 9 && strncmp(s, "gpu-sleep", 9) == 0) {
    k = CLI_COMPUTE_GPU_SLEEP;
  } else {
    cli_error("%s: unknown step kind '%.*s' (expected sleep:TIME, spin:TIME, "
              "gpu-sleep:TIME or none)",
              what, (int)len, s);
    return -1;
  }
  if (!colon) {
    cli_error("%s: '%s' needs a time, e.g. %.*s:12ms", what, s, (int)len, s);
    return -1;
  }
  if (cli_parse_duration(what, colon + 1, NULL, ns))
    return -1;
  *kind = k;
  return 0;
}

void cli_fmt_synthetic(const stoke_synthetic_config *synth, char *buf,
                       size_t n) {
  if (synth->kind == STOKE_SYNTH_TENSOR) {
    snprintf(buf, n, "tensor");
    return;
  }
  char d[32], w[32];
  cli_fmt_duration(synth->cost_ns, d, sizeof(d));
  if (synth->wait_ns > 0) {
    cli_fmt_duration(synth->wait_ns, w, sizeof(w));
    snprintf(buf, n, "%s:%s+sleep:%s", synth_kind_name(synth->kind), d, w);
  } else {
    snprintf(buf, n, "%s:%s", synth_kind_name(synth->kind), d);
  }
}

void cli_fmt_source(const cli_run_spec *spec, size_t n_samples, char *buf,
                    size_t n) {
  if (spec->source_label) {
    snprintf(buf, n, "%s (%zu samples)", spec->source_label, n_samples);
    return;
  }
  if (spec->data) {
    snprintf(buf, n, "images %s (%zu samples, transform %s)", spec->data,
             n_samples, spec->image.transform);
    return;
  }
  char src[64], dist[64];
  cli_fmt_synthetic(&spec->synth, src, sizeof(src));
  cli_fmt_cost_dist(&spec->synth, dist, sizeof(dist));
  snprintf(buf, n, "synthetic %s (%s) x %zu samples", src, dist, n_samples);
}

void cli_fmt_cost_dist(const stoke_synthetic_config *synth, char *buf,
                       size_t n) {
  switch (synth->dist) {
  case STOKE_COST_EXP:
    snprintf(buf, n, "exp");
    break;
  case STOKE_COST_LOGNORMAL:
    snprintf(buf, n, "lognormal:%g", synth->sigma);
    break;
  case STOKE_COST_RARE:
    snprintf(buf, n, "rare:%g:%g", synth->rare_frac, synth->rare_factor);
    break;
  default:
    snprintf(buf, n, "fixed");
  }
}

/* The consumer's step as the reports name it. */
static void spec_compute(const cli_run_spec *spec, char *buf, size_t n) {
  if (spec->compute_label)
    snprintf(buf, n, "%s", spec->compute_label);
  else
    cli_fmt_compute(spec->compute_kind, spec->compute_ns, buf, n);
}

void cli_fmt_compute(int kind, int64_t ns, char *buf, size_t n) {
  char d[32];
  cli_fmt_duration(ns, d, sizeof(d));
  if (kind == CLI_COMPUTE_SLEEP)
    snprintf(buf, n, "sleep:%s", d);
  else if (kind == CLI_COMPUTE_SPIN)
    snprintf(buf, n, "spin:%s", d);
  else if (kind == CLI_COMPUTE_GPU_SLEEP)
    snprintf(buf, n, "gpu-sleep:%s", d);
  else
    snprintf(buf, n, "none");
}

/* ---- the consumer's step ------------------------------------------------- */

static int64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void step_sleep(int64_t ns) {
  /* Absolute deadline: an interrupted sleep resumes without drifting. */
  int64_t until = clock_ns(CLOCK_MONOTONIC) + ns;
  struct timespec ts = {(time_t)(until / 1000000000),
                        (long)(until % 1000000000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
}

static void step_spin(int64_t ns) {
  int64_t until = clock_ns(CLOCK_THREAD_CPUTIME_ID) + ns;
  volatile uint64_t sink = 0;
  while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < until)
    for (int i = 0; i < 256; i++)
      sink = sink * 6364136223846793005u + 1442695040888963407u;
  (void)sink;
}

static void consumer_step(int kind, int64_t ns) {
  if (kind == CLI_COMPUTE_SLEEP && ns > 0)
    step_sleep(ns);
  else if (kind == CLI_COMPUTE_SPIN && ns > 0)
    step_spin(ns);
}

void cli_consumer_step(int kind, int64_t ns) { consumer_step(kind, ns); }

/* ---- the run ------------------------------------------------------------- */

static void library_error(const stoke_loader *l, int rc) {
  const char *msg = stoke_errmsg(l);
  cli_error("%s", msg && msg[0] ? msg : stoke_strerror(rc));
}

void cli_run_result_free(cli_run_result *res) {
  free(res->epochs);
  res->epochs = NULL;
  res->n_epochs = 0;
  free(res->wait_hist);
  res->wait_hist = NULL;
  res->n_wait_hist = 0;
  free(res->autotune);
  res->autotune = NULL;
  res->n_autotune = 0;
}

void cli_result_measure(cli_run_result *res) {
  int64_t wall = 0;
  uint64_t samples = 0;
  res->n_measured = 0;
  for (size_t i = 0; i < res->n_epochs; i++) {
    if (res->epochs[i].warmup)
      continue;
    res->n_measured++;
    wall += res->epochs[i].wall_ns;
    samples += res->epochs[i].samples;
  }
  res->epoch_s =
      res->n_measured ? (double)wall / 1e9 / (double)res->n_measured : 0;
  res->samples_per_s = wall > 0 ? (double)samples / ((double)wall / 1e9) : 0;
}

int cli_result_collect(stoke_loader *l, cli_run_result *res) {
  snprintf(res->source_kind, sizeof(res->source_kind), "%s",
           stoke_source_kind(stoke_loader_source(l)));
  res->source_samples = stoke_source_n_samples(stoke_loader_source(l));
  stoke_loader_config(l, &res->eff);
  res->eff.source = NULL; /* not ours to keep */
  /* The loader's copies of its strings go with it: keep the device's
  ** (results are copied around, so no pointer into one). */
  snprintf(res->device_text, sizeof res->device_text, "%s",
           res->eff.device ? res->eff.device : "cpu");
  res->eff.device = NULL;
  res->eff.cuda_library = NULL;
  res->eff.cache_dir = NULL; /* the spec keeps the caller's */
  res->device.struct_size = sizeof(res->device);
  stoke_loader_device(l, &res->device);
  res->n_batches = stoke_loader_n_batches(l);
  res->n_samples = stoke_loader_n_samples(l);
  res->host_bytes = stoke_loader_host_bytes(l);
  res->stats.struct_size = sizeof(res->stats);
  int rc = stoke_loader_stats(l, &res->stats);
  if (rc < 0)
    return rc;
  size_t nh = stoke_loader_wait_histogram(l, NULL, 0);
  res->wait_hist = calloc(nh ? nh : 1, sizeof(*res->wait_hist));
  if (!res->wait_hist)
    return STOKE_ENOMEM;
  res->n_wait_hist = stoke_loader_wait_histogram(l, res->wait_hist, nh);
  if (res->n_wait_hist > nh)
    res->n_wait_hist = nh;
  size_t n = stoke_loader_n_epoch_stats(l);
  res->epochs = calloc(n ? n : 1, sizeof(*res->epochs));
  if (!res->epochs)
    return STOKE_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    rc = stoke_loader_epoch_stats(l, i, &res->epochs[i]);
    if (rc < 0)
      return rc;
    res->n_epochs++;
  }
  /* An autotuned run: the configuration in force is where it ended (the
  ** most it could use is in the stats). */
  if (res->stats.autotune) {
    res->eff.n_workers = res->stats.n_workers;
    res->eff.prefetch = res->stats.prefetch;
  }
  size_t na = stoke_loader_n_autotune_events(l);
  if (na) {
    res->autotune = calloc(na, sizeof(*res->autotune));
    if (!res->autotune)
      return STOKE_ENOMEM;
    for (size_t i = 0; i < na; i++)
      if (stoke_loader_autotune_event(l, i, &res->autotune[res->n_autotune]) ==
          0)
        res->n_autotune++;
  }
  cli_result_measure(res);
  if (res->stats.steps)
    stoke_model_init(&res->model, &res->stats, &res->eff, 0);
  res->n_failures_kept =
      stoke_loader_failures(l, res->failures, STOKE_FAILURES_KEPT);
  if (res->n_failures_kept > STOKE_FAILURES_KEPT)
    res->n_failures_kept = STOKE_FAILURES_KEPT;
  return stoke_diagnose(&res->stats, &res->diag);
}

/* The calling thread's run delay (ns runnable but not running), from
** /proc/thread-self/schedstat; -1 when unavailable. */
static int64_t thread_run_delay_ns(void) {
  FILE *f = fopen("/proc/thread-self/schedstat", "r");
  if (!f)
    return -1;
  long long run = 0, delay = -1;
  if (fscanf(f, "%lld %lld", &run, &delay) != 2)
    delay = -1;
  fclose(f);
  return (int64_t)delay;
}

int cli_source_create(const char *data, const stoke_image_config *image,
                      const stoke_synthetic_config *synth,
                      stoke_source **out) {
  int rc = data ? stoke_source_create_images(data, image, out)
                : stoke_source_create_synthetic(synth, out);
  if (rc < 0) {
    library_error(NULL, rc);
    return CLI_ERROR;
  }
  return CLI_OK;
}

/* "EPOCH BATCH N I0 I1 ...": the samples of each batch, for checking that
** a resumed run continues the interrupted one. */
static void write_indices(FILE *f, const stoke_batch *b) {
  const size_t *ix = stoke_batch_indices(b);
  size_t n = stoke_batch_size(b);
  fprintf(f, "%llu %zu %zu", (unsigned long long)stoke_batch_epoch(b),
          stoke_batch_number(b), n);
  for (size_t i = 0; i < n; i++) fprintf(f, " %zu", ix[i]);
  fputc('\n', f);
}

static int save_state(const cli_run_spec *spec, stoke_loader *l,
                      cli_run_result *res) {
  if (stoke_loader_state_save(l, &res->state) != 0) {
    cli_error("--save-state: %s", stoke_errmsg(l));
    return CLI_ERROR;
  }
  return spec->save_state_path ? cli_state_write(spec->save_state_path,
                                                 &res->state)
                               : CLI_OK;
}

/* --resume: restore the state, and run from its epoch to --epochs. */
static int resume_run(const cli_run_spec *spec, stoke_loader *l,
                      cli_run_result *res) {
  if (!spec->resume_path) return CLI_OK;
  stoke_loader_state st;
  if (cli_state_read(spec->resume_path, &st) != CLI_OK) return CLI_ERROR;
  if (stoke_loader_state_restore(l, &st) != 0) {
    cli_error("--resume: %s: %s", spec->resume_path, stoke_errmsg(l));
    return CLI_ERROR;
  }
  snprintf(res->resume_note, sizeof res->resume_note, "%s", stoke_errmsg(l));
  if (res->resume_note[0]) cli_error("--resume: %s", res->resume_note);
  stoke_loader_state now; /* after an elastic restore: where it starts */
  stoke_loader_state_save(l, &now);
  res->resumed = 1;
  res->start_epoch = now.epoch;
  res->start_batch = now.batches_done;
  if (now.epoch >= spec->epochs) {
    cli_error("--resume: %s is at epoch %llu; --epochs %u has ended there",
              spec->resume_path, (unsigned long long)now.epoch,
              spec->epochs);
    return CLI_ERROR;
  }
  return CLI_OK;
}

int cli_run(const cli_run_spec *spec, cli_run_result *res) {
  memset(res, 0, sizeof(*res));
  stoke_source *src = NULL;
  int rc = cli_source_create(spec->data, &spec->image, &spec->synth, &src);
  if (rc != CLI_OK)
    return rc;
  stoke_config cfg = spec->cfg;
  cfg.source = src;
  if (spec->trace_path && cfg.trace_events == 0)
    cfg.trace_events = CLI_TRACE_EVENTS;
  stoke_loader *l = NULL;
  rc = stoke_loader_create(&cfg, &l);
  stoke_source_destroy(src); /* the loader holds its own reference */
  if (rc < 0) {
    library_error(NULL, rc);
    return CLI_ERROR;
  }
  FILE *indices = NULL;
  /* A step on the device needs the device's kernels: ask once, up front
  ** (a zero-length step), so the run fails before it starts. */
  if (spec->compute_kind == CLI_COMPUTE_GPU_SLEEP &&
      (rc = stoke_loader_gpu_sleep(l, 0)) < 0)
    goto fail;
  if (resume_run(spec, l, res) != CLI_OK ||
      (spec->indices_path && !(indices = cli_open_output(spec->indices_path)))) {
    stoke_loader_destroy(l);
    return CLI_ERROR;
  }

  int64_t delay0 = -1;
  for (uint64_t e = res->start_epoch; e < spec->epochs && !res->stopped;
       e++) {
    if (e - res->start_epoch == cfg.warmup_epochs)
      delay0 = thread_run_delay_ns();
    for (;;) {
      stoke_batch *b;
      rc = stoke_loader_next(l, &b);
      if (rc == STOKE_END)
        break;
      if (rc != STOKE_OK)
        goto fail;
      if (indices) write_indices(indices, b);
      if (spec->compute_kind == CLI_COMPUTE_GPU_SLEEP)
        rc = stoke_loader_gpu_sleep(l, spec->compute_ns);
      else
        consumer_step(spec->compute_kind, spec->compute_ns);
      stoke_batch_release(b);
      if (rc < 0)
        goto fail;
      res->batches_run++;
      res->stopped = spec->stop_after && res->batches_run == spec->stop_after;
      if (spec->save_every && res->batches_run % spec->save_every == 0 &&
          !res->stopped && save_state(spec, l, res) != CLI_OK)
        goto fail_quiet;
      if (res->stopped)
        break;
    }
  }
  /* The last steps' events, so that the statistics count them. */
  rc = stoke_loader_device_sync(l);
  if (rc < 0)
    goto fail;
  int64_t delay1 = thread_run_delay_ns();
  if (spec->save_state_path && save_state(spec, l, res) != CLI_OK)
    goto fail_quiet;
  if (!spec->save_state_path)
    stoke_loader_state_save(l, &res->state);
  if (indices && indices != stdout && fclose(indices) != 0) {
    indices = NULL;
    cli_error("cannot write '%s'", spec->indices_path);
    goto fail_quiet;
  }
  indices = NULL;
  rc = cli_result_collect(l, res);
  /* The loader's copy of the path goes with it: keep the caller's. */
  res->eff.quarantine_path = spec->cfg.quarantine_path;
  res->eff.cache_dir = spec->cfg.cache_dir;
  res->gpu_price_per_h = spec->gpu_price_per_h;
  if (rc < 0)
    goto fail;
  res->consumer_run_delay_ns =
      delay0 >= 0 && delay1 >= delay0 ? delay1 - delay0 : -1;
  if (spec->trace_path) {
    rc = stoke_loader_write_trace(l, spec->trace_path);
    if (rc < 0)
      goto fail;
  }
  res->peak_rss_bytes = cli_peak_rss_bytes();
  stoke_loader_destroy(l);
  return CLI_OK;
fail:
  library_error(l, rc);
fail_quiet:
  if (indices && indices != stdout) fclose(indices);
  stoke_loader_destroy(l);
  cli_run_result_free(res);
  return CLI_ERROR;
}

int cli_run_open(const cli_run_spec *spec, const char *json_path,
                 FILE **json, cli_run_result *res) {
  *json = NULL;
  if (json_path && !(*json = cli_open_output(json_path)))
    return CLI_ERROR;
  int rc = cli_run(spec, res);
  if (rc != CLI_OK) {
    /* No half report: a failed run leaves no JSON file behind. */
    if (*json && *json != stdout) {
      fclose(*json);
      remove(json_path);
    }
    *json = NULL;
  }
  return rc;
}

/* ---- the human report ---------------------------------------------------- */

void cli_print_report(FILE *f, const char *cmd, const cli_run_spec *spec,
                      const cli_run_result *res) {
  char src[1200], step[64];
  cli_fmt_source(spec, res->n_samples, src, sizeof(src));
  spec_compute(spec, step, sizeof(step));
  if (res->stats.autotune)
    fprintf(f, "stoke %s: %s, batch %zu, autotuned (up to %u workers, "
               "prefetch %u; ended at %u, %u), step %s",
            cmd, src, res->eff.batch_size, res->stats.max_workers,
            res->stats.max_prefetch, res->stats.n_workers,
            res->stats.prefetch, step);
  else
    fprintf(f, "stoke %s: %s, batch %zu, %u workers, prefetch %u, step %s",
            cmd, src, res->eff.batch_size, res->eff.n_workers,
            res->eff.prefetch, step);
  if (res->eff.world > 1)
    fprintf(f, ", rank %u of %u", res->eff.rank, res->eff.world);
  if (res->eff.shuffle == STOKE_SHUFFLE_BLOCK) fprintf(f, ", block order");
  if (res->eff.echo > 1)
    fprintf(f, ", echo x%u (%s)", res->eff.echo,
            stoke_echo_mode_name(res->eff.echo_mode));
  if (res->eff.cache_dir) fprintf(f, ", cache %s", res->eff.cache_dir);
  fputc('\n', f);
  if (res->resumed)
    fprintf(f, "resumed at batch %llu of epoch %llu from %s\n",
            (unsigned long long)res->start_batch,
            (unsigned long long)res->start_epoch, spec->resume_path);
  cli_print_device(f, res);
  cli_print_epochs(f, res);
  cli_print_summary(f, res);
  cli_print_autotune(f, res);
  cli_print_failures(f, res);
  cli_print_verdict(f, "", &res->diag);
  if (res->stopped)
    fprintf(f, "stopped after %llu batches (--stop-after): the state is at "
               "batch %llu of epoch %llu%s%s\n",
            (unsigned long long)res->batches_run,
            (unsigned long long)res->state.batches_done,
            (unsigned long long)res->state.epoch,
            spec->save_state_path ? ", in " : "",
            spec->save_state_path ? spec->save_state_path : "");
}

static const char *clock_name(int clock) {
  switch (clock) {
  case STOKE_CLOCK_EVENTS: return "cuda events on the consumer's stream";
  case STOKE_CLOCK_SYNC: return "host, after the sync hook";
  default: return "host";
  }
}

static int asked_device(const cli_run_result *res) {
  return res->device.requested != STOKE_BACKEND_HOST ||
         res->device.backend != STOKE_BACKEND_HOST;
}

void cli_print_device(FILE *f, const cli_run_result *res) {
  const stoke_device_info *d = &res->device;
  if (!asked_device(res))
    return;
  fprintf(f, "backend: %s\n", d->reason);
  if (d->backend == STOKE_BACKEND_CUDA) {
    char b[32];
    cli_format_bytes(b, sizeof b, d->device_bytes);
    fprintf(f, "device: %zu slots (%s); normalize: %s\n", d->n_device_slots,
            b, d->normalize);
  }
  fprintf(f, "clock: %s\n", clock_name(d->clock));
}

static double sec(int64_t ns) { return (double)ns / 1e9; }
static double msec(int64_t ns) { return (double)ns / 1e6; }

/* Seconds to the microsecond, so sub-millisecond epochs read. */
static void print_secs(FILE *f, int width, int64_t ns) {
  fprintf(f, "%*.6f", width, sec(ns));
}

/* Runs of many short epochs show the first and last few: the summary below
** covers them all. */
#define EPOCH_ROWS_EACH_END 4

void cli_print_epochs(FILE *f, const cli_run_result *res) {
  fprintf(f, "epoch  warm-up    seconds  waiting s  computing s  batches  "
             "samples\n");
  for (size_t i = 0; i < res->n_epochs; i++) {
    if (res->n_epochs > 3 * EPOCH_ROWS_EACH_END && i == EPOCH_ROWS_EACH_END) {
      size_t skip = res->n_epochs - 2 * EPOCH_ROWS_EACH_END;
      fprintf(f, "  ... %zu more epochs ...\n", skip);
      i += skip - 1;
      continue;
    }
    const stoke_epoch_stats *e = &res->epochs[i];
    fprintf(f, "%5llu  %-7s  ", (unsigned long long)e->epoch,
            e->warmup ? "yes" : "");
    print_secs(f, 9, e->wall_ns);
    print_secs(f, 11, e->wait_ns);
    print_secs(f, 13, e->compute_ns);
    fprintf(f, "  %7llu  %7llu\n", (unsigned long long)e->batches,
            (unsigned long long)e->samples);
  }
  if (res->stats.clock == STOKE_CLOCK_EVENTS)
    fprintf(f, "(epochs on the host's clock; the steady state below is the "
               "GPU's, from its events)\n");
}

static void print_bytes(FILE *f, uint64_t b) {
  char s[32];
  cli_format_bytes(s, sizeof s, b);
  fputs(s, f);
}

/* A stage duration in the unit that reads best. */
static void print_dur(FILE *f, int64_t ns) {
  if (ns >= 1000000)
    fprintf(f, "%8.3f ms", msec(ns));
  else
    fprintf(f, "%8.3f us", (double)ns / 1e3);
}

void cli_print_summary(FILE *f, const cli_run_result *res) {
  const stoke_stats *st = &res->stats;
  fprintf(f, "\nsteady state over %zu epoch%s (%llu steps, %llu samples)\n",
          res->n_measured, res->n_measured == 1 ? "" : "s",
          (unsigned long long)st->steps, (unsigned long long)st->samples);
  fprintf(f, "  samples/s     %.1f\n", res->samples_per_s);
  fprintf(f, "  epoch         %.6f s\n", res->epoch_s);
  fprintf(f, "  wait ratio    %.1f%%  (waiting %.3f s, computing %.3f s)\n",
          100 * st->wait_ratio, sec(st->wait.total_ns),
          sec(st->compute.total_ns));
  fprintf(f, "  wait ms       p50 %.2f  p95 %.2f  p99 %.2f  max %.2f\n",
          msec(st->wait.p50_ns), msec(st->wait.p95_ns), msec(st->wait.p99_ns),
          msec(st->wait.max_ns));
  if (st->clock == STOKE_CLOCK_EVENTS)
    fprintf(f, "  queue empty   %.1f%% of steps: the stream idled before them "
               "(host queue mean depth %.2f)\n",
            100 * st->queue_empty_frac, st->queue_mean_depth);
  else
    fprintf(f, "  queue empty   %.1f%% of next() calls  (mean depth %.2f)\n",
            100 * st->queue_empty_frac, st->queue_mean_depth);
  int any = 0;
  for (int s = 0; s < STOKE_STAGE_COUNT; s++) {
    const stoke_dist *d = &st->stage[s];
    if (!d->count)
      continue;
    fprintf(f, "  %-12s  %-9s %9llu x", any ? "" : "stages",
            stoke_stage_name(s), (unsigned long long)d->count);
    print_dur(f, d->mean_ns);
    fprintf(f, "  p95");
    print_dur(f, d->p95_ns);
    fprintf(f, "  total %.3f s\n", sec(d->total_ns));
    any = 1;
  }
  if (!any)
    fprintf(f, "  stages        none recorded\n");
  const stoke_dist *copy = &st->stage[STOKE_STAGE_COPY];
  if (st->backend == STOKE_BACKEND_CUDA && copy->count) {
    double gbps = copy->total_ns > 0 ? (double)st->copy_bytes /
                                           (double)copy->total_ns
                                     : 0.0;
    fprintf(f, "  copy          %.3f ms per batch (%.2f GB/s), exposed "
               "%.3f ms per step: %.0f%% hidden under the steps%s\n",
            msec(copy->mean_ns), gbps, msec(st->copy_wait.mean_ns),
            100 * st->copy_overlap,
            st->pageable_copies ? ", from pageable memory" : "");
    fprintf(f, "  gpu idle      %.1f%% of the stream's time between steps "
               "(p50 %.3f ms, p99 %.3f ms per step)\n",
            100 * st->gpu_idle_frac, msec(st->gpu_idle.p50_ns),
            msec(st->gpu_idle.p99_ns));
  }
  if (st->clock == STOKE_CLOCK_EVENTS && st->host_wait.count)
    fprintf(f, "  host clocks   waiting %.3f s, computing %.3f s inside and "
               "between next() (the GPU's are above)\n",
            sec(st->host_wait.total_ns), sec(st->host_compute.total_ns));
  fprintf(f, "  peak RSS      ");
  print_bytes(f, res->peak_rss_bytes);
  fprintf(f, "\n");
  cli_print_rungs(f, res);
}

void cli_print_autotune(FILE *f, const cli_run_result *res) {
  const stoke_stats *st = &res->stats;
  if (!st->autotune)
    return;
  fprintf(f, "\nautotune: %llu change%s (%llu rolled back), now %u workers, "
             "prefetch %u (CPU budget %.1f cores)\n",
          (unsigned long long)st->autotune_changes,
          st->autotune_changes == 1 ? "" : "s",
          (unsigned long long)st->autotune_rollbacks, st->n_workers,
          st->prefetch, st->cpu_budget);
  for (size_t i = 0; i < res->n_autotune; i++)
    fprintf(f, "  %s\n", res->autotune[i].text);
}

cJSON *cli_autotune_json(const cli_run_result *res) {
  const stoke_stats *st = &res->stats;
  if (!st->autotune)
    return cJSON_CreateNull();
  cJSON *o = cJSON_CreateObject();
  if (!o)
    return NULL;
  cJSON_AddNumberToObject(o, "max_workers", st->max_workers);
  cJSON_AddNumberToObject(o, "max_prefetch", st->max_prefetch);
  cJSON_AddNumberToObject(o, "cpu_budget", st->cpu_budget);
  cJSON_AddNumberToObject(o, "workers", st->n_workers);
  cJSON_AddNumberToObject(o, "prefetch", st->prefetch);
  cJSON_AddNumberToObject(o, "changes", (double)st->autotune_changes);
  cJSON_AddNumberToObject(o, "rollbacks", (double)st->autotune_rollbacks);
  cJSON_AddNumberToObject(o, "released_bytes",
                          (double)st->autotune_released_bytes);
  cJSON *a = cJSON_AddArrayToObject(o, "decisions");
  for (size_t i = 0; a && i < res->n_autotune; i++) {
    const stoke_autotune_event *e = &res->autotune[i];
    cJSON *d = cJSON_CreateObject();
    if (!d)
      break;
    cJSON_AddItemToArray(a, d);
    cJSON_AddStringToObject(d, "kind", stoke_autotune_kind_name(e->kind));
    cJSON_AddNumberToObject(d, "epoch", (double)e->epoch);
    cJSON_AddNumberToObject(d, "step", (double)e->step);
    cJSON_AddNumberToObject(d, "time_s", sec(e->time_ns));
    cJSON_AddNumberToObject(d, "from_workers", e->from_workers);
    cJSON_AddNumberToObject(d, "to_workers", e->to_workers);
    cJSON_AddNumberToObject(d, "from_prefetch", e->from_prefetch);
    cJSON_AddNumberToObject(d, "to_prefetch", e->to_prefetch);
    cJSON_AddNumberToObject(d, "wait_before", e->wait_before);
    if (e->wait_after >= 0)
      cJSON_AddNumberToObject(d, "wait_after", e->wait_after);
    else
      cJSON_AddNullToObject(d, "wait_after");
    if (e->wait_predicted >= 0)
      cJSON_AddNumberToObject(d, "wait_predicted", e->wait_predicted);
    else
      cJSON_AddNullToObject(d, "wait_predicted");
    cJSON_AddNumberToObject(d, "step_before_ms", msec(e->step_before_ns));
    if (e->step_after_ns >= 0)
      cJSON_AddNumberToObject(d, "step_after_ms", msec(e->step_after_ns));
    else
      cJSON_AddNullToObject(d, "step_after_ms");
    cJSON_AddNumberToObject(d, "compute_ms", msec(e->compute_ns));
    cJSON_AddStringToObject(d, "text", e->text);
  }
  return o;
}

void cli_print_verdict(FILE *f, const char *indent,
                       const stoke_diagnosis *diag) {
  const char *name = stoke_verdict_name(diag->verdict);
  const char *why = diag->reason;
  size_t n = strlen(name);
  /* The reason may open with the verdict itself ("starving: waiting ...");
  ** print the name once. */
  if (strncmp(why, name, n) == 0) {
    why += n;
    while (*why == ':' || *why == ' ' || *why == ',')
      why++;
  }
  if (*why)
    fprintf(f, "%sverdict: %s \xe2\x80\x94 %s\n", indent, name, why);
  else
    fprintf(f, "%sverdict: %s\n", indent, name);
}

/* ---- JSON ---------------------------------------------------------------- */

cJSON *cli_config_json(const cli_run_spec *spec, const cli_run_result *res) {
  const stoke_synthetic_config *sy = &spec->synth;
  const stoke_config *c = &res->eff;
  char buf[128];
  cJSON *o = cJSON_CreateObject();
  if (!o)
    return NULL;
  if (spec->source_label) {
    cJSON_AddStringToObject(o, "source", spec->source_label);
    cJSON_AddStringToObject(o, "data_kind", res->source_kind);
    cJSON_AddNumberToObject(o, "samples", (double)res->source_samples);
  } else if (spec->data) {
    cJSON_AddStringToObject(o, "source", "images");
    cJSON_AddStringToObject(o, "data", spec->data);
    cJSON_AddStringToObject(o, "data_kind", res->source_kind);
    cJSON_AddStringToObject(o, "transform", spec->image.transform);
    cJSON_AddNumberToObject(o, "samples", (double)res->source_samples);
  } else {
    cli_fmt_synthetic(sy, buf, sizeof(buf));
    cJSON_AddStringToObject(o, "source", "synthetic");
    cJSON_AddStringToObject(o, "synthetic", buf);
    cJSON_AddStringToObject(o, "synthetic_kind", synth_kind_name(sy->kind));
    cJSON_AddNumberToObject(o, "cost_ns", (double)sy->cost_ns);
    cli_fmt_cost_dist(sy, buf, sizeof(buf));
    cJSON_AddStringToObject(o, "cost_dist", buf);
    cJSON_AddNumberToObject(o, "samples", (double)sy->n_samples);
    cli_fmt_shape(sy->ndim, sy->shape, buf, sizeof(buf));
    cJSON_AddStringToObject(o, "shape", buf);
    cJSON_AddNumberToObject(o, "classes", sy->n_classes);
  }
  cJSON_AddNumberToObject(o, "batch_size", (double)c->batch_size);
  cJSON_AddNumberToObject(o, "workers", c->n_workers);
  cJSON_AddBoolToObject(o, "autotune", c->autotune);
  cJSON_AddNumberToObject(o, "prefetch", c->prefetch);
  cJSON_AddNumberToObject(o, "consumer_slots", c->consumer_slots);
  cJSON_AddBoolToObject(o, "shuffle", c->shuffle != STOKE_SHUFFLE_NONE);
  cJSON_AddStringToObject(o, "order",
                          c->shuffle == STOKE_SHUFFLE_BLOCK     ? "block"
                          : c->shuffle == STOKE_SHUFFLE_UNIFORM ? "uniform"
                                                                : "index");
  if (c->shuffle == STOKE_SHUFFLE_BLOCK) {
    cJSON_AddNumberToObject(o, "block_bytes",
                            (double)(c->shuffle_block_bytes
                                         ? c->shuffle_block_bytes
                                         : STOKE_BLOCK_BYTES_DEFAULT));
    cJSON_AddNumberToObject(o, "block_window",
                            c->shuffle_window ? c->shuffle_window
                                              : STOKE_BLOCK_WINDOW_DEFAULT);
  }
  cJSON_AddNumberToObject(o, "echo", c->echo ? c->echo : 1);
  cJSON_AddStringToObject(o, "echo_mode", stoke_echo_mode_name(c->echo_mode));
  cJSON_AddStringToObject(o, "worker_policy",
                          stoke_worker_policy_name(c->worker_policy));
  if (spec->cfg.cache_dir)
    cJSON_AddStringToObject(o, "cache", spec->cfg.cache_dir);
  else
    cJSON_AddNullToObject(o, "cache");
  cJSON_AddNumberToObject(o, "cache_max_bytes", (double)c->cache_max_bytes);
  cJSON_AddNumberToObject(o, "ram_cache_bytes",
                          c->ram_cache_bytes == STOKE_RAM_CACHE_ALL
                              ? -1.0
                              : (double)c->ram_cache_bytes);
  if (spec->gpu_price_per_h > 0)
    cJSON_AddNumberToObject(o, "gpu_price_per_hour", spec->gpu_price_per_h);
  cJSON_AddNumberToObject(o, "seed", (double)c->seed);
  cJSON_AddBoolToObject(o, "drop_last", c->drop_last);
  cJSON_AddNumberToObject(o, "rank", c->rank);
  cJSON_AddNumberToObject(o, "world", c->world);
  cJSON_AddBoolToObject(o, "out_of_order", !c->in_order);
  cJSON_AddBoolToObject(o, "prefetch_next_epoch", c->prefetch_next_epoch);
  cJSON_AddNumberToObject(o, "timeout_ms", (double)c->sample_timeout_ms);
  cJSON_AddNumberToObject(o, "mem_budget_bytes", (double)c->mem_budget_bytes);
  cJSON_AddStringToObject(o, "on_error", stoke_on_error_name(c->on_error));
  cli_fmt_max_failures(c, buf, sizeof(buf));
  cJSON_AddStringToObject(o, "max_failures", buf);
  if (spec->cfg.quarantine_path)
    cJSON_AddStringToObject(o, "quarantine", spec->cfg.quarantine_path);
  else
    cJSON_AddNullToObject(o, "quarantine");
  cJSON_AddNumberToObject(o, "epochs", spec->epochs);
  cJSON_AddNumberToObject(o, "warmup_epochs", c->warmup_epochs);
  spec_compute(spec, buf, sizeof(buf));
  cJSON_AddStringToObject(o, "compute", buf);
  cJSON_AddNumberToObject(o, "compute_ns", (double)spec->compute_ns);
  cJSON_AddStringToObject(o, "device",
                          res->device_text[0] ? res->device_text : "cpu");
  cJSON_AddNumberToObject(o, "device_prefetch", c->device_prefetch);
  cJSON_AddNumberToObject(o, "pin_memory", c->pin_memory);
  cJSON_AddBoolToObject(o, "device_normalize", c->device_normalize);
  cJSON_AddNumberToObject(o, "batches_per_epoch", (double)res->n_batches);
  cJSON_AddNumberToObject(o, "samples_per_epoch", (double)res->n_samples);
  cJSON_AddNumberToObject(o, "host_bytes", (double)res->host_bytes);
  return o;
}

cJSON *cli_epochs_json(const cli_run_result *res) {
  cJSON *a = cJSON_CreateArray();
  if (!a)
    return NULL;
  for (size_t i = 0; i < res->n_epochs; i++) {
    const stoke_epoch_stats *e = &res->epochs[i];
    cJSON *o = cJSON_CreateObject();
    if (!o)
      break;
    cJSON_AddItemToArray(a, o);
    cJSON_AddNumberToObject(o, "index", (double)e->epoch);
    cJSON_AddBoolToObject(o, "warmup", e->warmup);
    cJSON_AddNumberToObject(o, "seconds", sec(e->wall_ns));
    cJSON_AddNumberToObject(o, "wait_s", sec(e->wait_ns));
    cJSON_AddNumberToObject(o, "compute_s", sec(e->compute_ns));
    cJSON_AddNumberToObject(o, "batches", (double)e->batches);
    cJSON_AddNumberToObject(o, "samples", (double)e->samples);
  }
  return a;
}

cJSON *cli_summary_json(const cli_run_result *res) {
  const stoke_stats *st = &res->stats;
  cJSON *o = cJSON_CreateObject();
  if (!o)
    return NULL;
  cJSON_AddNumberToObject(o, "epochs", (double)res->n_measured);
  cJSON_AddNumberToObject(o, "steps", (double)st->steps);
  cJSON_AddNumberToObject(o, "samples", (double)st->samples);
  cJSON_AddNumberToObject(o, "epoch_s", res->epoch_s);
  cJSON_AddNumberToObject(o, "samples_per_s", res->samples_per_s);
  cJSON_AddNumberToObject(o, "wait_s", sec(st->wait.total_ns));
  cJSON_AddNumberToObject(o, "compute_s", sec(st->compute.total_ns));
  cJSON_AddNumberToObject(o, "wait_ratio", st->wait_ratio);
  /* The wait's log buckets, for `stoke report`'s histogram. */
  cJSON *h = cJSON_AddArrayToObject(o, "wait_histogram");
  for (size_t i = 0; h && i < res->n_wait_hist; i++) {
    cJSON *b = cJSON_CreateObject();
    cJSON_AddNumberToObject(b, "lo_ms", (double)res->wait_hist[i].lo_ns / 1e6);
    cJSON_AddNumberToObject(b, "hi_ms", (double)res->wait_hist[i].hi_ns / 1e6);
    cJSON_AddNumberToObject(b, "count", (double)res->wait_hist[i].count);
    cJSON_AddItemToArray(h, b);
  }
  cJSON_AddNumberToObject(o, "wait_p50_ms", msec(st->wait.p50_ns));
  cJSON_AddNumberToObject(o, "wait_p95_ms", msec(st->wait.p95_ns));
  cJSON_AddNumberToObject(o, "wait_p99_ms", msec(st->wait.p99_ns));
  cJSON_AddNumberToObject(o, "wait_max_ms", msec(st->wait.max_ns));
  cJSON_AddNumberToObject(o, "queue_empty_frac", st->queue_empty_frac);
  cJSON_AddNumberToObject(o, "queue_mean_depth", st->queue_mean_depth);
  cJSON_AddNumberToObject(o, "bytes", (double)st->bytes);
  cJSON_AddNumberToObject(o, "peak_rss_bytes", (double)res->peak_rss_bytes);
  cJSON_AddStringToObject(o, "verdict", stoke_verdict_name(res->diag.verdict));
  cJSON_AddStringToObject(o, "verdict_reason", res->diag.reason);
  cli_rungs_json(o, res);
  return o;
}

cJSON *cli_device_json(const cli_run_result *res) {
  const stoke_device_info *d = &res->device;
  const stoke_stats *st = &res->stats;
  cJSON *o = cJSON_CreateObject();
  if (!o)
    return NULL;
  cJSON_AddStringToObject(o, "requested", stoke_backend_name(d->requested));
  cJSON_AddStringToObject(o, "backend", stoke_backend_name(d->backend));
  cJSON_AddStringToObject(o, "reason", d->reason);
  cJSON_AddNumberToObject(o, "device", d->device);
  cJSON_AddStringToObject(o, "name", d->name);
  cJSON_AddNumberToObject(o, "driver_version", d->driver_version);
  cJSON_AddNumberToObject(o, "device_slots", (double)d->n_device_slots);
  cJSON_AddNumberToObject(o, "device_bytes", (double)d->device_bytes);
  cJSON_AddBoolToObject(o, "normalize_on_device", d->normalize_on_device);
  cJSON_AddStringToObject(o, "normalize", d->normalize);
  cJSON_AddStringToObject(o, "clock", st->clock == STOKE_CLOCK_EVENTS
                                          ? "events"
                                      : st->clock == STOKE_CLOCK_SYNC
                                          ? "sync"
                                          : "host");
  const stoke_dist *copy = &st->stage[STOKE_STAGE_COPY];
  cJSON_AddNumberToObject(o, "copies", (double)copy->count);
  cJSON_AddNumberToObject(o, "copy_mean_ms", msec(copy->mean_ns));
  cJSON_AddNumberToObject(o, "copy_bytes", (double)st->copy_bytes);
  cJSON_AddNumberToObject(o, "copy_gbps",
                          copy->total_ns > 0 ? (double)st->copy_bytes /
                                                   (double)copy->total_ns
                                             : 0.0);
  cJSON_AddNumberToObject(o, "copy_exposed_mean_ms",
                          msec(st->copy_wait.mean_ns));
  cJSON_AddNumberToObject(o, "copy_hidden_s", sec(st->copy_hidden_ns));
  cJSON_AddNumberToObject(o, "copy_overlap", st->copy_overlap);
  cJSON_AddNumberToObject(o, "gpu_idle_frac", st->gpu_idle_frac);
  cJSON_AddNumberToObject(o, "gpu_idle_p50_ms", msec(st->gpu_idle.p50_ns));
  cJSON_AddNumberToObject(o, "gpu_idle_p99_ms", msec(st->gpu_idle.p99_ns));
  cJSON_AddNumberToObject(o, "host_wait_s", sec(st->host_wait.total_ns));
  cJSON_AddNumberToObject(o, "host_compute_s", sec(st->host_compute.total_ns));
  cJSON_AddNumberToObject(o, "pageable_copies", (double)st->pageable_copies);
  cJSON_AddNumberToObject(o, "untimed_steps", (double)st->untimed_steps);
  return o;
}

cJSON *cli_stages_json(const cli_run_result *res) {
  cJSON *a = cJSON_CreateArray();
  if (!a)
    return NULL;
  for (int s = 0; s < STOKE_STAGE_COUNT; s++) {
    const stoke_dist *d = &res->stats.stage[s];
    cJSON *o = cJSON_CreateObject();
    if (!o)
      break;
    cJSON_AddItemToArray(a, o);
    cJSON_AddStringToObject(o, "name", stoke_stage_name(s));
    cJSON_AddNumberToObject(o, "total_s", sec(d->total_ns));
    cJSON_AddNumberToObject(o, "count", (double)d->count);
    cJSON_AddNumberToObject(o, "mean_us", (double)d->mean_ns / 1e3);
    cJSON_AddNumberToObject(o, "p95_us", (double)d->p95_ns / 1e3);
  }
  return a;
}

cJSON *cli_run_json(const cli_run_spec *spec, const cli_run_result *res) {
  cJSON *root = cJSON_CreateObject();
  if (!root)
    return NULL;
  cJSON_AddItemToObject(root, "config", cli_config_json(spec, res));
  cJSON_AddItemToObject(root, "machine", cli_machine_json());
  cJSON_AddItemToObject(root, "epochs", cli_epochs_json(res));
  cJSON_AddItemToObject(root, "summary", cli_summary_json(res));
  cJSON_AddItemToObject(root, "stages", cli_stages_json(res));
  cJSON_AddItemToObject(root, "bad_samples", cli_failures_json(spec, res));
  cJSON_AddItemToObject(root, "resume", cli_resume_json(spec, res));
  cJSON_AddItemToObject(root, "device", cli_device_json(res));
  cJSON_AddItemToObject(root, "autotune", cli_autotune_json(res));
  return root;
}

/* ---- output files -------------------------------------------------------- */

FILE *cli_open_output(const char *path) {
  if (strcmp(path, "-") == 0)
    return stdout;
  FILE *f = fopen(path, "w");
  if (!f)
    cli_error("cannot write '%s': %s", path, strerror(errno));
  return f;
}

int cli_write_json(const char *path, FILE *f, const cJSON *root) {
  char *text = root ? cJSON_Print(root) : NULL;
  if (!text) {
    cli_error("%s", stoke_strerror(STOKE_ENOMEM));
    if (f != stdout)
      fclose(f);
    return CLI_ERROR;
  }
  int bad = fputs(text, f) < 0 || fputc('\n', f) == EOF;
  free(text);
  bad |= (f == stdout ? fflush(f) : fclose(f)) != 0;
  if (bad) {
    cli_error("cannot write '%s': %s", path, strerror(errno));
    return CLI_ERROR;
  }
  return CLI_OK;
}
