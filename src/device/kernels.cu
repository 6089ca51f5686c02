/* kernels.cu — stoke's device kernels, compiled by nvcc to PTX at build
** time (CMakeLists.txt: STOKE_WITH_CUDA_KERNELS), embedded in the library
** as text and loaded at run time with cuModuleLoadData (module.c).  The
** per-element arithmetic is kernels.h's, shared with the test shim. */
#include "kernels.h"

/* The table in shared memory: every thread of the block reads it at random
** by value, which global memory would serve far slower. */
extern "C" __global__ void stoke_normalize_u8(const unsigned char *in,
                                              void *out, unsigned int n,
                                              unsigned int plane, int hwc,
                                              int f16,
                                              const stoke__norm_lut *lut) {
  __shared__ stoke__norm_lut t;
  const unsigned int *src = (const unsigned int *)lut;
  unsigned int *dst = (unsigned int *)&t;
  for (unsigned int k = threadIdx.x; k < sizeof t / 4; k += blockDim.x)
    dst[k] = src[k];
  __syncthreads();
  unsigned int stride = blockDim.x * gridDim.x;
  for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride)
    stoke__norm_elem(in, out, i, plane, hwc, f16, &t);
}

extern "C" __global__ void stoke_spin_ns(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(500);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}
