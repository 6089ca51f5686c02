/* test_device_images.c — normalisation on the device, on the test driver.
**
** An image source whose transform ends in normalize / f32 or f16 is copied
** as u8 and normalised by the device kernel (kernels.cu), whose
** per-element code the shim runs as C (src/device/kernels.h).  The output
** must be the host path's bytes exactly, f32 and f16, CHW and HWC, for
** every worker count; the host slots must hold u8; and when the kernels'
** module does not load the host path serves, with the reason.  Skipped
** (77) in a build without nvcc, which has no kernels. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "decode_fixtures.h"
#include "test_util.h"
#include "shim_util.h"

static char root[64];

static void write_jpeg(const char *dir, const char *name, uint32_t w,
                       uint32_t h, uint64_t seed) {
  df_jpeg_opts o = {JCS_RGB, JCS_UNKNOWN, 90, 0, 2, 2, 0};
  uint8_t *px = df_pattern(w, h, seed), *buf;
  size_t n;
  df_jpeg(px, w, h, &o, &buf, &n);
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(buf, 1, n, f), n);
  fclose(f);
  free(px);
  free(buf);
}

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/stoke-devimg-XXXXXX");
  assert_non_null(mkdtemp(root));
  char d[256];
  static const char *const classes[] = {"a", "b"};
  for (int c = 0; c < 2; c++) {
    snprintf(d, sizeof d, "%s/%s", root, classes[c]);
    assert_int_equal(mkdir(d, 0755), 0);
    for (int i = 0; i < 9; i++) {
      char name[32];
      snprintf(name, sizeof name, "%d.jpg", i);
      write_jpeg(d, name, 60 + 13 * (uint32_t)i, 50 + 7 * (uint32_t)i,
                 (uint64_t)(c * 100 + i));
    }
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd);
}

/* Every delivered image field of `epochs` epochs, concatenated. */
static unsigned char *run(const char *transform, const char *device,
                          unsigned workers, size_t *n_out,
                          stoke_device_info *info, stoke_host_ledger *g) {
  stoke_image_config ic;
  stoke_image_config_init(&ic);
  ic.transform = transform;
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_images(root, &ic, &src));
  stoke_config c = tu_config(src, workers, 2, 5);
  c.shuffle = 1;
  c.seed = 3;
  c.device = device;
  c.cuda_library = STOKE_TEST_SHIM;
  stoke_loader *l = tu_loader(&c);
  stoke_source_destroy(src);
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  TU_OK(stoke_loader_device(l, info));
  if (g) {
    g->struct_size = sizeof *g;
    TU_OK(stoke_loader_ledger(l, g));
  }
  size_t cap = 1 << 20, n = 0;
  unsigned char *all = malloc(cap);
  assert_non_null(all);
  for (int e = 0; e < 2; e++)
    for (;;) {
      stoke_batch *b;
      int rc = stoke_loader_next(l, &b);
      if (rc == STOKE_END) break;
      TU_RC_L(l, rc, STOKE_OK);
      stoke_tensor t;
      TU_OK(stoke_batch_field(b, 0, &t));
      while (n + t.n_bytes > cap) all = realloc(all, cap *= 2);
      assert_non_null(all);
      if (stoke_batch_memory(b, NULL) == STOKE_MEMORY_CUDA)
        shim_read(all + n, t.data, t.n_bytes, NULL);
      else
        memcpy(all + n, t.data, t.n_bytes);
      n += t.n_bytes;
      stoke_batch_release(b);
    }
  stoke_loader_destroy(l);
  *n_out = n;
  return all;
}

static void test_device_normalize_is_the_host_path(void **state) {
  (void)state;
  shim *s = shim_open();
  static const char *const specs[] = {
      "random-resized-crop=24,flip,normalize=imagenet,chw,f32",
      "random-resized-crop=16x20,flip,normalize=imagenet,hwc,f16",
      "resize=30,center-crop=22,normalize=0.5/0.25,chw,f16",
      "center-crop=31,hwc,f32", /* ToTensor alone: x / 255 */
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
    for (unsigned w = 0; w < 3; w += 2) {
      size_t nh, nd;
      stoke_device_info ih, id;
      stoke_host_ledger gh, gd;
      unsigned char *host = run(specs[i], NULL, w, &nh, &ih, &gh);
      long long kernels = s->get("kernels");
      unsigned char *dev = run(specs[i], "cuda", w, &nd, &id, &gd);
      TU_CHECK(id.backend == STOKE_BACKEND_CUDA && id.normalize_on_device,
               "%s: %s | %s", specs[i], id.reason, id.normalize);
      TU_CONTAINS(id.normalize, "device: field 0 copied as u8");
      TU_CHECK(s->get("kernels") > kernels, "%s: no kernel ran", specs[i]);
      /* The host slot holds u8: a quarter (f32) or half (f16) of it. */
      TU_CHECK(gd.batch_bytes < gh.batch_bytes, "%s: host slot %llu bytes "
               "with the device normalising, %llu without", specs[i],
               (unsigned long long)gd.batch_bytes,
               (unsigned long long)gh.batch_bytes);
      TU_CHECK(nh == nd && memcmp(host, dev, nh) == 0,
               "%s, W %u: the device's output differs from the host path's",
               specs[i], w);
      free(host);
      free(dev);
    }
  shim_check_ordering();
  shim_check_clean(0, 0);
}

/* The normalisation table reaches device memory before the first kernel
** reads it.  The shim lands a cuMemcpyHtoD from pageable memory on the
** legacy stream only later, as a driver may, and here not until the test
** lets it: a table uploaded that way is poison to the kernel on the copy
** stream, which does not wait for the legacy stream. */
static void test_table_lands_before_the_first_kernel(void **state) {
  (void)state;
  const char *spec = "random-resized-crop=24,normalize=imagenet,chw,f32";
  size_t nh;
  stoke_device_info hi;
  unsigned char *host = run(spec, NULL, 1, &nh, &hi, NULL);
  shim *s = shim_open();
  s->set("hold_pageable_dma", 1);
  stoke_image_config ic;
  stoke_image_config_init(&ic);
  ic.transform = spec;
  stoke_source *src = NULL;
  TU_OK(stoke_source_create_images(root, &ic, &src));
  stoke_config c = tu_config(src, 1, 2, 5);
  c.shuffle = 1;
  c.seed = 3;
  c.device = "cuda";
  c.cuda_library = STOKE_TEST_SHIM;
  stoke_loader *l = tu_loader(&c);
  stoke_source_destroy(src);
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  stoke_tensor t;
  TU_OK(stoke_batch_field(b, 0, &t));
  TU_CHECK(t.n_bytes <= nh, "a batch of %zu bytes", t.n_bytes);
  /* Read on a stream of the test's own (the legacy one is held). */
  CUstream rs;
  TU_CHECK(s->cuStreamCreate(&rs, STOKE__CU_STREAM_NON_BLOCKING) == 0,
           "cuStreamCreate");
  TU_OK(stoke_batch_wait_stream(b, (uintptr_t)rs));
  unsigned char *got = malloc(t.n_bytes);
  assert_non_null(got);
  shim_read(got, t.data, t.n_bytes, rs);
  long long poisoned = s->get("poison_reads");
  stoke_batch_release(b);
  s->unhold();
  stoke_loader_destroy(l);
  TU_CHECK(s->cuStreamDestroy(rs) == 0, "cuStreamDestroy");
  s->set("hold_pageable_dma", 0);
  TU_CHECK(poisoned == 0, "the kernel read the table before it landed "
                          "(%lld poisoned reads)", poisoned);
  TU_CHECK(memcmp(got, host, t.n_bytes) == 0,
           "the first device batch differs from the host path's");
  free(got);
  free(host);
  shim_check_clean(0, 0);
}

/* The module does not load: the host normalises, says why, and the
** output is the same. */
static void test_module_failure_falls_back(void **state) {
  (void)state;
  shim *s = shim_open();
  const char *spec = "random-resized-crop=24,normalize=imagenet,chw,f32";
  size_t nh, nd;
  stoke_device_info ih, id;
  unsigned char *host = run(spec, NULL, 1, &nh, &ih, NULL);
  s->fail_call("cuModuleLoadData", 1, 222);
  unsigned char *dev = run(spec, "cuda", 1, &nd, &id, NULL);
  TU_CHECK(id.backend == STOKE_BACKEND_CUDA && !id.normalize_on_device,
           "normalised on the device without its module");
  TU_CONTAINS(id.normalize, "host: the kernels did not load: "
                            "cuModuleLoadData failed: "
                            "CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222)");
  TU_CHECK(nh == nd && memcmp(host, dev, nh) == 0, "outputs differ");
  free(host);
  free(dev);
  shim_check_clean(0, 0);
}

/* A driver below the kernels' floor (CUDA 13's PTX ISA 9.0 needs 13.0)
** but above the copies' (11.0): the copies run on the device, the host
** normalises, and the reason names both versions. */
static void test_old_driver_names_the_kernel_floor(void **state) {
  (void)state;
  shim *s = shim_open();
  const char *spec = "random-resized-crop=24,normalize=imagenet,chw,f32";
  size_t nh, nd;
  stoke_device_info ih, id;
  unsigned char *host = run(spec, NULL, 1, &nh, &ih, NULL);
  s->set("driver_version", 12040);
  unsigned char *dev = run(spec, "cuda", 1, &nd, &id, NULL);
  TU_CHECK(id.backend == STOKE_BACKEND_CUDA && !id.normalize_on_device,
           "backend %d, normalised on the device %d", id.backend,
           id.normalize_on_device);
  TU_CONTAINS(id.normalize, "host: the kernels need CUDA driver 13.0+, "
                            "this is 12.4; they did not load: "
                            "cuModuleLoadData failed: "
                            "CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222)");
  TU_CHECK(nh == nd && memcmp(host, dev, nh) == 0, "outputs differ");
  free(host);
  free(dev);
  shim_check_clean(0, 0);
}

/* The table's upload and the kernel's launch failing are errors, named. */
static void test_normalize_call_errors(void **state) {
  (void)state;
  static const char *const calls[][2] = {
      {"cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync failed: "},
      {"cuLaunchKernel", "cuLaunchKernel failed: "}};
  for (size_t i = 0; i < 2; i++) {
    shim *s = shim_open();
    stoke_image_config ic;
    stoke_image_config_init(&ic);
    ic.transform = "center-crop=20,normalize=imagenet,chw,f32";
    stoke_source *src = NULL;
    TU_OK(stoke_source_create_images(root, &ic, &src));
    stoke_config c = tu_config(src, 1, 1, 4);
    c.device = "cuda";
    c.cuda_library = STOKE_TEST_SHIM;
    s->fail_call(calls[i][0], 1, 700);
    stoke_loader *l = NULL;
    int rc = stoke_loader_create(&c, &l);
    const char *msg = stoke_errmsg(NULL);
    stoke_batch *b = NULL;
    if (rc == 0) {
      rc = stoke_loader_next(l, &b);
      msg = stoke_errmsg(l);
    }
    TU_RC(rc, STOKE_EDEVICE);
    TU_CONTAINS(msg, calls[i][1]);
    TU_CONTAINS(msg, "CUDA_ERROR_ILLEGAL_ADDRESS (700)");
    stoke_loader_destroy(l);
    stoke_source_destroy(src);
    s->reset();
    shim_check_clean(0, 0);
  }
}

int main(void) {
#if !STOKE_TEST_HAVE_KERNELS
  return 77; /* built without nvcc: no device normalisation to test */
#endif
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_normalize_is_the_host_path),
      cmocka_unit_test(test_table_lands_before_the_first_kernel),
      cmocka_unit_test(test_module_failure_falls_back),
      cmocka_unit_test(test_old_driver_names_the_kernel_floor),
      cmocka_unit_test(test_normalize_call_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
