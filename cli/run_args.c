/* run_args.c — the options every measuring command shares (bench,
** profile): the source (source_args.c), the loader, the simulated consumer
** and the output.  Each command numbers its own options from
** CLI_RUN_OPT_LAST and hands the rest here. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "cli.h"

enum {
  RO_BATCH = CLI_SRC_OPT_LAST,
  RO_WORKERS,
  RO_PREFETCH,
  RO_SHUFFLE,
  RO_SEED,
  RO_DROP_LAST,
  RO_RANK,
  RO_WORLD,
  RO_OUT_OF_ORDER,
  RO_NO_EPOCH_PREFETCH,
  RO_TIMEOUT,
  RO_MEM_BUDGET,
  RO_EPOCHS,
  RO_NO_WARMUP,
  RO_COMPUTE,
  RO_DEVICE,
  RO_DEVICE_PREFETCH,
  RO_PIN_MEMORY,
  RO_NO_PIN_MEMORY,
  RO_NO_DEVICE_NORMALIZE,
  RO_JSON,
  RO_TRACE,
  RO_QUIET,
  RO_ON_ERROR,
  RO_MAX_FAILURES,
  RO_QUARANTINE,
  RO_SAVE_STATE,
  RO_SAVE_EVERY,
  RO_STOP_AFTER,
  RO_RESUME,
  RO_INDICES,
  RO_CONSUMER_SLOTS,
  RO_AUTOTUNE,
  RO_SHUFFLE_WINDOW,
  RO_ECHO,
  RO_ECHO_MODE,
  RO_CACHE,
  RO_CACHE_MAX,
  RO_RAM_CACHE,
  RO_WORKER_POLICY,
  RO_GPU_PRICE,
  RO_METRICS_FILE,
  RO_METRICS_EVERY,
  RO_LOG_JSONL,
  RO_LOG_EVERY,
  RO_LAST /* commands number their own options from here */
};
_Static_assert(RO_LAST == CLI_RUN_OPT_LAST, "cli.h: CLI_RUN_OPT_LAST");

const cli_opt cli_run_opts[] = {{"batch-size", 'b', 1, RO_BATCH},
                                {"workers", 'j', 1, RO_WORKERS},
                                {"prefetch", 0, 1, RO_PREFETCH},
                                {"autotune", 0, 0, RO_AUTOTUNE},
                                {"consumer-slots", 0, 1, RO_CONSUMER_SLOTS},
                                {"shuffle", 0, CLI_ARG_OPTIONAL, RO_SHUFFLE},
                                {"seed", 0, 1, RO_SEED},
                                {"drop-last", 0, 0, RO_DROP_LAST},
                                {"rank", 0, 1, RO_RANK},
                                {"world", 0, 1, RO_WORLD},
                                {"out-of-order", 0, 0, RO_OUT_OF_ORDER},
                                {"no-epoch-prefetch", 0, 0,
                                 RO_NO_EPOCH_PREFETCH},
                                {"timeout", 0, 1, RO_TIMEOUT},
                                {"mem-budget", 0, 1, RO_MEM_BUDGET},
                                {"epochs", 0, 1, RO_EPOCHS},
                                {"no-warmup", 0, 0, RO_NO_WARMUP},
                                {"compute", 0, 1, RO_COMPUTE},
                                {"device", 0, 1, RO_DEVICE},
                                {"device-prefetch", 0, 1, RO_DEVICE_PREFETCH},
                                {"pin-memory", 0, 0, RO_PIN_MEMORY},
                                {"no-pin-memory", 0, 0, RO_NO_PIN_MEMORY},
                                {"no-device-normalize", 0, 0,
                                 RO_NO_DEVICE_NORMALIZE},
                                {"json", 0, 1, RO_JSON},
                                {"trace", 0, 1, RO_TRACE},
                                {"quiet", 'q', 0, RO_QUIET},
                                {"on-error", 0, 1, RO_ON_ERROR},
                                {"max-failures", 0, 1, RO_MAX_FAILURES},
                                {"quarantine", 0, 1, RO_QUARANTINE},
                                {"save-state", 0, 1, RO_SAVE_STATE},
                                {"save-state-every", 0, 1, RO_SAVE_EVERY},
                                {"stop-after", 0, 1, RO_STOP_AFTER},
                                {"resume", 0, 1, RO_RESUME},
                                {"indices", 0, 1, RO_INDICES},
                                {"shuffle-window", 0, 1, RO_SHUFFLE_WINDOW},
                                {"echo", 0, 1, RO_ECHO},
                                {"echo-mode", 0, 1, RO_ECHO_MODE},
                                {"cache", 0, 1, RO_CACHE},
                                {"cache-max", 0, 1, RO_CACHE_MAX},
                                {"ram-cache", 0, 1, RO_RAM_CACHE},
                                {"worker-policy", 0, 1, RO_WORKER_POLICY},
                                {"gpu-price", 0, 1, RO_GPU_PRICE},
                                {"metrics-file", 0, 1, RO_METRICS_FILE},
                                {"metrics-every", 0, 1, RO_METRICS_EVERY},
                                {"log-jsonl", 0, 1, RO_LOG_JSONL},
                                {"log-every", 0, 1, RO_LOG_EVERY},
                                {NULL, 0, 0, 0}};

int cli_parse_shuffle(const char *what, const char *v, stoke_config *cfg) {
  if (!v || strcmp(v, "uniform") == 0) { /* --shuffle alone, as before */
    cfg->shuffle = STOKE_SHUFFLE_UNIFORM;
    return 0;
  }
  if (strcmp(v, "none") == 0) {
    cfg->shuffle = STOKE_SHUFFLE_NONE;
    return 0;
  }
  if (strncmp(v, "block", 5) == 0 && (v[5] == '\0' || v[5] == '=')) {
    cfg->shuffle = STOKE_SHUFFLE_BLOCK;
    cfg->shuffle_block_bytes = 0;
    if (v[5] == '=' &&
        (cli_parse_bytes(what, v + 6, &cfg->shuffle_block_bytes) ||
         cfg->shuffle_block_bytes == 0)) {
      if (cfg->shuffle_block_bytes == 0)
        cli_error("%s: a block of 0 bytes", what);
      return -1;
    }
    return 0;
  }
  cli_error("%s: expected uniform, block[=SIZE] or none, got '%s'", what, v);
  return -1;
}

int cli_parse_price(const char *what, const char *v, double *per_hour) {
  const char *s = v[0] == '$' ? v + 1 : v;
  char *end;
  double x = strtod(s, &end);
  double per = 1; /* of an hour */
  if (end == s || !(x >= 0) || x > 1e9) goto bad;
  if (*end == '\0' || strcmp(end, "/h") == 0 || strcmp(end, "/hour") == 0)
    per = 1;
  else if (strcmp(end, "/min") == 0)
    per = 1.0 / 60;
  else if (strcmp(end, "/s") == 0)
    per = 1.0 / 3600;
  else
    goto bad;
  *per_hour = x / per;
  return 0;
bad:
  cli_error("%s: expected a price such as 2.50/h (or /min, /s), got '%s'",
            what, v);
  return -1;
}

static int positive_u64(const char *what, const char *s, uint64_t *out) {
  if (cli_parse_u64(what, s, out))
    return -1;
  if (*out == 0) {
    cli_error("%s: must be at least 1, got '%s'", what, s);
    return -1;
  }
  return 0;
}

static int env_default(const char *var, unsigned lo, unsigned *out) {
  const char *v = getenv(var);
  if (!v || !*v)
    return 0;
  return cli_parse_uint(var, v, lo, (unsigned)-1, out);
}

int cli_run_args_init(cli_run_args *a) {
  memset(a, 0, sizeof(*a));
  cli_source_args_init(&a->src);
  stoke_config_init(&a->spec.cfg);
  a->spec.cfg.n_workers = 0; /* PyTorch's num_workers default, not AUTO */
  a->spec.epochs = 2;
  a->spec.compute_kind = REPORT_COMPUTE_NONE;
  a->warmup = 1;
  a->world = 1;
  if (env_default("RANK", 0, &a->rank) ||
      env_default("WORLD_SIZE", 1, &a->world))
    return -1;
  return 0;
}

int cli_run_args_apply(cli_run_args *a, int id, const char *f,
                       const char *v) {
  report_spec *spec = &a->spec;
  switch (id) {
  case RO_JSON:
    a->json_path = v;
    return 0;
  case RO_TRACE:
    spec->trace_path = v;
    return 0;
  case RO_QUIET:
    a->quiet = 1;
    return 0;
  case RO_BATCH:
    return cli_parse_size_t(f, v, 1, &spec->cfg.batch_size);
  case RO_WORKERS:
    /* 'auto' is the online autotuner (its most workers the library's
    ** default); 'cores' one worker per online CPU, what 'auto' used to
    ** mean. */
    if (strcmp(v, "auto") == 0) {
      spec->cfg.autotune = 1;
      spec->cfg.n_workers = STOKE_WORKERS_AUTO;
      return 0;
    }
    if (strcmp(v, "cores") == 0) {
      spec->cfg.n_workers = STOKE_WORKERS_AUTO;
      return 0;
    }
    return cli_parse_uint(f, v, 0, 4096, &spec->cfg.n_workers);
  case RO_AUTOTUNE:
    spec->cfg.autotune = 1;
    return 0;
  case RO_PREFETCH:
    return cli_parse_uint(f, v, 1, 4096, &spec->cfg.prefetch);
  case RO_CONSUMER_SLOTS:
    return cli_parse_uint(f, v, 1, 1024, &spec->cfg.consumer_slots);
  case RO_SHUFFLE:
    return cli_parse_shuffle(f, v, &spec->cfg);
  case RO_SHUFFLE_WINDOW:
    return cli_parse_uint(f, v, 1, 65536, &spec->cfg.shuffle_window);
  case RO_ECHO:
    return cli_parse_uint(f, v, 1, 64, &spec->cfg.echo);
  case RO_WORKER_POLICY:
    if (strcmp(v, "batch") == 0)
      spec->cfg.worker_policy = STOKE_WORKER_BATCH;
    else if (strcmp(v, "normal") == 0)
      spec->cfg.worker_policy = STOKE_WORKER_NORMAL;
    else {
      cli_error("%s: expected batch or normal, got '%s'", f, v);
      return -1;
    }
    return 0;
  case RO_ECHO_MODE:
    if (strcmp(v, "batch") == 0)
      spec->cfg.echo_mode = STOKE_ECHO_BATCH;
    else if (strcmp(v, "example") == 0)
      spec->cfg.echo_mode = STOKE_ECHO_EXAMPLE;
    else {
      cli_error("%s: expected batch or example, got '%s'", f, v);
      return -1;
    }
    return 0;
  case RO_CACHE: /* the packing cache, and remote shards' (remote.md) */
    spec->cfg.cache_dir = v;
    return 0;
  case RO_CACHE_MAX:
    return cli_parse_bytes(f, v, &spec->cfg.cache_max_bytes);
  case RO_RAM_CACHE:
    if (strcmp(v, "all") == 0) {
      spec->cfg.ram_cache_bytes = STOKE_RAM_CACHE_ALL;
      return 0;
    }
    return cli_parse_bytes(f, v, &spec->cfg.ram_cache_bytes);
  case RO_GPU_PRICE:
    return cli_parse_price(f, v, &spec->gpu_price_per_h);
  case RO_METRICS_FILE:
    spec->cfg.metrics_path = v;
    spec->cfg.metrics_loader = "stoke-cli";
    return 0;
  case RO_METRICS_EVERY: {
    int64_t ns;
    if (cli_parse_duration(f, v, "s", &ns)) return -1;
    if (ns <= 0) {
      cli_error("%s: expected a time > 0, got '%s'", f, v);
      return -1;
    }
    spec->cfg.metrics_every_ns = ns;
    return 0;
  }
  case RO_LOG_JSONL:
    spec->cfg.log_jsonl_path = v;
    spec->cfg.metrics_loader = "stoke-cli";
    return 0;
  case RO_LOG_EVERY: {
    uint64_t n;
    if (positive_u64(f, v, &n)) return -1;
    spec->cfg.log_every_steps = (size_t)n;
    return 0;
  }
  case RO_SEED:
    if (cli_parse_u64(f, v, &spec->cfg.seed))
      return -1;
    a->src.synth.seed = spec->cfg.seed;
    return 0;
  case RO_DROP_LAST:
    spec->cfg.drop_last = 1;
    return 0;
  case RO_RANK:
    return cli_parse_uint(f, v, 0, (unsigned)-1, &a->rank);
  case RO_WORLD:
    return cli_parse_uint(f, v, 1, (unsigned)-1, &a->world);
  case RO_OUT_OF_ORDER:
    spec->cfg.in_order = 0;
    return 0;
  case RO_NO_EPOCH_PREFETCH:
    spec->cfg.prefetch_next_epoch = 0;
    return 0;
  case RO_TIMEOUT: {
    int64_t ns;
    if (cli_parse_duration(f, v, "ms", &ns))
      return -1;
    if (ns > 0 && ns < 1000000) {
      cli_error("%s: the resolution is 1ms, got '%s'", f, v);
      return -1;
    }
    spec->cfg.sample_timeout_ms = ns / 1000000;
    return 0;
  }
  case RO_MEM_BUDGET:
    return cli_parse_bytes(f, v, &spec->cfg.mem_budget_bytes);
  case RO_EPOCHS:
    return cli_parse_uint(f, v, 1, 1000000, &spec->epochs);
  case RO_NO_WARMUP:
    a->warmup = 0;
    return 0;
  case RO_COMPUTE:
    return cli_parse_compute(f, v, &spec->compute_kind, &spec->compute_ns);
  case RO_ON_ERROR:
    return cli_parse_on_error(f, v, &spec->cfg.on_error);
  case RO_MAX_FAILURES:
    return cli_parse_max_failures(f, v, &spec->cfg);
  case RO_QUARANTINE:
    spec->cfg.quarantine_path = v;
    return 0;
  case RO_SAVE_STATE:
    spec->save_state_path = v;
    return 0;
  case RO_SAVE_EVERY:
    return positive_u64(f, v, &spec->save_every);
  case RO_STOP_AFTER:
    return positive_u64(f, v, &spec->stop_after);
  case RO_RESUME:
    spec->resume_path = v;
    return 0;
  case RO_INDICES:
    spec->indices_path = v;
    return 0;
  case RO_DEVICE:
    if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0 &&
        strncmp(v, "cuda:", 5) != 0) {
      cli_error("%s: expected cpu, cuda or cuda:N, got '%s'", f, v);
      return -1;
    }
    spec->cfg.device = v; /* the library checks the ordinal */
    return 0;
  case RO_DEVICE_PREFETCH:
    return cli_parse_uint(f, v, 0, 1024, &spec->cfg.device_prefetch);
  case RO_PIN_MEMORY:
    spec->cfg.pin_memory = 1;
    return 0;
  case RO_NO_PIN_MEMORY:
    spec->cfg.pin_memory = 0;
    return 0;
  case RO_NO_DEVICE_NORMALIZE:
    spec->cfg.device_normalize = 0;
    return 0;
  }
  return cli_source_args_apply(&a->src, id, f, v); /* 1: neither */
}

int cli_run_args_finish(cli_run_args *a, const char *cmd) {
  if (cli_source_args_finish(&a->src, cmd))
    return -1;
  if (a->rank >= a->world) {
    cli_error("--rank: must be below --world (%u), got %u", a->world,
              a->rank);
    return -1;
  }
  if (a->spec.cfg.shuffle_window &&
      a->spec.cfg.shuffle != STOKE_SHUFFLE_BLOCK) {
    cli_error("--shuffle-window: needs --shuffle block");
    return -1;
  }
  if (a->spec.cfg.echo_mode != STOKE_ECHO_BATCH && a->spec.cfg.echo < 2) {
    cli_error("--echo-mode: needs --echo 2 or more");
    return -1;
  }
  if (a->spec.save_every && !a->spec.save_state_path) {
    cli_error("--save-state-every: needs --save-state FILE");
    return -1;
  }
  if (a->spec.compute_kind == REPORT_COMPUTE_GPU_SLEEP &&
      (!a->spec.cfg.device || strcmp(a->spec.cfg.device, "cpu") == 0)) {
    cli_error("--compute gpu-sleep: runs on the device; give --device cuda");
    return -1;
  }
  if (a->spec.cfg.autotune && a->spec.cfg.n_workers == 0) {
    cli_error("--autotune: needs worker threads; give -j N (the most it may "
              "use) or -j auto");
    return -1;
  }
  if (a->spec.cfg.autotune && a->spec.cfg.device &&
      strcmp(a->spec.cfg.device, "cpu") != 0) {
    cli_error("--autotune: not with --device yet; give -j N");
    return -1;
  }
  if (a->warmup && a->spec.epochs < 2) {
    cli_error("--epochs: 1 epoch is all warm-up; use --epochs 2 or more, or "
              "--no-warmup");
    return -1;
  }
  /* The CUDA events time the consumer's stream: right for a step on the
  ** GPU, a lie for one on the host, which the host's clock times. */
  if (a->spec.compute_kind != REPORT_COMPUTE_GPU_SLEEP)
    a->spec.cfg.clock = STOKE_CLOCK_HOST;
  a->spec.data = a->src.data;
  a->spec.image = a->src.image;
  /* One --cache folder: the packing cache's, and remote shards' below it
  ** (docs/remote.md, "The cache"). */
  a->spec.image.cache_dir = a->spec.cfg.cache_dir;
  a->spec.image.cache_max_bytes = a->spec.cfg.cache_max_bytes;
  a->spec.synth = a->src.synth;
  a->spec.cfg.rank = a->rank;
  a->spec.cfg.world = a->world;
  a->spec.cfg.warmup_epochs = a->warmup ? 1 : 0;
  return 0;
}

