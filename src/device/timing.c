/* timing.c — CUDA event times placed on the host clock, for the trace's
** copy-stream and consumer-stream tracks.
**
** Durations never come from here: a copy's time is the elapsed time of its
** own pair of events, a step's of its own (outlet_device_*.c), which the
** driver measures to about half a microsecond.  Only the place of a span
** on the trace's timeline needs the host clock.  cuEventElapsedTime gives
** float milliseconds, exact to about a microsecond up to a few seconds
** apart, so each thread keeps anchors a few seconds apart and measures an
** event from the newest anchor recorded before it was enqueued.  An anchor
** is an event on an idle stream: it completes as soon as it is submitted,
** within the microseconds the host clock reads around the record call
** take. */
#define _POSIX_C_SOURCE 200809L
#include "device/device.h"

#include <string.h>

#define ANCHOR_EVERY_NS 4000000000LL

static void record(stoke__dev *d, stoke__anchors *a) {
  size_t i = a->n % STOKE__ANCHORS;
  int64_t t0 = stoke__now_ns();
  if (d->cu->cuEventRecord(a->ev[i], d->clock_stream) != 0) return;
  int64_t t1 = stoke__now_ns();
  a->host_ns[i] = t0 + (t1 - t0) / 2;
  a->n++;
}

CUresult stoke__dev_anchors_init(stoke__dev *d, stoke__anchors *a,
                                 const char **call) {
  memset(a, 0, sizeof *a);
  *call = "cuEventCreate";
  for (size_t i = 0; i < STOKE__ANCHORS; i++) {
    CUresult rc = d->cu->cuEventCreate(&a->ev[i], STOKE__CU_EVENT_DEFAULT);
    if (rc != 0) return rc;
  }
  *call = "cuEventRecord";
  int64_t t0 = stoke__now_ns();
  CUresult rc = d->cu->cuEventRecord(a->ev[0], d->clock_stream);
  if (rc != 0) return rc;
  a->host_ns[0] = t0 + (stoke__now_ns() - t0) / 2;
  a->n = 1;
  return 0;
}

void stoke__dev_anchors_free(stoke__dev *d, stoke__anchors *a) {
  for (size_t i = 0; i < STOKE__ANCHORS; i++)
    if (a->ev[i]) d->cu->cuEventDestroy(a->ev[i]);
  memset(a, 0, sizeof *a);
}

void stoke__dev_anchors_tick(stoke__dev *d, stoke__anchors *a, int64_t now) {
  if (!a->ev[0]) return;
  size_t last = (a->n + STOKE__ANCHORS - 1) % STOKE__ANCHORS;
  if (a->n == 0 || now - a->host_ns[last] >= ANCHOR_EVERY_NS) record(d, a);
}

bool stoke__dev_elapsed_ns(const stoke__dev *d, CUevent a, CUevent b,
                           int64_t *ns) {
  float ms = 0;
  if (d->cu->cuEventElapsedTime(&ms, a, b) != 0) return false;
  double v = (double)ms * 1e6;
  *ns = v > 0 ? (int64_t)(v + 0.5) : 0;
  return true;
}

bool stoke__dev_event_host_ns(const stoke__dev *d, const stoke__anchors *a,
                              CUevent e, int64_t enq_ns, int64_t *out) {
  if (!a->n) return false;
  /* The newest anchor not after the event's enqueue: the event completed
  ** after it, so the elapsed time is positive and small.  Failing that
  ** (the event waited longer than the ring covers), the oldest kept. */
  size_t kept = a->n < STOKE__ANCHORS ? a->n : STOKE__ANCHORS;
  size_t pick = (a->n - kept) % STOKE__ANCHORS;
  for (size_t k = 0; k < kept; k++) {
    size_t i = (a->n - 1 - k) % STOKE__ANCHORS;
    if (a->host_ns[i] <= enq_ns) {
      pick = i;
      break;
    }
  }
  float ms = 0;
  if (d->cu->cuEventElapsedTime(&ms, a->ev[pick], e) != 0) return false;
  *out = a->host_ns[pick] + (int64_t)((double)ms * 1e6);
  return true;
}
