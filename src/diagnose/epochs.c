/* epochs.c — a run's measured epochs summed up, and the deadline they
** imply: the mean epoch, and its spread as the error bar.  Warm-up epochs
** are left out (they fill caches, start threads, tune). */
#include "stoke.h"

int stoke_epochs_summarize(const stoke_epoch_stats *epochs, size_t n,
                           stoke_epoch_summary *out) {
  if (!out || (!epochs && n)) return STOKE_EINVAL;
  int64_t wall = 0;
  uint64_t samples = 0;
  out->n_measured = 0;
  for (size_t i = 0; i < n; i++) {
    if (epochs[i].warmup) continue;
    out->n_measured++;
    wall += epochs[i].wall_ns;
    samples += epochs[i].samples;
  }
  out->epoch_s =
      out->n_measured ? (double)wall / 1e9 / (double)out->n_measured : 0;
  out->samples_per_s = wall > 0 ? (double)samples / ((double)wall / 1e9) : 0;
  out->measured_s = out->epoch_s * (double)out->n_measured;
  return 0;
}

int stoke_deadline_measured(const stoke_epoch_stats *epochs, size_t n,
                            unsigned train_epochs, int64_t deadline_ns,
                            int64_t fallback_epoch_ns, stoke_deadline *out) {
  stoke_epoch_summary sum;
  int rc = stoke_epochs_summarize(epochs, n, &sum);
  if (rc < 0) return rc;
  double lo = 0, hi = 0;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (epochs[i].warmup) continue;
    double s = (double)epochs[i].wall_ns / 1e9;
    lo = k == 0 || s < lo ? s : lo;
    hi = k == 0 || s > hi ? s : hi;
    k++;
  }
  /* The spread of the measured epochs, either side of their mean: at least
  ** 5% (two epochs alike say little), at most 90%. */
  double mean = sum.epoch_s, spread = 0.05;
  if (mean > 0 && k > 1) {
    double e = hi / mean - 1 > 1 - lo / mean ? hi / mean - 1 : 1 - lo / mean;
    if (e > spread) spread = e < 0.9 ? e : 0.9;
  }
  int64_t now_ns = (int64_t)(mean * 1e9);
  if (now_ns <= 0) now_ns = fallback_epoch_ns;
  return stoke_deadline_check(now_ns, train_epochs, deadline_ns, spread, out);
}
