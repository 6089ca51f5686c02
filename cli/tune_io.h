/* tune_io.h — `stoke tune`'s io_concurrency sweep (tune_io.c): after the
** worker sweep's knee, for a remote run, the requests in flight swept as
** their own dimension (stoke_tune_io_sweep), printed and written. */
#ifndef STOKE_CLI_TUNE_IO_H
#define STOKE_CLI_TUNE_IO_H

#include "cli.h"

#define TUNE_IO_MAX 64

typedef struct tune_io {
  int ran;                     /* the sweep ran (points below) */
  stoke_tune_point pts[TUNE_IO_MAX];
  size_t n;                    /* recorded */
  stoke_tune_knee knee;
  int have_knee;
  int stopped;                 /* interrupted or an error: see msg */
  char msg[512];               /* the error, or "" */
  char why_not[256];           /* why it did not run, or "" */
} tune_io;

/* Sweep at the worker knee k (its workers, prefetch and batch size) when k
** was a remote run (k->io_concurrency set): each point a source made from
** data and image at its io_concurrency.  values/n_values: a fixed list,
** or NULL for the ladder.  0, or the library's error (io->msg). */
int tune_io_run(tune_io *io, const stoke_tune_config *tc,
                const stoke_tune_point *k, const char *data,
                const stoke_image_config *image, const unsigned *values,
                size_t n_values, int have_consumer);

/* The table and the io knee, under the worker sweep's table. */
void tune_io_print(FILE *f, const tune_io *io);

/* "io_sweep" in tune's JSON, and the knee's "io_concurrency" and "flags"
** set to the io knee's (knee: the worker knee's object, may be NULL). */
void tune_io_json(cJSON *root, cJSON *knee, const tune_io *io,
                  int batch_swept);

#endif
