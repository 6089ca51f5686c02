/* cmd_bench.c — "stoke bench": run a loader against a simulated consumer
** and report the two clocks, the steady state and the verdict.
**
** Option names follow PyTorch's DataLoader where one exists (batch_size,
** num_workers = 0 by default, prefetch_factor, shuffle, drop_last, timeout),
** and torchrun's environment for the shard (RANK, WORLD_SIZE).
*/
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char cmd_bench_usage[] =
    "usage: stoke bench --synthetic KIND [options]\n"
    "\n"
    "Run a loader against a simulated training step and report whether the\n"
    "step waits for data (waiting = time inside next(), computing = time\n"
    "from its return to the next call).\n"
    "\n"
    "source\n"
    "  --synthetic KIND       sleep:5ms, spin:2ms (per-sample cost; ns, us,\n"
    "                         ms or s) or tensor (no cost)\n"
    "  --samples N            samples in the dataset (256)\n"
    "  --shape DxHxW          shape of a sample's features (3x32x32)\n"
    "  --cost-dist DIST       fixed, exp or lognormal:SIGMA (fixed)\n"
    "  --classes N            label classes (2)\n"
    "\n"
    "loader\n"
    "  -b, --batch-size N     samples per batch (32)\n"
    "  -j, --workers N        worker threads; 0 fills batches in the\n"
    "                         consumer's thread, as PyTorch (0); 'auto' =\n"
    "                         online CPUs\n"
    "  --prefetch K           batches prepared ahead (2)\n"
    "  --shuffle              seeded shuffle of each epoch\n"
    "  --seed N               seed of the order and of the samples (0)\n"
    "  --drop-last            drop the final partial batch\n"
    "  --rank R, --world N    shard of a distributed job (RANK and WORLD_SIZE\n"
    "                         from the environment, else 0 and 1)\n"
    "  --out-of-order         hand out a completed batch first\n"
    "  --no-epoch-prefetch    start each epoch at its first next(), as\n"
    "                         PyTorch, instead of prefetching it while the\n"
    "                         previous one ends\n"
    "  --timeout MS           fail when one sample takes longer (0 = never)\n"
    "  --mem-budget SIZE      host bytes the loader may use, e.g. 8GiB\n"
    "\n"
    "consumer and report\n"
    "  --epochs N             epochs to run, the warm-up included (2)\n"
    "  --no-warmup            measure the first epoch too\n"
    "  --compute STEP         the training step: sleep:12ms (GPU-like, leaves\n"
    "                         the CPU free), spin:12ms (burns the consumer\n"
    "                         thread's CPU time) or none (none)\n"
    "  --trace FILE           write a Chrome trace (open in Perfetto): spans\n"
    "                         per sample and worker, wait and compute per step\n"
    "  --json FILE            write the report as JSON ('-' = stdout; the\n"
    "                         table then goes to stderr)\n"
    "  -q, --quiet            no table\n";

enum {
  O_SYNTHETIC = 1,
  O_SAMPLES,
  O_SHAPE,
  O_COST_DIST,
  O_CLASSES,
  O_BATCH,
  O_WORKERS,
  O_PREFETCH,
  O_SHUFFLE,
  O_SEED,
  O_DROP_LAST,
  O_RANK,
  O_WORLD,
  O_OUT_OF_ORDER,
  O_NO_EPOCH_PREFETCH,
  O_TIMEOUT,
  O_MEM_BUDGET,
  O_EPOCHS,
  O_NO_WARMUP,
  O_COMPUTE,
  O_JSON,
  O_TRACE,
  O_QUIET,
  O_HELP
};

static const cli_opt bench_opts[] = {{"synthetic", 0, 1, O_SYNTHETIC},
                                     {"samples", 0, 1, O_SAMPLES},
                                     {"shape", 0, 1, O_SHAPE},
                                     {"cost-dist", 0, 1, O_COST_DIST},
                                     {"classes", 0, 1, O_CLASSES},
                                     {"batch-size", 'b', 1, O_BATCH},
                                     {"workers", 'j', 1, O_WORKERS},
                                     {"prefetch", 0, 1, O_PREFETCH},
                                     {"shuffle", 0, 0, O_SHUFFLE},
                                     {"seed", 0, 1, O_SEED},
                                     {"drop-last", 0, 0, O_DROP_LAST},
                                     {"rank", 0, 1, O_RANK},
                                     {"world", 0, 1, O_WORLD},
                                     {"out-of-order", 0, 0, O_OUT_OF_ORDER},
                                     {"no-epoch-prefetch", 0, 0,
                                      O_NO_EPOCH_PREFETCH},
                                     {"timeout", 0, 1, O_TIMEOUT},
                                     {"mem-budget", 0, 1, O_MEM_BUDGET},
                                     {"epochs", 0, 1, O_EPOCHS},
                                     {"no-warmup", 0, 0, O_NO_WARMUP},
                                     {"compute", 0, 1, O_COMPUTE},
                                     {"json", 0, 1, O_JSON},
                                     {"trace", 0, 1, O_TRACE},
                                     {"quiet", 'q', 0, O_QUIET},
                                     {"help", 'h', 0, O_HELP},
                                     {NULL, 0, 0, 0}};

/* --rank and --world default to torchrun's RANK and WORLD_SIZE. */
static int env_default(const char *var, unsigned lo, unsigned *out) {
  const char *v = getenv(var);
  if (!v || !*v)
    return 0;
  return cli_parse_uint(var, v, lo, (unsigned)-1, out);
}

int cmd_bench(int argc, char **argv) {
  cli_run_spec spec;
  memset(&spec, 0, sizeof(spec));
  stoke_synthetic_config_init(&spec.synth);
  stoke_config_init(&spec.cfg);
  spec.cfg.n_workers = 0; /* PyTorch's num_workers default, not AUTO */
  spec.epochs = 2;
  spec.compute_kind = CLI_COMPUTE_NONE;
  int have_source = 0, warmup = 1, quiet = 0;
  const char *json_path = NULL;
  unsigned rank = 0, world = 1;
  if (env_default("RANK", 0, &rank) || env_default("WORLD_SIZE", 1, &world))
    return CLI_USAGE;

  cli_parser p;
  cli_parser_init(&p, argc, argv, "bench");
  const char *v;
  int id;
  while ((id = cli_next_opt(&p, bench_opts, &v)) != CLI_OPT_END) {
    const char *f = p.flag;
    int bad = 0;
    switch (id) {
    case CLI_OPT_ERROR:
      return CLI_USAGE;
    case CLI_OPT_ARG:
      cli_error("bench: unexpected argument '%s'", v);
      return CLI_USAGE;
    case O_HELP:
      fputs(cmd_bench_usage, stdout);
      return CLI_OK;
    case O_SYNTHETIC:
      bad = cli_parse_synthetic(f, v, &spec.synth);
      have_source = 1;
      break;
    case O_SAMPLES:
      bad = cli_parse_size_t(f, v, 1, &spec.synth.n_samples);
      break;
    case O_SHAPE:
      bad = cli_parse_shape(f, v, &spec.synth.ndim, spec.synth.shape);
      break;
    case O_COST_DIST:
      bad = cli_parse_cost_dist(f, v, &spec.synth);
      break;
    case O_CLASSES:
      bad = cli_parse_uint(f, v, 1, (unsigned)-1, &spec.synth.n_classes);
      break;
    case O_BATCH:
      bad = cli_parse_size_t(f, v, 1, &spec.cfg.batch_size);
      break;
    case O_WORKERS:
      if (strcmp(v, "auto") == 0)
        spec.cfg.n_workers = STOKE_WORKERS_AUTO;
      else
        bad = cli_parse_uint(f, v, 0, 4096, &spec.cfg.n_workers);
      break;
    case O_PREFETCH:
      bad = cli_parse_uint(f, v, 1, 4096, &spec.cfg.prefetch);
      break;
    case O_SHUFFLE:
      spec.cfg.shuffle = 1;
      break;
    case O_SEED:
      bad = cli_parse_u64(f, v, &spec.cfg.seed);
      spec.synth.seed = spec.cfg.seed;
      break;
    case O_DROP_LAST:
      spec.cfg.drop_last = 1;
      break;
    case O_RANK:
      bad = cli_parse_uint(f, v, 0, (unsigned)-1, &rank);
      break;
    case O_WORLD:
      bad = cli_parse_uint(f, v, 1, (unsigned)-1, &world);
      break;
    case O_OUT_OF_ORDER:
      spec.cfg.in_order = 0;
      break;
    case O_NO_EPOCH_PREFETCH:
      spec.cfg.prefetch_next_epoch = 0;
      break;
    case O_TIMEOUT: {
      int64_t ns;
      bad = cli_parse_duration(f, v, "ms", &ns);
      if (!bad && ns > 0 && ns < 1000000) {
        cli_error("%s: the resolution is 1ms, got '%s'", f, v);
        bad = 1;
      }
      spec.cfg.sample_timeout_ms = ns / 1000000;
      break;
    }
    case O_MEM_BUDGET:
      bad = cli_parse_bytes(f, v, &spec.cfg.mem_budget_bytes);
      break;
    case O_EPOCHS:
      bad = cli_parse_uint(f, v, 1, 1000000, &spec.epochs);
      break;
    case O_NO_WARMUP:
      warmup = 0;
      break;
    case O_COMPUTE:
      bad = cli_parse_compute(f, v, &spec.compute_kind, &spec.compute_ns);
      break;
    case O_JSON:
      json_path = v;
      break;
    case O_TRACE:
      spec.trace_path = v;
      break;
    case O_QUIET:
      quiet = 1;
      break;
    }
    if (bad)
      return CLI_USAGE;
  }

  if (!have_source) {
    cli_error("bench: no data source; give --synthetic sleep:5ms, spin:2ms "
              "or tensor");
    return CLI_USAGE;
  }
  if (rank >= world) {
    cli_error("--rank: must be below --world (%u), got %u", world, rank);
    return CLI_USAGE;
  }
  if (warmup && spec.epochs < 2) {
    cli_error("--epochs: 1 epoch is all warm-up; use --epochs 2 or more, or "
              "--no-warmup");
    return CLI_USAGE;
  }
  spec.cfg.rank = rank;
  spec.cfg.world = world;
  spec.cfg.warmup_epochs = warmup ? 1 : 0;

  FILE *json = NULL;
  if (json_path && !(json = cli_open_output(json_path)))
    return CLI_ERROR;
  FILE *table = json == stdout ? stderr : stdout;

  cli_run_result res;
  int rc = cli_run(&spec, &res);
  if (rc != CLI_OK) {
    if (json && json != stdout) {
      fclose(json);
      remove(json_path);
    }
    return rc;
  }
  if (!quiet) {
    char src[64], step[64], dist[64];
    cli_fmt_synthetic(&spec.synth, src, sizeof(src));
    cli_fmt_compute(spec.compute_kind, spec.compute_ns, step, sizeof(step));
    cli_fmt_cost_dist(&spec.synth, dist, sizeof(dist));
    fprintf(table,
            "stoke bench: synthetic %s (%s) x %zu samples, batch %zu, "
            "%u workers, prefetch %u, step %s",
            src, dist, spec.synth.n_samples, res.eff.batch_size,
            res.eff.n_workers, res.eff.prefetch, step);
    if (res.eff.world > 1)
      fprintf(table, ", rank %u of %u", res.eff.rank, res.eff.world);
    fputc('\n', table);
    cli_print_epochs(table, &res);
    cli_print_summary(table, &res);
    cli_print_verdict(table, "", &res.diag);
  }
  if (json) {
    cJSON *root = cJSON_CreateObject();
    if (root) {
      cJSON_AddItemToObject(root, "config", cli_config_json(&spec, &res));
      cJSON_AddItemToObject(root, "machine", cli_machine_json());
      cJSON_AddItemToObject(root, "epochs", cli_epochs_json(&res));
      cJSON_AddItemToObject(root, "summary", cli_summary_json(&res));
      cJSON_AddItemToObject(root, "stages", cli_stages_json(&res));
    }
    rc = cli_write_json(json_path, json, root);
    cJSON_Delete(root);
  }
  cli_run_result_free(&res);
  return rc;
}
