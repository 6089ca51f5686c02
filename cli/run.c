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
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

/* ---- specs --------------------------------------------------------------- */

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
    *kind = REPORT_COMPUTE_NONE;
    *ns = 0;
    return 0;
  }
  const char *colon = strchr(s, ':');
  size_t len = colon ? (size_t)(colon - s) : strlen(s);
  int k;
  if (len == 5 && strncmp(s, "sleep", 5) == 0) {
    k = REPORT_COMPUTE_SLEEP;
  } else if (len == 4 && strncmp(s, "spin", 4) == 0) {
    k = REPORT_COMPUTE_SPIN;
  } else if (len == 9 && strncmp(s, "gpu-sleep", 9) == 0) {
    k = REPORT_COMPUTE_GPU_SLEEP;
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

/* ---- the consumer's step ------------------------------------------------- */

void cli_fmt_synthetic(const stoke_synthetic_config *synth, char *buf,
                       size_t n) {
  report_fmt_synthetic(synth, buf, n);
}

void cli_fmt_cost_dist(const stoke_synthetic_config *synth, char *buf,
                       size_t n) {
  report_fmt_cost_dist(synth, buf, n);
}

void cli_fmt_compute(int kind, int64_t ns, char *buf, size_t n) {
  report_fmt_compute(kind, ns, buf, n);
}

/* The library's simulated step (the synthetic source's sleep and spin);
** a step on the device is the loader's (stoke_loader_gpu_sleep). */
void cli_consumer_step(int kind, int64_t ns) {
  if (kind == REPORT_COMPUTE_SLEEP)
    stoke_step_simulate(STOKE_STEP_SLEEP, ns);
  else if (kind == REPORT_COMPUTE_SPIN)
    stoke_step_simulate(STOKE_STEP_SPIN, ns);
}

/* ---- the run ------------------------------------------------------------- */

static void library_error(const stoke_loader *l, int rc) {
  const char *msg = stoke_errmsg(l);
  cli_error("%s", msg && msg[0] ? msg : stoke_strerror(rc));
}

/* The calling thread's run delay (ns runnable but not running); -1 when
** the kernel does not say. */
static int64_t thread_run_delay_ns(void) {
  int64_t ns = -1;
  stoke_thread_run_delay(&ns);
  return ns;
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

static int save_state(const report_spec *spec, stoke_loader *l,
                      report_result *res) {
  if (stoke_loader_state_save(l, &res->state) != 0) {
    cli_error("--save-state: %s", stoke_errmsg(l));
    return CLI_ERROR;
  }
  return spec->save_state_path ? cli_state_write(spec->save_state_path,
                                                 &res->state)
                               : CLI_OK;
}

/* --resume: restore the state, and run from its epoch to --epochs. */
static int resume_run(const report_spec *spec, stoke_loader *l,
                      report_result *res) {
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

int cli_run(const report_spec *spec, report_result *res) {
  memset(res, 0, sizeof(*res));
  stoke_source *src = NULL;
  int rc = cli_source_create(spec->data, &spec->image, &spec->synth, &src);
  if (rc != CLI_OK)
    return rc;
  stoke_config cfg = spec->cfg;
  cfg.source = src;
  /* The run's statistics are then of its epochs alone: nothing is
  ** prefetched of an epoch it will not take. */
  cfg.epochs = spec->epochs;
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
  if (spec->compute_kind == REPORT_COMPUTE_GPU_SLEEP &&
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
      if (spec->compute_kind == REPORT_COMPUTE_GPU_SLEEP)
        rc = stoke_loader_gpu_sleep(l, spec->compute_ns);
      else
        cli_consumer_step(spec->compute_kind, spec->compute_ns);
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
  rc = report_result_collect(l, res);
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
  res->peak_rss_bytes = report_peak_rss_bytes();
  stoke_loader_destroy(l);
  return CLI_OK;
fail:
  library_error(l, rc);
fail_quiet:
  if (indices && indices != stdout) fclose(indices);
  stoke_loader_destroy(l);
  report_result_free(res);
  return CLI_ERROR;
}

int cli_run_open(const report_spec *spec, const char *json_path,
                 FILE **json, report_result *res) {
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

/* ---- output files -------------------------------------------------------- */

FILE *cli_open_output(const char *path) {
  if (strcmp(path, "-") == 0)
    return stdout;
  FILE *f = fopen(path, "w");
  if (!f)
    cli_error("cannot write '%s': %s", path, strerror(errno));
  return f;
}

int cli_write_json(const char *path, FILE *f, cJSON *root) {
  report_err e;
  if (report_json_write(path, f, root, &e) != 0) {
    cli_error("%s", e.msg);
    return CLI_ERROR;
  }
  return CLI_OK;
}
