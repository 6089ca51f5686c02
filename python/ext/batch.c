/* batch.c — batches in Python without a copy.
**
** A lent stoke_batch is wrapped once in an sk_bref (an atomic count).  Each
** thing Python may hold takes a count: a stoke.Batch, a stoke.Field (whose
** buffer exports NumPy arrays keep alive), and a DLPack managed tensor
** (torch keeps it until its tensor is freed).  The last count releases the
** batch's slot to the loader.  That release may happen in a DLPack deleter
** on any thread, without the GIL, even at interpreter shutdown, so it is
** pure C: an atomic decrement and stoke_batch_release, which the library
** allows after the loader was destroyed.
**
** DLPack, as Debian 12's torch 1.13 and numpy 1.24 speak it: the legacy
** capsule "dltensor" (dlpack.h 0.6 from libdlpack-dev), renamed
** "used_dltensor" by the consumer; device (kDLCPU, 0), also for pinned
** memory (torch 1.13 rejects kDLCUDAHost); byte_offset 0 with the offset
** in the data pointer (torch 1.13 ignores byte_offset).  A consumer asking
** for max_version >= (1, 0) gets DLPack 1.0's "dltensor_versioned"; that
** struct is not in dlpack.h 0.6, so it is declared here from the 1.0
** specification (dlpack.h 1.0: DLPackVersion, DLManagedTensorVersioned). */
#include "ext.h"

#include <dlpack/dlpack.h>
#include <stdlib.h>
#include <string.h>

/* ---- references ---------------------------------------------------------------- */

sk_bref *sk_bref_new(stoke_batch *b) {
  sk_bref *r = malloc(sizeof *r);
  if (!r) {
    stoke_batch_release(b);
    PyErr_NoMemory();
    return NULL;
  }
  atomic_init(&r->refs, 1);
  r->b = b;
  r->borrowed = 0;
  r->on_stream = 0;
  r->release_stream = 0;
  return r;
}

sk_bref *sk_bref_borrow(stoke_batch *b) {
  sk_bref *r = malloc(sizeof *r);
  if (!r) {
    PyErr_NoMemory();
    return NULL;
  }
  atomic_init(&r->refs, 1);
  r->b = b;
  r->borrowed = 1;
  r->on_stream = 0;
  r->release_stream = 0;
  return r;
}

void sk_bref_incref(sk_bref *r) {
  atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
}

void sk_bref_decref(sk_bref *r) {
  if (!r) return;
  /* acq_rel: the thread that releases sees every other holder's writes. */
  if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1) {
    if (r->borrowed)
      ; /* its owner releases it */
    else if (r->on_stream)
      stoke_batch_release_stream(r->b, r->release_stream);
    else
      stoke_batch_release(r->b);
    free(r);
  }
}

/* ---- dtypes ---------------------------------------------------------------------- */

/* DLPack 1.0's kDLBool (dlpack.h 0.8+); not in the 0.6 header. */
#define SK_DL_BOOL 6

/* bool: DLPack 0.6 has no bool type (torch 1.13 refuses to export or import
** one), so the legacy capsule says uint8 and the torch output views it as
** bool (to_array); DLPack 1.0 consumers get kDLBool. */
static DLDataType dl_dtype(int dtype, int versioned) {
  DLDataType t = {kDLUInt, 8, 1};
  switch (dtype) {
  case STOKE_U8: t.code = kDLUInt; t.bits = 8; break;
  case STOKE_I8: t.code = kDLInt; t.bits = 8; break;
  case STOKE_I16: t.code = kDLInt; t.bits = 16; break;
  case STOKE_I32: t.code = kDLInt; t.bits = 32; break;
  case STOKE_I64: t.code = kDLInt; t.bits = 64; break;
  case STOKE_F16: t.code = kDLFloat; t.bits = 16; break;
  case STOKE_BF16: t.code = kDLBfloat; t.bits = 16; break;
  case STOKE_F32: t.code = kDLFloat; t.bits = 32; break;
  case STOKE_F64: t.code = kDLFloat; t.bits = 64; break;
  case STOKE_BOOL:
    t.code = versioned ? SK_DL_BOOL : kDLUInt;
    t.bits = 8;
    break;
  }
  return t;
}

/* The buffer protocol's format character (struct module syntax). */
static const char *buffer_format(int dtype) {
  switch (dtype) {
  case STOKE_U8: return "B";
  case STOKE_I8: return "b";
  case STOKE_I16: return "h";
  case STOKE_BOOL: return "?";
  case STOKE_I32: return "i";
  case STOKE_I64: return "q";
  case STOKE_F16: return "e";
  case STOKE_F32: return "f";
  case STOKE_F64: return "d";
  }
  return "B";
}

/* ---- DLPack capsules ---------------------------------------------------------------- */

typedef struct sk_dlpack_version {
  uint32_t major, minor;
} sk_dlpack_version;

typedef struct sk_managed_versioned {
  sk_dlpack_version version;
  void *manager_ctx;
  void (*deleter)(struct sk_managed_versioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} sk_managed_versioned;

/* One allocation per export: the managed tensor, its shape and strides,
** and the batch count it holds. */
typedef struct sk_export {
  DLManagedTensor legacy;
  sk_managed_versioned versioned;
  int64_t shape[STOKE_MAX_DIMS + 1];
  int64_t strides[STOKE_MAX_DIMS + 1];
  sk_bref *ref;
} sk_export;

static void export_free(sk_export *e) {
  sk_bref_decref(e->ref);
  free(e);
}

static void legacy_deleter(DLManagedTensor *mt) {
  export_free(mt->manager_ctx);
}

static void versioned_deleter(sk_managed_versioned *mt) {
  export_free(mt->manager_ctx);
}

/* A capsule nobody consumed still owns its tensor. */
static void legacy_capsule_free(PyObject *cap) {
  if (PyCapsule_IsValid(cap, "dltensor")) {
    DLManagedTensor *mt = PyCapsule_GetPointer(cap, "dltensor");
    mt->deleter(mt);
  }
}

static void versioned_capsule_free(PyObject *cap) {
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    sk_managed_versioned *mt = PyCapsule_GetPointer(cap, "dltensor_versioned");
    mt->deleter(mt);
  }
}

PyObject *sk_capsule_new(sk_bref *r, size_t f, int versioned) {
  stoke_tensor t;
  if (stoke_batch_field(r->b, f, &t) != 0)
    return PyErr_Format(PyExc_IndexError, "no field %zu", f);
  sk_export *e = calloc(1, sizeof *e);
  if (!e) return PyErr_NoMemory();
  DLTensor dl = {0};
  dl.data = t.data;
  int dev = -1;
  if (stoke_batch_memory(r->b, &dev) == STOKE_MEMORY_CUDA) {
    dl.device.device_type = kDLCUDA;
    dl.device.device_id = dev;
  } else {
    /* Pinned memory too: torch 1.13 rejects kDLCUDAHost. */
    dl.device.device_type = kDLCPU;
    dl.device.device_id = 0;
  }
  dl.ndim = t.ndim;
  dl.dtype = dl_dtype(t.dtype, versioned);
  int64_t stride = 1;
  for (int i = t.ndim - 1; i >= 0; i--) {
    e->shape[i] = t.shape[i];
    e->strides[i] = stride;
    stride *= t.shape[i] > 0 ? t.shape[i] : 1;
  }
  dl.shape = e->shape;
  dl.strides = e->strides;
  dl.byte_offset = 0;
  sk_bref_incref(r);
  e->ref = r;
  PyObject *cap;
  if (versioned) {
    e->versioned.version = (sk_dlpack_version){1, 0};
    e->versioned.manager_ctx = e;
    e->versioned.deleter = versioned_deleter;
    e->versioned.flags = 0; /* writable, not a copy */
    e->versioned.dl_tensor = dl;
    cap = PyCapsule_New(&e->versioned, "dltensor_versioned",
                        versioned_capsule_free);
  } else {
    e->legacy.dl_tensor = dl;
    e->legacy.manager_ctx = e;
    e->legacy.deleter = legacy_deleter;
    cap = PyCapsule_New(&e->legacy, "dltensor", legacy_capsule_free);
  }
  if (!cap) export_free(e);
  return cap;
}

/* ---- stoke.Field ------------------------------------------------------------------ */

typedef struct sk_Field {
  PyObject_HEAD
  sk_bref *ref;
  size_t index;
  stoke_tensor t;
  Py_ssize_t shape[STOKE_MAX_DIMS + 1];
  Py_ssize_t strides[STOKE_MAX_DIMS + 1];
} sk_Field;

static PyObject *field_new(sk_bref *r, size_t f) {
  sk_Field *self = PyObject_New(sk_Field, &sk_FieldType);
  if (!self) return NULL;
  if (stoke_batch_field(r->b, f, &self->t) != 0) {
    self->ref = NULL;
    Py_DECREF(self);
    return PyErr_Format(PyExc_IndexError, "no field %zu", f);
  }
  sk_bref_incref(r);
  self->ref = r;
  self->index = f;
  Py_ssize_t stride = (Py_ssize_t)stoke_dtype_size(self->t.dtype);
  for (int i = self->t.ndim - 1; i >= 0; i--) {
    self->shape[i] = (Py_ssize_t)self->t.shape[i];
    self->strides[i] = stride;
    stride *= self->shape[i];
  }
  return (PyObject *)self;
}

static void field_dealloc(sk_Field *self) {
  sk_bref_decref(self->ref);
  PyObject_Free(self);
}

/* The field's memory: a stoke_memory, *dev its CUDA ordinal. */
static int field_memory(const sk_Field *self, int *dev) {
  return stoke_batch_memory(self->ref->b, dev);
}

static int field_getbuffer(sk_Field *self, Py_buffer *view, int flags) {
  if (self->t.dtype == STOKE_BF16) {
    PyErr_SetString(PyExc_BufferError,
                    "bfloat16 has no buffer format (NumPy has no such type): "
                    "take the field as a torch tensor (field.torch())");
    view->obj = NULL;
    return -1;
  }
  int dev = -1;
  if (field_memory(self, &dev) == STOKE_MEMORY_CUDA) {
    PyErr_Format(PyExc_BufferError,
                 "field '%s' is in the memory of CUDA device %d: no buffer "
                 "on the host (use __dlpack__, e.g. torch.from_dlpack)",
                 self->t.name ? self->t.name : "", dev);
    view->obj = NULL;
    return -1;
  }
  view->obj = (PyObject *)self;
  Py_INCREF(self);
  view->buf = self->t.data;
  view->len = (Py_ssize_t)self->t.n_bytes;
  view->readonly = 0;
  view->itemsize = (Py_ssize_t)stoke_dtype_size(self->t.dtype);
  view->format = (flags & PyBUF_FORMAT) ? (char *)buffer_format(self->t.dtype)
                                        : NULL;
  view->ndim = self->t.ndim;
  view->shape = (flags & PyBUF_ND) ? self->shape : NULL;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? self->strides
                                                           : NULL;
  view->suboffsets = NULL;
  view->internal = NULL;
  return 0;
}

static PyBufferProcs field_as_buffer = {(getbufferproc)field_getbuffer, NULL};

/* DLPack's (device type, ordinal) of memory. */
static PyObject *want_device(int memory, int dev) {
  if (memory == STOKE_MEMORY_CUDA) return Py_BuildValue("(ii)", kDLCUDA, dev);
  return Py_BuildValue("(ii)", kDLCPU, 0);
}

/* Arguments torch and numpy pass (stream, max_version, dl_device, copy);
** others are ignored, as the array API asks. */
static PyObject *field_dlpack(sk_Field *self, PyObject *args, PyObject *kw) {
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None,
           *copy = Py_None;
  if (args && PyTuple_GET_SIZE(args) > 0) stream = PyTuple_GET_ITEM(args, 0);
  if (kw) {
    PyObject *v;
    if ((v = PyDict_GetItemString(kw, "stream"))) stream = v;
    if ((v = PyDict_GetItemString(kw, "max_version"))) max_version = v;
    if ((v = PyDict_GetItemString(kw, "dl_device"))) dl_device = v;
    if ((v = PyDict_GetItemString(kw, "copy"))) copy = v;
  }
  int dev = -1;
  int memory = field_memory(self, &dev);
  if (copy == Py_True) {
    PyErr_SetString(PyExc_BufferError,
                    "stoke batches are shared, not copied (copy=True)");
    return NULL;
  }
  if (dl_device != Py_None) {
    PyObject *want = want_device(memory, dev);
    int same = want ? PyObject_RichCompareBool(dl_device, want, Py_EQ) : -1;
    if (same == 0)
      PyErr_Format(PyExc_BufferError, "this field lives on %R, not %R",
                   want, dl_device);
    Py_XDECREF(want);
    if (same != 1) return NULL;
  }
  if (memory == STOKE_MEMORY_CUDA) {
    /* The stream protocol: the consumer's stream waits on the copy, on
    ** the GPU; the host never does.  The array API's CUDA values: None
    ** and 1 are the legacy default stream, 2 the per-thread default, a
    ** larger number a stream handle, and -1 "do not synchronise" (the
    ** consumer orders its work itself).  0 is refused: it could mean the
    ** legacy or the per-thread stream, and guessing would race. */
    uintptr_t s = 1;
    int wait = 1;
    if (stream != Py_None) {
      long long v = PyLong_AsLongLong(stream);
      if (v == -1 && PyErr_Occurred()) return NULL;
      if (v == 0 || v < -1) {
        PyErr_Format(PyExc_ValueError,
                     "__dlpack__: stream=%lld is not a CUDA stream (use None "
                     "or 1 for the legacy default stream, 2 for the "
                     "per-thread default, a stream handle, or -1 for no "
                     "synchronisation)", v);
        return NULL;
      }
      if (v == -1) wait = 0;
      else s = (uintptr_t)v;
    }
    if (wait) {
      int rc = stoke_batch_wait_stream(self->ref->b, s);
      if (rc != 0) return sk_raise(rc, "cannot make the stream wait for the "
                                       "batch's copy");
    }
  }
  int versioned = 0;
  if (max_version != Py_None) {
    if (!PyTuple_Check(max_version) || PyTuple_GET_SIZE(max_version) < 1) {
      PyErr_SetString(PyExc_TypeError, "max_version: expected (major, minor)");
      return NULL;
    }
    long major = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 0));
    if (major == -1 && PyErr_Occurred()) return NULL;
    versioned = major >= 1;
  }
  return sk_capsule_new(self->ref, self->index, versioned);
}

static PyObject *field_dlpack_device(sk_Field *self, PyObject *noargs) {
  int dev = -1;
  int memory = field_memory(self, &dev); /* before dev is read */
  return want_device(memory, dev);
}

static PyObject *field_numpy(sk_Field *self, PyObject *noargs) {
  PyObject *np = PyImport_ImportModule("numpy");
  if (!np) return NULL;
  PyObject *a = PyObject_CallMethod(np, "asarray", "O", self);
  Py_DECREF(np);
  return a;
}

/* A uint8 tensor of a bool field seen as bool (same memory). */
static PyObject *as_bool(PyObject *t, int dtype) {
  if (!t || dtype != STOKE_BOOL) return t;
  PyObject *torch = PyImport_ImportModule("torch");
  PyObject *b = torch ? PyObject_GetAttrString(torch, "bool") : NULL;
  PyObject *v = b ? PyObject_CallMethod(t, "view", "O", b) : NULL;
  Py_XDECREF(b);
  Py_XDECREF(torch);
  Py_DECREF(t);
  return v;
}

static PyObject *field_torch(sk_Field *self, PyObject *noargs) {
  PyObject *m = PyImport_ImportModule("torch.utils.dlpack");
  if (!m) return NULL;
  PyObject *cap = sk_capsule_new(self->ref, self->index, 0);
  PyObject *t = cap ? PyObject_CallMethod(m, "from_dlpack", "O", cap) : NULL;
  Py_XDECREF(cap);
  Py_DECREF(m);
  return as_bool(t, self->t.dtype);
}

static PyObject *field_get_shape(sk_Field *self, void *c) {
  PyObject *s = PyTuple_New(self->t.ndim);
  for (int i = 0; s && i < self->t.ndim; i++)
    PyTuple_SET_ITEM(s, i, PyLong_FromLongLong(self->t.shape[i]));
  return s;
}

static PyObject *field_get_dtype(sk_Field *self, void *c) {
  return PyUnicode_FromString(stoke_dtype_name(self->t.dtype));
}

static PyObject *field_get_name(sk_Field *self, void *c) {
  return PyUnicode_FromString(self->t.name ? self->t.name : "");
}

static PyObject *field_get_nbytes(sk_Field *self, void *c) {
  return PyLong_FromSize_t(self->t.n_bytes);
}

static PyObject *field_get_memory(sk_Field *self, void *c) {
  int dev = -1;
  int m = field_memory(self, &dev);
  return PyUnicode_FromString(m == STOKE_MEMORY_CUDA     ? "cuda"
                              : m == STOKE_MEMORY_PINNED ? "pinned"
                                                         : "host");
}

static PyObject *field_get_data_ptr(sk_Field *self, void *c) {
  return PyLong_FromVoidPtr(self->t.data);
}

static Py_ssize_t field_len(sk_Field *self) {
  return self->t.ndim > 0 ? (Py_ssize_t)self->t.shape[0] : 0;
}

static PyObject *field_repr(sk_Field *self) {
  char shape[128] = "";
  size_t n = 0;
  for (int i = 0; i < self->t.ndim && n < sizeof shape - 24; i++)
    n += (size_t)snprintf(shape + n, sizeof shape - n, "%s%lld",
                          i ? ", " : "", (long long)self->t.shape[i]);
  return PyUnicode_FromFormat("<stoke.Field %s: (%s) %s>",
                              self->t.name ? self->t.name : "", shape,
                              stoke_dtype_name(self->t.dtype));
}

static PyMethodDef field_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))field_dlpack,
     METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(stream=None, *, max_version=None, dl_device=None, "
     "copy=None): a DLPack capsule sharing this field's memory."},
    {"__dlpack_device__", (PyCFunction)field_dlpack_device, METH_NOARGS,
     "(1, 0) for host memory (pinned too), (2, N) for CUDA device N."},
    {"numpy", (PyCFunction)field_numpy, METH_NOARGS,
     "An ndarray sharing this field's memory."},
    {"torch", (PyCFunction)field_torch, METH_NOARGS,
     "A torch tensor sharing this field's memory."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef field_getset[] = {
    {"shape", (getter)field_get_shape, NULL, "(batch, ...)", NULL},
    {"dtype", (getter)field_get_dtype, NULL, "'u8', 'i64', 'f32', ...", NULL},
    {"name", (getter)field_get_name, NULL, "the field's name", NULL},
    {"nbytes", (getter)field_get_nbytes, NULL, "bytes of the field", NULL},
    {"memory", (getter)field_get_memory, NULL,
     "'host', 'pinned' or 'cuda' (then data_ptr is a device pointer)", NULL},
    {"data_ptr", (getter)field_get_data_ptr, NULL,
     "address of the first byte (for tests and interop)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PySequenceMethods field_as_sequence = {.sq_length =
                                                  (lenfunc)field_len};

PyTypeObject sk_FieldType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stoke.Field",
    .tp_basicsize = sizeof(sk_Field),
    .tp_dealloc = (destructor)field_dealloc,
    .tp_repr = (reprfunc)field_repr,
    .tp_as_sequence = &field_as_sequence,
    .tp_as_buffer = &field_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One field of a batch (all its samples): shares the batch's "
              "memory through __dlpack__ and the buffer protocol.",
    .tp_methods = field_methods,
    .tp_getset = field_getset,
};

/* ---- stoke.Batch ------------------------------------------------------------------ */

typedef struct sk_Batch {
  PyObject_HEAD
  sk_bref *ref;      /* NULL once released */
  PyObject *names;   /* tuple of str */
  size_t n_fields, n, number;
  uint64_t epoch;
  PyObject *fields[STOKE_MAX_FIELDS]; /* made on first use */
} sk_Batch;

static PyObject *batch_new(sk_bref *r, PyObject *names) {
  sk_Batch *self = PyObject_New(sk_Batch, &sk_BatchType);
  if (!self) {
    sk_bref_decref(r);
    return NULL;
  }
  self->ref = r;
  Py_INCREF(names);
  self->names = names;
  self->n_fields = stoke_batch_n_fields(r->b);
  self->n = stoke_batch_size(r->b);
  self->number = stoke_batch_number(r->b);
  self->epoch = stoke_batch_epoch(r->b);
  memset(self->fields, 0, sizeof self->fields);
  return (PyObject *)self;
}

static void batch_drop(sk_Batch *self) {
  for (size_t f = 0; f < STOKE_MAX_FIELDS; f++) Py_CLEAR(self->fields[f]);
  sk_bref *r = self->ref;
  self->ref = NULL;
  sk_bref_decref(r);
}

static void batch_dealloc(sk_Batch *self) {
  batch_drop(self);
  Py_XDECREF(self->names);
  PyObject_Free(self);
}

static int batch_live(sk_Batch *self) {
  if (self->ref) return 1;
  PyErr_SetString(sk_err.Error,
                  "this batch was released (batch.release()): its memory is "
                  "back in the loader's pool");
  return 0;
}

static PyObject *batch_field(sk_Batch *self, size_t f) {
  if (!batch_live(self)) return NULL;
  if (!self->fields[f] && !(self->fields[f] = field_new(self->ref, f)))
    return NULL;
  Py_INCREF(self->fields[f]);
  return self->fields[f];
}

/* The index of field `name`, or -1 (no exception). */
static Py_ssize_t field_index(sk_Batch *self, PyObject *name) {
  Py_ssize_t n = PyTuple_GET_SIZE(self->names);
  for (Py_ssize_t i = 0; i < n; i++) {
    int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(self->names, i), name,
                                      Py_EQ);
    if (eq < 0) {
      PyErr_Clear();
      return -1;
    }
    if (eq) return i;
  }
  return -1;
}

static PyObject *batch_subscript(sk_Batch *self, PyObject *key) {
  Py_ssize_t f;
  if (PyUnicode_Check(key)) {
    f = field_index(self, key);
    if (f < 0) return PyErr_Format(PyExc_KeyError, "no field %R (fields %R)",
                                   key, self->names);
  } else {
    f = PyNumber_AsSsize_t(key, PyExc_IndexError);
    if (f == -1 && PyErr_Occurred()) return NULL;
    if (f < 0) f += (Py_ssize_t)self->n_fields;
    if (f < 0 || (size_t)f >= self->n_fields)
      return PyErr_Format(PyExc_IndexError, "field index out of range");
  }
  return batch_field(self, (size_t)f);
}

static PyObject *batch_getattro(sk_Batch *self, PyObject *name) {
  PyObject *v = PyObject_GenericGetAttr((PyObject *)self, name);
  if (v || !PyErr_ExceptionMatches(PyExc_AttributeError)) return v;
  Py_ssize_t f = field_index(self, name);
  if (f < 0) return NULL; /* the AttributeError stands */
  PyErr_Clear();
  return batch_field(self, (size_t)f);
}

static Py_ssize_t batch_len(sk_Batch *self) {
  return (Py_ssize_t)self->n_fields;
}

static PyObject *batch_item(sk_Batch *self, Py_ssize_t i) {
  if (i < 0 || (size_t)i >= self->n_fields) {
    PyErr_SetString(PyExc_IndexError, "field index out of range");
    return NULL;
  }
  return batch_field(self, (size_t)i);
}

static PyObject *batch_release(sk_Batch *self, PyObject *noargs) {
  batch_drop(self);
  Py_RETURN_NONE;
}

static PyObject *batch_enter(sk_Batch *self, PyObject *noargs) {
  if (!batch_live(self)) return NULL;
  Py_INCREF(self);
  return (PyObject *)self;
}

static PyObject *batch_exit(sk_Batch *self, PyObject *args) {
  batch_drop(self);
  Py_RETURN_FALSE;
}

static PyObject *batch_keys(sk_Batch *self, PyObject *noargs) {
  return PySequence_List(self->names);
}

static PyObject *batch_get_indices(sk_Batch *self, void *c) {
  if (!batch_live(self)) return NULL;
  const size_t *ix = stoke_batch_indices(self->ref->b);
  PyObject *l = PyList_New((Py_ssize_t)self->n);
  for (size_t i = 0; l && i < self->n; i++) {
    PyObject *v = PyLong_FromSize_t(ix[i]);
    if (!v) {
      Py_CLEAR(l);
      break;
    }
    PyList_SET_ITEM(l, (Py_ssize_t)i, v);
  }
  return l;
}

static PyObject *batch_get_size(sk_Batch *self, void *c) {
  return PyLong_FromSize_t(self->n);
}
static PyObject *batch_get_number(sk_Batch *self, void *c) {
  return PyLong_FromSize_t(self->number);
}
static PyObject *batch_get_epoch(sk_Batch *self, void *c) {
  return PyLong_FromUnsignedLongLong(self->epoch);
}
static PyObject *batch_get_n_skipped(sk_Batch *self, void *c) {
  if (!batch_live(self)) return NULL;
  return PyLong_FromSize_t(stoke_batch_n_skipped(self->ref->b));
}
static PyObject *batch_get_n_replaced(sk_Batch *self, void *c) {
  if (!batch_live(self)) return NULL;
  return PyLong_FromSize_t(stoke_batch_n_replaced(self->ref->b));
}
static PyObject *batch_get_released(sk_Batch *self, void *c) {
  return PyBool_FromLong(self->ref == NULL);
}
static PyObject *batch_get_names(sk_Batch *self, void *c) {
  Py_INCREF(self->names);
  return self->names;
}

static PyObject *batch_repr(sk_Batch *self) {
  return PyUnicode_FromFormat("<stoke.Batch %zu of epoch %llu: %zu samples, "
                              "fields %R%s>",
                              self->number, (unsigned long long)self->epoch,
                              self->n, self->names,
                              self->ref ? "" : ", released");
}

static PyMethodDef batch_methods[] = {
    {"release", (PyCFunction)batch_release, METH_NOARGS,
     "Give up this batch's hold on its slot now; it returns to the pool "
     "once no array made from it is alive.  Using the batch afterwards "
     "raises."},
    {"keys", (PyCFunction)batch_keys, METH_NOARGS, "The field names."},
    {"__enter__", (PyCFunction)batch_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)batch_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef batch_getset[] = {
    {"indices", (getter)batch_get_indices, NULL,
     "the source indices of the samples, in batch order", NULL},
    {"size", (getter)batch_get_size, NULL, "samples in the batch", NULL},
    {"number", (getter)batch_get_number, NULL, "position in its epoch", NULL},
    {"epoch", (getter)batch_get_epoch, NULL, "the epoch number", NULL},
    {"released", (getter)batch_get_released, NULL, "release() was called",
     NULL},
    {"n_skipped", (getter)batch_get_n_skipped, NULL,
     "bad samples left out of this batch (on_error='skip')", NULL},
    {"n_replaced", (getter)batch_get_n_replaced, NULL,
     "samples of this batch standing in for bad ones (on_error='replace')",
     NULL},
    {"names", (getter)batch_get_names, NULL, "the field names", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMappingMethods batch_as_mapping = {
    .mp_length = (lenfunc)batch_len,
    .mp_subscript = (binaryfunc)batch_subscript};

static PySequenceMethods batch_as_sequence = {
    .sq_length = (lenfunc)batch_len, .sq_item = (ssizeargfunc)batch_item};

PyTypeObject sk_BatchType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stoke.Batch",
    .tp_basicsize = sizeof(sk_Batch),
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_repr = (reprfunc)batch_repr,
    .tp_as_sequence = &batch_as_sequence,
    .tp_as_mapping = &batch_as_mapping,
    .tp_getattro = (getattrofunc)batch_getattro,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A batch lent by a loader.  Fields by name (batch.image, "
              "batch['image']) or position (x, y = batch); each is a "
              "stoke.Field sharing the batch's memory.  The slot returns to "
              "the pool when the batch and every array made from it are "
              "gone, or at release().",
    .tp_methods = batch_methods,
    .tp_getset = batch_getset,
};

/* ---- delivery ------------------------------------------------------------------- */

static PyObject *to_array(sk_bref *r, size_t f, const sk_output *out) {
  if (out->mode == SK_OUT_TORCH) {
    PyObject *cap = sk_capsule_new(r, f, 0);
    if (!cap) return NULL;
    PyObject *t = PyObject_CallOneArg(out->to_torch, cap);
    Py_DECREF(cap);
    stoke_tensor ft;
    if (t && stoke_batch_field(r->b, f, &ft) == 0) t = as_bool(t, ft.dtype);
    return t;
  }
  PyObject *field = field_new(r, f);
  if (!field) return NULL;
  PyObject *a = PyObject_CallOneArg(out->to_numpy, field);
  Py_DECREF(field);
  return a;
}

/* A pinned or device batch going to torch is released after the work
** torch queues on its current stream meanwhile (x.to("cuda",
** non_blocking=True); del x).  0, or -1 with an exception. */
static int capture_stream(sk_bref *r, const sk_output *out) {
  if (!out->stream || stoke_batch_memory(r->b, NULL) == STOKE_MEMORY_HOST)
    return 0;
  /* torch.cuda.current_stream() gives a Stream (.cuda_stream is the
  ** CUstream); a caller's callable may give the handle itself. */
  PyObject *s = PyObject_CallNoArgs(out->stream);
  PyObject *h = !s ? NULL
                : PyLong_Check(s) ? Py_NewRef(s)
                                  : PyObject_GetAttrString(s, "cuda_stream");
  Py_XDECREF(s);
  if (!h) return -1;
  unsigned long long v = PyLong_AsUnsignedLongLong(h);
  Py_DECREF(h);
  if (PyErr_Occurred()) return -1;
  r->on_stream = 1;
  r->release_stream = (uintptr_t)v;
  /* The stream current at this delivery is the one torch's kernels will
  ** read the batch on: it waits for the copy here, each time, as the
  ** release is recorded on it (next() only made cfg.cuda_stream wait). */
  if (stoke_batch_memory(r->b, NULL) == STOKE_MEMORY_CUDA) {
    int rc = stoke_batch_wait_stream(r->b, r->release_stream);
    if (rc != 0) {
      sk_raise(rc, "cannot make torch's current stream wait for the "
                   "batch's copy");
      return -1;
    }
  }
  return 0;
}

PyObject *sk_deliver(sk_bref *r, const sk_output *out) {
  if (capture_stream(r, out) < 0) {
    sk_bref_decref(r);
    return NULL;
  }
  if (out->mode == SK_OUT_STOKE) return batch_new(r, out->names);
  size_t n = stoke_batch_n_fields(r->b);
  PyObject *res = NULL;
  if (out->layout == SK_LAYOUT_SINGLE) {
    res = to_array(r, 0, out);
  } else if (out->layout == SK_LAYOUT_DICT) {
    res = PyDict_New();
    for (size_t f = 0; res && f < n; f++) {
      PyObject *a = to_array(r, f, out);
      if (!a || PyDict_SetItem(res, PyTuple_GET_ITEM(out->names, f), a) < 0)
        Py_CLEAR(res);
      Py_XDECREF(a);
    }
  } else {
    res = PyTuple_New((Py_ssize_t)n);
    for (size_t f = 0; res && f < n; f++) {
      PyObject *a = to_array(r, f, out);
      if (!a) {
        Py_CLEAR(res);
        break;
      }
      PyTuple_SET_ITEM(res, (Py_ssize_t)f, a);
    }
  }
  sk_bref_decref(r); /* the arrays hold their own counts */
  return res;
}
