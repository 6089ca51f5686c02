/* outlet_device.c — which backend serves a loader's batches, its memory, and the
** device terms of the memory ledger.
**
** DESIGN
** The backend is chosen once, at stoke_loader_create, before anything is
** allocated: plain host memory (the default: stoke_loader.dev stays NULL
** and nothing of this layer runs), page-locked host slots, or page-locked
** host slots plus device slots on CUDA device N.  Asking for CUDA opens
** the driver (cuda_dl.c), checks its version (STOKE__CUDA_MIN_DRIVER) and
** the device count, and retains the device's primary context, the one
** PyTorch uses, so that stoke's memory, streams and events are valid in
** it.  What cannot serve falls back to plain host memory with a one-line
** reason (no library, no device, a driver too old): a loader asked for a
** GPU on a machine without one still runs.  A CUDA call that fails once
** the driver is open is an error (STOKE_EDEVICE) naming the call and its
** code, never a silent fallback.
**
** Device memory: device_prefetch + consumer_slots slots of the batch's size (the
** normalised field at its float size), plus, with normalisation on the
** device, one u8 staging buffer (the copy stream copies into it and
** normalises out of it in order, so one serves every slot) and the table.
** Its total is checked against the device's free memory (cuMemGetInfo)
** before the first allocation. */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/pipeline.h"
#include "pipeline/outlet_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *stoke_backend_name(int backend) {
  switch (backend) {
  case STOKE_BACKEND_HOST: return "host";
  case STOKE_BACKEND_PINNED: return "pinned";
  case STOKE_BACKEND_CUDA: return "cuda";
  default: return "?";
  }
}

/* "cuda" or "cuda:N" -> 1 and *ordinal; NULL, "" or "cpu" -> 0; else -1. */
static int parse_device(const char *text, int *ordinal) {
  *ordinal = -1;
  if (!text || !*text || strcmp(text, "cpu") == 0) return 0;
  if (strcmp(text, "cuda") == 0) {
    *ordinal = 0;
    return 1;
  }
  if (strncmp(text, "cuda:", 5) != 0) return -1;
  const char *p = text + 5;
  if (*p < '0' || *p > '9') return -1;
  long n = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    n = n * 10 + (*p - '0');
    if (n > 1023) return -1;
  }
  if (*p) return -1;
  *ordinal = (int)n;
  return 1;
}

int stoke__dev_validate(const stoke_config *c) {
  int ordinal;
  if (parse_device(c->device, &ordinal) < 0)
    return stoke__set_tls_error(
        STOKE_EINVAL, "config: device '%s' is not cpu, cuda or cuda:N",
        c->device);
  if (c->device_prefetch > 1024)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: device_prefetch is %u, expected "
                                "0..1024", c->device_prefetch);
  if (c->pin_memory < -1 || c->pin_memory > 1)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: pin_memory is %d, expected -1, 0 "
                                "or 1", c->pin_memory);
  if (c->clock < STOKE_CLOCK_AUTO || c->clock > STOKE_CLOCK_SYNC)
    return stoke__set_tls_error(STOKE_EINVAL, "config: clock is %d",
                                c->clock);
  if (c->clock == STOKE_CLOCK_SYNC && !c->step_sync)
    return stoke__set_tls_error(STOKE_EINVAL,
                                "config: clock SYNC needs a step_sync hook");
  return 0;
}

/* What the configuration asks of the memory: STOKE_BACKEND_*. */
static int wanted(const stoke_config *c, int *ordinal) {
  int cuda = parse_device(c->device, ordinal) == 1;
  if (cuda) return STOKE_BACKEND_CUDA;
  if (c->pin_memory == 1) return STOKE_BACKEND_PINNED;
  return STOKE_BACKEND_HOST;
}

static bool pins(const stoke_config *c, int want) {
  return want == STOKE_BACKEND_PINNED ||
         (want == STOKE_BACKEND_CUDA && c->pin_memory != 0);
}

/* The source's u8 form, when the configuration would normalise on the
** device and the build can. */
static bool device_form(const stoke_config *c, const stoke_source *src,
                        int want, stoke__u8_form *form) {
  return want == STOKE_BACKEND_CUDA && c->device_normalize &&
         stoke__dev_have_kernels() && stoke__source_u8_form(src, form) &&
         (uint64_t)form->u8_bytes * c->batch_size < STOKE__NORM_MAX_ELEMS;
}

void stoke__dev_ledger(const stoke_config *c, const stoke_source *src,
                       stoke_host_ledger *g) {
  int ordinal;
  int want = wanted(c, &ordinal);
  g->pinned = pins(c, want);
  if (want != STOKE_BACKEND_CUDA) return;
  stoke__u8_form form;
  bool norm = device_form(c, src, want, &form);
  g->n_device_slots = (size_t)c->device_prefetch + c->consumer_slots;
  uint64_t per = 0;
  for (size_t f = 0; f < src->n_fields; f++) per += src->field_bytes[f];
  g->device_batch_bytes = per * c->batch_size;
  g->device_bytes = g->n_device_slots * g->device_batch_bytes;
  if (norm) {
    uint64_t host_sample = g->sample_bytes - src->field_bytes[form.field] +
                           form.u8_bytes;
    g->batch_bytes = host_sample * c->batch_size;
    g->device_bytes += form.u8_bytes * c->batch_size + sizeof(stoke__norm_lut);
  }
}

static int fallback(stoke_loader *l, const char *asked, const char *why) {
  stoke__dev *d = l->outlet.dev;
  d->backend = STOKE_BACKEND_HOST;
  d->cu = NULL;
  snprintf(d->reason, sizeof d->reason, "host: %s asked for, but %.180s",
           asked, why);
  return 0;
}

/* A CUDA call that failed after the driver opened: fatal, named. */
#define CU_OR_FAIL(call, args)                                                \
  do {                                                                        \
    CUresult rc_ = d->cu->call args;                                          \
    if (rc_ != 0) {                                                           \
      char e_[STOKE__ERRMSG_CAP];                                             \
      stoke__cuda_errf(d->cu, e_, sizeof e_, #call, rc_);                     \
      return stoke__set_tls_error(STOKE_EDEVICE, "device: %s", e_);           \
    }                                                                         \
  } while (0)

/* Retain the primary context, read the device, make the streams and load
** the kernels (the driver is open and the device exists). */
static int open_device(stoke_loader *l) {
  stoke__dev *d = l->outlet.dev;
  CU_OR_FAIL(cuDeviceGet, (&d->device, d->ordinal));
  CU_OR_FAIL(cuDeviceGetName, (d->name, (int)sizeof d->name, d->device));
  size_t total = 0;
  CU_OR_FAIL(cuDeviceTotalMem, (&total, d->device));
  d->total_bytes = total;
  CU_OR_FAIL(cuDevicePrimaryCtxRetain, (&d->ctx, d->device));
  d->ctx_retained = true;
  char e[STOKE__ERRMSG_CAP];
  if (stoke__dev_enter(d, e, sizeof e) != 0)
    return stoke__set_tls_error(STOKE_EDEVICE, "device: %s", e);
  int rc = 0;
  size_t free_b = 0, total_b = 0;
  CUresult cr = d->cu->cuMemGetInfo(&free_b, &total_b);
  const char *call = "cuMemGetInfo";
  if (cr == 0 && d->backend == STOKE_BACKEND_CUDA) {
    call = "cuStreamCreate";
    cr = d->cu->cuStreamCreate(&d->copy_stream,
                               STOKE__CU_STREAM_NON_BLOCKING);
  }
  if (cr == 0 && l->cfg.trace_events > 0) {
    call = "cuStreamCreate";
    cr = d->cu->cuStreamCreate(&d->clock_stream,
                               STOKE__CU_STREAM_NON_BLOCKING);
  }
  if (cr != 0) {
    stoke__cuda_errf(d->cu, e, sizeof e, call, cr);
    rc = stoke__set_tls_error(STOKE_EDEVICE, "device: %s", e);
  }
  d->free_bytes = free_b;
  /* The kernels serve normalisation and the spin step. */
  char why[STOKE__ERRMSG_CAP] = "";
  bool have = false;
  if (rc == 0 && d->backend == STOKE_BACKEND_CUDA) {
    if (!stoke__dev_have_kernels())
      snprintf(why, sizeof why, "stoke was built without nvcc, so without "
                                "the device kernels");
    else
      have = stoke__dev_module_load(d, why, sizeof why) == 0;
  }
  if (!have) snprintf(d->kernel_reason, sizeof d->kernel_reason, "%.150s", why);
  if (rc == 0 && d->backend == STOKE_BACKEND_CUDA && d->norm_field >= 0 &&
      !have) {
    d->norm_field = -1;
    snprintf(d->norm_reason, sizeof d->norm_reason, "host: %.150s", why);
  }
  stoke__dev_leave(d);
  return rc;
}

/* Where the normalisation runs, before the device is opened. */
static void plan_normalize(stoke_loader *l, int want) {
  stoke__dev *d = l->outlet.dev;
  const stoke_source *src = l->src;
  d->norm_field = -1;
  stoke__u8_form form;
  bool can = stoke__source_u8_form(src, &form);
  if (!can) {
    snprintf(d->norm_reason, sizeof d->norm_reason,
             "none: no field to normalise on the device");
  } else if (want != STOKE_BACKEND_CUDA) {
    snprintf(d->norm_reason, sizeof d->norm_reason,
             "host: batches stay on the host");
  } else if (!l->cfg.device_normalize) {
    snprintf(d->norm_reason, sizeof d->norm_reason,
             "host: device_normalize is 0");
  } else if ((uint64_t)form.u8_bytes * l->cfg.batch_size >=
             STOKE__NORM_MAX_ELEMS) {
    snprintf(d->norm_reason, sizeof d->norm_reason,
             "host: a batch of over 2 G pixels is beyond the kernel");
  } else {
    d->norm_field = (long)form.field;
    d->form = form;
    snprintf(d->norm_reason, sizeof d->norm_reason,
             "device: field %zu copied as u8 (%zu of %zu bytes a sample) "
             "and normalised on the GPU", form.field, form.u8_bytes,
             src->field_bytes[form.field]);
  }
}

static void resolve_clock(stoke_loader *l) {
  int want = l->cfg.clock;
  bool cuda = l->outlet.dev && l->outlet.dev->cu;
  if (want == STOKE_CLOCK_AUTO)
    want = l->cfg.step_sync ? STOKE_CLOCK_SYNC
           : cuda          ? STOKE_CLOCK_EVENTS
                           : STOKE_CLOCK_HOST;
  if (want == STOKE_CLOCK_EVENTS && !cuda) want = STOKE_CLOCK_HOST;
  l->cclock.clock = want;
  if (l->outlet.dev) l->outlet.dev->clock = want;
}

int stoke__dev_open(stoke_loader *l) {
  for (size_t f = 0; f < l->src->n_fields; f++)
    l->outlet.field_bytes[f] = l->src->field_bytes[f];
  int ordinal;
  int want = wanted(&l->cfg, &ordinal);
  if (want == STOKE_BACKEND_HOST && l->cfg.clock != STOKE_CLOCK_EVENTS) {
    resolve_clock(l); /* plain memory, nothing asked of CUDA */
    return 0;
  }
  stoke__dev *d = stoke__calloc(l->alloc, 1, sizeof *d);
  if (!d) return stoke__set_tls_error(STOKE_ENOMEM, "device: out of memory");
  l->outlet.dev = d;
  if (pthread_cond_init(&d->cv, NULL) != 0)
    return stoke__set_tls_error(STOKE_ENOMEM, "device: cannot set up locks");
  d->cv_made = true;
  d->want = d->backend = want;
  d->ordinal = ordinal >= 0 ? ordinal : 0;
  d->pinned = pins(&l->cfg, want);
  plan_normalize(l, want);
  char asked[48];
  if (want == STOKE_BACKEND_CUDA)
    snprintf(asked, sizeof asked, "device cuda:%d", d->ordinal);
  else if (want == STOKE_BACKEND_PINNED)
    snprintf(asked, sizeof asked, "pinned memory");
  else
    snprintf(asked, sizeof asked, "the CUDA event clock");

  const char *path = l->cfg.cuda_library;
  /* The one environment variable the library reads: the driver's path, as
  ** dlopen reads LD_LIBRARY_PATH, so that every client (the CLI, Python,
  ** a C program) and every test can point stoke at another driver. */
  if (!path || !*path) path = getenv("STOKE_CUDA_LIBRARY");
  char why[STOKE__ERRMSG_CAP];
  int rc = stoke__cuda_open(path, &d->cu, why, sizeof why);
  if (rc == STOKE_ENOMEM) return stoke__set_tls_error(rc, "%s", why);
  if (rc == 0) {
    CUresult cr = d->cu->cuDriverGetVersion(&d->driver_version);
    int n = 0;
    if (cr != 0) {
      stoke__cuda_errf(d->cu, why, sizeof why, "cuDriverGetVersion", cr);
      rc = -1;
    } else if (d->driver_version < STOKE__CUDA_MIN_DRIVER) {
      snprintf(why, sizeof why,
               "the CUDA driver is too old: CUDA %d.%d, stoke needs %d.%d or "
               "newer", d->driver_version / 1000,
               d->driver_version % 1000 / 10, STOKE__CUDA_MIN_DRIVER / 1000,
               STOKE__CUDA_MIN_DRIVER % 1000 / 10);
      rc = -1;
    } else if ((cr = d->cu->cuDeviceGetCount(&n)) != 0) {
      stoke__cuda_errf(d->cu, why, sizeof why, "cuDeviceGetCount", cr);
      rc = -1;
    } else if (n == 0) {
      snprintf(why, sizeof why, "no CUDA device (cuDeviceGetCount: 0)");
      rc = -1;
    } else if (d->ordinal >= n) {
      return stoke__set_tls_error(
          STOKE_EINVAL, "config: device cuda:%d asked for, but there %s %d "
          "CUDA device%s", d->ordinal, n == 1 ? "is" : "are", n,
          n == 1 ? "" : "s");
    }
  }
  if (rc != 0) {
    int dv = d->driver_version;
    fallback(l, asked, why);
    d->driver_version = dv;
    if (d->norm_field >= 0)
      snprintf(d->norm_reason, sizeof d->norm_reason,
               "host: no CUDA device serves");
    d->norm_field = -1;
    d->pinned = false;
    resolve_clock(l);
    return 0;
  }
  if (want == STOKE_BACKEND_HOST) d->pinned = false;
  rc = open_device(l);
  if (rc != 0) return rc;
  if (d->norm_field >= 0)
    l->outlet.field_bytes[d->norm_field] = d->form.u8_bytes;
  char free_s[32], total_s[32];
  stoke__format_bytes(d->free_bytes, free_s, sizeof free_s);
  stoke__format_bytes(d->total_bytes, total_s, sizeof total_s);
  snprintf(d->reason, sizeof d->reason,
           "%s: cuda:%d (%.60s, CUDA driver %d.%d, %s free of %s)%s",
           want == STOKE_BACKEND_CUDA ? "cuda"
           : want == STOKE_BACKEND_PINNED ? "pinned" : "host",
           d->ordinal, d->name, d->driver_version / 1000,
           d->driver_version % 1000 / 10, free_s, total_s,
           want == STOKE_BACKEND_CUDA && !d->pinned
               ? "; host slots pageable (pin_memory 0): copies are "
                 "synchronous, pin them"
               : "");
  if (want == STOKE_BACKEND_CUDA) {
    d->n_dslots = (size_t)l->cfg.device_prefetch + l->cfg.consumer_slots;
    stoke_host_ledger g;
    memset(&g, 0, sizeof g);
    for (size_t f = 0; f < l->src->n_fields; f++)
      g.sample_bytes += l->src->field_bytes[f];
    stoke__dev_ledger(&l->cfg, l->src, &g);
    d->device_bytes = g.n_device_slots * g.device_batch_bytes;
    if (d->norm_field >= 0) {
      d->staging_bytes = (uint64_t)d->form.u8_bytes * l->cfg.batch_size;
      d->device_bytes += d->staging_bytes + sizeof(stoke__norm_lut);
    }
  }
  resolve_clock(l);
  return 0;
}

int stoke__dev_check_memory(stoke_loader *l) {
  stoke__dev *d = l->outlet.dev;
  if (!d || d->backend != STOKE_BACKEND_CUDA) return 0;
  if (d->device_bytes <= d->free_bytes) return 0;
  char need[32], have[32], slot[32];
  stoke__format_bytes(d->device_bytes, need, sizeof need);
  stoke__format_bytes(d->free_bytes, have, sizeof have);
  stoke__format_bytes(d->n_dslots ? (d->device_bytes - d->staging_bytes) /
                                        d->n_dslots
                                  : 0,
                      slot, sizeof slot);
  return stoke__set_tls_error(
      STOKE_EBUDGET,
      "device memory: cuda:%d has %s free, the loader needs %s on it (%zu "
      "device slots = device_prefetch %u + %u (consumer_slots), about %s "
      "each at batch size %zu); lower device_prefetch, consumer_slots or "
      "batch_size",
      d->ordinal, have, need, d->n_dslots, l->cfg.device_prefetch,
      l->cfg.consumer_slots, slot, l->cfg.batch_size);
}

void *stoke__dev_host_alloc(stoke_loader *l, size_t bytes) {
  stoke__dev *d = l->outlet.dev;
  if (!d || !d->pinned) {
    void *p = stoke__alloc_aligned(l->alloc, bytes);
    /* Only malloc's memory: a caller's allocator knows its pages better. */
    if (p && !l->alloc) stoke__advise_huge(p, bytes);
    return p;
  }
  char e[STOKE__ERRMSG_CAP];
  if (stoke__dev_enter(d, e, sizeof e) != 0) {
    stoke__set_tls_error(STOKE_EDEVICE, "device: %s", e);
    return NULL;
  }
  void *p = NULL;
  /* Portable: page-locked for every context, PyTorch's included. */
  CUresult rc = d->cu->cuMemHostAlloc(&p, bytes ? bytes : 1,
                                      STOKE__CU_MEMHOSTALLOC_PORTABLE);
  stoke__dev_leave(d);
  if (rc != 0) {
    char size[32];
    stoke__format_bytes(bytes, size, sizeof size);
    stoke__cuda_errf(d->cu, e, sizeof e, "cuMemHostAlloc", rc);
    stoke__set_tls_error(STOKE_EDEVICE,
                         "device: page-locked batch slot of %s: %s", size, e);
    return NULL;
  }
  return p;
}

void stoke__dev_host_free(stoke_loader *l, void *p) {
  stoke__dev *d = l->outlet.dev;
  if (!p) return;
  if (!d || !d->pinned) {
    stoke__free_aligned(l->alloc, p);
    return;
  }
  char e[STOKE__ERRMSG_CAP];
  if (stoke__dev_enter(d, e, sizeof e) != 0) return;
  d->cu->cuMemFreeHost(p);
  stoke__dev_leave(d);
}

/* ---- per-slot state ------------------------------------------------------ */

static int event(stoke__dev *d, CUevent *e, unsigned flags) {
  CU_OR_FAIL(cuEventCreate, (e, flags));
  return 0;
}

static int alloc_device_slots(stoke_loader *l) {
  stoke__dev *d = l->outlet.dev;
  d->dslots = stoke__calloc(l->alloc, d->n_dslots, sizeof *d->dslots);
  if (!d->dslots) return STOKE_ENOMEM;
  /* next() hands these out, not the host slots. */
  l->outlet.slots = d->dslots;
  l->outlet.n_slots = d->n_dslots;
  for (size_t i = 0; i < d->n_dslots; i++) {
    stoke_batch *b = &d->dslots[i];
    b->owner = l;
    b->on_device = true;
    atomic_init(&b->remaining, 0);
    b->indices = stoke__calloc(l->alloc, l->cfg.batch_size, sizeof(size_t));
    b->dev = stoke__calloc(l->alloc, 1, sizeof *b->dev);
    if (!b->indices || !b->dev) return STOKE_ENOMEM;
    for (size_t f = 0; f < l->src->n_fields; f++) {
      size_t bytes = l->cfg.batch_size * l->src->field_bytes[f];
      CU_OR_FAIL(cuMemAlloc, (&b->dev->dptr[f], bytes ? bytes : 1));
      b->data[f] = (void *)(uintptr_t)b->dev->dptr[f];
    }
    int rc = event(d, &b->dev->ready, STOKE__CU_EVENT_DISABLE_TIMING);
    if (!rc)
      rc = event(d, &b->dev->release, STOKE__CU_EVENT_DISABLE_TIMING |
                                           STOKE__CU_EVENT_BLOCKING_SYNC);
    /* The readers' events (readers.c); blocking sync: teardown waits on
    ** them on the host. */
    for (size_t k = 0; !rc && k < STOKE__READERS; k++)
      rc = event(d, &b->dev->readers.done[k],
                 STOKE__CU_EVENT_DISABLE_TIMING |
                     STOKE__CU_EVENT_BLOCKING_SYNC);
    if (rc) return rc;
    b->state = STOKE__SLOT_FREE;
  }
  if (d->norm_field >= 0) {
    CU_OR_FAIL(cuMemAlloc, (&d->staging, d->staging_bytes));
    CU_OR_FAIL(cuMemAlloc, (&d->lut, sizeof d->form.lut));
    /* On the copy stream, whose kernels read it: a synchronous copy from
    ** pageable memory may still be landing (on the legacy stream, which a
    ** non-blocking stream does not wait for) when it returns. */
    CU_OR_FAIL(cuMemcpyHtoDAsync, (d->lut, &d->form.lut, sizeof d->form.lut,
                                   d->copy_stream));
  }
  return 0;
}

static int alloc_inside(stoke_loader *l) {
  stoke__dev *d = l->outlet.dev;
  d->reclaim_cap = l->n_slots;
  d->reclaim = stoke__calloc(l->alloc, l->n_slots, sizeof *d->reclaim);
  d->stats = stoke__alloc_aligned(l->alloc, sizeof *d->stats);
  if (!d->reclaim || !d->stats) return STOKE_ENOMEM;
  memset(d->stats, 0, sizeof *d->stats);
  int rc = 0;
  if (d->backend != STOKE_BACKEND_HOST)
    for (size_t i = 0; rc == 0 && i < l->n_slots; i++) {
      stoke_batch *b = &l->slots[i];
      b->dev = stoke__calloc(l->alloc, 1, sizeof *b->dev);
      if (!b->dev) return STOKE_ENOMEM;
      if (d->backend == STOKE_BACKEND_CUDA) {
        /* Timed: the copy's duration; the device thread sleeps on the end
        ** rather than spinning a core. */
        rc = event(d, &b->dev->copy_start, STOKE__CU_EVENT_DEFAULT);
        if (!rc)
          rc = event(d, &b->dev->copy_end, STOKE__CU_EVENT_BLOCKING_SYNC);
      } else {
        rc = event(d, &b->dev->release, STOKE__CU_EVENT_DISABLE_TIMING |
                                            STOKE__CU_EVENT_BLOCKING_SYNC);
      }
    }
  if (rc == 0 && d->backend == STOKE_BACKEND_CUDA) rc = alloc_device_slots(l);
  for (size_t i = 0; rc == 0 && i < STOKE__STEP_RING; i++) {
    stoke__step_rec *r = &d->steps[i];
    rc = event(d, &r->ready, STOKE__CU_EVENT_DEFAULT);
    if (!rc) rc = event(d, &r->start, STOKE__CU_EVENT_DEFAULT);
    /* stoke_loader_device_sync waits on the end event: blocking sync lets
    ** the host thread sleep there instead of spinning a core. */
    if (!rc) rc = event(d, &r->end, STOKE__CU_EVENT_BLOCKING_SYNC);
  }
  for (int k = 0; rc == 0 && d->clock_stream && k < 2; k++) {
    const char *call;
    CUresult cr = stoke__dev_anchors_init(
        d, k ? &d->stream_anchors : &d->copy_anchors, &call);
    if (cr != 0) {
      char e[STOKE__ERRMSG_CAP];
      stoke__cuda_errf(d->cu, e, sizeof e, call, cr);
      rc = stoke__set_tls_error(STOKE_EDEVICE, "device: %s", e);
    }
  }
  return rc;
}

int stoke__dev_alloc(stoke_loader *l) {
  stoke__dev *d = l->outlet.dev;
  if (!d || !d->cu) return 0;
  d->consumer = (CUstream)l->cfg.cuda_stream;
  atomic_init(&d->per_thread,
              l->cfg.cuda_stream == STOKE__STREAM_PER_THREAD);
  char e[STOKE__ERRMSG_CAP];
  if (stoke__dev_enter(d, e, sizeof e) != 0)
    return stoke__set_tls_error(STOKE_EDEVICE, "device: %s", e);
  int rc = alloc_inside(l);
  stoke__dev_leave(d);
  /* The slots a next() entry records releases for (outlet_device_stream.c):
  ** the out slots, which alloc_inside chose. */
  if (rc == 0) {
    d->entry_scratch = stoke__calloc(l->alloc, l->outlet.n_slots ? l->outlet.n_slots
                                                              : 1,
                                     sizeof *d->entry_scratch);
    if (!d->entry_scratch) rc = STOKE_ENOMEM;
  }
  if (rc == STOKE_ENOMEM)
    stoke__set_tls_error(rc, "device: out of memory for the slots' state");
  return rc;
}

int stoke__dev_start(stoke_loader *l, const stoke__sys *sys) {
  stoke__dev *d = l->outlet.dev;
  if (!d || !d->cu || d->backend == STOKE_BACKEND_HOST) return 0;
  int rc = stoke__thread_start(&d->thread, l->alloc, sys, "stoke-dev",
                               stoke__dev_main, l);
  if (rc != 0)
    return stoke__set_tls_error(rc, "device: cannot start the device "
                                    "thread: %s", stoke_strerror(rc));
  d->thread_started = true;
  return 0;
}

void stoke__dev_stop(stoke_loader *l) {
  stoke__dev *d = l->outlet.dev;
  if (!d || !d->thread_started) return;
  pthread_mutex_lock(&l->mu);
  atomic_store_explicit(&l->stop, true, memory_order_relaxed);
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&l->mu);
  stoke__thread_join(d->thread, l->alloc);
  d->thread_started = false;
  d->thread = NULL;
}

/* ---- teardown ------------------------------------------------------------ */

static void destroy_event(const stoke__dev *d, CUevent e) {
  if (e) d->cu->cuEventDestroy(e);
}

static void free_slot_dev(stoke_loader *l, stoke_batch *b) {
  stoke__dev *d = l->outlet.dev;
  stoke__slot_dev *s = b->dev;
  if (!s) return;
  destroy_event(d, s->copy_start);
  destroy_event(d, s->copy_end);
  destroy_event(d, s->ready);
  destroy_event(d, s->release);
  for (size_t i = 0; i < STOKE__READERS; i++)
    destroy_event(d, s->readers.done[i]);
  for (size_t f = 0; f < STOKE__MAX_FIELDS; f++)
    if (s->dptr[f]) d->cu->cuMemFree(s->dptr[f]);
  stoke__free(l->alloc, s);
  b->dev = NULL;
}

/* Without a current context nothing can give page-locked memory back, and
** free() must never see it: the slots are dropped (leaked) and the reason
** goes to stderr, since close has no caller left to return an error to. */
static void leak_pinned_slots(stoke_loader *l, const char *why) {
  size_t n = 0;
  for (size_t i = 0; i < l->n_slots && l->slots; i++)
    for (size_t f = 0; f < STOKE__MAX_FIELDS; f++)
      if (l->slots[i].data[f]) {
        l->slots[i].data[f] = NULL;
        n++;
      }
  if (n)
    fprintf(stderr, "stoke: device close: %s; %zu page-locked buffers "
                    "leaked\n", why, n);
}

void stoke__dev_close(stoke_loader *l) {
  stoke__dev *d = l->outlet.dev;
  if (!d) return;
  char e[STOKE__ERRMSG_CAP];
  /* One retry: a push that fails once (a context busy elsewhere) should
  ** not cost the page-locked slots. */
  bool entered = d->cu && d->ctx_retained &&
                 (stoke__dev_enter(d, e, sizeof e) == 0 ||
                  stoke__dev_enter(d, e, sizeof e) == 0);
  if (d->cu && d->ctx_retained && !entered && d->pinned)
    leak_pinned_slots(l, e);
  if (entered) {
    /* Nothing is freed while the GPU may still read it: the copies, the
    ** consumer's work on lent or released slots, the callers' streams of
    ** pinned releases. */
    if (d->copy_stream) d->cu->cuStreamSynchronize(d->copy_stream);
    if (d->backend == STOKE_BACKEND_CUDA)
      d->cu->cuStreamSynchronize(d->consumer);
    /* Releases handed to the consumer's per-thread stream and not yet
    ** recorded: the closing thread is the consumer's, as a rule. */
    if (atomic_load_explicit(&d->per_thread, memory_order_relaxed))
      d->cu->cuStreamSynchronize((CUstream)STOKE__STREAM_PER_THREAD);
    for (size_t i = 0; i < l->n_slots && l->slots; i++)
      if (l->slots[i].dev && l->slots[i].dev->release)
        d->cu->cuEventSynchronize(l->slots[i].dev->release);
    for (size_t i = 0; i < stoke__dev_n_slots(d); i++) {
      if (d->dslots[i].dev && d->dslots[i].dev->release) {
        d->cu->cuEventSynchronize(d->dslots[i].dev->release);
        stoke__readers_sync(d->cu, &d->dslots[i].dev->readers);
      }
      free_slot_dev(l, &d->dslots[i]);
    }
    for (size_t i = 0; i < l->n_slots && l->slots; i++) {
      stoke_batch *b = &l->slots[i];
      free_slot_dev(l, b);
      if (d->pinned)
        for (size_t f = 0; f < STOKE__MAX_FIELDS; f++)
          if (b->data[f]) {
            d->cu->cuMemFreeHost(b->data[f]);
            b->data[f] = NULL;
          }
    }
    for (size_t i = 0; i < STOKE__STEP_RING; i++) {
      destroy_event(d, d->steps[i].ready);
      destroy_event(d, d->steps[i].start);
      destroy_event(d, d->steps[i].end);
    }
    stoke__dev_anchors_free(d, &d->copy_anchors);
    stoke__dev_anchors_free(d, &d->stream_anchors);
    if (d->staging) d->cu->cuMemFree(d->staging);
    if (d->lut) d->cu->cuMemFree(d->lut);
    stoke__dev_module_unload(d);
    if (d->copy_stream) d->cu->cuStreamDestroy(d->copy_stream);
    if (d->clock_stream) d->cu->cuStreamDestroy(d->clock_stream);
    stoke__dev_leave(d);
  }
  if (d->cu && d->ctx_retained) d->cu->cuDevicePrimaryCtxRelease(d->device);
  for (size_t i = 0; i < stoke__dev_n_slots(d); i++) {
    stoke__free(l->alloc, d->dslots[i].indices);
    stoke__free(l->alloc, d->dslots[i].dev);
  }
  stoke__free(l->alloc, d->dslots);
  /* next() would hand out the host slots again (a loader that failed
  ** half way is freed next). */
  l->outlet.slots = l->slots;
  l->outlet.n_slots = l->n_slots;
  for (size_t i = 0; i < l->n_slots && l->slots; i++) {
    stoke__free(l->alloc, l->slots[i].dev);
    l->slots[i].dev = NULL;
  }
  stoke__free(l->alloc, d->reclaim);
  stoke__free(l->alloc, d->entry_scratch);
  stoke__free_aligned(l->alloc, d->stats);
  if (d->cv_made) pthread_cond_destroy(&d->cv);
  stoke__free(l->alloc, d);
  l->outlet.dev = NULL;
}

/* ---- what serves --------------------------------------------------------- */

int stoke_loader_device(const stoke_loader *l, stoke_device_info *out) {
  if (!l || !out || out->struct_size == 0) return STOKE_EINVAL;
  stoke_device_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  const stoke__dev *d = l->outlet.dev;
  info.device = -1;
  info.clock = l->cclock.clock;
  if (!d) {
    snprintf(info.reason, sizeof info.reason, "host: no device asked for");
    snprintf(info.normalize, sizeof info.normalize, "host");
  } else {
    info.requested = d->want;
    info.backend = d->backend;
    if (d->cu) {
      info.device = d->ordinal;
      snprintf(info.name, sizeof info.name, "%s", d->name);
      info.total_bytes = d->total_bytes;
      info.free_bytes = d->free_bytes;
    }
    info.driver_version = d->driver_version;
    info.n_device_slots = stoke__dev_n_slots(d);
    info.device_bytes = d->backend == STOKE_BACKEND_CUDA ? d->device_bytes : 0;
    info.normalize_on_device = d->norm_field >= 0;
    snprintf(info.reason, sizeof info.reason, "%s", d->reason);
    snprintf(info.normalize, sizeof info.normalize, "%s", d->norm_reason);
  }
  size_t n = STOKE__MIN(out->struct_size, sizeof info);
  info.struct_size = n;
  memcpy(out, &info, n);
  return 0;
}

int stoke_batch_memory(const stoke_batch *b, int *device) {
  if (device) *device = -1;
  if (!b) return STOKE_EINVAL;
  const stoke__dev *d = b->owner->outlet.dev;
  if (b->on_device) {
    if (device) *device = d->ordinal;
    return STOKE_MEMORY_CUDA;
  }
  if (d && d->pinned) {
    if (device) *device = d->ordinal;
    return STOKE_MEMORY_PINNED;
  }
  return STOKE_MEMORY_HOST;
}
