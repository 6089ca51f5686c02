/* module.c — stoke's device kernels (kernels.cu): the PTX nvcc made at
** build time, loaded with cuModuleLoadData, and their launches.
**
** Without nvcc at build time there is no PTX (STOKE_HAVE_KERNELS is 0):
** normalisation stays on the host and stoke_loader_gpu_sleep is
** unsupported, and the device info says so.  A module that does not load
** (a driver older than the toolkit that wrote the PTX, say) does the same,
** with the driver's error in the reason, and the kernels' driver floor
** when this driver is below it. */
#include "device/device.h"

#include <stdio.h>

#if STOKE_HAVE_KERNELS
extern const char stoke__kernels_ptx[]; /* generated: kernels_ptx.c */
#endif

bool stoke__dev_have_kernels(void) { return STOKE_HAVE_KERNELS != 0; }

int stoke__dev_module_load(stoke__dev *d, char *why, size_t cap) {
#if STOKE_HAVE_KERNELS
  char e[STOKE__ERRMSG_CAP];
  CUresult rc = d->cu->cuModuleLoadData(&d->module, stoke__kernels_ptx);
  if (rc != 0) {
    d->module = NULL;
    stoke__cuda_errf(d->cu, e, sizeof e, "cuModuleLoadData", rc);
    if (d->driver_version < STOKE__CUDA_MIN_KERNEL_DRIVER)
      /* The floor first: the reason is cut to one short line. */
      snprintf(why, cap, "the kernels need CUDA driver %d.%d+, this is "
               "%d.%d; they did not load: %s",
               STOKE__CUDA_MIN_KERNEL_DRIVER / 1000,
               STOKE__CUDA_MIN_KERNEL_DRIVER % 1000 / 10,
               d->driver_version / 1000, d->driver_version % 1000 / 10, e);
    else
      snprintf(why, cap, "the kernels did not load: %s", e);
    return -1;
  }
  rc = d->cu->cuModuleGetFunction(&d->k_norm, d->module, STOKE__K_NORMALIZE);
  if (rc == 0)
    rc = d->cu->cuModuleGetFunction(&d->k_spin, d->module, STOKE__K_SPIN);
  if (rc != 0) {
    stoke__cuda_errf(d->cu, e, sizeof e, "cuModuleGetFunction", rc);
    snprintf(why, cap, "the kernels did not load: %s", e);
    stoke__dev_module_unload(d);
    return -1;
  }
  return 0;
#else
  (void)d;
  snprintf(why, cap, "stoke was built without nvcc");
  return -1;
#endif
}

void stoke__dev_module_unload(stoke__dev *d) {
  if (d->module) d->cu->cuModuleUnload(d->module);
  d->module = NULL;
  d->k_norm = d->k_spin = NULL;
}

/* Threads per block, and blocks enough for every SM of the largest GPUs a
** few times over; the grid-stride loop covers the rest. */
#define NORM_THREADS 256
#define NORM_MAX_BLOCKS 4096

CUresult stoke__dev_launch_norm(stoke__dev *d, CUstream s, CUdeviceptr in,
                                CUdeviceptr out, uint32_t n) {
  uint32_t plane = d->form.plane;
  int hwc = d->form.hwc, f16 = d->form.dtype == STOKE_F16;
  CUdeviceptr lut = d->lut;
  void *params[] = {&in, &out, &n, &plane, &hwc, &f16, &lut};
  uint32_t blocks = (n + NORM_THREADS - 1) / NORM_THREADS;
  if (blocks > NORM_MAX_BLOCKS) blocks = NORM_MAX_BLOCKS;
  if (blocks == 0) blocks = 1;
  return d->cu->cuLaunchKernel(d->k_norm, blocks, 1, 1, NORM_THREADS, 1, 1,
                               0, s, params, NULL);
}
