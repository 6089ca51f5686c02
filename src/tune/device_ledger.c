/* device_ledger.c — the device memory ledger of a training step.
**
** A simplified budget: what stays resident on the accelerator is
** the fixed state (weights, gradients, optimizer moments) plus activations
** that grow linearly with the microbatch.  A reserve share of the device is
** kept free for the allocator's fragmentation, the CUDA context and library
** workspaces.  Integer bytes throughout so that the boundary is exact: 3.2 GB
** fixed, 0.34 GB a sample, 24 GB and 10% reserve must say 54, not
** 54.0000001 or 53. */
#include "core/core.h"

#include <math.h>

int stoke_device_ledger_compute(stoke_device_ledger *l) {
  if (!l) return stoke__set_tls_error(STOKE_EINVAL, "device ledger: NULL");
  l->reserve_bytes = l->usable_bytes = l->max_microbatch = 0;
  if (l->device_bytes == 0)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "device ledger: device memory is 0");
  if (l->per_sample_bytes == 0)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "device ledger: activation bytes per sample "
                                "is 0 (the microbatch would be unbounded)");
  if (!(l->reserve_frac >= 0.0 && l->reserve_frac < 1.0))
    return stoke__set_tls_error(STOKE_EINVAL,
                                "device ledger: reserve %g is outside [0, 1)",
                                l->reserve_frac);
  /* Rounded to the byte: 10% of 24e9 is 2.4e9 exactly, not one more. */
  double r = nearbyint((double)l->device_bytes * l->reserve_frac);
  l->reserve_bytes = r >= (double)l->device_bytes ? l->device_bytes
                                                  : (uint64_t)r;
  l->usable_bytes = l->device_bytes - l->reserve_bytes;
  if (l->fixed_bytes + l->per_sample_bytes > l->usable_bytes ||
      l->fixed_bytes + l->per_sample_bytes < l->fixed_bytes) {
    char fixed[32], usable[32], per[32];
    stoke__format_bytes(l->fixed_bytes, fixed, sizeof fixed);
    stoke__format_bytes(l->usable_bytes, usable, sizeof usable);
    stoke__format_bytes(l->per_sample_bytes, per, sizeof per);
    return stoke__set_tls_error(
        STOKE_EBUDGET,
        "device ledger: not even one sample fits: fixed %s + %s per sample "
        "exceeds the usable %s",
        fixed, per, usable);
  }
  l->max_microbatch = (l->usable_bytes - l->fixed_bytes) / l->per_sample_bytes;
  return 0;
}

uint64_t stoke_device_ledger_resident(const stoke_device_ledger *l,
                                      uint64_t n) {
  if (!l) return 0;
  if (l->per_sample_bytes && n > (UINT64_MAX - l->fixed_bytes) /
                                     l->per_sample_bytes)
    return UINT64_MAX;
  return l->fixed_bytes + n * l->per_sample_bytes;
}
