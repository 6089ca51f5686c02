/* export.h — the statistics for the tools people already run: Prometheus'
** text exposition (node_exporter's textfile collector reads it) and JSON
** lines, one writer for the loader's feature (src/pipeline/metrics.c) and
** stoke_twoclock alike, so the CLI and Python write the same text.
**
** Both take a stoke_stats snapshot; neither keeps anything.  The metrics
** file is written whole to PATH.tmp.<pid> and renamed over PATH, so a
** collector never reads half of one.  Thread-safety: any thread; two
** writers of one path are the caller's to avoid. */
#ifndef STOKE_STATS_EXPORT_H
#define STOKE_STATS_EXPORT_H

#include "stats/stats.h"

#include <pthread.h>
#include <stdio.h>

/* What every sample of one loader is labelled with. */
typedef struct stoke__export_labels {
  unsigned rank;
  const char *loader;          /* NULL: "loader" */
} stoke__export_labels;

/* The exposition text of st to f.  0 or STOKE_EIO. */
int stoke__metrics_print(FILE *f, const stoke_stats *st,
                         const stoke__export_labels *lb);
/* The same, atomically to path.  0, or STOKE_EIO with the reason in buf. */
int stoke__metrics_write(const char *path, const stoke_stats *st,
                         const stoke__export_labels *lb, char *err,
                         size_t err_cap);

/* One JSON line (kind "epoch"): a finished epoch's record. */
int stoke__jsonl_epoch(FILE *f, const stoke_epoch_stats *e,
                       const stoke__export_labels *lb);

/* The writers' schedule, shared by the loader's feature and stoke_twoclock.
**
** The driving thread pays a count and a compare per step (the JSON lines'
** boundary) and nothing for the metrics: the writing happens on the
** exporter's own thread (stoke-export), which takes the snapshot through
** `fill` (the owner's statistics calls, safe from any thread), formats and
** writes.  A JSON line that comes due wakes it; the metrics file is its
** timer's.  It takes a snapshot for lines at most every 10 ms: lines that
** come due faster (a loop of microsecond steps) are written together, each
** numbered by its step, from one snapshot.  An
** epoch's end and the stop are written on the driving thread itself, after
** the lines still pending, so that a reader finds the file whole when the
** epoch or the run is over.  Without the thread (it could not be started,
** or before start) the lines are written on the driving thread as they come
** due and the metrics only at epochs' ends and at the stop.
**
** Locks: write_mu (who writes the files; the driving thread and the
** exporter's) is taken before mu (what is due), never the other way. */
typedef void (*stoke__export_fill_fn)(void *ctx, stoke_stats *out);

typedef struct stoke__exporter {
  char *metrics_path, *jsonl_path, *loader; /* owned copies, or NULL */
  stoke__export_labels lb;
  stoke__export_fill_fn fill;  /* the steady state so far, any thread */
  void *ctx;
  int64_t every_ns;            /* metrics: the period */
  uint64_t every_steps;        /* a JSON line every this many steps */
  /* The driving thread's. */
  uint64_t steps;              /* steps handed out so far */
  uint64_t next_line;          /* the step of the next JSON line */
  uint64_t epochs;             /* epochs ended: the lines' epoch */
  /* Protected by write_mu. */
  pthread_mutex_t write_mu;
  FILE *jsonl;
  uint64_t written_step;       /* the last line's step */
  unsigned failures;           /* writes that failed after create */
  /* Protected by mu. */
  pthread_mutex_t mu;
  pthread_cond_t cv;           /* a line came due, or stop */
  uint64_t due_step;           /* the latest line due */
  uint64_t due_epoch;          /* its epoch */
  bool waiting;                /* the exporter's thread sleeps on cv with
                                  no line due: a line due wakes it */
  bool stop;
  /* The exporter's thread, or NULL; next_ns is its own once started. */
  struct stoke__thread *thread;
  int64_t next_ns;             /* the next metrics write */
  bool have_sync;              /* the locks exist (init got that far) */
} stoke__exporter;

/* Copies the paths and opens the JSON lines (appending); writes a first
** metrics file (zero: its statistics), so that a bad path fails here and
** not an hour later.  fill(ctx, out) gives the steady state so far; it
** must be callable from any thread until stoke__exporter_stop.  0,
** STOKE_ENOMEM or STOKE_EIO (the reason in err).  With neither path it is
** off and costs nothing. */
int stoke__exporter_init(stoke__exporter *e, const stoke_allocator *a,
                         const char *metrics_path, int64_t every_ns,
                         const char *jsonl_path, uint64_t every_steps,
                         const char *loader, unsigned rank,
                         const stoke_stats *zero,
                         stoke__export_fill_fn fill, void *ctx, char *err,
                         size_t err_cap);
/* Start the exporter's thread (once the owner's statistics can be read).
** Without it (no thread to be had) the writes stay on the driving thread:
** never worth failing a loader for. */
void stoke__exporter_start(stoke__exporter *e, const stoke_allocator *a);
/* Join the thread, write the lines still due and the last metrics.  The
** driving thread; idempotent. */
void stoke__exporter_stop(stoke__exporter *e, const stoke_allocator *a);
/* stop, close, free; e may be half made by a failed init. */
void stoke__exporter_free(stoke__exporter *e, const stoke_allocator *a);
static inline bool stoke__exporter_on(const stoke__exporter *e) {
  return e->metrics_path || e->jsonl_path;
}
/* The slow side of stoke__exporter_step: a JSON line is due. */
void stoke__exporter_line_due(stoke__exporter *e);
/* A step was handed out (the driving thread): a count and a compare. */
static inline void stoke__exporter_step(stoke__exporter *e) {
  if (e->every_steps && ++e->steps >= e->next_line)
    stoke__exporter_line_due(e);
}
/* An epoch ended with record rec (NULL: none kept): the lines still due
** and its line, written before it returns (the metrics stay on their
** timer: the writer's thread, or without one this call when it is due). */
void stoke__exporter_epoch(stoke__exporter *e, const stoke_epoch_stats *rec);

#endif /* STOKE_STATS_EXPORT_H */
