/* cmd_budget.c — "stoke budget": the two memory ledgers.
**
** Device: fixed bytes (weights + gradients + optimizer) plus activations per
** sample against the device's memory less a reserve; the largest
** microbatch and the resident memory at 1, 2, 4, ..., max and max + 1
** (which does not fit).  Host: with loader options, the bytes the loader
** would allocate, term by term, checked against --mem-budget, computed by
** stoke_host_ledger_compute without creating the loader.
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

const char cmd_budget_usage[] =
    "usage: stoke budget [--fixed SIZE --per-sample SIZE --device SIZE\n"
    "                    [--reserve PCT]] [loader options] [--json FILE]\n"
    "\n"
    "The memory ledgers.  Device: the largest microbatch for which\n"
    "  fixed + microbatch x per-sample <= device - reserve x device\n"
    "and the resident memory by microbatch.  Host (with loader options): the\n"
    "bytes the loader would allocate, checked against --mem-budget.\n"
    "Sizes take units: GB = 1e9 bytes, GiB = 2^30 bytes (K, M, G alone are\n"
    "binary); give all three device sizes in the same unit.\n"
    "\n"
    "device\n"
    "  --fixed SIZE           weights + gradients + optimizer state, e.g.\n"
    "                         3.2GB\n"
    "  --per-sample SIZE      activations per sample of the microbatch\n"
    "  --device SIZE          the device's memory, e.g. 24GB\n"
    "  --reserve PCT          share kept free (10%)\n"
    "\n"
    "host\n"
    "  DATA                   an image dataset (folder, tar or packed\n"
    "                         shards, or their URLs), with --transform SPEC\n"
    "                         and the remote options as for bench\n"
    "  --synthetic KIND       the source, as for bench (sleep:5ms, tensor)\n"
    "  --samples N, --shape DxHxW, --classes N, --cost-dist D (as for bench)\n"
    "  -b, --batch-size N     samples per batch (32)\n"
    "  -j, --workers N        worker threads (0; 'cores' = online CPUs;\n"
    "                         'auto' = the most an autotuning loader\n"
    "                         allocates: its most workers and prefetch 8)\n"
    "  --prefetch K           batches prepared ahead (2)\n"
    "  --mem-budget SIZE      host bytes the loader may use\n"
    "  --cache DIR, --cache-max SIZE\n"
    "                         as for bench: remote shards kept whole in\n"
    "                         DIR/remote/ (fetched there at open, so a\n"
    "                         source all in the cache has no read-ahead)\n"
    "\n"
    "  --json FILE            write both ledgers as JSON ('-' = stdout; the\n"
    "                         tables then go to stderr)\n";

/* The source options are cli_source_opts (ids below CLI_SRC_OPT_LAST). */
enum {
  O_FIXED = CLI_SRC_OPT_LAST,
  O_PER_SAMPLE,
  O_DEVICE,
  O_RESERVE,
  O_BATCH,
  O_WORKERS,
  O_PREFETCH,
  O_MEM_BUDGET,
  O_CACHE,
  O_CACHE_MAX,
  O_JSON,
  O_HELP,
  O_LAST
};

static const cli_opt budget_own_opts[] = {{"fixed", 0, 1, O_FIXED},
                                          {"per-sample", 0, 1, O_PER_SAMPLE},
                                          {"device", 0, 1, O_DEVICE},
                                          {"reserve", 0, 1, O_RESERVE},
                                          {"batch-size", 'b', 1, O_BATCH},
                                          {"workers", 'j', 1, O_WORKERS},
                                          {"prefetch", 0, 1, O_PREFETCH},
                                          {"mem-budget", 0, 1, O_MEM_BUDGET},
                                          {"cache", 0, 1, O_CACHE},
                                          {"cache-max", 0, 1, O_CACHE_MAX},
                                          {"json", 0, 1, O_JSON},
                                          {"help", 'h', 0, O_HELP},
                                          {NULL, 0, 0, 0}};

/* "10%" or "0.1": a share in [0, 1). */
static int parse_reserve(const char *what, const char *s, double *out) {
  char *end;
  if (!((s[0] >= '0' && s[0] <= '9') || s[0] == '.'))
    goto bad;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s)
    goto bad;
  if (strcmp(end, "%") == 0) {
    v /= 100.0;
  } else if (*end) {
    goto bad;
  } else if (v >= 1) {
    cli_error("%s: a bare number is a fraction below 1; write '%s%%' for "
              "a percentage",
              what, s);
    return -1;
  }
  if (!(v >= 0 && v < 1)) {
    cli_error("%s: must be at least 0%% and below 100%%, got '%s'", what, s);
    return -1;
  }
  *out = v;
  return 0;
bad:
  cli_error("%s: expected a percentage such as 10%%, got '%s'", what, s);
  return -1;
}

/* Binary units ("GiB", or K/M/G/T alone) print in GiB, others in GB. */
static int is_binary(const char *s) {
  size_t n = strlen(s);
  if (strstr(s, "iB"))
    return 1;
  return n > 0 && strchr("KMGT", s[n - 1]) != NULL;
}

typedef struct unit {
  double div;
  const char *name;
} unit;

static void fmt_in(char *buf, size_t n, uint64_t b, unit u) {
  snprintf(buf, n, "%.2f %s", (double)b / u.div, u.name);
}

/* Microbatches shown: 1, 2, 4, ... below max, max, and max + 1. */
static size_t table_rows(uint64_t max, uint64_t *rows, size_t cap) {
  size_t n = 0;
  for (uint64_t m = 1; m < max && n + 2 < cap; m *= 2)
    rows[n++] = m;
  if (max > 0)
    rows[n++] = max;
  rows[n++] = max + 1;
  return n;
}

static void print_device(FILE *f, const stoke_device_ledger *d, unit u) {
  char fixed[32], per[32], dev[32], res[32], use[32];
  fmt_in(fixed, sizeof fixed, d->fixed_bytes, u);
  fmt_in(per, sizeof per, d->per_sample_bytes, u);
  fmt_in(dev, sizeof dev, d->device_bytes, u);
  fmt_in(res, sizeof res, d->reserve_bytes, u);
  fmt_in(use, sizeof use, d->usable_bytes, u);
  fprintf(f, "device ledger (%s = %s bytes)\n", u.name,
          u.div == 1e9 ? "1e9" : "2^30");
  fprintf(f, "  fixed          %s  (weights + gradients + optimizer)\n",
          fixed);
  fprintf(f, "  per sample     %s  (activations)\n", per);
  fprintf(f, "  device         %s, reserve %g%% = %s, usable %s\n", dev,
          100 * d->reserve_frac, res, use);
  if (d->max_microbatch)
    fprintf(f, "  largest microbatch: %llu  (floor((%s - %s) / %s))\n\n",
            (unsigned long long)d->max_microbatch, use, fixed, per);
  else
    fprintf(f, "  largest microbatch: none (%s + %s for one sample is over "
               "the usable %s)\n\n",
            fixed, per, use);
  fprintf(f, "microbatch   activations      resident   of usable  fits\n");
  uint64_t rows[80];
  size_t n = table_rows(d->max_microbatch, rows, 80);
  for (size_t i = 0; i < n; i++) {
    uint64_t r = stoke_device_ledger_resident(d, rows[i]);
    char act[32], tot[32];
    fmt_in(act, sizeof act, r - d->fixed_bytes, u);
    fmt_in(tot, sizeof tot, r, u);
    fprintf(f, "%10llu  %12s  %12s  %9.1f%%  %s\n",
            (unsigned long long)rows[i], act, tot,
            100.0 * (double)r / (double)d->usable_bytes,
            r <= d->usable_bytes ? "yes" : "no");
  }
}

static cJSON *device_json(const stoke_device_ledger *d) {
  cJSON *o = cJSON_CreateObject();
  if (!o)
    return NULL;
  cJSON_AddNumberToObject(o, "fixed_bytes", (double)d->fixed_bytes);
  cJSON_AddNumberToObject(o, "per_sample_bytes", (double)d->per_sample_bytes);
  cJSON_AddNumberToObject(o, "device_bytes", (double)d->device_bytes);
  cJSON_AddNumberToObject(o, "reserve_frac", d->reserve_frac);
  cJSON_AddNumberToObject(o, "reserve_bytes", (double)d->reserve_bytes);
  cJSON_AddNumberToObject(o, "usable_bytes", (double)d->usable_bytes);
  cJSON_AddNumberToObject(o, "max_microbatch", (double)d->max_microbatch);
  cJSON *arr = cJSON_AddArrayToObject(o, "table");
  uint64_t rows[80];
  size_t n = table_rows(d->max_microbatch, rows, 80);
  for (size_t i = 0; arr && i < n; i++) {
    cJSON *r = cJSON_CreateObject();
    if (!r)
      break;
    uint64_t b = stoke_device_ledger_resident(d, rows[i]);
    cJSON_AddNumberToObject(r, "microbatch", (double)rows[i]);
    cJSON_AddNumberToObject(r, "activation_bytes",
                            (double)(b - d->fixed_bytes));
    cJSON_AddNumberToObject(r, "resident_bytes", (double)b);
    cJSON_AddBoolToObject(r, "fits", b <= d->usable_bytes);
    cJSON_AddItemToArray(arr, r);
  }
  return o;
}

static void host_row(FILE *f, const char *what, const char *each,
                     uint64_t total, const char *note) {
  char b[32];
  cli_format_bytes(b, sizeof b, total);
  fprintf(f, "  %-16s %-16s %11s%s%s\n", what, each, b, note ? "  " : "",
          note ? note : "");
}

static void print_host(FILE *f, const stoke_host_ledger *g,
                       const char *source, size_t batch, unsigned prefetch) {
  char a[32], each[48], note[96];
  fprintf(f, "host ledger: %s, batch %zu, %u worker%s, prefetch %u\n",
          source, batch, g->n_workers, g->n_workers == 1 ? "" : "s",
          prefetch);
  cli_format_bytes(a, sizeof a, g->batch_bytes);
  snprintf(each, sizeof each, "%zu x %s", g->n_slots, a);
  cli_format_bytes(a, sizeof a, g->sample_bytes);
  snprintf(note, sizeof note, "prefetch %u + 1 slots; %s a sample",
           prefetch, a);
  host_row(f, "batch slots", each, g->slots_bytes, note);
  host_row(f, "epoch order", "", g->order_bytes, NULL);
  unsigned nw = g->n_workers ? g->n_workers : 1;
  cli_format_bytes(a, sizeof a, g->workers_bytes / nw);
  snprintf(each, sizeof each, "%u x %s", nw, a);
  host_row(f, "worker state", each, g->workers_bytes,
           g->n_workers ? NULL : "0 workers: the consumer's thread");
  host_row(f, "consumer stats", "", g->consumer_bytes, NULL);
  host_row(f, "bad samples", "", g->failures_bytes,
           "the last failures; skip flags, quarantine");
  if (g->scratch_basis != STOKE_SCRATCH_NONE) {
    cli_format_bytes(a, sizeof a, g->scratch_per_worker);
    snprintf(each, sizeof each, "%u x %s", nw, a);
    snprintf(note, sizeof note, "%s: largest image %ux%u",
             g->scratch_basis == STOKE_SCRATCH_EXACT
                 ? "exact, from the packed index"
             : g->scratch_basis == STOKE_SCRATCH_DECLARED
                 ? "declared"
                 : "probed from a sample of headers",
             g->scratch_width, g->scratch_height);
    host_row(f, "source scratch", each, g->scratch_bytes, note);
  }
  if (g->storage_bytes)
    host_row(f, "read-ahead", "", g->storage_bytes,
             "remote shards' ranges fetched ahead, at most");
  host_row(f, "total", "", g->total_bytes, NULL);
  if (g->budget_bytes) {
    snprintf(note, sizeof note, "%s (%.1f%% used)",
             g->total_bytes <= g->budget_bytes ? "fits" : "over budget",
             100.0 * (double)g->total_bytes / (double)g->budget_bytes);
    host_row(f, "budget", "", g->budget_bytes, note);
  }
}

static cJSON *host_json(const stoke_host_ledger *g, size_t batch,
                        unsigned prefetch) {
  cJSON *o = cJSON_CreateObject();
  if (!o)
    return NULL;
  cJSON_AddNumberToObject(o, "batch_size", (double)batch);
  cJSON_AddNumberToObject(o, "workers", g->n_workers);
  cJSON_AddNumberToObject(o, "prefetch", prefetch);
  cJSON_AddNumberToObject(o, "slots", (double)g->n_slots);
  cJSON_AddNumberToObject(o, "sample_bytes", (double)g->sample_bytes);
  cJSON_AddNumberToObject(o, "batch_bytes", (double)g->batch_bytes);
  cJSON_AddNumberToObject(o, "slots_bytes", (double)g->slots_bytes);
  cJSON_AddNumberToObject(o, "order_bytes", (double)g->order_bytes);
  cJSON_AddNumberToObject(o, "workers_bytes", (double)g->workers_bytes);
  cJSON_AddNumberToObject(o, "consumer_bytes", (double)g->consumer_bytes);
  cJSON_AddNumberToObject(o, "failures_bytes", (double)g->failures_bytes);
  cJSON_AddNumberToObject(o, "scratch_bytes", (double)g->scratch_bytes);
  cJSON_AddNumberToObject(o, "scratch_per_worker",
                          (double)g->scratch_per_worker);
  cJSON_AddStringToObject(o, "scratch_basis",
                          stoke_scratch_basis_name(g->scratch_basis));
  cJSON_AddNumberToObject(o, "storage_bytes", (double)g->storage_bytes);
  cJSON_AddNumberToObject(o, "total_bytes", (double)g->total_bytes);
  cJSON_AddNumberToObject(o, "budget_bytes", (double)g->budget_bytes);
  cJSON_AddBoolToObject(o, "fits",
                        !g->budget_bytes || g->total_bytes <= g->budget_bytes);
  return o;
}

int cmd_budget(int argc, char **argv) {
  stoke_device_ledger dev;
  memset(&dev, 0, sizeof dev);
  dev.reserve_frac = 0.10;
  int have_fixed = 0, have_per = 0, have_dev = 0, have_device_opt = 0;
  unit u = {1e9, "GB"};
  cli_source_args src_args;
  cli_source_args_init(&src_args);
  const stoke_synthetic_config *synth = &src_args.synth;
  stoke_config cfg;
  stoke_config_init(&cfg);
  cfg.n_workers = 0; /* as bench */
  int have_loader_opt = 0;
  int autotune = 0; /* -j auto */
  const char *json_path = NULL;
  cli_opt opts[O_LAST];
  cli_opts_join(opts, O_LAST, cli_source_opts, budget_own_opts, NULL);

  cli_parser p;
  cli_parser_init(&p, argc, argv, "budget");
  const char *v;
  int id;
  while ((id = cli_next_opt(&p, opts, &v)) != CLI_OPT_END) {
    const char *f = p.flag;
    int bad = 0;
    /* Options that shape a source or a loader need a source. */
    if ((id > CLI_SRC_SYNTHETIC && id < CLI_SRC_TRANSFORM) ||
        (id >= O_BATCH && id <= O_CACHE_MAX))
      have_loader_opt = 1;
    switch (id) {
    case CLI_OPT_ERROR:
      return CLI_USAGE;
    case O_HELP:
      fputs(cmd_budget_usage, stdout);
      return CLI_OK;
    case O_FIXED:
      bad = cli_parse_bytes(f, v, &dev.fixed_bytes);
      have_fixed = have_device_opt = 1;
      break;
    case O_PER_SAMPLE:
      bad = cli_parse_bytes(f, v, &dev.per_sample_bytes);
      if (!bad && dev.per_sample_bytes == 0) {
        cli_error("%s: must be more than 0, got '%s'", f, v);
        bad = 1;
      }
      have_per = have_device_opt = 1;
      break;
    case O_DEVICE:
      bad = cli_parse_bytes(f, v, &dev.device_bytes);
      if (!bad && dev.device_bytes == 0) {
        cli_error("%s: must be more than 0, got '%s'", f, v);
        bad = 1;
      }
      if (is_binary(v))
        u = (unit){1073741824.0, "GiB"};
      have_dev = have_device_opt = 1;
      break;
    case O_RESERVE:
      bad = parse_reserve(f, v, &dev.reserve_frac);
      have_device_opt = 1;
      break;
    case O_BATCH:
      bad = cli_parse_size_t(f, v, 1, &cfg.batch_size);
      break;
    case O_WORKERS:
      /* 'auto': what an autotuning loader (-j auto) allocates at most:
      ** its most workers and deepest prefetch (it gates them at run
      ** time); 'cores': one worker per online CPU. */
      if (strcmp(v, "auto") == 0)
        autotune = 1;
      else if (strcmp(v, "cores") == 0)
        cfg.n_workers = STOKE_WORKERS_AUTO;
      else
        bad = cli_parse_uint(f, v, 0, 4096, &cfg.n_workers);
      break;
    case O_PREFETCH:
      bad = cli_parse_uint(f, v, 1, 4096, &cfg.prefetch);
      break;
    case O_MEM_BUDGET:
      bad = cli_parse_bytes(f, v, &cfg.mem_budget_bytes);
      break;
    case O_CACHE: /* as bench's: the packing cache, and remote shards' */
      cfg.cache_dir = v;
      src_args.image.cache_dir = v;
      break;
    case O_CACHE_MAX:
      bad = cli_parse_bytes(f, v, &cfg.cache_max_bytes);
      src_args.image.cache_max_bytes = cfg.cache_max_bytes;
      break;
    case O_JSON:
      json_path = v;
      break;
    default:
      bad = cli_source_args_apply(&src_args, id, f, v) != 0;
    }
    if (bad)
      return CLI_USAGE;
  }
  if (cli_source_args_check(&src_args, "budget"))
    return CLI_USAGE;
  const char *data = src_args.data;
  int have_source = data || src_args.synthetic;
  if (have_device_opt && !(have_fixed && have_per && have_dev)) {
    cli_error("budget: the device ledger needs %s",
              !have_fixed ? "--fixed" : !have_per ? "--per-sample"
                                                  : "--device");
    return CLI_USAGE;
  }
  if (have_loader_opt && !have_source) {
    cli_error("budget: loader options need a source; give a dataset or "
              "--synthetic sleep:5ms or tensor");
    return CLI_USAGE;
  }
  if (!have_device_opt && !have_source) {
    cli_error("budget: nothing to compute; give --fixed, --per-sample and "
              "--device, or a loader (--synthetic ...)");
    return CLI_USAGE;
  }

  FILE *json = NULL;
  if (json_path && !(json = cli_open_output(json_path)))
    return CLI_ERROR;
  FILE *out = json == stdout ? stderr : stdout;
  int rc = CLI_OK;
  cJSON *root = cJSON_CreateObject();

  if (have_device_opt) {
    int drc = stoke_device_ledger_compute(&dev);
    if (drc == STOKE_EINVAL) {
      cli_error("%s", stoke_errmsg(NULL));
      rc = CLI_USAGE;
      goto done;
    }
    print_device(out, &dev, u);
    if (root)
      cJSON_AddItemToObject(root, "device", device_json(&dev));
    if (drc < 0) {
      char fixed[32], use[32];
      fmt_in(fixed, sizeof fixed, dev.fixed_bytes, u);
      fmt_in(use, sizeof use, dev.usable_bytes, u);
      cli_error("budget: not even one sample fits on the device: fixed %s "
                "plus one sample's activations is over the usable %s",
                fixed, use);
      rc = CLI_ERROR;
    }
  }
  if (have_source) {
    stoke_source *src = NULL;
    if (cli_source_create(data, &src_args.image, synth, &src) != CLI_OK) {
      rc = CLI_ERROR;
      goto done;
    }
    cfg.source = src;
    if (autotune) {
      long cpus = sysconf(_SC_NPROCESSORS_ONLN);
      cfg.n_workers = STOKE_AUTOTUNE_MAX_WORKERS(cpus > 0 ? (unsigned)cpus
                                                           : 1u);
      if (cfg.prefetch < 8) cfg.prefetch = 8;
    }
    char source[1200];
    if (data) {
      char shown[1024]; /* a URL without its user-info and query */
      stoke_path_shown(data, shown, sizeof shown);
      snprintf(source, sizeof source, "images %s (%zu samples, transform "
               "%s)", shown, stoke_source_n_samples(src),
               src_args.image.transform);
    } else {
      char kind[64], shape[64];
      cli_fmt_synthetic(synth, kind, sizeof kind);
      cli_fmt_shape(synth->ndim, synth->shape, shape, sizeof shape);
      snprintf(source, sizeof source, "synthetic %s, %zu samples of %s", kind,
               synth->n_samples, shape);
    }
    stoke_host_ledger g;
    g.struct_size = sizeof g;
    int hrc = stoke_host_ledger_compute(&cfg, &g);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", stoke_errmsg(NULL));
    stoke_source_destroy(src);
    if (hrc < 0 && hrc != STOKE_EBUDGET) {
      cli_error("%s", msg[0] ? msg : stoke_strerror(hrc));
      rc = CLI_ERROR;
      goto done;
    }
    if (have_device_opt)
      fputc('\n', out);
    print_host(out, &g, source, cfg.batch_size, cfg.prefetch);
    if (root)
      cJSON_AddItemToObject(root, "host",
                            host_json(&g, cfg.batch_size, cfg.prefetch));
    if (hrc == STOKE_EBUDGET) {
      cli_error("%s", msg);
      rc = CLI_ERROR;
    }
  }
done:
  if (json) {
    if (rc == CLI_USAGE) {
      if (json != stdout) {
        fclose(json);
        remove(json_path);
      }
    } else if (cli_write_json(json_path, json, root) != CLI_OK) {
      rc = CLI_ERROR;
    }
  }
  cJSON_Delete(root);
  return rc;
}
