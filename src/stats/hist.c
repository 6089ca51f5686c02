/* hist.c — log-bucket duration histograms (the layout: stats/stats.h).
** A value v >= 32 with top bit e lands in octave e - 4, sub-bucket given by
** the 5 bits below the top bit; below 32 each value has its own bucket. */
#include "stats/stats.h"

#include <string.h>

size_t stoke__hist_bucket_of(uint64_t v) {
  if (v < STOKE__HIST_SUB) return (size_t)v;
  int e = 63 - __builtin_clzll(v); /* >= 5 */
  if (e - 4 > STOKE__HIST_OCTAVES) return STOKE__HIST_BUCKETS - 1;
  size_t sub = (size_t)(v >> (e - 5)) & (STOKE__HIST_SUB - 1);
  return (size_t)(e - 4) * STOKE__HIST_SUB + sub;
}

/* The middle of bucket b's value range. */
uint64_t stoke__hist_bucket_mid(size_t b) {
  if (b < STOKE__HIST_SUB) return b;
  size_t e = b / STOKE__HIST_SUB + 4, sub = b % STOKE__HIST_SUB;
  uint64_t lo = ((uint64_t)(STOKE__HIST_SUB + sub)) << (e - 5);
  uint64_t width = (uint64_t)1 << (e - 5);
  return lo + width / 2;
}

void stoke__hist_add(stoke__hist *h, uint64_t v) {
  stoke__counter_add(&h->bucket[stoke__hist_bucket_of(v)], 1);
  stoke__counter_add(&h->count, 1);
  stoke__counter_add(&h->sum, v);
  if (v > stoke__counter_get(&h->max))
    atomic_store_explicit(&h->max, v, memory_order_relaxed);
}

void stoke__hist_add_n(stoke__hist *h, uint64_t v, uint64_t n) {
  if (n == 0) return;
  stoke__counter_add(&h->bucket[stoke__hist_bucket_of(v)], n);
  stoke__counter_add(&h->count, n);
  stoke__counter_add(&h->sum, v * n);
  if (v > stoke__counter_get(&h->max))
    atomic_store_explicit(&h->max, v, memory_order_relaxed);
}

void stoke__hist_add_shared(stoke__hist *h, uint64_t v) {
  atomic_fetch_add_explicit(&h->bucket[stoke__hist_bucket_of(v)], 1,
                            memory_order_relaxed);
  atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
  uint64_t m = atomic_load_explicit(&h->max, memory_order_relaxed);
  while (v > m && !atomic_compare_exchange_weak_explicit(
                      &h->max, &m, v, memory_order_relaxed,
                      memory_order_relaxed)) {
  }
}

void stoke__hist_read(const stoke__hist *h, stoke__hist_snap *acc) {
  for (size_t i = 0; i < STOKE__HIST_BUCKETS; i++)
    acc->bucket[i] += stoke__counter_get(&h->bucket[i]);
  acc->count += stoke__counter_get(&h->count);
  acc->sum += stoke__counter_get(&h->sum);
  uint64_t m = stoke__counter_get(&h->max);
  if (m > acc->max) acc->max = m;
}

/* a -= b.  The maximum cannot be subtracted; it stays a's, which can only
** overstate the tail by a value seen during warm-up. */
void stoke__hist_sub(stoke__hist_snap *a, const stoke__hist_snap *b) {
  for (size_t i = 0; i < STOKE__HIST_BUCKETS; i++) a->bucket[i] -= b->bucket[i];
  a->count -= b->count;
  a->sum -= b->sum;
}

uint64_t stoke__hist_quantile(const stoke__hist_snap *h, double q) {
  if (h->count == 0) return 0;
  if (q <= 0) q = 0;
  if (q >= 1) return h->max;
  /* The smallest value with at least ceil(q * count) values at or below. */
  uint64_t rank = (uint64_t)(q * (double)h->count);
  if ((double)rank < q * (double)h->count) rank++;
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (size_t i = 0; i < STOKE__HIST_BUCKETS; i++) {
    seen += h->bucket[i];
    if (seen >= rank) {
      uint64_t mid = stoke__hist_bucket_mid(i);
      return mid > h->max ? h->max : mid;
    }
  }
  return h->max;
}

void stoke__hist_dist(const stoke__hist_snap *h, stoke_dist *out) {
  memset(out, 0, sizeof *out);
  out->count = h->count;
  out->total_ns = (int64_t)h->sum;
  if (h->count == 0) return;
  out->mean_ns = (int64_t)(h->sum / h->count);
  out->p50_ns = (int64_t)stoke__hist_quantile(h, 0.50);
  out->p95_ns = (int64_t)stoke__hist_quantile(h, 0.95);
  out->p99_ns = (int64_t)stoke__hist_quantile(h, 0.99);
  out->max_ns = (int64_t)h->max;
}

/* The value range of bucket b: [lo, hi). */
void stoke__hist_bucket_range(size_t b, uint64_t *lo, uint64_t *hi) {
  if (b < STOKE__HIST_SUB) {
    *lo = b;
    *hi = b + 1;
    return;
  }
  size_t e = b / STOKE__HIST_SUB + 4, sub = b % STOKE__HIST_SUB;
  *lo = ((uint64_t)(STOKE__HIST_SUB + sub)) << (e - 5);
  *hi = *lo + ((uint64_t)1 << (e - 5));
}

size_t stoke__hist_buckets(const stoke__hist *h, stoke_hist_bucket *out,
                           size_t cap) {
  size_t n = 0;
  for (size_t b = 0; b < STOKE__HIST_BUCKETS; b++) {
    uint64_t c = stoke__counter_get(&h->bucket[b]);
    if (c == 0) continue;
    if (out && n < cap) {
      uint64_t lo, hi;
      stoke__hist_bucket_range(b, &lo, &hi);
      out[n] = (stoke_hist_bucket){(int64_t)lo, (int64_t)hi, c};
    }
    n++;
  }
  return n;
}
