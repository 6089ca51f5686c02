/* report.c — what the report library prints and writes, for Python's
** loaders and clocks.
**
** A live loader becomes a report_result (report_result_collect) and is then
** reported by the same functions as `stoke bench` and `stoke profile`: the
** summary dict is bench's "summary" (plus its "stages"), diagnose() is
** profile's "diagnosis", report() its human text, save_json() its file,
** which `stoke report` renders.  A TwoClock has no producer clocks: its
** result carries the consumer's statistics and the doctor's verdict, and
** the text says what it cannot know. */
#define _POSIX_C_SOURCE 200809L
#include "ext.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report.h"

/* ---- a loader's run ---------------------------------------------------------- */

typedef struct sk_run {
  report_spec spec;
  report_result res;
  PyObject *hold;       /* keeps the strings the spec points into */
  int64_t cpu0_ns;      /* process CPU when measuring began (the
                           consumer's CPU share); -1: not known */
} sk_run;

/* Fill a run from what measured it: a Loader, or a process-mode clock. */
typedef int (*collect_fn)(PyObject *self, sk_run *r);

static void run_free(sk_run *r) {
  report_result_free(&r->res);
  Py_CLEAR(r->hold);
}

/* How the reports name the loader's source: the spec the package built. */
static int describe_source(sk_Loader *self, sk_run *r) {
  const char *kind = NULL;
  PyObject *k = sk_dict_str(self->spec, "kind", &kind);
  if (!k) return -1;
  r->hold = PyList_New(0);
  if (!r->hold || PyList_Append(r->hold, k) < 0) {
    Py_DECREF(k);
    return -1;
  }
  Py_DECREF(k);
  const char *label;
  PyObject *lab = sk_dict_str(self->spec, "label", &label);
  if (!lab || PyList_Append(r->hold, lab) < 0) {
    Py_XDECREF(lab);
    return -1;
  }
  Py_DECREF(lab);
  if (kind && strcmp(kind, "synthetic") == 0) {
    if (sk_synthetic_config(self->spec, &r->spec.synth) < 0) return -1;
  } else if (kind && strcmp(kind, "images") == 0) {
    const char *tf;
    PyObject *t = sk_dict_str(self->spec, "transform", &tf);
    if (!t || PyList_Append(r->hold, t) < 0) {
      Py_XDECREF(t);
      return -1;
    }
    Py_DECREF(t);
    stoke_image_config_init(&r->spec.image);
    if (tf) r->spec.image.transform = tf;
    r->spec.data = label ? label : "images";
  } else {
    r->spec.source_label = label ? label : "arrays";
  }
  return 0;
}

static int kind_is(PyObject *spec, const char *want) {
  PyObject *k = PyDict_GetItemString(spec, "kind");
  const char *s = k && PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
  return s && strcmp(s, want) == 0;
}

static int loader_collect(PyObject *o, sk_run *r) {
  sk_Loader *self = (sk_Loader *)o;
  memset(r, 0, sizeof *r);
  r->cpu0_ns = self->cpu0_ns;
  stoke_loader *l = sk_loader_get(self);
  if (!l || describe_source(self, r) < 0) return -1;
  r->spec.compute_label = "the Python loop";
  int rc = report_result_collect(l, &r->res);
  if (rc < 0) {
    sk_raise(rc, stoke_errmsg(l));
    return -1;
  }
  /* A Python dataset's source takes any index below a bound: its size is
  ** the dataset's length, which the package gives. */
  if (kind_is(self->spec, "dataset")) {
    size_t n = 0;
    if (sk_dict_size(self->spec, "length", &n) < 0) return -1;
    r->res.source_samples = n;
  }
  /* The accelerator's price per hour (gpu_price=, parsed by the package):
  ** the cost's money, as --gpu-price. */
  if (sk_dict_double(self->spec, "gpu_price_per_hour",
                     &r->spec.gpu_price_per_h) < 0)
    return -1;
  r->res.gpu_price_per_h = r->spec.gpu_price_per_h;
  r->spec.cfg = r->res.eff;
  r->spec.epochs = (unsigned)r->res.n_epochs;
  r->res.peak_rss_bytes = report_peak_rss_bytes();
  r->res.consumer_run_delay_ns = -1;
  return 0;
}

static int64_t process_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Cores the consumer's step burned while computing, measured: the
** process's CPU time since measuring began, less what stoke's producers
** used, over the computing clock.  A training step on the CPU (torch's
** threads included) reads about its thread count; a GPU step near 0. */
static double measured_consumer_cpu(int64_t cpu0_ns, const stoke_stats *st) {
  if (cpu0_ns < 0 || st->compute.total_ns <= 0) return 0.0;
  double used = (double)(process_cpu_ns() - cpu0_ns) -
                (double)st->worker_cpu_ns;
  double c = used / (double)st->compute.total_ns;
  return c < 0 ? 0.0 : c;
}

/* What diagnose(), report() and save_json() take besides the path:
** cores, consumer_cpu and, for a deadline (keywords only, together),
** train_epochs and deadline (seconds). */
typedef struct analysis_args {
  unsigned cores;
  PyObject *ccpu;
  unsigned train_epochs;
  int64_t deadline_ns;
  const stoke_advice_words *words; /* words=: "loader" or "dataloader" */
} analysis_args;

/* The profile's analysis of the run (NULL when there are no measured
** steps: then *why says so). */
static stoke_profile *analyse(sk_run *r, const analysis_args *a,
                              double *used_cpu) {
  PyObject *consumer_cpu = a->ccpu;
  if (!r->res.stats.steps) return NULL;
  double ccpu;
  if (consumer_cpu && consumer_cpu != Py_None) {
    ccpu = PyFloat_AsDouble(consumer_cpu);
    if (ccpu == -1.0 && PyErr_Occurred()) return NULL;
  } else {
    ccpu = measured_consumer_cpu(r->cpu0_ns, &r->res.stats);
  }
  *used_cpu = ccpu;
  stoke_profile *pr = PyMem_Calloc(1, sizeof *pr);
  if (!pr) {
    PyErr_NoMemory();
    return NULL;
  }
  stoke_profile_grid(pr, &r->res.eff, 1, 1);
  pr->train_epochs = a->train_epochs;
  pr->deadline_ns = a->deadline_ns;
  int rc = report_profile_analyse(&r->spec, &r->res, a->cores, ccpu, pr);
  if (rc < 0) {
    PyMem_Free(pr);
    sk_raise(rc, "the queue model could not be built from these clocks");
    return NULL;
  }
  return pr;
}

static PyObject *json_of(cJSON *o) {
  if (!o) return PyErr_NoMemory();
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  PyObject *r = sk_json_loads(text);
  free(text);
  return r;
}

/* The summary, with what `stoke bench --json` keeps beside it. */
static cJSON *summary_with_stages(const sk_run *r) {
  cJSON *s = report_summary_json(&r->res);
  if (s) {
    cJSON_AddItemToObject(s, "stages", report_stages_json(&r->res));
    cJSON_AddItemToObject(s, "bad_samples",
                          report_failures_json(&r->spec, &r->res));
    cJSON_AddItemToObject(s, "device", report_device_json(&r->res));
  }
  return s;
}

static PyObject *run_stats(PyObject *self, collect_fn collect) {
  sk_run r;
  if (collect(self, &r) < 0) {
    run_free(&r);
    return NULL;
  }
  PyObject *d = json_of(summary_with_stages(&r));
  run_free(&r);
  return d;
}

/* A deadline in seconds (the package turns "8h" into seconds:
** stoke._util.deadline_kw). */
static int parse_deadline(PyObject *o, int64_t *ns) {
  if (o == Py_None) return 0;
  double v = PyFloat_AsDouble(o);
  if (v == -1.0 && PyErr_Occurred()) return -1;
  if (!(v > 0 && v < 9.2e9)) {
    PyErr_Format(PyExc_ValueError,
                 "deadline: expected a positive number of seconds, got %R", o);
    return -1;
  }
  *ns = (int64_t)(v * 1e9);
  return 0;
}

static int parse_analysis_args(PyObject *args, PyObject *kw, analysis_args *a,
                               PyObject **path) {
  static char *with_path[] = {"path",  "cores",    "consumer_cpu",
                              "train_epochs", "deadline", "words", NULL};
  static char *without[] = {"cores", "consumer_cpu", "train_epochs",
                            "deadline", "words", NULL};
  PyObject *deadline = Py_None;
  const char *words = NULL;
  memset(a, 0, sizeof *a);
  a->ccpu = Py_None;
  int ok = path ? PyArg_ParseTupleAndKeywords(
                      args, kw, "O&|IO$IOz", with_path, PyUnicode_FSConverter,
                      path, &a->cores, &a->ccpu, &a->train_epochs, &deadline,
                      &words)
                : PyArg_ParseTupleAndKeywords(args, kw, "|IO$IOz", without,
                                              &a->cores, &a->ccpu,
                                              &a->train_epochs, &deadline,
                                              &words);
  if (!ok) return -1;
  if (sk_words_of(words, &a->words) < 0) {
    if (path) Py_CLEAR(*path);
    return -1;
  }
  if (parse_deadline(deadline, &a->deadline_ns) == 0 &&
      !a->train_epochs == !a->deadline_ns)
    return 0;
  if (!PyErr_Occurred())
    PyErr_SetString(PyExc_ValueError,
                    "train_epochs and deadline go together");
  if (path) Py_CLEAR(*path);
  return -1;
}

/* The "diagnosis" object, or a short one when nothing was measured; with
** out, the analysis too (the caller frees it with PyMem_Free). */
static cJSON *diagnosis(sk_run *r, const analysis_args *a,
                        stoke_profile **out) {
  double used = 0;
  stoke_profile *pr = analyse(r, a, &used);
  if (!pr && PyErr_Occurred()) return NULL;
  cJSON *d;
  if (pr) {
    d = report_diagnosis_json(a->words, &r->res, pr);
    if (d) cJSON_AddNumberToObject(d, "consumer_cpu", used);
    if (out)
      *out = pr;
    else
      PyMem_Free(pr);
  } else {
    d = cJSON_CreateObject();
    if (d) {
      cJSON_AddStringToObject(d, "verdict", "unknown");
      cJSON_AddStringToObject(
          d, "reason",
          r->res.n_epochs
              ? "unknown: no measured steps yet (the warm-up epochs are left "
                "out; pass warmup=0 to count the first one)"
              : "unknown: no epoch has run yet");
    }
  }
  /* The machine's other load beside the verdict: when it moved, the
  ** verdict's figures may have moved with it (as the CLI's note). */
  if (d) cJSON_AddItemToObject(d, "outside_load",
                               report_outside_json(&r->res.stats));
  if (!d) PyErr_NoMemory();
  return d;
}

static PyObject *run_diagnose(PyObject *self, collect_fn collect,
                              PyObject *args, PyObject *kw) {
  analysis_args a;
  if (parse_analysis_args(args, kw, &a, NULL) < 0) return NULL;
  sk_run r;
  if (collect(self, &r) < 0) {
    run_free(&r);
    return NULL;
  }
  stoke_profile *pr = NULL;
  cJSON *d = diagnosis(&r, &a, &pr);
  run_free(&r);
  PyObject *o = d ? json_of(d) : NULL;
  /* Each advice keeps its structure, to be worded again (text_for). */
  if (o && pr && sk_advice_wrap(o, pr->advice, pr->basis, pr->n_advice) < 0)
    Py_CLEAR(o);
  PyMem_Free(pr);
  return o;
}

/* Text written by fn into a memory stream. */
typedef void (*print_fn)(FILE *f, void *ctx);

static PyObject *text_of(print_fn fn, void *ctx) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return PyErr_NoMemory();
  fn(f, ctx);
  fclose(f);
  PyObject *s = PyUnicode_DecodeUTF8(buf, (Py_ssize_t)len, "replace");
  free(buf);
  return s;
}

typedef struct report_ctx {
  sk_run *run;
  stoke_profile *pr;
  const stoke_advice_words *words;
} report_ctx;

static void print_loader_report(FILE *f, void *p) {
  report_ctx *c = p;
  report_print_report(f, "loader", &c->run->spec, &c->run->res);
  if (c->pr)
    report_print_profile(f, c->words, &c->run->res, c->pr);
  else
    fprintf(f, "\nno measured steps yet: nothing to model (warm-up epochs "
               "are left out)\n");
}

static PyObject *run_report(PyObject *self, collect_fn collect,
                            PyObject *args, PyObject *kw) {
  analysis_args a;
  if (parse_analysis_args(args, kw, &a, NULL) < 0) return NULL;
  sk_run r;
  if (collect(self, &r) < 0) {
    run_free(&r);
    return NULL;
  }
  double used;
  report_ctx c = {&r, analyse(&r, &a, &used), a.words};
  PyObject *s = PyErr_Occurred() ? NULL : text_of(print_loader_report, &c);
  PyMem_Free(c.pr);
  run_free(&r);
  return s;
}

static PyObject *write_json_file(const char *path, cJSON *root) {
  char *text = root ? cJSON_Print(report_json_stamp(root)) : NULL;
  cJSON_Delete(root);
  if (!text) return PyErr_NoMemory();
  FILE *f = fopen(path, "w");
  int bad = !f;
  if (f) {
    bad = fputs(text, f) < 0 || fputc('\n', f) == EOF;
    bad |= fclose(f) != 0;
  }
  free(text);
  if (bad) return PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
  Py_RETURN_NONE;
}

static PyObject *run_save_json(PyObject *self, collect_fn collect,
                               PyObject *args, PyObject *kw) {
  analysis_args a;
  PyObject *path = NULL;
  if (parse_analysis_args(args, kw, &a, &path) < 0) return NULL;
  sk_run r;
  PyObject *res = NULL;
  if (collect(self, &r) == 0) {
    cJSON *d = diagnosis(&r, &a, NULL);
    cJSON *root = d ? report_run_json(&r.spec, &r.res) : NULL;
    if (root) {
      cJSON_AddItemToObject(root, "diagnosis", d);
      res = write_json_file(PyBytes_AS_STRING(path), root);
    } else {
      cJSON_Delete(d);
      if (!PyErr_Occurred()) PyErr_NoMemory();
    }
  }
  run_free(&r);
  Py_DECREF(path);
  return res;
}

PyObject *sk_loader_stats(sk_Loader *self, PyObject *noargs) {
  return run_stats((PyObject *)self, loader_collect);
}

PyObject *sk_loader_diagnose(sk_Loader *self, PyObject *args, PyObject *kw) {
  return run_diagnose((PyObject *)self, loader_collect, args, kw);
}

PyObject *sk_loader_report(sk_Loader *self, PyObject *args, PyObject *kw) {
  return run_report((PyObject *)self, loader_collect, args, kw);
}

PyObject *sk_loader_save_json(sk_Loader *self, PyObject *args, PyObject *kw) {
  return run_save_json((PyObject *)self, loader_collect, args, kw);
}

/* ---- a TwoClock's run --------------------------------------------------------- */

/* The result of a clock around someone else's loop: the consumer's side
** only.  info (a dict, may be empty) gives what the wrapper knows of the
** wrapped loader: name, batch_size, num_workers, prefetch. */
static int twoclock_collect(sk_TwoClock *self, sk_run *r) {
  memset(r, 0, sizeof *r);
  report_result *res = &r->res;
  res->stats.struct_size = sizeof res->stats;
  int rc = stoke_twoclock_stats(self->c, &res->stats);
  if (rc < 0) {
    sk_raise_tls(rc);
    return -1;
  }
  size_t nh = stoke_twoclock_wait_histogram(self->c, NULL, 0);
  res->wait_hist = calloc(nh ? nh : 1, sizeof *res->wait_hist);
  size_t ne = stoke_twoclock_n_epoch_stats(self->c);
  res->epochs = calloc(ne ? ne : 1, sizeof *res->epochs);
  if (!res->wait_hist || !res->epochs) {
    PyErr_NoMemory();
    return -1;
  }
  res->n_wait_hist = stoke_twoclock_wait_histogram(self->c, res->wait_hist, nh);
  if (res->n_wait_hist > nh) res->n_wait_hist = nh;
  for (size_t i = 0; i < ne; i++)
    if (stoke_twoclock_epoch_stats(self->c, i, &res->epochs[i]) == 0)
      res->n_epochs++;
  report_result_measure(res);
  stoke_diagnose(&res->stats, &res->diag);
  stoke_config_init(&res->eff);
  res->eff.n_workers = res->stats.n_workers;
  res->eff.prefetch = res->stats.prefetch;
  res->eff.batch_size = 0;
  const char *name = NULL;
  r->hold = sk_dict_str(self->info, "name", &name);
  if (!r->hold) return -1;
  size_t bs = 0;
  if (sk_dict_size(self->info, "batch_size", &bs) < 0) return -1;
  res->eff.batch_size = bs;
  r->spec.source_label = name ? name : "an iterable";
  r->spec.compute_label = "the Python loop";
  r->spec.cfg = res->eff;
  r->spec.epochs = (unsigned)res->n_epochs;
  res->n_batches = res->n_epochs ? res->epochs[res->n_epochs - 1].batches : 0;
  res->n_samples = res->n_epochs ? res->epochs[res->n_epochs - 1].samples : 0;
  res->source_samples = res->n_samples;
  snprintf(res->source_kind, sizeof res->source_kind, "twoclock");
  res->peak_rss_bytes = report_peak_rss_bytes();
  res->consumer_run_delay_ns = -1;
  return 0;
}

static const char twoclock_limits[] =
    "a two-clock measurement sees only the consumer: without the producer's "
    "stage clocks it cannot split the wait into read, decode and transform, "
    "see the ready queue (a step that waited over ready_wait counts as an "
    "empty queue), or predict other worker counts; stoke.Loader and "
    "stoke.DataLoader measure those";

static cJSON *twoclock_diagnosis(const report_result *res) {
  cJSON *o = report_verdict_json(&res->diag);
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "limits", twoclock_limits);
  cJSON_AddArrayToObject(o, "advice");
  cJSON_AddItemToObject(o, "outside_load", report_outside_json(&res->stats));
  return o;
}

PyObject *sk_twoclock_json(sk_TwoClock *self, int what) {
  sk_run r;
  PyObject *out = NULL;
  if (twoclock_collect(self, &r) == 0) {
    cJSON *o;
    if (what == SK_JSON_SUMMARY) {
      o = report_summary_json(&r.res);
    } else if (what == SK_JSON_DIAGNOSIS) {
      o = twoclock_diagnosis(&r.res);
    } else {
      o = report_json_stamp(cJSON_CreateObject());
      if (o) {
        cJSON_AddItemToObject(o, "config", report_config_json(&r.spec, &r.res));
        cJSON_AddItemToObject(o, "machine", report_machine_json());
        cJSON_AddItemToObject(o, "epochs", report_epochs_json(&r.res));
        cJSON_AddItemToObject(o, "summary", report_summary_json(&r.res));
        cJSON_AddItemToObject(o, "diagnosis", twoclock_diagnosis(&r.res));
      }
    }
    out = json_of(o);
  }
  run_free(&r);
  return out;
}

static void print_twoclock_report(FILE *f, void *p) {
  sk_run *r = p;
  char src[256];
  report_fmt_source(&r->spec, r->res.n_samples, src, sizeof src);
  fprintf(f, "stoke two clocks: %s", src);
  if (r->res.eff.batch_size) fprintf(f, ", batch %zu", r->res.eff.batch_size);
  if (r->res.eff.n_workers != STOKE_WORKERS_AUTO)
    fprintf(f, ", %u workers", r->res.eff.n_workers);
  fputc('\n', f);
  report_print_epochs(f, &r->res);
  report_print_summary(f, &r->res);
  report_print_verdict(f, "", &r->res.diag);
  fprintf(f, "  (%s)\n", twoclock_limits);
  report_outside_print(f, &r->res.stats);
}

PyObject *sk_twoclock_report(sk_TwoClock *self) {
  sk_run r;
  PyObject *s = NULL;
  if (twoclock_collect(self, &r) == 0) s = text_of(print_twoclock_report, &r);
  run_free(&r);
  return s;
}

/* train_epochs and deadline for a TwoClock: N epochs at the wrapped
** loader's configuration, from the measured epochs only (a TwoClock has no
** model, so no knee): (the diagnosis' "deadline" dict, the report's text).
*/
PyObject *sk_twoclock_deadline(sk_TwoClock *self, PyObject *args,
                               PyObject *kw) {
  static char *kwlist[] = {"train_epochs", "deadline", NULL};
  unsigned epochs = 0;
  PyObject *deadline = Py_None;
  int64_t deadline_ns = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "IO", kwlist, &epochs,
                                   &deadline) ||
      parse_deadline(deadline, &deadline_ns) < 0)
    return NULL;
  if (!epochs || !deadline_ns)
    return PyErr_Format(PyExc_ValueError,
                        "train_epochs and deadline go together");
  sk_run r;
  PyObject *out = NULL;
  if (twoclock_collect(self, &r) == 0) {
    stoke_deadline fit;
    if (report_deadline_measured(&r.res, epochs, deadline_ns, 0, &fit) < 0) {
      sk_raise(STOKE_EINVAL, "deadline: no measured epoch yet (the warm-up "
                             "epochs are left out)");
    } else {
      unsigned w = r.res.eff.n_workers == STOKE_WORKERS_AUTO
                       ? 0
                       : r.res.eff.n_workers;
      unsigned k = r.res.eff.prefetch ? r.res.eff.prefetch : 1;
      cJSON *o = cJSON_CreateObject();
      if (o) {
        cJSON_AddNumberToObject(o, "train_epochs", epochs);
        cJSON_AddNumberToObject(o, "deadline_s", (double)deadline_ns / 1e9);
        cJSON_AddItemToObject(o, "now", report_deadline_row_json(w, k, &fit));
      }
      char *buf = NULL;
      size_t len = 0;
      FILE *f = open_memstream(&buf, &len);
      if (f) {
        report_print_deadline_head(f, epochs, deadline_ns);
        report_print_deadline_row(f, &sk_loader_words, "now", w, k, epochs,
                                  &fit,
                               "measured epochs");
        fclose(f);
      }
      PyObject *d = json_of(o);
      PyObject *t = buf ? PyUnicode_DecodeUTF8(buf, (Py_ssize_t)len,
                                               "replace")
                        : PyErr_NoMemory();
      free(buf);
      if (d && t) out = PyTuple_Pack(2, d, t);
      Py_XDECREF(d);
      Py_XDECREF(t);
    }
  }
  run_free(&r);
  return out;
}

/* ---- worker processes' run ------------------------------------------------ */

/* stoke.DataLoader(worker_type="process"): a TwoClock that the iterator
** drives, with the workers' stages attached from shared memory, read as a
** loader's run: the configuration from its info (batch_size, num_workers,
** prefetch, label, length, gpu_price_per_hour), the queue model built from
** the stages, and then the same summary, diagnosis, text and file as a
** Loader's. */
static int procs_collect(PyObject *o, sk_run *r) {
  sk_TwoClock *self = (sk_TwoClock *)o;
  if (twoclock_collect(self, r) < 0) return -1;
  r->cpu0_ns = -1; /* the package gives consumer_cpu, measured per step */
  PyObject *name = r->hold;
  r->hold = PyList_New(0);
  if (!r->hold || PyList_Append(r->hold, name) < 0) {
    Py_DECREF(name);
    return -1;
  }
  Py_DECREF(name);
  const char *label = NULL;
  PyObject *lab = sk_dict_str(self->info, "label", &label);
  if (!lab || PyList_Append(r->hold, lab) < 0) {
    Py_XDECREF(lab);
    return -1;
  }
  Py_DECREF(lab);
  if (label) r->spec.source_label = label;
  report_result *res = &r->res;
  snprintf(res->source_kind, sizeof res->source_kind, "dataset");
  size_t n = 0;
  if (sk_dict_size(self->info, "length", &n) < 0) return -1;
  if (n) res->source_samples = n;
  if (sk_dict_size(self->info, "batches", &n) < 0) return -1;
  if (n) res->n_batches = n;
  if (sk_dict_double(self->info, "gpu_price_per_hour",
                     &r->spec.gpu_price_per_h) < 0)
    return -1;
  res->gpu_price_per_h = r->spec.gpu_price_per_h;
  res->eff.prefetch_next_epoch = 0; /* each epoch's order starts at iter() */
  r->spec.cfg = res->eff;
  if (res->stats.steps)
    stoke_model_init(&res->model, &res->stats, &res->eff, 0);
  return 0;
}

PyObject *sk_procs_stats(sk_TwoClock *self, PyObject *noargs) {
  return run_stats((PyObject *)self, procs_collect);
}

PyObject *sk_procs_diagnose(sk_TwoClock *self, PyObject *args, PyObject *kw) {
  return run_diagnose((PyObject *)self, procs_collect, args, kw);
}

PyObject *sk_procs_report(sk_TwoClock *self, PyObject *args, PyObject *kw) {
  return run_report((PyObject *)self, procs_collect, args, kw);
}

PyObject *sk_procs_save_json(sk_TwoClock *self, PyObject *args, PyObject *kw) {
  return run_save_json((PyObject *)self, procs_collect, args, kw);
}

/* ---- the HTML page (`stoke report`'s) ---------------------------------------------- */

PyObject *sk_render_report(PyObject *mod, PyObject *args) {
  PyObject *paths, *out;
  if (!PyArg_ParseTuple(args, "OO&", &paths, PyUnicode_FSConverter, &out))
    return NULL;
  PyObject *seq = PySequence_Fast(paths, "json_paths: a list of paths");
  if (!seq) {
    Py_DECREF(out);
    return NULL;
  }
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  const char **names = PyMem_Calloc((size_t)n + 1, sizeof *names);
  PyObject **held = PyMem_Calloc((size_t)n + 1, sizeof *held);
  PyObject *res = NULL;
  int ok = names && held;
  if (!ok)
    PyErr_NoMemory();
  for (Py_ssize_t i = 0; ok && i < n; i++) {
    if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(seq, i), &held[i]))
      ok = 0;
    else
      names[i] = PyBytes_AS_STRING(held[i]);
  }
  if (ok) {
    report_err e;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = report_html_write(names, (size_t)n, PyBytes_AS_STRING(out), &e);
    Py_END_ALLOW_THREADS
    if (rc == 0)
      res = Py_NewRef(Py_None);
    else
      sk_raise(STOKE_EIO, e.msg);
  }
  for (Py_ssize_t i = 0; held && i < n; i++) Py_XDECREF(held[i]);
  PyMem_Free(held);
  PyMem_Free(names);
  Py_DECREF(seq);
  Py_DECREF(out);
  return res;
}
