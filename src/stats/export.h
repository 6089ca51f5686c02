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

/* One JSON line (kind "steps"): the steady state so far, at `step`
** (steps handed out in all, warm-up included) of `epoch`. */
int stoke__jsonl_steps(FILE *f, const stoke_stats *st,
                       const stoke__export_labels *lb, uint64_t epoch,
                       uint64_t step);
/* One JSON line (kind "epoch"): a finished epoch's record. */
int stoke__jsonl_epoch(FILE *f, const stoke_epoch_stats *e,
                       const stoke__export_labels *lb);

/* The writers' schedule, shared by the loader's feature and stoke_twoclock:
** which of them is on, when each is due, the open JSON-lines file.  The
** driving thread only. */
typedef struct stoke__exporter {
  char *metrics_path, *jsonl_path, *loader; /* owned copies, or NULL */
  FILE *jsonl;
  int64_t every_ns, next_ns;   /* metrics: the period, the next write */
  uint64_t every_steps;        /* a JSON line every this many steps */
  uint64_t steps;              /* steps handed out so far */
  stoke__export_labels lb;
  unsigned failures;           /* writes that failed after create */
} stoke__exporter;

enum { STOKE__EXPORT_LINE = 1, STOKE__EXPORT_METRICS = 2 };

/* Copies the paths and opens the JSON lines (appending); writes a first
** metrics file, so that a bad path fails here and not an hour later.
** 0, STOKE_ENOMEM or STOKE_EIO (the reason in err).  With neither path it
** is off and costs nothing. */
int stoke__exporter_init(stoke__exporter *e, const stoke_allocator *a,
                         const char *metrics_path, int64_t every_ns,
                         const char *jsonl_path, uint64_t every_steps,
                         const char *loader, unsigned rank,
                         const stoke_stats *zero, char *err, size_t err_cap);
void stoke__exporter_free(stoke__exporter *e, const stoke_allocator *a);
static inline bool stoke__exporter_on(const stoke__exporter *e) {
  return e->metrics_path || e->jsonl;
}
/* A step was handed out at `now` (0: not known, the clock is read, only
** with a metrics file): what is due (STOKE__EXPORT_* bits). */
unsigned stoke__exporter_step(stoke__exporter *e, int64_t now);
/* Write what is due from st (the steady state so far) at `epoch`. */
void stoke__exporter_emit(stoke__exporter *e, unsigned due,
                          const stoke_stats *st, uint64_t epoch);
/* An epoch ended with record rec: its line, and the metrics. */
void stoke__exporter_epoch(stoke__exporter *e, const stoke_epoch_stats *rec,
                           const stoke_stats *st);

#endif /* STOKE_STATS_EXPORT_H */
