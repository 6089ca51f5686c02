/* snapshot.c — a run as the reports see it: a live loader's configuration,
** statistics, epochs, wait histogram, autotune decisions, bad samples and
** model, copied into a report_result that outlives the loader. */
#include <stdlib.h>
#include <string.h>

#include "report.h"

void report_result_free(report_result *res) {
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

void report_result_measure(report_result *res) {
  stoke_epoch_summary sum;
  if (stoke_epochs_summarize(res->epochs, res->n_epochs, &sum) != 0)
    memset(&sum, 0, sizeof sum);
  res->n_measured = sum.n_measured;
  res->epoch_s = sum.epoch_s;
  res->samples_per_s = sum.samples_per_s;
  /* Measured steps beyond the whole measured epochs' batches were taken in
  ** part of an epoch: the one a warm-up ended in early, or the one still
  ** running (a long epoch, a run stopped in the middle).  The steady state
  ** is every measured step; with no whole epoch, its rate is theirs. */
  uint64_t whole = 0;
  for (size_t i = 0; i < res->n_epochs; i++)
    if (!res->epochs[i].warmup)
      whole += res->epochs[i].batches;
  const stoke_stats *st = &res->stats;
  res->partial = st->steps > whole;
  int64_t step_ns = st->wait.total_ns + st->compute.total_ns;
  if (!res->n_measured && st->samples && step_ns > 0)
    res->samples_per_s = (double)st->samples / ((double)step_ns / 1e9);
}

int report_result_collect(stoke_loader *l, report_result *res) {
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
  res->eff.metrics_path = res->eff.log_jsonl_path = NULL;
  res->eff.metrics_loader = NULL;
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
  report_result_measure(res);
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
