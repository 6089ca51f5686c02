/* demo_seed000.c — "stoke demo --seed000": the seed-000 story on the
** synthetic source, in a few seconds.
**
** 256 samples that each cost 5 ms of waiting (a stand-in for reading and
** decoding an image), batches of 32, and a 12 ms GPU-like training step.
** With PyTorch's default of 0 workers the step waits for data almost all the
** time: starving.  Adding workers (1, 2, 4, 8, 16, 32; stop at the first that
** is busy) moves the split until the step computes instead of waits.  Each
** run is a warm-up epoch and a measured one.
**
** The loader prefetches the next epoch while the current one ends
** (prefetch_next_epoch), so a measured epoch does not begin with an empty
** queue; 32 stays on the ladder for machines slower to wake 16 sleepers.
**
** A later version replaces the synthetic samples with real images.
*/
#include <string.h>

#include "cli.h"

static const char seed000_usage[] =
    "usage: stoke demo --seed000 [--json FILE]\n"
    "\n"
    "Show a starving loader and the worker count that feeds it: 256\n"
    "synthetic samples costing 5 ms each (sleep), batch 32, a 12 ms GPU-like\n"
    "step, one warm-up and one measured epoch per run.  Runs 0 workers\n"
    "(PyTorch's default), then 1, 2, 4, 8, 16 and 32 until the verdict is\n"
    "busy.\n"
    "\n"
    "  --json FILE            write the runs as JSON ('-' = stdout; the text\n"
    "                         then goes to stderr)\n"
    "  -q, --quiet            no text\n";

enum { O_JSON = 1, O_QUIET, O_HELP };

static const cli_opt demo_opts[] = {{"json", 0, 1, O_JSON},
                                    {"quiet", 'q', 0, O_QUIET},
                                    {"help", 'h', 0, O_HELP},
                                    {NULL, 0, 0, 0}};

static const unsigned demo_workers[] = {0, 1, 2, 4, 8, 16, 32};
#define N_DEMO_RUNS (sizeof(demo_workers) / sizeof(demo_workers[0]))

typedef struct demo_run {
  unsigned workers;
  double epoch_s, wait_s, compute_s, samples_per_s;
  stoke_diagnosis diag;
} demo_run;

static void demo_spec(report_spec *spec, unsigned workers) {
  memset(spec, 0, sizeof(*spec));
  stoke_synthetic_config_init(&spec->synth);
  spec->synth.kind = STOKE_SYNTH_SLEEP;
  spec->synth.cost_ns = 5000000;
  spec->synth.dist = STOKE_COST_FIXED;
  spec->synth.n_samples = 256;
  spec->synth.ndim = 3;
  spec->synth.shape[0] = 3;
  spec->synth.shape[1] = 32;
  spec->synth.shape[2] = 32;
  spec->synth.n_classes = 2;
  stoke_config_init(&spec->cfg);
  spec->cfg.batch_size = 32;
  spec->cfg.n_workers = workers;
  spec->cfg.prefetch = 2;
  spec->cfg.warmup_epochs = 1;
  spec->epochs = 2;
  spec->compute_kind = REPORT_COMPUTE_SLEEP;
  spec->compute_ns = 12000000;
}

static void print_row(FILE *f, const demo_run *r) {
  fprintf(f, "  %3u  %8.3f  %9.3f  %11.3f  %s\n", r->workers, r->epoch_s,
          r->wait_s, r->compute_s, stoke_verdict_name(r->diag.verdict));
}

static cJSON *demo_json(const report_spec *spec0, const report_result *res0,
                        const demo_run *runs, size_t n, double speedup) {
  cJSON *root = cJSON_CreateObject();
  if (!root)
    return NULL;
  /* The story's settings, as bench would report them for W = 0. */
  cJSON_AddItemToObject(root, "config", report_config_json(spec0, res0));
  cJSON_AddItemToObject(root, "machine", report_machine_json());
  cJSON *a = cJSON_AddArrayToObject(root, "runs");
  for (size_t i = 0; a && i < n; i++) {
    const demo_run *r = &runs[i];
    cJSON *o = cJSON_CreateObject();
    if (!o)
      break;
    cJSON_AddItemToArray(a, o);
    cJSON_AddNumberToObject(o, "workers", r->workers);
    cJSON_AddNumberToObject(o, "epoch_s", r->epoch_s);
    cJSON_AddNumberToObject(o, "wait_s", r->wait_s);
    cJSON_AddNumberToObject(o, "compute_s", r->compute_s);
    cJSON_AddNumberToObject(o, "samples_per_s", r->samples_per_s);
    cJSON_AddNumberToObject(o, "wait_ratio", r->diag.wait_ratio);
    cJSON_AddNumberToObject(o, "queue_empty_frac", r->diag.queue_empty_frac);
    cJSON_AddStringToObject(o, "verdict", stoke_verdict_name(r->diag.verdict));
    cJSON_AddStringToObject(o, "verdict_reason", r->diag.reason);
  }
  cJSON_AddNumberToObject(root, "speedup", speedup);
  cJSON_AddNumberToObject(root, "final_workers", runs[n - 1].workers);
  cJSON_AddStringToObject(root, "final_verdict",
                          stoke_verdict_name(runs[n - 1].diag.verdict));
  return root;
}

int cli_demo_seed000(int argc, char **argv) {
  const char *json_path = NULL;
  int quiet = 0;
  cli_parser p;
  cli_parser_init(&p, argc, argv, "demo --seed000");
  const char *v;
  int id;
  while ((id = cli_next_opt(&p, demo_opts, &v)) != CLI_OPT_END) {
    switch (id) {
    case CLI_OPT_ERROR:
      return CLI_USAGE;
    case CLI_OPT_ARG:
      cli_error("demo: unexpected argument '%s'", v);
      return CLI_USAGE;
    case O_HELP:
      fputs(seed000_usage, stdout);
      return CLI_OK;
    case O_JSON:
      json_path = v;
      break;
    case O_QUIET:
      quiet = 1;
      break;
    }
  }
  FILE *json = NULL;
  if (json_path && !(json = cli_open_output(json_path)))
    return CLI_ERROR;
  FILE *out = json == stdout ? stderr : stdout;
  if (quiet)
    out = NULL;

  if (out)
    fprintf(out,
            "stoke demo: 256 samples costing 5 ms each (sleep), batch 32, a "
            "12 ms GPU-like step;\n"
            "            one warm-up epoch, then one measured epoch per run\n"
            "\n");
  demo_run runs[N_DEMO_RUNS];
  size_t n = 0;
  report_spec spec0;
  report_result res0;
  int rc = CLI_OK;
  memset(&res0, 0, sizeof(res0));
  for (size_t i = 0; i < N_DEMO_RUNS; i++) {
    report_spec spec;
    report_result res;
    demo_spec(&spec, demo_workers[i]);
    rc = cli_run(&spec, &res);
    if (rc != CLI_OK)
      break;
    demo_run *r = &runs[n++];
    r->workers = res.eff.n_workers;
    r->epoch_s = res.epoch_s;
    r->wait_s = (double)res.stats.wait.total_ns / 1e9;
    r->compute_s = (double)res.stats.compute.total_ns / 1e9;
    r->samples_per_s = res.samples_per_s;
    r->diag = res.diag;
    if (i == 0) {
      spec0 = spec;
      res0 = res; /* keeps its epochs until the end */
      if (out) {
        fprintf(out,
                "workers 0 (PyTorch's default): epoch %.3f s, waiting "
                "%.3f s, computing %.3f s\n",
                r->epoch_s, r->wait_s, r->compute_s);
        report_print_verdict(out, "  ", &r->diag);
        fprintf(out, "\nmore workers:\n");
      }
    } else {
      if (out) {
        fprintf(out,
                "workers %u: epoch %.3f s, waiting %.3f s, computing "
                "%.3f s\n",
                r->workers, r->epoch_s, r->wait_s, r->compute_s);
        report_print_verdict(out, "  ", &r->diag);
      }
      report_result_free(&res);
    }
    if (r->diag.verdict == STOKE_VERDICT_BUSY && i > 0)
      break;
  }
  if (rc != CLI_OK) {
    report_result_free(&res0);
    if (json && json != stdout) {
      fclose(json);
      remove(json_path);
    }
    return rc;
  }

  const demo_run *first = &runs[0], *last = &runs[n - 1];
  double speedup = last->epoch_s > 0 ? first->epoch_s / last->epoch_s : 0;
  if (out) {
    fprintf(out, "\n    W   epoch s  waiting s  computing s  verdict\n");
    print_row(out, first);
    if (n > 1)
      print_row(out, last);
    fprintf(out, "\nspeed-up: %.1fx with %u workers instead of 0\n", speedup,
            last->workers);
    if (last->diag.verdict != STOKE_VERDICT_BUSY)
      fprintf(out, "note: still %s at %u workers on this machine\n",
              stoke_verdict_name(last->diag.verdict), last->workers);
  }
  if (json) {
    cJSON *root = demo_json(&spec0, &res0, runs, n, speedup);
    rc = cli_write_json(json_path, json, root);
    cJSON_Delete(root);
  }
  report_result_free(&res0);
  return rc;
}
