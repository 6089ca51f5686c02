/* cli.h — shared declarations of the stoke command-line tool.
**
** The tool is a thin client of include/stoke.h: it never sees the library's
** internals.  main.c holds the command table; each command lives in
** cmd_<name>.c; options.c parses options and values; machine.c describes the
** host; run.c runs a loader against a simulated consumer and reports it
** (shared by bench and demo).
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

/* Usage texts, printed by "stoke help <cmd>" and "stoke <cmd> --help". */
extern const char cmd_bench_usage[];
extern const char cmd_demo_usage[];
extern const char cmd_tune_usage[];
extern const char cmd_budget_usage[];
extern const char cmd_pack_usage[];
extern const char cmd_inspect_usage[];
extern const char cmd_profile_usage[];
extern const char cmd_report_usage[];

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

/* ---- the host (machine.c) ----------------------------------------------- */

/* {cpu, cores, memory_bytes, kernel, arch, compiler, stoke_version}. */
cJSON *cli_machine_json(void);
/* Peak resident set of this process in bytes (getrusage), 0 if unknown. */
uint64_t cli_peak_rss_bytes(void);

/* ---- a measured run (run.c) --------------------------------------------- */

enum {
  CLI_COMPUTE_NONE = 0,
  CLI_COMPUTE_SLEEP = 1,
  CLI_COMPUTE_SPIN = 2,
  CLI_COMPUTE_GPU_SLEEP = 3 /* a kernel spinning on the consumer's stream */
};

/* Everything a run needs, after defaults and parsing. */
typedef struct cli_run_spec {
  const char *data;             /* an image dataset, or NULL: synthetic */
  stoke_image_config image;     /* with data: how to read it */
  stoke_synthetic_config synth; /* without data: the source */
  stoke_config cfg;             /* the loader; cfg.source is set by the run */
  unsigned epochs;              /* total, warm-up included */
  int compute_kind;             /* CLI_COMPUTE_* */
  int64_t compute_ns;           /* per step */
  const char *trace_path;       /* write a Chrome trace here, or NULL */
  /* Resume (bad_samples.c): */
  const char *resume_path;      /* --resume: a state to continue from */
  const char *save_state_path;  /* --save-state: where the state goes */
  uint64_t save_every;          /* --save-state-every: batches; 0: at the
                                   end (or the stop) only */
  uint64_t stop_after;          /* --stop-after: end after this many
                                   batches; 0: run every epoch */
  const char *indices_path;     /* --indices: each batch's sample indices */
  /* Another client's run (the Python module): how the reports name its
  ** source ("arrays", "Python dataset") and its step ("the caller's
  ** loop"), instead of data/synth and compute_kind.  NULL: not used. */
  const char *source_label;
  const char *compute_label;
  double gpu_price_per_h;       /* --gpu-price: the accelerator's price per
                                   hour; 0: none (cost in time only) */
} cli_run_spec;

/* Spans kept per thread when a trace is asked for: the latest 64 Ki (2 MiB
** per thread) cover several epochs of a typical run. */
#define CLI_TRACE_EVENTS 65536

typedef struct cli_run_result {
  stoke_hist_bucket *wait_hist; /* non-empty wait buckets, malloc'd */
  size_t n_wait_hist;
  char source_kind[16];        /* "synthetic", "folder", "tar", "packed" */
  size_t source_samples;       /* in the source, all ranks */
  stoke_config eff;            /* the configuration in force */
  size_t n_batches, n_samples; /* per epoch, this rank */
  uint64_t host_bytes;
  size_t n_epochs;
  stoke_epoch_stats *epochs; /* n_epochs records, malloc'd */
  stoke_stats stats;         /* steady state (warm-up excluded) */
  stoke_diagnosis diag;
  stoke_device_info device; /* what served the batches, and why */
  char device_text[32];     /* eff.device as it was ("cpu", "cuda:0"); eff's
                               own pointer is NULL: it was the loader's */
  size_t n_measured;    /* epochs that are not warm-up */
  double epoch_s;       /* mean wall seconds of measured epochs */
  double samples_per_s; /* measured samples / measured seconds */
  uint64_t peak_rss_bytes;
  /* Measured epochs: time the consumer's thread was runnable but not
  ** running (Linux schedstat run delay), e.g. workers oversubscribing the
  ** cores; -1 when unknown. */
  int64_t consumer_run_delay_ns;
  /* stoke_model_init(stats, eff, 0) while the workers were alive, so that
  ** it holds their scheduler statistics (run_delay_frac). */
  stoke_model model;
  /* Bad samples: the last few (stoke_loader_failures); counts in stats. */
  size_t n_failures_kept;
  stoke_failure failures[STOKE_FAILURES_KEPT];
  /* Resume: where the run began and how it ended. */
  int resumed;                 /* --resume was given */
  uint64_t start_epoch, start_batch;
  char resume_note[512];       /* the library's note (elastic), or "" */
  uint64_t batches_run;        /* batches this run handed out */
  int stopped;                 /* ended by --stop-after */
  stoke_loader_state state;    /* the state at the end (or the stop) */
  /* Online autotuning: its decisions (stoke_loader_autotune_event),
  ** malloc'd; stats has the counts and the configuration in force. */
  stoke_autotune_event *autotune;
  size_t n_autotune;
  double gpu_price_per_h;      /* the spec's --gpu-price (0: none) */
} cli_run_result;

/* Parse "sleep:5ms", "spin:0", "tensor" into the source part of spec.
** Returns 0 or -1 after a usage message naming `what`. */
int cli_parse_synthetic(const char *what, const char *s,
                        stoke_synthetic_config *synth);
/* Parse "fixed", "exp", "lognormal" or "lognormal:SIGMA". */
int cli_parse_cost_dist(const char *what, const char *s,
                        stoke_synthetic_config *synth);
/* Parse "none", "sleep:12ms", "spin:12ms", "gpu-sleep:12ms". */
int cli_parse_compute(const char *what, const char *s, int *kind, int64_t *ns);

/* Canonical text of the source ("sleep:5ms"), the cost distribution
** ("lognormal:0.5") and the consumer step ("sleep:12ms", "none"). */
void cli_fmt_synthetic(const stoke_synthetic_config *synth, char *buf,
                       size_t n);
void cli_fmt_cost_dist(const stoke_synthetic_config *synth, char *buf,
                       size_t n);
void cli_fmt_compute(int kind, int64_t ns, char *buf, size_t n);

/* One simulated training step of the given kind (CLI_COMPUTE_*, but not
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
#define CLI_RUN_OPT_LAST 48
extern const cli_opt cli_run_opts[];

/* The source of bench, profile, tune and budget: the image dataset `data`
** read with `image`, or without data the synthetic `synth`.  CLI_OK, or
** CLI_ERROR after printing the library's message. */
int cli_source_create(const char *data, const stoke_image_config *image,
                      const stoke_synthetic_config *synth,
                      stoke_source **out);

/* "synthetic sleep:5ms (fixed) x 256 samples" or "images DIR (...)". */
void cli_fmt_source(const cli_run_spec *spec, size_t n_samples, char *buf,
                    size_t n);

typedef struct cli_run_args {
  cli_run_spec spec;        /* its source is copied from src by finish */
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
** cli_run_result_free(). */
int cli_run(const cli_run_spec *spec, cli_run_result *res);
void cli_run_result_free(cli_run_result *res);
/* Fill res from a live loader: its configuration, statistics, epochs, wait
** histogram, model and verdict (res zeroed first by the caller; not the
** peak RSS nor the consumer's run delay, which the caller measures).
** Returns 0 or a STOKE_E* code; free with cli_run_result_free. */
int cli_result_collect(stoke_loader *l, cli_run_result *res);
/* n_measured, epoch_s and samples_per_s from res->epochs (the measured,
** not warm-up, ones). */
void cli_result_measure(cli_run_result *res);
/* Open json_path ("-" = stdout; NULL = none) before the run, so a bad path
** fails first, then cli_run().  On failure the file is removed and *json is
** NULL. */
int cli_run_open(const cli_run_spec *spec, const char *json_path,
                 FILE **json, cli_run_result *res);
/* The headline ("stoke bench: <source>, batch ..."), the epochs, the
** summary and the verdict. */
void cli_print_report(FILE *f, const char *cmd, const cli_run_spec *spec,
                      const cli_run_result *res);

/* Human report: the per-epoch table, the steady state and the verdict. */
void cli_print_epochs(FILE *f, const cli_run_result *res);
void cli_print_summary(FILE *f, const cli_run_result *res);
/* The autotuner's decisions, when it ran (nothing otherwise). */
void cli_print_autotune(FILE *f, const cli_run_result *res);
/* The device lines of the report, when a device or pinned memory was asked
** for: which backend serves and why, the clock, the copies and the
** overlap. */
void cli_print_device(FILE *f, const cli_run_result *res);
void cli_print_verdict(FILE *f, const char *indent,
                       const stoke_diagnosis *diag);

/* JSON parts of a report; each returns a new object (NULL on OOM). */
cJSON *cli_config_json(const cli_run_spec *spec, const cli_run_result *res);
cJSON *cli_epochs_json(const cli_run_result *res);
cJSON *cli_summary_json(const cli_run_result *res);
cJSON *cli_stages_json(const cli_run_result *res);
/* `stoke bench --json`'s document: config, machine, epochs, summary,
** stages, bad_samples, resume, device (profile adds its diagnosis). */
cJSON *cli_run_json(const cli_run_spec *spec, const cli_run_result *res);
/* {backend, reason, normalize, clock, copy and overlap figures}. */
cJSON *cli_device_json(const cli_run_result *res);
/* The autotuner: its limits, the configuration it ended at and every
** decision; null when it did not run. */
cJSON *cli_autotune_json(const cli_run_result *res);

/* Write root to path ("-" = stdout), pretty-printed.  Returns CLI_OK or
** CLI_ERROR after a message. */
int cli_write_json(const char *path, FILE *f, const cJSON *root);
/* Open path for cli_write_json up front, so that a bad path fails before a
** long run: returns stdout for "-", NULL after a message. */
FILE *cli_open_output(const char *path);

/* "uniform" (or NULL: --shuffle alone), "none", "block" or "block=SIZE"
** into cfg->shuffle and shuffle_block_bytes. */
int cli_parse_shuffle(const char *what, const char *v, stoke_config *cfg);
/* "2.50/h", "$2.5", "0.04/min", "0.001/s" into a price per hour. */
int cli_parse_price(const char *what, const char *v, double *per_hour);

/* ---- what the wait costs, echo and the caches (cost.c) ------------------ */

/* The steady state's rungs, in cli_print_summary: with echo, steps/s and
** fresh samples/s apart; the caches' hits; then the cost: time per sample
** and per epoch, the share the accelerator waits, and with a price
** (res->gpu_price_per_h) the money per epoch and what the waiting costs. */
void cli_print_rungs(FILE *f, const cli_run_result *res);
/* {seconds_per_sample, seconds_per_epoch, wait_seconds_per_epoch,
** wait_share, gpu_price_per_hour, per_epoch, wait_per_epoch,
** per_million_samples, wait_per_million_samples} (the money null without
** a price). */
cJSON *cli_cost_json(const cli_run_result *res);
/* Into the summary object o: steps_per_s, fresh_samples_per_s, echo,
** echo_mode, and the caches' figures when there are caches. */
void cli_rungs_json(cJSON *o, const cli_run_result *res);

/* ---- bad samples and resume (bad_samples.c) ------------------------------ */

/* "fail", "skip" or "replace". */
int cli_parse_on_error(const char *what, const char *s, int *out);
/* "100" (a count per epoch), "0.1%" (a share of an epoch's samples) or
** "none" into cfg->max_failures / max_failure_frac. */
int cli_parse_max_failures(const char *what, const char *s, stoke_config *cfg);
/* The budget as the option would say it: "100", "1%", "none". */
void cli_fmt_max_failures(const stoke_config *cfg, char *buf, size_t n);
/* A state file (stoke_loader_state_encode's bytes): CLI_OK, or CLI_ERROR
** after a message naming the file.  Writes go to FILE.tmp, then rename. */
int cli_state_read(const char *path, stoke_loader_state *st);
int cli_state_write(const char *path, const stoke_loader_state *st);
/* "bad samples: 3 (replaced 3) ..." and the last few; nothing when the run
** met none. */
void cli_print_failures(FILE *f, const cli_run_result *res);
/* {policy, budget, quarantine, failures, quarantined, skipped, replaced,
** last: [{index, epoch, batch, where, reason, action, substitute}]}. */
cJSON *cli_failures_json(const cli_run_spec *spec, const cli_run_result *res);
/* {resumed_from: {epoch, batch}, batches, stopped, state: {...}}. */
cJSON *cli_resume_json(const cli_run_spec *spec, const cli_run_result *res);
/* ---- the profile's analysis (profile.c) --------------------------------- */

#define CLI_MAX_WHATIF 16

typedef struct cli_uint_list {
  unsigned v[CLI_MAX_WHATIF];
  size_t n;
} cli_uint_list;

/* Add x unless present (at most CLI_MAX_WHATIF); sort without duplicates. */
void cli_uint_list_add(cli_uint_list *l, unsigned x);
void cli_uint_list_sort(cli_uint_list *l);

typedef struct cli_profile {
  stoke_model model;
  stoke_prediction now; /* the model's view of this run */
  int64_t measured_step_ns;
  int64_t consumer_delay_ns; /* per step: runnable, not running */
  double measured_epoch_ns;
  double step_error, epoch_error;
  cli_uint_list ws, ks; /* the what-if grid: set before the analysis */
  stoke_prediction what_if[CLI_MAX_WHATIF][CLI_MAX_WHATIF];
  stoke_advice advice[STOKE_MAX_ADVICE];
  size_t n_advice;
  /* --train-epochs N --deadline DUR (0: not asked): does N epochs fit, at
  ** this configuration and at the model's knee? */
  unsigned train_epochs;
  int64_t deadline_ns;
  stoke_deadline now_fit, knee_fit;
  unsigned knee_workers, knee_prefetch;
} cli_profile;

/* The what-if grid: with default_ws, workers 0, 1, 2, 4, 8, 16, 32 and the
** run's (default_ks: prefetch 1, 2, 4, 8 and the run's), added to what pr
** holds; then sorted. */
void cli_profile_grid(cli_profile *pr, const stoke_config *eff,
                      int default_ws, int default_ks);
/* The deadline's pieces, shared with the Python module (a TwoClock has
** measured epochs but no model): N epochs at the measured configuration,
** from the measured epochs' mean with their spread as the error bar (at
** least 5%; fallback_ns when no epoch was measured); the report's heading
** and one row; one row as JSON. */
int cli_deadline_measured(const cli_run_result *res, unsigned epochs,
                          int64_t deadline_ns, int64_t fallback_ns,
                          stoke_deadline *out);
void cli_print_deadline_head(FILE *f, unsigned epochs, int64_t deadline_ns);
void cli_print_deadline_row(FILE *f, const char *what, unsigned w, unsigned k,
                            unsigned epochs, const stoke_deadline *d,
                            const char *basis);
cJSON *cli_deadline_row_json(unsigned w, unsigned k, const stoke_deadline *d);
/* Model res (which must have measured steps), predict it, fill the what-if
** table over pr->ws x pr->ks, and the advice; res->diag becomes the
** model's verdict.  consumer_cpu: cores the consumer's step burns, or < 0
** to take it from spec's step (spin: 1, else 0).  cores 0: online CPUs.
** Returns 0 or a STOKE_E* code. */
int cli_profile_analyse(const cli_run_spec *spec, cli_run_result *res,
                        unsigned cores, double consumer_cpu, cli_profile *pr);
/* The verdict's numbers, the model, the what-if table and the advice. */
void cli_print_profile(FILE *f, const cli_run_result *res,
                       const cli_profile *pr);
/* The verdict's part of a diagnosis object: verdict, reason, the ratios and
** the thresholds they were read against. */
cJSON *cli_verdict_json(const stoke_diagnosis *d);
/* The same as the "diagnosis" object of profile's JSON. */
cJSON *cli_diagnosis_json(const cli_run_result *res, const cli_profile *pr);

/* ---- tune's JSON (cmd_tune.c) --------------------------------------------- */

/* One point of a sweep, and the knee with its stoke flags and PyTorch
** DataLoader arguments, as `stoke tune --json` writes them. */
cJSON *cli_tune_point_json(const stoke_tune_point *p);
cJSON *cli_tune_knee_json(const stoke_tune_point *pts,
                          const stoke_tune_knee *k, int batch_swept);

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
