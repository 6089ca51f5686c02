/* failures.c — bad samples and resume in the report: the text lines and
** the "bad_samples" and "resume" objects of the JSON. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report.h"

void report_fmt_max_failures(const stoke_config *cfg, char *buf, size_t n) {
  if (cfg->max_failures)
    snprintf(buf, n, "%llu", (unsigned long long)cfg->max_failures);
  else if (cfg->max_failure_frac > 0)
    snprintf(buf, n, "%g%%", 100 * cfg->max_failure_frac);
  else
    snprintf(buf, n, "none");
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

void report_print_failures(FILE *f, const report_result *res) {
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

cJSON *report_failures_json(const report_spec *spec, const report_result *res) {
  const stoke_stats *st = &res->stats;
  char buf[64];
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "policy", stoke_on_error_name(res->eff.on_error));
  report_fmt_max_failures(&res->eff, buf, sizeof buf);
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

cJSON *report_resume_json(const report_spec *spec, const report_result *res) {
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

