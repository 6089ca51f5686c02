/* tune_json.c — a sweep's points and its knee as `stoke tune --json`
** writes them (also Python's stoke.tune): the knee with the tool's flags
** and as PyTorch DataLoader arguments. */
#include <stdio.h>

#include "report.h"

static const char *status_name(int s) {
  switch (s) {
  case STOKE_TUNE_MEASURED:
    return "measured";
  case STOKE_TUNE_OVER_BUDGET:
    return "over_budget";
  case STOKE_TUNE_SKIPPED:
    return "skipped";
  default:
    return "pending";
  }
}


void report_tune_flags(char *buf, size_t n, const stoke_tune_point *k,
                       int batch_swept) {
  /* A remote run's requests in flight are part of what was measured:
  ** pasting the flags without them would run another configuration. */
  char io[40] = "";
  if (k->io_concurrency)
    snprintf(io, sizeof io, " --io-concurrency %u", k->io_concurrency);
  if (batch_swept)
    snprintf(buf, n, "-j %u --prefetch %u -b %zu%s", k->n_workers,
             k->prefetch, k->batch_size, io);
  else
    snprintf(buf, n, "-j %u --prefetch %u%s", k->n_workers, k->prefetch, io);
}

void report_tune_pytorch(char *buf, size_t n, const stoke_tune_point *k) {
  unsigned pf = stoke_tune_prefetch_factor(k->n_workers, k->prefetch);
  if (k->n_workers == 0)
    snprintf(buf, n,
             "DataLoader(dataset, batch_size=%zu, num_workers=0, "
             "pin_memory=True)",
             k->batch_size);
  else
    snprintf(buf, n,
             "DataLoader(dataset, batch_size=%zu, num_workers=%u, "
             "prefetch_factor=%u, persistent_workers=True, pin_memory=True)",
             k->batch_size, k->n_workers, pf);
}
cJSON *report_tune_point_json(const stoke_tune_point *p) {
  cJSON *o = cJSON_CreateObject();
  if (!o)
    return NULL;
  cJSON_AddNumberToObject(o, "workers", p->n_workers);
  cJSON_AddNumberToObject(o, "prefetch", p->prefetch);
  cJSON_AddNumberToObject(o, "batch_size", (double)p->batch_size);
  cJSON_AddStringToObject(o, "status", status_name(p->status));
  cJSON_AddNumberToObject(o, "host_bytes", (double)p->host_bytes);
  if (p->io_concurrency)
    cJSON_AddNumberToObject(o, "io_concurrency", p->io_concurrency);
  if (p->note[0]) cJSON_AddStringToObject(o, "note", p->note);
  if (p->predicted_samples_per_s > 0)
    cJSON_AddNumberToObject(o, "predicted_samples_per_s",
                            p->predicted_samples_per_s);
  if (p->status == STOKE_TUNE_MEASURED) {
    cJSON_AddNumberToObject(o, "samples_per_s", p->samples_per_s);
    cJSON_AddNumberToObject(o, "epoch_s", p->epoch_s);
    cJSON_AddNumberToObject(o, "wait_ratio", p->wait_ratio);
    cJSON_AddNumberToObject(o, "queue_empty_frac", p->queue_empty_frac);
    cJSON_AddNumberToObject(o, "worker_cpu_s", p->worker_cpu_s);
    cJSON_AddStringToObject(o, "verdict", stoke_verdict_name(p->verdict));
    cJSON_AddNumberToObject(o, "steps", (double)p->steps);
    cJSON_AddNumberToObject(o, "samples", (double)p->samples);
  }
  return o;
}

cJSON *report_tune_knee_json(const stoke_tune_point *pts,
                             const stoke_tune_knee *k, int batch_swept) {
  const stoke_tune_point *p = &pts[k->index];
  cJSON *o = cJSON_CreateObject();
  if (!o)
    return NULL;
  char buf[256];
  cJSON_AddNumberToObject(o, "index", (double)k->index);
  cJSON_AddNumberToObject(o, "best_index", (double)k->best);
  cJSON_AddNumberToObject(o, "workers", p->n_workers);
  cJSON_AddNumberToObject(o, "prefetch", p->prefetch);
  cJSON_AddNumberToObject(o, "batch_size", (double)p->batch_size);
  if (p->io_concurrency)
    cJSON_AddNumberToObject(o, "io_concurrency", p->io_concurrency);
  cJSON_AddNumberToObject(o, "samples_per_s", p->samples_per_s);
  cJSON_AddNumberToObject(o, "best_samples_per_s",
                          pts[k->best].samples_per_s);
  cJSON_AddNumberToObject(o, "wait_ratio", p->wait_ratio);
  cJSON_AddStringToObject(o, "verdict", stoke_verdict_name(p->verdict));
  cJSON_AddNumberToObject(o, "host_bytes", (double)p->host_bytes);
  if (k->stall_removed < 0)
    cJSON_AddNullToObject(o, "stall_removed");
  else
    cJSON_AddBoolToObject(o, "stall_removed", k->stall_removed);
  cJSON_AddStringToObject(o, "reason", k->reason);
  report_tune_flags(buf, sizeof buf, p, batch_swept);
  cJSON_AddStringToObject(o, "flags", buf);
  cJSON *py = cJSON_AddObjectToObject(o, "pytorch");
  if (py) {
    cJSON_AddNumberToObject(py, "batch_size", (double)p->batch_size);
    cJSON_AddNumberToObject(py, "num_workers", p->n_workers);
    if (p->n_workers)
      cJSON_AddNumberToObject(
          py, "prefetch_factor",
          stoke_tune_prefetch_factor(p->n_workers, p->prefetch));
    else
      cJSON_AddNullToObject(py, "prefetch_factor");
    cJSON_AddBoolToObject(py, "persistent_workers", p->n_workers > 0);
    cJSON_AddBoolToObject(py, "pin_memory", 1);
    report_tune_pytorch(buf, sizeof buf, p);
    cJSON_AddStringToObject(py, "call", buf);
  }
  return o;
}
