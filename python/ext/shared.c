/* shared.c — atomics on shared memory, for stoke.DataLoader's worker
** processes (python/stoke/_procs.py).
**
** The processes share int64 counters in one shared-memory block (a torch
** tensor moved to shared memory, seen here through the buffer protocol of
** its NumPy view): the next unit of work to claim, and what each worker
** holds.  A claim must be one atomic fetch-and-add, so that every unit is
** made exactly once and in the order the main process published them,
** whichever process asks first. */
#include "ext.h"

#include <stdatomic.h>
#include <stdint.h>

/* The int64 at slot k of buf (writable, C-contiguous, 8-byte aligned),
** or NULL with an exception.  view is released by the caller. */
static _Atomic int64_t *slot_of(PyObject *buf, Py_ssize_t k, Py_buffer *view) {
  if (PyObject_GetBuffer(buf, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
    return NULL;
  if (k < 0 || (size_t)(k + 1) * sizeof(int64_t) > (size_t)view->len ||
      ((uintptr_t)view->buf % _Alignof(int64_t)) != 0) {
    PyBuffer_Release(view);
    PyErr_Format(PyExc_IndexError,
                 "shared counter %zd: outside the block or misaligned", k);
    return NULL;
  }
  return (_Atomic int64_t *)view->buf + k;
}

/* shared_fetch_add(buf, k, delta) -> the value before. */
PyObject *sk_shared_fetch_add(PyObject *mod, PyObject *args) {
  PyObject *buf;
  Py_ssize_t k;
  long long delta;
  if (!PyArg_ParseTuple(args, "OnL", &buf, &k, &delta)) return NULL;
  Py_buffer view;
  _Atomic int64_t *p = slot_of(buf, k, &view);
  if (!p) return NULL;
  int64_t old = atomic_fetch_add_explicit(p, (int64_t)delta,
                                          memory_order_acq_rel);
  PyBuffer_Release(&view);
  return PyLong_FromLongLong(old);
}

/* shared_load(buf, k) -> the value (acquire). */
PyObject *sk_shared_load(PyObject *mod, PyObject *args) {
  PyObject *buf;
  Py_ssize_t k;
  if (!PyArg_ParseTuple(args, "On", &buf, &k)) return NULL;
  Py_buffer view;
  _Atomic int64_t *p = slot_of(buf, k, &view);
  if (!p) return NULL;
  int64_t v = atomic_load_explicit(p, memory_order_acquire);
  PyBuffer_Release(&view);
  return PyLong_FromLongLong(v);
}

/* shared_store(buf, k, value) (release). */
PyObject *sk_shared_store(PyObject *mod, PyObject *args) {
  PyObject *buf;
  Py_ssize_t k;
  long long v;
  if (!PyArg_ParseTuple(args, "OnL", &buf, &k, &v)) return NULL;
  Py_buffer view;
  _Atomic int64_t *p = slot_of(buf, k, &view);
  if (!p) return NULL;
  atomic_store_explicit(p, (int64_t)v, memory_order_release);
  PyBuffer_Release(&view);
  Py_RETURN_NONE;
}
