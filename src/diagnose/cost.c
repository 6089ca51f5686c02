/* cost.c — what a run's time costs, and what its waiting costs.
**
** The cost is the time the run takes, per sample and per epoch, and the
** share of it the consumer (the accelerator) spends waiting for data.
** With a price both become money: an accelerator is rented by the hour
** whether it computes or waits, so the wait's share of the bill is the
** money spent while it starves. */
#include <string.h>

#include "stoke.h"

int stoke_cost_estimate(const stoke_stats *st, const stoke_epoch_summary *sum,
                        double gpu_price_per_hour, stoke_cost *out) {
  if (!st || !sum || !out) return STOKE_EINVAL;
  memset(out, 0, sizeof *out);
  double wall = sum->measured_s;
  out->steps_per_s = wall > 0 ? (double)st->steps / wall : 0;
  out->fresh_samples_per_s = wall > 0 ? (double)st->fresh_samples / wall : 0;
  out->seconds_per_sample =
      sum->samples_per_s > 0 ? 1.0 / sum->samples_per_s : 0;
  out->seconds_per_epoch = sum->epoch_s;
  out->wait_seconds_per_epoch = st->wait_ratio * sum->epoch_s;
  out->wait_share = st->wait_ratio;
  if (gpu_price_per_hour > 0) {
    double p = gpu_price_per_hour / 3600; /* per second */
    out->gpu_price_per_hour = gpu_price_per_hour;
    out->per_epoch = sum->epoch_s * p;
    out->wait_per_epoch = out->wait_seconds_per_epoch * p;
    out->per_million_samples = 1e6 * out->seconds_per_sample * p;
    out->wait_per_million_samples =
        1e6 * out->seconds_per_sample * st->wait_ratio * p;
  }
  return 0;
}
