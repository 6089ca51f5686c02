/* cuda_api.h — the part of the CUDA driver API that stoke uses, declared
** here so that nothing of CUDA is needed to build stoke (internal).
**
** The driver (libcuda.so.1) is opened with dlopen at run time
** (cuda_dl.c) and its entry points are kept in one table of function
** pointers, stoke__cuda.  The types are the driver's ABI: opaque handles
** are pointers, CUdeviceptr is a 64-bit integer, CUresult an int.  The
** constants below are checked against the toolkit's cuda.h by
** tests/unit/test_cuda_api.c when the toolkit is installed.
**
** Every call goes through the table; no other file declares a cu*
** function. */
#ifndef STOKE_CUDA_API_H
#define STOKE_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;

/* CUresult values stoke tells apart (cuda.h's cudaError_enum). */
enum {
  STOKE__CUDA_SUCCESS = 0,
  STOKE__CUDA_ERROR_INVALID_VALUE = 1,
  STOKE__CUDA_ERROR_OUT_OF_MEMORY = 2,
  STOKE__CUDA_ERROR_NOT_INITIALIZED = 3,
  STOKE__CUDA_ERROR_STUB_LIBRARY = 34,
  STOKE__CUDA_ERROR_NO_DEVICE = 100,
  STOKE__CUDA_ERROR_INVALID_HANDLE = 400,
  STOKE__CUDA_ERROR_NOT_FOUND = 500,
  STOKE__CUDA_ERROR_NOT_READY = 600,
  STOKE__CUDA_ERROR_ILLEGAL_ADDRESS = 700
};

/* Flags (cuda.h's CUstream_flags, CUevent_flags, CU_MEMHOSTALLOC_*). */
enum {
  STOKE__CU_STREAM_NON_BLOCKING = 0x1,
  STOKE__CU_EVENT_DEFAULT = 0x0,
  STOKE__CU_EVENT_BLOCKING_SYNC = 0x1,
  STOKE__CU_EVENT_DISABLE_TIMING = 0x2,
  STOKE__CU_MEMHOSTALLOC_PORTABLE = 0x1
};

/* The oldest driver stoke accepts: CUDA 11.0, which brought
** cuDevicePrimaryCtxRelease_v2 and the _v2 entry points used below. */
#define STOKE__CUDA_MIN_DRIVER 11000

/* The oldest driver that loads the device kernels: CUDA 13's nvcc writes
** PTX ISA 9.0, which only drivers of CUDA 13.0 or newer accept (nvcc cannot
** write an older ISA than its own).  Copies need only STOKE__CUDA_MIN_DRIVER;
** below this floor the host normalises and says why. */
#define STOKE__CUDA_MIN_KERNEL_DRIVER 13000

/* The entry points, named as in cuda.h; the symbol each is loaded from
** (e.g. cuMemAlloc_v2) is listed in cuda_dl.c. */
#define STOKE__CUDA_FUNCS(X)                                                  \
  X(cuGetErrorName, (CUresult e, const char **s))                             \
  X(cuGetErrorString, (CUresult e, const char **s))                           \
  X(cuInit, (unsigned flags))                                                 \
  X(cuDriverGetVersion, (int *v))                                             \
  X(cuDeviceGetCount, (int *n))                                               \
  X(cuDeviceGet, (CUdevice * d, int ordinal))                                 \
  X(cuDeviceGetName, (char *name, int len, CUdevice d))                       \
  X(cuDeviceTotalMem, (size_t * bytes, CUdevice d))                           \
  X(cuDevicePrimaryCtxRetain, (CUcontext * c, CUdevice d))                    \
  X(cuDevicePrimaryCtxRelease, (CUdevice d))                                  \
  X(cuCtxPushCurrent, (CUcontext c))                                          \
  X(cuCtxPopCurrent, (CUcontext * c))                                         \
  X(cuMemGetInfo, (size_t * free_bytes, size_t * total_bytes))                \
  X(cuMemHostAlloc, (void **p, size_t bytes, unsigned flags))                 \
  X(cuMemFreeHost, (void *p))                                                 \
  X(cuMemAlloc, (CUdeviceptr * p, size_t bytes))                              \
  X(cuMemFree, (CUdeviceptr p))                                               \
  X(cuMemcpyHtoD, (CUdeviceptr dst, const void *src, size_t bytes))           \
  X(cuMemcpyHtoDAsync,                                                        \
    (CUdeviceptr dst, const void *src, size_t bytes, CUstream s))             \
  X(cuMemcpyDtoHAsync,                                                        \
    (void *dst, CUdeviceptr src, size_t bytes, CUstream s))                   \
  X(cuStreamCreate, (CUstream * s, unsigned flags))                           \
  X(cuStreamDestroy, (CUstream s))                                            \
  X(cuStreamSynchronize, (CUstream s))                                        \
  X(cuStreamWaitEvent, (CUstream s, CUevent e, unsigned flags))               \
  X(cuEventCreate, (CUevent * e, unsigned flags))                             \
  X(cuEventDestroy, (CUevent e))                                              \
  X(cuEventRecord, (CUevent e, CUstream s))                                   \
  X(cuEventQuery, (CUevent e))                                                \
  X(cuEventSynchronize, (CUevent e))                                          \
  X(cuEventElapsedTime, (float *ms, CUevent start, CUevent end))              \
  X(cuModuleLoadData, (CUmodule * m, const void *image))                      \
  X(cuModuleUnload, (CUmodule m))                                             \
  X(cuModuleGetFunction, (CUfunction * f, CUmodule m, const char *name))      \
  X(cuLaunchKernel,                                                           \
    (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,        \
     unsigned by, unsigned bz, unsigned shared_bytes, CUstream s,             \
     void **params, void **extra))

typedef struct stoke__cuda {
#define STOKE__CUDA_FIELD(name, args) CUresult (*name) args;
  STOKE__CUDA_FUNCS(STOKE__CUDA_FIELD)
#undef STOKE__CUDA_FIELD
  char path[256]; /* what was opened */
} stoke__cuda;

/* Open the driver at `path` (NULL: "libcuda.so.1"), load the table and
** call cuInit(0).  Tables are kept for the life of the process, one per
** path, and shared (the one global of the library, under its own lock:
** STYLE.md, threading); a library is never closed, as CUDA's is not
** meant to be.  A failure is not kept: the next call tries again.
** Returns 0 and *out, or STOKE_ENOTSUP with a one-line reason in err: the
** library could not be opened (dlerror's text), lacks an entry point (a
** driver too old), or cuInit failed (its name and code).  Thread-safe. */
int stoke__cuda_open(const char *path, const stoke__cuda **out, char *err,
                     size_t cap);

/* "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory" into
** err; returns STOKE_EDEVICE. */
int stoke__cuda_errf(const stoke__cuda *cu, char *err, size_t cap,
                     const char *call, CUresult rc);

/* The name of a CUresult ("CUDA_ERROR_NOT_READY"), from the driver when it
** knows it, else "CUDA error N".  Static storage or the driver's. */
const char *stoke__cuda_error_name(const stoke__cuda *cu, CUresult rc);

#endif /* STOKE_CUDA_API_H */
