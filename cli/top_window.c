/* top_window.c — `stoke top`'s figures over a window: two published
** snapshots of one loader, the later minus the earlier.
**
** A snapshot's counters are totals (its statistics since the warm-up
** ended), so the difference of two is what happened between them.  When
** the warm-up ends between the two the totals start again from zero: the
** later snapshot alone is then the window. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* The wait at quantile q of a window's histogram bins (each bin counted
** at its geometric middle, 1 us * 2^((k + 0.5) / 4)). */
static int64_t bins_quantile(const uint64_t *bins, uint64_t total, double q) {
  if (total == 0) return 0;
  uint64_t rank = (uint64_t)ceil(q * (double)total), seen = 0;
  if (rank == 0) rank = 1;
  for (int k = 0; k < STOKE_LIVE_HIST; k++) {
    seen += bins[k];
    if (seen >= rank) return (int64_t)(1000.0 * pow(2.0, (k + 0.5) / 4.0));
  }
  return 0;
}

static void dist_diff(stoke_dist *d, const stoke_dist *a, const stoke_dist *b) {
  d->count = a->count - b->count;
  d->total_ns = a->total_ns - b->total_ns;
  d->mean_ns = d->count ? d->total_ns / (int64_t)d->count : 0;
  /* Without the window's histogram, the mean stands for the middle. */
  d->p50_ns = d->p95_ns = d->p99_ns = d->mean_ns;
  d->max_ns = a->max_ns;
}

/* Whether the totals started again between then and now: the warm-up
** ended, and what the earlier snapshot counted since the loader began is
** gone from the later.  Any total that went down says so; the steps alone
** do not, since both snapshots may count none (the first measured step
** not yet taken), while the workers' time went from the warm-up's to
** almost nothing (top showed "busy -96%"). */
static int totals_restarted(const stoke_live *now, const stoke_live *then) {
  const stoke_stats *a = &now->stats, *b = &then->stats;
  for (int k = 0; k < STOKE_LIVE_HIST; k++)
    if (now->wait_hist[k] < then->wait_hist[k]) return 1;
  if (a->steps < b->steps || a->samples < b->samples ||
      a->fresh_samples < b->fresh_samples || a->bytes < b->bytes ||
      a->worker_busy_ns < b->worker_busy_ns ||
      a->worker_cpu_ns < b->worker_cpu_ns || a->chunks < b->chunks ||
      a->wait.count < b->wait.count || a->compute.count < b->compute.count)
    return 1;
  for (int k = 0; k < STOKE_STAGE_COUNT; k++)
    if (a->stage[k].count < b->stage[k].count ||
        a->stage[k].total_ns < b->stage[k].total_ns)
      return 1;
  for (int k = 0; k < 16; k++)
    if (a->queue_depth_hist[k] < b->queue_depth_hist[k]) return 1;
  return 0;
}

void top_window_make(const stoke_live *now, const stoke_live *then,
                     top_window *w) {
  memset(w, 0, sizeof *w);
  const stoke_stats *a = &now->stats;
  stoke_stats zero;
  memset(&zero, 0, sizeof zero);
  const stoke_stats *b = &then->stats;
  /* The warm-up ended between them (the totals restarted): from zero. */
  w->restarted = now == then || totals_restarted(now, then);
  if (w->restarted) b = &zero;
  w->seconds = (double)(now->time_ns -
                        (w->restarted ? now->created_ns : then->time_ns)) /
               1e9;
  if (w->seconds <= 0) w->seconds = 1e-9;
  stoke_stats *s = &w->stats;
  *s = *a;
  s->steps = a->steps - b->steps;
  s->samples = a->samples - b->samples;
  s->bytes = a->bytes - b->bytes;
  s->fresh_samples = a->fresh_samples - b->fresh_samples;
  dist_diff(&s->wait, &a->wait, &b->wait);
  dist_diff(&s->compute, &a->compute, &b->compute);
  for (int k = 0; k < STOKE_STAGE_COUNT; k++)
    dist_diff(&s->stage[k], &a->stage[k], &b->stage[k]);
  s->worker_busy_ns = a->worker_busy_ns - b->worker_busy_ns;
  s->worker_cpu_ns = a->worker_cpu_ns - b->worker_cpu_ns;
  s->chunks = a->chunks - b->chunks;
  int64_t both = s->wait.total_ns + s->compute.total_ns;
  s->wait_ratio = both > 0 ? (double)s->wait.total_ns / (double)both : 0;
  uint64_t calls = 0, empty = 0;
  double depth = 0;
  for (int k = 0; k < 16; k++) {
    uint64_t n = a->queue_depth_hist[k] - b->queue_depth_hist[k];
    s->queue_depth_hist[k] = n;
    calls += n;
    depth += (double)k * (double)n;
  }
  empty = s->queue_depth_hist[0];
  s->queue_empty_frac = calls ? (double)empty / (double)calls : 0;
  s->queue_mean_depth = calls ? depth / (double)calls : 0;
  uint64_t waits = 0;
  for (int k = 0; k < STOKE_LIVE_HIST; k++) {
    w->wait_bins[k] = now->wait_hist[k] -
                      (w->restarted ? 0 : then->wait_hist[k]);
    waits += w->wait_bins[k];
  }
  if (waits) {
    s->wait.p50_ns = bins_quantile(w->wait_bins, waits, 0.50);
    s->wait.p95_ns = bins_quantile(w->wait_bins, waits, 0.95);
    s->wait.p99_ns = bins_quantile(w->wait_bins, waits, 0.99);
  }
  /* The workers' time over the window's wall time, per worker. */
  double pool = w->seconds * 1e9 * (double)(a->n_workers ? a->n_workers : 1);
  w->busy_frac = (double)s->worker_busy_ns / pool;
  w->slot_wait_frac = (double)s->stage[STOKE_STAGE_SLOT_WAIT].total_ns / pool;
  if (w->busy_frac > 1) w->busy_frac = 1;
  if (w->busy_frac + w->slot_wait_frac > 1)
    w->slot_wait_frac = 1 - w->busy_frac;
  w->idle_frac = 1 - w->busy_frac - w->slot_wait_frac;
  if (w->idle_frac < 0) w->idle_frac = 0;
  stoke_diagnose(s, &w->diagnosis);
}

void top_outside_line(const stoke_stats *st, long cores, char *buf,
                      size_t cap) {
  if (cores < 1) cores = 1;
  if (st->outside_windows == 0)
    snprintf(buf, cap,
             "other load: not measured yet (it is, from the warm-up's end)");
  else if (st->outside_moved)
    /* "(delay)": the run delay's sign said it (the other load itself may
    ** have moved too little, beside workers on full cores); shorter, so
    ** that the line keeps within 79 columns on a large machine. */
    snprintf(buf, cap,
             "other load: %.1f of %ld cores (%.1f-%.1f): moved%s off by up "
             "to %.0f%%",
             st->outside_mean_cores, cores, st->outside_min_cores,
             st->outside_max_cores,
             st->outside_delay_moved ? " (delay)," : ", figures",
             100 * st->outside_shift_frac);
  else
    snprintf(buf, cap,
             "other load: %.1f of %ld cores (%.1f-%.1f over %u windows): "
             "steady",
             st->outside_mean_cores, cores, st->outside_min_cores,
             st->outside_max_cores, st->outside_windows);
}

/* v with a decimal prefix before unit: "850 B/s", "12.3 MB/s", "1.5 GB". */
static void fmt_si(double v, const char *unit, char *buf, size_t cap) {
  const char *prefix[] = {"", "k", "M", "G", "T", "P", "E"};
  int u = 0;
  while (v >= 1000 && u < 6) {
    v /= 1000;
    u++;
  }
  snprintf(buf, cap, "%.3g %s%s", v, prefix[u], unit);
}

static void fmt_rate(double bps, char *buf, size_t cap) {
  fmt_si(bps, "B/s", buf, cap);
}

/* "21.5 ms", "12.3 s". */
static void fmt_ms(double ms, char *buf, size_t cap) {
  if (ms < 1000)
    snprintf(buf, cap, "%.3g ms", ms);
  else
    snprintf(buf, cap, "%.3g s", ms / 1e3);
}

int top_rcache_line(const stoke_stats *st, char *buf, size_t cap) {
  if (!st->rcache_used) return 0;
  char hit[24], got[24];
  fmt_si((double)st->rcache_bytes_cached, "B", hit, sizeof hit);
  fmt_si((double)st->rcache_bytes_fetched, "B", got, sizeof got);
  int n = snprintf(buf, cap, "cache: %llu hit%s (%s), %llu fetched (%s)",
                   (unsigned long long)st->rcache_hits,
                   st->rcache_hits == 1 ? "" : "s", hit,
                   (unsigned long long)st->rcache_misses, got);
  size_t len = n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
  if (st->rcache_uncached && len < cap)
    len += (size_t)snprintf(buf + len, cap - len, ", %llu uncached",
                            (unsigned long long)st->rcache_uncached);
  if (st->rcache_evicted && len < cap)
    snprintf(buf + len, cap - len, ", %llu evicted",
             (unsigned long long)st->rcache_evicted);
  return 1;
}

int top_fetch_line(const stoke_stats *st, char *buf, size_t cap) {
  if (!st->fetch_remote) return 0;
  char rate[24], p50[24], p95[24];
  fmt_rate(st->fetch_bytes_per_s, rate, sizeof rate);
  fmt_ms(st->fetch_latency_p50_ms, p50, sizeof p50);
  fmt_ms(st->fetch_latency_p95_ms, p95, sizeof p95);
  snprintf(buf, cap,
           "fetch: %s, p50 %s, p95 %s, %llu retr%s, %llu throttled",
           rate, p50, p95, (unsigned long long)st->fetch_retries,
           st->fetch_retries == 1 ? "y" : "ies",
           (unsigned long long)st->fetch_throttled);
  return 1;
}
