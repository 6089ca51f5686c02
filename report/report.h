/* report.h — the report library: what a run was and what it measured (the
** snapshot), and how it is told: the text printers, the JSON documents (each
** stamped with its schema_version), the HTML page and its charts.
**
** Both front ends link it: the `stoke` tool (cli/) and the Python module
** (python/ext/).  It depends only on include/stoke.h and cJSON; it never
** parses options, prints "stoke: " messages or exits.  Where a report names
** a setting (the advice, the deadline's rows) the caller gives its words
** (stoke_advice_words): the tool's flags or Python's keyword arguments.
**
** Thread-safety: every function works on the caller's objects only; calls
** on distinct objects may run in parallel. */
#ifndef STOKE_REPORT_H
#define STOKE_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "stoke.h"

#if defined(__GNUC__)
#define REPORT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define REPORT_PRINTF(a, b)
#endif

/* The version of every JSON document stoke writes (its "schema_version"
** key): raised when a key changes meaning or goes away, not when one is
** added. */
#define REPORT_SCHEMA_VERSION 1

/* A failure's message, for the caller to show its own way (the tool:
** "stoke: <msg>" on stderr; Python: an exception). */
typedef struct report_err {
  char msg[512];
} report_err;

void report_errorf(report_err *e, const char *fmt, ...) REPORT_PRINTF(2, 3);

/* ---- formatting (format.c) ------------------------------------------------ */

/* ns in the largest unit that keeps it exact: "5ms", "1500us", "0". */
void report_fmt_duration(int64_t ns, char *buf, size_t n);
/* A shape as "3x32x32". */
void report_fmt_shape(int ndim, const int64_t *shape, char *buf, size_t n);
/* "812 B", "1.5 KiB", "3.2 GiB": binary units, one decimal. */
void report_fmt_bytes(char *buf, size_t n, uint64_t b);
/* "sleep", "spin", "tensor". */
const char *report_synth_kind_name(int kind);

/* ---- the host (machine.c) ----------------------------------------------- */

/* {cpu, cores, memory_bytes, kernel, arch, compiler, stoke_version}. */
cJSON *report_machine_json(void);
/* The online CPUs (sysconf), 0 if unknown. */
double report_online_cores(void);
/* Peak resident set of this process in bytes (getrusage), 0 if unknown. */
uint64_t report_peak_rss_bytes(void);

/* ---- the machine's other load while a run measures (outside_load.c) ---- */

/* The loader's or the clock's measurement (stoke_stats.outside_*, taken
** by the library's consumer clock: src/stats/outside.c) as the JSON's
** {windows, window_s, mean_cores, min_cores, max_cores, moved,
** shift_frac}. */
cJSON *report_outside_json(const stoke_stats *st);
/* The verdict's note when it moved; nothing otherwise. */
void report_outside_print(FILE *f, const stoke_stats *st);

/* ---- a measured run (run.c) --------------------------------------------- */

enum {
  REPORT_COMPUTE_NONE = 0,
  REPORT_COMPUTE_SLEEP = 1,
  REPORT_COMPUTE_SPIN = 2,
  REPORT_COMPUTE_GPU_SLEEP = 3 /* a kernel spinning on the consumer's stream */
};

/* Everything a run needs, after defaults and parsing. */
typedef struct report_spec {
  const char *data;             /* an image dataset, or NULL: synthetic */
  stoke_image_config image;     /* with data: how to read it */
  stoke_synthetic_config synth; /* without data: the source */
  stoke_config cfg;             /* the loader; cfg.source is set by the run */
  unsigned epochs;              /* total, warm-up included */
  int compute_kind;             /* REPORT_COMPUTE_* */
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
} report_spec;

typedef struct report_result {
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
  double samples_per_s; /* measured samples / measured seconds (with no
                           whole epoch measured: over the measured steps) */
  int partial;          /* some measured steps are not in whole measured
                           epochs (a warm-up ended early, an epoch cut) */
  uint64_t peak_rss_bytes;
  /* Measured epochs: time the consumer's thread was runnable but not
  ** running (Linux schedstat run delay), e.g. workers oversubscribing the
  ** cores; -1 when unknown. */
  int64_t consumer_run_delay_ns;
  /* The machine's other load while it measured (the CLI's runs). */
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
} report_result;

/* ---- the snapshot of a run (snapshot.c, format.c) ------------------------ */

/* Canonical text of the source ("sleep:5ms"), the cost distribution
** ("lognormal:0.5") and the consumer step ("sleep:12ms", "none"). */
void report_fmt_synthetic(const stoke_synthetic_config *synth, char *buf,
                          size_t n);
void report_fmt_cost_dist(const stoke_synthetic_config *synth, char *buf,
                          size_t n);
void report_fmt_compute(int kind, int64_t ns, char *buf, size_t n);

/* The consumer's step as the reports name it: the spec's compute_label, or
** its compute kind and time ("sleep:12ms"). */
void report_fmt_step(const report_spec *spec, char *buf, size_t n);
/* "synthetic sleep:5ms (fixed) x 256 samples" or "images DIR (...)". */
void report_fmt_source(const report_spec *spec, size_t n_samples, char *buf,
                       size_t n);

/* Free what res holds (its arrays); res itself is the caller's. */
void report_result_free(report_result *res);
/* Fill res from a live loader: its configuration, statistics, epochs, wait
** histogram, model and verdict (res zeroed first by the caller; not the
** peak RSS nor the consumer's run delay, which the caller measures).
** Returns 0 or a STOKE_E* code; free with report_result_free. */
int report_result_collect(stoke_loader *l, report_result *res);
/* n_measured, epoch_s, samples_per_s and partial from res->epochs (the
** measured, not warm-up, ones) and res->stats (set it first). */
void report_result_measure(report_result *res);

/* ---- the text and the JSON of a run (text.c, json.c) ---------------------- */

/* The headline ("stoke bench: <source>, batch ..."), the epochs, the
** summary and the verdict. */
void report_print_report(FILE *f, const char *cmd, const report_spec *spec,
                         const report_result *res);

/* Human report: the per-epoch table, the steady state and the verdict. */
void report_print_epochs(FILE *f, const report_result *res);
void report_print_summary(FILE *f, const report_result *res);
/* The autotuner's decisions, when it ran (nothing otherwise). */
void report_print_autotune(FILE *f, const report_result *res);
/* The device lines of the report, when a device or pinned memory was asked
** for: which backend serves and why, the clock, the copies and the
** overlap. */
void report_print_device(FILE *f, const report_result *res);
void report_print_verdict(FILE *f, const char *indent,
                          const stoke_diagnosis *diag);

/* JSON parts of a report; each returns a new object (NULL on OOM). */
cJSON *report_config_json(const report_spec *spec, const report_result *res);
cJSON *report_epochs_json(const report_result *res);
cJSON *report_summary_json(const report_result *res);
cJSON *report_stages_json(const report_result *res);
/* `stoke bench --json`'s document: config, machine, epochs, summary,
** stages, bad_samples, resume, device (profile adds its diagnosis). */
cJSON *report_run_json(const report_spec *spec, const report_result *res);
/* {backend, reason, normalize, clock, copy and overlap figures}. */
cJSON *report_device_json(const report_result *res);
/* The autotuner: its limits, the configuration it ended at and every
** decision; null when it did not run. */
cJSON *report_autotune_json(const report_result *res);

/* ---- what the wait costs, echo and the caches (rungs.c) ----------------- */

/* The steady state's rungs, in report_print_summary: with echo, steps/s and
** fresh samples/s apart; the caches' hits; then the cost: time per sample
** and per epoch, the share the accelerator waits, and with a price
** (res->gpu_price_per_h) the money per epoch and what the waiting costs. */
void report_print_rungs(FILE *f, const report_result *res);
/* {seconds_per_sample, seconds_per_epoch, wait_seconds_per_epoch,
** wait_share, gpu_price_per_hour, per_epoch, wait_per_epoch,
** per_million_samples, wait_per_million_samples} (the money null without
** a price). */
cJSON *report_cost_json(const report_result *res);
/* Into the summary object o: steps_per_s, fresh_samples_per_s, echo,
** echo_mode, and the caches' figures when there are caches. */
void report_rungs_json(cJSON *o, const report_result *res);
/* fetch.c: the fetch stage of a remote source (stats.fetch_remote): its
** line in the text report (nothing for a local source), its JSON object. */
void report_print_fetch(FILE *f, const report_result *res);
cJSON *report_fetch_json(const report_result *res);
/* The remote shard cache's counts (stoke_stats.rcache_*): a line of the
** text report and the JSON summary's "remote_cache", only for a source
** opened with a cache. */
void report_print_rcache(FILE *f, const report_result *res);
cJSON *report_rcache_json(const report_result *res);

/* ---- bad samples and resume (failures.c) --------------------------------- */

/* The failure budget as the option would say it: "100", "1%", "none". */
void report_fmt_max_failures(const stoke_config *cfg, char *buf, size_t n);
/* "bad samples: 3 (replaced 3) ..." and the last few; nothing when the run
** met none. */
void report_print_failures(FILE *f, const report_result *res);
/* {policy, budget, quarantine, failures, quarantined, skipped, replaced,
** last: [{index, epoch, batch, where, reason, action, substitute}]}. */
cJSON *report_failures_json(const report_spec *spec, const report_result *res);
/* {resumed_from: {epoch, batch}, batches, stopped, state: {...}}. */
cJSON *report_resume_json(const report_spec *spec, const report_result *res);

/* ---- the profile (profile.c) ---------------------------------------------- */

/* The analysis is libstoke's (stoke_profile_analyse); these give it a
** report_result and tell it.  Where the text or the JSON names a setting
** (the advice, the deadline's rows), words say how (NULL: as
** stoke_advice.text does). */

/* N epochs at the measured configuration (stoke_deadline_measured over
** res's epochs; fallback_ns when none was measured).  Shared with the
** Python module's TwoClock, which has epochs but no model. */
int report_deadline_measured(const report_result *res, unsigned epochs,
                             int64_t deadline_ns, int64_t fallback_ns,
                             stoke_deadline *out);
/* The deadline's heading, one row of it ("now  -j 2 --prefetch 2: ..."),
** and one row as JSON. */
void report_print_deadline_head(FILE *f, unsigned epochs, int64_t deadline_ns);
void report_print_deadline_row(FILE *f, const stoke_advice_words *words,
                               const char *what, unsigned w, unsigned k,
                               unsigned epochs, const stoke_deadline *d,
                               const char *basis);
cJSON *report_deadline_row_json(unsigned w, unsigned k, const stoke_deadline *d);
/* Analyse res (which must have measured steps) into pr, whose grid and
** deadline the caller set; res->diag becomes the model's verdict.
** consumer_cpu: cores the consumer's step burns, or < 0 to take it from
** spec's step (spin: 1, else 0).  cores 0: online CPUs.  Returns 0 or a
** STOKE_E* code. */
int report_profile_analyse(const report_spec *spec, report_result *res,
                           unsigned cores, double consumer_cpu,
                           stoke_profile *pr);
/* The verdict's numbers, the model, the what-if table and the advice. */
void report_print_profile(FILE *f, const stoke_advice_words *words,
                          const report_result *res, const stoke_profile *pr);
/* The verdict's part of a diagnosis object: verdict, reason, the ratios and
** the thresholds they were read against. */
cJSON *report_verdict_json(const stoke_diagnosis *d);
/* The same as the "diagnosis" object of profile's JSON. */
cJSON *report_diagnosis_json(const stoke_advice_words *words,
                             const report_result *res,
                             const stoke_profile *pr);

/* ---- tune's JSON (tune_json.c) ------------------------------------------- */

/* One point of a sweep, and the knee with its stoke flags and PyTorch
** DataLoader arguments, as `stoke tune --json` writes them. */
cJSON *report_tune_point_json(const stoke_tune_point *p);
cJSON *report_tune_knee_json(const stoke_tune_point *pts,
                             const stoke_tune_knee *k, int batch_swept);


/* The knee as the tool's flags ("-j 4 --prefetch 2", with "-b N" when the
** batch size was swept, "--io-concurrency N" when the point was a remote
** run: stoke_tune_point.io_concurrency) and as a PyTorch DataLoader(...)
** call. */
void report_tune_flags(char *buf, size_t n, const stoke_tune_point *k,
                       int batch_swept);
void report_tune_pytorch(char *buf, size_t n, const stoke_tune_point *k);

/* ---- JSON documents (json.c) ---------------------------------------------- */

/* Stamp root, a document stoke writes, with its "schema_version" (the first
** key).  Returns root (NULL stays NULL). */
cJSON *report_json_stamp(cJSON *root);
/* root stamped and pretty-printed into path ("-" = stdout) or the open f
** (closed unless stdout).  0, or -1 with e->msg naming the path. */
int report_json_write(const char *path, FILE *f, cJSON *root, report_err *e);

/* ---- the HTML page (html.c) ------------------------------------------------ */

/* `stoke report`'s page: one self-contained HTML document from the JSON of
** bench, profile and tune (paths[0..n), kinds told by their keys) into
** out_path ("-" = stdout).  Every input is read first: a bad one leaves no
** page.  0, or -1 with e->msg. */
int report_html_write(const char *const *paths, size_t n,
                      const char *out_path, report_err *e);

#endif /* STOKE_REPORT_H */
