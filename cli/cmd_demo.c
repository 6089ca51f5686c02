/* cmd_demo.c — "stoke demo": the main job.  The story of the seed texts,
** end to end, on real JPEG decoding, with no arguments and no network:
**
**   1. a built-in image dataset (synthesised JPEGs, made once into a cache);
**   2. PyTorch's defaults (0 workers) against a simulated GPU step: the
**      profile says "starving", with its numbers and advice;
**   3. `stoke tune` sweeps workers and prefetch and picks the knee;
**   4. the same run with the knee's settings: the split flips to "busy";
**   5. online, with no sweep: -j auto on samples that wait (storage or the
**      network: a knee above the core count), from 1 worker to the knee
**      while it runs, starving to busy, each decision printed;
**   6. report.html (the whole story as a page) and trace.json (Perfetto).
**
** The simulated step is sized from this machine's measured cost per image,
** so that 0 workers starve it and the machine's cores can feed it: what the
** demo shows is the flip, not a number tuned to one computer.
**
** Each stage is the real command (profile, tune, report) run in-process, so
** the demo prints exactly what a user would see. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

const char cmd_demo_usage[] =
    "usage: stoke demo [--out DIR] [--cache DIR] [--json FILE]\n"
    "       stoke demo --seed000 [--json FILE]\n"
    "\n"
    "Show a GPU waiting for data and the settings that feed it, on a\n"
    "built-in image dataset (synthesised JPEGs made once into a cache):\n"
    "profile PyTorch's default of 0 workers against a simulated GPU step\n"
    "(starving), tune workers and prefetch, rerun with the knee (busy), and\n"
    "write report.html and trace.json; then -j auto, the online autotuner,\n"
    "on samples that wait for storage: starving to busy while it runs,\n"
    "with no sweep.  Under a minute on 2 cores.\n"
    "\n"
    "  --out DIR              where the report, trace and JSON go\n"
    "                         (stoke-demo)\n"
    "  --cache DIR            where the dataset is kept ($XDG_CACHE_HOME or\n"
    "                         ~/.cache, /stoke/demo-v1)\n"
    "  --json FILE            a summary of the story as JSON\n"
    "  --seed000              the seed-000 experiment instead: synthetic\n"
    "                         samples costing 5 ms, workers 0 to 32\n";

enum { O_OUT = 1, O_CACHE, O_JSON, O_HELP, O_SEED000 };

static const cli_opt opts[] = {{"out", 0, 1, O_OUT},
                               {"cache", 0, 1, O_CACHE},
                               {"json", 0, 1, O_JSON},
                               {"help", 'h', 0, O_HELP},
                               {"seed000", 0, 0, O_SEED000},
                               {NULL, 0, 0, 0}};

#define BATCH 32
#define STEP_FACTOR 1.5

/* Run a command in-process, as `stoke ARGS...`. */
static int run_cmd(cli_cmd_fn fn, const char *const *args) {
  char *argv[40];
  int argc = 0;
  for (; args[argc] && argc < 39; argc++) argv[argc] = (char *)args[argc];
  argv[argc] = NULL;
  fflush(stdout);
  int rc = fn(argc, argv);
  fflush(stdout);
  fflush(stderr);
  return rc;
}

static cJSON *read_json(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *buf = malloc((size_t)n + 1);
  cJSON *j = NULL;
  if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
    buf[n] = '\0';
    j = cJSON_Parse(buf);
  }
  free(buf);
  fclose(f);
  return j;
}

static double num_at(const cJSON *o, const char *a, const char *b) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
  if (b) x = cJSON_GetObjectItemCaseSensitive(x, b);
  return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

static const char *str_at(const cJSON *o, const char *a, const char *b) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
  if (b) x = cJSON_GetObjectItemCaseSensitive(x, b);
  return cJSON_IsString(x) ? x->valuestring : "?";
}

static void default_cache(char *buf, size_t n) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (xdg && *xdg)
    snprintf(buf, n, "%s/stoke/demo-v1", xdg);
  else if (home && *home)
    snprintf(buf, n, "%s/.cache/stoke/demo-v1", home);
  else
    snprintf(buf, n, "/tmp/stoke-demo-cache-v1");
}

/* The measured cost of one image at 0 workers (read+decode+transform):
** one quick epoch over part of the dataset. */
static int measure_cost(const char *data, double *sec_per_image) {
  report_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.data = data;
  stoke_image_config_init(&spec.image);
  stoke_synthetic_config_init(&spec.synth);
  stoke_config_init(&spec.cfg);
  spec.cfg.batch_size = BATCH;
  spec.cfg.n_workers = 0;
  spec.cfg.warmup_epochs = 1;
  spec.epochs = 2;
  spec.compute_kind = REPORT_COMPUTE_NONE;
  report_result res;
  if (cli_run(&spec, &res) != CLI_OK) return -1;
  *sec_per_image = res.samples_per_s > 0 ? 1.0 / res.samples_per_s : 0;
  report_result_free(&res);
  return *sec_per_image > 0 ? 0 : -1;
}

int cmd_demo(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--seed000") == 0) {
      /* The seed-000 story keeps its own options. */
      for (int k = i; k + 1 < argc; k++) argv[k] = argv[k + 1];
      return cli_demo_seed000(argc - 1, argv);
    }
  const char *out = "stoke-demo", *cache = NULL, *json_path = NULL;
  cli_parser p;
  cli_parser_init(&p, argc, argv, "demo");
  const char *v;
  int id;
  while ((id = cli_next_opt(&p, opts, &v)) != CLI_OPT_END) {
    switch (id) {
    case CLI_OPT_ERROR:
      return CLI_USAGE;
    case CLI_OPT_ARG:
      cli_error("demo: unexpected argument '%s'", v);
      return CLI_USAGE;
    case O_HELP:
      fputs(cmd_demo_usage, stdout);
      return CLI_OK;
    case O_OUT:
      out = v;
      break;
    case O_CACHE:
      cache = v;
      break;
    case O_JSON:
      json_path = v;
      break;
    }
  }
  FILE *json = NULL;
  if (json_path && !(json = cli_open_output(json_path))) return CLI_ERROR;
  char data[1024];
  if (cache)
    snprintf(data, sizeof data, "%s", cache);
  else
    default_cache(data, sizeof data);
  if (cli_demo_dataset(data, stdout) != 0) return CLI_ERROR;
  if (cli_mkdir_p(out) != 0) {
    cli_error("demo: cannot create %s", out);
    return CLI_ERROR;
  }
  double t_img;
  if (measure_cost(data, &t_img) != 0) return CLI_ERROR;
  /* A step STEP_FACTOR x the time 0 workers need for a batch: 0 workers
  ** starve it (they wait 1 / (1 + STEP_FACTOR) of the step, 40%), and the
  ** knee has room to be busy when other processes take some of the cores
  ** (at 0.75x the knee's rerun read "starving" in 4 runs of 11 on a shared
  ** 2-core machine; at 1x, where one worker has no headroom at all, in 1 of
  ** 14 on an uncontended core; at 1.5x in 1 of 8 while a TSan suite ran
  ** beside it, its worker queued for a core 2.6 ns per ns run). */
  int step_ms = (int)ceil(STEP_FACTOR * BATCH * t_img * 1000.0);
  if (step_ms < 2) step_ms = 2;
  char step[32], before[1100], after[1100], tune[1100], svg[1100],
      trace[1100], report[1100];
  snprintf(step, sizeof step, "sleep:%dms", step_ms);
  snprintf(before, sizeof before, "%s/before.json", out);
  snprintf(after, sizeof after, "%s/after.json", out);
  snprintf(tune, sizeof tune, "%s/tune.json", out);
  snprintf(svg, sizeof svg, "%s/tune.svg", out);
  snprintf(trace, sizeof trace, "%s/trace.json", out);
  snprintf(report, sizeof report, "%s/report.html", out);

  printf("\nstoke demo: images in %s, batch %d; a simulated GPU step of %d "
         "ms\n(%.2fx the %.2f ms per batch this machine needs to make one "
         "with 0 workers)\n",
         data, BATCH, step_ms, STEP_FACTOR, BATCH * t_img * 1000.0);
  printf("\n== 1. PyTorch's defaults: 0 workers, every batch made inside "
         "next()\n\n");
  const char *a1[] = {"profile", data, "-b", "32", "-j", "0", "--compute",
                      step, "--epochs", "2", "--json", before, NULL};
  if (run_cmd(cmd_profile, a1) != CLI_OK) return CLI_ERROR;

  printf("\n== 2. stoke tune: workers x prefetch against the same step\n\n");
  char maxw[16];
  unsigned cores = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
  snprintf(maxw, sizeof maxw, "%u", cores * 2 > 8 ? 8 : cores * 2 < 4 ? 4
                                                                      : cores * 2);
  const char *a2[] = {"tune",  data,         "-b",       "32",
                      "--compute", step,     "--max-workers", maxw,
                      "--prefetch", "1,2",   "--json",   tune,
                      "--svg", svg,          NULL};
  if (run_cmd(cmd_tune, a2) != CLI_OK) return CLI_ERROR;
  cJSON *tj = read_json(tune);
  double kw = num_at(tj, "knee", "workers"), kk = num_at(tj, "knee",
                                                          "prefetch");
  if (!tj || isnan(kw) || isnan(kk)) {
    cli_error("demo: tune found no knee (see %s)", tune);
    cJSON_Delete(tj);
    return CLI_ERROR;
  }
  cJSON_Delete(tj);
  char ws[16], ks[16];
  snprintf(ws, sizeof ws, "%.0f", kw);
  snprintf(ks, sizeof ks, "%.0f", kk);

  printf("\n== 3. the knee's settings: -j %s --prefetch %s\n\n", ws, ks);
  const char *a3[] = {"profile", data,  "-b",      "32",   "-j",  ws,
                      "--prefetch", ks, "--compute", step, "--epochs", "2",
                      "--json", after,  "--trace", trace,  NULL};
  if (run_cmd(cmd_profile, a3) != CLI_OK) return CLI_ERROR;

  /* Samples that wait (2 ms each, as remote storage would) against a 16
  ** ms step: 0 or 1 worker starve it, the knee (64 / 16 = 4, 5 with room)
  ** is above this machine's cores, and sleeping needs no core, so the flip
  ** holds on a loaded machine too. */
  char autoj[1100];
  snprintf(autoj, sizeof autoj, "%s/autotune.json", out);
  printf("\n== 4. online, no sweep: -j auto on samples that wait 2 ms for "
         "storage,\n   against a 16 ms step: the loader starts with 1 "
         "worker and tunes itself\n\n");
  const char *a5[] = {"bench", "--synthetic", "sleep:2ms", "--samples", "640",
                      "-b", "32", "-j", "auto", "--compute", "sleep:16ms",
                      "--epochs", "4", "--json", autoj, NULL};
  if (run_cmd(cmd_bench, a5) != CLI_OK) return CLI_ERROR;

  const char *a4[] = {"report", before, tune, after, autoj, "-o", report,
                      NULL};
  if (run_cmd(cmd_report, a4) != CLI_OK) return CLI_ERROR;

  cJSON *bj = read_json(before), *aj = read_json(after);
  cJSON *uj = read_json(autoj);
  /* The autotuned run: its first epoch (from 1 worker) and its last. */
  const cJSON *ue = uj ? cJSON_GetObjectItemCaseSensitive(uj, "epochs") : NULL;
  int n_ue = ue ? cJSON_GetArraySize(ue) : 0;
  double u_first = NAN, u_last = NAN;
  for (int i = 0; i < n_ue; i += n_ue - 1 > 0 ? n_ue - 1 : 1) {
    const cJSON *e = cJSON_GetArrayItem(ue, i);
    double w = num_at(e, "wait_s", NULL), c = num_at(e, "compute_s", NULL);
    double r = w + c > 0 ? w / (w + c) : NAN;
    if (i == 0) u_first = r;
    else u_last = r;
  }
  double u_workers = num_at(uj, "autotune", "workers");
  double b_epoch = num_at(bj, "summary", "epoch_s"),
         a_epoch = num_at(aj, "summary", "epoch_s");
  printf("\n== the split, before and after\n\n");
  printf("  %-22s %9s %10s %12s  %s\n", "", "epoch s", "waiting", "computing",
         "verdict");
  const cJSON *runs[2] = {bj, aj};
  const char *names[2] = {"0 workers (PyTorch)", "knee"};
  for (int i = 0; i < 2; i++)
    printf("  %-22s %9.3f %9.1f%% %11.1f%%  %s\n", names[i],
           num_at(runs[i], "summary", "epoch_s"),
           100 * num_at(runs[i], "summary", "wait_ratio"),
           100 * (1 - num_at(runs[i], "summary", "wait_ratio")),
           str_at(runs[i], "summary", "verdict"));
  printf("\n  %.1fx faster per epoch with -j %s --prefetch %s\n",
         b_epoch / a_epoch, ws, ks);
  printf("\n  -j auto on waiting samples: its first epoch waited %.1f%% of "
         "the step, its last %.1f%%,\n  at %.0f workers, with no sweep "
         "(the decisions are above)\n",
         100 * u_first, 100 * u_last, u_workers);
  printf("\nwrote %s (open it in a browser), %s (open it in "
         "https://ui.perfetto.dev or chrome://tracing), %s, and the runs' "
         "JSON in %s\n",
         report, trace, svg, out);
  int rc = CLI_OK;
  if (json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "data", data);
    cJSON_AddNumberToObject(o, "step_ms", step_ms);
    cJSON_AddNumberToObject(o, "batch_size", BATCH);
    cJSON *b = cJSON_AddObjectToObject(o, "before");
    cJSON_AddNumberToObject(b, "workers", 0);
    cJSON_AddNumberToObject(b, "epoch_s", b_epoch);
    cJSON_AddNumberToObject(b, "wait_ratio",
                            num_at(bj, "summary", "wait_ratio"));
    cJSON_AddStringToObject(b, "verdict", str_at(bj, "summary", "verdict"));
    cJSON *a = cJSON_AddObjectToObject(o, "after");
    cJSON_AddNumberToObject(a, "workers", kw);
    cJSON_AddNumberToObject(a, "prefetch", kk);
    cJSON_AddNumberToObject(a, "epoch_s", a_epoch);
    cJSON_AddNumberToObject(a, "wait_ratio",
                            num_at(aj, "summary", "wait_ratio"));
    cJSON_AddStringToObject(a, "verdict", str_at(aj, "summary", "verdict"));
    cJSON_AddNumberToObject(o, "speedup", b_epoch / a_epoch);
    cJSON *u = cJSON_AddObjectToObject(o, "autotune");
    cJSON_AddNumberToObject(u, "workers", u_workers);
    cJSON_AddNumberToObject(u, "first_epoch_wait_ratio", u_first);
    cJSON_AddNumberToObject(u, "last_epoch_wait_ratio", u_last);
    cJSON_AddStringToObject(u, "json", autoj);
    cJSON_AddStringToObject(o, "report", report);
    cJSON_AddStringToObject(o, "trace", trace);
    rc = cli_write_json(json_path, json, o);
    cJSON_Delete(o);
  }
  cJSON_Delete(bj);
  cJSON_Delete(aj);
  cJSON_Delete(uj);
  return rc;
}
