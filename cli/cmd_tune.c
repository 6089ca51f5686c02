/* cmd_tune.c — "stoke tune": sweep workers x prefetch (x batch size) against
** a simulated step, pick the knee, and say it as flags, as PyTorch
** DataLoader arguments, as JSON and as an SVG plot.
**
** The sweep and the knee live in the library (stoke_tune_sweep,
** stoke_tune_knee_find); this file parses options, draws the progress line,
** handles Ctrl-C and writes the reports.  Ctrl-C sets a flag that the
** progress callback reads between points: the point in progress finishes
** its epochs, then everything measured so far is printed and written and
** the command exits 130 (128 + SIGINT, as a shell reports it).
*/
#define _POSIX_C_SOURCE 200809L /* sigaction, isatty, fileno */

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tune_chart.h"
#include "tune_io.h"

const char cmd_tune_usage[] =
    "usage: stoke tune DATA|--synthetic KIND [options]\n"
    "\n"
    "Sweep worker threads x prefetch depth (x batch size) with a warm-up\n"
    "epoch per point, and pick the knee: the cheapest configuration (fewest\n"
    "workers, then least host memory) within 5% of the best throughput\n"
    "that removes the stall when a step is given (verdict busy), or the\n"
    "best achievable when none does.  The doctor's advice uses the same\n"
    "knee and tolerance.\n"
    "\n"
    "Without -j the sweep is adaptive: workers double while the added ones\n"
    "still raise throughput, the stall is not gone and, past 2 x the cores,\n"
    "the workers mostly wait (samples that wait on storage or the network\n"
    "need far more workers than cores); up to --max-workers, else 256 and\n"
    "what --mem-budget allows.  Then it bisects between the last two rungs\n"
    "to find the knee to one worker.  The queue model of each measured\n"
    "point skips points that cannot matter; the table says which and why.\n"
    "\n"
    "source\n"
    "  DATA                   an image dataset (folder, tar or packed shards)\n"
    "  --transform SPEC       for DATA (random-resized-crop=224,flip,chw,u8)\n"
    "  --io-concurrency N, --tls-ca, --tls-insecure, --connect-timeout,\n"
    "  --stall-timeout, --http-attempts, --retry-budget, --retry-backoff\n"
    "                         for DATA as URLs: as 'stoke help bench'\n"
    "                         (--io-concurrency: the worker sweep's)\n"
    "  --synthetic KIND       sleep:5ms, spin:2ms or tensor; KIND+sleep:WAIT\n"
    "                         adds a wait (spin:0.3ms+sleep:4ms: a CPU-\n"
    "                         burning decode, then a waiting read)\n"
    "  --samples N            samples in the dataset (256)\n"
    "  --shape DxHxW          shape of a sample's features (3x32x32)\n"
    "  --cost-dist DIST       fixed, exp, lognormal:SIGMA or rare:FRAC:FACTOR\n"
    "                         (rare:0.02:20: 2% of samples 20x longer; fixed)\n"
    "  --classes N            label classes (2)\n"
    "\n"
    "grid\n"
    "  -j, --workers LIST     worker counts, e.g. 0,2,4 (a fixed grid; default:\n"
    "                         the adaptive sweep)\n"
    "  --max-workers N        the adaptive sweep's top (256, or --cpu-budget)\n"
    "  --cpu-budget N         CPU-bound work: never more than N workers\n"
    "  --prefetch LIST        prefetch depths (1,2,4)\n"
    "  -b, --batch-size N     samples per batch (32)\n"
    "  --batch-sizes LIST     sweep batch sizes too, e.g. 32,64,128\n"
    "  --mem-budget SIZE      skip points whose host ledger exceeds SIZE\n"
    "  --shuffle[=MODE], --seed N\n"
    "                         as for bench (uniform, block[=SIZE], none)\n"
    "  --cache DIR, --cache-max SIZE\n"
    "                         as for bench: the packing cache, and remote\n"
    "                         shards kept whole on this node\n"
    "  --io-sweep LIST|off    remote packed shards: after the worker knee,\n"
    "                         sweep io_concurrency at it, each point a source\n"
    "                         of its own (default: 1, 2, 4, ... up to 64\n"
    "                         while a doubling still gains; off: none)\n"
    "  --no-epoch-prefetch    start each epoch at its first next(), as\n"
    "                         PyTorch does (bench's option)\n"
    "\n"
    "measurement\n"
    "  --compute STEP         the training step: sleep:12ms, spin:12ms or\n"
    "                         none (none)\n"
    "  --epochs N             measured epochs per point after the warm-up (1)\n"
    "  --min-time DUR         and at least this much measured time (0)\n"
    "  --tolerance PCT        'as good as the best' (5%)\n"
    "\n"
    "bad samples\n"
    "  --on-error POLICY, --max-failures N|P%, --quarantine FILE\n"
    "                         as for bench: a dataset with a few bad files\n"
    "                         can be tuned with skip or replace\n"
    "\n"
    "report\n"
    "  --json FILE            every point, the knee and the machine ('-' =\n"
    "                         stdout; the table then goes to stderr)\n"
    "  --svg FILE             throughput and wait share against workers\n"
    "  -q, --quiet            no table and no progress line\n"
    "\n"
    "Ctrl-C stops the sweep after the point in progress and still reports\n"
    "what was measured (exit status 130).\n";

/* The source options are cli_source_opts (ids below CLI_SRC_OPT_LAST). */
enum {
  O_WORKERS = CLI_SRC_OPT_LAST,
  O_MAX_WORKERS,
  O_CPU_BUDGET,
  O_PREFETCH,
  O_BATCH,
  O_BATCH_SIZES,
  O_MEM_BUDGET,
  O_SHUFFLE,
  O_SEED,
  O_COMPUTE,
  O_EPOCHS,
  O_MIN_TIME,
  O_TOLERANCE,
  O_JSON,
  O_SVG,
  O_QUIET,
  O_ON_ERROR,
  O_MAX_FAILURES,
  O_QUARANTINE,
  O_IO_SWEEP,
  O_CACHE,
  O_CACHE_MAX,
  O_NO_EPOCH_PREFETCH,
  O_HELP,
  O_LAST
};

static const cli_opt tune_own_opts[] = {{"workers", 'j', 1, O_WORKERS},
                                        {"max-workers", 0, 1, O_MAX_WORKERS},
                                        {"cpu-budget", 0, 1, O_CPU_BUDGET},
                                        {"prefetch", 0, 1, O_PREFETCH},
                                        {"batch-size", 'b', 1, O_BATCH},
                                        {"batch-sizes", 0, 1, O_BATCH_SIZES},
                                        {"mem-budget", 0, 1, O_MEM_BUDGET},
                                        {"shuffle", 0, CLI_ARG_OPTIONAL,
                                         O_SHUFFLE},
                                        {"seed", 0, 1, O_SEED},
                                        {"compute", 0, 1, O_COMPUTE},
                                        {"epochs", 0, 1, O_EPOCHS},
                                        {"min-time", 0, 1, O_MIN_TIME},
                                        {"tolerance", 0, 1, O_TOLERANCE},
                                        {"json", 0, 1, O_JSON},
                                        {"svg", 0, 1, O_SVG},
                                        {"quiet", 'q', 0, O_QUIET},
                                        {"on-error", 0, 1, O_ON_ERROR},
                                        {"max-failures", 0, 1,
                                         O_MAX_FAILURES},
                                        {"quarantine", 0, 1, O_QUARANTINE},
                                        {"io-sweep", 0, 1, O_IO_SWEEP},
                                        {"cache", 0, 1, O_CACHE},
                                        {"cache-max", 0, 1, O_CACHE_MAX},
                                        {"no-epoch-prefetch", 0, 0,
                                         O_NO_EPOCH_PREFETCH},
                                        {"help", 'h', 0, O_HELP},
                                        {NULL, 0, 0, 0}};

#define MAX_LIST 64

/* "1,2,4": 1..MAX_LIST unsigned values in [lo, hi]. */
static int parse_list(const char *what, const char *s, unsigned lo,
                      unsigned hi, unsigned *out, size_t *n) {
  *n = 0;
  char buf[512];
  if (strlen(s) >= sizeof buf || !*s) {
    cli_error("%s: expected a list such as 1,2,4, got '%s'", what, s);
    return -1;
  }
  strcpy(buf, s);
  for (char *tok = buf, *comma; tok; tok = comma ? comma + 1 : NULL) {
    comma = strchr(tok, ',');
    if (comma) *comma = '\0';
    if (*n == MAX_LIST) {
      cli_error("%s: at most %d values", what, MAX_LIST);
      return -1;
    }
    if (cli_parse_uint(what, tok, lo, hi, &out[*n]))
      return -1;
    (*n)++;
  }
  return 0;
}

/* "5%" or "0.05": a share in [0, 1). */
static int parse_share(const char *what, const char *s, double *out) {
  char *end;
  errno = 0;
  if (!((s[0] >= '0' && s[0] <= '9') || s[0] == '.'))
    goto bad;
  double v = strtod(s, &end);
  if (errno || end == s)
    goto bad;
  if (strcmp(end, "%") == 0)
    v /= 100.0;
  else if (*end)
    goto bad;
  if (!(v >= 0 && v < 1)) {
    cli_error("%s: must be at least 0 and below 100%%, got '%s'", what, s);
    return -1;
  }
  *out = v;
  return 0;
bad:
  cli_error("%s: expected a percentage such as 5%%, got '%s'", what, s);
  return -1;
}

/* ---- Ctrl-C and progress ------------------------------------------------- */

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
  (void)sig;
  interrupted = 1;
}

typedef struct tune_ctx {
  int compute_kind;
  int64_t compute_ns;
  int quiet;
  int tty;          /* stderr is a terminal: redraw one line with \r */
  int line_open;    /* a \r line is on screen */
  int adaptive;     /* the adaptive sweep: n is only its bound */
} tune_ctx;

static void on_step(void *user, stoke_batch *b) {
  (void)b;
  const tune_ctx *t = user;
  cli_consumer_step(t->compute_kind, t->compute_ns);
}

static void describe(char *buf, size_t n, const stoke_tune_point *p) {
  snprintf(buf, n, "%u worker%s, prefetch %u, batch %zu", p->n_workers,
           p->n_workers == 1 ? "" : "s", p->prefetch, p->batch_size);
}

static int on_progress(void *user, size_t i, size_t n,
                       const stoke_tune_point *p) {
  tune_ctx *t = user;
  if (!t->quiet) {
    char what[96], bytes[32], at[48];
    describe(what, sizeof what, p);
    if (t->adaptive)
      snprintf(at, sizeof at, "%zu", i + 1);
    else
      snprintf(at, sizeof at, "%zu/%zu", i + 1, n);
    if (p->status == STOKE_TUNE_PENDING) {
      if (t->tty) {
        fprintf(stderr, "\r\033[Ktune [%s] %s: measuring...", at, what);
        t->line_open = 1;
      }
    } else {
      if (t->tty) fputs("\r\033[K", stderr);
      if (p->status == STOKE_TUNE_SKIPPED) {
        fprintf(stderr, "tune [%s] %s: not run, %s", at, what, p->note);
      } else if (p->status == STOKE_TUNE_OVER_BUDGET) {
        snprintf(bytes, sizeof bytes, "%.1f MiB",
                 (double)p->host_bytes / 1048576.0);
        fprintf(stderr, "tune [%s] %s: skipped, needs %s of host "
                        "memory, over the budget",
                at, what, bytes);
      } else {
        fprintf(stderr, "tune [%s] %s: %.1f samples/s, waiting %.1f%%, "
                        "%s",
                at, what, p->samples_per_s, 100 * p->wait_ratio,
                stoke_verdict_name(p->verdict));
      }
      /* On a terminal the line stays until the next point overwrites it. */
      fputc(t->tty ? ' ' : '\n', stderr);
      t->line_open = t->tty;
    }
    fflush(stderr);
  }
  return interrupted != 0;
}

static void close_line(tune_ctx *t) {
  if (t->line_open) {
    fputs("\r\033[K", stderr);
    t->line_open = 0;
  }
}

/* ---- reports ------------------------------------------------------------- */

/* Points in table order: batch size, workers, prefetch. */
static int by_config(const void *a, const void *b) {
  const stoke_tune_point *p = *(const stoke_tune_point *const *)a;
  const stoke_tune_point *q = *(const stoke_tune_point *const *)b;
  if (p->batch_size != q->batch_size)
    return p->batch_size < q->batch_size ? -1 : 1;
  if (p->n_workers != q->n_workers)
    return p->n_workers < q->n_workers ? -1 : 1;
  if (p->prefetch != q->prefetch)
    return p->prefetch < q->prefetch ? -1 : 1;
  return 0;
}


static void print_table(FILE *f, stoke_tune_point *const *rows, size_t n,
                        const stoke_tune_point *pts, const stoke_tune_knee *k,
                        int have_knee) {
  double best = have_knee ? pts[k->best].samples_per_s : 0;
  fprintf(f, "workers  prefetch  batch   samples/s  of best  waiting  "
             "verdict    host memory\n");
  for (size_t i = 0; i < n; i++) {
    const stoke_tune_point *p = rows[i];
    char bytes[32];
    cli_format_bytes(bytes, sizeof bytes, p->host_bytes);
    fprintf(f, "%7u  %8u  %5zu  ", p->n_workers, p->prefetch, p->batch_size);
    if (p->status == STOKE_TUNE_MEASURED)
      fprintf(f, "%10.1f  %6.1f%%  %6.1f%%  %-9s", p->samples_per_s,
              best > 0 ? 100 * p->samples_per_s / best : 0,
              100 * p->wait_ratio, stoke_verdict_name(p->verdict));
    else if (p->status == STOKE_TUNE_SKIPPED)
      fprintf(f, "%9.0f*  %7s  %7s  %-9s", p->predicted_samples_per_s, "-",
              "-", "model");
    else
      fprintf(f, "%10s  %7s  %7s  %-9s", "-", "-", "-",
              p->status == STOKE_TUNE_OVER_BUDGET ? "skipped" : "not run");
    fprintf(f, "  %11s", bytes);
    if (have_knee && p == &pts[k->index])
      fputs("  <- knee", f);
    else if (have_knee && p == &pts[k->best])
      fputs("  (best)", f);
    else if (p->status == STOKE_TUNE_OVER_BUDGET)
      fputs("  over budget", f);
    fputc('\n', f);
  }
}


/* The plot (svg_write_tune), the knee labelled with the flags to use. */
static int write_svg(const char *path, FILE *f, const stoke_tune_point *pts,
                     size_t n, const stoke_tune_knee *k, int have_knee,
                     const char *subtitle, unsigned io_knee) {
  svg_tune_point *sp = malloc((n + 1) * sizeof *sp);
  if (!sp) {
    cli_error("%s", stoke_strerror(STOKE_ENOMEM));
    fclose(f);
    return CLI_ERROR;
  }
  int batch_varies = 0;
  const stoke_tune_point *first = NULL;
  for (size_t i = 0; i < n; i++) {
    const stoke_tune_point *p = &pts[i];
    int measured = p->status == STOKE_TUNE_MEASURED;
    sp[i] = (svg_tune_point){measured, p->n_workers, (double)p->batch_size,
                             p->prefetch, p->samples_per_s, p->wait_ratio};
    if (measured && !first) first = p;
    batch_varies |= measured && p->batch_size != first->batch_size;
  }
  char mark[160] = "";
  if (have_knee) {
    /* The flags to paste, with the io sweep's knee when there was one. */
    stoke_tune_point p = pts[k->index];
    if (io_knee) p.io_concurrency = io_knee;
    char flags[128];
    report_tune_flags(flags, sizeof flags, &p, batch_varies);
    snprintf(mark, sizeof mark, "knee: %s", flags);
  }
  int bad = svg_write_tune(f, sp, n, have_knee ? k->index : n,
                           "stoke tune: throughput and waiting against "
                           "workers",
                           subtitle, mark) != 0;
  bad |= fclose(f) != 0;
  free(sp);
  if (bad) {
    cli_error("cannot write '%s': %s", path, strerror(errno));
    return CLI_ERROR;
  }
  return CLI_OK;
}

/* ---- the command --------------------------------------------------------- */

int cmd_tune(int argc, char **argv) {
  cli_source_args src_args;
  cli_source_args_init(&src_args);
  stoke_synthetic_config *synth = &src_args.synth;
  const stoke_image_config *image = &src_args.image;
  stoke_tune_config tc;
  stoke_tune_config_init(&tc);
  unsigned workers[MAX_LIST], prefetch[MAX_LIST], bs_list[MAX_LIST];
  size_t n_workers = 0, n_prefetch = 0, n_bs = 0;
  unsigned io_list[MAX_LIST];
  size_t n_io = 0;
  int io_off = 0;
  size_t batch_sizes[MAX_LIST];
  unsigned max_workers = 0, cpu_budget = 0, epochs = 1;
  int64_t min_time_ns = 0;
  double tolerance = STOKE_TUNE_TOLERANCE;
  tune_ctx t = {REPORT_COMPUTE_NONE, 0, 0, 0, 0, 0};
  const char *json_path = NULL, *svg_path = NULL;
  cli_opt opts[O_LAST];
  cli_opts_join(opts, O_LAST, cli_source_opts, tune_own_opts, NULL);

  cli_parser p;
  cli_parser_init(&p, argc, argv, "tune");
  const char *v;
  int id;
  while ((id = cli_next_opt(&p, opts, &v)) != CLI_OPT_END) {
    const char *f = p.flag;
    int bad = 0;
    switch (id) {
    case CLI_OPT_ERROR:
      return CLI_USAGE;
    case O_HELP:
      fputs(cmd_tune_usage, stdout);
      return CLI_OK;
    case O_WORKERS:
      bad = parse_list(f, v, 0, 1024, workers, &n_workers);
      break;
    case O_MAX_WORKERS:
      bad = cli_parse_uint(f, v, 1, 1024, &max_workers);
      break;
    case O_CPU_BUDGET:
      bad = cli_parse_uint(f, v, 1, 1024, &cpu_budget);
      break;
    case O_PREFETCH:
      bad = parse_list(f, v, 1, 1024, prefetch, &n_prefetch);
      break;
    case O_BATCH:
      bad = cli_parse_size_t(f, v, 1, &tc.base.batch_size);
      break;
    case O_BATCH_SIZES:
      bad = parse_list(f, v, 1, 1u << 24, bs_list, &n_bs);
      break;
    case O_MEM_BUDGET:
      bad = cli_parse_bytes(f, v, &tc.base.mem_budget_bytes);
      if (!bad && tc.base.mem_budget_bytes == 0) {
        cli_error("%s: must be more than 0, got '%s'", f, v);
        bad = 1;
      }
      break;
    case O_SHUFFLE:
      bad = cli_parse_shuffle(f, v, &tc.base) != 0;
      break;
    case O_CACHE: /* as bench's: the packing cache, and remote shards' */
      tc.base.cache_dir = v;
      src_args.image.cache_dir = v;
      break;
    case O_CACHE_MAX:
      bad = cli_parse_bytes(f, v, &tc.base.cache_max_bytes);
      src_args.image.cache_max_bytes = tc.base.cache_max_bytes;
      break;
    case O_IO_SWEEP:
      if (strcmp(v, "off") == 0)
        io_off = 1;
      else
        bad = parse_list(f, v, 1, STOKE_IO_CONCURRENCY_MAX, io_list, &n_io);
      break;
    case O_NO_EPOCH_PREFETCH: /* as bench's: each epoch at its first next() */
      tc.base.prefetch_next_epoch = 0;
      break;
    case O_SEED:
      bad = cli_parse_u64(f, v, &tc.base.seed);
      synth->seed = tc.base.seed;
      break;
    case O_COMPUTE:
      bad = cli_parse_compute(f, v, &t.compute_kind, &t.compute_ns);
      break;
    case O_EPOCHS:
      bad = cli_parse_uint(f, v, 1, 1000, &epochs);
      break;
    case O_MIN_TIME:
      bad = cli_parse_duration(f, v, NULL, &min_time_ns);
      break;
    case O_TOLERANCE:
      bad = parse_share(f, v, &tolerance);
      break;
    case O_JSON:
      json_path = v;
      break;
    case O_SVG:
      svg_path = v;
      break;
    case O_QUIET:
      t.quiet = 1;
      break;
    case O_ON_ERROR:
      bad = cli_parse_on_error(f, v, &tc.base.on_error);
      break;
    case O_MAX_FAILURES:
      bad = cli_parse_max_failures(f, v, &tc.base);
      break;
    case O_QUARANTINE:
      tc.base.quarantine_path = v;
      break;
    default:
      bad = cli_source_args_apply(&src_args, id, f, v) != 0;
    }
    if (bad)
      return CLI_USAGE;
  }
  if (cli_source_args_finish(&src_args, "tune"))
    return CLI_USAGE;
  const char *data = src_args.data;
  if (svg_path && strcmp(svg_path, "-") == 0) {
    cli_error("--svg: give a file name, not '-'");
    return CLI_USAGE;
  }
  if (json_path && svg_path && strcmp(json_path, svg_path) == 0) {
    cli_error("--svg: the same file as --json ('%s')", svg_path);
    return CLI_USAGE;
  }
  /* The worker ladder: --max-workers, else --cpu-budget, else the
  ** library's max(2 x cores, 8); --cpu-budget also caps a given list. */
  if (cpu_budget && max_workers > cpu_budget) {
    cli_error("--max-workers: %u is over --cpu-budget %u", max_workers,
              cpu_budget);
    return CLI_USAGE;
  }
  if (n_workers) {
    size_t kept = 0;
    for (size_t i = 0; i < n_workers; i++)
      if (!cpu_budget || workers[i] <= cpu_budget)
        workers[kept++] = workers[i];
    if (kept < n_workers && !t.quiet)
      cli_error("tune: skipping %zu worker count%s over --cpu-budget %u",
                n_workers - kept, n_workers - kept == 1 ? "" : "s",
                cpu_budget);
    n_workers = kept;
    if (!n_workers) {
      cli_error("-j: every worker count is over --cpu-budget %u", cpu_budget);
      return CLI_USAGE;
    }
    tc.workers = workers;
    tc.n_workers = n_workers;
  }
  tc.max_workers = max_workers ? max_workers : cpu_budget;
  if (n_prefetch) {
    tc.prefetch = prefetch;
    tc.n_prefetch = n_prefetch;
  }
  if (n_bs) {
    for (size_t i = 0; i < n_bs; i++)
      batch_sizes[i] = bs_list[i];
    tc.batch_sizes = batch_sizes;
    tc.n_batch_sizes = n_bs;
  }
  tc.tolerance = tolerance;
  /* A spinning step burns a core that the workers cannot have. */
  tc.consumer_cpu = t.compute_kind == REPORT_COMPUTE_SPIN ? 1 : 0;
  tc.min_epochs = epochs;
  tc.min_measure_ns = min_time_ns;
  tc.step = on_step;
  tc.step_user = &t;
  tc.progress = on_progress;
  tc.progress_user = &t;
  t.tty = isatty(fileno(stderr));

  stoke_source *src = NULL;
  int rc = cli_source_create(data, image, synth, &src);
  if (rc != CLI_OK)
    return rc;
  tc.base.source = src;
  size_t n_source = stoke_source_n_samples(src);
  size_t n = 0;
  rc = stoke_tune_grid(&tc, NULL, 0, &n);
  stoke_tune_point *pts = rc == 0 ? calloc(n ? n : 1, sizeof *pts) : NULL;
  stoke_tune_point **rows = pts ? calloc(n ? n : 1, sizeof *rows) : NULL;
  if (rc < 0 || !rows) {
    cli_error("%s", rc < 0 ? stoke_errmsg(NULL)
                           : stoke_strerror(STOKE_ENOMEM));
    stoke_source_destroy(src);
    free(pts);
    return CLI_ERROR;
  }
  int exit_rc = CLI_OK;
  FILE *json = NULL, *svg = NULL;
  if (json_path && !(json = cli_open_output(json_path)))
    exit_rc = CLI_ERROR;
  if (exit_rc == CLI_OK && svg_path && !(svg = fopen(svg_path, "w"))) {
    cli_error("cannot write '%s': %s", svg_path, strerror(errno));
    exit_rc = CLI_ERROR;
  }
  if (exit_rc != CLI_OK) {
    if (json && json != stdout)
      fclose(json);
    stoke_source_destroy(src);
    free(pts);
    free(rows);
    return exit_rc;
  }
  FILE *table = json == stdout ? stderr : stdout;

  struct sigaction sa, old_sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_sa);

  int tc_adaptive = tc.adaptive && !tc.workers;
  t.adaptive = tc_adaptive;
  size_t done = 0;
  int sweep_rc = stoke_tune_sweep(&tc, pts, n, &done);
  char sweep_msg[512] = "";
  if (sweep_rc < 0)
    snprintf(sweep_msg, sizeof sweep_msg, "%s", stoke_errmsg(NULL));
  sigaction(SIGINT, &old_sa, NULL);
  close_line(&t);
  stoke_source_destroy(src);
  int was_interrupted = interrupted != 0;
  if (sweep_rc < 0) {
    cli_error("%s", sweep_msg[0] ? sweep_msg : stoke_strerror(sweep_rc));
    exit_rc = CLI_ERROR;
  } else if (was_interrupted) {
    if (tc_adaptive)
      cli_error("tune: interrupted after %zu points; reporting what was "
                "measured",
                done);
    else
      cli_error("tune: interrupted after %zu of %zu points; reporting what "
                "was measured",
                done, n);
    exit_rc = 128 + SIGINT;
  }

  size_t n_skipped = 0, n_measured = 0, n_model = 0;
  for (size_t i = 0; i < done; i++) {
    rows[i] = &pts[i];
    n_skipped += pts[i].status == STOKE_TUNE_OVER_BUDGET;
    n_model += pts[i].status == STOKE_TUNE_SKIPPED;
    n_measured += pts[i].status == STOKE_TUNE_MEASURED;
  }
  qsort(rows, done, sizeof *rows, by_config);
  stoke_tune_knee knee;
  int have_knee = n_measured > 0 &&
                  stoke_tune_knee_find(pts, done, tolerance,
                                       t.compute_kind != REPORT_COMPUTE_NONE,
                                       &knee) == 0;
  int batch_swept = n_bs > 0;
  /* io_concurrency as its own dimension, at the worker knee of a remote
  ** run (tune_io.c): each point a source of its own. */
  tune_io io;
  memset(&io, 0, sizeof io);
  if (have_knee && !io_off && sweep_rc >= 0 && !was_interrupted) {
    sigaction(SIGINT, &sa, NULL);
    int io_rc = tune_io_run(&io, &tc, &pts[knee.index], data, image,
                            n_io ? io_list : NULL, n_io,
                            t.compute_kind != REPORT_COMPUTE_NONE);
    sigaction(SIGINT, &old_sa, NULL);
    close_line(&t);
    if (io_rc < 0) {
      cli_error("tune: io_concurrency sweep: %s", io.msg);
      exit_rc = CLI_ERROR;
    } else if (interrupted) {
      was_interrupted = 1;
      cli_error("tune: interrupted in the io_concurrency sweep; reporting "
                "what was measured");
      exit_rc = 128 + SIGINT;
    }
  }
  char src_text[1100], step[64], subtitle[1400], budget[32] = "none";
  char data_shown[1024] = ""; /* a URL without its user-info and query */
  if (data) stoke_path_shown(data, data_shown, sizeof data_shown);
  if (data)
    snprintf(src_text, sizeof src_text, "images %s (transform %s)",
             data_shown,
             image->transform);
  else
    cli_fmt_synthetic(synth, src_text, sizeof src_text);
  cli_fmt_compute(t.compute_kind, t.compute_ns, step, sizeof step);
  if (tc.base.mem_budget_bytes)
    cli_format_bytes(budget, sizeof budget, tc.base.mem_budget_bytes);
  snprintf(subtitle, sizeof subtitle,
           "%s%s x %zu samples, step %s, %zu of %zu points measured",
           data ? "" : "synthetic ", src_text, n_source, step, n_measured, n);

  if (!t.quiet) {
    size_t shown = tc_adaptive ? done : n;
    fprintf(table, "stoke tune: %s%s x %zu samples, step %s, %s%zu point%s",
            data ? "" : "synthetic ", src_text, n_source, step,
            tc_adaptive ? "adaptive sweep, " : "", shown,
            shown == 1 ? "" : "s");
    if (tc.base.mem_budget_bytes)
      fprintf(table, ", host memory budget %s", budget);
    fputc('\n', table);
    print_table(table, rows, done, pts, &knee, have_knee);
    if (n_skipped)
      fprintf(table, "%zu point%s skipped: the host ledger is over the %s "
                     "budget\n",
              n_skipped, n_skipped == 1 ? "" : "s", budget);
    if (n_model) {
      fprintf(table, "%zu point%s not run: the queue model of a measured "
                     "neighbour says %s cannot matter (* = its "
                     "prediction):\n",
              n_model, n_model == 1 ? "" : "s",
              n_model == 1 ? "it" : "they");
      for (size_t i = 0; i < done; i++)
        if (pts[i].status == STOKE_TUNE_SKIPPED)
          fprintf(table, "  %u worker%s, prefetch %u: %s\n",
                  pts[i].n_workers, pts[i].n_workers == 1 ? "" : "s",
                  pts[i].prefetch, pts[i].note);
    }
    if (done < n && !tc_adaptive)
      fprintf(table, "%zu point%s not run\n", n - done,
              n - done == 1 ? "" : "s");
    tune_io_print(table, &io);
    if (have_knee) {
      /* The worker knee, at the io knee's requests in flight when swept. */
      const stoke_tune_point *k =
          io.have_knee ? &io.pts[io.knee.index] : &pts[knee.index];
      char flags[128], py[256];
      report_tune_flags(flags, sizeof flags, k, batch_swept);
      report_tune_pytorch(py, sizeof py, k);
      fprintf(table, "\nknee: %s\n", knee.reason);
      fprintf(table, "  stoke flags  %s\n", flags);
      fprintf(table, "  PyTorch      %s\n", py);
      if (k->n_workers)
        fprintf(table,
                "  note         prefetch_factor = ceil(%u / %u) = %u counts "
                "batches per worker process, so PyTorch holds %u batches "
                "ahead\n"
                "               where stoke holds %u; PyTorch workers are "
                "processes, each building whole batches,\n"
                "               stoke's are threads sharing every batch; "
                "pin_memory=True only helps when batches go to a GPU\n",
                k->prefetch, k->n_workers,
                stoke_tune_prefetch_factor(k->n_workers, k->prefetch),
                k->n_workers *
                    stoke_tune_prefetch_factor(k->n_workers, k->prefetch),
                k->prefetch);
      else
        fprintf(table, "  note         0 workers: no prefetch_factor or "
                       "persistent_workers in PyTorch (both need workers)\n");
    } else if (!n_measured) {
      fprintf(table, "\nno point was measured: no knee\n");
    }
  }

  if (json) {
    cJSON *root = cJSON_CreateObject();
    if (root) {
      cJSON *c = cJSON_AddObjectToObject(root, "config");
      if (c) {
        char buf[64];
        if (data) {
          cJSON_AddStringToObject(c, "source", "images");
          cJSON_AddStringToObject(c, "data", data_shown);
          cJSON_AddStringToObject(c, "transform", image->transform);
          cJSON_AddNumberToObject(c, "samples", (double)n_source);
        } else {
          cJSON_AddStringToObject(c, "source", "synthetic");
          cJSON_AddStringToObject(c, "synthetic", src_text);
          cli_fmt_cost_dist(synth, buf, sizeof buf);
          cJSON_AddStringToObject(c, "cost_dist", buf);
          cJSON_AddNumberToObject(c, "samples", (double)synth->n_samples);
          cli_fmt_shape(synth->ndim, synth->shape, buf, sizeof buf);
          cJSON_AddStringToObject(c, "shape", buf);
        }
        cJSON_AddStringToObject(c, "compute", step);
        cJSON_AddNumberToObject(c, "compute_ns", (double)t.compute_ns);
        cJSON_AddNumberToObject(c, "batch_size",
                                (double)tc.base.batch_size);
        cJSON_AddNumberToObject(c, "mem_budget_bytes",
                                (double)tc.base.mem_budget_bytes);
        cJSON_AddNumberToObject(c, "cpu_budget", cpu_budget);
        cJSON_AddNumberToObject(c, "max_workers", tc.max_workers);
        cJSON_AddNumberToObject(c, "warmup_epochs", tc.warmup_epochs);
        cJSON_AddNumberToObject(c, "epochs", epochs);
        cJSON_AddNumberToObject(c, "min_time_s", (double)min_time_ns / 1e9);
        cJSON_AddNumberToObject(c, "tolerance", tolerance);
        cJSON_AddBoolToObject(c, "prefetch_next_epoch",
                              tc.base.prefetch_next_epoch != 0);
        cJSON_AddBoolToObject(c, "shuffle", tc.base.shuffle);
        cJSON_AddStringToObject(c, "shuffle_mode",
                                tc.base.shuffle == STOKE_SHUFFLE_BLOCK
                                    ? "block"
                                : tc.base.shuffle ? "uniform"
                                                  : "none");
        if (data && image->io_concurrency)
          cJSON_AddNumberToObject(c, "io_concurrency",
                                  image->io_concurrency);
        cJSON_AddNumberToObject(c, "seed", (double)tc.base.seed);
        cJSON_AddStringToObject(c, "on_error",
                                stoke_on_error_name(tc.base.on_error));
      }
      cJSON_AddItemToObject(root, "machine", report_machine_json());
      cJSON *arr = cJSON_AddArrayToObject(root, "points");
      for (size_t i = 0; arr && i < done; i++)
        cJSON_AddItemToArray(arr, report_tune_point_json(&pts[i]));
      cJSON *knee_json = NULL;
      if (have_knee) {
        knee_json = report_tune_knee_json(pts, &knee, batch_swept);
        cJSON_AddItemToObject(root, "knee", knee_json);
      } else {
        cJSON_AddNullToObject(root, "knee");
      }
      tune_io_json(root, knee_json, &io, batch_swept);
      cJSON_AddNumberToObject(root, "points_planned", (double)n);
      cJSON_AddNumberToObject(root, "points_done", (double)done);
      cJSON_AddNumberToObject(root, "points_skipped", (double)n_skipped);
      cJSON_AddNumberToObject(root, "points_skipped_by_model",
                              (double)n_model);
      cJSON_AddBoolToObject(root, "adaptive", tc_adaptive);
      cJSON_AddBoolToObject(root, "interrupted", was_interrupted);
      if (sweep_rc < 0)
        cJSON_AddStringToObject(root, "error", sweep_msg);
    }
    if (cli_write_json(json_path, json, root) != CLI_OK && exit_rc == CLI_OK)
      exit_rc = CLI_ERROR;
    cJSON_Delete(root);
  }
  if (svg && write_svg(svg_path, svg, pts, done, &knee, have_knee, subtitle,
                       io.have_knee ? io.pts[io.knee.index].io_concurrency
                                    : 0) != CLI_OK &&
      exit_rc == CLI_OK)
    exit_rc = CLI_ERROR;
  free(pts);
  free(rows);
  return exit_rc;
}

