/* loader.c — stoke._stoke.Loader: a stoke_loader driven from Python.
**
** Iterating the loader is one epoch: iter(loader) gives the epoch's
** iterator (ending the one a `break` left behind), its next() hands out
** batches, the end raises StopIteration.  next() releases the GIL and waits in 50 ms slices
** (stoke_loader_next_timed), checking for signals between them, so Ctrl-C
** raises KeyboardInterrupt promptly and the step's wait is still counted
** once; with workers a batch already made is taken without letting the
** GIL go.  A loader is unusable in a child after fork(): its threads did not
** survive it.  The stoke package's Loader (python/stoke/loader.py)
** subclasses this type and only prepares the arguments; next() runs here. */
#define _POSIX_C_SOURCE 200809L
#include "ext.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WAIT_SLICE_NS (50 * 1000000LL)

static int64_t process_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

stoke_loader *sk_loader_get(sk_Loader *self) {
  if (!self->l) {
    PyErr_SetString(sk_err.Error, "the loader is closed");
    return NULL;
  }
  if (self->pid != getpid()) {
    PyErr_SetString(sk_err.Error,
                    "this loader was created in another process: its worker "
                    "threads do not survive fork(); create a new loader in "
                    "the child");
    return NULL;
  }
  return self->l;
}

/* Raise the loader's error: a SampleError carries the sample's index, its
** file (.path) and where in it (.where). */
static PyObject *raise_loader(sk_Loader *self, int rc) {
  const char *msg = stoke_errmsg(self->l);
  if (rc == STOKE_EBUSY) {
    char buf[512];
    stoke_config c;
    stoke_loader_config(self->l, &c);
    snprintf(buf, sizeof buf,
             "all %u batch slots are held by Python references to earlier "
             "batches (tensors, arrays or stoke.Batch objects still alive): "
             "drop them, copy what you keep (x.clone(), x.copy()), call "
             "batch.release(), or raise prefetch",
             c.prefetch + c.consumer_slots);
    return sk_raise(rc, buf);
  }
  sk_raise(rc, msg);
  size_t index;
  if ((rc != STOKE_ESAMPLE && rc != STOKE_ETIMEDOUT) ||
      sscanf(msg, "sample %zu", &index) != 1)
    return NULL;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  char where[512];
  stoke_source_describe(stoke_loader_source(self->l), index, where,
                        sizeof where);
  char path[512];
  snprintf(path, sizeof path, "%s", where);
  char *cut = strstr(path, " sample ");
  if (!cut) cut = strstr(path, " member ");
  if (cut) *cut = '\0';
  PyObject *i = PyLong_FromSize_t(index);
  PyObject *p = where[0] ? PyUnicode_FromString(path) : Py_NewRef(Py_None);
  PyObject *w = where[0] ? PyUnicode_FromString(where) : Py_NewRef(Py_None);
  if (value && i && p && w) {
    PyObject_SetAttrString(value, "index", i);
    PyObject_SetAttrString(value, "path", p);
    PyObject_SetAttrString(value, "where", w);
  }
  Py_XDECREF(i);
  Py_XDECREF(p);
  Py_XDECREF(w);
  PyErr_Restore(type, value, tb);
  return NULL;
}

/* __init__(source_spec, config, output, layout, names, to_torch, to_numpy) */
static int loader_init(sk_Loader *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"source",   "config",   "output", "layout",
                           "names",    "to_torch", "to_numpy", "stream",
                           NULL};
  PyObject *spec, *config, *names, *to_torch = Py_None, *to_numpy = Py_None,
           *stream = Py_None;
  int output, layout;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!iiO!|OOO", kwlist,
                                   &PyDict_Type, &spec, &PyDict_Type, &config,
                                   &output, &layout, &PyTuple_Type, &names,
                                   &to_torch, &to_numpy, &stream))
    return -1;
  if (self->l) {
    PyErr_SetString(sk_err.Error, "the loader is already initialised");
    return -1;
  }
  if (output < SK_OUT_STOKE || output > SK_OUT_TORCH ||
      layout < SK_LAYOUT_SINGLE || layout > SK_LAYOUT_DICT) {
    PyErr_SetString(PyExc_ValueError, "bad output or layout");
    return -1;
  }
  if ((output == SK_OUT_TORCH && to_torch == Py_None) ||
      (output == SK_OUT_NUMPY && to_numpy == Py_None)) {
    PyErr_SetString(PyExc_ValueError, "the output's converter is missing");
    return -1;
  }
  stoke_config cfg;
  stoke_config_init(&cfg);
  if (sk_config_from_dict(config, &cfg) < 0) return -1;
  stoke_source *src = NULL;
  if (sk_source_from_spec(spec, &src, &self->keep) < 0) return -1;
  if ((size_t)PyTuple_GET_SIZE(names) != stoke_source_n_fields(src)) {
    stoke_source_destroy(src);
    sk_keep_release(&self->keep);
    PyErr_SetString(PyExc_ValueError, "names: one per field");
    return -1;
  }
  cfg.source = src;
  stoke_loader *l = NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = stoke_loader_create(&cfg, &l);
  Py_END_ALLOW_THREADS
  stoke_source_destroy(src); /* the loader keeps its own reference */
  if (rc != 0) {
    sk_keep_release(&self->keep);
    sk_raise_tls(rc);
    return -1;
  }
  stoke_device_info di = {.struct_size = sizeof di};
  if (output == SK_OUT_NUMPY && stoke_loader_device(l, &di) == 0 &&
      di.backend == STOKE_BACKEND_CUDA) {
    Py_BEGIN_ALLOW_THREADS
    stoke_loader_destroy(l);
    Py_END_ALLOW_THREADS
    sk_keep_release(&self->keep);
    PyErr_SetString(sk_err.Config,
                    "output='numpy' cannot hold batches in CUDA memory: use "
                    "output='torch' (or 'stoke', whose fields speak DLPack)");
    return -1;
  }
  self->l = l;
  self->pid = getpid();
  self->out.mode = output;
  self->out.layout = layout;
  self->out.names = Py_NewRef(names);
  self->out.to_torch = to_torch == Py_None ? NULL : Py_NewRef(to_torch);
  self->out.to_numpy = to_numpy == Py_None ? NULL : Py_NewRef(to_numpy);
  self->out.stream = stream == Py_None ? NULL : Py_NewRef(stream);
  self->spec = Py_NewRef(spec);
  self->in_epoch = 0;
  stoke_config eff;
  stoke_loader_config(l, &eff);
  self->has_workers = eff.n_workers > 0;
  self->cpu0_ns = cfg.warmup_epochs == 0 ? process_cpu_ns() : -1;
  return 0;
}

/* Stop the workers and free the loader.  Batches Python still holds stay
** valid: the library frees their slots when the last one goes.  The
** borrowed arrays are released only after the workers are joined. */
static void loader_close_now(sk_Loader *self) {
  stoke_loader *l = self->l;
  self->l = NULL;
  if (l) {
    if (self->pid == getpid()) {
      Py_BEGIN_ALLOW_THREADS
      stoke_loader_destroy(l);
      Py_END_ALLOW_THREADS
    }
    /* else: a child after fork(); the threads are gone and the locks may
    ** be held by them: leaking is the only safe choice. */
  }
  sk_keep_release(&self->keep);
}

static void loader_dealloc(sk_Loader *self) {
  PyObject_GC_UnTrack(self);
  if (self->weakrefs) PyObject_ClearWeakRefs((PyObject *)self);
  loader_close_now(self);
  Py_CLEAR(self->out.names);
  Py_CLEAR(self->out.to_torch);
  Py_CLEAR(self->out.to_numpy);
  Py_CLEAR(self->out.stream);
  Py_CLEAR(self->spec);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int loader_traverse(sk_Loader *self, visitproc visit, void *arg) {
  Py_VISIT(self->out.to_torch);
  Py_VISIT(self->out.to_numpy);
  Py_VISIT(self->out.stream);
  Py_VISIT(self->spec);
  return 0;
}

/* An epoch's iterator, as torch's DataLoader hands out: iter(it) is it,
** and a new iter(loader) starts the next epoch, ending the one a `break`
** left behind; the old iterator then refuses to go on. */
typedef struct sk_LoaderIter {
  PyObject_HEAD
  sk_Loader *loader;
  uint64_t gen;
  int done;             /* its epoch ended: StopIteration from now on */
} sk_LoaderIter;

static PyObject *loader_iter(sk_Loader *self) {
  stoke_loader *l = sk_loader_get(self);
  if (!l) return NULL;
  if (self->in_epoch) {
    stoke_loader_end_epoch(l);
    self->in_epoch = 0;
  }
  if (self->cpu0_ns < 0) {
    stoke_stats st = {.struct_size = sizeof st};
    stoke_config c;
    stoke_loader_config(l, &c);
    if (stoke_loader_stats(l, &st) == 0 && st.epochs_done >= c.warmup_epochs)
      self->cpu0_ns = process_cpu_ns();
  }
  sk_LoaderIter *it = PyObject_New(sk_LoaderIter, &sk_LoaderIterType);
  if (!it) return NULL;
  it->loader = (sk_Loader *)Py_NewRef(self);
  it->gen = ++self->gen;
  it->done = 0;
  return (PyObject *)it;
}

static PyObject *loader_next_batch(sk_Loader *self);

/* The next batch of the epoch in progress (StopIteration at its end),
** inside record_function while torch profiles, as torch's DataLoader. */
static PyObject *loader_next(sk_Loader *self) {
  PyObject *prof = sk_profile_enter("enumerate(DataLoader)#stoke.Loader.__next__");
  PyObject *r = loader_next_batch(self);
  sk_profile_exit(prof);
  return r;
}

static PyObject *loader_next_batch(sk_Loader *self) {
  stoke_loader *l = sk_loader_get(self);
  if (!l) return NULL;
  stoke_batch *b = NULL;
  int rc = STOKE_AGAIN;
  /* With workers, a batch is usually ready: take it without letting the
  ** GIL go (a poll never blocks).  With none, the batch is made inside
  ** next(), always without the GIL. */
  if (self->has_workers) rc = stoke_loader_next_timed(l, &b, 0);
  while (rc == STOKE_AGAIN) {
    Py_BEGIN_ALLOW_THREADS
    rc = stoke_loader_next_timed(l, &b, WAIT_SLICE_NS);
    Py_END_ALLOW_THREADS
    if (rc == STOKE_AGAIN && PyErr_CheckSignals() < 0)
      return NULL; /* the step stays pending */
  }
  if (rc == STOKE_END) {
    self->in_epoch = 0;
    return NULL; /* StopIteration */
  }
  if (rc != STOKE_OK) return raise_loader(self, rc);
  self->in_epoch = 1;
  sk_bref *r = sk_bref_new(b);
  return r ? sk_deliver(r, &self->out) : NULL;
}

static PyObject *iter_next(sk_LoaderIter *it) {
  if (it->done) return NULL;
  if (it->gen != it->loader->gen) {
    PyErr_SetString(sk_err.Error,
                    "this iterator's epoch was ended by a newer "
                    "iter(loader) (or set_epoch, load_state_dict)");
    return NULL;
  }
  PyObject *batch = loader_next(it->loader);
  if (!batch && !PyErr_Occurred()) it->done = 1;
  return batch;
}

static void iter_dealloc(sk_LoaderIter *it) {
  Py_XDECREF(it->loader);
  PyObject_Free(it);
}

static Py_ssize_t iter_length_hint(sk_LoaderIter *it) {
  return it->done ? 0 : PyObject_Length((PyObject *)it->loader);
}

static PyObject *iter_len_hint(sk_LoaderIter *it, PyObject *noargs) {
  Py_ssize_t n = iter_length_hint(it);
  return n < 0 ? NULL : PyLong_FromSsize_t(n);
}

static PyMethodDef iter_methods[] = {
    {"__length_hint__", (PyCFunction)iter_len_hint, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyObject *iter_get_loader(sk_LoaderIter *it, void *c) {
  return Py_NewRef((PyObject *)it->loader);
}

static PyGetSetDef iter_getset[] = {
    {"loader", (getter)iter_get_loader, NULL, "the loader", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject sk_LoaderIterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stoke._stoke.LoaderIterator",
    .tp_basicsize = sizeof(sk_LoaderIter),
    .tp_dealloc = (destructor)iter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One epoch of a stoke loader (iter(loader) makes one).",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)iter_next,
    .tp_methods = iter_methods,
    .tp_getset = iter_getset,
};

static Py_ssize_t loader_len(sk_Loader *self) {
  stoke_loader *l = sk_loader_get(self);
  return l ? (Py_ssize_t)stoke_loader_n_batches(l) : -1;
}

static PyObject *loader_set_epoch(sk_Loader *self, PyObject *arg) {
  stoke_loader *l = sk_loader_get(self);
  if (!l) return NULL;
  unsigned long long e = PyLong_AsUnsignedLongLong(arg);
  if (e == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  if (self->in_epoch) {
    stoke_loader_end_epoch(l);
    self->in_epoch = 0;
  }
  self->gen++; /* an iterator of the old epoch may not go on */
  int rc = stoke_loader_set_epoch(l, e);
  if (rc != 0) return sk_raise(rc, stoke_errmsg(l));
  Py_RETURN_NONE;
}

static PyObject *loader_end_epoch(sk_Loader *self, PyObject *noargs) {
  stoke_loader *l = sk_loader_get(self);
  if (!l) return NULL;
  stoke_loader_end_epoch(l);
  self->in_epoch = 0;
  self->gen++;
  Py_RETURN_NONE;
}

static PyObject *loader_close(sk_Loader *self, PyObject *noargs) {
  loader_close_now(self);
  Py_RETURN_NONE;
}

static PyObject *loader_save_trace(sk_Loader *self, PyObject *arg) {
  stoke_loader *l = sk_loader_get(self);
  if (!l) return NULL;
  PyObject *bytes;
  if (!PyUnicode_FSConverter(arg, &bytes)) return NULL;
  int rc;
  const char *path = PyBytes_AS_STRING(bytes);
  Py_BEGIN_ALLOW_THREADS
  rc = stoke_loader_write_trace(l, path);
  Py_END_ALLOW_THREADS
  Py_DECREF(bytes);
  if (rc == STOKE_EINVAL)
    return sk_raise(rc, "tracing is off: create the loader with trace=True "
                        "(or trace=N spans kept per thread)");
  if (rc != 0) return sk_raise(rc, stoke_errmsg(l));
  Py_RETURN_NONE;
}

/* The configuration in force, under the C names (stoke_config). */
static PyObject *loader_config(sk_Loader *self, PyObject *noargs) {
  stoke_loader *l = sk_loader_get(self);
  if (!l) return NULL;
  stoke_config c;
  stoke_loader_config(l, &c);
  return Py_BuildValue(
      "{s:n,s:I,s:I,s:I,s:i,s:K,s:i,s:I,s:I,s:i,s:i,s:I,s:n,s:L,s:K,s:i,"
      "s:n,s:n,s:n,s:n,s:I,s:i}",
      "batch_size", (Py_ssize_t)c.batch_size, "n_workers", c.n_workers,
      "prefetch", c.prefetch, "consumer_slots", c.consumer_slots, "shuffle",
      c.shuffle, "seed", (unsigned long long)c.seed, "drop_last", c.drop_last,
      "rank", c.rank, "world", c.world, "shard_drop_last", c.shard_drop_last,
      "in_order", c.in_order, "warmup_epochs", c.warmup_epochs,
      "warmup_steps", (Py_ssize_t)c.warmup_steps, "sample_timeout_ms",
      (long long)c.sample_timeout_ms, "mem_budget_bytes",
      (unsigned long long)c.mem_budget_bytes, "prefetch_next_epoch",
      c.prefetch_next_epoch, "trace_events", (Py_ssize_t)c.trace_events,
      "max_chunk", (Py_ssize_t)c.max_chunk, "n_batches",
      (Py_ssize_t)stoke_loader_n_batches(l), "n_samples",
      (Py_ssize_t)stoke_loader_n_samples(l), "echo", c.echo, "echo_mode",
      c.echo_mode);
}

static PyObject *loader_host_bytes(sk_Loader *self, PyObject *noargs) {
  stoke_loader *l = sk_loader_get(self);
  return l ? PyLong_FromUnsignedLongLong(stoke_loader_host_bytes(l)) : NULL;
}

/* The last bad samples, oldest first: a list of dicts. */
static PyObject *loader_failures(sk_Loader *self, PyObject *noargs) {
  stoke_loader *l = sk_loader_get(self);
  if (!l) return NULL;
  stoke_failure f[STOKE_FAILURES_KEPT];
  size_t n = stoke_loader_failures(l, f, STOKE_FAILURES_KEPT);
  if (n > STOKE_FAILURES_KEPT) n = STOKE_FAILURES_KEPT;
  PyObject *list = PyList_New((Py_ssize_t)n);
  for (size_t i = 0; list && i < n; i++) {
    PyObject *sub = f[i].substitute == SIZE_MAX
                        ? Py_NewRef(Py_None)
                        : PyLong_FromSize_t(f[i].substitute);
    PyObject *d = sub ? Py_BuildValue(
                            "{s:n,s:K,s:n,s:s,s:O,s:N,s:s,s:s}", "index",
                            (Py_ssize_t)f[i].index, "epoch",
                            (unsigned long long)f[i].epoch, "batch",
                            (Py_ssize_t)f[i].batch, "action",
                            stoke_on_error_name(f[i].action), "quarantined",
                            f[i].quarantined ? Py_True : Py_False,
                            "substitute", sub, "where", f[i].where, "reason",
                            f[i].reason)
                      : NULL;
    if (!d) {
      Py_CLEAR(list);
      break;
    }
    PyList_SET_ITEM(list, (Py_ssize_t)i, d);
  }
  return list;
}

/* autotune(): None without the autotuner, else its limits, the
** configuration in force and every decision (stoke_autotune_event). */
static PyObject *loader_autotune(sk_Loader *self, PyObject *noargs) {
  stoke_loader *l = sk_loader_get(self);
  if (!l) return NULL;
  stoke_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  int rc = stoke_loader_stats(l, &st);
  if (rc != 0) return sk_raise(rc, stoke_errmsg(l));
  if (!st.autotune) Py_RETURN_NONE;
  size_t n = stoke_loader_n_autotune_events(l);
  PyObject *list = PyList_New(0);
  for (size_t i = 0; list && i < n; i++) {
    stoke_autotune_event e;
    if (stoke_loader_autotune_event(l, i, &e) != 0) break;
    PyObject *after = e.wait_after >= 0 ? PyFloat_FromDouble(e.wait_after)
                                        : Py_NewRef(Py_None);
    PyObject *d = after ? Py_BuildValue(
                              "{s:s,s:K,s:K,s:d,s:I,s:I,s:I,s:I,s:d,s:N,s:d,"
                              "s:s}",
                              "kind", stoke_autotune_kind_name(e.kind),
                              "epoch", (unsigned long long)e.epoch, "step",
                              (unsigned long long)e.step, "time_s",
                              (double)e.time_ns / 1e9, "from_workers",
                              e.from_workers, "to_workers", e.to_workers,
                              "from_prefetch", e.from_prefetch, "to_prefetch",
                              e.to_prefetch, "wait_before", e.wait_before,
                              "wait_after", after, "compute_ms",
                              (double)e.compute_ns / 1e6, "text", e.text)
                        : NULL;
    if (!d || PyList_Append(list, d) != 0) {
      Py_XDECREF(d);
      Py_CLEAR(list);
      break;
    }
    Py_DECREF(d);
  }
  if (!list) return NULL;
  return Py_BuildValue("{s:I,s:I,s:I,s:I,s:d,s:K,s:K,s:N}", "workers",
                       st.n_workers, "prefetch", st.prefetch, "max_workers",
                       st.max_workers, "max_prefetch", st.max_prefetch,
                       "cpu_budget", st.cpu_budget, "changes",
                       (unsigned long long)st.autotune_changes, "rollbacks",
                       (unsigned long long)st.autotune_rollbacks, "decisions",
                       list);
}

/* _state(): the position as stoke_loader_state_encode's bytes, and its
** fields. */
static PyObject *loader_state(sk_Loader *self, PyObject *noargs) {
  stoke_loader *l = sk_loader_get(self);
  if (!l) return NULL;
  stoke_loader_state st;
  int rc = stoke_loader_state_save(l, &st);
  if (rc != 0) return sk_raise(rc, stoke_errmsg(l));
  unsigned char buf[STOKE_STATE_BYTES];
  size_t n = 0;
  rc = stoke_loader_state_encode(&st, buf, sizeof buf, &n);
  if (rc != 0) return sk_raise_tls(rc);
  return Py_BuildValue("(y#{s:K,s:K,s:K,s:K,s:I,s:I})", (const char *)buf,
                       (Py_ssize_t)n, "epoch", (unsigned long long)st.epoch,
                       "batches_done", (unsigned long long)st.batches_done,
                       "seed", (unsigned long long)st.seed, "n_samples",
                       (unsigned long long)st.n_samples, "rank", st.rank,
                       "world_size", st.world);
}

/* _restore(bytes): continue from an encoded state. */
static PyObject *loader_restore(sk_Loader *self, PyObject *arg) {
  stoke_loader *l = sk_loader_get(self);
  if (!l) return NULL;
  Py_buffer v;
  if (PyObject_GetBuffer(arg, &v, PyBUF_SIMPLE) < 0) return NULL;
  stoke_loader_state st;
  int rc = stoke_loader_state_decode(v.buf, (size_t)v.len, &st);
  PyBuffer_Release(&v);
  if (rc != 0) return sk_raise_tls(rc);
  if (self->in_epoch) {
    stoke_loader_end_epoch(l);
    self->in_epoch = 0;
  }
  self->gen++;
  rc = stoke_loader_state_restore(l, &st);
  if (rc != 0) return sk_raise(rc, stoke_errmsg(l));
  return Py_BuildValue("{s:K,s:K,s:K}", "epoch",
                       (unsigned long long)st.epoch, "batches_done",
                       (unsigned long long)st.batches_done, "seed",
                       (unsigned long long)st.seed);
}

/* What serves the batches: stoke_loader_device as a dict. */
static PyObject *loader_device_info(sk_Loader *self, PyObject *noargs) {
  stoke_loader *l = sk_loader_get(self);
  if (!l) return NULL;
  stoke_device_info d = {.struct_size = sizeof d};
  int rc = stoke_loader_device(l, &d);
  if (rc != 0) return sk_raise(rc, stoke_errmsg(l));
  return Py_BuildValue(
      "{s:s,s:s,s:i,s:s,s:i,s:K,s:K,s:n,s:K,s:O,s:i,s:s,s:s}", "backend",
      stoke_backend_name(d.backend), "requested",
      stoke_backend_name(d.requested), "device", d.device, "name", d.name,
      "driver_version", d.driver_version, "total_bytes",
      (unsigned long long)d.total_bytes, "free_bytes",
      (unsigned long long)d.free_bytes, "device_slots",
      (Py_ssize_t)d.n_device_slots, "device_bytes",
      (unsigned long long)d.device_bytes, "normalize_on_device",
      d.normalize_on_device ? Py_True : Py_False, "clock", d.clock, "reason",
      d.reason, "normalize", d.normalize);
}

/* Wait for the device's last steps so that the statistics count them. */
static PyObject *loader_device_sync(sk_Loader *self, PyObject *noargs) {
  stoke_loader *l = sk_loader_get(self);
  if (!l) return NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = stoke_loader_device_sync(l);
  Py_END_ALLOW_THREADS
  if (rc != 0) return sk_raise(rc, stoke_errmsg(l));
  Py_RETURN_NONE;
}

static PyObject *loader_get_closed(sk_Loader *self, void *c) {
  return PyBool_FromLong(self->l == NULL);
}

static PyMethodDef loader_methods[] = {
    {"set_epoch", (PyCFunction)loader_set_epoch, METH_O,
     "set_epoch(e): the number of the next epoch to start (its order and "
     "augmentation), as DistributedSampler.set_epoch."},
    {"end_epoch", (PyCFunction)loader_end_epoch, METH_NOARGS,
     "End the epoch in progress now (iter() does it after a break)."},
    {"close", (PyCFunction)loader_close, METH_NOARGS,
     "Stop the workers and free the loader; batches still held stay valid."},
    {"save_trace", (PyCFunction)loader_save_trace, METH_O,
     "save_trace(path): a Chrome/Perfetto trace of the spans kept."},
    {"_config", (PyCFunction)loader_config, METH_NOARGS,
     "The configuration in force (C names)."},
    {"failures", (PyCFunction)loader_failures, METH_NOARGS,
     "The last bad samples (oldest first): index, epoch, batch, action "
     "(skip, replace, fail), quarantined, substitute, where, reason."},
    {"autotune", (PyCFunction)loader_autotune, METH_NOARGS,
     "The online autotuner (num_workers='auto'), or None: the workers and "
     "prefetch in force, the most it may use, the CPU budget, the changes "
     "and rollbacks, and every decision (kind, epoch, step, from/to "
     "workers and prefetch, waiting before and after, text)."},
    {"_state", (PyCFunction)loader_state, METH_NOARGS, NULL},
    {"_restore", (PyCFunction)loader_restore, METH_O, NULL},
    {"device_info", (PyCFunction)loader_device_info, METH_NOARGS,
     "Which backend serves the batches (host, pinned, cuda) and why, the "
     "device, its memory and the loader's share, where normalisation runs."},
    {"device_sync", (PyCFunction)loader_device_sync, METH_NOARGS,
     "Wait for the device's last steps so that stats() counts them "
     "(between epochs: it blocks on the GPU)."},
    {"host_bytes", (PyCFunction)loader_host_bytes, METH_NOARGS,
     "Host bytes the loader allocated (its memory ledger's total)."},
    {"stats", (PyCFunction)sk_loader_stats, METH_NOARGS,
     "The steady-state summary, as `stoke bench --json` writes it."},
    {"diagnose", (PyCFunction)(void (*)(void))sk_loader_diagnose,
     METH_VARARGS | METH_KEYWORDS,
     "diagnose(cores=0, consumer_cpu=None): the verdict, its numbers, the "
     "queue model's prediction, a what-if table and advice."},
    {"report", (PyCFunction)(void (*)(void))sk_loader_report,
     METH_VARARGS | METH_KEYWORDS,
     "report(cores=0, consumer_cpu=None): `stoke profile`'s human report."},
    {"save_json", (PyCFunction)(void (*)(void))sk_loader_save_json,
     METH_VARARGS | METH_KEYWORDS,
     "save_json(path, cores=0, consumer_cpu=None): the profile JSON that "
     "`stoke report` reads."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef loader_getset[] = {
    {"closed", (getter)loader_get_closed, NULL, "close() was called", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PySequenceMethods loader_as_sequence = {.sq_length =
                                                   (lenfunc)loader_len};

PyTypeObject sk_LoaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stoke._stoke.Loader",
    .tp_basicsize = sizeof(sk_Loader),
    .tp_dealloc = (destructor)loader_dealloc,
    .tp_as_sequence = &loader_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The C loader.  Use stoke.Loader.",
    .tp_traverse = (traverseproc)loader_traverse,
    .tp_weaklistoffset = offsetof(sk_Loader, weakrefs),
    .tp_iter = (getiterfunc)loader_iter,
    .tp_methods = loader_methods,
    .tp_getset = loader_getset,
    .tp_init = (initproc)loader_init,
    .tp_new = PyType_GenericNew,
};
