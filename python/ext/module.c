/* module.c — stoke._stoke: the module, its exceptions and small helpers.
**
** The types and exception classes are static, as in most extensions: the
** module supports one interpreter per process (no sub-interpreters). */
#include "ext.h"
#include "dataset.h"

#include <string.h>

sk_errors sk_err;

/* ---- errors --------------------------------------------------------------- */

static PyObject *class_for(int code) {
  switch (code) {
  case STOKE_ESAMPLE: return sk_err.SampleError;
  case STOKE_ETIMEDOUT: return sk_err.Timeout;
  case STOKE_EBUSY: return sk_err.Busy;
  case STOKE_EBUDGET: return sk_err.Budget;
  case STOKE_EINVAL: return sk_err.Config;
  case STOKE_EFORMAT: return sk_err.Format;
  case STOKE_EIO: return sk_err.IO;
  case STOKE_ENOMEM: return PyExc_MemoryError;
  default: return sk_err.Error;
  }
}

PyObject *sk_raise(int code, const char *msg) {
  if (!msg || !*msg) msg = stoke_strerror(code);
  PyObject *cls = class_for(code);
  if (cls == PyExc_MemoryError) {
    PyErr_SetString(cls, msg);
    return NULL;
  }
  PyObject *exc = PyObject_CallFunction(cls, "s", msg);
  if (!exc) return NULL;
  PyObject *c = PyLong_FromLong(code), *name = PyUnicode_FromString(
                                             stoke_strerror(code));
  if (c && name) {
    PyObject_SetAttrString(exc, "code", c);
    PyObject_SetAttrString(exc, "reason", name);
  }
  Py_XDECREF(c);
  Py_XDECREF(name);
  PyErr_SetObject(cls, exc);
  Py_DECREF(exc);
  return NULL;
}

PyObject *sk_raise_tls(int code) { return sk_raise(code, stoke_errmsg(NULL)); }

/* ---- dict helpers ----------------------------------------------------------- */

/* dict[key], borrowed, or NULL when absent or None (no exception). */
static PyObject *item(PyObject *d, const char *key) {
  PyObject *v = d ? PyDict_GetItemString(d, key) : NULL;
  return v == Py_None ? NULL : v;
}

int sk_dict_u64(PyObject *d, const char *key, uint64_t *out) {
  PyObject *v = item(d, key);
  if (!v) return 0;
  unsigned long long x = PyLong_AsUnsignedLongLong(v);
  if (x == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Format(PyExc_ValueError, "%s: expected a non-negative integer",
                 key);
    return -1;
  }
  *out = x;
  return 0;
}

int sk_dict_i64(PyObject *d, const char *key, int64_t *out) {
  PyObject *v = item(d, key);
  if (!v) return 0;
  long long x = PyLong_AsLongLong(v);
  if (x == -1 && PyErr_Occurred()) return -1;
  *out = x;
  return 0;
}

int sk_dict_uint(PyObject *d, const char *key, unsigned *out) {
  uint64_t x = *out;
  if (sk_dict_u64(d, key, &x)) return -1;
  if (x > 0xffffffffu) {
    PyErr_Format(PyExc_ValueError, "%s: %llu is too large", key,
                 (unsigned long long)x);
    return -1;
  }
  *out = (unsigned)x;
  return 0;
}

int sk_dict_size(PyObject *d, const char *key, size_t *out) {
  uint64_t x = *out;
  if (sk_dict_u64(d, key, &x)) return -1;
  *out = (size_t)x;
  return 0;
}

int sk_dict_int(PyObject *d, const char *key, int *out) {
  PyObject *v = item(d, key);
  if (!v) return 0;
  long x = PyLong_AsLong(v);
  if (x == -1 && PyErr_Occurred()) return -1;
  *out = (int)x;
  return 0;
}

int sk_dict_double(PyObject *d, const char *key, double *out) {
  PyObject *v = item(d, key);
  if (!v) return 0;
  double x = PyFloat_AsDouble(v);
  if (x == -1.0 && PyErr_Occurred()) return -1;
  *out = x;
  return 0;
}

PyObject *sk_dict_str(PyObject *d, const char *key, const char **out) {
  PyObject *v = item(d, key);
  *out = NULL;
  if (!v) Py_RETURN_NONE;
  if (!PyUnicode_Check(v)) {
    PyErr_Format(PyExc_TypeError, "%s: expected a str", key);
    return NULL;
  }
  *out = PyUnicode_AsUTF8(v);
  if (!*out) return NULL;
  Py_INCREF(v);
  return v;
}

PyObject *sk_json_loads(const char *text) {
  if (!text) return PyErr_NoMemory();
  PyObject *json = PyImport_ImportModule("json");
  if (!json) return NULL;
  PyObject *r = PyObject_CallMethod(json, "loads", "s", text);
  Py_DECREF(json);
  return r;
}

/* ---- the module ------------------------------------------------------------- */

static PyObject *version(PyObject *mod, PyObject *noargs) {
  return PyUnicode_FromString(stoke_version());
}

static PyObject *strerror_fn(PyObject *mod, PyObject *arg) {
  long code = PyLong_AsLong(arg);
  if (code == -1 && PyErr_Occurred()) return NULL;
  return PyUnicode_FromString(stoke_strerror((int)code));
}

static PyMethodDef methods[] = {
    {"version", version, METH_NOARGS, "The library's version string."},
    {"strerror", strerror_fn, METH_O, "The text of a stoke error code."},
    {"render_report", sk_render_report, METH_VARARGS,
     "render_report(json_paths, out_path): `stoke report` on JSON files."},
    {"tune", (PyCFunction)(void (*)(void))sk_tune,
     METH_VARARGS | METH_KEYWORDS,
     "tune(source_spec, config, tune, step): the sweep and its knee."},
    {"shared_fetch_add", sk_shared_fetch_add, METH_VARARGS,
     "shared_fetch_add(buf, k, delta): atomically add delta to the int64 "
     "at slot k of a shared buffer; the value before."},
    {"shared_load", sk_shared_load, METH_VARARGS,
     "shared_load(buf, k): the int64 at slot k (atomic)."},
    {"shared_store", sk_shared_store, METH_VARARGS,
     "shared_store(buf, k, v): set the int64 at slot k (atomic)."},
    {"stage_block_bytes", sk_stage_block_bytes, METH_VARARGS,
     "stage_block_bytes(n): the bytes of a stage block for n workers."},
    {"stage_block_init", sk_stage_block_init, METH_VARARGS,
     "stage_block_init(buf, n): make buf a stage block for n workers."},
    {"stage_record", sk_stage_record, METH_VARARGS,
     "stage_record(buf, w, read_ns, python_ns, collate_ns, busy_ns, cpu_ns):"
     " worker w made a sample (its gil_wait is 0: a process has its own "
     "GIL)."},
    {"seed_mix", sk_seed_mix, METH_VARARGS,
     "seed_mix(*words): a 63-bit seed, splitmix64 over each int's low 64 "
     "bits (the per-sample seed of worker processes)."},
    {"sem_post_n", sk_sem_post_n, METH_VARARGS,
     "sem_post_n(handle, n): post a multiprocessing SemLock n times."},
    {"sem_take_n", sk_sem_take_n, METH_VARARGS,
     "sem_take_n(handle, n): take up to n tokens of a multiprocessing "
     "SemLock without waiting; how many were taken."},
    {"worker_info", sk_worker_info, METH_NOARGS,
     "The calling stoke worker thread's WorkerInfo, or None."},
    {"on_worker_thread", sk_on_worker_thread, METH_NOARGS,
     "Whether the calling thread is a stoke.DataLoader worker."},
    {"set_thread_intraop", sk_set_thread_intraop, METH_O,
     "set_thread_intraop(n): torch's intra-op threads of this thread only "
     "(OpenMP's per-thread setting); False when no OpenMP is loaded."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "stoke._stoke",
    "The C half of stoke: loaders, batches, clocks.  Use the stoke package.",
    -1, methods, NULL, NULL, NULL, NULL};

/* A new exception class stoke.<name> with the given bases and doc. */
static PyObject *new_error(PyObject *mod, const char *name, PyObject *bases,
                           const char *doc) {
  char full[64];
  snprintf(full, sizeof full, "stoke.%s", name);
  PyObject *cls = PyErr_NewExceptionWithDoc(full, doc, bases, NULL);
  if (!cls) return NULL;
  if (PyModule_AddObjectRef(mod, name, cls) < 0) {
    Py_DECREF(cls);
    return NULL;
  }
  return cls;
}

static int add_errors(PyObject *mod) {
  sk_err.Error = new_error(
      mod, "Error", PyExc_Exception,
      "A stoke error.  .code is the library's code (negative), .reason its "
      "text; str() is the message, which names the sample, file and offset "
      "where there is one.");
  if (!sk_err.Error) return -1;
  PyObject *b = PyTuple_Pack(1, sk_err.Error);
  sk_err.SampleError = b ? new_error(mod, "SampleError", b,
                                     "A sample could not be produced.  "
                                     ".index is the sample, .path its "
                                     "file, .where the file and offset.")
                         : NULL;
  Py_XDECREF(b);
  if (!sk_err.SampleError) return -1;
  b = PyTuple_Pack(2, sk_err.SampleError, PyExc_TimeoutError);
  sk_err.Timeout = b ? new_error(mod, "SampleTimeout", b,
                                 "A sample ran longer than the timeout.")
                     : NULL;
  Py_XDECREF(b);
  b = PyTuple_Pack(1, sk_err.Error);
  sk_err.Busy = b ? new_error(mod, "BusyError", b,
                              "Every batch slot is held by Python references "
                              "to earlier batches.")
                  : NULL;
  Py_XDECREF(b);
  b = PyTuple_Pack(2, sk_err.Error, PyExc_MemoryError);
  sk_err.Budget = b ? new_error(mod, "BudgetError", b,
                                "The memory budget is too small for the "
                                "configuration.")
                    : NULL;
  Py_XDECREF(b);
  b = PyTuple_Pack(2, sk_err.Error, PyExc_ValueError);
  sk_err.Config = b ? new_error(mod, "ConfigError", b,
                                "An invalid argument or configuration.")
                    : NULL;
  sk_err.Format = b ? new_error(mod, "FormatError", b, "Malformed input data.")
                    : NULL;
  Py_XDECREF(b);
  b = PyTuple_Pack(2, sk_err.Error, PyExc_OSError);
  sk_err.IO = b ? new_error(mod, "IOError", b, "An input/output error.")
                : NULL;
  Py_XDECREF(b);
  return sk_err.Timeout && sk_err.Busy && sk_err.Budget && sk_err.Config &&
                 sk_err.Format && sk_err.IO
             ? 0
             : -1;
}

static int add_type(PyObject *mod, PyTypeObject *t, const char *name) {
  if (PyType_Ready(t) < 0) return -1;
  return PyModule_AddObjectRef(mod, name, (PyObject *)t);
}

PyMODINIT_FUNC PyInit__stoke(void) {
  PyObject *mod = PyModule_Create(&moduledef);
  if (!mod) return NULL;
  if (add_errors(mod) < 0 || add_type(mod, &sk_FieldType, "Field") < 0 ||
      sk_advice_type_ready() < 0 ||
      PyModule_AddObjectRef(mod, "Advice", (PyObject *)&sk_AdviceType) < 0 ||
      add_type(mod, &sk_BatchType, "Batch") < 0 ||
      add_type(mod, &sk_LoaderType, "Loader") < 0 ||
      add_type(mod, &sk_LoaderIterType, "LoaderIterator") < 0 ||
      add_type(mod, &sk_TwoClockType, "TwoClock") < 0 ||
      (sk_DatasetLoaderType.tp_base = &sk_LoaderType,
       add_type(mod, &sk_DatasetLoaderType, "DatasetLoader") < 0) ||
      PyModule_AddIntConstant(mod, "OUT_STOKE", SK_OUT_STOKE) < 0 ||
      PyModule_AddIntConstant(mod, "OUT_NUMPY", SK_OUT_NUMPY) < 0 ||
      PyModule_AddIntConstant(mod, "OUT_TORCH", SK_OUT_TORCH) < 0 ||
      PyModule_AddIntConstant(mod, "LAYOUT_SINGLE", SK_LAYOUT_SINGLE) < 0 ||
      PyModule_AddIntConstant(mod, "LAYOUT_TUPLE", SK_LAYOUT_TUPLE) < 0 ||
      PyModule_AddIntConstant(mod, "LAYOUT_DICT", SK_LAYOUT_DICT) < 0 ||
      PyModule_AddIntConstant(mod, "WORKERS_AUTO", STOKE_WORKERS_AUTO) < 0 ||
      PyModule_AddIntConstant(mod, "WARMUP_END_STEPS",
                              STOKE_WARMUP_END_STEPS) < 0 ||
      PyModule_AddIntConstant(mod, "WARMUP_END_NS",
                              (long)STOKE_WARMUP_END_NS) < 0) {
    Py_DECREF(mod);
    return NULL;
  }
  return mod;
}
