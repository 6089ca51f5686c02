/* cmd_inspect.c — "stoke inspect DATA": what a dataset holds (samples,
** classes and their counts, formats, file size and resolution statistics,
** skipped files) and one batch through the loader described as a batch
** inspector does (per field: shape, dtype, bytes, pinned or not). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char cmd_inspect_usage[] =
    "usage: stoke inspect DATA [--transform SPEC] [-b N] [--probe N]\n"
    "       stoke inspect --verify DATA [--quarantine FILE] [-j N]\n"
    "\n"
    "Describe an image dataset (an ImageFolder directory, tar shards or\n"
    "packed shards): samples, classes and their counts, formats, file size\n"
    "and resolution statistics, skipped files, then one batch made through\n"
    "the loader (shape, dtype, bytes, pinned or not).\n"
    "\n"
    "With --verify, decode every sample once, whole, on all cores (the\n"
    "loader decodes only a crop's window), and for packed shards check every\n"
    "sample's CRC-32; list the bad ones, and with --quarantine write them to\n"
    "FILE for 'stoke bench --quarantine' and the loader's quarantine_path\n"
    "(docs/quarantine.md).  Exit status 1 when a sample is bad.\n"
    "\n"
    "  --transform SPEC       as for bench (random-resized-crop=224,flip,chw,u8)\n"
    "  -b, --batch-size N     samples in the described batch (8)\n"
    "  --probe N              read the headers of at most N samples, spread\n"
    "                         over the dataset (all)\n"
    "  --verify               decode and check every sample (see above)\n"
    "  --quarantine FILE      --verify: write the bad samples here (replaced\n"
    "                         once the whole dataset is checked)\n"
    "  -j, --workers N        --verify: threads (online CPUs)\n"
    "  --json FILE            write the description as JSON ('-' = stdout)\n";

enum {
  O_TRANSFORM = 1,
  O_BATCH,
  O_PROBE,
  O_JSON,
  O_HELP,
  O_VERIFY,
  O_QUARANTINE,
  O_WORKERS
};

static const cli_opt inspect_opts[] = {{"transform", 0, 1, O_TRANSFORM},
                                       {"batch-size", 'b', 1, O_BATCH},
                                       {"probe", 0, 1, O_PROBE},
                                       {"json", 0, 1, O_JSON},
                                       {"help", 'h', 0, O_HELP},
                                       {"verify", 0, 0, O_VERIFY},
                                       {"quarantine", 0, 1, O_QUARANTINE},
                                       {"workers", 'j', 1, O_WORKERS},
                                       {NULL, 0, 0, 0}};

/* ---- --verify ------------------------------------------------------------ */

static int show_progress(void *user, size_t done, size_t total,
                         size_t n_bad) {
  char bad[32];
  snprintf(bad, sizeof bad, "%zu bad", n_bad);
  cli_progress_show(user, done, total, bad, bad);
  return 0;
}

static int verify(const char *data, stoke_source *src, const char *qpath,
                  unsigned threads, FILE *f, cJSON *root) {
  stoke_verify_config vc;
  stoke_verify_config_init(&vc);
  vc.n_threads = threads;
  vc.quarantine_path = qpath;
  cli_progress view;
  cli_progress_init(&view, stderr, "verify");
  vc.progress = show_progress;
  vc.user = &view;
  stoke_verify_result res;
  double t0 = view.t0;
  if (stoke_verify(src, &vc, &res) != 0) {
    cli_error("%s", stoke_errmsg(NULL));
    return CLI_ERROR;
  }
  double secs = cli_now_s() - t0;
  fprintf(f, "verified %zu samples (%.1f MB) in %.2f s: %zu bad%s\n",
          res.n_samples, (double)res.bytes / 1e6, secs, res.n_bad,
          strcmp(stoke_source_kind(src), "packed") == 0
              ? ", every CRC-32 checked"
              : "");
  for (size_t k = 0; k < res.n_listed; k++)
    fprintf(f, "  sample %zu (%s): %s\n", res.bad[k].index, res.bad[k].where,
            res.bad[k].reason);
  if (res.n_bad > res.n_listed)
    fprintf(f, "  ... and %zu more%s%s\n", res.n_bad - res.n_listed,
            qpath ? ", all in " : "", qpath ? qpath : "");
  if (qpath) fprintf(f, "quarantine: %s\n", qpath);
  cJSON *o = cJSON_AddObjectToObject(root, "verify");
  cJSON_AddNumberToObject(o, "samples", (double)res.n_samples);
  cJSON_AddNumberToObject(o, "bad", (double)res.n_bad);
  cJSON_AddNumberToObject(o, "bytes", (double)res.bytes);
  cJSON_AddNumberToObject(o, "seconds", secs);
  cJSON_AddBoolToObject(o, "crc_checked",
                        strcmp(stoke_source_kind(src), "packed") == 0);
  if (qpath)
    cJSON_AddStringToObject(o, "quarantine", qpath);
  else
    cJSON_AddNullToObject(o, "quarantine");
  cJSON *a = cJSON_AddArrayToObject(o, "first_bad");
  for (size_t k = 0; a && k < res.n_listed; k++) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "index", (double)res.bad[k].index);
    cJSON_AddStringToObject(e, "where", res.bad[k].where);
    cJSON_AddStringToObject(e, "reason", res.bad[k].reason);
    cJSON_AddItemToArray(a, e);
  }
  if (res.n_bad) {
    cli_error("%s: %zu bad sample%s%s%s", data, res.n_bad,
              res.n_bad == 1 ? "" : "s", qpath ? ", listed in " : "",
              qpath ? qpath : "");
    return CLI_ERROR;
  }
  return CLI_OK;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* min / median / mean / max of a sorted array, as text and JSON. */
static void stat_u32(FILE *f, cJSON *o, const char *name, uint32_t *v,
                     size_t n) {
  qsort(v, n, sizeof *v, cmp_u32);
  double sum = 0;
  for (size_t i = 0; i < n; i++) sum += v[i];
  fprintf(f, "  %-8s min %u  median %u  mean %.0f  max %u\n", name, v[0],
          v[n / 2], sum / (double)n, v[n - 1]);
  cJSON *s = cJSON_AddObjectToObject(o, name);
  cJSON_AddNumberToObject(s, "min", v[0]);
  cJSON_AddNumberToObject(s, "median", v[n / 2]);
  cJSON_AddNumberToObject(s, "mean", sum / (double)n);
  cJSON_AddNumberToObject(s, "max", v[n - 1]);
}

static int describe_batch(FILE *f, cJSON *root, stoke_source *src,
                          size_t batch) {
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.source = src;
  cfg.batch_size = batch;
  cfg.n_workers = 0;
  cfg.prefetch_next_epoch = 0;
  stoke_loader *l;
  if (stoke_loader_create(&cfg, &l) != 0) {
    cli_error("%s", stoke_errmsg(NULL));
    return CLI_ERROR;
  }
  stoke_batch *b;
  int rc = stoke_loader_next(l, &b);
  if (rc != STOKE_OK) {
    cli_error("%s", rc == STOKE_END ? "inspect: no batch" : stoke_errmsg(l));
    stoke_loader_destroy(l);
    return CLI_ERROR;
  }
  fprintf(f, "\none batch (batch %zu of epoch %llu, %zu samples):\n",
          stoke_batch_number(b), (unsigned long long)stoke_batch_epoch(b),
          stoke_batch_size(b));
  cJSON *fields = cJSON_AddArrayToObject(root, "batch");
  for (size_t i = 0; i < stoke_batch_n_fields(b); i++) {
    stoke_tensor t;
    stoke_batch_field(b, i, &t);
    /* As PyTorch prints a shape: (8, 3, 224, 224), and (8,) for one. */
    char shape[128];
    size_t len = 0;
    for (int d = 0; d < t.ndim && len < sizeof shape; d++)
      len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%lld",
                              d ? ", " : "", (long long)t.shape[d]);
    if (t.ndim == 1 && len < sizeof shape)
      snprintf(shape + len, sizeof shape - len, ",");
    /* Host memory until the device stage lands: never pinned yet. */
    fprintf(f, "  batch.%-6s shape=(%s) dtype=%s bytes=%zu pinned=False\n",
            t.name, shape, stoke_dtype_name(t.dtype), t.n_bytes);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", t.name);
    cJSON *sh = cJSON_AddArrayToObject(e, "shape");
    for (int d = 0; d < t.ndim; d++)
      cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t.shape[d]));
    cJSON_AddStringToObject(e, "dtype", stoke_dtype_name(t.dtype));
    cJSON_AddNumberToObject(e, "bytes", (double)t.n_bytes);
    cJSON_AddBoolToObject(e, "pinned", 0);
    cJSON_AddItemToArray(fields, e);
  }
  stoke_batch_release(b);
  stoke_loader_destroy(l);
  return CLI_OK;
}

int cmd_inspect(int argc, char **argv) {
  const char *data = NULL, *json_path = NULL, *qpath = NULL;
  stoke_image_config ic;
  stoke_image_config_init(&ic);
  size_t batch = 8, probe = (size_t)-1;
  int do_verify = 0;
  unsigned threads = 0;
  cli_parser p;
  cli_parser_init(&p, argc, argv, "inspect");
  const char *v;
  int id;
  while ((id = cli_next_opt(&p, inspect_opts, &v)) != CLI_OPT_END) {
    switch (id) {
    case CLI_OPT_ERROR:
      return CLI_USAGE;
    case CLI_OPT_ARG:
      if (data) {
        cli_error("inspect: one dataset only, got '%s' and '%s'", data, v);
        return CLI_USAGE;
      }
      data = v;
      break;
    case O_HELP:
      fputs(cmd_inspect_usage, stdout);
      return CLI_OK;
    case O_TRANSFORM:
      ic.transform = v;
      break;
    case O_BATCH:
      if (cli_parse_size_t(p.flag, v, 1, &batch) != 0) return CLI_USAGE;
      break;
    case O_PROBE:
      if (cli_parse_size_t(p.flag, v, 1, &probe) != 0) return CLI_USAGE;
      break;
    case O_JSON:
      json_path = v;
      break;
    case O_VERIFY:
      do_verify = 1;
      break;
    case O_QUARANTINE:
      qpath = v;
      break;
    case O_WORKERS:
      if (cli_parse_uint(p.flag, v, 1, 4096, &threads) != 0) return CLI_USAGE;
      break;
    }
  }
  if (!data) {
    cli_error("inspect: needs a dataset; see 'stoke help inspect'");
    return CLI_USAGE;
  }
  if ((qpath || threads) && !do_verify) {
    cli_error("%s: only with --verify", qpath ? "--quarantine" : "--workers");
    return CLI_USAGE;
  }
  stoke_source *src;
  if (stoke_source_create_images(data, &ic, &src) != 0) {
    cli_error("%s", stoke_errmsg(NULL));
    /* A malformed transform spec is the caller's usage mistake. */
    return strncmp(stoke_errmsg(NULL), "transform", 9) == 0 ? CLI_USAGE
                                                            : CLI_ERROR;
  }
  FILE *json = NULL;
  if (json_path && !(json = cli_open_output(json_path))) {
    stoke_source_destroy(src);
    return CLI_ERROR;
  }
  FILE *f = json == stdout ? stderr : stdout;
  cJSON *root = cJSON_CreateObject();
  size_t n = stoke_source_n_samples(src), nc = stoke_source_n_classes(src);
  char shown[1024]; /* a URL without its user-info and query */
  stoke_path_shown(data, shown, sizeof shown);
  fprintf(f, "%s: %s, %zu samples, %zu classes\n", shown,
          stoke_source_kind(src), n, nc);
  cJSON_AddStringToObject(root, "path", shown);
  cJSON_AddStringToObject(root, "kind", stoke_source_kind(src));
  cJSON_AddNumberToObject(root, "samples", (double)n);
  stoke_pack_info pi;
  if (stoke_source_pack_info(src, &pi) == 0) {
    /* What stoke pack recorded: lossless, or resized at pack time. */
    if (pi.max_side)
      fprintf(f, "packed: %zu shard%s, resized at pack time to a longer side "
                 "of at most %u px, JPEG quality %d%s\n",
              pi.n_shards, pi.n_shards == 1 ? "" : "s", pi.max_side,
              pi.quality, pi.mixed ? " (the shards disagree: mixed packs)"
                                   : "");
    else
      fprintf(f, "packed: %zu shard%s, sizes as stored (no --max-side)\n",
              pi.n_shards, pi.n_shards == 1 ? "" : "s");
    cJSON *po = cJSON_AddObjectToObject(root, "packed");
    cJSON_AddNumberToObject(po, "shards", (double)pi.n_shards);
    cJSON_AddNumberToObject(po, "resized_shards", (double)pi.n_resized);
    cJSON_AddNumberToObject(po, "max_side", pi.max_side);
    cJSON_AddNumberToObject(po, "quality", pi.quality);
    cJSON_AddBoolToObject(po, "mixed", pi.mixed);
  }
  if (do_verify) {
    int rc = verify(shown, src, qpath, threads, f, root);
    int wrc = json ? cli_write_json(json_path, json, root) : CLI_OK;
    cJSON_Delete(root);
    stoke_source_destroy(src);
    return rc != CLI_OK ? rc : wrc;
  }

  /* Class counts from the labels (no file is read for them). */
  size_t max_label = nc;
  for (size_t i = 0; i < n; i++) {
    int64_t lab = stoke_source_label(src, i);
    if (lab >= 0 && (size_t)lab + 1 > max_label) max_label = (size_t)lab + 1;
  }
  size_t *counts = calloc(max_label ? max_label : 1, sizeof *counts);
  for (size_t i = 0; i < n; i++) {
    int64_t lab = stoke_source_label(src, i);
    if (lab >= 0) counts[lab]++;
  }
  cJSON *cl = cJSON_AddArrayToObject(root, "classes");
  fprintf(f, "classes:\n");
  for (size_t c = 0; c < max_label; c++) {
    const char *name = c < nc ? stoke_source_class_name(src, c) : NULL;
    if (c < 12 || c + 3 >= max_label)
      fprintf(f, "  %4zu  %-24s %zu\n", c, name ? name : "-", counts[c]);
    else if (c == 12)
      fprintf(f, "  ...\n");
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "label", (double)c);
    if (name) cJSON_AddStringToObject(e, "name", name);
    cJSON_AddNumberToObject(e, "count", (double)counts[c]);
    cJSON_AddItemToArray(cl, e);
  }
  free(counts);

  /* Headers of (up to) `probe` samples spread evenly over the dataset. */
  size_t m = probe < n ? probe : n, jpeg = 0, png = 0, prog = 0, cuts = 0,
         gray = 0, alpha = 0;
  uint32_t *w = calloc(m ? m : 1, sizeof *w), *h = calloc(m ? m : 1, sizeof *h);
  size_t *bytes = calloc(m ? m : 1, sizeof *bytes);
  int rc = CLI_OK;
  for (size_t k = 0; k < m; k++) {
    size_t i = m == n ? k : k * n / m;
    stoke_image_info info;
    if (stoke_source_probe(src, i, &info) != 0) {
      cli_error("%s", stoke_errmsg(NULL));
      rc = CLI_ERROR;
      break;
    }
    w[k] = info.width;
    h[k] = info.height;
    bytes[k] = info.bytes;
    jpeg += info.format == STOKE_IMAGE_JPEG;
    png += info.format == STOKE_IMAGE_PNG;
    prog += info.progressive != 0;
    cuts += info.restart_cuts != 0;
    gray += info.channels == 1;
    alpha += info.has_alpha != 0;
  }
  if (rc == CLI_OK && m > 0) {
    fprintf(f, "%zu headers read: %zu JPEG (%zu progressive, %zu with "
               "restart cuts), %zu PNG; %zu grayscale, %zu with alpha\n",
            m, jpeg, prog, cuts, png, gray, alpha);
    cJSON *st = cJSON_AddObjectToObject(root, "probed");
    cJSON_AddNumberToObject(st, "n", (double)m);
    cJSON_AddNumberToObject(st, "jpeg", (double)jpeg);
    cJSON_AddNumberToObject(st, "png", (double)png);
    cJSON_AddNumberToObject(st, "progressive", (double)prog);
    cJSON_AddNumberToObject(st, "restart_cuts", (double)cuts);
    cJSON_AddNumberToObject(st, "grayscale", (double)gray);
    cJSON_AddNumberToObject(st, "alpha", (double)alpha);
    stat_u32(f, st, "width", w, m);
    stat_u32(f, st, "height", h, m);
    qsort(bytes, m, sizeof *bytes, cmp_size);
    double sum = 0;
    for (size_t k = 0; k < m; k++) sum += (double)bytes[k];
    fprintf(f, "  %-8s min %zu  median %zu  mean %.0f  max %zu\n", "bytes",
            bytes[0], bytes[m / 2], sum / (double)m, bytes[m - 1]);
    cJSON *b = cJSON_AddObjectToObject(st, "bytes");
    cJSON_AddNumberToObject(b, "min", (double)bytes[0]);
    cJSON_AddNumberToObject(b, "median", (double)bytes[m / 2]);
    cJSON_AddNumberToObject(b, "mean", sum / (double)m);
    cJSON_AddNumberToObject(b, "max", (double)bytes[m - 1]);
  }
  free(w);
  free(h);
  free(bytes);
  size_t n_skip = stoke_source_n_skipped(src);
  cJSON *sk = cJSON_AddArrayToObject(root, "skipped");
  if (rc == CLI_OK && n_skip) fprintf(f, "skipped %zu files:\n", n_skip);
  for (size_t k = 0; rc == CLI_OK && k < n_skip; k++) {
    const char *why, *path = stoke_source_skipped(src, k, &why);
    if (k < 20) fprintf(f, "  %s: %s\n", path, why ? why : "");
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "path", path ? path : "");
    cJSON_AddStringToObject(e, "reason", why ? why : "");
    cJSON_AddItemToArray(sk, e);
  }
  if (rc == CLI_OK) rc = describe_batch(f, root, src, batch < n ? batch : n);
  if (rc == CLI_OK && json) rc = cli_write_json(json_path, json, root);
  else if (json && json != stdout) fclose(json);
  cJSON_Delete(root);
  stoke_source_destroy(src);
  return rc;
}
