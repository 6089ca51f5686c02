/* fuzz_cli.c — the command line's option parser (cli/options.c and the
** shared source and run options of bench, profile and tune): the input,
** split at NUL bytes, is the argument list of `stoke bench`, parsed and
** checked exactly as cmd_bench does, up to where it would start the run.
** Each argument is also offered to the value parsers.  Property: every
** outcome is a clean accept or a usage error (no crash, no read past an
** argument).  Messages go to stderr; run with -close_fd_mask=2. */
#include "../../cli/cli.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 32

static void values(const char *s) {
  uint64_t u;
  unsigned ui;
  size_t z;
  double d;
  int64_t ns;
  int nd, kind;
  int64_t shape[STOKE_MAX_DIMS];
  (void)cli_parse_u64("--x", s, &u);
  (void)cli_parse_uint("--x", s, 1, 1000, &ui);
  (void)cli_parse_size_t("--x", s, 1, &z);
  (void)cli_parse_positive("--x", s, &d);
  (void)cli_parse_duration("--x", s, NULL, &ns);
  (void)cli_parse_duration("--x", s, "ms", &ns);
  if (cli_parse_bytes("--x", s, &u) == 0) {
    char buf[32];
    cli_format_bytes(buf, sizeof buf, u);
  }
  if (cli_parse_shape("--x", s, &nd, shape) == 0) {
    char buf[160];
    cli_fmt_shape(nd, shape, buf, sizeof buf);
  }
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  if (cli_parse_synthetic("--x", s, &sc) == 0) {
    char buf[64];
    cli_fmt_synthetic(&sc, buf, sizeof buf);
  }
  (void)cli_parse_cost_dist("--x", s, &sc);
  if (cli_parse_compute("--x", s, &kind, &ns) == 0) {
    char buf[64];
    cli_fmt_compute(kind, ns, buf, sizeof buf);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* argv: "bench", then each NUL-separated piece, in their own copies so
  ** that a read past one is an ASan error. */
  char *argv[MAX_ARGS + 2];
  int argc = 0;
  argv[argc++] = strdup("bench");
  size_t i = 0;
  while (i <= size && argc < MAX_ARGS + 1) {
    const uint8_t *end = memchr(data + i, 0, size - i);
    size_t len = end ? (size_t)(end - (data + i)) : size - i;
    argv[argc] = malloc(len + 1);
    memcpy(argv[argc], data + i, len);
    argv[argc][len] = 0;
    values(argv[argc]);
    argc++;
    i += len + 1;
  }
  argv[argc] = NULL;

  enum { O_HELP = CLI_RUN_OPT_LAST };
  static const cli_opt own[] = {{"help", 'h', 0, O_HELP}, {NULL, 0, 0, 0}};
  cli_opt opts[CLI_RUN_OPT_LAST + 2];
  cli_opts_join(opts, CLI_RUN_OPT_LAST + 2, cli_source_opts, cli_run_opts,
                own, NULL);
  cli_run_args args;
  if (cli_run_args_init(&args) == 0) {
    cli_parser p;
    cli_parser_init(&p, argc, argv, "bench");
    const char *v;
    int id, bad = 0;
    while (!bad && (id = cli_next_opt(&p, opts, &v)) != CLI_OPT_END) {
      if (id == CLI_OPT_ERROR || id == O_HELP) break;
      bad = cli_run_args_apply(&args, id, p.flag, v) != 0;
    }
    if (!bad) (void)cli_run_args_finish(&args, "bench");
  }
  for (int k = 0; k < argc; k++) free(argv[k]);
  return 0;
}
