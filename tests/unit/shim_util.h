/* shim_util.h — the test CUDA driver (tests/shim/cuda_shim.c) from a test:
** its control calls and the few driver calls a test makes itself, found
** with dlopen of the same library stoke loads (STOKE_TEST_SHIM, a path the
** build gives), so that both see one driver state.  Header-only; include
** after test_util.h. */
#ifndef STOKE_SHIM_UTIL_H
#define STOKE_SHIM_UTIL_H

#include <dlfcn.h>

#include "device/cuda_api.h"

typedef struct shim {
  void *dl;
  int (*set)(const char *key, long long v);
  int (*fail_call)(const char *symbol, long long nth, int code);
  void (*reset)(void);
  long long (*get)(const char *key);
  int (*hold)(CUstream s);
  void (*unhold)(void);
  void (*wait_holding)(long long n);
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxPushCurrent)(CUcontext);
  CUresult (*cuCtxPopCurrent)(CUcontext *);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
  CUresult (*cuMemFreeHost)(void *);
  CUcontext ctx;
} shim;

static shim g_shim;

#define SHIM_SYM(field, name)                                                 \
  do {                                                                        \
    void *f_ = dlsym(g_shim.dl, name);                                        \
    if (!f_) fail_msg("shim: no %s in %s", name, STOKE_TEST_SHIM);            \
    memcpy(&g_shim.field, &f_, sizeof f_);                                    \
  } while (0)

/* Open the shim (once), with its defaults put back, a current context on
** this thread and the counters zeroed. */
static inline shim *shim_open(void) {
  if (!g_shim.dl) {
    g_shim.dl = dlopen(STOKE_TEST_SHIM, RTLD_NOW | RTLD_LOCAL);
    if (!g_shim.dl) fail_msg("dlopen %s: %s", STOKE_TEST_SHIM, dlerror());
    SHIM_SYM(set, "stoke_shim_set");
    SHIM_SYM(fail_call, "stoke_shim_fail");
    SHIM_SYM(reset, "stoke_shim_reset");
    SHIM_SYM(get, "stoke_shim_get");
    SHIM_SYM(hold, "stoke_shim_hold");
    SHIM_SYM(unhold, "stoke_shim_unhold");
    SHIM_SYM(wait_holding, "stoke_shim_wait_holding");
    SHIM_SYM(cuInit, "cuInit");
    SHIM_SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SHIM_SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    SHIM_SYM(cuCtxPushCurrent, "cuCtxPushCurrent_v2");
    SHIM_SYM(cuCtxPopCurrent, "cuCtxPopCurrent_v2");
    SHIM_SYM(cuMemAlloc, "cuMemAlloc_v2");
    SHIM_SYM(cuMemFree, "cuMemFree_v2");
    SHIM_SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    SHIM_SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    SHIM_SYM(cuStreamCreate, "cuStreamCreate");
    SHIM_SYM(cuStreamDestroy, "cuStreamDestroy_v2");
    SHIM_SYM(cuStreamSynchronize, "cuStreamSynchronize");
    SHIM_SYM(cuMemHostAlloc, "cuMemHostAlloc");
    SHIM_SYM(cuMemFreeHost, "cuMemFreeHost");
    if (g_shim.cuInit(0) != 0) fail_msg("shim: cuInit failed");
    if (g_shim.cuDevicePrimaryCtxRetain(&g_shim.ctx, 0) != 0 ||
        g_shim.cuCtxPushCurrent(g_shim.ctx) != 0)
      fail_msg("shim: no context");
  }
  g_shim.reset();
  g_shim.set("devices", 1);
  g_shim.set("driver_version", 13000);
  g_shim.set("delay_us", 100);
  g_shim.set("total_bytes", 16LL << 30);
  g_shim.set("copy_gbps", 0);
  g_shim.set("copy_us", 0);
  return &g_shim;
}

/* Nothing of stoke's is left in the driver: every allocation, stream,
** event and module given back.  `streams` and `device` are what the test
** itself holds. */
static inline void shim_check_clean(long long streams, long long device) {
  shim *s = &g_shim;
  TU_CHECK(s->get("pinned") == 0, "%lld page-locked buffers left",
           s->get("pinned"));
  TU_CHECK(s->get("device") == device, "%lld device buffers left, want %lld",
           s->get("device"), device);
  TU_CHECK(s->get("streams") == streams, "%lld streams left, want %lld",
           s->get("streams"), streams);
  TU_CHECK(s->get("events") == 0, "%lld events left", s->get("events"));
  TU_CHECK(s->get("modules") == 0, "%lld modules left", s->get("modules"));
  TU_CHECK(s->get("ctx_refs") == 1, "primary context refs %lld, want 1 (the "
           "test's)", s->get("ctx_refs"));
}

/* Nothing was read while being written, no host buffer changed under its
** copy, no address was bad. */
static inline void shim_check_ordering(void) {
  shim *s = &g_shim;
  TU_CHECK(s->get("poison_reads") == 0,
           "%lld reads saw poison: a buffer was read while a copy or kernel "
           "could still write it", s->get("poison_reads"));
  TU_CHECK(s->get("changed_sources") == 0,
           "%lld host buffers changed before their copy ran",
           s->get("changed_sources"));
  TU_CHECK(s->get("bad_address") == 0, "%lld bad addresses",
           s->get("bad_address"));
}

/* Read n bytes of device memory at dptr through stream s (ordered after
** what s waits on) into dst; synchronises s. */
static inline void shim_read(void *dst, const void *dptr, size_t n,
                             CUstream s) {
  TU_CHECK(g_shim.cuMemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)dptr, n,
                                    s) == 0,
           "cuMemcpyDtoHAsync of %zu bytes at %p failed", n, dptr);
  TU_CHECK(g_shim.cuStreamSynchronize(s) == 0, "cuStreamSynchronize");
}

#endif /* STOKE_SHIM_UTIL_H */
