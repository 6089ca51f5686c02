/* collate.c — torch's default_collate in C, straight into each batch's own
** tensors.
**
** DESIGN
** A batch is built by several worker threads at once, each adding the
** samples it made at their positions.  The first sample of a batch to
** arrive gives the batch its layout (sk_node, a tree mirroring the sample:
** tuples, lists, namedtuples and dicts of leaves) and its output: one
** torch tensor of shape (n, *leaf shape) per tensor, ndarray or number
** leaf (torch.empty), a list per string leaf.  Every sample is checked
** against the layout and written into its row of those tensors: numbers
** under the GIL, tensor and ndarray bytes after the GIL is released (the
** sample object is kept alive in the batch's list of samples until the
** batch is finished).  When the last sample is in, the outputs are
** assembled in torch's output types: a tuple or list of fields becomes a
** list, a namedtuple stays its type, a dict a dict, strings nested in a
** sequence a tuple (torch transposes with zip) and elsewhere a list.
**
** Anything the fast path does not reproduce exactly — another type (None,
** a custom class, a tensor subclass or one off the CPU, an ndarray of
** strings or of a dtype torch lacks), a structure or dtype that differs
** from the first sample's — makes the batch "irregular": it is collated
** by torch's own collate function over the original samples, in the
** worker, so the result (or the error) is torch's.  The one exception is
** a shape mismatch between tensors or ndarrays, which is an error naming
** both samples (index and position) and both shapes.
**
** Everything here runs with the GIL held unless a function says so. */
#include "dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sk_torch_api sk_tapi;

/* ---- torch's types and dtypes ------------------------------------------- */

static int load_dtype(PyObject *torch, const char *name, int dtype) {
  PyObject *d = PyObject_GetAttrString(torch, name);
  if (!d) return -1;
  sk_tapi.dtypes[sk_tapi.n_dtypes].stoke = dtype;
  sk_tapi.dtypes[sk_tapi.n_dtypes].torch = d;
  sk_tapi.n_dtypes++;
  return 0;
}

int sk_torch_api_load(void) {
  if (sk_tapi.torch) return 0;
  PyObject *torch = PyImport_ImportModule("torch");
  if (!torch) return -1;
  PyObject *np = PyImport_ImportModule("numpy");
  if (!np) PyErr_Clear(); /* numpy is optional: no ndarray leaves then */
  sk_tapi.n_dtypes = 0;
  int rc = load_dtype(torch, "uint8", STOKE_U8) ||
           load_dtype(torch, "int8", STOKE_I8) ||
           load_dtype(torch, "int16", STOKE_I16) ||
           load_dtype(torch, "int32", STOKE_I32) ||
           load_dtype(torch, "int64", STOKE_I64) ||
           load_dtype(torch, "float16", STOKE_F16) ||
           load_dtype(torch, "bfloat16", STOKE_BF16) ||
           load_dtype(torch, "float32", STOKE_F32) ||
           load_dtype(torch, "float64", STOKE_F64) ||
           load_dtype(torch, "bool", STOKE_BOOL);
  PyObject *tensor = rc ? NULL : PyObject_GetAttrString(torch, "Tensor");
  PyObject *empty = tensor ? PyObject_GetAttrString(torch, "empty") : NULL;
  PyObject *ndarray = np && empty ? PyObject_GetAttrString(np, "ndarray")
                                  : NULL;
  PyObject *generic = ndarray ? PyObject_GetAttrString(np, "generic") : NULL;
  Py_XDECREF(np);
  if (!empty || (np && !generic)) {
    Py_XDECREF(tensor);
    Py_XDECREF(empty);
    Py_XDECREF(ndarray);
    Py_DECREF(torch);
    return -1;
  }
  sk_tapi.tensor = (PyTypeObject *)tensor;
  sk_tapi.empty = empty;
  sk_tapi.ndarray = (PyTypeObject *)ndarray;
  sk_tapi.np_generic = (PyTypeObject *)generic;
  sk_tapi.torch = torch;
  return 0;
}

static PyObject *torch_dtype_of(int dtype) {
  for (int i = 0; i < sk_tapi.n_dtypes; i++)
    if (sk_tapi.dtypes[i].stoke == dtype) return sk_tapi.dtypes[i].torch;
  return NULL;
}

static int stoke_dtype_of_torch(PyObject *d) {
  for (int i = 0; i < sk_tapi.n_dtypes; i++)
    if (sk_tapi.dtypes[i].torch == d) return sk_tapi.dtypes[i].stoke;
  return 0;
}

/* The stoke dtype of a buffer's format (native byte order), or 0. */
static int stoke_dtype_of_format(const char *f, Py_ssize_t itemsize) {
  if (!f) f = "B";
  if (*f == '@' || *f == '=' || *f == '<') f++;
  if (!f[0] || f[1]) return 0;
  switch (*f) {
  case '?': return itemsize == 1 ? STOKE_BOOL : 0;
  case 'b': return itemsize == 1 ? STOKE_I8 : 0;
  case 'B': return itemsize == 1 ? STOKE_U8 : 0;
  case 'h': return itemsize == 2 ? STOKE_I16 : 0;
  case 'i': return itemsize == 4 ? STOKE_I32 : 0;
  case 'l':
  case 'q': return itemsize == 8 ? STOKE_I64 : 0;
  case 'e': return itemsize == 2 ? STOKE_F16 : 0;
  case 'f': return itemsize == 4 ? STOKE_F32 : 0;
  case 'd': return itemsize == 8 ? STOKE_F64 : 0;
  }
  return 0;
}

/* ---- leaves: what a tensor, an ndarray or a NumPy scalar looks like ------ */

typedef struct leaf_view {
  int dtype;
  int ndim;
  Py_ssize_t shape[STOKE_MAX_DIMS];
  Py_ssize_t strides[STOKE_MAX_DIMS]; /* bytes; NULL-like when contiguous */
  int contiguous;
  const char *data;
  size_t itemsize, bytes;
} leaf_view;

/* A CPU strided torch tensor of a dtype we know: its view (data valid while
** x lives).  0 ok; 1 not for the fast path; -1 error. */
static int tensor_view(PyObject *x, leaf_view *v, PyObject **keep) {
  *keep = NULL;
  PyObject *is_cpu = PyObject_GetAttrString(x, "is_cpu");
  if (!is_cpu) return -1;
  int cpu = PyObject_IsTrue(is_cpu);
  Py_DECREF(is_cpu);
  if (cpu <= 0) return cpu < 0 ? -1 : 1;
  PyObject *dt = PyObject_GetAttrString(x, "dtype");
  if (!dt) return -1;
  v->dtype = stoke_dtype_of_torch(dt);
  Py_DECREF(dt);
  if (!v->dtype) return 1;
  PyObject *layout_ok = PyObject_GetAttrString(x, "is_sparse");
  if (!layout_ok) return -1;
  int sparse = PyObject_IsTrue(layout_ok);
  Py_DECREF(layout_ok);
  if (sparse) return sparse < 0 ? -1 : 1;
  PyObject *shape = PyObject_GetAttrString(x, "shape");
  if (!shape) return -1;
  Py_ssize_t nd = PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : -1;
  if (nd < 0 || nd > STOKE_MAX_DIMS - 1) {
    Py_DECREF(shape);
    return 1;
  }
  v->ndim = (int)nd;
  for (Py_ssize_t i = 0; i < nd; i++) {
    v->shape[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
    if (v->shape[i] < 0 && PyErr_Occurred()) {
      Py_DECREF(shape);
      return -1;
    }
  }
  Py_DECREF(shape);
  PyObject *c = PyObject_CallMethod(x, "is_contiguous", NULL);
  if (!c) return -1;
  int contig = PyObject_IsTrue(c);
  Py_DECREF(c);
  if (contig < 0) return -1;
  v->itemsize = stoke_dtype_size(v->dtype);
  v->contiguous = contig;
  if (!contig) {
    /* A view (PILToTensor's permuted HWC image, a slice): its strides,
    ** for one strided copy into the batch row without the GIL, as
    ** torch.stack reads it, instead of .contiguous() and a second copy. */
    PyObject *st = PyObject_CallMethod(x, "stride", NULL);
    if (!st) return -1;
    if (!PyTuple_Check(st) || PyTuple_GET_SIZE(st) != v->ndim) {
      Py_DECREF(st);
      return 1;
    }
    for (int i = 0; i < v->ndim; i++) {
      Py_ssize_t e = PyLong_AsSsize_t(PyTuple_GET_ITEM(st, i));
      if (e < 0) { /* negative strides (flip views): torch's collate */
        Py_DECREF(st);
        return PyErr_Occurred() ? -1 : 1;
      }
      v->strides[i] = e * (Py_ssize_t)v->itemsize;
    }
    Py_DECREF(st);
  }
  PyObject *p = PyObject_CallMethod(x, "data_ptr", NULL);
  if (!p) return -1;
  v->data = PyLong_AsVoidPtr(p); /* the first element, offset included */
  Py_DECREF(p);
  if (!v->data && PyErr_Occurred()) return -1;
  v->bytes = v->itemsize;
  for (int i = 0; i < v->ndim; i++) v->bytes *= (size_t)v->shape[i];
  return 0;
}

/* An ndarray or NumPy scalar through the buffer protocol.  The view is
** released at once: the pointer stays valid while x lives (x is kept in
** the batch's samples) and nobody resizes it. */
static int buffer_view(PyObject *x, leaf_view *v) {
  Py_buffer b;
  if (PyObject_GetBuffer(x, &b, PyBUF_RECORDS_RO) < 0) {
    PyErr_Clear();
    return 1; /* object or string arrays: torch decides */
  }
  int rc = 0;
  v->dtype = stoke_dtype_of_format(b.format, b.itemsize);
  if (!v->dtype || b.ndim > STOKE_MAX_DIMS - 1) {
    rc = 1;
  } else {
    v->ndim = b.ndim;
    v->itemsize = (size_t)b.itemsize;
    v->bytes = v->itemsize;
    Py_ssize_t want = b.itemsize;
    v->contiguous = 1;
    for (int i = b.ndim - 1; i >= 0; i--) {
      v->shape[i] = b.shape[i];
      v->strides[i] = b.strides ? b.strides[i] : want;
      if (v->strides[i] < 0) rc = 1; /* a reversed view: torch's collate */
      if (b.shape[i] > 1 && v->strides[i] != want) v->contiguous = 0;
      want *= b.shape[i];
      v->bytes *= (size_t)b.shape[i];
    }
    v->data = b.buf;
  }
  PyBuffer_Release(&b);
  return rc;
}

/* ---- the layout --------------------------------------------------------- */

static int is_namedtuple(PyObject *x) {
  if (!PyTuple_Check(x) || PyTuple_CheckExact(x)) return 0;
  return PyObject_HasAttrString(x, "_fields");
}

static void node_clear(sk_node *n) {
  for (size_t i = 0; i < n->n_child; i++) node_clear(&n->child[i]);
  PyMem_Free(n->child);
  n->child = NULL;
  n->n_child = 0;
  Py_CLEAR(n->type);
  Py_CLEAR(n->keys);
  Py_CLEAR(n->out);
}

static void path_of(char *dst, size_t cap, const char *parent, PyObject *k) {
  if (PyUnicode_Check(k)) {
    const char *s = PyUnicode_AsUTF8(k);
    if (!s) {
      PyErr_Clear();
      s = "?";
    }
    snprintf(dst, cap, "%s['%s']", parent, s);
  } else {
    snprintf(dst, cap, "%s[%zd]", parent, PyLong_AsSsize_t(k));
    if (PyErr_Occurred()) PyErr_Clear();
  }
}

/* Allocate a leaf's output: torch.empty((n, *shape), dtype) (pinned when
** asked). */
static int leaf_alloc(sk_node *nd, size_t n, int pin) {
  PyObject *shape = PyTuple_New(nd->ndim + 1);
  if (!shape) return -1;
  PyTuple_SET_ITEM(shape, 0, PyLong_FromSize_t(n));
  for (int i = 0; i < nd->ndim; i++)
    PyTuple_SET_ITEM(shape, i + 1, PyLong_FromSsize_t(nd->shape[i]));
  PyObject *kw = Py_BuildValue("{s:O,s:O}", "dtype", torch_dtype_of(nd->dtype),
                               "pin_memory", pin ? Py_True : Py_False);
  PyObject *args = kw ? PyTuple_Pack(1, shape) : NULL;
  nd->out = args ? PyObject_Call(sk_tapi.empty, args, kw) : NULL;
  Py_XDECREF(args);
  Py_XDECREF(kw);
  Py_DECREF(shape);
  if (!nd->out) return -1;
  PyObject *p = PyObject_CallMethod(nd->out, "data_ptr", NULL);
  if (!p) return -1;
  nd->data = PyLong_AsVoidPtr(p);
  Py_DECREF(p);
  return nd->data || !PyErr_Occurred() ? 0 : -1;
}

/* Build the layout of x (the batch's first sample) into nd.  Returns 0,
** 1 (not for the fast path: the batch is irregular) or -1 (error).
** in_seq: x sits in a tuple or list (strings then come out as tuples). */
static int probe(sk_node *nd, PyObject *x, size_t n, int pin, int in_seq,
                 const char *path) {
  memset(nd, 0, sizeof *nd);
  snprintf(nd->path, sizeof nd->path, "%s", path);
  if (PyObject_TypeCheck(x, sk_tapi.tensor)) {
    if (Py_TYPE(x) != sk_tapi.tensor) return 1; /* subclasses: torch's */
    leaf_view v;
    PyObject *keep;
    int rc = tensor_view(x, &v, &keep);
    Py_XDECREF(keep);
    if (rc) return rc;
    nd->kind = SK_NODE_TENSOR;
    nd->dtype = v.dtype;
    nd->ndim = v.ndim;
    memcpy(nd->shape, v.shape, sizeof v.shape);
    nd->bytes = v.bytes;
    return leaf_alloc(nd, n, pin);
  }
  if (sk_tapi.ndarray && (Py_TYPE(x) == sk_tapi.ndarray ||
                          PyObject_TypeCheck(x, sk_tapi.np_generic))) {
    leaf_view v;
    int rc = buffer_view(x, &v);
    if (rc) return rc;
    nd->kind = Py_TYPE(x) == sk_tapi.ndarray ? SK_NODE_NDARRAY
                                             : SK_NODE_NPSCALAR;
    nd->dtype = v.dtype;
    nd->ndim = v.ndim;
    memcpy(nd->shape, v.shape, sizeof v.shape);
    nd->bytes = v.bytes;
    return leaf_alloc(nd, n, pin);
  }
  if (PyBool_Check(x) || PyLong_CheckExact(x) || PyFloat_CheckExact(x)) {
    nd->kind = PyBool_Check(x)       ? SK_NODE_BOOL
               : PyLong_CheckExact(x) ? SK_NODE_INT
                                      : SK_NODE_FLOAT;
    nd->dtype = nd->kind == SK_NODE_BOOL  ? STOKE_BOOL
                : nd->kind == SK_NODE_INT ? STOKE_I64
                                          : STOKE_F64;
    nd->ndim = 0;
    nd->bytes = stoke_dtype_size(nd->dtype);
    return leaf_alloc(nd, n, pin);
  }
  if (PyUnicode_Check(x) || PyBytes_Check(x)) {
    nd->kind = SK_NODE_STR;
    nd->str_tuple = in_seq;
    nd->out = PyList_New((Py_ssize_t)n);
    if (!nd->out) return -1;
    for (size_t i = 0; i < n; i++)
      PyList_SET_ITEM(nd->out, (Py_ssize_t)i, Py_NewRef(Py_None));
    return 0;
  }
  int seq = PyTuple_CheckExact(x) || PyList_CheckExact(x) || is_namedtuple(x);
  if (seq || PyDict_CheckExact(x)) {
    PyObject *keys = NULL;
    Py_ssize_t m;
    if (seq) {
      nd->kind = PyList_CheckExact(x)    ? SK_NODE_LIST
                 : PyTuple_CheckExact(x) ? SK_NODE_TUPLE
                                         : SK_NODE_NAMEDTUPLE;
      if (nd->kind == SK_NODE_NAMEDTUPLE) nd->type = Py_NewRef(Py_TYPE(x));
      m = PySequence_Fast_GET_SIZE(x);
    } else {
      nd->kind = SK_NODE_DICT;
      keys = PyDict_Keys(x); /* sample 0's keys, in its order, as torch */
      if (!keys) return -1;
      nd->keys = keys;
      m = PyList_GET_SIZE(keys);
    }
    if (m == 0) return 1; /* torch's collate of empty containers */
    nd->child = PyMem_Calloc((size_t)m, sizeof *nd->child);
    if (!nd->child) {
      PyErr_NoMemory();
      return -1;
    }
    nd->n_child = (size_t)m;
    for (Py_ssize_t i = 0; i < m; i++) {
      PyObject *item;
      char sub[sizeof nd->path];
      if (seq) {
        item = PySequence_Fast_GET_ITEM(x, i);
        PyObject *ix = PyLong_FromSsize_t(i);
        if (!ix) return -1;
        path_of(sub, sizeof sub, path, ix);
        Py_DECREF(ix);
      } else {
        PyObject *k = PyList_GET_ITEM(keys, i);
        item = PyDict_GetItemWithError(x, k);
        if (!item) return PyErr_Occurred() ? -1 : 1;
        path_of(sub, sizeof sub, path, k);
      }
      int rc = probe(&nd->child[i], item, n, pin, seq, sub);
      if (rc) return rc;
    }
    return 0;
  }
  return 1;
}

/* ---- adding a sample ------------------------------------------------------ */

static void shape_text(char *buf, size_t cap, int ndim, const Py_ssize_t *s) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, cap - k, "(");
  for (int i = 0; i < ndim && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, "%s%zd", i ? ", " : "", s[i]);
  if (k < cap) snprintf(buf + k, cap - k, "%s)", ndim == 1 ? "," : "");
}

static int push_copy(sk_copies *c, void *dst, const leaf_view *v) {
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 16;
    /* malloc, not PyMem: the copies are freed without the GIL. */
    sk_copy *p = realloc(c->v, cap * sizeof *p);
    if (!p) {
      PyErr_NoMemory();
      return -1;
    }
    c->v = p;
    c->cap = cap;
  }
  sk_copy *e = &c->v[c->n++];
  e->dst = dst;
  e->src = v->data;
  e->bytes = v->bytes;
  e->itemsize = v->itemsize;
  e->contiguous = v->contiguous;
  e->ndim = v->ndim;
  memcpy(e->shape, v->shape, sizeof v->shape);
  memcpy(e->strides, v->strides, sizeof v->strides);
  return 0;
}

/* A shape mismatch between two samples of one batch: torch's stack would
** fail too; say which samples and which shapes. */
static int shape_error(const sk_pbatch *pb, const sk_node *nd, size_t pos,
                       const leaf_view *v) {
  char want[128], got[128];
  shape_text(want, sizeof want, nd->ndim, nd->shape);
  shape_text(got, sizeof got, v->ndim, v->shape);
  PyErr_Format(PyExc_RuntimeError,
               "stoke.DataLoader: default_collate: sample %R (position %zu "
               "of batch %zu) has %s of shape %s at %s, but sample %R "
               "(position %zu) has %s: the samples of a batch must have one "
               "shape (pad or crop them, e.g. in a collate_fn)",
               pb->keys[pos], pos, pb->number,
               nd->kind == SK_NODE_TENSOR ? "a tensor" : "an array", got,
               nd->path[0] ? nd->path : "the sample", pb->keys[pb->probe_pos],
               pb->probe_pos, want);
  return -1;
}

/* Write x into row pos of nd's outputs.  0 ok; 1 irregular; -1 error. */
static int add(sk_pbatch *pb, sk_node *nd, PyObject *x, size_t pos,
               sk_copies *copies) {
  switch (nd->kind) {
  case SK_NODE_TENSOR:
  case SK_NODE_NDARRAY:
  case SK_NODE_NPSCALAR: {
    leaf_view v;
    int rc;
    if (nd->kind == SK_NODE_TENSOR) {
      if (Py_TYPE(x) != sk_tapi.tensor) return 1;
      PyObject *keep;
      rc = tensor_view(x, &v, &keep);
      if (keep) {
        int app = PyList_Append(pb->keep, keep);
        Py_DECREF(keep);
        if (app < 0) return -1;
      }
    } else {
      if (nd->kind == SK_NODE_NDARRAY ? Py_TYPE(x) != sk_tapi.ndarray
                                      : !PyObject_TypeCheck(x, sk_tapi.np_generic))
        return 1;
      rc = buffer_view(x, &v);
    }
    if (rc) return rc;
    if (v.dtype != nd->dtype) return 1; /* torch promotes: its collate */
    int same = v.ndim == nd->ndim;
    for (int i = 0; same && i < v.ndim; i++) same = v.shape[i] == nd->shape[i];
    if (!same) return shape_error(pb, nd, pos, &v);
    return push_copy(copies, nd->data + pos * nd->bytes, &v);
  }
  case SK_NODE_BOOL:
    if (!PyBool_Check(x)) return 1;
    ((uint8_t *)nd->data)[pos] = x == Py_True;
    return 0;
  case SK_NODE_INT: {
    if (!PyLong_CheckExact(x)) return 1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow) return 1; /* torch's error */
    if (v == -1 && PyErr_Occurred()) return -1;
    ((int64_t *)(void *)nd->data)[pos] = v;
    return 0;
  }
  case SK_NODE_FLOAT:
    if (!PyFloat_CheckExact(x)) return 1;
    ((double *)(void *)nd->data)[pos] = PyFloat_AS_DOUBLE(x);
    return 0;
  case SK_NODE_STR:
    if (!PyUnicode_Check(x) && !PyBytes_Check(x)) return 1;
    Py_INCREF(x);
    PyList_SetItem(nd->out, (Py_ssize_t)pos, x); /* steals x, drops None */
    return 0;
  case SK_NODE_TUPLE:
  case SK_NODE_LIST:
  case SK_NODE_NAMEDTUPLE: {
    int ok = nd->kind == SK_NODE_TUPLE  ? PyTuple_CheckExact(x)
             : nd->kind == SK_NODE_LIST ? PyList_CheckExact(x)
                                        : Py_TYPE(x) == (PyTypeObject *)nd->type;
    if (!ok || (size_t)PySequence_Fast_GET_SIZE(x) != nd->n_child) return 1;
    for (size_t i = 0; i < nd->n_child; i++) {
      int rc = add(pb, &nd->child[i], PySequence_Fast_GET_ITEM(x, i), pos,
                   copies);
      if (rc) return rc;
    }
    return 0;
  }
  case SK_NODE_DICT: {
    if (!PyDict_CheckExact(x) || (size_t)PyDict_GET_SIZE(x) != nd->n_child)
      return 1;
    for (size_t i = 0; i < nd->n_child; i++) {
      PyObject *item =
          PyDict_GetItemWithError(x, PyList_GET_ITEM(nd->keys, i));
      if (!item) return PyErr_Occurred() ? -1 : 1;
      int rc = add(pb, &nd->child[i], item, pos, copies);
      if (rc) return rc;
    }
    return 0;
  }
  }
  return 1;
}

/* The innermost dimension of a strided copy: n items of `size` bytes,
** `stride` bytes apart in src, contiguous in dst. */
static char *copy_row(char *dst, const char *src, Py_ssize_t n,
                      Py_ssize_t stride, size_t size) {
  if (stride == (Py_ssize_t)size) {
    memcpy(dst, src, (size_t)n * size);
    return dst + (size_t)n * size;
  }
  switch (size) {
  case 1:
    for (Py_ssize_t i = 0; i < n; i++) dst[i] = src[i * stride];
    break;
  case 2:
    for (Py_ssize_t i = 0; i < n; i++) memcpy(dst + 2 * i, src + i * stride, 2);
    break;
  case 4:
    for (Py_ssize_t i = 0; i < n; i++) memcpy(dst + 4 * i, src + i * stride, 4);
    break;
  case 8:
    for (Py_ssize_t i = 0; i < n; i++) memcpy(dst + 8 * i, src + i * stride, 8);
    break;
  default:
    for (Py_ssize_t i = 0; i < n; i++)
      memcpy(dst + size * (size_t)i, src + i * stride, size);
  }
  return dst + (size_t)n * size;
}

/* A strided array into a contiguous row, no GIL needed. */
static char *copy_strided(char *dst, const char *src, int ndim,
                          const Py_ssize_t *shape, const Py_ssize_t *strides,
                          size_t itemsize) {
  if (ndim == 0) {
    memcpy(dst, src, itemsize);
    return dst + itemsize;
  }
  if (ndim == 1) return copy_row(dst, src, shape[0], strides[0], itemsize);
  for (Py_ssize_t i = 0; i < shape[0]; i++)
    dst = copy_strided(dst, src + i * strides[0], ndim - 1, shape + 1,
                       strides + 1, itemsize);
  return dst;
}

void sk_copies_run(const sk_copies *c) {
  for (size_t i = 0; i < c->n; i++) {
    const sk_copy *e = &c->v[i];
    if (e->contiguous) {
      memcpy(e->dst, e->src, e->bytes);
    } else {
      copy_strided(e->dst, e->src, e->ndim, e->shape, e->strides,
                   e->itemsize);
    }
  }
}

void sk_copies_free(sk_copies *c) {
  free(c->v);
  c->v = NULL;
  c->n = c->cap = 0;
}

/* ---- a batch being built ------------------------------------------------- */

sk_pbatch *sk_pbatch_new(size_t n, uint64_t epoch, size_t number) {
  sk_pbatch *pb = PyMem_Calloc(1, sizeof *pb);
  if (!pb) {
    PyErr_NoMemory();
    return NULL;
  }
  pb->n = n;
  pb->epoch = epoch;
  pb->number = number;
  pb->samples = PyList_New((Py_ssize_t)n);
  pb->keep = PyList_New(0);
  pb->keys = PyMem_Calloc(n ? n : 1, sizeof *pb->keys);
  if (!pb->samples || !pb->keep || !pb->keys) {
    sk_pbatch_free(pb);
    PyErr_NoMemory();
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    PyList_SET_ITEM(pb->samples, (Py_ssize_t)i, Py_NewRef(Py_None));
    pb->keys[i] = NULL;
  }
  return pb;
}

void sk_pbatch_free(sk_pbatch *pb) {
  if (!pb) return;
  /* Nobody else reaches pb any more (its caller unlinked it), so the
  ** deallocations below may run any code, and release the GIL. */
  if (pb->probed) node_clear(&pb->root);
  Py_XDECREF(pb->samples);
  Py_XDECREF(pb->keep);
  Py_XDECREF(pb->result);
  Py_XDECREF(pb->error);
  if (pb->keys)
    for (size_t i = 0; i < pb->n; i++) Py_XDECREF(pb->keys[i]);
  PyMem_Free(pb->keys);
  PyMem_Free(pb);
}

static int add_sample(sk_pbatch *pb, PyObject *x, size_t pos, int fast,
                      int pin, sk_copies *copies);

int sk_pbatch_add(sk_pbatch *pb, PyObject *x, size_t pos, PyObject *key,
                  int fast, int pin, sk_copies *copies) {
  if (pos >= pb->n) {
    PyErr_Format(PyExc_SystemError, "stoke: position %zu of a batch of %zu",
                 pos, pb->n);
    return -1;
  }
  Py_INCREF(x);
  PyList_SetItem(pb->samples, (Py_ssize_t)pos, x);
  Py_XSETREF(pb->keys[pos], Py_NewRef(key));
  pb->received++;
  int rc = add_sample(pb, x, pos, fast, pin, copies);
  if (rc < 0) return -1;
  return ++pb->added == pb->n ? 1 : 0;
}

static int add_sample(sk_pbatch *pb, PyObject *x, size_t pos, int fast,
                      int pin, sk_copies *copies) {
  if (!fast || pb->irregular) return 0;
  if (!pb->probed) {
    /* probe() calls torch (torch.empty), which may release the GIL: another
    ** worker may add to this batch meanwhile.  So the layout is built
    ** aside and installed with no call in between; a worker that lost the
    ** race drops its own. */
    sk_node root;
    int rc = probe(&root, x, pb->n, pin, 0, "");
    if (pb->probed || pb->irregular) {
      node_clear(&root);
    } else if (rc == 0) {
      pb->root = root;
      pb->probe_pos = pos;
      pb->probed = 1;
    } else {
      node_clear(&root);
      if (rc < 0) return -1;
      pb->irregular = 1;
      return 0;
    }
    if (pb->irregular) return 0;
  }
  size_t before = copies->n;
  int rc = add(pb, &pb->root, x, pos, copies);
  if (rc > 0) {
    pb->irregular = 1;
    copies->n = before; /* its rows are not needed any more */
  }
  return rc < 0 ? -1 : 0;
}

/* torch's output of node nd (new reference). */
static PyObject *build(sk_node *nd) {
  switch (nd->kind) {
  case SK_NODE_STR:
    if (nd->str_tuple) return PyList_AsTuple(nd->out);
    return Py_NewRef(nd->out);
  case SK_NODE_TUPLE:
  case SK_NODE_LIST:
  case SK_NODE_NAMEDTUPLE:
  case SK_NODE_DICT: {
    PyObject *out = nd->kind == SK_NODE_DICT ? PyDict_New()
                                             : PyList_New((Py_ssize_t)nd->n_child);
    for (size_t i = 0; out && i < nd->n_child; i++) {
      PyObject *c = build(&nd->child[i]);
      if (!c) {
        Py_CLEAR(out);
        break;
      }
      if (nd->kind == SK_NODE_DICT) {
        int rc = PyDict_SetItem(out, PyList_GET_ITEM(nd->keys, i), c);
        Py_DECREF(c);
        if (rc < 0) Py_CLEAR(out);
      } else {
        PyList_SET_ITEM(out, (Py_ssize_t)i, c);
      }
    }
    if (out && nd->kind == SK_NODE_NAMEDTUPLE) {
      PyObject *args = PyList_AsTuple(out);
      Py_DECREF(out);
      out = args ? PyObject_Call(nd->type, args, NULL) : NULL;
      Py_XDECREF(args);
    }
    return out;
  }
  default:
    return Py_NewRef(nd->out);
  }
}

PyObject *sk_pbatch_finish(sk_pbatch *pb, PyObject *py_collate) {
  if (pb->probed && !pb->irregular) return build(&pb->root);
  return PyObject_CallOneArg(py_collate, pb->samples);
}
