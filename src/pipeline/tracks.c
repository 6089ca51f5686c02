/* tracks.c — the loader's trace (cfg.trace_events > 0): one track per
** thread that works on its batches, each with its own lock, written out as
** a Chrome trace.  Track 0 is the consumer, track 1 + i worker i (the
** inline producer at W = 0), and with CUDA events the copy stream's and
** the consumer stream's last.  Timestamps start at the loader's
** creation (t0_ns, also the autotuner's clock origin). */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/pipeline.h"
#include "pipeline/outlet_device.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Tracks beyond the consumer and the workers: the copy stream's and the
** consumer stream's, when CUDA events time them. */
static size_t device_tracks(const stoke_loader *l) {
  return l->outlet.dev && l->outlet.dev->clock_stream ? 2 : 0;
}

int stoke__tracks_create(stoke_loader *l) {
  stoke__tracks *t = &l->tracks;
  t->t0_ns = stoke__now_ns();
  if (l->cfg.trace_events == 0) return 0;
  size_t n = STOKE__MAX(l->n_workers, 1) + 1 + device_tracks(l);
  t->v = stoke__calloc(l->alloc, n, sizeof *t->v);
  if (!t->v) return STOKE_ENOMEM;
  for (; t->n < n; t->n++)
    if (stoke__trace_init(&t->v[t->n], l->alloc, l->cfg.trace_events) != 0)
      return STOKE_ENOMEM;
  for (size_t i = 0; i < STOKE__MAX(l->n_workers, 1); i++)
    l->workers[i].sample.trace = &t->v[1 + i];
  if (device_tracks(l)) {
    l->outlet.dev->copy_trace = &t->v[n - 2];
    l->outlet.dev->stream_trace = &t->v[n - 1];
  }
  return 0;
}

void stoke__tracks_free(stoke__tracks *t, const stoke_allocator *a) {
  for (size_t i = 0; i < t->n; i++) stoke__trace_free(&t->v[i], a);
  stoke__free(a, t->v);
  t->v = NULL;
  t->n = 0;
}

int stoke_loader_write_trace(stoke_loader *l, const char *path) {
  if (!l || !path) return STOKE_EINVAL;
  if (!l->tracks.v) {
    pthread_mutex_lock(&l->mu);
    snprintf(l->lastmsg, sizeof l->lastmsg,
             "tracing is off: create the loader with trace_events > 0");
    pthread_mutex_unlock(&l->mu);
    return STOKE_EINVAL;
  }
  size_t n = l->tracks.n;
  stoke__trace **tracks = stoke__calloc(l->alloc, n, sizeof *tracks);
  char (*names)[32] = stoke__calloc(l->alloc, n, sizeof *names);
  const char **name_ptrs = stoke__calloc(l->alloc, n, sizeof *name_ptrs);
  int rc = tracks && names && name_ptrs ? 0 : STOKE_ENOMEM;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    tracks[i] = &l->tracks.v[i];
    size_t n_dev = device_tracks(l);
    if (i == 0)
      snprintf(names[i], sizeof names[i], "consumer");
    else if (n_dev && i == n - 2)
      snprintf(names[i], sizeof names[i], "copy stream (cuda)");
    else if (n_dev && i == n - 1)
      snprintf(names[i], sizeof names[i], "consumer stream (cuda)");
    else if (l->n_workers == 0)
      snprintf(names[i], sizeof names[i], "producer (in next())");
    else
      snprintf(names[i], sizeof names[i], "stoke-w%zu", i - 1);
    name_ptrs[i] = names[i];
  }
  FILE *f = NULL;
  int err = 0;
  if (rc == 0) {
    f = fopen(path, "w");
    if (!f) {
      err = errno;
      rc = STOKE_EIO;
    }
  }
  if (rc == 0) rc = stoke__trace_write(f, tracks, name_ptrs, n, l->tracks.t0_ns,
                                       l->alloc);
  if (f && fclose(f) != 0 && rc == 0) {
    err = errno;
    rc = STOKE_EIO;
  }
  stoke__free(l->alloc, tracks);
  stoke__free(l->alloc, names);
  stoke__free(l->alloc, name_ptrs);
  if (rc != 0) {
    pthread_mutex_lock(&l->mu);
    snprintf(l->lastmsg, sizeof l->lastmsg, "cannot write trace %s: %s",
             path, err ? strerror(err) : stoke_strerror(rc));
    pthread_mutex_unlock(&l->mu);
  }
  return rc;
}
