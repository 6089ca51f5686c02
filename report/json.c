/* json.c — the JSON of a run (`stoke bench --json`'s document and its
** parts), and the writer that stamps every document with its
** schema_version. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

static double sec(int64_t ns) { return (double)ns / 1e9; }
static double msec(int64_t ns) { return (double)ns / 1e6; }

cJSON *report_config_json(const report_spec *spec, const report_result *res) {
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
    char shown[1024]; /* a URL's user-info and query never reach JSON */
    stoke_path_shown(spec->data, shown, sizeof shown);
    cJSON_AddStringToObject(o, "data", shown);
    cJSON_AddStringToObject(o, "data_kind", res->source_kind);
    cJSON_AddStringToObject(o, "transform", spec->image.transform);
    cJSON_AddNumberToObject(o, "samples", (double)res->source_samples);
    if (stoke_path_is_remote(spec->data)) /* requests in flight */
      cJSON_AddNumberToObject(o, "io_concurrency",
                              spec->image.io_concurrency
                                  ? spec->image.io_concurrency
                                  : STOKE_IO_CONCURRENCY_DEFAULT);
  } else {
    report_fmt_synthetic(sy, buf, sizeof(buf));
    cJSON_AddStringToObject(o, "source", "synthetic");
    cJSON_AddStringToObject(o, "synthetic", buf);
    cJSON_AddStringToObject(o, "synthetic_kind", report_synth_kind_name(sy->kind));
    cJSON_AddNumberToObject(o, "cost_ns", (double)sy->cost_ns);
    report_fmt_cost_dist(sy, buf, sizeof(buf));
    cJSON_AddStringToObject(o, "cost_dist", buf);
    cJSON_AddNumberToObject(o, "samples", (double)sy->n_samples);
    report_fmt_shape(sy->ndim, sy->shape, buf, sizeof(buf));
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
  report_fmt_max_failures(c, buf, sizeof(buf));
  cJSON_AddStringToObject(o, "max_failures", buf);
  if (spec->cfg.quarantine_path)
    cJSON_AddStringToObject(o, "quarantine", spec->cfg.quarantine_path);
  else
    cJSON_AddNullToObject(o, "quarantine");
  cJSON_AddNumberToObject(o, "epochs", spec->epochs);
  cJSON_AddNumberToObject(o, "warmup_epochs", c->warmup_epochs);
  report_fmt_step(spec, buf, sizeof(buf));
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

cJSON *report_epochs_json(const report_result *res) {
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
    /* The warm-up ended during it: its later steps are measured. */
    cJSON_AddBoolToObject(o, "warmup_ended", e->warmup == 2);
    cJSON_AddNumberToObject(o, "seconds", sec(e->wall_ns));
    cJSON_AddNumberToObject(o, "wait_s", sec(e->wait_ns));
    cJSON_AddNumberToObject(o, "compute_s", sec(e->compute_ns));
    cJSON_AddNumberToObject(o, "batches", (double)e->batches);
    cJSON_AddNumberToObject(o, "samples", (double)e->samples);
  }
  return a;
}

cJSON *report_summary_json(const report_result *res) {
  const stoke_stats *st = &res->stats;
  cJSON *o = cJSON_CreateObject();
  if (!o)
    return NULL;
  cJSON_AddNumberToObject(o, "epochs", (double)res->n_measured);
  cJSON_AddBoolToObject(o, "partial_epoch", res->partial);
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
  /* The machine's other load while it measured: when it moved, the
  ** verdict's figures may have moved with it (shift_frac). */
  cJSON_AddItemToObject(o, "outside_load", report_outside_json(&res->stats));
  report_rungs_json(o, res);
  if (st->fetch_remote)
    cJSON_AddItemToObject(o, "fetch", report_fetch_json(res));
  if (st->rcache_used)
    cJSON_AddItemToObject(o, "remote_cache", report_rcache_json(res));
  return o;
}

cJSON *report_device_json(const report_result *res) {
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

cJSON *report_stages_json(const report_result *res) {
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

cJSON *report_run_json(const report_spec *spec, const report_result *res) {
  cJSON *root = cJSON_CreateObject();
  if (!root)
    return NULL;
  cJSON_AddItemToObject(root, "config", report_config_json(spec, res));
  cJSON_AddItemToObject(root, "machine", report_machine_json());
  cJSON_AddItemToObject(root, "epochs", report_epochs_json(res));
  cJSON_AddItemToObject(root, "summary", report_summary_json(res));
  cJSON_AddItemToObject(root, "stages", report_stages_json(res));
  cJSON_AddItemToObject(root, "bad_samples", report_failures_json(spec, res));
  cJSON_AddItemToObject(root, "resume", report_resume_json(spec, res));
  cJSON_AddItemToObject(root, "device", report_device_json(res));
  cJSON_AddItemToObject(root, "autotune", report_autotune_json(res));
  return root;
}


/* ---- documents ------------------------------------------------------------ */

cJSON *report_json_stamp(cJSON *root) {
  if (!root || cJSON_GetObjectItemCaseSensitive(root, "schema_version"))
    return root;
  cJSON *v = cJSON_CreateNumber(REPORT_SCHEMA_VERSION);
  if (!v)
    return root;
  /* First, so that a reader sees the version before anything it governs. */
  v->string = malloc(sizeof "schema_version");
  if (!v->string) {
    cJSON_Delete(v);
    return root;
  }
  memcpy(v->string, "schema_version", sizeof "schema_version");
  if (!cJSON_InsertItemInArray(root, 0, v) &&
      !cJSON_AddItemToObject(root, "schema_version", v))
    cJSON_Delete(v);
  return root;
}

int report_json_write(const char *path, FILE *f, cJSON *root, report_err *e) {
  char *text = root ? cJSON_Print(report_json_stamp(root)) : NULL;
  if (!text) {
    report_errorf(e, "%s", stoke_strerror(STOKE_ENOMEM));
    if (f != stdout)
      fclose(f);
    return -1;
  }
  int bad = fputs(text, f) < 0 || fputc('\n', f) == EOF;
  free(text);
  bad |= (f == stdout ? fflush(f) : fclose(f)) != 0;
  if (bad) {
    report_errorf(e, "cannot write '%s': %s", path, strerror(errno));
    return -1;
  }
  return 0;
}
