/* text.c — the human report of a run: the headline, the per-epoch table,
** the steady state, the device, the autotuner's decisions and the
** verdict. */
#include <string.h>

#include "report.h"

void report_print_report(FILE *f, const char *cmd, const report_spec *spec,
                         const report_result *res) {
  char src[1200], step[64];
  report_fmt_source(spec, res->n_samples, src, sizeof(src));
  report_fmt_step(spec, step, sizeof(step));
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
  report_print_device(f, res);
  report_print_epochs(f, res);
  report_print_summary(f, res);
  report_print_autotune(f, res);
  report_print_failures(f, res);
  report_print_verdict(f, "", &res->diag);
  report_outside_print(f, &res->stats);
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

static int asked_device(const report_result *res) {
  return res->device.requested != STOKE_BACKEND_HOST ||
         res->device.backend != STOKE_BACKEND_HOST;
}

void report_print_device(FILE *f, const report_result *res) {
  const stoke_device_info *d = &res->device;
  if (!asked_device(res))
    return;
  fprintf(f, "backend: %s\n", d->reason);
  if (d->backend == STOKE_BACKEND_CUDA) {
    char b[32];
    report_fmt_bytes(b, sizeof b, d->device_bytes);
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

void report_print_epochs(FILE *f, const report_result *res) {
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
            e->warmup == 2 ? "part" : e->warmup ? "yes" : "");
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
  report_fmt_bytes(s, sizeof s, b);
  fputs(s, f);
}

/* A stage duration in the unit that reads best. */
static void print_dur(FILE *f, int64_t ns) {
  if (ns >= 1000000)
    fprintf(f, "%8.3f ms", msec(ns));
  else
    fprintf(f, "%8.3f us", (double)ns / 1e3);
}

void report_print_summary(FILE *f, const report_result *res) {
  const stoke_stats *st = &res->stats;
  if (res->partial && res->n_measured)
    fprintf(f, "\nsteady state over %zu epoch%s and part of another (%llu "
               "steps, %llu samples)\n",
            res->n_measured, res->n_measured == 1 ? "" : "s",
            (unsigned long long)st->steps, (unsigned long long)st->samples);
  else if (res->partial)
    fprintf(f, "\nsteady state over part of an epoch (%llu steps, %llu "
               "samples)\n",
            (unsigned long long)st->steps, (unsigned long long)st->samples);
  else
    fprintf(f, "\nsteady state over %zu epoch%s (%llu steps, %llu samples)\n",
            res->n_measured, res->n_measured == 1 ? "" : "s",
            (unsigned long long)st->steps, (unsigned long long)st->samples);
  fprintf(f, "  samples/s     %.1f\n", res->samples_per_s);
  if (res->n_measured)
    fprintf(f, "  epoch         %.6f s\n", res->epoch_s);
  else
    fprintf(f, "  epoch         none measured whole yet\n");
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
  report_print_rungs(f, res);
  report_print_fetch(f, res);
  report_print_rcache(f, res);
}

void report_print_autotune(FILE *f, const report_result *res) {
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

cJSON *report_autotune_json(const report_result *res) {
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
    if (e->from_io || e->to_io) { /* an io_concurrency decision */
      cJSON_AddNumberToObject(d, "from_io_concurrency", e->from_io);
      cJSON_AddNumberToObject(d, "to_io_concurrency", e->to_io);
    }
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

void report_print_verdict(FILE *f, const char *indent,
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

