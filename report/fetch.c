/* fetch.c — the fetch stage of a run over remote shards (stoke_stats'
** fetch_* fields, docs/remote.md "The fetch stage") and the remote shard
** cache's counts (rcache_*, "The cache"), in the text report and the JSON
** summary; absent for a local source, the cache's without a cache. */
#include <string.h>

#include "report.h"

void report_print_fetch(FILE *f, const report_result *res) {
  const stoke_stats *st = &res->stats;
  if (!st->fetch_remote) return;
  fprintf(f, "  fetch         %llu requests (%llu retries, %llu throttled), "
             "%.1f MB at %.1f MB/s; latency p50 %.1f ms, p95 %.1f ms; "
             "%.1f in flight, io_concurrency %u; %.0f%% receiving bodies\n",
          (unsigned long long)st->fetch_requests,
          (unsigned long long)st->fetch_retries,
          (unsigned long long)st->fetch_throttled,
          (double)st->fetch_bytes / 1e6, st->fetch_bytes_per_s / 1e6,
          st->fetch_latency_p50_ms, st->fetch_latency_p95_ms,
          st->fetch_in_flight, st->io_concurrency,
          100 * st->fetch_body_frac);
  stoke_fetch_diagnosis d;
  if (stoke_fetch_diagnose(st, &d) == 0 && d.verdict != STOKE_FETCH_NONE)
    fprintf(f, "  fetch verdict %s\n", stoke_fetch_verdict_name(d.verdict));
}

cJSON *report_fetch_json(const report_result *res) {
  const stoke_stats *st = &res->stats;
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddNumberToObject(o, "requests", (double)st->fetch_requests);
  cJSON_AddNumberToObject(o, "retries", (double)st->fetch_retries);
  cJSON_AddNumberToObject(o, "throttled", (double)st->fetch_throttled);
  cJSON_AddNumberToObject(o, "bytes", (double)st->fetch_bytes);
  cJSON_AddNumberToObject(o, "bytes_per_s", st->fetch_bytes_per_s);
  cJSON_AddNumberToObject(o, "latency_p50_ms", st->fetch_latency_p50_ms);
  cJSON_AddNumberToObject(o, "latency_p95_ms", st->fetch_latency_p95_ms);
  cJSON_AddNumberToObject(o, "in_flight", st->fetch_in_flight);
  cJSON_AddNumberToObject(o, "io_concurrency", st->io_concurrency);
  cJSON_AddNumberToObject(o, "body_frac", st->fetch_body_frac);
  stoke_fetch_diagnosis d;
  if (stoke_fetch_diagnose(st, &d) != 0) memset(&d, 0, sizeof d);
  cJSON_AddStringToObject(o, "verdict", stoke_fetch_verdict_name(d.verdict));
  return o;
}

void report_print_rcache(FILE *f, const report_result *res) {
  const stoke_stats *st = &res->stats;
  if (!st->rcache_used) return;
  fprintf(f, "  remote cache  %llu shard%s from the cache (%.1f MB), %llu "
             "fetched into it (%.1f MB)",
          (unsigned long long)st->rcache_hits,
          st->rcache_hits == 1 ? "" : "s",
          (double)st->rcache_bytes_cached / 1e6,
          (unsigned long long)st->rcache_misses,
          (double)st->rcache_bytes_fetched / 1e6);
  if (st->rcache_uncached)
    fprintf(f, ", %llu read remotely (no ETag)",
            (unsigned long long)st->rcache_uncached);
  if (st->rcache_evicted)
    fprintf(f, ", %llu evicted (%.1f MB)",
            (unsigned long long)st->rcache_evicted,
            (double)st->rcache_bytes_evicted / 1e6);
  fputc('\n', f);
}

cJSON *report_rcache_json(const report_result *res) {
  const stoke_stats *st = &res->stats;
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddNumberToObject(o, "hits", (double)st->rcache_hits);
  cJSON_AddNumberToObject(o, "misses", (double)st->rcache_misses);
  cJSON_AddNumberToObject(o, "uncached", (double)st->rcache_uncached);
  cJSON_AddNumberToObject(o, "bytes_cached",
                          (double)st->rcache_bytes_cached);
  cJSON_AddNumberToObject(o, "bytes_fetched",
                          (double)st->rcache_bytes_fetched);
  cJSON_AddNumberToObject(o, "evicted", (double)st->rcache_evicted);
  cJSON_AddNumberToObject(o, "bytes_evicted",
                          (double)st->rcache_bytes_evicted);
  return o;
}
