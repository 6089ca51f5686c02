/* cuda_dl.c — the CUDA driver API, opened with dlopen at run time.
**
** stoke is never linked against CUDA: it builds where no toolkit is
** installed and runs unchanged where no driver is.  When a device is asked
** for, the driver library (libcuda.so.1 unless told otherwise) is opened
** here, every entry point of cuda_api.h is looked up by the symbol the
** toolkit's headers bind it to (cuMemAlloc is cuMemAlloc_v2, ...), and
** cuInit(0) is called.  What goes wrong becomes one line for the report:
** the dlerror text, the missing symbol, or cuInit's error.
**
** The tables are the library's one piece of global state (STYLE.md,
** threading): one per library path, loaded once under `tables_mu`, never
** freed or closed (unloading a CUDA driver under live contexts is not
** supported by CUDA), so a pointer to a table stays valid for the life of
** the process.  A library that fails is not remembered: the next loader
** tries again (and gets the same answer from a real driver, whose cuInit
** failure is sticky). */
#define _POSIX_C_SOURCE 200809L
#include "core/core.h"
#include "os/os.h"
#include "stats/stats.h"
#include "source/source.h"
#include "device/cuda_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each entry point, the symbol to load it from and, for entry points that
** gained a _v2 in later drivers, the older symbol to fall back on. */
typedef struct cuda_sym {
  size_t offset;
  const char *symbol;
  const char *fallback;
} cuda_sym;

#define SYM(field, symbol, fallback) \
  {offsetof(stoke__cuda, field), symbol, fallback}
static const cuda_sym k_syms[] = {
    SYM(cuGetErrorName, "cuGetErrorName", NULL),
    SYM(cuGetErrorString, "cuGetErrorString", NULL),
    SYM(cuInit, "cuInit", NULL),
    SYM(cuDriverGetVersion, "cuDriverGetVersion", NULL),
    SYM(cuDeviceGetCount, "cuDeviceGetCount", NULL),
    SYM(cuDeviceGet, "cuDeviceGet", NULL),
    SYM(cuDeviceGetName, "cuDeviceGetName", NULL),
    SYM(cuDeviceTotalMem, "cuDeviceTotalMem_v2", NULL),
    SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL),
    SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", NULL),
    SYM(cuCtxPushCurrent, "cuCtxPushCurrent_v2", NULL),
    SYM(cuCtxPopCurrent, "cuCtxPopCurrent_v2", NULL),
    SYM(cuMemGetInfo, "cuMemGetInfo_v2", NULL),
    SYM(cuMemHostAlloc, "cuMemHostAlloc", NULL),
    SYM(cuMemFreeHost, "cuMemFreeHost", NULL),
    SYM(cuMemAlloc, "cuMemAlloc_v2", NULL),
    SYM(cuMemFree, "cuMemFree_v2", NULL),
    SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2", NULL),
    SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", NULL),
    SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", NULL),
    SYM(cuStreamCreate, "cuStreamCreate", NULL),
    SYM(cuStreamDestroy, "cuStreamDestroy_v2", NULL),
    SYM(cuStreamSynchronize, "cuStreamSynchronize", NULL),
    SYM(cuStreamWaitEvent, "cuStreamWaitEvent", NULL),
    SYM(cuEventCreate, "cuEventCreate", NULL),
    SYM(cuEventDestroy, "cuEventDestroy_v2", NULL),
    SYM(cuEventRecord, "cuEventRecord", NULL),
    SYM(cuEventQuery, "cuEventQuery", NULL),
    SYM(cuEventSynchronize, "cuEventSynchronize", NULL),
    /* CUDA 12.8 added _v2 (same signature); older drivers have only the
    ** first. */
    SYM(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
    SYM(cuModuleLoadData, "cuModuleLoadData", NULL),
    SYM(cuModuleUnload, "cuModuleUnload", NULL),
    SYM(cuModuleGetFunction, "cuModuleGetFunction", NULL),
    SYM(cuLaunchKernel, "cuLaunchKernel", NULL),
};
#undef SYM

typedef struct table_node {
  stoke__cuda cu;
  struct table_node *next;
} table_node;

static pthread_mutex_t tables_mu = PTHREAD_MUTEX_INITIALIZER;
static table_node *tables; /* protected by tables_mu; nodes never freed */

const char *stoke__cuda_error_name(const stoke__cuda *cu, CUresult rc) {
  const char *s = NULL;
  if (cu && cu->cuGetErrorName && cu->cuGetErrorName(rc, &s) == 0 && s)
    return s;
  return "CUDA error";
}

int stoke__cuda_errf(const stoke__cuda *cu, char *err, size_t cap,
                     const char *call, CUresult rc) {
  const char *text = NULL;
  if (!cu || !cu->cuGetErrorString || cu->cuGetErrorString(rc, &text) != 0)
    text = NULL;
  return stoke__errf(err, cap, STOKE_EDEVICE, "%s failed: %s (%d)%s%s", call,
                     stoke__cuda_error_name(cu, rc), rc, text ? ": " : "",
                     text ? text : "");
}

/* dlopen, look up every symbol and cuInit(0).  0, or STOKE_ENOTSUP with
** the reason in err. */
static int load(stoke__cuda *cu, const char *path, char *err, size_t cap) {
  snprintf(cu->path, sizeof cu->path, "%s", path);
  dlerror();
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char *why = dlerror();
    return stoke__errf(err, cap, STOKE_ENOTSUP, "no CUDA driver library: %s",
                       why ? why : path);
  }
  for (size_t i = 0; i < sizeof k_syms / sizeof k_syms[0]; i++) {
    void *f = dlsym(dl, k_syms[i].symbol);
    if (!f && k_syms[i].fallback) f = dlsym(dl, k_syms[i].fallback);
    if (!f) /* the handle stays open: closing a driver is unsafe */
      return stoke__errf(
          err, cap, STOKE_ENOTSUP,
          "CUDA driver too old: %s has no %s (stoke needs CUDA %d.%d or "
          "newer)", path, k_syms[i].symbol, STOKE__CUDA_MIN_DRIVER / 1000,
          STOKE__CUDA_MIN_DRIVER % 1000 / 10);
    /* A function pointer from dlsym's void *: POSIX guarantees this. */
    memcpy((char *)cu + k_syms[i].offset, &f, sizeof f);
  }
  CUresult rc = cu->cuInit(0);
  if (rc != 0) {
    char e[200];
    stoke__cuda_errf(cu, e, sizeof e, "cuInit", rc);
    return stoke__errf(err, cap, STOKE_ENOTSUP,
                       "CUDA driver %s unusable: %s", path, e);
  }
  return 0;
}

int stoke__cuda_open(const char *path, const stoke__cuda **out, char *err,
                     size_t cap) {
  *out = NULL;
  if (!path || !*path) path = "libcuda.so.1";
  pthread_mutex_lock(&tables_mu);
  table_node *n = tables;
  while (n && strcmp(n->cu.path, path) != 0) n = n->next;
  int rc = 0;
  if (!n) {
    /* Not through a loader's allocator: the table outlives loaders. */
    n = calloc(1, sizeof *n);
    if (!n)
      rc = stoke__errf(err, cap, STOKE_ENOMEM, "cuda: out of memory");
    else if ((rc = load(&n->cu, path, err, cap)) != 0) {
      free(n);
      n = NULL;
    } else {
      n->next = tables;
      tables = n;
    }
  }
  pthread_mutex_unlock(&tables_mu);
  /* A published node is never written again: reading it unlocked is safe. */
  if (n) *out = &n->cu;
  return rc;
}
