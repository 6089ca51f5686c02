/* tune_io.c — `stoke tune`'s io_concurrency sweep (tune_io.h).
**
** The library sweeps (stoke_tune_io_sweep) and picks the knee
** (stoke_tune_io_knee_find); the tool gives it the way to make a source at
** another io_concurrency (the same data and image settings, that one
** changed), and reports. */
#include "tune_io.h"

#include <string.h>

typedef struct make_ctx {
  const char *data;
  const stoke_image_config *image;
} make_ctx;

static int make_source(void *user, unsigned io, stoke_source **out) {
  const make_ctx *m = user;
  stoke_image_config ic = *m->image;
  ic.io_concurrency = io;
  return stoke_source_create_images(m->data, &ic, out);
}

int tune_io_run(tune_io *io, const stoke_tune_config *tc,
                const stoke_tune_point *k, const char *data,
                const stoke_image_config *image, const unsigned *values,
                size_t n_values, int have_consumer) {
  memset(io, 0, sizeof *io);
  if (!data) return 0;
  if (!k->io_concurrency) {
    if (stoke_path_is_remote(data))
      snprintf(io->why_not, sizeof io->why_not,
               "io_concurrency not swept: the run read no remote shard "
               "while it ran (cached shards are local files)");
    return 0;
  }
  make_ctx m = {data, image};
  stoke_tune_io_config c;
  stoke_tune_io_config_init(&c);
  c.tune = tc;
  c.n_workers = k->n_workers;
  c.prefetch = k->prefetch;
  c.batch_size = k->batch_size;
  c.values = values;
  c.n_values = n_values;
  c.source = make_source;
  c.source_user = &m;
  io->ran = 1;
  int rc = stoke_tune_io_sweep(&c, io->pts, TUNE_IO_MAX, &io->n);
  if (rc < 0) {
    snprintf(io->msg, sizeof io->msg, "%s", stoke_errmsg(NULL));
    io->stopped = 1;
  }
  io->have_knee = io->n && stoke_tune_io_knee_find(io->pts, io->n,
                                                   tc->tolerance,
                                                   have_consumer,
                                                   &io->knee) == 0;
  return rc < 0 ? rc : 0;
}

void tune_io_print(FILE *f, const tune_io *io) {
  if (io->why_not[0]) fprintf(f, "\n%s\n", io->why_not);
  if (!io->ran || !io->n) return;
  const stoke_tune_point *p0 = &io->pts[0];
  fprintf(f, "\nio_concurrency at the knee (%u worker%s, prefetch %u, batch "
             "%zu), a source of its own each:\n",
          p0->n_workers, p0->n_workers == 1 ? "" : "s", p0->prefetch,
          p0->batch_size);
  double best = io->have_knee ? io->pts[io->knee.best].samples_per_s : 0;
  fprintf(f, "io_concurrency   samples/s  of best  waiting  verdict\n");
  for (size_t i = 0; i < io->n; i++) {
    const stoke_tune_point *p = &io->pts[i];
    if (p->status != STOKE_TUNE_MEASURED) continue;
    if (!p->io_concurrency) {
      fprintf(f, "%14s  %10.1f  %7s  %6.1f%%  %-9s  %s\n", "-",
              p->samples_per_s, "-", 100 * p->wait_ratio,
              stoke_verdict_name(p->verdict), p->note);
      continue;
    }
    fprintf(f, "%14u  %10.1f  %6.1f%%  %6.1f%%  %-9s", p->io_concurrency,
            p->samples_per_s, best > 0 ? 100 * p->samples_per_s / best : 0,
            100 * p->wait_ratio, stoke_verdict_name(p->verdict));
    if (io->have_knee && i == io->knee.index)
      fputs("  <- knee", f);
    else if (io->have_knee && i == io->knee.best)
      fputs("  (best)", f);
    fputc('\n', f);
  }
  if (io->have_knee)
    fprintf(f, "io knee: %s\n", io->knee.reason);
}

void tune_io_json(cJSON *root, cJSON *knee, const tune_io *io,
                  int batch_swept) {
  if (!root || !io->ran) return;
  cJSON *o = cJSON_AddObjectToObject(root, "io_sweep");
  if (!o) return;
  const stoke_tune_point *p0 = &io->pts[0];
  cJSON_AddNumberToObject(o, "workers", p0->n_workers);
  cJSON_AddNumberToObject(o, "prefetch", p0->prefetch);
  cJSON_AddNumberToObject(o, "batch_size", (double)p0->batch_size);
  cJSON *arr = cJSON_AddArrayToObject(o, "points");
  for (size_t i = 0; arr && i < io->n; i++)
    cJSON_AddItemToArray(arr, report_tune_point_json(&io->pts[i]));
  if (io->msg[0]) cJSON_AddStringToObject(o, "error", io->msg);
  if (!io->have_knee) {
    cJSON_AddNullToObject(o, "knee");
    return;
  }
  const stoke_tune_point *k = &io->pts[io->knee.index];
  cJSON *kj = cJSON_AddObjectToObject(o, "knee");
  char flags[128];
  report_tune_flags(flags, sizeof flags, k, batch_swept);
  if (kj) {
    cJSON_AddNumberToObject(kj, "index", (double)io->knee.index);
    cJSON_AddNumberToObject(kj, "best_index", (double)io->knee.best);
    cJSON_AddNumberToObject(kj, "io_concurrency", k->io_concurrency);
    cJSON_AddNumberToObject(kj, "samples_per_s", k->samples_per_s);
    cJSON_AddNumberToObject(kj, "best_samples_per_s",
                            io->pts[io->knee.best].samples_per_s);
    cJSON_AddNumberToObject(kj, "wait_ratio", k->wait_ratio);
    cJSON_AddStringToObject(kj, "verdict", stoke_verdict_name(k->verdict));
    if (io->knee.stall_removed < 0)
      cJSON_AddNullToObject(kj, "stall_removed");
    else
      cJSON_AddBoolToObject(kj, "stall_removed", io->knee.stall_removed);
    cJSON_AddStringToObject(kj, "reason", io->knee.reason);
    cJSON_AddStringToObject(kj, "flags", flags);
  }
  /* The knee to paste is the worker knee at the io knee's requests. */
  if (knee) {
    cJSON_DeleteItemFromObjectCaseSensitive(knee, "io_concurrency");
    cJSON_AddNumberToObject(knee, "io_concurrency", k->io_concurrency);
    cJSON_ReplaceItemInObjectCaseSensitive(knee, "flags",
                                           cJSON_CreateString(flags));
  }
}
