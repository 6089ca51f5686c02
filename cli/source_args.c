/* source_args.c — the options that name a loader's source, shared by every
** command that builds one (bench, profile, tune, budget): a dataset (the
** positional argument) read with --transform, or --synthetic with
** --samples, --shape, --cost-dist and --classes.  One table and one parser,
** so a source written for `stoke bench` means the same to `stoke tune` and
** `stoke budget`. */
#define _POSIX_C_SOURCE 200809L
#include <assert.h>
#include <stdarg.h>
#include <string.h>

#include "cli.h"

const cli_opt cli_source_opts[] = {{"synthetic", 0, 1, CLI_SRC_SYNTHETIC},
                                   {"samples", 0, 1, CLI_SRC_SAMPLES},
                                   {"shape", 0, 1, CLI_SRC_SHAPE},
                                   {"cost-dist", 0, 1, CLI_SRC_COST_DIST},
                                   {"classes", 0, 1, CLI_SRC_CLASSES},
                                   {"transform", 0, 1, CLI_SRC_TRANSFORM},
                                   {"io-concurrency", 0, 1,
                                    CLI_SRC_IO_CONCURRENCY},
                                   {"tls-ca", 0, 1, CLI_SRC_TLS_CA},
                                   {"tls-insecure", 0, 0,
                                    CLI_SRC_TLS_INSECURE},
                                   {"connect-timeout", 0, 1,
                                    CLI_SRC_CONNECT_TIMEOUT},
                                   {"stall-timeout", 0, 1,
                                    CLI_SRC_STALL_TIMEOUT},
                                   {"http-attempts", 0, 1,
                                    CLI_SRC_HTTP_ATTEMPTS},
                                   {"retry-budget", 0, 1,
                                    CLI_SRC_RETRY_BUDGET},
                                   {"retry-backoff", 0, 1,
                                    CLI_SRC_RETRY_BACKOFF},
                                   {NULL, 0, 0, 0}};

/* A duration option in whole milliseconds, 1 ms to 1 h. */
static int parse_ms(const char *f, const char *v, uint32_t *out) {
  int64_t ns;
  if (cli_parse_duration(f, v, "s", &ns)) return -1;
  if (ns < 1000000 || ns > 3600 * (int64_t)1000000000) {
    cli_error("%s: expected 1ms to 1h, got '%s'", f, v);
    return -1;
  }
  *out = (uint32_t)(ns / 1000000);
  return 0;
}

void cli_source_args_init(cli_source_args *s) {
  memset(s, 0, sizeof *s);
  stoke_image_config_init(&s->image);
  stoke_synthetic_config_init(&s->synth);
  s->default_transform = s->image.transform;
}

int cli_source_args_apply(cli_source_args *s, int id, const char *f,
                          const char *v) {
  switch (id) {
  case CLI_OPT_ARG:
    if (s->data) {
      cli_error("one dataset only, got '%s' and '%s'", s->data, v);
      return -1;
    }
    s->data = v;
    return 0;
  case CLI_SRC_SYNTHETIC:
    s->synthetic = 1;
    return cli_parse_synthetic(f, v, &s->synth);
  case CLI_SRC_SAMPLES:
    return cli_parse_size_t(f, v, 1, &s->synth.n_samples);
  case CLI_SRC_SHAPE:
    return cli_parse_shape(f, v, &s->synth.ndim, s->synth.shape);
  case CLI_SRC_COST_DIST:
    return cli_parse_cost_dist(f, v, &s->synth);
  case CLI_SRC_CLASSES:
    return cli_parse_uint(f, v, 1, (unsigned)-1, &s->synth.n_classes);
  case CLI_SRC_TRANSFORM:
    s->image.transform = v;
    return 0;
  case CLI_SRC_IO_CONCURRENCY:
    return cli_parse_uint(f, v, 1, 64, &s->image.io_concurrency);
  case CLI_SRC_TLS_CA:
    s->image.tls_ca_path = v;
    return 0;
  case CLI_SRC_TLS_INSECURE:
    s->image.tls_insecure = 1;
    return 0;
  case CLI_SRC_CONNECT_TIMEOUT:
    return parse_ms(f, v, &s->image.connect_timeout_ms);
  case CLI_SRC_STALL_TIMEOUT:
    return parse_ms(f, v, &s->image.stall_timeout_ms);
  case CLI_SRC_HTTP_ATTEMPTS:
    return cli_parse_uint(f, v, 1, 100, &s->image.max_attempts);
  case CLI_SRC_RETRY_BUDGET:
    return cli_parse_uint(f, v, 1, (unsigned)-1, &s->image.retry_budget);
  case CLI_SRC_RETRY_BACKOFF:
    return parse_ms(f, v, &s->image.retry_backoff_ms);
  }
  return 1; /* not a source option */
}

int cli_source_args_check(const cli_source_args *s, const char *cmd) {
  if (s->data && s->synthetic) {
    cli_error("%s: give a dataset or --synthetic, not both", cmd);
    return -1;
  }
  if (!s->data && s->image.transform != s->default_transform) {
    cli_error("--transform: only for an image dataset");
    return -1;
  }
  return 0;
}

int cli_source_args_finish(const cli_source_args *s, const char *cmd) {
  if (cli_source_args_check(s, cmd))
    return -1;
  if (!s->synthetic && !s->data) {
    cli_error("%s: no data source; give a dataset (an ImageFolder "
              "directory, tar or packed shards) or --synthetic sleep:5ms, "
              "spin:2ms or tensor",
              cmd);
    return -1;
  }
  return 0;
}

size_t cli_opts_join(cli_opt *dst, size_t cap, ...) {
  size_t n = 0;
  va_list ap;
  va_start(ap, cap);
  for (const cli_opt *t; (t = va_arg(ap, const cli_opt *)) != NULL;)
    for (; t->name; t++) {
      assert(n + 1 < cap && "cli_opts_join: dst too small");
      if (n + 1 >= cap) /* without assert: drop the rest, stay in bounds */
        break;
      dst[n++] = *t;
    }
  va_end(ap);
  dst[n] = (cli_opt){NULL, 0, 0, 0};
  return n;
}
