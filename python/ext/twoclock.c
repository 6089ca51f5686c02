/* twoclock.c — stoke._stoke.TwoClock: the two clocks around any iterable.
**
** Iterating a TwoClock iterates what it wraps, one epoch per iter().  Each
** __next__ reads the clocks in C around the wrapped iterator's next: the
** wait is the time inside it, the compute the time from its return to the
** following call (after the optional sync callable, so that a GPU step is
** finished before its clock is read).  The cost is two clock reads, a
** histogram update and the wrapped call: well under a microsecond (bench/
** measures it).  The statistics are the library's stoke_twoclock; the
** package's TwoClock (python/stoke/twoclock.py) adds the reports. */
#include "ext.h"

#include <string.h>

static int twoclock_init(sk_TwoClock *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"iterable",    "sync",          "warmup",
                           "warmup_steps", "ready_wait",    "num_workers",
                           "prefetch",    "round_steps",   "trace",
                           "info",        "count_samples", "warmup_end_steps",
                           "warmup_end",  "metrics_file", "metrics_every",
                           "log_jsonl",   "log_every",     "rank", NULL};
  PyObject *iterable, *sync = Py_None, *info = Py_None;
  unsigned warmup = 1, workers = STOKE_WORKERS_AUTO, prefetch = 0, round = 0;
  Py_ssize_t warmup_steps = 0, trace = 0;
  Py_ssize_t end_steps = STOKE_WARMUP_END_STEPS;
  double ready_wait = 2e-3, end_s = (double)STOKE_WARMUP_END_NS / 1e9;
  int count = 1;
  const char *metrics = NULL, *jsonl = NULL;
  double metrics_every = 0;
  Py_ssize_t log_every = 0;
  unsigned rank = 0;
  if (!PyArg_ParseTupleAndKeywords(
          args, kw, "O|$OIndIIInOpndzdznI", kwlist, &iterable, &sync, &warmup,
          &warmup_steps, &ready_wait, &workers, &prefetch, &round, &trace,
          &info, &count, &end_steps, &end_s, &metrics, &metrics_every, &jsonl,
          &log_every, &rank))
    return -1;
  if (!(metrics_every >= 0) || log_every < 0) {
    PyErr_SetString(PyExc_ValueError,
                    "metrics_every and log_every must be >= 0");
    return -1;
  }
  if (end_steps < 0 || !(end_s >= 0)) {
    PyErr_SetString(PyExc_ValueError,
                    "warmup_end_steps and warmup_end must be >= 0");
    return -1;
  }
  if (sync != Py_None && !PyCallable_Check(sync)) {
    PyErr_SetString(PyExc_TypeError, "sync must be callable or None");
    return -1;
  }
  if (warmup_steps < 0 || trace < 0 || ready_wait < 0) {
    PyErr_SetString(PyExc_ValueError,
                    "warmup_steps, trace and ready_wait must be >= 0");
    return -1;
  }
  if (self->c) {
    PyErr_SetString(sk_err.Error, "the clock is already initialised");
    return -1;
  }
  stoke_twoclock_config cfg;
  stoke_twoclock_config_init(&cfg);
  cfg.warmup_epochs = warmup;
  cfg.warmup_steps = (size_t)warmup_steps;
  cfg.warmup_end_steps = (size_t)end_steps;
  cfg.warmup_end_ns = (int64_t)(end_s * 1e9);
  cfg.metrics_path = metrics;
  cfg.metrics_every_ns = (int64_t)(metrics_every * 1e9);
  cfg.log_jsonl_path = jsonl;
  cfg.log_every_steps = (size_t)log_every;
  cfg.rank = rank;
  if (info != Py_None && PyDict_Check(info)) {
    PyObject *name = PyDict_GetItemString(info, "name"); /* borrowed */
    if (name && PyUnicode_Check(name))
      cfg.metrics_loader = PyUnicode_AsUTF8(name); /* copied at create */
  }  cfg.ready_wait_ns = (int64_t)(ready_wait * 1e9);
  cfg.n_workers = workers;
  cfg.prefetch = prefetch;
  cfg.round_steps = round;
  cfg.trace_events = (size_t)trace;
  int rc = stoke_twoclock_create(&cfg, &self->c);
  if (rc != 0) {
    sk_raise_tls(rc);
    return -1;
  }
  self->iterable = Py_NewRef(iterable);
  self->sync = sync == Py_None ? NULL : Py_NewRef(sync);
  self->info = info == Py_None ? PyDict_New() : Py_NewRef(info);
  if (!self->info) return -1;
  self->count_samples = count;
  return 0;
}

static void twoclock_dealloc(sk_TwoClock *self) {
  PyObject_GC_UnTrack(self);
  if (self->weakrefs) PyObject_ClearWeakRefs((PyObject *)self);
  Py_CLEAR(self->iterable);
  Py_CLEAR(self->it);
  Py_CLEAR(self->sync);
  Py_CLEAR(self->info);
  stoke_twoclock_destroy(self->c);
  if (self->has_stages) PyBuffer_Release(&self->stages); /* after: borrowed */
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int twoclock_traverse(sk_TwoClock *self, visitproc visit, void *arg) {
  Py_VISIT(self->iterable);
  Py_VISIT(self->it);
  Py_VISIT(self->sync);
  Py_VISIT(self->info);
  return 0;
}

static int twoclock_clear(sk_TwoClock *self) {
  Py_CLEAR(self->iterable);
  Py_CLEAR(self->it);
  Py_CLEAR(self->sync);
  Py_CLEAR(self->info);
  return 0;
}

static int ready(sk_TwoClock *self) {
  if (self->c && self->iterable) return 1;
  PyErr_SetString(sk_err.Error, "the clock is not initialised");
  return 0;
}

/* A step's wait starts: the caller's sync (the compute before it is done
** on the device too), then the clock.  -1 with the sync's exception. */
static int enter(sk_TwoClock *self) {
  if (self->sync) {
    PyObject *r = PyObject_CallNoArgs(self->sync);
    if (!r) return -1;
    Py_DECREF(r);
  }
  stoke_twoclock_enter(self->c);
  return 0;
}

/* Each iter() is an epoch; one left early is recorded as it was.  The
** wrapped iterable's iter() is part of the epoch's first wait: a torch
** DataLoader starts its worker processes there (every epoch, unless
** persistent_workers), and a training loop's `for` line waits for that as
** for any batch.  Timed from outside the clock, it was neither waiting nor
** computing, and the epoch began after it. */
static PyObject *twoclock_iter(sk_TwoClock *self) {
  if (!ready(self)) return NULL;
  if (self->it) {
    stoke_twoclock_end_epoch(self->c);
    Py_CLEAR(self->it);
  }
  if (enter(self) < 0) return NULL;
  self->entered = 1;
  self->it = PyObject_GetIter(self->iterable);
  if (!self->it) return NULL; /* the next iter() enters again */
  return Py_NewRef(self);
}

/* Samples in a batch: the length of its first field (a tuple or list of
** tensors, a dict, or one tensor); 0 when it has none.  One C call for a
** tensor (its mapping length). */
static size_t batch_len(PyObject *item) {
  PyObject *first = item;
  if (PyTuple_Check(item) && PyTuple_GET_SIZE(item) > 0)
    first = PyTuple_GET_ITEM(item, 0);
  else if (PyList_Check(item) && PyList_GET_SIZE(item) > 0)
    first = PyList_GET_ITEM(item, 0);
  else if (PyDict_Check(item) && PyDict_GET_SIZE(item) > 0) {
    Py_ssize_t pos = 0;
    PyObject *k;
    PyDict_Next(item, &pos, &k, &first);
  }
  Py_ssize_t n = PyObject_Length(first);
  if (n < 0) {
    PyErr_Clear();
    return 0;
  }
  return (size_t)n;
}

static PyObject *twoclock_next(sk_TwoClock *self) {
  if (!self->it) {
    /* next() on the clock without iter(): start an epoch, as a for loop
    ** over the clock would. */
    PyObject *me = twoclock_iter(self);
    if (!me) return NULL;
    Py_DECREF(me);
  }
  if (self->entered)
    self->entered = 0; /* iter() started this step's wait */
  else if (enter(self) < 0)
    return NULL;
  PyObject *item = PyIter_Next(self->it);
  if (!item) {
    stoke_twoclock_end_epoch(self->c);
    Py_CLEAR(self->it);
    return NULL; /* StopIteration, or the wrapped iterator's exception */
  }
  stoke_twoclock_leave(self->c, self->count_samples ? batch_len(item) : 0);
  return item;
}

static PyObject *twoclock_end_epoch(sk_TwoClock *self, PyObject *noargs) {
  if (!ready(self)) return NULL;
  stoke_twoclock_end_epoch(self->c);
  Py_CLEAR(self->it);
  self->entered = 0;
  Py_RETURN_NONE;
}

/* _record(wait_ns, compute_ns, n_samples): a step timed by another clock
** (CUDA events: stoke.TwoClock(sync="cuda")). */
static PyObject *twoclock_record(sk_TwoClock *self, PyObject *args) {
  long long w, c;
  Py_ssize_t n = 0;
  if (!ready(self) || !PyArg_ParseTuple(args, "LL|n", &w, &c, &n)) return NULL;
  int rc = stoke_twoclock_record(self->c, w, c, n < 0 ? 0 : (size_t)n);
  if (rc != 0) return sk_raise(rc, "a step's times must not be negative");
  Py_RETURN_NONE;
}

/* _attach_stages(buf, processes): the producers' stages come from the
** stage block in buf (shared memory the worker processes write); the
** buffer is held until the clock goes or another is attached. */
static PyObject *twoclock_attach_stages(sk_TwoClock *self, PyObject *args) {
  PyObject *buf;
  int processes = 1;
  if (!ready(self) || !PyArg_ParseTuple(args, "O|p", &buf, &processes))
    return NULL;
  Py_buffer view;
  if (PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
    return NULL;
  int rc = stoke_twoclock_attach_stages(self->c, view.buf, processes);
  if (rc != 0) {
    PyBuffer_Release(&view);
    return sk_raise(rc, "not a stage block (stage_block_init makes one)");
  }
  if (self->has_stages) PyBuffer_Release(&self->stages);
  self->stages = view;
  self->has_stages = 1;
  Py_RETURN_NONE;
}

/* _enter() and _leave(n_samples, depth=-1): the clock driven by hand, by
** an iterator that is not the wrapped one (process mode's); depth >= 0 is
** the ready queue that step found. */
static PyObject *twoclock_enter_m(sk_TwoClock *self, PyObject *noargs) {
  if (!ready(self)) return NULL;
  /* The timestamp (CLOCK_MONOTONIC ns): process mode lines its workers'
  ** trace tracks up with the consumer's spans by it. */
  return PyLong_FromLongLong((long long)stoke_twoclock_enter(self->c));
}

static PyObject *twoclock_leave_m(sk_TwoClock *self, PyObject *args) {
  Py_ssize_t n = 0, depth = -1;
  if (!ready(self) || !PyArg_ParseTuple(args, "n|n", &n, &depth)) return NULL;
  if (depth >= 0) stoke_twoclock_depth(self->c, (size_t)depth);
  stoke_twoclock_leave(self->c, n < 0 ? 0 : (size_t)n);
  Py_RETURN_NONE;
}

static PyObject *twoclock_pstats(sk_TwoClock *self, PyObject *noargs) {
  return ready(self) ? sk_procs_stats(self, noargs) : NULL;
}

static PyObject *twoclock_pdiagnose(sk_TwoClock *self, PyObject *args,
                                    PyObject *kw) {
  return ready(self) ? sk_procs_diagnose(self, args, kw) : NULL;
}

static PyObject *twoclock_preport(sk_TwoClock *self, PyObject *args,
                                  PyObject *kw) {
  return ready(self) ? sk_procs_report(self, args, kw) : NULL;
}

static PyObject *twoclock_psave_json(sk_TwoClock *self, PyObject *args,
                                     PyObject *kw) {
  return ready(self) ? sk_procs_save_json(self, args, kw) : NULL;
}

/* The samples in a batch, as __next__ counts them. */
static PyObject *twoclock_batch_len(PyObject *mod, PyObject *item) {
  return PyLong_FromSize_t(batch_len(item));
}

/* The measured steps so far, for a watcher that stops at N of them (the
** doctor's --steps): a counter read, not a snapshot. */
static PyObject *twoclock_measured_steps(sk_TwoClock *self, PyObject *noargs) {
  if (!ready(self)) return NULL;
  return PyLong_FromUnsignedLongLong(stoke_twoclock_measured_steps(self->c));
}

/* The loop asked for a step it will not get (the doctor ends the script
** there): the last step's compute ends now, as at any next(), and no wait
** is counted. */
static PyObject *twoclock_close_step(sk_TwoClock *self, PyObject *noargs) {
  if (!ready(self)) return NULL;
  stoke_twoclock_enter(self->c);
  Py_RETURN_NONE;
}

static PyObject *twoclock_summary(sk_TwoClock *self, PyObject *noargs) {
  return ready(self) ? sk_twoclock_json(self, SK_JSON_SUMMARY) : NULL;
}

static PyObject *twoclock_document(sk_TwoClock *self, PyObject *noargs) {
  return ready(self) ? sk_twoclock_json(self, SK_JSON_DOCUMENT) : NULL;
}

static PyObject *twoclock_diagnosis(sk_TwoClock *self, PyObject *noargs) {
  return ready(self) ? sk_twoclock_json(self, SK_JSON_DIAGNOSIS) : NULL;
}

static PyObject *twoclock_report(sk_TwoClock *self, PyObject *noargs) {
  return ready(self) ? sk_twoclock_report(self) : NULL;
}

static PyObject *twoclock_deadline(sk_TwoClock *self, PyObject *args,
                                   PyObject *kw) {
  return ready(self) ? sk_twoclock_deadline(self, args, kw) : NULL;
}

static PyObject *twoclock_save_trace(sk_TwoClock *self, PyObject *arg) {
  if (!ready(self)) return NULL;
  PyObject *bytes;
  if (!PyUnicode_FSConverter(arg, &bytes)) return NULL;
  int rc = stoke_twoclock_write_trace(self->c, PyBytes_AS_STRING(bytes));
  Py_DECREF(bytes);
  if (rc == STOKE_EINVAL)
    return sk_raise(rc, "tracing is off: create the TwoClock with trace=N "
                        "(spans kept)");
  if (rc != 0) return sk_raise_tls(rc);
  Py_RETURN_NONE;
}

static PyObject *twoclock_get_info(sk_TwoClock *self, void *c) {
  return Py_NewRef(self->info ? self->info : Py_None);
}

static PyObject *twoclock_get_wrapped(sk_TwoClock *self, void *c) {
  return Py_NewRef(self->iterable ? self->iterable : Py_None);
}

static PyMethodDef twoclock_methods[] = {
    {"end_epoch", (PyCFunction)twoclock_end_epoch, METH_NOARGS,
     "Record the epoch in progress now (iter() does it after a break)."},
    {"_record", (PyCFunction)twoclock_record, METH_VARARGS, NULL},
    {"_attach_stages", (PyCFunction)twoclock_attach_stages, METH_VARARGS,
     NULL},
    {"_enter", (PyCFunction)twoclock_enter_m, METH_NOARGS, NULL},
    {"_leave", (PyCFunction)twoclock_leave_m, METH_VARARGS, NULL},
    {"_procs_stats", (PyCFunction)twoclock_pstats, METH_NOARGS, NULL},
    {"_procs_diagnose", (PyCFunction)(void (*)(void))twoclock_pdiagnose,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"_procs_report", (PyCFunction)(void (*)(void))twoclock_preport,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"_procs_save_json", (PyCFunction)(void (*)(void))twoclock_psave_json,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"_batch_len", (PyCFunction)twoclock_batch_len, METH_O | METH_STATIC,
     NULL},
    {"_summary", (PyCFunction)twoclock_summary, METH_NOARGS, NULL},
    {"_measured_steps", (PyCFunction)twoclock_measured_steps, METH_NOARGS,
     NULL},
    {"_close_step", (PyCFunction)twoclock_close_step, METH_NOARGS, NULL},
    {"_document", (PyCFunction)twoclock_document, METH_NOARGS, NULL},
    {"_diagnosis", (PyCFunction)twoclock_diagnosis, METH_NOARGS, NULL},
    {"_report", (PyCFunction)twoclock_report, METH_NOARGS, NULL},
    {"_deadline", (PyCFunction)(void (*)(void))twoclock_deadline,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"save_trace", (PyCFunction)twoclock_save_trace, METH_O,
     "save_trace(path): a Perfetto trace of the wait and compute spans."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef twoclock_getset[] = {
    {"info", (getter)twoclock_get_info, NULL,
     "what is known of the wrapped loader", NULL},
    {"wrapped", (getter)twoclock_get_wrapped, NULL, "the wrapped iterable",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject sk_TwoClockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stoke._stoke.TwoClock",
    .tp_basicsize = sizeof(sk_TwoClock),
    .tp_dealloc = (destructor)twoclock_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The two clocks in C.  Use stoke.TwoClock.",
    .tp_traverse = (traverseproc)twoclock_traverse,
    .tp_clear = (inquiry)twoclock_clear,
    .tp_weaklistoffset = offsetof(sk_TwoClock, weakrefs),
    .tp_iter = (getiterfunc)twoclock_iter,
    .tp_iternext = (iternextfunc)twoclock_next,
    .tp_methods = twoclock_methods,
    .tp_getset = twoclock_getset,
    .tp_init = (initproc)twoclock_init,
    .tp_new = PyType_GenericNew,
};
