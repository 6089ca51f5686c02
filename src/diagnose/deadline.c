/* deadline.c — does a training run of N epochs fit in its window?  (A job
** that misses its nightly completion window.)  Pure arithmetic on an epoch
** time and its error bar; the profile's analysis (profile.c) gives it
** the measured epoch at the current configuration and the model's
** prediction at the knee, each with its own error. */
#include "core/core.h"

#include <string.h>

int stoke_deadline_check(int64_t epoch_ns, unsigned epochs,
                         int64_t deadline_ns, double error,
                         stoke_deadline *out) {
  if (!out || epoch_ns <= 0 || deadline_ns <= 0 || epochs == 0 ||
      !(error >= 0 && error < 1))
    return stoke__set_tls_error(STOKE_EINVAL,
                                "deadline: bad arguments (epoch %lld ns, %u "
                                "epochs, deadline %lld ns, error %g)",
                                (long long)epoch_ns, epochs,
                                (long long)deadline_ns, error);
  memset(out, 0, sizeof *out);
  double total = (double)epoch_ns * (double)epochs;
  out->epoch_ns = epoch_ns;
  out->total_ns = total > 9.2e18 ? INT64_MAX : (int64_t)total;
  double lo = total * (1 - error), hi = total * (1 + error);
  out->low_ns = lo > 9.2e18 ? INT64_MAX : (int64_t)lo;
  out->high_ns = hi > 9.2e18 ? INT64_MAX : (int64_t)hi;
  out->error = error;
  out->deadline_ns = deadline_ns;
  out->epochs_in_window = (double)deadline_ns / (double)epoch_ns;
  out->verdict = hi <= (double)deadline_ns  ? STOKE_DEADLINE_FITS
                 : lo > (double)deadline_ns ? STOKE_DEADLINE_MISSES
                                            : STOKE_DEADLINE_UNCERTAIN;
  return 0;
}

const char *stoke_deadline_verdict_name(int verdict) {
  switch (verdict) {
  case STOKE_DEADLINE_FITS: return "fits";
  case STOKE_DEADLINE_MISSES: return "misses";
  case STOKE_DEADLINE_UNCERTAIN: return "uncertain";
  default: return "unknown";
  }
}
