/* profile.c — "stoke profile"'s analysis (libstoke's stoke_profile_analyse:
** the queue model, its prediction and error, the what-if table, the advice
** and the deadline) printed for people and written as the JSON "diagnosis"
** object that `stoke report` draws; also Python's loader.diagnose() and
** loader.report(). */
#include <stdlib.h>
#include <string.h>

#include "report.h"

/* ---- the analysis (libstoke's stoke_profile_analyse) ---------------------- */

static double ms(int64_t ns) { return (double)ns / 1e6; }

cJSON *report_deadline_row_json(unsigned w, unsigned k, const stoke_deadline *d) {
  cJSON *e = cJSON_CreateObject();
  if (!e)
    return NULL;
  cJSON_AddNumberToObject(e, "workers", w);
  cJSON_AddNumberToObject(e, "prefetch", k);
  cJSON_AddNumberToObject(e, "epoch_s", (double)d->epoch_ns / 1e9);
  cJSON_AddNumberToObject(e, "total_s", (double)d->total_ns / 1e9);
  cJSON_AddNumberToObject(e, "low_s", (double)d->low_ns / 1e9);
  cJSON_AddNumberToObject(e, "high_s", (double)d->high_ns / 1e9);
  cJSON_AddNumberToObject(e, "error", d->error);
  cJSON_AddStringToObject(e, "verdict", stoke_deadline_verdict_name(d->verdict));
  cJSON_AddNumberToObject(e, "epochs_in_window", d->epochs_in_window);
  return e;
}

int report_deadline_measured(const report_result *res, unsigned epochs,
                             int64_t deadline_ns, int64_t fallback_ns,
                             stoke_deadline *out) {
  return stoke_deadline_measured(res->epochs, res->n_epochs, epochs,
                                 deadline_ns, fallback_ns, out);
}

int report_profile_analyse(const report_spec *spec, report_result *res,
                           unsigned cores, double consumer_cpu,
                           stoke_profile *pr) {
  /* The tool knows its consumer: a spinning step holds one core; a caller
  ** that measured its own step's CPU says so. */
  if (consumer_cpu < 0)
    consumer_cpu = spec->compute_kind == REPORT_COMPUTE_SPIN ? 1.0 : 0.0;
  stoke_profile_input in = {
      .struct_size = sizeof in,
      .stats = &res->stats,
      .config = &res->eff,
      .live_model = &res->model,
      .n_batches = res->n_batches,
      .epochs = res->epochs,
      .n_epochs = res->n_epochs,
      .consumer_run_delay_ns = res->consumer_run_delay_ns,
      .cores = cores,
      .consumer_cpu = consumer_cpu};
  return stoke_profile_analyse(&in, pr, &res->diag);
}

/* 42 s, 12.5 min, 7.92 h. */
static const char *span(char *buf, size_t n, double ns) {
  double s = ns / 1e9;
  if (s >= 3600)
    snprintf(buf, n, "%.2f h", s / 3600);
  else if (s >= 60)
    snprintf(buf, n, "%.1f min", s / 60);
  else
    snprintf(buf, n, "%.1f s", s);
  return buf;
}

void report_print_deadline_head(FILE *f, unsigned epochs, int64_t deadline_ns) {
  char win[32];
  fprintf(f, "\ndeadline: %u epochs in %s\n", epochs,
          span(win, sizeof win, (double)deadline_ns));
}

void report_print_deadline_row(FILE *f, const stoke_advice_words *words,
                               const char *what, unsigned w, unsigned k,
                               unsigned epochs, const stoke_deadline *d,
                               const char *basis) {
  char a[32], b[32], c[32], e[32], jw[256], jk[256];
  /* The settings in the caller's words (NULL: stoke_advice.text's). */
  stoke_advice_name(words, STOKE_SETTING_WORKERS, w, w, jw, sizeof jw);
  stoke_advice_name(words, STOKE_SETTING_PREFETCH, k, w, jk, sizeof jk);
  fprintf(f, "  %-4s %s %s: %s an epoch, %u epochs %s "
             "(%s to %s, +/-%.0f%%, %s): %s; %.1f epochs fit\n",
          what, jw, jk, span(e, sizeof e, (double)d->epoch_ns), epochs,
          span(a, sizeof a, (double)d->total_ns),
          span(b, sizeof b, (double)d->low_ns),
          span(c, sizeof c, (double)d->high_ns), 100 * d->error, basis,
          stoke_deadline_verdict_name(d->verdict), d->epochs_in_window);
}

static void print_deadline(FILE *f, const stoke_advice_words *words,
                           const stoke_profile *pr) {
  if (!pr->train_epochs)
    return;
  report_print_deadline_head(f, pr->train_epochs, pr->deadline_ns);
  const struct {
    const char *what;
    const stoke_deadline *d;
    unsigned w, k;
    const char *basis;
  } rows[] = {
      {"now", &pr->now_fit, pr->model.n_workers,
       pr->model.prefetch ? pr->model.prefetch : 1, "measured epochs"},
      {"knee", &pr->knee_fit, pr->knee_workers, pr->knee_prefetch,
       "the model's what-if"}};
  for (size_t i = 0; i < 2; i++)
    report_print_deadline_row(f, words, rows[i].what, rows[i].w, rows[i].k,
                           pr->train_epochs, rows[i].d, rows[i].basis);
}

void report_print_profile(FILE *f, const stoke_advice_words *words,
                          const report_result *res, const stoke_profile *pr) {
  const stoke_model *m = &pr->model;
  const stoke_diagnosis *d = &res->diag;
  double cpu_pct = m->t_d_ns ? 100.0 * (double)m->t_cpu_ns /
                                   (double)m->t_d_ns
                             : 0.0;
  fprintf(f, "\nthe verdict's numbers\n");
  fprintf(f, "  wait ratio    %.1f%%  (busy under %.0f%%)\n",
          100 * d->wait_ratio, 100 * STOKE_BUSY_WAIT_RATIO);
  fprintf(f, "  queue empty   %.1f%%  (starving at %.0f%% or more)\n",
          100 * d->queue_empty_frac, 100 * STOKE_STARVING_EMPTY_FRAC);
  fprintf(f, "  tail ratio    %.2f  (wait p99 / max(step p50, 1 ms))\n",
          d->tail_ratio);
  fprintf(f, "\nqueue model (docs/diagnosis.md)\n");
  fprintf(f,
          "  per sample    t_d %.3f ms  (on a core %.3f ms = %.0f%%, waiting "
          "%.3f ms; sigma %.2f)\n",
          ms(m->t_d_ns), ms(m->t_cpu_ns), cpu_pct, ms(m->t_io_ns), m->sigma);
  if (m->run_delay_frac >= 0)
    fprintf(f,
            "                queueing for a core %.3f ms (schedstat: %.2f ns "
            "runnable per ns on a core)\n",
            ms((int64_t)((double)m->t_cpu_ns * m->run_delay_frac)),
            m->run_delay_frac);
  int64_t py = m->stage_ns[STOKE_STAGE_PYTHON] +
               m->stage_ns[STOKE_STAGE_GIL_WAIT] +
               m->stage_ns[STOKE_STAGE_COLLATE];
  if (py > 0) {
    fprintf(f,
            "  stages        python %.3f  gil_wait %.3f  collate %.3f ms "
            "(waiting for the GIL %.0f%% of a Python sample)\n",
            ms(m->stage_ns[STOKE_STAGE_PYTHON]),
            ms(m->stage_ns[STOKE_STAGE_GIL_WAIT]),
            ms(m->stage_ns[STOKE_STAGE_COLLATE]), 100 * m->gil_wait_frac);
    fprintf(f,
            "  the GIL       the workers keep it %.0f%% busy%s\n",
            100 * m->gil_busy,
            m->t_gil_ns > 0 ? ": it limits them (t_gil = t_cpu)" : "");
  } else {
    fprintf(f, "  stages        read %.3f  decode %.3f  transform %.3f ms\n",
            ms(m->stage_ns[STOKE_STAGE_READ]),
            ms(m->stage_ns[STOKE_STAGE_DECODE]),
            ms(m->stage_ns[STOKE_STAGE_TRANSFORM]));
  }
  if (m->threads_seen > m->n_workers && m->n_workers > 0)
    fprintf(f,
            "  threads       %u named stoke-w* for %u workers: the samples "
            "start helper threads\n",
            m->threads_seen, m->n_workers);
  fprintf(f, "  consumer      t_c %.3f ms per step, copy %.3f ms\n",
          ms(m->t_c_ns), ms(m->copy_ns));
  if (pr->consumer_delay_ns > 0)
    fprintf(f,
            "                of it %.3f ms waiting for a core (the verdict "
            "uses %.3f ms)\n",
            ms(pr->consumer_delay_ns),
            ms(m->t_c_ns > pr->consumer_delay_ns
                   ? m->t_c_ns - pr->consumer_delay_ns
                   : 0));
  fprintf(f,
          "  loader        B %zu, W %u, K %u, chunk %zu, cores %.0f (%.1f "
          "for the workers)\n",
          m->batch_size, m->n_workers, m->prefetch, m->chunk, m->cores,
          m->cores - m->consumer_cpu < 1 ? 1.0 : m->cores - m->consumer_cpu);
  if (m->n_workers == 0)
    fprintf(f, "  producer      B*t_d = %.3f ms per batch, inside next()\n",
            ms(pr->now.producer_batch_ns));
  else
    fprintf(f,
            "  producer      B*max(t_d/W_eff, t_cpu/P) = %.3f ms per batch\n",
            ms(pr->now.producer_batch_ns));
  fprintf(f, "  bound         %s\n", stoke_bound_name(pr->now.bound));
  fprintf(f, "  step          predicted %.3f ms, measured %.3f ms, error %+.1f%%\n",
          ms(pr->now.step_ns), ms(pr->measured_step_ns),
          100 * pr->step_error);
  if (pr->now.epoch_ns > 0)
    fprintf(f,
            "  epoch         predicted %.6f s, measured %.6f s, error "
            "%+.1f%%\n",
            (double)pr->now.epoch_ns / 1e9, pr->measured_epoch_ns / 1e9,
            100 * pr->epoch_error);

  fprintf(f, "\nwhat if (predicted %s; * = this run)\n",
          pr->now.epoch_ns > 0 ? "epoch seconds" : "step ms");
  fprintf(f, "  workers \\ prefetch");
  for (size_t j = 0; j < pr->ks.n; j++)
    fprintf(f, " %10u", pr->ks.v[j]);
  fputc('\n', f);
  for (size_t i = 0; i < pr->ws.n; i++) {
    fprintf(f, "  %18u", pr->ws.v[i]);
    for (size_t j = 0; j < pr->ks.n; j++) {
      const stoke_prediction *p = &pr->what_if[i][j];
      int here = p->n_workers == res->eff.n_workers &&
                 p->prefetch == res->eff.prefetch;
      if (pr->now.epoch_ns > 0)
        fprintf(f, " %9.4f%c", (double)p->epoch_ns / 1e9, here ? '*' : ' ');
      else
        fprintf(f, " %9.3f%c", ms(p->step_ns), here ? '*' : ' ');
    }
    fputc('\n', f);
  }
  fprintf(f, "\nadvice\n");
  if (!pr->n_advice)
    fprintf(f, "  none: the model sees nothing cheaper to change\n");
  for (size_t i = 0; i < pr->n_advice; i++) {
    char text[sizeof pr->advice[i].text];
    stoke_advice_format(&pr->advice[i], &pr->basis[i], words, text,
                        sizeof text);
    fprintf(f, "  %zu. %s\n", i + 1, text);
  }
  print_deadline(f, words, pr);
}

static const char *advice_kind_name(int kind) {
  switch (kind) {
  case STOKE_ADVICE_MODEL: return "model";
  case STOKE_ADVICE_WORKERS: return "workers";
  case STOKE_ADVICE_FEWER: return "fewer_workers";
  case STOKE_ADVICE_PIN_COPY: return "pinned_async_copy";
  case STOKE_ADVICE_CHEAPER: return "cheaper_samples";
  case STOKE_ADVICE_PREFETCH: return "prefetch";
  case STOKE_ADVICE_ECHO: return "data_echoing";
  case STOKE_ADVICE_DEVICE_PREFETCH: return "device_prefetch";
  case STOKE_ADVICE_THREADS: return "helper_threads";
  case STOKE_ADVICE_C_TRANSFORMS: return "c_transforms";
  case STOKE_ADVICE_PYTHON_OPS: return "fewer_python_ops";
  case STOKE_ADVICE_PROCESSES: return "processes";
  case STOKE_ADVICE_PRESIZE: return "presize";
  case STOKE_ADVICE_IO_CONCURRENCY: return "io_concurrency";
  case STOKE_ADVICE_FEWER_CONNECTIONS: return "fewer_connections";
  case STOKE_ADVICE_REMOTE_CACHE: return "remote_cache";
  }
  return "?";
}

cJSON *report_verdict_json(const stoke_diagnosis *d) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "verdict", stoke_verdict_name(d->verdict));
  cJSON_AddStringToObject(o, "reason", d->reason);
  cJSON_AddNumberToObject(o, "wait_ratio", d->wait_ratio);
  cJSON_AddNumberToObject(o, "queue_empty_frac", d->queue_empty_frac);
  cJSON_AddNumberToObject(o, "tail_ratio", d->tail_ratio);
  cJSON_AddNumberToObject(o, "busy_wait_ratio", STOKE_BUSY_WAIT_RATIO);
  cJSON_AddNumberToObject(o, "starving_empty_frac",
                          STOKE_STARVING_EMPTY_FRAC);
  return o;
}

cJSON *report_diagnosis_json(const stoke_advice_words *words,
                             const report_result *res,
                             const stoke_profile *pr) {
  const stoke_model *m = &pr->model;
  const stoke_diagnosis *d = &res->diag;
  cJSON *o = report_verdict_json(d);
  if (!o)
    return NULL;
  cJSON *mo = cJSON_AddObjectToObject(o, "model");
  if (mo) {
    cJSON_AddNumberToObject(mo, "t_d_ns", (double)m->t_d_ns);
    cJSON_AddNumberToObject(mo, "t_cpu_ns", (double)m->t_cpu_ns);
    cJSON_AddNumberToObject(mo, "t_io_ns", (double)m->t_io_ns);
    cJSON_AddNumberToObject(mo, "cpu_frac",
                            m->t_d_ns ? (double)m->t_cpu_ns /
                                            (double)m->t_d_ns
                                      : 0.0);
    cJSON_AddNumberToObject(mo, "sigma", m->sigma);
    cJSON_AddNumberToObject(mo, "run_delay_frac", m->run_delay_frac);
    cJSON_AddNumberToObject(mo, "read_ns",
                            (double)m->stage_ns[STOKE_STAGE_READ]);
    cJSON_AddNumberToObject(mo, "decode_ns",
                            (double)m->stage_ns[STOKE_STAGE_DECODE]);
    cJSON_AddNumberToObject(mo, "transform_ns",
                            (double)m->stage_ns[STOKE_STAGE_TRANSFORM]);
    cJSON_AddNumberToObject(mo, "python_ns",
                            (double)m->stage_ns[STOKE_STAGE_PYTHON]);
    cJSON_AddNumberToObject(mo, "gil_wait_ns",
                            (double)m->stage_ns[STOKE_STAGE_GIL_WAIT]);
    cJSON_AddNumberToObject(mo, "collate_ns",
                            (double)m->stage_ns[STOKE_STAGE_COLLATE]);
    cJSON_AddNumberToObject(mo, "gil_wait_frac", m->gil_wait_frac);
    cJSON_AddNumberToObject(mo, "gil_busy", m->gil_busy);
    cJSON_AddNumberToObject(mo, "t_gil_ns", (double)m->t_gil_ns);
    cJSON_AddNumberToObject(mo, "threads_seen", m->threads_seen);
    cJSON_AddNumberToObject(mo, "t_c_ns", (double)m->t_c_ns);
    cJSON_AddNumberToObject(mo, "copy_ns", (double)m->copy_ns);
    cJSON_AddNumberToObject(mo, "consumer_run_delay_ns",
                            (double)pr->consumer_delay_ns);
    cJSON_AddNumberToObject(mo, "batch_size", (double)m->batch_size);
    cJSON_AddNumberToObject(mo, "workers", m->n_workers);
    cJSON_AddNumberToObject(mo, "prefetch", m->prefetch);
    cJSON_AddNumberToObject(mo, "chunk", (double)m->chunk);
    cJSON_AddNumberToObject(mo, "cores", m->cores);
    cJSON_AddNumberToObject(mo, "consumer_cpu", m->consumer_cpu);
    cJSON_AddNumberToObject(mo, "batches_per_epoch", (double)m->n_batches);
  }
  cJSON *po = cJSON_AddObjectToObject(o, "prediction");
  if (po) {
    cJSON_AddNumberToObject(po, "producer_batch_ns",
                            (double)pr->now.producer_batch_ns);
    cJSON_AddNumberToObject(po, "predicted_step_ns",
                            (double)pr->now.step_ns);
    cJSON_AddNumberToObject(po, "measured_step_ns",
                            (double)pr->measured_step_ns);
    cJSON_AddNumberToObject(po, "step_error", pr->step_error);
    cJSON_AddNumberToObject(po, "predicted_epoch_s",
                            (double)pr->now.epoch_ns / 1e9);
    cJSON_AddNumberToObject(po, "measured_epoch_s",
                            pr->measured_epoch_ns / 1e9);
    cJSON_AddNumberToObject(po, "epoch_error", pr->epoch_error);
    cJSON_AddNumberToObject(po, "predicted_wait_ratio", pr->now.wait_ratio);
    cJSON_AddStringToObject(po, "bound", stoke_bound_name(pr->now.bound));
  }
  cJSON *wa = cJSON_AddArrayToObject(o, "what_if");
  for (size_t i = 0; wa && i < pr->ws.n; i++)
    for (size_t j = 0; j < pr->ks.n; j++) {
      const stoke_prediction *p = &pr->what_if[i][j];
      cJSON *e = cJSON_CreateObject();
      if (!e)
        break;
      cJSON_AddItemToArray(wa, e);
      cJSON_AddNumberToObject(e, "workers", p->n_workers);
      cJSON_AddNumberToObject(e, "prefetch", p->prefetch);
      cJSON_AddNumberToObject(e, "producer_batch_ns",
                              (double)p->producer_batch_ns);
      cJSON_AddNumberToObject(e, "step_ns", (double)p->step_ns);
      cJSON_AddNumberToObject(e, "epoch_s", (double)p->epoch_ns / 1e9);
      cJSON_AddNumberToObject(e, "wait_ratio", p->wait_ratio);
      cJSON_AddStringToObject(e, "bound", stoke_bound_name(p->bound));
    }
  cJSON *aa = cJSON_AddArrayToObject(o, "advice");
  for (size_t i = 0; aa && i < pr->n_advice; i++) {
    const stoke_advice *a = &pr->advice[i];
    cJSON *e = cJSON_CreateObject();
    if (!e)
      break;
    cJSON_AddItemToArray(aa, e);
    cJSON_AddStringToObject(e, "kind", advice_kind_name(a->kind));
    char text[sizeof a->text];
    stoke_advice_format(a, &pr->basis[i], words, text, sizeof text);
    cJSON_AddStringToObject(e, "text", text);
    cJSON_AddNumberToObject(e, "workers", a->n_workers);
    cJSON_AddNumberToObject(e, "prefetch", a->prefetch);
    if (a->kind == STOKE_ADVICE_CHEAPER)
      cJSON_AddStringToObject(e, "stage", stoke_stage_name(a->stage));
    if (a->kind == STOKE_ADVICE_DEVICE_PREFETCH)
      cJSON_AddNumberToObject(e, "device_prefetch", a->device_prefetch);
    if (a->kind == STOKE_ADVICE_ECHO)
      cJSON_AddNumberToObject(e, "echo", a->echo);
    if (a->kind == STOKE_ADVICE_PRESIZE)
      cJSON_AddNumberToObject(e, "max_side", a->max_side);
    if (a->kind == STOKE_ADVICE_IO_CONCURRENCY ||
        a->kind == STOKE_ADVICE_FEWER_CONNECTIONS)
      cJSON_AddNumberToObject(e, "io_concurrency", a->io_concurrency);
    cJSON_AddNumberToObject(e, "now_step_ns", (double)a->now_step_ns);
    cJSON_AddNumberToObject(e, "predicted_step_ns",
                            (double)a->predicted_step_ns);
    cJSON_AddNumberToObject(e, "speedup", a->speedup);
  }
  if (pr->train_epochs) {
    cJSON *dl = cJSON_AddObjectToObject(o, "deadline");
    if (dl) {
      cJSON_AddNumberToObject(dl, "train_epochs", pr->train_epochs);
      cJSON_AddNumberToObject(dl, "deadline_s", (double)pr->deadline_ns / 1e9);
      const stoke_deadline *ds[2] = {&pr->now_fit, &pr->knee_fit};
      const char *names[2] = {"now", "knee"};
      for (int i = 0; i < 2; i++)
        cJSON_AddItemToObject(
            dl, names[i],
            report_deadline_row_json(i ? pr->knee_workers : m->n_workers,
                                  i ? pr->knee_prefetch
                                    : m->prefetch ? m->prefetch : 1,
                                  ds[i]));
    }
  }
  return o;
}

