/* profile.c — the analysis behind "stoke profile", loader.diagnose() and
** loader.report(): the queue model of a measured run (with the workers'
** scheduler figures measured while they lived merged in), its prediction
** of the run and its error, the what-if table over workers and prefetch,
** the escalation ladder and, when asked, whether N epochs fit in a
** deadline, at this configuration and at the model's knee.  The reports
** (report/) print and write it; nothing here does. */
#include <stdlib.h>

#include "stoke.h"

void stoke_whatif_axis_add(stoke_whatif_axis *a, unsigned x) {
  for (size_t i = 0; i < a->n; i++)
    if (a->v[i] == x)
      return;
  if (a->n < STOKE_WHATIF_MAX)
    a->v[a->n++] = x;
}

static int cmp_uint(const void *a, const void *b) {
  unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
  return x < y ? -1 : x > y;
}

void stoke_whatif_axis_sort(stoke_whatif_axis *a) {
  stoke_whatif_axis u = {{0}, 0};
  for (size_t i = 0; i < a->n; i++)
    stoke_whatif_axis_add(&u, a->v[i]);
  qsort(u.v, u.n, sizeof(unsigned), cmp_uint);
  *a = u;
}

void stoke_profile_grid(stoke_profile *pr, const stoke_config *eff,
                        int default_workers, int default_prefetch) {
  if (default_workers) {
    static const unsigned dw[] = {0, 1, 2, 4, 8, 16, 32};
    for (size_t i = 0; i < sizeof(dw) / sizeof(dw[0]); i++)
      stoke_whatif_axis_add(&pr->ws, dw[i]);
    stoke_whatif_axis_add(&pr->ws, eff->n_workers);
  }
  if (default_prefetch) {
    static const unsigned dk[] = {1, 2, 4, 8};
    for (size_t i = 0; i < sizeof(dk) / sizeof(dk[0]); i++)
      stoke_whatif_axis_add(&pr->ks, dk[i]);
    stoke_whatif_axis_add(&pr->ks, eff->prefetch);
  }
  stoke_whatif_axis_sort(&pr->ws);
  stoke_whatif_axis_sort(&pr->ks);
}

/* --train-epochs N --deadline DUR: N epochs at this configuration (the
** measured epochs) and at the model's knee (its prediction, with the
** what-if error of the truth grid, STOKE_WHATIF_ERROR_P90). */
static int deadline(const stoke_profile_input *in, stoke_profile *pr) {
  int rc = stoke_deadline_measured(in->epochs, in->n_epochs, pr->train_epochs,
                                   pr->deadline_ns, pr->now.epoch_ns,
                                   &pr->now_fit);
  if (rc < 0)
    return rc;
  int64_t now_ns = pr->now_fit.epoch_ns;
  /* The knee the advice's W range and rule give, over prefetch too. */
  stoke_tune_point kp_pt;
  if (stoke_tune_knee_model_tuned(&pr->model, &kp_pt) != 0)
    return STOKE_EINVAL;
  pr->knee_workers = kp_pt.n_workers;
  pr->knee_prefetch = kp_pt.prefetch;
  stoke_prediction kp;
  rc = stoke_predict_step(&pr->model, pr->knee_workers, pr->knee_prefetch,
                          &kp);
  if (rc < 0)
    return rc;
  int64_t knee_ns = kp.epoch_ns > 0 ? kp.epoch_ns : now_ns;
  return stoke_deadline_check(knee_ns, pr->train_epochs, pr->deadline_ns,
                              STOKE_WHATIF_ERROR_P90, &pr->knee_fit);
}

int stoke_profile_analyse(const stoke_profile_input *in, stoke_profile *pr,
                          stoke_diagnosis *diag) {
  if (!in || in->struct_size < sizeof *in || !in->stats || !in->config ||
      !pr || (!in->epochs && in->n_epochs) || !in->stats->steps)
    return STOKE_EINVAL;
  const stoke_stats *st = in->stats;
  const stoke_config *eff = in->config;
  int rc = stoke_model_init(&pr->model, st, eff, in->cores);
  if (rc < 0)
    return rc;
  pr->model.consumer_cpu = in->consumer_cpu >= 0 ? in->consumer_cpu : 0.0;
  /* The loader is gone: its workers' queueing for a core, measured while
  ** they lived, comes from the run's model. */
  const stoke_model *live = in->live_model;
  if (live && live->run_delay_frac >= 0) {
    pr->model.run_delay_frac = live->run_delay_frac;
    pr->model.t_io_ns = live->t_io_ns;
    pr->model.sigma = live->sigma; /* deflated with that t_io */
    pr->model.threads_seen = live->threads_seen;
    pr->model.t_gil_ns = live->t_gil_ns;
  }
  pr->model.n_batches = in->n_batches;
  rc = stoke_predict_step(&pr->model, eff->n_workers,
                          eff->prefetch ? eff->prefetch : 1, &pr->now);
  if (rc < 0)
    return rc;
  pr->measured_step_ns =
      st->steps ? (st->wait.total_ns + st->compute.total_ns) /
                      (int64_t)st->steps
                : 0;
  stoke_epoch_summary sum;
  rc = stoke_epochs_summarize(in->epochs, in->n_epochs, &sum);
  if (rc < 0)
    return rc;
  pr->measured_epoch_ns = sum.epoch_s * 1e9;
  /* The verdict from this model: it knows the consumer's CPU.  When the
  ** consumer's thread waited for a core (workers oversubscribing the CPU
  ** delay a sleeping step's wake-up; Linux schedstat says how long), its
  ** computing clock holds that wait: the producer is compared with the
  ** step the consumer asked for.  The clocks and the prediction stay as
  ** measured. */
  stoke_model vm = pr->model;
  if (in->consumer_run_delay_ns > 0 && st->steps &&
      st->clock != STOKE_CLOCK_EVENTS) { /* events: the GPU's clock */
    pr->consumer_delay_ns = in->consumer_run_delay_ns / (int64_t)st->steps;
    vm.t_c_ns -= pr->consumer_delay_ns;
    if (vm.t_c_ns < 0)
      vm.t_c_ns = 0;
    /* The what-if table and the advice scale that wait with the workers'
    ** CPU demand at each W (stoke_model.consumer_delay_ns); at this run's
    ** W and K the prediction is unchanged. */
    pr->model.consumer_delay_ns = pr->consumer_delay_ns;
  }
  stoke_diagnosis vd;
  rc = stoke_diagnose_model(st, &vm, diag ? diag : &vd);
  if (rc < 0)
    return rc;
  if (pr->measured_step_ns > 0)
    pr->step_error =
        (double)pr->now.step_ns / (double)pr->measured_step_ns - 1;
  if (pr->measured_epoch_ns > 0 && pr->now.epoch_ns > 0)
    pr->epoch_error = (double)pr->now.epoch_ns / pr->measured_epoch_ns - 1;
  for (size_t i = 0; i < pr->ws.n; i++)
    for (size_t j = 0; j < pr->ks.n; j++)
      stoke_predict_step(&pr->model, pr->ws.v[i], pr->ks.v[j],
                         &pr->what_if[i][j]);
  rc = stoke_advise_basis(&pr->model, st, pr->advice, pr->basis,
                          STOKE_MAX_ADVICE, &pr->n_advice);
  if (rc < 0 || !pr->train_epochs)
    return rc;
  return deadline(in, pr);
}

