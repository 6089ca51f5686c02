/* main.c — the stoke command: a git-style table of subcommands.
**
**   stoke <command> [options]      run a command
**   stoke help [<command>]         list the commands, or one's options
**   stoke help --man               stoke(1), from the same help texts
**   stoke help --completion bash   the bash completion, from them too
**   stoke --version                print the version
*/
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct cli_cmd {
  const char *name;
  cli_cmd_fn fn;
  const char *usage;   /* printed by "stoke help <name>" */
  const char *summary; /* one line for "stoke help" */
} cli_cmd;

static const cli_cmd commands[] = {
    {"bench", cmd_bench, cmd_bench_usage,
     "measure whether a training step waits for data"},
    {"demo", cmd_demo, cmd_demo_usage,
     "the story: a starving loader, tune, the settings that feed it"},
    {"profile", cmd_profile, cmd_profile_usage,
     "explain a run: verdict, queue model, what-if, advice"},
    {"tune", cmd_tune, cmd_tune_usage,
     "sweep workers and prefetch, pick the knee"},
    {"budget", cmd_budget, cmd_budget_usage,
     "host and device memory ledgers: what fits"},
    {"pack", cmd_pack, cmd_pack_usage,
     "write an image dataset into packed shards"},
    {"inspect", cmd_inspect, cmd_inspect_usage,
     "describe a dataset and one batch of it; --verify every sample"},
    {"report", cmd_report, cmd_report_usage, "an HTML page from the JSON"},
    {"top", cmd_top, cmd_top_usage,
     "the running loaders, live: waiting, queue, workers, verdict"},
    {NULL, NULL, NULL, NULL}};

static const cli_cmd *find_command(const char *name) {
  for (const cli_cmd *c = commands; c->name; c++)
    if (strcmp(c->name, name) == 0)
      return c;
  return NULL;
}

/* A mistyped command: the closest of the table's (suggest.c). */
static void suggest_command(const char *name) {
  const char *names[sizeof commands / sizeof commands[0]];
  size_t n = 0;
  for (const cli_cmd *c = commands; c->name; c++) names[n++] = c->name;
  names[n++] = "help";
  cli_suggest(name, names, n, "command", "");
}

/* What `stoke help` says after the list of commands (the man page's
** description too). */
static const char general_text[] =
    "-j auto (bench, profile) tunes the workers and prefetch while the run\n"
    "goes, from the loader's own clocks; -j cores is one worker per CPU\n"
    "(what -j auto meant before 0.3)\n";

static void print_help(FILE *f) {
  fprintf(f, "usage: stoke [--version] [--help] <command> [options]\n\n"
             "commands:\n");
  for (const cli_cmd *c = commands; c->name; c++)
    fprintf(f, "  %-8s %s\n", c->name, c->summary);
  fprintf(f, "\n%s", general_text);
  fprintf(f, "\nsee 'stoke help <command>' for a command's options\n");
}

/* The command table as help_formats.c reads it. */
static size_t help_entries(cli_help_entry *out, size_t cap) {
  size_t n = 0;
  for (const cli_cmd *c = commands; c->name && n < cap; c++)
    out[n++] = (cli_help_entry){c->name, c->summary, c->usage};
  return n;
}

static int cmd_help(int argc, char **argv) {
  if (argc < 2) {
    print_help(stdout);
    return CLI_OK;
  }
  cli_help_entry entries[sizeof commands / sizeof commands[0]];
  size_t n = help_entries(entries, sizeof commands / sizeof commands[0]);
  if (strcmp(argv[1], "--man") == 0 && argc == 2) {
    cli_print_man(stdout, entries, n, general_text);
    return CLI_OK;
  }
  if (strcmp(argv[1], "--completion") == 0 && argc == 3)
    return cli_print_completion(stdout, argv[2], entries, n);
  if (argc > 2) {
    cli_error("help: too many arguments");
    return CLI_USAGE;
  }
  const cli_cmd *c = find_command(argv[1]);
  if (!c) {
    cli_error("help: '%s' is not a stoke command", argv[1]);
    suggest_command(argv[1]);
    return CLI_USAGE;
  }
  fputs(c->usage, stdout);
  return CLI_OK;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    print_help(stderr);
    return CLI_USAGE;
  }
  const char *name = argv[1];
  if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
    printf("stoke %s\n", stoke_version());
    return CLI_OK;
  }
  if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 ||
      strcmp(name, "-h") == 0)
    return cmd_help(argc - 1, argv + 1);
  const cli_cmd *c = find_command(name);
  if (!c) {
    if (name[0] == '-')
      cli_error("unknown option '%s'", name);
    else {
      cli_error("'%s' is not a stoke command", name);
      suggest_command(name);
    }
    fprintf(stderr, "see 'stoke help'\n");
    return CLI_USAGE;
  }
  int rc = c->fn(argc - 1, argv + 1);
  if (fflush(stdout) != 0 && rc == CLI_OK) {
    cli_error("cannot write to standard output");
    rc = CLI_ERROR;
  }
  return rc;
}
