/* cost.c — what a run's wait costs, and the figures of the storage and
** sample-cost rungs (echo, the caches) in the report and its JSON.
**
** The cost is the time the run takes, per sample and per epoch, and the
** share of it the consumer (the accelerator) spends waiting for data.
** With a price (--gpu-price 2.50/h) both become money: an accelerator is
** rented by the hour whether it computes or waits, so the wait's share of
** the bill is the money spent while it starves (seed 000's "renting a
** bigger GPU to starve it"; seed 003's throughput and cost report). */
#include <string.h>

#include "report.h"

/* Measured wall seconds (the measured epochs). */
static double measured_s(const report_result *res) {
  return res->epoch_s * (double)res->n_measured;
}

void report_print_rungs(FILE *f, const report_result *res) {
  const stoke_stats *st = &res->stats;
  double wall = measured_s(res);
  if (st->echo > 1 && wall > 0)
    fprintf(f, "  echo          x%u (%s): %.1f steps/s, %.1f fresh samples/s "
               "(%.1f samples/s handed out)\n",
            st->echo, stoke_echo_mode_name(st->echo_mode),
            (double)st->steps / wall, (double)st->fresh_samples / wall,
            res->samples_per_s);
  if (st->cache_hits || st->cache_written || st->cache_samples)
    fprintf(f, "  cache         %llu reads from the packed cache, %llu "
               "samples written; it holds %zu samples, %.1f MB\n",
            (unsigned long long)st->cache_hits,
            (unsigned long long)st->cache_written, st->cache_samples,
            (double)st->cache_bytes / 1e6);
  if (st->ram_cache_hits)
    fprintf(f, "  ram cache     %llu samples copied from RAM\n",
            (unsigned long long)st->ram_cache_hits);
  if (res->samples_per_s <= 0) return;
  double per_sample = 1.0 / res->samples_per_s;
  double wait_epoch = st->wait_ratio * res->epoch_s;
  fprintf(f, "  cost          %.3f ms per sample, %.3f s per epoch; the "
             "consumer waits %.3f s of it (%.1f%%)\n",
          1e3 * per_sample, res->epoch_s, wait_epoch, 100 * st->wait_ratio);
  if (res->gpu_price_per_h > 0) {
    double p = res->gpu_price_per_h / 3600; /* per second */
    fprintf(f, "  at $%.2f/h    $%.4f per epoch, $%.2f per million samples; "
               "waiting: $%.4f per epoch, $%.2f per million samples\n",
            res->gpu_price_per_h, res->epoch_s * p, 1e6 * per_sample * p,
            wait_epoch * p, 1e6 * per_sample * st->wait_ratio * p);
  }
}

cJSON *report_cost_json(const report_result *res) {
  const stoke_stats *st = &res->stats;
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  double per_sample = res->samples_per_s > 0 ? 1.0 / res->samples_per_s : 0;
  double wait_epoch = st->wait_ratio * res->epoch_s;
  cJSON_AddNumberToObject(o, "seconds_per_sample", per_sample);
  cJSON_AddNumberToObject(o, "seconds_per_epoch", res->epoch_s);
  cJSON_AddNumberToObject(o, "wait_seconds_per_epoch", wait_epoch);
  cJSON_AddNumberToObject(o, "wait_share", st->wait_ratio);
  if (res->gpu_price_per_h > 0) {
    double p = res->gpu_price_per_h / 3600;
    cJSON_AddNumberToObject(o, "gpu_price_per_hour", res->gpu_price_per_h);
    cJSON_AddNumberToObject(o, "per_epoch", res->epoch_s * p);
    cJSON_AddNumberToObject(o, "wait_per_epoch", wait_epoch * p);
    cJSON_AddNumberToObject(o, "per_million_samples", 1e6 * per_sample * p);
    cJSON_AddNumberToObject(o, "wait_per_million_samples",
                            1e6 * per_sample * st->wait_ratio * p);
  } else {
    const char *money[] = {"gpu_price_per_hour", "per_epoch",
                           "wait_per_epoch", "per_million_samples",
                           "wait_per_million_samples"};
    for (size_t i = 0; i < sizeof money / sizeof money[0]; i++)
      cJSON_AddNullToObject(o, money[i]);
  }
  return o;
}

void report_rungs_json(cJSON *o, const report_result *res) {
  const stoke_stats *st = &res->stats;
  double wall = measured_s(res);
  cJSON_AddNumberToObject(o, "echo", st->echo ? st->echo : 1);
  cJSON_AddStringToObject(o, "echo_mode", stoke_echo_mode_name(st->echo_mode));
  cJSON_AddStringToObject(o, "worker_policy",
                          stoke_worker_policy_name(st->worker_policy));
  cJSON_AddNumberToObject(o, "workers_policy_applied",
                          st->workers_policy_applied);
  cJSON_AddNumberToObject(o, "steps_per_s",
                          wall > 0 ? (double)st->steps / wall : 0);
  cJSON_AddNumberToObject(o, "fresh_samples_per_s",
                          wall > 0 ? (double)st->fresh_samples / wall : 0);
  cJSON_AddNumberToObject(o, "fresh_samples", (double)st->fresh_samples);
  cJSON *c = cJSON_AddObjectToObject(o, "cache");
  if (c) {
    cJSON_AddNumberToObject(c, "hits", (double)st->cache_hits);
    cJSON_AddNumberToObject(c, "written", (double)st->cache_written);
    cJSON_AddNumberToObject(c, "samples", (double)st->cache_samples);
    cJSON_AddNumberToObject(c, "bytes", (double)st->cache_bytes);
    cJSON_AddNumberToObject(c, "ram_hits", (double)st->ram_cache_hits);
  }
  cJSON_AddItemToObject(o, "cost", report_cost_json(res));
}
