/* test_device.c — the device stage on the test CUDA driver (tests/shim/).
**
** The shim runs each stream on its own thread with random delays, poisons
** a buffer the moment a copy or kernel may begin writing it, and checks a
** host buffer against its contents when its copy was enqueued; so these
** tests check ordering, not only values:
**  - device batches arrive intact and in order, the same bytes as the host
**    backend's (checksums per batch), for every worker count, prefetch,
**    device prefetch and order;
**  - a device slot is not rewritten before the stream that read it is done
**    (a held reader and a release on the right stream, and on a wrong one
**    as the control that the check bites);
**  - a pinned slot released with a stream is not reused before the
**    caller's copy on that stream ran (and, the control, is reused when
**    released on another stream);
**  - copies run while a step runs, with prefetch to the device, and not
**    with device_prefetch 0;
**  - a missing library, no device, an old driver fall back to host memory
**    with the reason; every CUDA call's failure surfaces with its name and
**    code; failing allocations leak nothing;
**  - the device memory ledger is checked before anything is allocated.
** Holds (stoke_shim_hold) stop a stream where a test needs it, so nothing
** here depends on timing. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>

#include "test_util.h"
#include "shim_util.h"
#include "pipeline/pipeline.h"

/* ---- helpers ------------------------------------------------------------- */

static uint64_t fnv(const void *p, size_t n, uint64_t h) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ULL;
  return h;
}

/* The bytes of every field of b, host or device, into one host buffer
** (allocated); device fields are read through the consumer's stream 0,
** after the wait next() enqueued on it. */
static unsigned char *batch_bytes(stoke_batch *b, size_t *n_out) {
  size_t total = 0;
  stoke_tensor t[STOKE_MAX_FIELDS];
  for (size_t f = 0; f < stoke_batch_n_fields(b); f++) {
    TU_OK(stoke_batch_field(b, f, &t[f]));
    total += t[f].n_bytes;
  }
  unsigned char *buf = malloc(total ? total : 1), *p = buf;
  assert_non_null(buf);
  int dev = 0;
  int mem = stoke_batch_memory(b, &dev);
  for (size_t f = 0; f < stoke_batch_n_fields(b); f++) {
    if (mem == STOKE_MEMORY_CUDA)
      shim_read(p, t[f].data, t[f].n_bytes, NULL);
    else
      memcpy(p, t[f].data, t[f].n_bytes);
    p += t[f].n_bytes;
  }
  *n_out = total;
  return buf;
}

typedef struct run_sums {
  size_t n;
  uint64_t sum[256];   /* per delivered batch, in delivery order */
  size_t number[256];
} run_sums;

/* Run `epochs` epochs of cfg; record each batch's checksum; check the
** tu_cb fields of each (the host copy of a device batch). */
static void run_epochs(stoke_config *cfg, tu_cb *cb, unsigned epochs,
                       int want_mem, run_sums *out) {
  stoke_loader *l = tu_loader(cfg);
  memset(out, 0, sizeof *out);
  for (unsigned e = 0; e < epochs; e++) {
    for (;;) {
      stoke_batch *b;
      int rc = stoke_loader_next(l, &b);
      if (rc == STOKE_END) break;
      TU_RC_L(l, rc, STOKE_OK);
      TU_CHECK(stoke_batch_memory(b, NULL) == want_mem, "batch memory %d, "
               "want %d", stoke_batch_memory(b, NULL), want_mem);
      size_t n;
      unsigned char *bytes = batch_bytes(b, &n);
      /* The tu_cb fields, checked on the host copy. */
      size_t bn = stoke_batch_size(b);
      const size_t *ix = stoke_batch_indices(b);
      const int64_t *idx = (const int64_t *)bytes;
      const int64_t *ep = (const int64_t *)(bytes + bn * 8 + bn * 16);
      for (size_t k = 0; k < bn; k++) {
        TU_CHECK(idx[k] == (int64_t)ix[k], "batch %zu sample %zu: idx %lld, "
                 "indices %zu", stoke_batch_number(b), k, (long long)idx[k],
                 ix[k]);
        TU_CHECK(ep[k] == (int64_t)stoke_batch_epoch(b), "epoch field");
      }
      TU_CHECK(out->n < 256, "too many batches");
      out->sum[out->n] = fnv(bytes, n, 1469598103934665603ULL);
      out->number[out->n++] = stoke_batch_number(b);
      free(bytes);
      stoke_batch_release(b);
    }
  }
  TU_CHECK(atomic_load(&cb->bad) == 0, "tu_cb saw bad state %d",
           atomic_load(&cb->bad));
  stoke_loader_destroy(l);
}

static stoke_config device_config(stoke_source *src, unsigned W, unsigned K,
                                  unsigned KD) {
  stoke_config c = tu_config(src, W, K, 7);
  c.device = "cuda";
  c.device_prefetch = KD;
  c.cuda_library = STOKE_TEST_SHIM;
  c.shuffle = 1;
  c.seed = 11;
  return c;
}

/* ---- batches ------------------------------------------------------------- */

static void test_batches_intact_in_order(void **state) {
  (void)state;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(61);
  stoke_source *src = tu_cb_source(cb);
  static const unsigned workers[] = {0, 1, 3};
  static const unsigned prefetch[] = {1, 3};
  static const unsigned dprefetch[] = {0, 1, 3};
  for (size_t w = 0; w < 3; w++)
    for (size_t k = 0; k < 2; k++)
      for (size_t d = 0; d < 3; d++)
        for (int order = 0; order < 2; order++) {
          stoke_config c = device_config(src, workers[w], prefetch[k],
                                         dprefetch[d]);
          c.in_order = order;
          c.trace_events = order ? 256 : 0; /* the clock stream too */
          run_sums dev, host;
          run_epochs(&c, cb, 3, STOKE_MEMORY_CUDA, &dev);
          shim_check_ordering();
          shim_check_clean(0, 0);
          c.device = NULL; /* the same run on host memory */
          run_epochs(&c, cb, 3, STOKE_MEMORY_HOST, &host);
          TU_CHECK(dev.n == host.n, "W %u K %u KD %u: %zu device batches, "
                   "%zu host", workers[w], prefetch[k], dprefetch[d], dev.n,
                   host.n);
          if (order) {
            for (size_t i = 0; i < dev.n; i++)
              TU_CHECK(dev.sum[i] == host.sum[i] &&
                           dev.number[i] == host.number[i],
                       "W %u K %u KD %u: batch %zu differs from the host "
                       "backend's", workers[w], prefetch[k], dprefetch[d],
                       i);
          } else {
            /* Out of order: the same batches, in any order within an
            ** epoch; compare the sums of checksums. */
            uint64_t a = 0, b = 0;
            for (size_t i = 0; i < dev.n; i++) {
              a += dev.sum[i];
              b += host.sum[i];
            }
            TU_CHECK(a == b, "out of order: different batches");
          }
        }
  TU_CHECK(s->get("copies") > 0, "no copy went through the shim");
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- slot reuse ---------------------------------------------------------- */

static stoke_config fast_config(stoke_source *src, unsigned W, unsigned K,
                                unsigned KD) {
  stoke_config c = device_config(src, W, K, KD);
  c.shuffle = 0;
  return c;
}

/* A device slot released on the stream that still reads it is rewritten
** only after that stream's read: the copy stream waits on the release
** event.  Released on another stream (the control), the next copy into it
** overtakes the read, and the reader sees another batch. */
static void device_slot_case(int right_stream) {
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(40);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = fast_config(src, 2, 2, 1); /* two device slots */
  stoke_loader *l = tu_loader(&c);
  CUstream u, v;
  assert_int_equal(s->cuStreamCreate(&u, STOKE__CU_STREAM_NON_BLOCKING), 0);
  assert_int_equal(s->cuStreamCreate(&v, STOKE__CU_STREAM_NON_BLOCKING), 0);
  int64_t *seen;
  assert_int_equal(s->cuMemHostAlloc((void **)&seen, 7 * 8, 0), 0);

  stoke_batch *b0, *b1, *b2;
  TU_RC_L(l, stoke_loader_next(l, &b0), STOKE_OK);
  stoke_tensor t0;
  TU_OK(stoke_batch_field(b0, TU_F_IDX, &t0));
  /* The reader: stream u, after the copy, stopped before its read.  In
  ** the control, stoke is not told that u reads the batch (a stream made to
  ** wait through stoke_batch_wait_stream is fenced at the release too): the
  ** host waits for the copy instead, on the stream next() made wait. */
  if (right_stream)
    TU_OK(stoke_batch_wait_stream(b0, (uintptr_t)u));
  else
    assert_int_equal(s->cuStreamSynchronize(NULL), 0);
  assert_int_equal(s->hold(u), 0);
  assert_int_equal(s->cuMemcpyDtoHAsync(seen, (CUdeviceptr)(uintptr_t)t0.data,
                                        t0.n_bytes, u), 0);
  size_t ix0[7]; /* the slot's indices are the next batch's once reused */
  memcpy(ix0, stoke_batch_indices(b0), sizeof ix0);
  TU_OK(stoke_batch_release_stream(b0, right_stream ? (uintptr_t)u : 0));
  /* b1 stays held, so b2 must go into b0's slot. */
  TU_RC_L(l, stoke_loader_next(l, &b1), STOKE_OK);
  TU_RC_L(l, stoke_loader_next(l, &b2), STOKE_OK);
  stoke_tensor t2;
  TU_OK(stoke_batch_field(b2, TU_F_IDX, &t2));
  TU_CHECK(t2.data == t0.data, "b2 did not reuse b0's device slot");
  long long per_batch = TU_N_FIELDS;
  if (right_stream) {
    /* b2's copy waits behind the held reader: give it every chance to
    ** run (it would within a millisecond), and it must not. */
    for (int i = 0; i < 50 && s->get("copies") < 3 * per_batch; i++)
      tu_sleep_ns(1000000);
    TU_CHECK(s->get("copies") == 2 * per_batch,
             "b2 was copied into b0's slot while the stream that reads b0 "
             "was held (%lld copies)", s->get("copies"));
  } else {
    /* Let b2's copy finish before the held read runs. */
    TU_OK(stoke_batch_wait_stream(b2, (uintptr_t)v));
    assert_int_equal(s->cuStreamSynchronize(v), 0);
  }
  s->unhold();
  assert_int_equal(s->cuStreamSynchronize(u), 0);
  bool same = true;
  for (size_t k = 0; k < 7; k++) same &= seen[k] == (int64_t)ix0[k];
  if (right_stream) {
    TU_CHECK(same, "the held reader saw another batch: the slot was "
                   "rewritten before the stream that read it was done");
    shim_check_ordering();
  } else {
    TU_CHECK(!same && seen[0] == (int64_t)stoke_batch_indices(b2)[0],
             "control: released on another stream, the slot should have "
             "been rewritten under the held reader");
  }
  stoke_batch_release(b1);
  stoke_batch_release(b2);
  stoke_loader_destroy(l);
  s->cuMemFreeHost(seen);
  s->cuStreamDestroy(u);
  s->cuStreamDestroy(v);
  shim_check_clean(0, 0);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static void test_device_slot_waits_for_release(void **state) {
  (void)state;
  device_slot_case(1);
  device_slot_case(0);
}

typedef struct next_job {
  stoke_loader *l;
  stoke_batch *b;
  int rc;
  atomic_int done;
} next_job;

static void *next_thread(void *p) {
  next_job *j = p;
  j->rc = stoke_loader_next(j->l, &j->b);
  atomic_store(&j->done, 1);
  return NULL;
}

/* pin_memory without a device: the caller copies a pinned batch itself on
** its stream and releases it with that stream; the slot is refilled only
** after the copy ran.  Released on another stream (the control), the
** refill overtakes the copy and the shim sees the host bytes change. */
static void pinned_case(int right_stream) {
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(40);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = tu_config(src, 0, 1, 5); /* W = 0: fills are inline */
  c.pin_memory = 1;
  c.cuda_library = STOKE_TEST_SHIM;
  stoke_loader *l = tu_loader(&c);
  stoke_device_info info = {.struct_size = sizeof info};
  TU_OK(stoke_loader_device(l, &info));
  TU_CHECK(info.backend == STOKE_BACKEND_PINNED, "backend %d: %s",
           info.backend, info.reason);
  CUstream u;
  assert_int_equal(s->cuStreamCreate(&u, STOKE__CU_STREAM_NON_BLOCKING), 0);
  CUdeviceptr dst;
  assert_int_equal(s->cuMemAlloc(&dst, 5 * 16), 0);

  stoke_batch *b0, *b1;
  TU_RC_L(l, stoke_loader_next(l, &b0), STOKE_OK);
  TU_CHECK(stoke_batch_memory(b0, NULL) == STOKE_MEMORY_PINNED, "memory");
  stoke_tensor t;
  TU_OK(stoke_batch_field(b0, TU_F_PAT, &t));
  assert_int_equal(s->hold(u), 0);
  /* x.to("cuda", non_blocking=True) on stream u, then del x. */
  assert_int_equal(s->cuMemcpyHtoDAsync(dst, t.data, t.n_bytes, u), 0);
  TU_OK(stoke_batch_release_stream(b0, right_stream ? (uintptr_t)u : 0));
  TU_RC_L(l, stoke_loader_next(l, &b1), STOKE_OK); /* the other slot */
  next_job j = {.l = l};
  atomic_init(&j.done, 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, next_thread, &j), 0);
  if (right_stream) {
    /* b2 needs b0's slot, which waits behind the held copy. */
    tu_sleep_ns(30000000);
    TU_CHECK(!atomic_load(&j.done), "next() refilled the slot before the "
                                    "caller's copy on its stream ran");
    s->unhold();
    pthread_join(th, NULL);
  } else {
    pthread_join(th, NULL); /* refilled at once */
    print_message("(the control: the shim is expected to report CHANGED)\n");
    s->unhold();
  }
  TU_RC_L(l, j.rc, STOKE_OK);
  assert_int_equal(s->cuStreamSynchronize(u), 0);
  if (right_stream)
    shim_check_ordering();
  else
    TU_CHECK(s->get("changed_sources") >= 1,
             "control: released on another stream, the refill should have "
             "changed the host bytes under the held copy");
  stoke_batch_release(b1);
  stoke_batch_release(j.b);
  stoke_loader_destroy(l);
  s->cuMemFree(dst);
  s->cuStreamDestroy(u);
  shim_check_clean(0, 0);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static void test_pinned_release_waits_for_stream(void **state) {
  (void)state;
  pinned_case(1);
  pinned_case(0);
}

/* ---- overlap ------------------------------------------------------------- */

/* With prefetch to the device, the next batch's copy runs while the step
** of the one held runs: the consumer's stream is held (a step that lasts
** as long as the test wants) and the copy completes all the same.  With
** device_prefetch 0 the copy waits for the step to release its slot. */
static void overlap_case(unsigned kd) {
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(40);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = fast_config(src, 2, 3, kd);
  stoke_loader *l = tu_loader(&c);
  stoke_batch *b0;
  TU_RC_L(l, stoke_loader_next(l, &b0), STOKE_OK);
  assert_int_equal(s->hold(NULL), 0); /* step 0 runs until unheld */
  stoke_batch_release(b0);             /* recorded after the step */
  s->wait_holding(1);
  long long per_batch = TU_N_FIELDS;
  if (kd > 0) {
    int64_t t0 = tu_now_ns();
    while (s->get("copies") < 2 * per_batch &&
           tu_now_ns() - t0 < 20000000000LL)
      tu_sleep_ns(1000000);
    TU_CHECK(s->get("copies") >= 2 * per_batch,
             "device_prefetch %u: batch 1 was not copied while step 0 ran "
             "(%lld copies)", kd, s->get("copies"));
  } else {
    tu_sleep_ns(30000000);
    TU_CHECK(s->get("copies") == per_batch,
             "device_prefetch 0: batch 1 was copied into the slot step 0 "
             "still reads (%lld copies)", s->get("copies"));
  }
  s->unhold();
  tu_epoch e;
  memset(&e, 0, sizeof e);
  for (;;) {
    stoke_batch *b;
    int rc = stoke_loader_next(l, &b);
    if (rc == STOKE_END) break;
    TU_RC_L(l, rc, STOKE_OK);
    stoke_batch_release(b);
  }
  shim_check_ordering();
  stoke_loader_destroy(l);
  shim_check_clean(0, 0);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static void test_copy_overlaps_step(void **state) {
  (void)state;
  overlap_case(1);
  overlap_case(0);
}

/* ---- fallbacks and errors ------------------------------------------------ */

static stoke_loader *info_of(stoke_config *c, stoke_device_info *info) {
  stoke_loader *l = tu_loader(c);
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  TU_OK(stoke_loader_device(l, info));
  return l;
}

static void host_epoch_ok(stoke_loader *l, tu_cb *cb) {
  tu_epoch *e = tu_epoch_new();
  tu_epoch_ok(l, cb, e, 1);
  free(e);
}

static void test_fallback_to_host(void **state) {
  (void)state;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(20);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = device_config(src, 1, 2, 1);
  c.shuffle = 0;
  stoke_device_info info;

  c.cuda_library = "/nonexistent/libcuda.so.1";
  stoke_loader *l = info_of(&c, &info);
  TU_CHECK(info.requested == STOKE_BACKEND_CUDA &&
               info.backend == STOKE_BACKEND_HOST, "missing library");
  TU_CONTAINS(info.reason, "host: device cuda:0 asked for, but no CUDA "
                           "driver library: /nonexistent/libcuda.so.1");
  host_epoch_ok(l, cb); /* host memory: tu_check_batch reads it directly */
  stoke_loader_destroy(l);

  c.cuda_library = STOKE_TEST_SHIM;
  s->set("devices", 0);
  l = info_of(&c, &info);
  TU_CHECK(info.backend == STOKE_BACKEND_HOST, "no device");
  TU_CONTAINS(info.reason, "no CUDA device (cuDeviceGetCount: 0)");
  host_epoch_ok(l, cb);
  stoke_loader_destroy(l);
  s->set("devices", 1);

  s->set("driver_version", 10020);
  l = info_of(&c, &info);
  TU_CHECK(info.backend == STOKE_BACKEND_HOST, "old driver");
  TU_CONTAINS(info.reason, "the CUDA driver is too old: CUDA 10.2, stoke "
                           "needs 11.0");
  stoke_loader_destroy(l);
  s->set("driver_version", 13000);

  /* The environment names the library when the config does not. */
  c.cuda_library = NULL;
  setenv("STOKE_CUDA_LIBRARY", STOKE_TEST_SHIM, 1);
  l = info_of(&c, &info);
  unsetenv("STOKE_CUDA_LIBRARY");
  TU_CHECK(info.backend == STOKE_BACKEND_CUDA, "STOKE_CUDA_LIBRARY: %s",
           info.reason);
  TU_CONTAINS(info.reason, "cuda: cuda:0 (stoke shim 0, CUDA driver 13.0");
  TU_CHECK(info.clock == STOKE_CLOCK_EVENTS, "clock %d", info.clock);
  stoke_loader_destroy(l);

  /* Asked for what is not there: errors, not fallbacks. */
  c.cuda_library = STOKE_TEST_SHIM;
  c.device = "cuda:3";
  stoke_loader *bad = NULL;
  TU_RC(stoke_loader_create(&c, &bad), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "device cuda:3 asked for, but there is 1 "
                                  "CUDA device");
  c.device = "gpu";
  TU_RC(stoke_loader_create(&c, &bad), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "device 'gpu' is not cpu, cuda or cuda:N");
  c.device = "cuda:01x";
  TU_RC(stoke_loader_create(&c, &bad), STOKE_EINVAL);
  shim_check_clean(0, 0);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* Run cfg for an epoch; the first message of whatever failed, or "". */
static int run_to_message(stoke_config *c, char *msg, size_t cap) {
  msg[0] = '\0';
  stoke_loader *l = NULL;
  int rc = stoke_loader_create(c, &l);
  if (rc != 0) {
    snprintf(msg, cap, "%s", stoke_errmsg(NULL));
    return rc;
  }
  stoke_device_info info = {.struct_size = sizeof info};
  stoke_loader_device(l, &info);
  char sleep_msg[512] = "";
  for (unsigned e = 0; e < 2 && rc == 0; e++)
    for (;;) {
      stoke_batch *b;
      rc = stoke_loader_next(l, &b);
      if (rc == STOKE_END) {
        rc = 0;
        break;
      }
      if (rc) break;
#if STOKE_TEST_HAVE_KERNELS
      if (info.backend == STOKE_BACKEND_CUDA && !sleep_msg[0]) {
        rc = stoke_loader_gpu_sleep(l, 1000);
        if (rc == STOKE_ENOTSUP) { /* the kernels did not load: said so */
          snprintf(sleep_msg, sizeof sleep_msg, "%s", stoke_errmsg(l));
          rc = 0;
        }
      }
#endif
      stoke_batch_release(b);
      if (rc) break;
    }
  if (rc == 0) rc = stoke_loader_device_sync(l);
  if (rc != 0)
    snprintf(msg, cap, "%s", stoke_errmsg(l));
  else
    snprintf(msg, cap, "%s | %s | %s", info.reason, info.normalize,
             sleep_msg);
  stoke_loader_destroy(l);
  return rc;
}

/* Every CUDA call stoke makes, made to fail once: the failure surfaces
** with the call's name and code (as an error, or in the backend's reason
** where stoke falls back), and nothing leaks. */
static void test_every_call_error_surfaces(void **state) {
  (void)state;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(30);
  stoke_source *src = tu_cb_source(cb);
  static const struct {
    const char *symbol, *name; /* the driver's symbol, cuda.h's name */
    int fatal;                 /* 1: an error; 0: in the reason */
  } calls[] = {
      {"cuDriverGetVersion", "cuDriverGetVersion", 0},
      {"cuDeviceGetCount", "cuDeviceGetCount", 0},
      {"cuDeviceGet", "cuDeviceGet", 1},
      {"cuDeviceGetName", "cuDeviceGetName", 1},
      {"cuDeviceTotalMem_v2", "cuDeviceTotalMem", 1},
      {"cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 1},
      {"cuCtxPushCurrent_v2", "cuCtxPushCurrent", 1},
      {"cuMemGetInfo_v2", "cuMemGetInfo", 1},
      {"cuStreamCreate", "cuStreamCreate", 1},
      {"cuMemHostAlloc", "cuMemHostAlloc", 1},
      {"cuMemAlloc_v2", "cuMemAlloc", 1},
      {"cuEventCreate", "cuEventCreate", 1},
      {"cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync", 1},
      {"cuEventRecord", "cuEventRecord", 1},
      {"cuStreamWaitEvent", "cuStreamWaitEvent", 1},
      {"cuEventSynchronize", "cuEventSynchronize", 1},
      {"cuEventQuery", "cuEventQuery", 1},
#if STOKE_TEST_HAVE_KERNELS
      {"cuModuleLoadData", "cuModuleLoadData", 0},
      {"cuModuleGetFunction", "cuModuleGetFunction", 0},
      {"cuLaunchKernel", "cuLaunchKernel", 1},
#endif
  };
  /* Not here: cuInit (test_cuinit_failure: called once per library);
  ** cuMemcpyHtoD and the normalisation's launch (test_device_images.c);
  ** cuEventElapsedTime (a measurement: its failure drops that one
  ** measurement, never the run); the teardown calls (cuEventDestroy,
  ** cuMemFree, cuMemFreeHost, cuStreamDestroy, cuStreamSynchronize,
  ** cuModuleUnload, cuCtxPopCurrent, cuDevicePrimaryCtxRelease), whose
  ** failure has no one to go to; cuGetErrorName / String. */
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
    stoke_config c = device_config(src, 2, 2, 1);
    c.trace_events = 64;
    shim_open();
    char key[96];
    snprintf(key, sizeof key, "calls:%s", calls[i].symbol);
    long long before = s->get(key);
    s->fail_call(calls[i].symbol, 1, 700);
    char msg[1024];
    int rc = run_to_message(&c, msg, sizeof msg);
    TU_CHECK(s->get(key) > before, "%s was never called", calls[i].symbol);
    if (calls[i].fatal)
      TU_CHECK(rc == STOKE_EDEVICE, "%s failing: rc %d (%s), want "
               "STOKE_EDEVICE", calls[i].symbol, rc, msg);
    else
      TU_CHECK(rc == 0, "%s failing: rc %d (%s), want a fallback",
               calls[i].symbol, rc, msg);
    char want[128];
    snprintf(want, sizeof want, "%s failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)",
             calls[i].name);
    TU_CONTAINS(msg, want);
    s->reset();
    shim_check_clean(0, 0);
  }
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* cuInit runs once per library path: fail it on a fresh spelling of the
** shim's path. */
static void test_cuinit_failure(void **state) {
  (void)state;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(10);
  stoke_source *src = tu_cb_source(cb);
  char path[512];
  const char *slash = strrchr(STOKE_TEST_SHIM, '/');
  snprintf(path, sizeof path, "%.*s/./%s", (int)(slash - STOKE_TEST_SHIM),
           STOKE_TEST_SHIM, slash + 1);
  stoke_config c = device_config(src, 1, 1, 1);
  c.cuda_library = path;
  s->fail_call("cuInit", 1, 100);
  stoke_device_info info;
  stoke_loader *l = info_of(&c, &info);
  TU_CHECK(info.backend == STOKE_BACKEND_HOST, "cuInit failing");
  TU_CONTAINS(info.reason, "cuInit failed: CUDA_ERROR_NO_DEVICE (100)");
  stoke_loader_destroy(l);
  /* Not remembered: the next loader tries again, and succeeds. */
  l = info_of(&c, &info);
  TU_CHECK(info.backend == STOKE_BACKEND_CUDA, "cuInit retried: %s",
           info.reason);
  stoke_loader_destroy(l);
  shim_check_clean(0, 0);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* The nth allocation of each kind fails, for n = 1, 2, ... until create
** succeeds: each failure names the call, and leaves nothing behind. */
static void test_allocation_failures_leak_nothing(void **state) {
  (void)state;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(30);
  stoke_source *src = tu_cb_source(cb);
  static const char *const symbols[] = {"cuMemHostAlloc", "cuMemAlloc_v2",
                                        "cuEventCreate", "cuStreamCreate"};
  for (size_t i = 0; i < 4; i++)
    for (long long n = 1;; n++) {
      shim_open();
      s->fail_call(symbols[i], n, 2);
      stoke_config c = device_config(src, 2, 2, 2);
      c.trace_events = 16;
      stoke_loader *l = NULL;
      int rc = stoke_loader_create(&c, &l);
      s->reset();
      if (rc == 0) {
        host_epoch_ok(l, NULL);
        stoke_loader_destroy(l);
        shim_check_clean(0, 0);
        break;
      }
      TU_RC(rc, STOKE_EDEVICE);
      TU_CONTAINS(stoke_errmsg(NULL), "CUDA_ERROR_OUT_OF_MEMORY (2)");
      shim_check_clean(0, 0);
      TU_CHECK(n < 1000, "%s: create never succeeded", symbols[i]);
    }
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- memory -------------------------------------------------------------- */

static void test_device_ledger(void **state) {
  (void)state;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(100);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = device_config(src, 1, 2, 3);
  c.batch_size = 10;
  stoke_host_ledger g = {.struct_size = sizeof g};
  TU_OK(stoke_host_ledger_compute(&c, &g));
  uint64_t sample = 8 + 16 + 8 + 16;
  TU_CHECK(g.pinned == 1, "pinned %d", g.pinned);
  TU_CHECK(g.n_device_slots == 4, "device slots %zu", g.n_device_slots);
  TU_CHECK(g.device_batch_bytes == 10 * sample, "device batch %llu",
           (unsigned long long)g.device_batch_bytes);
  TU_CHECK(g.device_bytes == 4 * 10 * sample, "device bytes %llu",
           (unsigned long long)g.device_bytes);
  stoke_loader *l = tu_loader(&c);
  stoke_host_ledger lg = {.struct_size = sizeof lg};
  TU_OK(stoke_loader_ledger(l, &lg));
  TU_CHECK(lg.device_bytes == g.device_bytes && lg.device_free_bytes > 0,
           "loader ledger: %llu device bytes, %llu free",
           (unsigned long long)lg.device_bytes,
           (unsigned long long)lg.device_free_bytes);
  TU_CHECK(lg.total_bytes == stoke_loader_host_bytes(l), "host total");
  stoke_loader_destroy(l);

  /* Checked against the device's free memory before anything is made. */
  TU_CHECK(s->get("device_bytes") == 0, "%lld device bytes live",
           s->get("device_bytes"));
  s->set("total_bytes", (long long)(3 * 10 * sample));
  stoke_loader *bad = NULL;
  TU_RC(stoke_loader_create(&c, &bad), STOKE_EBUDGET);
  TU_CONTAINS(stoke_errmsg(NULL), "device memory: cuda:0 has 1.4 KiB free, "
                                  "the loader needs 1.9 KiB on it (4 device "
                                  "slots = device_prefetch 3 + 1");
  /* The count names every slot: consumer_slots, not a fixed 1. */
  c.consumer_slots = 2;
  TU_RC(stoke_loader_create(&c, &bad), STOKE_EBUDGET);
  TU_CONTAINS(stoke_errmsg(NULL), "(5 device slots = device_prefetch 3 + 2 "
                                  "(consumer_slots)");
  c.consumer_slots = 1;
  TU_CHECK(s->get("calls:cuMemAlloc_v2") == 0 || s->get("device") == 0,
           "device memory allocated before the check");
  shim_check_clean(0, 0);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* Device copies from pageable slots (pin_memory 0): the batches are right,
** and the copies are counted as pageable and said so. */
static void test_pageable_copies_counted(void **state) {
  (void)state;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(30);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = device_config(src, 2, 2, 1);
  c.pin_memory = 0;
  c.warmup_epochs = 0;
  run_sums sums;
  stoke_device_info info;
  stoke_loader *l = info_of(&c, &info);
  TU_CONTAINS(info.reason, "host slots pageable (pin_memory 0)");
  stoke_loader_destroy(l);
  run_epochs(&c, cb, 2, STOKE_MEMORY_CUDA, &sums);
  TU_CHECK(s->get("pageable_async") > 0, "no pageable copy seen");
  TU_CHECK(s->get("pinned") == 0, "pinned memory with pin_memory 0");
  /* One copy per batch of the epoch: no batch of the next one copied
  ** ahead (copy.c's copies_ahead) before the count is read. */
  c.prefetch_next_epoch = 0;
  l = tu_loader(&c);
  host_epoch_ok(l, NULL);
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_loader_stats(l, &st));
  TU_CHECK(st.pageable_copies == stoke_loader_n_batches(l),
           "pageable copies %llu of %zu batches",
           (unsigned long long)st.pageable_copies, stoke_loader_n_batches(l));
  stoke_loader_destroy(l);
  shim_check_ordering();
  shim_check_clean(0, 0);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- clocks and traces --------------------------------------------------- */

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = malloc((size_t)n + 1);
  if (p && fread(p, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (p) p[n] = '\0';
  fclose(f);
  return p;
}

/* With a device the two clocks are the consumer stream's events: every
** measured step is timed on the stream, the copy's exposed part and the
** stream's idle time are counted, the host's own clocks are kept beside;
** the trace has a copy-stream track and a consumer-stream track. */
static void test_event_clock_and_trace(void **state) {
  (void)state;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(50);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = device_config(src, 2, 2, 1);
  c.trace_events = 4096;
  c.warmup_epochs = 1;
  stoke_loader *l = tu_loader(&c);
  int64_t step_ns = 0;
  for (unsigned e = 0; e < 3; e++)
    for (;;) {
      stoke_batch *b;
      int rc = stoke_loader_next(l, &b);
      if (rc == STOKE_END) break;
      TU_RC_L(l, rc, STOKE_OK);
#if STOKE_TEST_HAVE_KERNELS
      step_ns = 1000000;
      TU_RC_L(l, stoke_loader_gpu_sleep(l, step_ns), STOKE_OK);
#endif
      stoke_batch_release(b);
    }
  TU_OK(stoke_loader_device_sync(l));
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_loader_stats(l, &st));
  uint64_t steps = 2 * stoke_loader_n_batches(l);
  TU_CHECK(st.backend == STOKE_BACKEND_CUDA && st.clock == STOKE_CLOCK_EVENTS,
           "backend %d clock %d", st.backend, st.clock);
  TU_CHECK(st.steps == steps, "steps %llu", (unsigned long long)st.steps);
  TU_CHECK(st.untimed_steps == 0, "untimed %llu",
           (unsigned long long)st.untimed_steps);
  TU_CHECK(st.compute.count == steps && st.wait.count == steps &&
               st.copy_wait.count == steps && st.gpu_idle.count == steps &&
               st.host_wait.count == steps && st.host_compute.count == steps,
           "counts: compute %llu wait %llu copy_wait %llu idle %llu host "
           "wait %llu host compute %llu", (unsigned long long)st.compute.count,
           (unsigned long long)st.wait.count,
           (unsigned long long)st.copy_wait.count,
           (unsigned long long)st.gpu_idle.count,
           (unsigned long long)st.host_wait.count,
           (unsigned long long)st.host_compute.count);
  /* Copies completed in the measured window: about one per step, give or
  ** take those of warm-up still completing when it ended (at most the
  ** K + 1 host slots) and those copied ahead into the next epoch (at most
  ** the device slots). */
  uint64_t copies = st.stage[STOKE_STAGE_COPY].count;
  TU_CHECK(copies > 0 &&
               copies <= steps + c.prefetch + 1 + c.device_prefetch + 1,
           "copies %llu for %llu steps", (unsigned long long)copies,
           (unsigned long long)steps);
  TU_CHECK(st.copy_bytes > 0 && st.pageable_copies == 0, "copy bytes");
  TU_CHECK(st.copy_overlap >= 0 && st.copy_overlap <= 1 &&
               st.gpu_idle_frac >= 0 && st.gpu_idle_frac <= 1,
           "overlap %g idle %g", st.copy_overlap, st.gpu_idle_frac);
  /* A step's time on the stream is at least the kernel's (the shim sleeps
  ** at least that long). */
  TU_CHECK(st.compute.mean_ns >= step_ns, "compute mean %lld < %lld",
           (long long)st.compute.mean_ns, (long long)step_ns);
  char path[] = "/tmp/stoke-dev-trace-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  TU_RC_L(l, stoke_loader_write_trace(l, path), STOKE_OK);
  char *text = slurp(path);
  assert_non_null(text);
  TU_CONTAINS(text, "\"copy stream (cuda)\"");
  TU_CONTAINS(text, "\"consumer stream (cuda)\"");
  TU_CONTAINS(text, "{\"name\":\"copy\",\"cat\":\"stoke\",\"ph\":\"X\"");
  TU_CONTAINS(text, "{\"name\":\"gpu step\"");
  TU_CONTAINS(text, "{\"name\":\"gpu wait for copy\"");
  free(text);
  unlink(path);
  stoke_loader_destroy(l);
  shim_check_ordering();
  shim_check_clean(0, 0);
  (void)s;
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* Without a device the clocks stay the host's, and the device calls are
** harmless. */
static void test_host_loader_device_calls(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(10);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = tu_config(src, 1, 1, 5);
  stoke_loader *l = tu_loader(&c);
  stoke_device_info info = {.struct_size = sizeof info};
  TU_OK(stoke_loader_device(l, &info));
  TU_CHECK(info.backend == STOKE_BACKEND_HOST && info.device == -1 &&
               info.clock == STOKE_CLOCK_HOST, "host info");
  TU_CONTAINS(info.reason, "host: no device asked for");
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  int dev = 5;
  TU_CHECK(stoke_batch_memory(b, &dev) == STOKE_MEMORY_HOST && dev == -1,
           "memory");
  TU_OK(stoke_batch_wait_stream(b, 0));
  TU_RC_L(l, stoke_loader_gpu_sleep(l, 1000), STOKE_ENOTSUP);
  TU_CONTAINS(stoke_errmsg(l), "gpu sleep needs the CUDA backend");
  TU_OK(stoke_batch_release_stream(b, 0));
  TU_OK(stoke_loader_device_sync(l));
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_loader_stats(l, &st));
  TU_CHECK(st.clock == STOKE_CLOCK_HOST && st.backend == STOKE_BACKEND_HOST,
           "clock");
  stoke_loader_destroy(l);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static int sync_calls;
static void count_sync(void *user) {
  (void)user;
  sync_calls++;
}

/* A sync hook: called at each next(), and the clock is SYNC. */
static void test_step_sync_hook(void **state) {
  (void)state;
  tu_cb *cb = tu_cb_new(10);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = tu_config(src, 1, 1, 5);
  c.step_sync = count_sync;
  sync_calls = 0;
  stoke_loader *l = tu_loader(&c);
  tu_epoch *e = tu_epoch_new();
  tu_epoch_ok(l, cb, e, 1);
  free(e);
  TU_CHECK(sync_calls == 3, "step_sync called %d times for 2 batches and "
           "the END", sync_calls);
  stoke_stats st = {.struct_size = sizeof st};
  TU_OK(stoke_loader_stats(l, &st));
  TU_CHECK(st.clock == STOKE_CLOCK_SYNC, "clock %d", st.clock);
  stoke_loader_destroy(l);
  c.step_sync = NULL;
  c.clock = STOKE_CLOCK_SYNC;
  stoke_loader *bad = NULL;
  TU_RC(stoke_loader_create(&c, &bad), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(NULL), "clock SYNC needs a step_sync hook");
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* destroy() with device batches still lent: they stay valid (their device
** memory, their events) until the last is released, which frees it all,
** after the GPU is done with them. */
static void test_destroy_while_lent(void **state) {
  (void)state;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(30);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = device_config(src, 2, 2, 1);
  c.consumer_slots = 2;
  stoke_loader *l = tu_loader(&c);
  stoke_batch *b0, *b1;
  TU_RC_L(l, stoke_loader_next(l, &b0), STOKE_OK);
  TU_RC_L(l, stoke_loader_next(l, &b1), STOKE_OK);
  size_t ix[7];
  memcpy(ix, stoke_batch_indices(b1), sizeof ix);
  stoke_loader_destroy(l);
  TU_CHECK(s->get("device") > 0, "device memory freed under lent batches");
  stoke_batch_release(b0);
  size_t n;
  unsigned char *bytes = batch_bytes(b1, &n);
  for (size_t k = 0; k < 7; k++)
    TU_CHECK(((int64_t *)bytes)[k] == (int64_t)ix[k], "b1 changed after "
             "destroy");
  free(bytes);
  stoke_batch_release(b1); /* the last: frees the loader */
  shim_check_ordering();
  shim_check_clean(0, 0);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* stoke_loader_device_sync waits for the steps' end events on the host:
** each such event is made with CU_EVENT_BLOCKING_SYNC, so the thread sleeps
** there rather than spinning a core. */
static void test_device_sync_does_not_spin(void **state) {
  (void)state;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(30);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = device_config(src, 2, 2, 1);
  stoke_loader *l = tu_loader(&c);
  for (;;) {
    stoke_batch *b;
    int rc = stoke_loader_next(l, &b);
    if (rc == STOKE_END) break;
    TU_RC_L(l, rc, STOKE_OK);
    stoke_batch_release(b);
  }
  long long syncs0 = s->get("calls:cuEventSynchronize");
  TU_OK(stoke_loader_device_sync(l));
  TU_CHECK(s->get("calls:cuEventSynchronize") > syncs0,
           "device_sync waited on no event");
  TU_CHECK(s->get("spinning_syncs") == 0, "%lld host waits on events "
           "without CU_EVENT_BLOCKING_SYNC", s->get("spinning_syncs"));
  stoke_loader_destroy(l);
  shim_check_clean(0, 0);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* A context push that fails at close: the page-locked slots still go back
** through cuMemFreeHost (after a retry), never through free(). */
static void test_close_push_failure_keeps_pinned_from_free(void **state) {
  (void)state;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(30);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = device_config(src, 2, 2, 1);
  stoke_loader *l = tu_loader(&c);
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  stoke_batch_release(b);
  TU_CHECK(s->get("pinned") > 0, "no page-locked slots to test with");
  s->fail_call("cuCtxPushCurrent_v2", 1, 201);
  stoke_loader_destroy(l);
  shim_check_clean(0, 0);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* A release whose event cannot be recorded: the batch counts as given
** back, its slot is not reused (nothing says when the GPU is done), the
** loader is poisoned, and destroy frees everything. */
static void test_failed_release_keeps_the_slot(void **state) {
  (void)state;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(7); /* one batch: no copy is recording meanwhile */
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = device_config(src, 1, 1, 1);
  stoke_loader *l = tu_loader(&c);
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  s->fail_call("cuEventRecord", 1, 700);
  TU_RC(stoke_batch_release_stream(b, 1), STOKE_EDEVICE);
  TU_CONTAINS(stoke_errmsg(l), "cuEventRecord");
  stoke_batch *again = NULL;
  TU_RC(stoke_loader_next(l, &again), STOKE_EDEVICE);
  TU_CHECK(again == NULL || again != b, "the failed slot was lent again");
  stoke_loader_destroy(l);
  shim_check_clean(0, 0);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- the per-thread default stream -------------------------------------- */

typedef struct release_job {
  stoke_batch *b;
} release_job;

static void *release_thread(void *p) {
  stoke_batch_release(((release_job *)p)->b);
  return NULL;
}

/* cuda_stream 2 is the per-thread default stream: each thread's own.  A
** batch handed out on the consumer thread and let go on another (a DLPack
** deleter's thread) must still wait for the consumer thread's stream, not
** the releasing thread's, which has nothing queued. */
static void test_per_thread_stream_release_from_another_thread(void **s_) {
  (void)s_;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(40);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = fast_config(src, 2, 2, 1); /* two device slots */
  c.cuda_stream = 2;
  stoke_loader *l = tu_loader(&c);
  CUstream pts = (CUstream)(uintptr_t)2; /* this thread's */
  int64_t *seen;
  assert_int_equal(s->cuMemHostAlloc((void **)&seen, 7 * 8, 0), 0);
  stoke_batch *b0, *b1, *b2;
  TU_RC_L(l, stoke_loader_next(l, &b0), STOKE_OK);
  stoke_tensor t0;
  TU_OK(stoke_batch_field(b0, TU_F_IDX, &t0));
  /* The consumer's work on b0: stopped on this thread's stream before it
  ** reads (next() made that stream wait for the copy). */
  assert_int_equal(s->hold(pts), 0);
  assert_int_equal(s->cuMemcpyDtoHAsync(seen, (CUdeviceptr)(uintptr_t)t0.data,
                                        t0.n_bytes, pts), 0);
  size_t ix0[7];
  memcpy(ix0, stoke_batch_indices(b0), sizeof ix0);
  release_job job = {b0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, release_thread, &job), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  TU_RC_L(l, stoke_loader_next(l, &b1), STOKE_OK);
  TU_RC_L(l, stoke_loader_next(l, &b2), STOKE_OK);
  stoke_tensor t2;
  TU_OK(stoke_batch_field(b2, TU_F_IDX, &t2));
  TU_CHECK(t2.data == t0.data, "b2 did not reuse b0's device slot");
  long long per_batch = TU_N_FIELDS;
  /* b2's copy must wait behind the held consumer: give it every chance to
  ** run (it would within a millisecond), and it must not. */
  for (int i = 0; i < 50 && s->get("copies") < 3 * per_batch; i++)
    tu_sleep_ns(1000000);
  TU_CHECK(s->get("copies") == 2 * per_batch,
           "b2 was copied into b0's slot while the consumer thread's stream "
           "that reads b0 was held (%lld copies): the release went on the "
           "releasing thread's per-thread stream", s->get("copies"));
  s->unhold();
  assert_int_equal(s->cuStreamSynchronize(pts), 0);
  bool same = true;
  for (size_t k = 0; k < 7; k++) same &= seen[k] == (int64_t)ix0[k];
  TU_CHECK(same, "the held consumer saw another batch");
  shim_check_ordering();
  stoke_batch_release(b1);
  stoke_batch_release(b2);
  stoke_loader_destroy(l);
  s->cuMemFreeHost(seen);
  shim_check_clean(0, 0);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* The refusals stoke_batch_wait_stream documents (stoke.h): STOKE_EINVAL
** with a message, and the loader is not poisoned. */
static void loader_still_serves(stoke_loader *l, stoke_batch *b) {
  stoke_batch *n;
  stoke_batch_release(b);
  TU_RC_L(l, stoke_loader_next(l, &n), STOKE_OK);
  TU_OK(stoke_batch_wait_stream(n, 0));
  stoke_batch_release(n);
}

/* A ninth reader stream for one batch is refused before anything is
** queued; the eight already there stay (adding one again is no new one). */
static void test_wait_stream_ninth_stream_refused(void **state) {
  (void)state;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(40);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = fast_config(src, 2, 2, 1);
  stoke_loader *l = tu_loader(&c);
  CUstream st[9];
  for (int i = 0; i < 9; i++)
    assert_int_equal(s->cuStreamCreate(&st[i], STOKE__CU_STREAM_NON_BLOCKING),
                     0);
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  for (int i = 0; i < 8; i++)
    TU_OK(stoke_batch_wait_stream(b, (uintptr_t)st[i]));
  TU_RC_L(l, stoke_batch_wait_stream(b, (uintptr_t)st[8]), STOKE_EINVAL);
  TU_CONTAINS(stoke_errmsg(l), "is read on more than 8 streams");
  TU_OK(stoke_batch_wait_stream(b, (uintptr_t)st[3]));
  loader_still_serves(l, b);
  stoke_loader_destroy(l);
  for (int i = 0; i < 9; i++) s->cuStreamDestroy(st[i]);
  shim_check_clean(0, 0);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

typedef struct wait_job {
  stoke_batch *b;
  int rc;
} wait_job;

static void *wait_ptd_thread(void *p) {
  wait_job *j = p;
  j->rc = stoke_batch_wait_stream(j->b, 2);
  return NULL;
}

/* Stream 2 names the calling thread's own stream: from a thread other than
** the one next() lent the batch to it is refused (stoke fences only the
** consumer thread's); from the consumer thread it is taken. */
static void test_wait_stream_foreign_per_thread_refused(void **state) {
  (void)state;
  shim_open();
  tu_cb *cb = tu_cb_new(40);
  stoke_source *src = tu_cb_source(cb);
  stoke_config c = fast_config(src, 2, 2, 1);
  stoke_loader *l = tu_loader(&c);
  stoke_batch *b;
  TU_RC_L(l, stoke_loader_next(l, &b), STOKE_OK);
  wait_job job = {b, -1};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, wait_ptd_thread, &job), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  TU_CHECK(job.rc == STOKE_EINVAL, "stream 2 from another thread: %d",
           job.rc);
  TU_CONTAINS(stoke_errmsg(l), "the per-thread default stream (2) of a "
                               "thread other than the one next() lent");
  TU_OK(stoke_batch_wait_stream(b, 2));
  loader_still_serves(l, b);
  stoke_loader_destroy(l);
  shim_check_clean(0, 0);
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* ---- bad samples on the device ------------------------------------------ */

/* on_error SKIP and REPLACE through the device stage: the same batches as
** on the host (sizes, indices, what was skipped or replaced), and a batch
** SKIP empties (B 1) is not handed out from a device slot either. */
/* Batch echoing on the device: a batch is copied once and its echoes are
** the same device memory, handed out echo times in a row; the steps equal
** the host backend's; the device slots come back (the shim is clean). */
static void test_echo_on_device(void **state) {
  (void)state;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(40);
  stoke_source *src = tu_cb_source(cb);
  for (unsigned kd = 0; kd < 3; kd++) {
    stoke_config c = device_config(src, 2, 2, kd);
    c.echo = 3;
    long long copies0 = s->get("copies");
    run_sums dev, host;
    run_epochs(&c, cb, 2, STOKE_MEMORY_CUDA, &dev);
    long long copies = s->get("copies") - copies0;
    shim_check_ordering();
    shim_check_clean(0, 0);
    c.device = NULL;
    run_epochs(&c, cb, 2, STOKE_MEMORY_HOST, &host);
    assert_int_equal(dev.n, 2 * 3 * 6); /* 6 batches of 7 per epoch */
    assert_int_equal(host.n, dev.n);
    for (size_t i = 0; i < dev.n; i++) {
      TU_CHECK(dev.sum[i] == host.sum[i] && dev.number[i] == host.number[i],
               "KD %u: step %zu differs from the host backend's", kd, i);
      TU_CHECK(dev.sum[i] == dev.sum[i / 3 * 3], "KD %u: step %zu is not "
               "its batch's echo", kd, i);
    }
    /* Copied once per batch (a copy per field: 4), not per step; a
    ** prefetched batch of the next epoch or two may be copied too. */
    TU_CHECK(copies >= 4 * 12 && copies <= 4 * (12 + 4),
             "KD %u: %lld copies for 12 batches of 4 fields", kd, copies);
  }
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* A failed next() on an echo's view (its stream cannot wait for the
** copy): the view is not lent, and the slot it shares goes back once it
** was the last one out, so destroy() frees the loader and every device
** slot (the shim is clean).  It stayed counted as lent before. */
static void test_echo_view_failure_frees_the_slot(void **state) {
  (void)state;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(40);
  stoke_source *src = tu_cb_source(cb);
  for (long long nth = 1; nth <= 3; nth++) { /* the slot, view 1, view 2 */
    stoke_config c = device_config(src, 2, 2, 1);
    c.echo = 3;
    shim_open();
    s->fail_call("cuStreamWaitEvent", nth, 700);
    char msg[1024];
    int rc = run_to_message(&c, msg, sizeof msg);
    TU_CHECK(rc == STOKE_EDEVICE, "failing call %lld: rc %d (%s)", nth, rc,
             msg);
    TU_CONTAINS(msg, "cuStreamWaitEvent failed");
    s->reset();
    shim_check_clean(0, 0);
  }
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

static void test_bad_samples_on_device(void **state) {
  (void)state;
  shim *s = shim_open();
  tu_cb *cb = tu_cb_new(40);
  uint8_t bad[40] = {0};
  bad[3] = bad[18] = bad[19] = 1;
  cb->fail_set = bad;
  stoke_source *src = tu_cb_source(cb);
  static const int policies[] = {STOKE_ON_ERROR_SKIP, STOKE_ON_ERROR_REPLACE};
  static const size_t batch[] = {1, 7};
  for (size_t p = 0; p < 2; p++)
    for (size_t bi = 0; bi < 2; bi++)
      for (unsigned W = 0; W <= 2; W += 2) {
        tu_epoch *got[2] = {tu_epoch_new(), tu_epoch_new()};
        size_t skipped[2] = {0, 0}, replaced[2] = {0, 0};
        for (int dev = 0; dev < 2; dev++) {
          stoke_config c = device_config(src, W, 2, 1);
          c.batch_size = batch[bi];
          c.on_error = policies[p];
          c.max_failure_frac = 0;
          if (!dev) c.device = NULL;
          stoke_loader *l = tu_loader(&c);
          stoke_batch *b;
          int rc;
          tu_epoch *e = got[dev];
          while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
            size_t n = stoke_batch_size(b);
            TU_CHECK(n > 0, "an empty batch was handed out");
            memcpy(&e->idx[e->n_samples], stoke_batch_indices(b),
                   n * sizeof e->idx[0]);
            e->batch_number[e->n_batches++] = stoke_batch_number(b);
            e->n_samples += n;
            skipped[dev] += stoke_batch_n_skipped(b);
            replaced[dev] += stoke_batch_n_replaced(b);
            stoke_batch_release(b);
          }
          TU_RC_L(l, rc, STOKE_END);
          stoke_loader_destroy(l);
        }
        TU_CHECK(got[0]->n_samples == got[1]->n_samples &&
                     got[0]->n_batches == got[1]->n_batches &&
                     memcmp(got[0]->idx, got[1]->idx,
                            got[0]->n_samples * sizeof got[0]->idx[0]) == 0 &&
                     skipped[0] == skipped[1] && replaced[0] == replaced[1],
                 "%s, B %zu, W %u: the device's batches differ from the "
                 "host's", stoke_on_error_name(policies[p]), batch[bi], W);
        size_t want = policies[p] == STOKE_ON_ERROR_SKIP ? 37 : 40;
        TU_CHECK(got[1]->n_samples == want, "%zu samples, want %zu",
                 got[1]->n_samples, want);
        TU_CHECK((policies[p] == STOKE_ON_ERROR_SKIP ? skipped[1]
                                                     : replaced[1]) ==
                     (batch[bi] == 1 && policies[p] == STOKE_ON_ERROR_SKIP
                          ? 0 /* the emptied batches are not handed out */
                          : 3),
                 "the batches say %zu skipped, %zu replaced", skipped[1],
                 replaced[1]);
        free(got[0]);
        free(got[1]);
      }
  shim_check_clean(0, 0);
  (void)s;
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

/* The outlet behind next() (src/pipeline/outlet.h): the device outlet
** with device slots of its own for CUDA, the same table over the host
** slots for pinned memory, the host outlet without a device, and echo
** wrapped around whichever serves.  Each runs two epochs, every step
** released, and leaves nothing behind on the shim. */
static void test_outlet_tables(void **state) {
  (void)state;
  shim_open();
  tu_cb *cb = tu_cb_new(40);
  stoke_source *src = tu_cb_source(cb);
  static const struct {
    const char *device;
    int pin;
    unsigned echo;
    const char *outlet;
    bool own_slots; /* next() hands out slots other than the host ones */
  } cases[] = {
      {"cuda", 0, 1, "device", true}, {"cuda", 0, 2, "echo", true},
      {NULL, 1, 1, "device", false},  {NULL, 1, 3, "echo", false},
      {NULL, 0, 1, "host", false},    {NULL, 0, 2, "echo", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    stoke_config c = device_config(src, 1, 2, 2);
    c.device = cases[i].device;
    c.pin_memory = cases[i].pin;
    c.echo = cases[i].echo;
    stoke_loader *l = NULL;
    TU_OK(stoke_loader_create(&c, &l));
    TU_CHECK(strcmp(l->outlet.ops->name, cases[i].outlet) == 0,
             "case %zu: outlet %s, expected %s", i, l->outlet.ops->name,
             cases[i].outlet);
    TU_CHECK((l->outlet.slots != l->slots) == cases[i].own_slots,
             "case %zu: next() hands out the wrong slots", i);
    size_t want = cases[i].own_slots ? 2 + c.consumer_slots : l->n_slots;
    TU_CHECK(l->outlet.n_slots == want, "case %zu: %zu out slots, expected %zu",
             i, l->outlet.n_slots, want);
    size_t steps = 0;
    for (int e = 0; e < 2; e++) {
      stoke_batch *b;
      int rc;
      while ((rc = stoke_loader_next(l, &b)) == STOKE_OK) {
        steps++;
        stoke_batch_release(b);
      }
      TU_RC_L(l, rc, STOKE_END);
    }
    TU_CHECK(steps == 2 * 6 * cases[i].echo, "case %zu: %zu steps", i, steps);
    TU_CHECK(l->n_lent == 0, "case %zu: %zu still lent", i, l->n_lent);
    stoke_loader_destroy(l);
    shim_check_clean(0, 0);
  }
  stoke_source_destroy(src);
  tu_cb_free(cb);
}

int main(void) {
  tu_watchdog(TU_WATCHDOG_S);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batches_intact_in_order),
      cmocka_unit_test(test_device_slot_waits_for_release),
      cmocka_unit_test(test_pinned_release_waits_for_stream),
      cmocka_unit_test(test_copy_overlaps_step),
      cmocka_unit_test(test_fallback_to_host),
      cmocka_unit_test(test_every_call_error_surfaces),
      cmocka_unit_test(test_cuinit_failure),
      cmocka_unit_test(test_allocation_failures_leak_nothing),
      cmocka_unit_test(test_device_ledger),
      cmocka_unit_test(test_pageable_copies_counted),
      cmocka_unit_test(test_event_clock_and_trace),
      cmocka_unit_test(test_host_loader_device_calls),
      cmocka_unit_test(test_step_sync_hook),
      cmocka_unit_test(test_destroy_while_lent),
      cmocka_unit_test(test_per_thread_stream_release_from_another_thread),
      cmocka_unit_test(test_wait_stream_ninth_stream_refused),
      cmocka_unit_test(test_wait_stream_foreign_per_thread_refused),
      cmocka_unit_test(test_failed_release_keeps_the_slot),
      cmocka_unit_test(test_device_sync_does_not_spin),
      cmocka_unit_test(test_close_push_failure_keeps_pinned_from_free),
      cmocka_unit_test(test_bad_samples_on_device),
      cmocka_unit_test(test_echo_on_device),
      cmocka_unit_test(test_echo_view_failure_frees_the_slot),
      cmocka_unit_test(test_outlet_tables),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
