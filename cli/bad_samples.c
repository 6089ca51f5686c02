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

void cli_fmt_max_failures(const stoke_config *cfg, char *buf, size_t n) {
  if (cfg->max_failures)
    snprintf(buf, n, "%llu", (unsigned long long)cfg->max_failures);
  else if (cfg->max_failure_frac > 0)
    snprintf(buf, n, "%g%%", 100 * cfg->max_failure_frac);
  else
    snprintf(buf, n, "none");
}

/* ---- state files --------------------------------------------------------- */

int cli_state_read(const char *path, stoke_loader_state *st) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    cli_error("--resume: cannot read '%s': %s", path, strerror(errno));
    return CLI_ERROR;
  }
  uint8_t buf[STOKE_STATE_BYTES + 1];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  if (stoke_loader_state_decode(buf, n, st) != 0) {
    cli_error("--resume: %s: %s", path, stoke_errmsg(NULL));
    return CLI_ERROR;
  }
  return CLI_OK;
}

int cli_state_write(const char *path, const stoke_loader_state *st) {
  uint8_t buf[STOKE_STATE_BYTES];
  size_t n;
  if (stoke_loader_state_encode(st, buf, sizeof buf, &n) != 0) {
    cli_error("--save-state: %s", stoke_strerror(STOKE_EINVAL));
    return CLI_ERROR;
  }
  /* A state appears complete or not at all: a job killed mid-write keeps
  ** its previous state. */
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "wb");
  int bad = !f || fwrite(buf, 1, n, f) != n;
  if (f) bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    cli_error("--save-state: cannot write '%s': %s", path, strerror(errno));
    remove(tmp);
    return CLI_ERROR;
  }
  return CLI_OK;
}

/* ---- reports ------------------------------------------------------------- */

static const char *action_text(const stoke_failure *f) {
  switch (f->action) {
  case STOKE_ON_ERROR_SKIP:
    return "skipped";
  case STOKE_ON_ERROR_REPLACE:
    return f->substitute == SIZE_MAX ? "not replaced" : "replaced by";
  default:
    return "failed the run";
  }
}

void cli_print_failures(FILE *f, const cli_run_result *res) {
  const stoke_stats *st = &res->stats;
  if (st->failures == 0 && st->quarantined == 0) return;
  fprintf(f, "  bad samples   %llu: %llu failed to read or decode, %llu "
             "listed in the quarantine; skipped %llu, replaced %llu; the "
             "last:\n",
          (unsigned long long)(st->failures + st->quarantined),
          (unsigned long long)st->failures,
          (unsigned long long)st->quarantined,
          (unsigned long long)st->skipped, (unsigned long long)st->replaced);
  for (size_t k = 0; k < res->n_failures_kept; k++) {
    const stoke_failure *x = &res->failures[k];
    fprintf(f, "    sample %zu%s%s%s, epoch %llu batch %zu: %s", x->index,
            x->where[0] ? " (" : "", x->where, x->where[0] ? ")" : "",
            (unsigned long long)x->epoch, x->batch, action_text(x));
    if (x->action == STOKE_ON_ERROR_REPLACE && x->substitute != SIZE_MAX)
      fprintf(f, " %zu", x->substitute);
    fprintf(f, ": %s\n", x->reason);
  }
}

cJSON *cli_failures_json(const cli_run_spec *spec, const cli_run_result *res) {
  const stoke_stats *st = &res->stats;
  char buf[64];
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "policy", stoke_on_error_name(res->eff.on_error));
  cli_fmt_max_failures(&res->eff, buf, sizeof buf);
  cJSON_AddStringToObject(o, "budget", buf);
  if (spec->cfg.quarantine_path)
    cJSON_AddStringToObject(o, "quarantine", spec->cfg.quarantine_path);
  else
    cJSON_AddNullToObject(o, "quarantine");
  cJSON_AddNumberToObject(o, "failures", (double)st->failures);
  cJSON_AddNumberToObject(o, "quarantined", (double)st->quarantined);
  cJSON_AddNumberToObject(o, "skipped", (double)st->skipped);
  cJSON_AddNumberToObject(o, "replaced", (double)st->replaced);
  cJSON *a = cJSON_AddArrayToObject(o, "last");
  for (size_t k = 0; a && k < res->n_failures_kept; k++) {
    const stoke_failure *x = &res->failures[k];
    cJSON *e = cJSON_CreateObject();
    if (!e) break;
    cJSON_AddNumberToObject(e, "index", (double)x->index);
    cJSON_AddNumberToObject(e, "epoch", (double)x->epoch);
    cJSON_AddNumberToObject(e, "batch", (double)x->batch);
    cJSON_AddStringToObject(e, "where", x->where);
    cJSON_AddStringToObject(e, "reason", x->reason);
    cJSON_AddStringToObject(e, "action", stoke_on_error_name(x->action));
    cJSON_AddBoolToObject(e, "quarantined", x->quarantined);
    if (x->substitute == SIZE_MAX)
      cJSON_AddNullToObject(e, "substitute");
    else
      cJSON_AddNumberToObject(e, "substitute", (double)x->substitute);
    cJSON_AddItemToArray(a, e);
  }
  return o;
}

cJSON *cli_resume_json(const cli_run_spec *spec, const cli_run_result *res) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  if (res->resumed) {
    cJSON *from = cJSON_AddObjectToObject(o, "resumed_from");
    cJSON_AddStringToObject(from, "file", spec->resume_path);
    cJSON_AddNumberToObject(from, "epoch", (double)res->start_epoch);
    cJSON_AddNumberToObject(from, "batch", (double)res->start_batch);
    cJSON_AddStringToObject(from, "note", res->resume_note);
  } else {
    cJSON_AddNullToObject(o, "resumed_from");
  }
  cJSON_AddNumberToObject(o, "batches", (double)res->batches_run);
  cJSON_AddBoolToObject(o, "stopped", res->stopped);
  if (spec->save_state_path)
    cJSON_AddStringToObject(o, "state_file", spec->save_state_path);
  else
    cJSON_AddNullToObject(o, "state_file");
  cJSON *s = cJSON_AddObjectToObject(o, "state");
  cJSON_AddNumberToObject(s, "epoch", (double)res->state.epoch);
  cJSON_AddNumberToObject(s, "batches_done",
                          (double)res->state.batches_done);
  cJSON_AddNumberToObject(s, "seed", (double)res->state.seed);
  char fp[32];
  snprintf(fp, sizeof fp, "0x%016llx",
           (unsigned long long)res->state.fingerprint);
  cJSON_AddStringToObject(s, "fingerprint", fp);
  return o;
}
