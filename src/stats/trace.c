/* trace.c — per-thread rings of timed spans, exported as Chrome Trace Event
** JSON (opens in Perfetto and chrome://tracing).
**
** Each thread (the consumer, each worker) owns one ring and pushes to it;
** the exporter copies a ring under its lock, so a trace can be written at
** any time, also while workers run ahead into the next epoch.  A full ring
** overwrites its oldest events and counts them: the latest are the steady
** state one wants to look at.  With tracing off (capacity 0) nothing here
** runs. */
#define _POSIX_C_SOURCE 200809L
#include "stats/stats.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int stoke__trace_init(stoke__trace *t, const stoke_allocator *a, size_t cap) {
  memset(t, 0, sizeof *t);
  if (pthread_mutex_init(&t->mu, NULL) != 0) return STOKE_ENOMEM;
  t->cap = cap;
  if (cap == 0) return 0;
  t->ev = stoke__calloc(a, cap, sizeof *t->ev);
  if (!t->ev) {
    pthread_mutex_destroy(&t->mu);
    return STOKE_ENOMEM;
  }
  return 0;
}

void stoke__trace_free(stoke__trace *t, const stoke_allocator *a) {
  stoke__free(a, t->ev);
  pthread_mutex_destroy(&t->mu);
}

void stoke__trace_push(stoke__trace *t, int kind, int64_t ts, int64_t dur,
                       uint64_t arg, uint32_t n) {
  if (!t || !t->cap) return;
  pthread_mutex_lock(&t->mu);
  stoke__trace_event *e = &t->ev[(t->head + t->len) % t->cap];
  if (t->len == t->cap) {
    t->head = (t->head + 1) % t->cap; /* overwrite the oldest */
    t->dropped++;
  } else {
    t->len++;
  }
  e->ts_ns = ts;
  e->dur_ns = dur;
  e->arg = arg;
  e->kind = (uint32_t)kind;
  e->n = n;
  pthread_mutex_unlock(&t->mu);
}

static const char *kind_name(uint32_t kind) {
  switch (kind) {
  case STOKE__EV_WAIT: return "wait";
  case STOKE__EV_COMPUTE: return "compute";
  case STOKE__EV_DEPTH: return "ready queue";
  case STOKE__EV_GPU_STEP: return "gpu step";
  case STOKE__EV_GPU_COPY_WAIT: return "gpu wait for copy";
  case STOKE__EV_GPU_IDLE: return "gpu idle";
  default: return stoke_stage_name((int)kind);
  }
}

static void write_event(FILE *f, const stoke__trace_event *e, int tid,
                        int64_t t0, bool *first) {
  double ts = (double)(e->ts_ns - t0) / 1e3;
  fputs(*first ? "\n" : ",\n", f);
  *first = false;
  if (e->kind == STOKE__EV_AUTOTUNE) {
    /* An instant on the whole process: the autotuner's decision. */
    fprintf(f,
            "{\"name\":\"autotune: %s\",\"cat\":\"stoke\",\"ph\":\"i\","
            "\"s\":\"g\",\"ts\":%.3f,\"pid\":1,\"tid\":%d,\"args\":{"
            "\"from_workers\":%u,\"to_workers\":%u,\"from_prefetch\":%u,"
            "\"to_prefetch\":%u}}",
            stoke_autotune_kind_name((int)e->n), ts, tid,
            (unsigned)(e->arg & 0xffff), (unsigned)(e->arg >> 16 & 0xffff),
            (unsigned)(e->arg >> 32 & 0xffff), (unsigned)(e->arg >> 48));
    return;
  }
  if (e->kind == STOKE__EV_DEPTH) {
    fprintf(f,
            "{\"name\":\"ready queue\",\"ph\":\"C\",\"ts\":%.3f,\"pid\":1,"
            "\"args\":{\"depth\":%llu}}",
            ts, (unsigned long long)e->arg);
    return;
  }
  /* Spans of the consumer, slot waits and the device's tracks are per
  ** batch; the producers' stages per sample. */
  const char *arg_name =
      e->kind >= STOKE__EV_WAIT || e->kind == STOKE_STAGE_SLOT_WAIT ||
              e->kind == STOKE_STAGE_COPY
          ? "batch"
          : "sample";
  fprintf(f,
          "{\"name\":\"%s\",\"cat\":\"stoke\",\"ph\":\"X\",\"ts\":%.3f,"
          "\"dur\":%.3f,\"pid\":1,\"tid\":%d,\"args\":{\"%s\":%llu",
          kind_name(e->kind), ts, (double)e->dur_ns / 1e3, tid, arg_name,
          (unsigned long long)e->arg);
  if (e->n > 1) fprintf(f, ",\"samples\":%u", e->n);
  fputs("}}", f);
}

int stoke__trace_write(FILE *f, stoke__trace *const *tracks,
                       const char *const *names, size_t n_tracks, int64_t t0,
                       const stoke_allocator *a) {
  fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f);
  bool first = true;
  uint64_t dropped = 0;
  for (size_t i = 0; i < n_tracks; i++) {
    fprintf(f,
            "%s\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%zu,"
            "\"args\":{\"name\":\"%s\"}}",
            first ? "" : ",", i, names[i]);
    first = false;
    stoke__trace *t = tracks[i];
    if (!t || !t->cap) continue;
    pthread_mutex_lock(&t->mu);
    size_t len = t->len, head = t->head;
    dropped += t->dropped;
    stoke__trace_event *copy = stoke__calloc(a, len ? len : 1, sizeof *copy);
    if (copy)
      for (size_t k = 0; k < len; k++) copy[k] = t->ev[(head + k) % t->cap];
    pthread_mutex_unlock(&t->mu);
    if (!copy) return STOKE_ENOMEM;
    for (size_t k = 0; k < len; k++)
      write_event(f, &copy[k], (int)i, t0, &first);
    stoke__free(a, copy);
  }
  fprintf(f, "\n],\"otherData\":{\"producer\":\"stoke %s\","
             "\"dropped_events\":%llu}}\n",
          stoke_version(), (unsigned long long)dropped);
  return ferror(f) ? STOKE_EIO : 0;
}
