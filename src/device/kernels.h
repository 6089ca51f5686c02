/* kernels.h — the arithmetic of stoke's device kernels, written once in C
** that both nvcc (kernels.cu, for the GPU) and a plain C compiler (the
** test shim's reference launches, tests/shim/) compile, so that what the
** shim checks is the code the GPU runs (internal).
**
** Normalisation on the device is a table lookup: the host builds the
** table with the transform layer's own arithmetic
** (stoke__tf_norm_table), and each output element is the table's value of
** its u8 input in its channel.  The output is therefore the host path's,
** bit for bit, f32 and f16 alike, whatever the GPU's float rounding. */
#ifndef STOKE_DEVICE_KERNELS_H
#define STOKE_DEVICE_KERNELS_H

#ifdef __CUDACC__
#define STOKE__HD __host__ __device__ __forceinline__
typedef unsigned char stoke__k_u8;
typedef unsigned short stoke__k_u16;
typedef unsigned int stoke__k_u32;
#else
#include <stdint.h>
#define STOKE__HD static inline
typedef uint8_t stoke__k_u8;
typedef uint16_t stoke__k_u16;
typedef uint32_t stoke__k_u32;
#endif

/* Entry points of the module (extern "C" in kernels.cu):
**
**   stoke_normalize_u8(const u8 *in, void *out, u32 n, u32 plane, int hwc,
**                      int f16, const stoke__norm_lut *lut)
**     out[i] = lut value of in[i] in its channel, for i < n; the layout is
**     the batch's: CHW planes of `plane` = H * W pixels, or HWC.
**   stoke_spin_ns(unsigned long long ns)
**     one thread that spins until ns of the GPU's global timer passed: a
**     simulated training step of known length on the stream it runs on.
**
** The argument lists are the launch's parameter arrays (cuLaunchKernel):
** change them here, in kernels.cu and in tests/shim/cuda_shim.c together. */
#define STOKE__K_NORMALIZE "stoke_normalize_u8"
/* The most elements one normalisation takes: its 32-bit index plus the
** grid's stride stays below 2^32. */
#define STOKE__NORM_MAX_ELEMS (1u << 31)
#define STOKE__K_SPIN "stoke_spin_ns"

/* The table (stoke__norm_lut) is the transform layer's type: the
** source layer fills it, below this one. */
#include "transform/u8_form.h"

/* The channel of element i of a batch: batches are whole samples of
** 3 x plane (CHW) or plane x 3 (HWC) elements. */
STOKE__HD int stoke__norm_channel(stoke__k_u32 i, stoke__k_u32 plane,
                                  int hwc) {
  return hwc ? (int)(i % 3u) : (int)((i / plane) % 3u);
}

/* Element i of the normalisation. */
STOKE__HD void stoke__norm_elem(const stoke__k_u8 *in, void *out,
                                stoke__k_u32 i, stoke__k_u32 plane, int hwc,
                                int f16, const stoke__norm_lut *lut) {
  int c = stoke__norm_channel(i, plane, hwc);
  stoke__k_u8 v = in[i];
  if (f16)
    ((stoke__k_u16 *)out)[i] = lut->f16[c][v];
  else
    ((float *)out)[i] = lut->f32[c][v];
}

#endif /* STOKE_DEVICE_KERNELS_H */
