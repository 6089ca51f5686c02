/* tune.c — stoke._stoke.tune: stoke_tune_sweep with the consumer's step in
** Python (a callable given each batch) or synthetic (sleep or spin), and
** the knee as `stoke tune --json` writes it.
**
** The sweep runs with the GIL released; a Python step takes it for its
** call.  The batch is lent for the call only (the sweep releases it after
** the step): a step that keeps it, or raises, stops the sweep, and the
** error is raised when it returns.  Ctrl-C is checked between points. */
#define _POSIX_C_SOURCE 200809L
#include "ext.h"
#include "dataset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report.h"

typedef struct tune_ctx {
  PyObject *step;          /* a callable, or NULL */
  int kind;                /* else REPORT_COMPUTE_* */
  int64_t ns;
  sk_output out;
  PyObject *progress;      /* callable(i, n, point) or NULL */
  PyObject *dataset;       /* a Python dataset's spec: the step gets its
                              collated batch, not the slot */
  volatile int cancel;
  PyObject *exc_type, *exc_value, *exc_tb; /* the first Python error */
  int kept;                /* a step kept its batch */
} tune_ctx;

/* The io_concurrency sweep's sources: the spec again with another
** io_concurrency (on the sweep's thread: the GIL is taken here).  Each
** source's keep is held until the sweep ends, one a point (a URL spec
** keeps nothing: its bytes are the server's). */
typedef struct io_make {
  PyObject *spec;
  sk_keep *keeps;  /* cap_keeps: the sweep's points at most */
  size_t n_keeps, cap_keeps;
} io_make;

static int io_source(void *user, unsigned io, stoke_source **out) {
  io_make *m = user;
  *out = NULL;
  PyGILState_STATE g = PyGILState_Ensure();
  int rc = STOKE_ENOMEM;
  PyObject *spec = PyDict_Copy(m->spec);
  PyObject *v = PyLong_FromUnsignedLong(io);
  if (spec && v && PyDict_SetItemString(spec, "io_concurrency", v) == 0 &&
      m->n_keeps < m->cap_keeps) {
    sk_keep *k = &m->keeps[m->n_keeps];
    memset(k, 0, sizeof *k);
    if (sk_source_from_spec(spec, out, k) == 0) {
      m->n_keeps++;
      rc = 0;
    } else {
      PyErr_Clear(); /* the library's message is set for the sweep */
      rc = STOKE_EINVAL;
    }
  }
  if (rc == STOKE_ENOMEM) PyErr_Clear();
  Py_XDECREF(v);
  Py_XDECREF(spec);
  PyGILState_Release(g);
  return rc;
}

/* After the worker knee k of a remote run: io_concurrency swept at it
** (values, or the ladder when NULL), into root's "io_sweep" as `stoke tune
** --json` writes it: the points and the io knee.  Nothing for a run that
** read nothing remote (k's io_concurrency 0).  0, or -1 with a Python
** error. */
static int io_sweep_json(cJSON *root, PyObject *spec, const stoke_tune_config *tc,
                         const stoke_tune_point *k, const unsigned *values,
                         size_t n_values, int have_consumer) {
  if (!k->io_concurrency) return 0;
  io_make m = {.spec = spec};
  stoke_tune_io_config c;
  stoke_tune_io_config_init(&c);
  c.tune = tc;
  c.n_workers = k->n_workers;
  c.prefetch = k->prefetch;
  c.batch_size = k->batch_size;
  c.values = values;
  c.n_values = n_values;
  c.source = io_source;
  c.source_user = &m;
  size_t cap = stoke_tune_io_bound(&c), n = 0;
  stoke_tune_point *pts = cap ? PyMem_Calloc(cap, sizeof *pts) : NULL;
  m.keeps = cap ? PyMem_Calloc(cap, sizeof *m.keeps) : NULL;
  m.cap_keeps = cap;
  if (!pts || !m.keeps) {
    PyMem_Free(pts);
    PyMem_Free(m.keeps);
    PyErr_NoMemory();
    return -1;
  }
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = stoke_tune_io_sweep(&c, pts, cap, &n);
  Py_END_ALLOW_THREADS
  for (size_t i = 0; i < m.n_keeps; i++) sk_keep_release(&m.keeps[i]);
  PyMem_Free(m.keeps);
  if (rc < 0) {
    PyMem_Free(pts);
    sk_raise_tls(rc);
    return -1;
  }
  cJSON *o = cJSON_AddObjectToObject(root, "io_sweep");
  cJSON *arr = o ? cJSON_AddArrayToObject(o, "points") : NULL;
  for (size_t i = 0; arr && i < n; i++)
    cJSON_AddItemToArray(arr, report_tune_point_json(&pts[i]));
  stoke_tune_knee knee;
  if (o && n && stoke_tune_io_knee_find(pts, n, tc->tolerance, have_consumer,
                                        &knee) == 0)
    cJSON_AddItemToObject(o, "knee", report_tune_knee_json(pts, &knee, 0));
  else if (o)
    cJSON_AddNullToObject(o, "knee");
  PyMem_Free(pts);
  return 0;
}

static void keep_error(tune_ctx *t) {
  if (!t->exc_type) PyErr_Fetch(&t->exc_type, &t->exc_value, &t->exc_tb);
  else PyErr_Clear();
  t->cancel = 1;
}

static void on_step(void *user, stoke_batch *b) {
  tune_ctx *t = user;
  if (!t->step) {
    stoke_step_simulate(t->kind == REPORT_COMPUTE_SPIN    ? STOKE_STEP_SPIN
                        : t->kind == REPORT_COMPUTE_SLEEP ? STOKE_STEP_SLEEP
                                                          : STOKE_STEP_NONE,
                        t->ns);
    return;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  if (!t->cancel && t->dataset) {
    /* A Python dataset's batch lives in tensors of its own. */
    PyObject *batch = sk_dataset_result(t->dataset, b);
    PyObject *res = batch ? PyObject_CallOneArg(t->step, batch) : NULL;
    Py_XDECREF(batch);
    if (!res) keep_error(t);
    Py_XDECREF(res);
  } else if (!t->cancel) {
    sk_bref *r = sk_bref_borrow(b);
    if (r) sk_bref_incref(r); /* ours, to see what the step kept */
    PyObject *batch = r ? sk_deliver(r, &t->out) : NULL;
    PyObject *res = batch ? PyObject_CallOneArg(t->step, batch) : NULL;
    Py_XDECREF(batch);
    if (!res) keep_error(t);
    Py_XDECREF(res);
    if (r && atomic_load(&r->refs) > 1 && !t->exc_type) {
      t->kept = 1;
      PyErr_SetString(sk_err.Error,
                      "the tune step kept a reference to its batch: the "
                      "batch is lent for the call only (copy what you keep)");
      keep_error(t);
    }
    sk_bref_decref(r);
  }
  PyGILState_Release(g);
}

static int on_progress(void *user, size_t i, size_t n,
                       const stoke_tune_point *p) {
  tune_ctx *t = user;
  PyGILState_STATE g = PyGILState_Ensure();
  if (!t->cancel && PyErr_CheckSignals() < 0) keep_error(t);
  if (!t->cancel && t->progress) {
    cJSON *o = report_tune_point_json(p);
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    PyObject *d = sk_json_loads(text);
    free(text);
    PyObject *r = d ? PyObject_CallFunction(t->progress, "nnO", (Py_ssize_t)i,
                                            (Py_ssize_t)n, d)
                    : NULL;
    Py_XDECREF(d);
    if (!r) keep_error(t);
    Py_XDECREF(r);
  }
  int stop = t->cancel;
  PyGILState_Release(g);
  return stop;
}

/* A list of unsigned / size_t from a Python sequence (None: *n = 0). */
static int uint_list(PyObject *seq, unsigned **out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (!seq || seq == Py_None) return 0;
  PyObject *f = PySequence_Fast(seq, "expected a list of integers");
  if (!f) return -1;
  Py_ssize_t k = PySequence_Fast_GET_SIZE(f);
  *out = PyMem_Calloc((size_t)k + 1, sizeof **out);
  for (Py_ssize_t i = 0; *out && i < k; i++) {
    unsigned long v = PyLong_AsUnsignedLong(PySequence_Fast_GET_ITEM(f, i));
    if (v == (unsigned long)-1 && PyErr_Occurred()) {
      Py_DECREF(f);
      return -1;
    }
    (*out)[i] = (unsigned)v;
  }
  Py_DECREF(f);
  if (!*out) {
    PyErr_NoMemory();
    return -1;
  }
  *n = (size_t)k;
  return 0;
}

PyObject *sk_tune(PyObject *mod, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"source", "config", "tune", "step", "output",
                           "layout", "names", "to_torch", "to_numpy",
                           "progress", NULL};
  PyObject *spec, *config, *tune, *step, *names, *to_torch = Py_None,
           *to_numpy = Py_None, *progress = Py_None;
  int output, layout;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!O!OiiO!|OOO", kwlist,
                                   &PyDict_Type, &spec, &PyDict_Type, &config,
                                   &PyDict_Type, &tune, &step, &output,
                                   &layout, &PyTuple_Type, &names, &to_torch,
                                   &to_numpy, &progress))
    return NULL;
  tune_ctx t;
  memset(&t, 0, sizeof t);
  if (PyCallable_Check(step)) {
    t.step = step;
  } else if (PyTuple_Check(step) && PyTuple_GET_SIZE(step) == 2) {
    const char *k = PyUnicode_AsUTF8(PyTuple_GET_ITEM(step, 0));
    t.ns = PyLong_AsLongLong(PyTuple_GET_ITEM(step, 1));
    if (!k || (t.ns == -1 && PyErr_Occurred())) return NULL;
    t.kind = strcmp(k, "spin") == 0 ? REPORT_COMPUTE_SPIN
             : strcmp(k, "sleep") == 0 ? REPORT_COMPUTE_SLEEP
                                       : REPORT_COMPUTE_NONE;
  } else if (step != Py_None) {
    PyErr_SetString(PyExc_TypeError,
                    "step: a callable, (\"sleep\"|\"spin\", ns) or None");
    return NULL;
  }
  t.out.mode = output;
  t.out.layout = layout;
  t.out.names = names;
  t.out.to_torch = to_torch == Py_None ? NULL : to_torch;
  t.out.to_numpy = to_numpy == Py_None ? NULL : to_numpy;
  t.progress = progress == Py_None ? NULL : progress;
  PyObject *kind = PyDict_GetItemString(spec, "kind");
  if (kind && PyUnicode_Check(kind) &&
      PyUnicode_CompareWithASCIIString(kind, "dataset") == 0)
    t.dataset = spec;

  stoke_tune_config tc;
  stoke_tune_config_init(&tc);
  if (sk_config_from_dict(config, &tc.base) < 0) return NULL;
  unsigned *ws = NULL, *ks = NULL, *bs32 = NULL;
  size_t nw, nk, nb;
  double min_s = 0;
  PyObject *result = NULL;
  stoke_source *src = NULL;
  sk_keep keep = {0};
  stoke_tune_point *pts = NULL;
  size_t *bs = NULL;
  if (uint_list(PyDict_GetItemString(tune, "workers"), &ws, &nw) < 0 ||
      uint_list(PyDict_GetItemString(tune, "prefetch"), &ks, &nk) < 0 ||
      uint_list(PyDict_GetItemString(tune, "batch_sizes"), &bs32, &nb) < 0 ||
      sk_dict_uint(tune, "max_workers", &tc.max_workers) < 0 ||
      sk_dict_uint(tune, "warmup_epochs", &tc.warmup_epochs) < 0 ||
      sk_dict_uint(tune, "min_epochs", &tc.min_epochs) < 0 ||
      sk_dict_double(tune, "min_measure_s", &min_s) < 0)
    goto out;
  if (nb) {
    bs = PyMem_Calloc(nb, sizeof *bs);
    if (!bs) {
      PyErr_NoMemory();
      goto out;
    }
    for (size_t i = 0; i < nb; i++) bs[i] = bs32[i];
  }
  tc.workers = ws;
  tc.n_workers = nw;
  tc.prefetch = ks;
  tc.n_prefetch = nk;
  tc.batch_sizes = bs;
  tc.n_batch_sizes = nb;
  tc.min_measure_ns = (int64_t)(min_s * 1e9);
  tc.step = on_step;
  tc.step_user = &t;
  tc.progress = on_progress;
  tc.progress_user = &t;
  tc.cancel = &t.cancel;
  if (sk_source_from_spec(spec, &src, &keep) < 0) goto out;
  tc.base.source = src;
  size_t n = 0;
  int rc = stoke_tune_grid(&tc, NULL, 0, &n);
  if (rc != 0 || n == 0) {
    sk_raise_tls(rc ? rc : STOKE_EINVAL);
    goto out;
  }
  pts = PyMem_Calloc(n, sizeof *pts);
  if (!pts) {
    PyErr_NoMemory();
    goto out;
  }
  size_t done = 0;
  Py_BEGIN_ALLOW_THREADS
  rc = stoke_tune_grid(&tc, pts, n, &n);
  if (rc == 0) rc = stoke_tune_sweep(&tc, pts, n, &done);
  Py_END_ALLOW_THREADS
  if (t.exc_type) {
    PyErr_Restore(t.exc_type, t.exc_value, t.exc_tb);
    t.exc_type = NULL;
    goto out;
  }
  if (rc != 0) {
    sk_raise_tls(rc);
    goto out;
  }
  cJSON *root = cJSON_CreateObject();
  cJSON *arr = root ? cJSON_AddArrayToObject(root, "points") : NULL;
  for (size_t i = 0; arr && i < n; i++)
    cJSON_AddItemToArray(arr, report_tune_point_json(&pts[i]));
  stoke_tune_knee knee;
  int have_consumer = t.step || t.kind != REPORT_COMPUTE_NONE;
  bool have_knee = root && stoke_tune_knee_find(pts, n, STOKE_TUNE_TOLERANCE,
                                                have_consumer, &knee) == 0;
  if (have_knee)
    cJSON_AddItemToObject(root, "knee",
                          report_tune_knee_json(pts, &knee, nb > 1));
  else if (root)
    cJSON_AddNullToObject(root, "knee");
  /* Remote packed shards: io_concurrency as its own dimension, at the
  ** worker knee (docs/tuning.md), unless io_sweep is "off". */
  PyObject *io_off = PyDict_GetItemString(tune, "io_off");
  if (have_knee && !t.dataset && !(io_off && PyObject_IsTrue(io_off))) {
    unsigned *ios = NULL;
    size_t nio = 0;
    int bad = uint_list(PyDict_GetItemString(tune, "io_sweep"), &ios, &nio) < 0 ||
              io_sweep_json(root, spec, &tc, &pts[knee.index], ios, nio,
                            have_consumer) < 0;
    PyMem_Free(ios);
    if (bad) {
      cJSON_Delete(root);
      goto out;
    }
  }
  if (root) cJSON_AddNumberToObject(root, "tolerance", STOKE_TUNE_TOLERANCE);
  char *text = root ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  result = sk_json_loads(text);
  free(text);
out:
  if (t.exc_type) PyErr_Restore(t.exc_type, t.exc_value, t.exc_tb);
  stoke_source_destroy(src);
  sk_keep_release(&keep);
  PyMem_Free(pts);
  PyMem_Free(bs);
  PyMem_Free(ws);
  PyMem_Free(ks);
  PyMem_Free(bs32);
  return result;
}
