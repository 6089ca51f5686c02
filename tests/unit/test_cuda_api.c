/* test_cuda_api.c — src/device/cuda_api.h against the CUDA toolkit.
**
** stoke declares the few driver types and constants it needs itself, so
** that it builds without CUDA.  Where the toolkit is installed, this test
** checks them against its cuda.h, and opens the toolkit's stub libcuda.so
** through stoke's own loader: every entry point must resolve (the stub
** exports them all), so the load gets as far as cuInit, which the stub
** refuses with CUDA_ERROR_STUB_LIBRARY.  Without the toolkit it is
** skipped (77). */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"
#include "device/cuda_api.h"

#if STOKE_TEST_CUDA_H
/* cuda.h's CUresult is an enum, stoke's an int: keep cuda.h's apart. */
#define CUresult cuda_h_CUresult
#include <cuda.h>
#undef CUresult

_Static_assert(CUDA_VERSION >= STOKE__CUDA_MIN_DRIVER, "toolkit");
#define SAME(ours, theirs) \
  _Static_assert((long long)(ours) == (long long)(theirs), #ours)
SAME(STOKE__CUDA_SUCCESS, CUDA_SUCCESS);
SAME(STOKE__CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE);
SAME(STOKE__CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
SAME(STOKE__CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_NOT_INITIALIZED);
SAME(STOKE__CUDA_ERROR_STUB_LIBRARY, CUDA_ERROR_STUB_LIBRARY);
SAME(STOKE__CUDA_ERROR_NO_DEVICE, CUDA_ERROR_NO_DEVICE);
SAME(STOKE__CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_HANDLE);
SAME(STOKE__CUDA_ERROR_NOT_FOUND, CUDA_ERROR_NOT_FOUND);
SAME(STOKE__CUDA_ERROR_NOT_READY, CUDA_ERROR_NOT_READY);
SAME(STOKE__CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_ILLEGAL_ADDRESS);
SAME(STOKE__CU_STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING);
SAME(STOKE__CU_EVENT_DEFAULT, CU_EVENT_DEFAULT);
SAME(STOKE__CU_EVENT_BLOCKING_SYNC, CU_EVENT_BLOCKING_SYNC);
SAME(STOKE__CU_EVENT_DISABLE_TIMING, CU_EVENT_DISABLE_TIMING);
SAME(STOKE__CU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTALLOC_PORTABLE);
_Static_assert(sizeof(CUdeviceptr) == 8, "CUdeviceptr is 64 bits");
_Static_assert(sizeof(cuda_h_CUresult) == sizeof(int), "CUresult's size");
_Static_assert(sizeof(CUdevice) == sizeof(int), "CUdevice's size");
/* The handles stoke passes around as integers (stoke_config.cuda_stream). */
_Static_assert(sizeof(CUstream) == sizeof(uintptr_t), "CUstream");
_Static_assert((uintptr_t)CU_STREAM_LEGACY == 1 &&
                   (uintptr_t)CU_STREAM_PER_THREAD == 2,
               "the special streams stoke_config.cuda_stream documents");
#endif

static void test_constants(void **state) {
  (void)state;
#if !STOKE_TEST_CUDA_H
  skip();
#endif
}

static void test_stub_resolves_every_entry_point(void **state) {
  (void)state;
#ifndef STOKE_TEST_CUDA_STUB
  skip();
#else
  const stoke__cuda *cu = NULL;
  char err[512];
  int rc = stoke__cuda_open(STOKE_TEST_CUDA_STUB, &cu, err, sizeof err);
  TU_RC(rc, STOKE_ENOTSUP);
  /* Past every dlsym: the stub's own answer to cuInit. */
  TU_CONTAINS(err, "cuInit failed: ");
  TU_CONTAINS(err, "(34)");
  TU_CHECK(strstr(err, "has no") == NULL, "a symbol is missing: %s", err);
#endif
}

int main(void) {
#if !STOKE_TEST_CUDA_H && !defined(STOKE_TEST_CUDA_STUB)
  return 77;
#endif
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_constants),
      cmocka_unit_test(test_stub_resolves_every_entry_point),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
