/* cli.h — shared declarations of the stoke command-line tool.
**
** The tool is a thin client of include/stoke.h: it never sees the library's
** internals.  main.c holds the command table; each command lives in
** cmd_<name>.c; options.c parses options and values; run.c runs a loader
** against a simulated consumer (shared by bench, profile and demo).  The
** advice names its settings in the library's words, which are the tool's
** flags ("-j 4"), so the tool passes no words of its own.  What a run is
** reported as (text, JSON, HTML) is the report library's
** (report/report.h), shared with the Python module.
**
** Conventions (STYLE.md section 8): messages go to stderr, lowercase, no
** final full stop, prefixed "stoke: "; data goes to stdout.  Exit codes are
** CLI_OK, CLI_ERROR (runtime) and CLI_USAGE.
*/
#ifndef STOKE_CLI_H
#define STOKE_CLI_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "stoke.h"
#include "report.h"

enum { CLI_OK = 0, CLI_ERROR = 1, CLI_USAGE = 2 };

#if defined(__GNUC__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif

/* ---- commands (main.c holds the table) ---------------------------------- */

/* argv[0] is the command's name; returns an exit code. */
typedef int (*cli_cmd_fn)(int argc, char **argv);

int cmd_bench(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_budget(int argc, char **argv);
int cmd_pack(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_top(int argc, char **argv);

/* Usage texts, printed by "stoke help <cmd>" and "stoke <cmd> --help". */
extern const char cmd_bench_usage[];
extern const char cmd_demo_usage[];
extern const char cmd_tune_usage[];
extern const char cmd_budget_usage[];
extern const char cmd_pack_usage[];
extern const char cmd_inspect_usage[];
extern const char cmd_profile_usage[];
extern const char cmd_report_usage[];
extern const char cmd_top_usage[];

/* ---- `stoke top`'s window (top_window.c) ---------------------------------- */

/* What one loader did between two of its snapshots. */
typedef struct top_window {
  double seconds;            /* the window's length */
  int restarted;             /* the warm-up ended inside it: since then */
  stoke_stats stats;         /* over the window (percentiles from the bins) */
  uint64_t wait_bins[STOKE_LIVE_HIST];
  double busy_frac;          /* the workers' time producing */
  double slot_wait_frac;     /* waiting for a free slot (the queue full) */
  double idle_frac;          /* the rest: waiting for work */
  stoke_diagnosis diagnosis; /* the verdict over the window */
} top_window;

/* now minus then (then == now: since the warm-up ended). */
void top_window_make(const stoke_live *now, const stoke_live *then,
                     top_window *w);

/* The frame's line on the machine's other load beside the loader (its
** stoke_stats.outside_*, since the warm-up: the cores of `cores` online,
** the lightest and heaviest window, steady or moved and by how much the
** figures may be off), into buf. */
void top_outside_line(const stoke_stats *st, long cores, char *buf,
                      size_t cap);
/* The frame's line on the remote fetch stage (its fetch_*, since the
** loader's start: bytes/s, the requests' p50 and p95, retries, throttled
** answers), into buf: 1, or 0 (buf untouched) without remote shards. */
int top_fetch_line(const stoke_stats *st, char *buf, size_t cap);
/* The frame's line on the remote shard cache (its rcache_*, counted when
** the source opened its shards: hits and their bytes, shards fetched into
** it, uncached, evicted), into buf: 1, or 0 (buf untouched) without one. */
int top_rcache_line(const stoke_stats *st, char *buf, size_t cap);

/* ---- messages ----------------------------------------------------------- */

/* "stoke: <message>\n" on stderr. */
void cli_error(const char *fmt, ...) CLI_PRINTF(1, 2);

/* ---- "did you mean" (suggest.c) ------------------------------------------- */

/* After an error about `typed` (a command, or an option without its
** dashes), print git's "The most similar <what> is" with the closest of
** names[0..n) (each printed after `prefix`, e.g. "--"), when one is close
** enough.  Returns how many were printed. */
size_t cli_suggest(const char *typed, const char *const *names, size_t n,
                   const char *what, const char *prefix);

/* ---- the man page and shell completion (help_formats.c) ------------------- */

typedef struct cli_help_entry {
  const char *name, *summary, *usage; /* as `stoke help` prints them */
} cli_help_entry;

/* stoke(1) in roff: `general` (the text of `stoke help`) as its
** description, then one section per command made from its usage text. */
void cli_print_man(FILE *f, const cli_help_entry *cmds, size_t n,
                   const char *general);
/* A completion script for `shell` ("bash"): the commands, and each one's
** options as its usage text lists them.  CLI_OK, or CLI_USAGE for another
** shell (message printed). */
int cli_print_completion(FILE *f, const char *shell,
                         const cli_help_entry *cmds, size_t n);

/* ---- option parsing (options.c) ----------------------------------------- */

typedef struct cli_opt {
  const char *name; /* long name without "--" */
  char short_name;  /* 0: none */
  int has_arg;      /* 1: takes a value (--name=V, --name V, -xV, -x V);
                       CLI_ARG_OPTIONAL: --name=V, or --name V when V is a
                       word naming no file (V NULL when absent) */
  int id;           /* returned by cli_next_opt */
} cli_opt;

#define CLI_ARG_OPTIONAL 2

typedef struct cli_parser {
  int argc;
  char **argv;
  int i;             /* next argv element to look at */
  const char *cmd;   /* the command, for "see 'stoke help <cmd>'" */
  const char *flag;  /* the option just returned, as written: "--workers" */
  char flag_buf[64]; /* storage for flag when it has to be rebuilt */
  const char *short_rest; /* rest of a bundle of short flags, e.g. "q" */
  int only_args;          /* "--" seen: the rest is positional */
} cli_parser;

enum {
  CLI_OPT_END = -1,   /* no more arguments */
  CLI_OPT_ERROR = -2, /* unknown option or missing value; message printed */
  CLI_OPT_ARG = -3    /* a positional argument, in *value */
};

void cli_parser_init(cli_parser *p, int argc, char **argv, const char *cmd);
/* The next option: its id (value in *value when it takes one), or one of
** CLI_OPT_*.  "--" ends the options; later arguments are positional. */
int cli_next_opt(cli_parser *p, const cli_opt *opts, const char **value);

/* Value parsers.  `what` names the option in the message ("--workers").
** Each returns 0, or -1 after printing "stoke: <what>: ..." (a usage
** error). */
int cli_parse_u64(const char *what, const char *s, uint64_t *out);
/* An unsigned in [lo, hi]. */
int cli_parse_uint(const char *what, const char *s, unsigned lo, unsigned hi,
                   unsigned *out);
int cli_parse_size_t(const char *what, const char *s, size_t lo, size_t *out);
/* A finite double > 0. */
int cli_parse_positive(const char *what, const char *s, double *out);
/* A duration: a number with a unit ns, us, ms, s, min or h ("5ms", "1.5s",
** "8h").  A bare
** number is allowed only for 0, or when default_unit is given (e.g. "ms"). */
int cli_parse_duration(const char *what, const char *s,
                       const char *default_unit, int64_t *ns);
/* A byte count: "8GiB", "512MiB", "100MB", "4096"; K, M, G, T alone are
** binary, KB, MB, ... decimal. */
int cli_parse_bytes(const char *what, const char *s, uint64_t *out);
/* "812 B", "1.5 KiB", "3.2 GiB": binary units, one decimal. */
void cli_format_bytes(char *buf, size_t n, uint64_t b);
/* A shape "3x32x32": 1..STOKE_MAX_DIMS positive extents. */
int cli_parse_shape(const char *what, const char *s, int *ndim,
                    int64_t shape[STOKE_MAX_DIMS]);

/* Format ns in the largest unit that keeps it exact: "5ms", "1500us", "0". */
void cli_fmt_duration(int64_t ns, char *buf, size_t n);
/* Format a shape as "3x32x32". */
void cli_fmt_shape(int ndim, const int64_t *shape, char *buf, size_t n);

/* ---- progress (progress.c) ---------------------------------------------- */

double cli_now_s(void); /* CLOCK_MONOTONIC, seconds */

typedef struct cli_progress {
  FILE *f;          /* NULL: quiet */
  int tty;          /* redraw one line with \r */
  double t0, last;  /* seconds */
  const char *what; /* "pack": the log line's prefix */
} cli_progress;

void cli_progress_init(cli_progress *p, FILE *f, const char *what);
/* Count, rate and ETA, at most every 0.1 s on a terminal (a bar, then
** bar_extra) or 2 s otherwise (a line, then line_extra), and at the end. */
void cli_progress_show(cli_progress *p, size_t done, size_t total,
                       const char *bar_extra, const char *line_extra);


/* Spans kept per thread when a trace is asked for: the latest 64 Ki (2 MiB
** per thread) cover several epochs of a typical run. */
#define CLI_TRACE_EVENTS 65536

/* Parse "sleep:5ms", "spin:0", "tensor" into the source part of spec.
** Returns 0 or -1 after a usage message naming `what`. */
int cli_parse_synthetic(const char *what, const char *s,
                        stoke_synthetic_config *synth);
/* Parse "fixed", "exp", "lognormal" or "lognormal:SIGMA". */
int cli_parse_cost_dist(const char *what, const char *s,
                        stoke_synthetic_config *synth);
/* Parse "none", "sleep:12ms", "spin:12ms", "gpu-sleep:12ms". */
int cli_parse_compute(const char *what, const char *s, int *kind, int64_t *ns);

/* What those parse, as text that parses back (the report library's
** report_fmt_synthetic, report_fmt_cost_dist, report_fmt_compute). */
void cli_fmt_synthetic(const stoke_synthetic_config *synth, char *buf,
                       size_t n);
void cli_fmt_cost_dist(const stoke_synthetic_config *synth, char *buf,
                       size_t n);
void cli_fmt_compute(int kind, int64_t ns, char *buf, size_t n);

/* One simulated training step of the given kind (REPORT_COMPUTE_*, but not
** GPU_SLEEP, which needs the loader's device): what cli_run does between
** next() and release; shared with tune. */
void cli_consumer_step(int kind, int64_t ns);

/* The source options (source_args.c): a dataset (the positional argument)
** read with --transform, or --synthetic with --samples, --shape,
** --cost-dist and --classes.  Every command that builds a source (bench,
** profile, tune, budget) puts cli_source_opts (NULL-terminated, ids
** 1 .. CLI_SRC_OPT_LAST - 1) in its option table and hands every id it does
** not know, positional arguments included, to cli_source_args_apply. */
enum {
  CLI_SRC_SYNTHETIC = 1,
  CLI_SRC_SAMPLES,
  CLI_SRC_SHAPE,
  CLI_SRC_COST_DIST,
  CLI_SRC_CLASSES,
  CLI_SRC_TRANSFORM,
  /* Shards given as URLs (docs/remote.md). */
  CLI_SRC_IO_CONCURRENCY,
  CLI_SRC_TLS_CA,
  CLI_SRC_TLS_INSECURE,
  CLI_SRC_CONNECT_TIMEOUT,
  CLI_SRC_STALL_TIMEOUT,
  CLI_SRC_HTTP_ATTEMPTS,
  CLI_SRC_RETRY_BUDGET,
  CLI_SRC_RETRY_BACKOFF,
  CLI_SRC_OPT_LAST /* the next command's ids start here */
};
extern const cli_opt cli_source_opts[];

typedef struct cli_source_args {
  const char *data;              /* the dataset, or NULL */
  stoke_image_config image;      /* how to read it (--transform) */
  stoke_synthetic_config synth;  /* the source without a dataset */
  int synthetic;                 /* --synthetic was given */
  const char *default_transform; /* to tell whether --transform was given */
} cli_source_args;

void cli_source_args_init(cli_source_args *s);
/* Apply option `id` (or CLI_OPT_ARG: the dataset) with flag text `flag`
** and value `value`: 0 done, -1 after a usage message, 1 when id is not a
** source option. */
int cli_source_args_apply(cli_source_args *s, int id, const char *flag,
                          const char *value);
/* Checks across the source options: not both a dataset and --synthetic,
** --transform only with a dataset.  0, or -1 after a usage message naming
** `cmd`.  A source may still be missing (budget can do without one). */
int cli_source_args_check(const cli_source_args *s, const char *cmd);
/* cli_source_args_check, and a source must be given. */
int cli_source_args_finish(const cli_source_args *s, const char *cmd);

/* Copy the NULL-terminated option tables given after cap (a NULL ends the
** list) into dst, one after the other, and terminate dst.  Returns the
** number of options.  dst holds cap entries, the terminator included. */
size_t cli_opts_join(cli_opt *dst, size_t cap, ...);

/* The loader, consumer and output (--json, --trace, --quiet) options of
** bench, shared by commands that run a loader (cmd_profile.c), ids
** CLI_SRC_OPT_LAST .. CLI_RUN_OPT_LAST - 1.  A command joins
** cli_source_opts, cli_run_opts and its own options (numbered from
** CLI_RUN_OPT_LAST) and hands every id it does not know, positional
** arguments (the dataset) included, to cli_run_args_apply. */
#define CLI_RUN_OPT_LAST 60 /* 48 before the 8 remote source options and
                               the 4 metrics options */
extern const cli_opt cli_run_opts[];

/* The source of bench, profile, tune and budget: the image dataset `data`
** read with `image`, or without data the synthetic `synth`.  CLI_OK, or
** CLI_ERROR after printing the library's message. */
int cli_source_create(const char *data, const stoke_image_config *image,
                      const stoke_synthetic_config *synth,
                      stoke_source **out);

/* "synthetic sleep:5ms (fixed) x 256 samples" or "images DIR (...)". */
void report_fmt_source(const report_spec *spec, size_t n_samples, char *buf,
                       size_t n);

typedef struct cli_run_args {
  report_spec spec;        /* its source is copied from src by finish */
  cli_source_args src;
  int warmup;
  unsigned rank, world;
  const char *json_path;    /* --json, or NULL */
  int quiet;                /* --quiet */
} cli_run_args;

/* Defaults (RANK and WORLD_SIZE from the environment).  0, or -1 after a
** usage message. */
int cli_run_args_init(cli_run_args *a);
/* Apply option `id` (or CLI_OPT_ARG: the dataset) with flag text `flag`
** and value `value`: 0 done, -1 after a usage message, 1 when id is not a
** run option. */
int cli_run_args_apply(cli_run_args *a, int id, const char *flag,
                       const char *value);
/* Checks across options; fills the source into spec and rank, world and
** warm-up into spec.cfg.  0, or -1 after a usage message naming `cmd`. */
int cli_run_args_finish(cli_run_args *a, const char *cmd);

/* Run spec to the end.  Returns CLI_OK, or CLI_ERROR after printing
** "stoke: <library message>".  On success free res with
** report_result_free(). */
int cli_run(const report_spec *spec, report_result *res);
/* Open json_path ("-" = stdout; NULL = none) before the run, so a bad path
** fails first, then cli_run().  On failure the file is removed and *json is
** NULL. */
int cli_run_open(const report_spec *spec, const char *json_path,
                 FILE **json, report_result *res);

/* Write root to path ("-" = stdout), pretty-printed and stamped with its
** schema_version (report_json_write).  Returns CLI_OK or CLI_ERROR after a
** message. */
int cli_write_json(const char *path, FILE *f, cJSON *root);
/* Open path for cli_write_json up front, so that a bad path fails before a
** long run: returns stdout for "-", NULL after a message. */
FILE *cli_open_output(const char *path);

/* "uniform" (or NULL: --shuffle alone), "none", "block" or "block=SIZE"
** into cfg->shuffle and shuffle_block_bytes. */
int cli_parse_shuffle(const char *what, const char *v, stoke_config *cfg);
/* "2.50/h", "$2.5", "0.04/min", "0.001/s" into a price per hour. */
int cli_parse_price(const char *what, const char *v, double *per_hour);

/* ---- bad samples and resume (bad_samples.c) ------------------------------ */

/* "fail", "skip" or "replace". */
int cli_parse_on_error(const char *what, const char *s, int *out);
/* "100" (a count per epoch), "0.1%" (a share of an epoch's samples) or
** "none" into cfg->max_failures / max_failure_frac. */
int cli_parse_max_failures(const char *what, const char *s, stoke_config *cfg);
/* A state file (stoke_loader_state_encode's bytes): CLI_OK, or CLI_ERROR
** after a message naming the file.  Writes go to FILE.tmp, then rename. */
int cli_state_read(const char *path, stoke_loader_state *st);
int cli_state_write(const char *path, const stoke_loader_state *st);

/* ---- the demo's dataset (demo_data.c) ------------------------------------ */

/* Make the built-in image dataset under dir unless an earlier run did:
** synthesised JPEGs, one folder per class.  Returns 0, or -1 after a
** message. */
int cli_demo_dataset(const char *dir, FILE *log);
/* `stoke demo --seed000` (demo_seed000.c). */
int cli_demo_seed000(int argc, char **argv);
/* mkdir -p: 0, or -1 with errno set. */
int cli_mkdir_p(const char *path);

#endif /* STOKE_CLI_H */

