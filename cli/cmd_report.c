/* cmd_report.c — "stoke report": the options; the page itself is the report
** library's (report/html.c), which the Python module draws too. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char cmd_report_usage[] =
    "usage: stoke report RUN.json [MORE.json ...] -o report.html\n"
    "\n"
    "Make one self-contained HTML page (inline CSS and SVG, no script, no\n"
    "network) from the JSON written by 'stoke bench --json', 'stoke profile\n"
    "--json' and 'stoke tune --json'.  The kind of each file is told by its\n"
    "keys; several files merge into one page, e.g. a profile and a tune.\n"
    "\n"
    "The page shows what was run and on which machine, the verdict and the\n"
    "advice with their predicted gains, the wait/compute split per epoch, the\n"
    "wait percentiles, the stage breakdown, the what-if table, and the tune\n"
    "curve and table, each when its data is present.\n"
    "\n"
    "options\n"
    "  -o, --output FILE      write the page here ('-' = stdout); required\n"
    "  -h, --help             this text\n";

enum { O_OUTPUT = 1, O_HELP };

int cmd_report(int argc, char **argv) {
  static const cli_opt opts[] = {{"output", 'o', 1, O_OUTPUT},
                                 {"help", 'h', 0, O_HELP},
                                 {NULL, 0, 0, 0}};
  cli_parser ps;
  cli_parser_init(&ps, argc, argv, "report");
  const char *out_path = NULL, *v = NULL;
  size_t n = 0;
  const char **paths = calloc((size_t)argc + 1, sizeof *paths);
  if (!paths) {
    cli_error("%s", stoke_strerror(STOKE_ENOMEM));
    return CLI_ERROR;
  }
  int rc = CLI_OK, id;
  while ((id = cli_next_opt(&ps, opts, &v)) != CLI_OPT_END) {
    if (id == CLI_OPT_ERROR) {
      rc = CLI_USAGE;
      goto out;
    }
    if (id == O_HELP) {
      fputs(cmd_report_usage, stdout);
      goto out;
    }
    if (id == O_OUTPUT)
      out_path = v;
    else if (id == CLI_OPT_ARG)
      paths[n++] = v;
  }
  if (n == 0) {
    cli_error("report: give at least one JSON file; see 'stoke help "
              "report'");
    rc = CLI_USAGE;
    goto out;
  }
  if (!out_path || !*out_path) {
    cli_error("report: -o FILE is required ('-' for stdout)");
    rc = CLI_USAGE;
    goto out;
  }
  for (size_t i = 0; i < n; i++)
    if (strcmp(paths[i], out_path) == 0) {
      cli_error("-o: the same file as an input ('%s')", out_path);
      rc = CLI_USAGE;
      goto out;
    }
  report_err e;
  if (report_html_write(paths, n, out_path, &e) != 0) {
    cli_error("%s", e.msg);
    rc = CLI_ERROR;
  }
out:
  free(paths);
  return rc;
}
