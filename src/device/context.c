/* context.c — making the device's primary context current on the calling
** thread, around every CUDA call (device.h). */
#include "device/device.h"

int stoke__dev_enter(const stoke__dev *d, char *err, size_t cap) {
  CUresult rc = d->cu->cuCtxPushCurrent(d->ctx);
  return rc ? stoke__cuda_errf(d->cu, err, cap, "cuCtxPushCurrent", rc) : 0;
}

void stoke__dev_leave(const stoke__dev *d) {
  CUcontext c;
  d->cu->cuCtxPopCurrent(&c);
}
