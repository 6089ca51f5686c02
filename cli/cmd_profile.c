/* cmd_profile.c — "stoke profile": run a loader like bench, then explain
** it: the two clocks per epoch, the wait percentiles, the stage breakdown,
** queue emptiness, the verdict and every number behind it, the queue
** model's prediction of this run and its error, a what-if table over
** workers (W) and prefetch (K), and the escalation ladder with the gain the
** model expects from each rung.
**
** The source, loader and consumer options are bench's; they are parsed by
** the shared cli_run_args_* helpers defined here (bench uses them too).
**
** The verdict is stoke_diagnose_model's on the model profile builds (which
** knows the consumer's CPU from --compute), so it can differ from bench's
** stoke_diagnose on a spinning step; the JSON's summary carries it too.
*/
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char cmd_profile_usage[] =
    "usage: stoke profile DATA|--synthetic KIND [options]\n"
    "\n"
    "Run a loader as 'stoke bench' does and explain the result: the two\n"
    "clocks, the stages, the verdict and its numbers, the queue model's\n"
    "prediction (docs/diagnosis.md), a what-if table over workers and\n"
    "prefetch, and advice, each line with its predicted gain.\n"
    "\n"
    "source, loader and consumer: as 'stoke help bench' (DATA, --transform,\n"
    "  --synthetic, --samples, --shape, --cost-dist, --classes, -b, -j, --prefetch,\n"
    "  --shuffle, --seed, --drop-last, --rank, --world, --out-of-order,\n"
    "  --no-epoch-prefetch, --worker-policy, --timeout, --mem-budget,\n"
    "  --epochs, --no-warmup, --compute, --device, --device-prefetch,\n"
    "  --pin-memory, --no-pin-memory, --no-device-normalize)\n"
    "bad samples and resume: as 'stoke help bench' (--on-error,\n"
    "  --max-failures, --quarantine, --save-state, --save-state-every,\n"
    "  --stop-after, --resume, --indices)\n"
    "sample cost: as 'stoke help bench' (--shuffle block[=SIZE],\n"
    "  --shuffle-window, --echo, --echo-mode, --cache, --cache-max,\n"
    "  --ram-cache, --gpu-price)\n"
    "metrics: as 'stoke help bench' (--metrics-file, --metrics-every,\n"
    "  --log-jsonl, --log-every)\n"
    "\n"
    "model and report\n"
    "  --cores N              cores the model assumes (online CPUs)\n"
    "  --what-if-workers L    worker counts of the what-if table, e.g.\n"
    "                         0,1,2,4,8 (0,1,2,4,8,16,32 and this run's)\n"
    "  --what-if-prefetch L   prefetch depths of the table (1,2,4,8 and this\n"
    "                         run's)\n"
    "  --train-epochs N       with --deadline: do N epochs fit in the window,\n"
    "  --deadline DUR         at this configuration and at the knee (8h,\n"
    "                         90min): the model's epoch time with its error\n"
    "                         bar (docs/diagnosis.md, 'Deadlines')\n"
    "  --trace FILE           write a Chrome trace (open in Perfetto): spans\n"
    "                         per sample and worker, wait and compute per step\n"
    "  --json FILE            bench's JSON plus a 'diagnosis' object ('-' =\n"
    "                         stdout; the report then goes to stderr)\n"
    "  -q, --quiet            no report\n";

/* ---- profile's own options ----------------------------------------------- */

enum {
  O_CORES = CLI_RUN_OPT_LAST,
  O_WHATIF_W,
  O_WHATIF_K,
  O_TRAIN_EPOCHS,
  O_DEADLINE,
  O_HELP
};

static const cli_opt profile_own_opts[] = {
    {"cores", 0, 1, O_CORES},
    {"what-if-workers", 0, 1, O_WHATIF_W},
    {"what-if-prefetch", 0, 1, O_WHATIF_K},
    {"train-epochs", 0, 1, O_TRAIN_EPOCHS},
    {"deadline", 0, 1, O_DEADLINE},
    {"help", 'h', 0, O_HELP},
    {NULL, 0, 0, 0}};

#define N_RUN_OPTS (CLI_RUN_OPT_LAST - 1) /* source and run: ids 1 .. */
#define N_OWN_OPTS (sizeof(profile_own_opts) / sizeof(profile_own_opts[0]))

/* "0,1,2,4": sorted, without duplicates. */
static int parse_list(const char *what, const char *s, unsigned lo,
                      stoke_whatif_axis *out) {
  out->n = 0;
  char buf[256];
  if (strlen(s) >= sizeof(buf) || !*s) {
    cli_error("%s: expected a list such as 1,2,4, got '%s'", what, s);
    return -1;
  }
  strcpy(buf, s);
  for (char *tok = buf, *next; tok; tok = next) {
    next = strchr(tok, ',');
    if (next)
      *next++ = '\0';
    unsigned x;
    if (cli_parse_uint(what, tok, lo, 4096, &x))
      return -1;
    if (out->n == STOKE_WHATIF_MAX) {
      cli_error("%s: at most %d values", what, STOKE_WHATIF_MAX);
      return -1;
    }
    out->v[out->n++] = x;
  }
  return 0;
}

/* ---- the command --------------------------------------------------------- */

int cmd_profile(int argc, char **argv) {
  cli_opt opts[N_RUN_OPTS + N_OWN_OPTS];
  cli_opts_join(opts, N_RUN_OPTS + N_OWN_OPTS, cli_source_opts, cli_run_opts,
                profile_own_opts, NULL);

  cli_run_args args;
  if (cli_run_args_init(&args))
    return CLI_USAGE;
  unsigned cores = 0;
  int have_ws = 0, have_ks = 0;
  static stoke_profile pr; /* the what-if table is large for a stack */
  memset(&pr, 0, sizeof(pr));

  cli_parser p;
  cli_parser_init(&p, argc, argv, "profile");
  const char *v;
  int id;
  while ((id = cli_next_opt(&p, opts, &v)) != CLI_OPT_END) {
    const char *f = p.flag;
    int bad = 0;
    switch (id) {
    case CLI_OPT_ERROR:
      return CLI_USAGE;
    case O_HELP:
      fputs(cmd_profile_usage, stdout);
      return CLI_OK;
    case O_CORES:
      bad = cli_parse_uint(f, v, 1, 65536, &cores);
      break;
    case O_WHATIF_W:
      bad = parse_list(f, v, 0, &pr.ws);
      have_ws = 1;
      break;
    case O_WHATIF_K:
      bad = parse_list(f, v, 1, &pr.ks);
      have_ks = 1;
      break;
    case O_TRAIN_EPOCHS:
      bad = cli_parse_uint(f, v, 1, 100000000, &pr.train_epochs);
      break;
    case O_DEADLINE:
      bad = cli_parse_duration(f, v, NULL, &pr.deadline_ns);
      if (!bad && pr.deadline_ns <= 0) {
        cli_error("%s: must be more than 0, got '%s'", f, v);
        bad = 1;
      }
      break;
    default:
      bad = cli_run_args_apply(&args, id, f, v) != 0;
    }
    if (bad)
      return CLI_USAGE;
  }
  if (cli_run_args_finish(&args, "profile"))
    return CLI_USAGE;
  if (!pr.train_epochs != !pr.deadline_ns) {
    cli_error("--train-epochs and --deadline go together");
    return CLI_USAGE;
  }
  const report_spec *spec = &args.spec;
  const char *json_path = args.json_path;

  FILE *json;
  report_result res;
  int rc = cli_run_open(spec, json_path, &json, &res);
  if (rc != CLI_OK)
    return rc;
  FILE *out = json == stdout ? stderr : stdout;
  stoke_profile_grid(&pr, &res.eff, !have_ws, !have_ks);
  int arc = res.stats.steps ? report_profile_analyse(spec, &res, cores, -1, &pr)
                            : STOKE_EINVAL;
  if (arc < 0) {
    cli_error("profile: %llu measured steps are too few to model; run more "
              "epochs or samples",
              (unsigned long long)res.stats.steps);
    if (json && json != stdout) {
      fclose(json);
      remove(json_path);
    }
    report_result_free(&res);
    return CLI_ERROR;
  }

  if (!args.quiet) {
    report_print_report(out, "profile", spec, &res);
    /* NULL words: the library's, which are the tool's flags ("-j 4"). */
    report_print_profile(out, NULL, &res, &pr);
  }
  if (json) {
    cJSON *root = report_run_json(spec, &res);
    if (root) {
      cJSON_AddItemToObject(root, "diagnosis",
                            report_diagnosis_json(NULL, &res, &pr));
    }
    rc = cli_write_json(json_path, json, root);
    cJSON_Delete(root);
  }
  report_result_free(&res);
  return rc;
}
