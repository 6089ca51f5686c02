/* source.c — a stoke_source from the package's description of one, and the
** loader configuration from a dict.
**
** The stoke package (python/stoke/loader.py) turns what the user passed
** into a plain description; this file only maps it onto the C API.
**   {"kind": "images", "paths": [...], "transform": str, "image_kind": int,
**    "max_pixels": int, "max_bytes": int, "verify_checksums": bool,
**    and for URLs "io_concurrency", "tls_ca_path", "tls_insecure",
**    "max_attempts", "retry_budget", "connect_timeout_ms",
**    "stall_timeout_ms", "retry_backoff_ms" (None: the default)}
**   {"kind": "arrays", "arrays": [objects with the buffer protocol],
**    "names": [str]}  — C-contiguous, borrowed: their buffers are held
**    (sk_keep) until the loader reading them is destroyed
**   {"kind": "synthetic", "kind_code": int, "cost_ns": int, "dist": int,
**    "sigma": float, "samples": int, "shape": [int], "classes": int,
**    "seed": int}
**   {"kind": "dataset", ...}  — a Python dataset (dataset.c) */
#include "ext.h"
#include "dataset.h"

#include <string.h>

void sk_keep_release(sk_keep *keep) {
  for (size_t i = 0; i < keep->n_views; i++) PyBuffer_Release(&keep->views[i]);
  PyMem_Free(keep->views);
  keep->views = NULL;
  keep->n_views = 0;
  Py_CLEAR(keep->owner);
}

static int images_source(PyObject *spec, stoke_source **out) {
  stoke_image_config ic;
  stoke_image_config_init(&ic);
  const char *transform;
  PyObject *tf = sk_dict_str(spec, "transform", &transform);
  if (!tf) return -1;
  if (transform) ic.transform = transform;
  int verify = 0;
  const char *ca;
  PyObject *ca_obj = sk_dict_str(spec, "tls_ca_path", &ca);
  if (!ca_obj) {
    Py_DECREF(tf);
    return -1;
  }
  ic.tls_ca_path = ca;
  /* The remote shards' cache (docs/remote.md, "The cache"); absent or
  ** None: none. */
  const char *cache_dir;
  PyObject *cd_obj = sk_dict_str(spec, "cache_dir", &cache_dir);
  if (!cd_obj) {
    Py_DECREF(ca_obj);
    Py_DECREF(tf);
    return -1;
  }
  ic.cache_dir = cache_dir;
  unsigned connect_ms = 0, stall_ms = 0, backoff_ms = 0;
  int rc = sk_dict_int(spec, "image_kind", &ic.kind) ||
           sk_dict_u64(spec, "max_pixels", &ic.max_pixels) ||
           sk_dict_u64(spec, "max_bytes", &ic.max_bytes) ||
           sk_dict_int(spec, "verify_checksums", &verify) ||
           /* shards as URLs (stoke.loader.remote_options) */
           sk_dict_uint(spec, "io_concurrency", &ic.io_concurrency) ||
           sk_dict_int(spec, "tls_insecure", &ic.tls_insecure) ||
           sk_dict_uint(spec, "max_attempts", &ic.max_attempts) ||
           sk_dict_uint(spec, "retry_budget", &ic.retry_budget) ||
           sk_dict_uint(spec, "connect_timeout_ms", &connect_ms) ||
           sk_dict_uint(spec, "stall_timeout_ms", &stall_ms) ||
           sk_dict_uint(spec, "retry_backoff_ms", &backoff_ms) ||
           sk_dict_u64(spec, "cache_max_bytes", &ic.cache_max_bytes);
  ic.verify_checksums = verify;
  ic.connect_timeout_ms = connect_ms;
  ic.stall_timeout_ms = stall_ms;
  ic.retry_backoff_ms = backoff_ms;
  PyObject *paths = PyDict_GetItemString(spec, "paths");
  if (rc == 0 && (!paths || !PyList_Check(paths))) {
    PyErr_SetString(PyExc_TypeError, "images: paths must be a list");
    rc = -1;
  }
  Py_ssize_t n = rc == 0 ? PyList_GET_SIZE(paths) : 0;
  const char **p = rc == 0 ? PyMem_Calloc((size_t)n + 1, sizeof *p) : NULL;
  if (rc == 0 && !p) {
    PyErr_NoMemory();
    rc = -1;
  }
  for (Py_ssize_t i = 0; rc == 0 && i < n; i++)
    if (!(p[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(paths, i)))) rc = -1;
  if (rc == 0) {
    int code;
    Py_BEGIN_ALLOW_THREADS /* opening reads every header of a folder */
    code = stoke_source_create_images_list(p, (size_t)n, &ic, out);
    Py_END_ALLOW_THREADS
    if (code != 0) {
      sk_raise_tls(code);
      rc = -1;
    }
  }
  PyMem_Free(p);
  Py_DECREF(cd_obj);
  Py_DECREF(ca_obj);
  Py_DECREF(tf);
  return rc;
}

/* The stoke dtype of a buffer's format and item size, or 0. */
static int dtype_of(const Py_buffer *v) {
  const char *f = v->format ? v->format : "B";
  if (*f == '@' || *f == '=' || *f == '<') f++;
  if (f[0] && f[1]) return 0;
  switch (*f) {
  case 'B': return v->itemsize == 1 ? STOKE_U8 : 0;
  case 'b': return v->itemsize == 1 ? STOKE_I8 : 0;
  case '?': return v->itemsize == 1 ? STOKE_BOOL : 0;
  case 'h': return v->itemsize == 2 ? STOKE_I16 : 0;
  case 'i': return v->itemsize == 4 ? STOKE_I32 : 0;
  case 'l':
  case 'q': return v->itemsize == 8 ? STOKE_I64 : 0;
  case 'e': return v->itemsize == 2 ? STOKE_F16 : 0;
  case 'f': return v->itemsize == 4 ? STOKE_F32 : 0;
  case 'd': return v->itemsize == 8 ? STOKE_F64 : 0;
  }
  return 0;
}

static int arrays_source(PyObject *spec, stoke_source **out, sk_keep *keep) {
  PyObject *arrays = PyDict_GetItemString(spec, "arrays");
  PyObject *names = PyDict_GetItemString(spec, "names");
  if (!arrays || !PyList_Check(arrays) || !names || !PyList_Check(names) ||
      PyList_GET_SIZE(names) != PyList_GET_SIZE(arrays)) {
    PyErr_SetString(PyExc_TypeError, "arrays: lists of arrays and names");
    return -1;
  }
  Py_ssize_t n = PyList_GET_SIZE(arrays);
  if (n < 1 || n > STOKE_MAX_FIELDS) {
    PyErr_Format(sk_err.Config, "arrays: 1 to %d arrays, got %zd",
                 STOKE_MAX_FIELDS, n);
    return -1;
  }
  keep->views = PyMem_Calloc((size_t)n, sizeof *keep->views);
  if (!keep->views) {
    PyErr_NoMemory();
    return -1;
  }
  stoke_field_desc fields[STOKE_MAX_FIELDS];
  const void *data[STOKE_MAX_FIELDS];
  memset(fields, 0, sizeof fields);
  Py_ssize_t rows = -1;
  for (Py_ssize_t i = 0; i < n; i++) {
    Py_buffer *v = &keep->views[i];
    const char *name = PyUnicode_AsUTF8(PyList_GET_ITEM(names, i));
    if (!name) return -1;
    if (PyObject_GetBuffer(PyList_GET_ITEM(arrays, i), v,
                           PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
      PyErr_Format(sk_err.Config,
                   "array '%s' is not a C-contiguous buffer; stoke borrows "
                   "arrays without a copy, so pass a contiguous one "
                   "(numpy.ascontiguousarray(x) or x.contiguous())",
                   name);
      return -1;
    }
    keep->n_views++;
    if (v->ndim < 1) {
      PyErr_Format(sk_err.Config, "array '%s' has no rows (0-d)", name);
      return -1;
    }
    if (v->ndim > STOKE_MAX_DIMS + 1) {
      PyErr_Format(sk_err.Config, "array '%s' has %d dimensions, at most %d",
                   name, v->ndim, STOKE_MAX_DIMS + 1);
      return -1;
    }
    int dt = dtype_of(v);
    if (!dt) {
      PyErr_Format(sk_err.Config,
                   "array '%s': element format '%s' (%zd bytes) is not one of "
                   "bool, uint8, int8, int16, int32, int64, float16, float32, "
                   "float64",
                   name, v->format ? v->format : "B", v->itemsize);
      return -1;
    }
    if (rows >= 0 && v->shape[0] != rows) {
      PyErr_Format(sk_err.Config,
                   "array '%s' has %zd rows, the first array %zd: arrays "
                   "are fields of the same samples",
                   name, v->shape[0], rows);
      return -1;
    }
    rows = v->shape[0];
    fields[i].name = name;
    fields[i].dtype = dt;
    fields[i].ndim = v->ndim - 1;
    for (int d = 1; d < v->ndim; d++) fields[i].shape[d - 1] = v->shape[d];
    data[i] = v->buf;
  }
  int code = stoke_source_create_tensors((size_t)rows, (size_t)n, fields,
                                         data, out);
  if (code != 0) {
    sk_raise_tls(code);
    return -1;
  }
  return 0;
}

int sk_synthetic_config(PyObject *spec, stoke_synthetic_config *out) {
  stoke_synthetic_config sc;
  stoke_synthetic_config_init(&sc);
  if (sk_dict_int(spec, "kind_code", &sc.kind) ||
      sk_dict_i64(spec, "cost_ns", &sc.cost_ns) ||
      sk_dict_int(spec, "dist", &sc.dist) ||
      sk_dict_double(spec, "sigma", &sc.sigma) ||
      sk_dict_size(spec, "samples", &sc.n_samples) ||
      sk_dict_uint(spec, "classes", &sc.n_classes) ||
      sk_dict_u64(spec, "seed", &sc.seed))
    return -1;
  PyObject *shape = PyDict_GetItemString(spec, "shape");
  if (shape && shape != Py_None) {
    PyObject *seq = PySequence_Fast(shape, "synthetic: shape must be a "
                                           "sequence");
    if (!seq) return -1;
    Py_ssize_t nd = PySequence_Fast_GET_SIZE(seq);
    if (nd < 1 || nd > STOKE_MAX_DIMS) {
      Py_DECREF(seq);
      PyErr_Format(sk_err.Config, "synthetic: shape has %zd dimensions, "
                                  "expected 1 to %d", nd, STOKE_MAX_DIMS);
      return -1;
    }
    sc.ndim = (int)nd;
    for (Py_ssize_t i = 0; i < nd; i++) {
      sc.shape[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
      if (sc.shape[i] == -1 && PyErr_Occurred()) {
        Py_DECREF(seq);
        return -1;
      }
    }
    Py_DECREF(seq);
  }
  *out = sc;
  return 0;
}

static int synthetic_source(PyObject *spec, stoke_source **out) {
  stoke_synthetic_config sc;
  if (sk_synthetic_config(spec, &sc) < 0) return -1;
  int code = stoke_source_create_synthetic(&sc, out);
  if (code != 0) {
    sk_raise_tls(code);
    return -1;
  }
  return 0;
}

int sk_source_from_spec(PyObject *spec, stoke_source **out, sk_keep *keep) {
  *out = NULL;
  if (!PyDict_Check(spec)) {
    PyErr_SetString(PyExc_TypeError, "source spec must be a dict");
    return -1;
  }
  const char *kind;
  PyObject *k = sk_dict_str(spec, "kind", &kind);
  if (!k) return -1;
  int rc;
  if (kind && strcmp(kind, "images") == 0)
    rc = images_source(spec, out);
  else if (kind && strcmp(kind, "arrays") == 0)
    rc = arrays_source(spec, out, keep);
  else if (kind && strcmp(kind, "synthetic") == 0)
    rc = synthetic_source(spec, out);
  else if (kind && strcmp(kind, "dataset") == 0)
    rc = sk_dataset_source(spec, out, keep);
  else {
    PyErr_Format(PyExc_ValueError, "unknown source kind %s",
                 kind ? kind : "(none)");
    rc = -1;
  }
  Py_DECREF(k);
  if (rc != 0) sk_keep_release(keep);
  return rc;
}

int sk_config_from_dict(PyObject *d, stoke_config *c) {
  if (sk_dict_size(d, "batch_size", &c->batch_size) ||
      sk_dict_uint(d, "n_workers", &c->n_workers) ||
      sk_dict_uint(d, "prefetch", &c->prefetch) ||
      sk_dict_uint(d, "consumer_slots", &c->consumer_slots) ||
      sk_dict_int(d, "shuffle", &c->shuffle) ||
      sk_dict_u64(d, "seed", &c->seed) ||
      sk_dict_int(d, "drop_last", &c->drop_last) ||
      sk_dict_uint(d, "rank", &c->rank) || sk_dict_uint(d, "world", &c->world) ||
      sk_dict_int(d, "shard_drop_last", &c->shard_drop_last) ||
      sk_dict_int(d, "in_order", &c->in_order) ||
      sk_dict_uint(d, "warmup_epochs", &c->warmup_epochs) ||
      sk_dict_size(d, "warmup_steps", &c->warmup_steps) ||
      sk_dict_size(d, "warmup_end_steps", &c->warmup_end_steps) ||
      sk_dict_i64(d, "warmup_end_ns", &c->warmup_end_ns) ||
      sk_dict_i64(d, "sample_timeout_ms", &c->sample_timeout_ms) ||
      sk_dict_u64(d, "mem_budget_bytes", &c->mem_budget_bytes) ||
      sk_dict_int(d, "prefetch_next_epoch", &c->prefetch_next_epoch) ||
      sk_dict_size(d, "trace_events", &c->trace_events) ||
      sk_dict_size(d, "max_chunk", &c->max_chunk) ||
      sk_dict_int(d, "order_given", &c->order_given) ||
      sk_dict_uint(d, "device_prefetch", &c->device_prefetch) ||
      sk_dict_int(d, "pin_memory", &c->pin_memory) ||
      sk_dict_int(d, "device_normalize", &c->device_normalize) ||
      sk_dict_int(d, "clock", &c->clock) ||
      sk_dict_int(d, "on_error", &c->on_error) ||
      sk_dict_u64(d, "max_failures", &c->max_failures) ||
      sk_dict_double(d, "max_failure_frac", &c->max_failure_frac) ||
      sk_dict_uint(d, "max_replace_tries", &c->max_replace_tries) ||
      sk_dict_int(d, "autotune", &c->autotune) ||
      sk_dict_double(d, "cpu_budget", &c->cpu_budget) ||
      sk_dict_uint(d, "autotune_max_prefetch", &c->autotune_max_prefetch) ||
      sk_dict_uint(d, "echo", &c->echo) ||
      sk_dict_int(d, "echo_mode", &c->echo_mode) ||
      sk_dict_int(d, "worker_policy", &c->worker_policy) ||
      sk_dict_u64(d, "shuffle_block_bytes", &c->shuffle_block_bytes) ||
      sk_dict_uint(d, "shuffle_window", &c->shuffle_window) ||
      sk_dict_u64(d, "cache_max_bytes", &c->cache_max_bytes) ||
      sk_dict_u64(d, "ram_cache_bytes", &c->ram_cache_bytes))
    return -1;
  uint64_t stream = c->cuda_stream;
  if (sk_dict_u64(d, "cuda_stream", &stream)) return -1;
  c->cuda_stream = (uintptr_t)stream;
  /* The strings are copied by stoke_loader_create; d keeps them alive
  ** until then. */
  const char *v;
  PyObject *o = sk_dict_str(d, "device", &v);
  if (!o) return -1;
  if (v) c->device = v;
  Py_DECREF(o);
  if (!(o = sk_dict_str(d, "cuda_library", &v))) return -1;
  if (v) c->cuda_library = v;
  Py_DECREF(o);
  if (!(o = sk_dict_str(d, "quarantine_path", &v))) return -1;
  if (v) c->quarantine_path = v;
  Py_DECREF(o);
  if (!(o = sk_dict_str(d, "cache_dir", &v))) return -1;
  if (v) c->cache_dir = v;
  Py_DECREF(o);
  /* The dict keeps these strings alive; the loader copies them. */
  if (!(o = sk_dict_str(d, "metrics_path", &v))) return -1;
  if (v) c->metrics_path = v;
  Py_DECREF(o);
  if (!(o = sk_dict_str(d, "log_jsonl_path", &v))) return -1;
  if (v) c->log_jsonl_path = v;
  Py_DECREF(o);
  if (!(o = sk_dict_str(d, "metrics_loader", &v))) return -1;
  if (v) c->metrics_loader = v;
  Py_DECREF(o);
  if (sk_dict_i64(d, "metrics_every_ns", &c->metrics_every_ns) ||
      sk_dict_size(d, "log_every_steps", &c->log_every_steps))
    return -1;
  return 0;
}
