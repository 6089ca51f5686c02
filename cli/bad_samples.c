/* bad_samples.c — the tool's side of bad samples and resume: parsing
** --on-error and --max-failures, the state files of --save-state and
** --resume, and the report of what went wrong (human and JSON). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_parse_on_error(const char *what, const char *s, int *out) {
  static const int all[] = {STOKE_ON_ERROR_FAIL, STOKE_ON_ERROR_SKIP,
                            STOKE_ON_ERROR_REPLACE};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (strcmp(s, stoke_on_error_name(all[i])) == 0) {
      *out = all[i];
      return 0;
    }
  cli_error("%s: expected fail, skip or replace, got '%s'", what, s);
  return -1;
}

int cli_parse_max_failures(const char *what, const char *s,
                           stoke_config *cfg) {
  if (strcmp(s, "none") == 0) {
    cfg->max_failures = 0;
    cfg->max_failure_frac = 0;
    return 0;
  }
  size_t n = strlen(s);
  if (n > 1 && s[n - 1] == '%') {
    char buf[64];
    if (n >= sizeof buf) goto bad;
    memcpy(buf, s, n - 1);
    buf[n - 1] = '\0';
    double pct;
    if (cli_parse_positive(what, buf, &pct)) return -1;
    if (pct > 100) {
      cli_error("%s: a share is at most 100%%, got '%s'", what, s);
      return -1;
    }
    cfg->max_failures = 0;
    cfg->max_failure_frac = pct / 100;
    return 0;
  }
  uint64_t v;
  if (cli_parse_u64(what, s, &v)) return -1;
  if (v == 0) {
    cli_error("%s: 0 would allow none; use --on-error fail, a count, a "
              "share such as 0.1%%, or none", what);
    return -1;
  }
  cfg->max_failures = v;
  return 0;
bad:
  cli_error("%s: expected a count, a share such as 0.1%% or none, got '%s'",
            what, s);
  return -1;
}

/* ---- state files --------------------------------------------------------- */

/* Both through the library's private files: a state another user could
** have planted or changed is refused, with its owner and mode named. */
int cli_state_read(const char *path, stoke_loader_state *st) {
  if (stoke_loader_state_load_file(path, st) != 0) {
    cli_error("--resume: %s", stoke_errmsg(NULL));
    return CLI_ERROR;
  }
  return CLI_OK;
}

int cli_state_write(const char *path, const stoke_loader_state *st) {
  /* A state appears complete or not at all: a job killed mid-write keeps
  ** its previous state. */
  if (stoke_loader_state_save_file(st, path) != 0) {
    cli_error("--save-state: %s", stoke_errmsg(NULL));
    return CLI_ERROR;
  }
  return CLI_OK;
}

