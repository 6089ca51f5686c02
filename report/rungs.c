/* rungs.c — what a run's wait costs (libstoke's stoke_cost_estimate), and
** the figures of the storage and sample-cost rungs (echo, the caches), in
** the report and its JSON.  With a price (--gpu-price 2.50/h, Python's
** gpu_price=) the time becomes money: what the run costs, and what its
** waiting costs. */
#include <string.h>

#include "report.h"

/* The run's cost, from its steady state and its measured epochs. */
static stoke_cost cost_of(const report_result *res) {
  stoke_epoch_summary sum = {res->n_measured, res->epoch_s,
                             res->samples_per_s,
                             res->epoch_s * (double)res->n_measured};
  stoke_cost c;
  if (stoke_cost_estimate(&res->stats, &sum, res->gpu_price_per_h, &c) != 0)
    memset(&c, 0, sizeof c);
  return c;
}

void report_print_rungs(FILE *f, const report_result *res) {
  const stoke_stats *st = &res->stats;
  stoke_cost c = cost_of(res);
  if (st->echo > 1 && c.steps_per_s > 0)
    fprintf(f, "  echo          x%u (%s): %.1f steps/s, %.1f fresh samples/s "
               "(%.1f samples/s handed out)\n",
            st->echo, stoke_echo_mode_name(st->echo_mode), c.steps_per_s,
            c.fresh_samples_per_s, res->samples_per_s);
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
  if (!res->n_measured) { /* part of an epoch: no epoch's figures yet */
    fprintf(f, "  cost          %.3f ms per sample (no whole epoch measured "
               "yet); the consumer waits %.1f%% of it\n",
            1e3 * c.seconds_per_sample, 100 * c.wait_share);
    return;
  }
  fprintf(f, "  cost          %.3f ms per sample, %.3f s per epoch; the "
             "consumer waits %.3f s of it (%.1f%%)\n",
          1e3 * c.seconds_per_sample, c.seconds_per_epoch,
          c.wait_seconds_per_epoch, 100 * c.wait_share);
  if (c.gpu_price_per_hour > 0)
    fprintf(f, "  at $%.2f/h    $%.4f per epoch, $%.2f per million samples; "
               "waiting: $%.4f per epoch, $%.2f per million samples\n",
            c.gpu_price_per_hour, c.per_epoch, c.per_million_samples,
            c.wait_per_epoch, c.wait_per_million_samples);
}

cJSON *report_cost_json(const report_result *res) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  stoke_cost c = cost_of(res);
  cJSON_AddNumberToObject(o, "seconds_per_sample", c.seconds_per_sample);
  cJSON_AddNumberToObject(o, "seconds_per_epoch", c.seconds_per_epoch);
  cJSON_AddNumberToObject(o, "wait_seconds_per_epoch",
                          c.wait_seconds_per_epoch);
  cJSON_AddNumberToObject(o, "wait_share", c.wait_share);
  if (c.gpu_price_per_hour > 0) {
    cJSON_AddNumberToObject(o, "gpu_price_per_hour", c.gpu_price_per_hour);
    cJSON_AddNumberToObject(o, "per_epoch", c.per_epoch);
    cJSON_AddNumberToObject(o, "wait_per_epoch", c.wait_per_epoch);
    cJSON_AddNumberToObject(o, "per_million_samples", c.per_million_samples);
    cJSON_AddNumberToObject(o, "wait_per_million_samples",
                            c.wait_per_million_samples);
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
  stoke_cost cost = cost_of(res);
  cJSON_AddNumberToObject(o, "echo", st->echo ? st->echo : 1);
  cJSON_AddStringToObject(o, "echo_mode", stoke_echo_mode_name(st->echo_mode));
  cJSON_AddStringToObject(o, "worker_policy",
                          stoke_worker_policy_name(st->worker_policy));
  cJSON_AddNumberToObject(o, "workers_policy_applied",
                          st->workers_policy_applied);
  cJSON_AddNumberToObject(o, "steps_per_s", cost.steps_per_s);
  cJSON_AddNumberToObject(o, "fresh_samples_per_s", cost.fresh_samples_per_s);
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
