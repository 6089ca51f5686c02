/* gpu_check.c — the device stage on a real GPU (bench/gpu_check.sh runs it).
**
** Prints, section by section:
**   bandwidth   host to device from stoke's pinned slots, from pageable
**               slots, and the peak of a plain cuMemcpyHtoDAsync loop from
**               page-locked memory (each copy timed by its own events);
**   idle        with the synthetic source and gpu-sleep steps, the GPU's
**               idle share between steps with prefetch to the device
**               (device_prefetch 1) and without (0), and beside it NVML's
**               sampled utilisation (libnvidia-ml.so.1, when it loads);
**   checksums   of every device batch (copied back) against the host
**               backend's batches of the same configuration;
**   normalize   the device's normalisation against the host path for the
**               same images, f32 and f16: bytes equal, or the largest
**               difference in units in the last place; and the host CPU
**               time per image with and without it.
** Each section stands alone: a failure is printed and the next one runs.
** Exit status: 0 when every check held, 1 otherwise.
**
**   stoke_gpu_check [SECONDS_BUDGET]      (default 200) */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h" /* cli_demo_dataset */
#include "device/cuda_api.h"

static const stoke__cuda *cu;
static CUcontext ctx;
static int failures;

#define CHECK_CU(call)                                                        \
  do {                                                                        \
    CUresult rc_ = (call);                                                    \
    if (rc_ != 0) {                                                           \
      char e_[256];                                                           \
      stoke__cuda_errf(cu, e_, sizeof e_, #call, rc_);                        \
      printf("  error: %s\n", e_);                                            \
      failures++;                                                             \
      return -1;                                                              \
    }                                                                         \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the plain loop ------------------------------------------------------ */

/* GB/s of `reps` copies of n bytes from src on a stream, timed by events. */
static int copy_loop(const void *src, CUdeviceptr dst, size_t n, int reps,
                     double *gbps) {
  CUstream s;
  CUevent a, b;
  CHECK_CU(cu->cuStreamCreate(&s, STOKE__CU_STREAM_NON_BLOCKING));
  CHECK_CU(cu->cuEventCreate(&a, 0));
  CHECK_CU(cu->cuEventCreate(&b, 0));
  for (int i = 0; i < 2; i++) CHECK_CU(cu->cuMemcpyHtoDAsync(dst, src, n, s));
  CHECK_CU(cu->cuEventRecord(a, s));
  for (int i = 0; i < reps; i++)
    CHECK_CU(cu->cuMemcpyHtoDAsync(dst, src, n, s));
  CHECK_CU(cu->cuEventRecord(b, s));
  CHECK_CU(cu->cuEventSynchronize(b));
  float ms = 0;
  CHECK_CU(cu->cuEventElapsedTime(&ms, a, b));
  *gbps = (double)n * reps / ((double)ms * 1e6);
  cu->cuEventDestroy(a);
  cu->cuEventDestroy(b);
  cu->cuStreamDestroy(s);
  return 0;
}

static int plain_bandwidth(double *pinned_gbps, double *pageable_gbps) {
  size_t n = 256u << 20;
  void *pinned = NULL;
  CUdeviceptr dst;
  CHECK_CU(cu->cuMemHostAlloc(&pinned, n, STOKE__CU_MEMHOSTALLOC_PORTABLE));
  CHECK_CU(cu->cuMemAlloc(&dst, n));
  memset(pinned, 1, n);
  unsigned char *pageable = malloc(n);
  if (!pageable) return -1;
  memset(pageable, 1, n);
  int rc = copy_loop(pinned, dst, n, 10, pinned_gbps);
  if (rc == 0) rc = copy_loop(pageable, dst, n, 4, pageable_gbps);
  free(pageable);
  cu->cuMemFreeHost(pinned);
  cu->cuMemFree(dst);
  return rc;
}

/* ---- NVML: sampled utilisation, beside the events ------------------------ */

/* nvidia-smi's utilisation: the share of a sample period (1/6 s to 1 s,
** by GPU) in which any kernel ran.  Sampled here while a run goes, to be
** printed beside the event-measured idle share: a kernel on one SM counts
** as fully busy, and gaps shorter than the period vanish in it. */
typedef struct nvml_util { unsigned gpu, memory; } nvml_util;
static struct {
  int (*init)(void);
  int (*handle)(unsigned, void **);
  int (*util)(void *, nvml_util *);
  void *dev;
  pthread_t thread;
  atomic_int stop;
  double sum;
  long n;
} nvml;

static void nvml_open(void) {
  void *dl = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!dl) return;
  void *f[3] = {dlsym(dl, "nvmlInit_v2"),
                dlsym(dl, "nvmlDeviceGetHandleByIndex_v2"),
                dlsym(dl, "nvmlDeviceGetUtilizationRates")};
  if (!f[0] || !f[1] || !f[2]) return;
  memcpy(&nvml.init, &f[0], sizeof f[0]);
  memcpy(&nvml.handle, &f[1], sizeof f[1]);
  memcpy(&nvml.util, &f[2], sizeof f[2]);
  if (nvml.init() != 0 || nvml.handle(0, &nvml.dev) != 0) nvml.dev = NULL;
}

static void *nvml_sampler(void *arg) {
  (void)arg;
  while (!atomic_load(&nvml.stop)) {
    nvml_util u;
    if (nvml.util(nvml.dev, &u) == 0) {
      nvml.sum += u.gpu;
      nvml.n++;
    }
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static void nvml_start(void) {
  nvml.sum = 0;
  nvml.n = 0;
  atomic_store(&nvml.stop, 0);
  if (nvml.dev && pthread_create(&nvml.thread, NULL, nvml_sampler, NULL))
    nvml.dev = NULL;
}

/* Mean sampled utilisation in [0, 1], or -1 without NVML. */
static double nvml_stop(void) {
  if (!nvml.dev) return -1;
  atomic_store(&nvml.stop, 1);
  pthread_join(nvml.thread, NULL);
  return nvml.n ? nvml.sum / nvml.n / 100.0 : -1;
}

/* ---- loaders ------------------------------------------------------------- */

typedef struct run_opts {
  const char *device;
  int pin_memory;
  unsigned device_prefetch;
  size_t batch;
  unsigned workers, prefetch, epochs;
  int64_t gpu_sleep_ns;
} run_opts;

static stoke_source *tensor_source(int c, int h, int w, size_t n) {
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  sc.kind = STOKE_SYNTH_TENSOR;
  sc.cost_ns = 0;
  sc.n_samples = n;
  sc.ndim = 3;
  sc.shape[0] = c;
  sc.shape[1] = h;
  sc.shape[2] = w;
  stoke_source *src = NULL;
  if (stoke_source_create_synthetic(&sc, &src) != 0)
    printf("  error: %s\n", stoke_errmsg(NULL));
  return src;
}

typedef int (*batch_fn)(void *user, stoke_batch *b);

/* Run o on src; each batch goes through fn when given; stats into *st. */
static int run(stoke_source *src, const run_opts *o, batch_fn fn, void *user,
               stoke_stats *st, stoke_device_info *info) {
  stoke_config c;
  stoke_config_init(&c);
  c.source = src;
  c.batch_size = o->batch;
  c.n_workers = o->workers;
  c.prefetch = o->prefetch;
  c.device = o->device;
  c.pin_memory = o->pin_memory;
  c.device_prefetch = o->device_prefetch;
  c.warmup_epochs = o->epochs > 1 ? 1 : 0;
  c.seed = 7;
  c.shuffle = 1;
  stoke_loader *l = NULL;
  if (stoke_loader_create(&c, &l) != 0) {
    printf("  error: %s\n", stoke_errmsg(NULL));
    failures++;
    return -1;
  }
  if (info) {
    info->struct_size = sizeof *info;
    stoke_loader_device(l, info);
  }
  int rc = 0;
  for (unsigned e = 0; e < o->epochs && rc == 0; e++)
    for (;;) {
      stoke_batch *b;
      rc = stoke_loader_next(l, &b);
      if (rc == STOKE_END) {
        rc = 0;
        break;
      }
      if (rc) break;
      if (o->gpu_sleep_ns) rc = stoke_loader_gpu_sleep(l, o->gpu_sleep_ns);
      if (!rc && fn) rc = fn(user, b);
      stoke_batch_release(b);
      if (rc) break;
    }
  if (rc == 0) rc = stoke_loader_device_sync(l);
  if (rc) {
    printf("  error: %s\n", stoke_errmsg(l));
    failures++;
  }
  st->struct_size = sizeof *st;
  stoke_loader_stats(l, st);
  stoke_loader_destroy(l);
  return rc;
}

static double copy_gbps(const stoke_stats *st) {
  int64_t t = st->stage[STOKE_STAGE_COPY].total_ns;
  return t > 0 ? (double)st->copy_bytes / (double)t : 0.0;
}

/* ---- checksums and bytes of batches -------------------------------------- */

typedef struct bytes_log {
  unsigned char **batch;
  size_t *n;
  size_t count, cap;
  size_t field; /* which field; (size_t)-1: all */
} bytes_log;

/* The bytes of b's fields, copied back from the device when they are
** there (through stream 0, which next() made wait for the copy). */
static int keep_bytes(void *user, stoke_batch *b) {
  bytes_log *log = user;
  size_t total = 0;
  stoke_tensor t[STOKE_MAX_FIELDS];
  size_t nf = stoke_batch_n_fields(b);
  for (size_t f = 0; f < nf; f++) {
    stoke_batch_field(b, f, &t[f]);
    if (log->field == (size_t)-1 || log->field == f) total += t[f].n_bytes;
  }
  unsigned char *buf = malloc(total), *p = buf;
  if (!buf) return STOKE_ENOMEM;
  bool dev = stoke_batch_memory(b, NULL) == STOKE_MEMORY_CUDA;
  /* Pushed per call, as a user's thread does: stoke's calls push their own
  ** context and must not depend on one being current. */
  if (dev && cu->cuCtxPushCurrent(ctx) != 0) {
    free(buf);
    return STOKE_EDEVICE;
  }
  int rc = 0;
  for (size_t f = 0; f < nf && rc == 0; f++) {
    if (log->field != (size_t)-1 && log->field != f) continue;
    if (dev) {
      if (cu->cuMemcpyDtoHAsync(p, (CUdeviceptr)(uintptr_t)t[f].data,
                                t[f].n_bytes, NULL) != 0 ||
          cu->cuStreamSynchronize(NULL) != 0)
        rc = STOKE_EDEVICE;
    } else {
      memcpy(p, t[f].data, t[f].n_bytes);
    }
    p += t[f].n_bytes;
  }
  if (dev) {
    CUcontext c;
    cu->cuCtxPopCurrent(&c);
  }
  if (rc) {
    free(buf);
    return rc;
  }
  if (log->count == log->cap) {
    log->cap = log->cap ? 2 * log->cap : 64;
    log->batch = realloc(log->batch, log->cap * sizeof *log->batch);
    log->n = realloc(log->n, log->cap * sizeof *log->n);
  }
  log->batch[log->count] = buf;
  log->n[log->count++] = total;
  return 0;
}

static void log_free(bytes_log *log) {
  for (size_t i = 0; i < log->count; i++) free(log->batch[i]);
  free(log->batch);
  free(log->n);
  memset(log, 0, sizeof *log);
}

static uint64_t fnv(const unsigned char *p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

/* ---- images -------------------------------------------------------------- */

/* The images: `stoke demo`'s dataset (cli/demo_data.c: 320 synthesised
** JPEGs of ImageNet's sizes), made in a temporary folder. */
static int make_images(char *root, size_t cap) {
  snprintf(root, cap, "/tmp/stoke-gpu-check-XXXXXX");
  if (!mkdtemp(root)) return -1;
  return cli_demo_dataset(root, stdout);
}

/* Units in the last place between two f16 (or f32) bit patterns. */
static uint64_t ulps16(uint16_t a, uint16_t b) {
  int32_t x = a & 0x8000 ? -(int32_t)(a & 0x7fff) : (int32_t)a;
  int32_t y = b & 0x8000 ? -(int32_t)(b & 0x7fff) : (int32_t)b;
  return (uint64_t)(x > y ? x - y : y - x);
}

static uint64_t ulps32(uint32_t a, uint32_t b) {
  int64_t x = a & 0x80000000u ? -(int64_t)(a & 0x7fffffffu) : (int64_t)a;
  int64_t y = b & 0x80000000u ? -(int64_t)(b & 0x7fffffffu) : (int64_t)b;
  return (uint64_t)(x > y ? x - y : y - x);
}

static void normalize_check(const char *root, const char *transform,
                            bool f16) {
  stoke_image_config ic;
  stoke_image_config_init(&ic);
  ic.transform = transform;
  stoke_source *src = NULL;
  if (stoke_source_create_images(root, &ic, &src) != 0) {
    printf("  error: %s\n", stoke_errmsg(NULL));
    failures++;
    return;
  }
  run_opts o = {.batch = 32, .workers = 8, .prefetch = 4, .epochs = 2,
                .device_prefetch = 1, .pin_memory = -1};
  bytes_log host = {.field = 0}, dev = {.field = 0};
  stoke_stats sh, sd;
  stoke_device_info info;
  run(src, &o, keep_bytes, &host, &sh, NULL);
  o.device = "cuda";
  run(src, &o, keep_bytes, &dev, &sd, &info);
  stoke_source_destroy(src);
  size_t equal = 0;
  uint64_t worst = 0, elems = 0;
  for (size_t i = 0; i < host.count && i < dev.count; i++) {
    if (host.n[i] == dev.n[i] && memcmp(host.batch[i], dev.batch[i],
                                        host.n[i]) == 0) {
      equal++;
      continue;
    }
    size_t n = host.n[i] < dev.n[i] ? host.n[i] : dev.n[i];
    for (size_t k = 0; k + (f16 ? 2 : 4) <= n; k += f16 ? 2 : 4) {
      uint64_t u;
      if (f16) {
        uint16_t a, b;
        memcpy(&a, host.batch[i] + k, 2);
        memcpy(&b, dev.batch[i] + k, 2);
        u = ulps16(a, b);
      } else {
        uint32_t a, b;
        memcpy(&a, host.batch[i] + k, 4);
        memcpy(&b, dev.batch[i] + k, 4);
        u = ulps32(a, b);
      }
      elems += u != 0;
      if (u > worst) worst = u;
    }
  }
  bool ok = host.count == dev.count && host.count > 0 &&
            (equal == host.count || (f16 && worst <= 1));
  printf("  %s\n    normalize: %s\n", transform, info.normalize);
  printf("    batches bit-identical to the host path: %zu of %zu", equal,
         host.count);
  if (equal != host.count)
    printf("; %llu elements differ, by at most %llu ulp",
           (unsigned long long)elems, (unsigned long long)worst);
  printf(" -> %s\n", ok ? "ok" : "FAIL");
  double cpu_h = sh.samples ? (double)sh.worker_cpu_ns / sh.samples / 1e3 : 0;
  double cpu_d = sd.samples ? (double)sd.worker_cpu_ns / sd.samples / 1e3 : 0;
  printf("    host CPU per image: %.1f us on the host path, %.1f us with the "
         "device normalising (%.1f%% less); transform stage %.1f -> %.1f us\n",
         cpu_h, cpu_d, cpu_h > 0 ? 100 * (1 - cpu_d / cpu_h) : 0.0,
         (double)sh.stage[STOKE_STAGE_TRANSFORM].mean_ns / 1e3,
         (double)sd.stage[STOKE_STAGE_TRANSFORM].mean_ns / 1e3);
  uint64_t copies = sd.stage[STOKE_STAGE_COPY].count;
  printf("    device copy per batch %.3f ms (%.2f GB/s, %llu bytes: the "
         "images as u8, %s of their %s size)\n",
         (double)sd.stage[STOKE_STAGE_COPY].mean_ns / 1e6, copy_gbps(&sd),
         (unsigned long long)(copies ? sd.copy_bytes / copies : 0),
         f16 ? "1/2" : "1/4", f16 ? "f16" : "f32");
  if (!ok) failures++;
  log_free(&host);
  log_free(&dev);
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  setvbuf(stdout, NULL, _IOLBF, 0);
  double t0 = now_s();
  char err[512];
  if (stoke__cuda_open(getenv("STOKE_CUDA_LIBRARY"), &cu, err,
                       sizeof err) != 0) {
    printf("no CUDA: %s\n", err);
    return 1;
  }
  int v = 0, n = 0;
  cu->cuDriverGetVersion(&v);
  cu->cuDeviceGetCount(&n);
  char name[128] = "";
  size_t total = 0;
  if (n > 0) {
    cu->cuDeviceGetName(name, sizeof name, 0);
    cu->cuDeviceTotalMem(&total, 0);
  }
  printf("== device: %s, CUDA driver %d.%d, %.1f GiB, %d device(s)\n", name,
         v / 1000, v % 1000 / 10, (double)total / (1 << 30), n);
  CUcontext popped;
  if (n == 0 || cu->cuDevicePrimaryCtxRetain(&ctx, 0) != 0 ||
      cu->cuCtxPushCurrent(ctx) != 0 || cu->cuCtxPopCurrent(&popped) != 0) {
    printf("no usable device\n");
    return 1;
  }
  /* The context is not left current on this, the loaders' consumer thread:
  ** each of this program's own CUDA calls pushes it, as a user's thread
  ** would, and stoke's calls push it themselves. */

  nvml_open();
  printf("\n== bandwidth, host to device\n");
  double peak = 0, pageable = 0;
  int bw = cu->cuCtxPushCurrent(ctx) == 0 ? plain_bandwidth(&peak, &pageable)
                                          : -1;
  cu->cuCtxPopCurrent(&popped);
  if (bw == 0)
    printf("  plain cuMemcpyHtoDAsync loop, page-locked 256 MiB: %.2f GB/s "
           "(the peak)\n  plain loop from pageable memory:                "
           "  %.2f GB/s\n", peak, pageable);
  stoke_source *big = tensor_source(3, 512, 512, 21 * 12); /* 3 MiB each */
  if (big) {
    stoke_stats st;
    stoke_device_info info;
    run_opts o = {.device = "cuda", .pin_memory = -1, .device_prefetch = 2,
                  .batch = 21, .workers = 8, .prefetch = 4, .epochs = 2};
    if (run(big, &o, NULL, NULL, &st, &info) == 0) {
      printf("  backend: %s\n", info.reason);
      printf("  stoke's pinned slots (63 MiB batches):  %.2f GB/s over %llu "
             "copies = %.1f%% of the peak -> %s (target 90%%)\n",
             copy_gbps(&st),
             (unsigned long long)st.stage[STOKE_STAGE_COPY].count,
             peak > 0 ? 100 * copy_gbps(&st) / peak : 0.0,
             peak > 0 && copy_gbps(&st) >= 0.9 * peak ? "ok" : "BELOW");
    }
    o.pin_memory = 0;
    if (run(big, &o, NULL, NULL, &st, NULL) == 0)
      printf("  stoke's pageable slots (pin_memory 0): %.2f GB/s over %llu "
             "copies (%llu counted pageable)\n",
             copy_gbps(&st),
             (unsigned long long)st.stage[STOKE_STAGE_COPY].count,
             (unsigned long long)st.pageable_copies);
    stoke_source_destroy(big);
  }

  printf("\n== GPU idle between steps (synthetic tensors 3x224x224 f32, "
         "batch 64, gpu-sleep 10 ms steps, 8 workers)\n");
  stoke_source *mid = tensor_source(3, 224, 224, 64 * 24);
  for (unsigned kd = 1; mid && kd != (unsigned)-1; kd--) {
    stoke_stats st;
    run_opts o = {.device = "cuda", .pin_memory = -1, .device_prefetch = kd,
                  .batch = 64, .workers = 8, .prefetch = 4, .epochs = 3,
                  .gpu_sleep_ns = 10000000};
    nvml_start();
    int rc = run(mid, &o, NULL, NULL, &st, NULL);
    double util = nvml_stop();
    if (rc != 0) continue;
    if (util >= 0)
      printf("  device_prefetch %u: NVML's sampled utilisation %.1f%% "
             "against %.1f%% busy by the events\n", kd, 100 * util,
             100 * (1 - st.gpu_idle_frac));
    printf("  device_prefetch %u: gpu idle %.2f%% of the step (p50 %.3f, "
           "p99 %.3f ms); copy %.3f ms a batch, exposed %.3f ms a step, "
           "%.1f%% hidden; step on the GPU %.3f ms%s\n",
           kd, 100 * st.gpu_idle_frac, (double)st.gpu_idle.p50_ns / 1e6,
           (double)st.gpu_idle.p99_ns / 1e6,
           (double)st.stage[STOKE_STAGE_COPY].mean_ns / 1e6,
           (double)st.copy_wait.mean_ns / 1e6, 100 * st.copy_overlap,
           (double)st.compute.mean_ns / 1e6,
           kd ? (st.gpu_idle_frac < 0.02 ? " -> ok (target under 2%)"
                                         : " -> ABOVE the 2% target")
              : " (no prefetch to the device: the copy is exposed)");
    if (kd && st.gpu_idle_frac >= 0.02) failures++;
  }
  stoke_source_destroy(mid);
  if (nvml.dev)
    printf("  (NVML counts a sample period busy when any kernel ran in it: "
           "a one-thread spin is 100%%, and idle gaps shorter than the period "
           "vanish; the events time each gap, which is why seed 000 calls "
           "nvidia-smi a sanity check only)\n");
  else
    printf("  (no NVML here: libnvidia-ml.so.1 did not load)\n");

  printf("\n== checksums of delivered device batches against the host "
         "backend's\n");
  stoke_source *small = tensor_source(3, 32, 32, 1000);
  if (small) {
    run_opts o = {.batch = 32, .workers = 4, .prefetch = 2, .epochs = 2,
                  .device_prefetch = 2, .pin_memory = -1};
    bytes_log host = {.field = (size_t)-1}, dev = {.field = (size_t)-1};
    stoke_stats st;
    run(small, &o, keep_bytes, &host, &st, NULL);
    o.device = "cuda";
    run(small, &o, keep_bytes, &dev, &st, NULL);
    size_t same = 0;
    uint64_t all = 0;
    for (size_t i = 0; i < host.count && i < dev.count; i++) {
      uint64_t a = fnv(host.batch[i], host.n[i]);
      uint64_t b = fnv(dev.batch[i], dev.n[i]);
      same += a == b && host.n[i] == dev.n[i];
      all ^= b + i;
      if (i < 3)
        printf("  batch %zu: host %016llx device %016llx\n", i,
               (unsigned long long)a, (unsigned long long)b);
    }
    bool ok = same == host.count && host.count == dev.count && same > 0;
    printf("  %zu of %zu batches equal (combined %016llx) -> %s\n", same,
           host.count, (unsigned long long)all, ok ? "ok" : "FAIL");
    if (!ok) failures++;
    log_free(&host);
    log_free(&dev);
    stoke_source_destroy(small);
  }

  printf("\n== normalisation on the device against the host path\n");
  char root[256];
  if (make_images(root, sizeof root) != 0) {
    printf("  error: cannot write the images\n");
    failures++;
  } else {
    normalize_check(root, "random-resized-crop=224,flip,normalize=imagenet,"
                          "chw,f32", false);
    normalize_check(root, "random-resized-crop=224,flip,normalize=imagenet,"
                          "hwc,f16", true);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) printf("  (could not remove %s)\n", root);
  }
  printf("\n== %s in %.1f s\n", failures ? "FAILURES" : "all checks held",
         now_s() - t0);
  return failures ? 1 : 0;
}
