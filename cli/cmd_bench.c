/* cmd_bench.c — "stoke bench": run a loader against a simulated consumer
** and report the two clocks, the steady state and the verdict.
**
** Option names follow PyTorch's DataLoader where one exists (batch_size,
** num_workers = 0 by default, prefetch_factor, shuffle, drop_last, timeout),
** and torchrun's environment for the shard (RANK, WORLD_SIZE).
*/
#include <string.h>

#include "cli.h"

const char cmd_bench_usage[] =
    "usage: stoke bench DATA|--synthetic KIND [options]\n"
    "\n"
    "Run a loader against a simulated training step and report whether the\n"
    "step waits for data (waiting = time inside next(), computing = time\n"
    "from its return to the next call).\n"
    "\n"
    "source\n"
    "  DATA                   an image dataset: an ImageFolder directory,\n"
    "                         tar shards (a path, train-{0000..0099}.tar or\n"
    "                         a glob) or packed shards (*.stoke, stoke pack)\n"
    "  --transform SPEC       for DATA (random-resized-crop=224,flip,chw,u8);\n"
    "                         see docs/transforms.md\n"
    "  DATA as URLs           http://, https:// or s3:// tar or packed shards,\n"
    "                         with the same patterns; s3://bucket/prefix is\n"
    "                         listed, AWS_* settings (docs/remote.md):\n"
    "  --io-concurrency N     requests in flight (8)\n"
    "  --tls-ca FILE|DIR/     CA certificates trusted for https (the system's)\n"
    "  --tls-insecure         do not verify the server's certificate\n"
    "  --connect-timeout T    per connection (10s)\n"
    "  --stall-timeout T      a transfer under 1 KiB/s this long fails (30s)\n"
    "  --http-attempts N      per request, retries included (5)\n"
    "  --retry-budget N       retries for the whole run (1000)\n"
    "  --retry-backoff T      before the first retry, doubling, jittered\n"
    "                         (100ms)\n"
    "  --synthetic KIND       sleep:5ms, spin:2ms (per-sample cost; ns, us,\n"
    "                         ms or s) or tensor (no cost)\n"
    "  --samples N            samples in the dataset (256)\n"
    "  --shape DxHxW          shape of a sample's features (3x32x32)\n"
    "  --cost-dist DIST       fixed, exp, lognormal:SIGMA or rare:FRAC:FACTOR\n"
    "                         (rare:0.02:20: 2% of samples 20x longer; fixed)\n"
    "  --classes N            label classes (2)\n"
    "\n"
    "loader\n"
    "  -b, --batch-size N     samples per batch (32)\n"
    "  -j, --workers N        worker threads; 0 fills batches in the\n"
    "                         consumer's thread, as PyTorch (0); 'cores' =\n"
    "                         one per online CPU; 'auto' = the online\n"
    "                         autotuner (--autotune; before 0.3, 'auto'\n"
    "                         meant 'cores')\n"
    "  --autotune             tune the active workers and prefetch while the\n"
    "                         run goes, from the loader's own clocks; -j N\n"
    "                         is then the most workers (docs/autotune.md)\n"
    "  --prefetch K           batches prepared ahead (2)\n"
    "  --consumer-slots N     batches the step holds at once (1; a Python\n"
    "                         for-loop holds 2: the previous and the next)\n"
    "  --shuffle [ORDER]      shuffle each epoch, seeded: uniform (the\n"
    "                         default), or block[=SIZE] for datasets larger\n"
    "                         than RAM: blocks of consecutive samples of about\n"
    "                         SIZE stored bytes (16MiB) shuffled, then the\n"
    "                         samples within windows of blocks, the next\n"
    "                         window read ahead\n"
    "  --shuffle-window N     blocks per window of the block order (8)\n"
    "  --seed N               seed of the order and of the samples (0)\n"
    "  --drop-last            drop the final partial batch\n"
    "  --rank R, --world N    shard of a distributed job (RANK and WORLD_SIZE\n"
    "                         from the environment, else 0 and 1)\n"
    "  --out-of-order         hand out a completed batch first\n"
    "  --no-epoch-prefetch    start each epoch at its first next(), as\n"
    "                         PyTorch, instead of prefetching it while the\n"
    "                         previous one ends\n"
    "  --worker-policy P      batch (default): workers under SCHED_BATCH, so\n"
    "                         that waking them never takes the training\n"
    "                         thread's core; normal: the OS default\n"
    "  --timeout MS           fail when one sample takes longer (0 = never)\n"
    "  --mem-budget SIZE      host bytes the loader may use, e.g. 8GiB\n"
    "\n"
    "device\n"
    "  --device DEV           cpu (default), cuda or cuda:N: batches copied to\n"
    "                         the GPU on a copy stream from page-locked slots\n"
    "                         (CUDA is opened at run time: without a driver or\n"
    "                         a GPU the run stays on the host and says why;\n"
    "                         $STOKE_CUDA_LIBRARY names another driver)\n"
    "  --device-prefetch K    batches copied ahead of the step (1); 0 copies a\n"
    "                         batch only once the previous one is released\n"
    "  --pin-memory           page-locked host slots also without --device\n"
    "  --no-pin-memory        pageable host slots even with --device (slower:\n"
    "                         such copies are synchronous; for comparison)\n"
    "  --no-device-normalize  normalise images on the host even with a device\n"
    "                         (by default a transform ending in normalize,\n"
    "                         f32/f16 is copied as u8 and normalised on the GPU)\n"
    "\n"
    "bad samples (docs/quarantine.md)\n"
    "  --on-error POLICY      fail (stop at the first bad sample), skip (the\n"
    "                         batch goes without it) or replace (another\n"
    "                         sample, drawn deterministically, takes its\n"
    "                         place) (fail)\n"
    "  --max-failures N|P%    skip/replace: bad samples an epoch may have, a\n"
    "                         count or a share of its samples, or none (1%)\n"
    "  --quarantine FILE      list every bad sample in FILE, and do not read\n"
    "                         the samples it lists (made by 'stoke inspect\n"
    "                         --verify' or an earlier run)\n"
    "\n"
    "sample cost (docs/echo.md, docs/cache.md)\n"
    "  --echo E               data echoing, the last resort: every batch made\n"
    "                         feeds E steps (1 = off)\n"
    "  --echo-mode MODE       batch (the same batch E times in a row) or\n"
    "                         example (each sample in E batches, each copy\n"
    "                         with its own random transform) (batch)\n"
    "  --cache DIR            folder and tar sources: pack the samples into\n"
    "                         DIR as the first epoch reads them, and read\n"
    "                         them from there after (keyed by the files'\n"
    "                         paths, sizes and times); remote packed\n"
    "                         shards: each fetched whole once per node into\n"
    "                         DIR/remote/ (keyed by URL and ETag)\n"
    "  --cache-max SIZE       disk the cache may take (no limit but the file\n"
    "                         system's last 5%; remote shards: least\n"
    "                         recently used evicted)\n"
    "  --ram-cache SIZE|all   keep deterministic samples (resize and\n"
    "                         center-crop) in RAM after their first epoch\n"
    "\n"
    "resume\n"
    "  --save-state FILE      write the loader's position (80 bytes) to FILE\n"
    "                         at the end of the run (or the stop)\n"
    "  --save-state-every N   and every N batches\n"
    "  --stop-after N         end the run after N batches (a preemption)\n"
    "  --resume FILE          continue from a saved position: the batches an\n"
    "                         uninterrupted run had left, in its order, with\n"
    "                         any -j and --prefetch, up to --epochs\n"
    "  --indices FILE         write each batch's sample indices ('-' =\n"
    "                         stdout): EPOCH BATCH N I0 I1 ...\n"
    "\n"
    "consumer and report\n"
    "  --epochs N             epochs to run, the warm-up included (2)\n"
    "  --no-warmup            measure the first epoch too\n"
    "  --compute STEP         the training step: sleep:12ms (GPU-like, leaves\n"
    "                         the CPU free), spin:12ms (burns the consumer\n"
    "                         thread's CPU time), gpu-sleep:12ms (a kernel\n"
    "                         spinning that long on the consumer's stream;\n"
    "                         with --device cuda, the clocks are then CUDA\n"
    "                         events) or none (none)\n"
    "  --gpu-price P          the accelerator's price, e.g. 2.50/h: the\n"
    "                         report gives the money per epoch and what the\n"
    "                         waiting costs\n"
    "  --metrics-file PATH    Prometheus text for node_exporter's textfile\n"
    "                         collector, rewritten atomically every\n"
    "                         --metrics-every (10s) and at the end\n"
    "  --log-jsonl PATH       append one JSON line per epoch and every\n"
    "                         --log-every N steps (100)\n"
    "  --trace FILE           write a Chrome trace (open in Perfetto): spans\n"
    "                         per sample and worker, wait and compute per step\n"
    "                         (with a device, the copy stream's and the\n"
    "                         consumer stream's tracks too)\n"
    "  --json FILE            write the report as JSON ('-' = stdout; the\n"
    "                         table then goes to stderr)\n"
    "  -q, --quiet            no table\n";

/* Every option but --help is a shared one: cli_source_opts, cli_run_opts. */
enum { O_HELP = CLI_RUN_OPT_LAST };

static const cli_opt bench_own_opts[] = {{"help", 'h', 0, O_HELP},
                                         {NULL, 0, 0, 0}};

#define N_RUN_OPTS (CLI_RUN_OPT_LAST - 1) /* source and run: ids 1 .. */
#define N_OWN_OPTS (sizeof(bench_own_opts) / sizeof(bench_own_opts[0]))

int cmd_bench(int argc, char **argv) {
  cli_opt opts[N_RUN_OPTS + N_OWN_OPTS];
  cli_opts_join(opts, N_RUN_OPTS + N_OWN_OPTS, cli_source_opts, cli_run_opts,
                bench_own_opts, NULL);

  cli_run_args args;
  if (cli_run_args_init(&args))
    return CLI_USAGE;
  cli_parser p;
  cli_parser_init(&p, argc, argv, "bench");
  const char *v;
  int id;
  while ((id = cli_next_opt(&p, opts, &v)) != CLI_OPT_END) {
    const char *f = p.flag;
    int bad = 0;
    switch (id) {
    case CLI_OPT_ERROR:
      return CLI_USAGE;
    case O_HELP:
      fputs(cmd_bench_usage, stdout);
      return CLI_OK;
    default:
      bad = cli_run_args_apply(&args, id, f, v) != 0;
    }
    if (bad)
      return CLI_USAGE;
  }
  if (cli_run_args_finish(&args, "bench"))
    return CLI_USAGE;
  const report_spec *spec = &args.spec;
  const char *json_path = args.json_path;

  FILE *json;
  report_result res;
  int rc = cli_run_open(spec, json_path, &json, &res);
  if (rc != CLI_OK)
    return rc;
  FILE *table = json == stdout ? stderr : stdout;
  if (!args.quiet) {
    report_print_report(table, "bench", spec, &res);
  }
  if (json) {
    cJSON *root = report_run_json(spec, &res);
    rc = cli_write_json(json_path, json, root);
    cJSON_Delete(root);
  }
  report_result_free(&res);
  return rc;
}
