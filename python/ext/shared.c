/* shared.c — atomics on shared memory, for stoke.DataLoader's worker
** processes (python/stoke/_procs.py).
**
** The processes share int64 counters in one shared-memory block (a torch
** tensor moved to shared memory, seen here through the buffer protocol of
** its NumPy view): the next unit of work to claim, and what each worker
** holds.  A claim must be one atomic fetch-and-add, so that every unit is
** made exactly once and in the order the main process published them,
** whichever process asks first.
**
** Beside them, the stage block (stoke_stage_block): what each worker
** measured of its samples, which the main process's clock reads
** (python/stoke/_procstats.py). */
#include "ext.h"

#include <errno.h>
#include <semaphore.h>
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

/* stage_block_bytes(n) -> the bytes (0: n is 0 or too large). */
PyObject *sk_stage_block_bytes(PyObject *mod, PyObject *args) {
  unsigned n;
  if (!PyArg_ParseTuple(args, "I", &n)) return NULL;
  return PyLong_FromSize_t(stoke_stage_block_bytes(n));
}

/* stage_block_init(buf, n): zero buf as a block for n workers. */
PyObject *sk_stage_block_init(PyObject *mod, PyObject *args) {
  PyObject *buf;
  unsigned n;
  if (!PyArg_ParseTuple(args, "OI", &buf, &n)) return NULL;
  Py_buffer view;
  if (PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
    return NULL;
  int rc = stoke_stage_block_init(view.buf, (size_t)view.len, n);
  PyBuffer_Release(&view);
  if (rc != 0)
    return PyErr_Format(PyExc_ValueError,
                        "stage block: %zd bytes at %p cannot hold %u workers",
                        view.len, view.buf, n);
  Py_RETURN_NONE;
}

/* stage_record(buf, w, read_ns, python_ns, collate_ns, busy_ns, cpu_ns):
** the stages of one sample made by worker w, in the stages' order of a
** thread's Python sample; its gil_wait is 0 (the process's GIL is its
** own).  The hot path of every sample: no lock, no allocation. */
PyObject *sk_stage_record(PyObject *mod, PyObject *args) {
  PyObject *buf;
  unsigned w;
  long long rd, py, co, busy, cpu;
  if (!PyArg_ParseTuple(args, "OILLLLL", &buf, &w, &rd, &py, &co, &busy,
                        &cpu))
    return NULL;
  int64_t ns[STOKE_STAGE_COUNT];
  for (int s = 0; s < STOKE_STAGE_COUNT; s++) ns[s] = -1;
  ns[STOKE_STAGE_READ] = rd;
  ns[STOKE_STAGE_PYTHON] = py;
  ns[STOKE_STAGE_GIL_WAIT] = 0;
  ns[STOKE_STAGE_COLLATE] = co;
  Py_buffer view;
  if (PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
    return NULL;
  /* The block's header says how many workers it has; the buffer must
  ** hold them all (a header alone could claim more). */
  size_t need = stoke_stage_block_bytes(w + 1);
  int rc = need && (size_t)view.len >= need
               ? stoke_stage_block_record(view.buf, w, ns, busy, cpu)
               : STOKE_EINVAL;
  PyBuffer_Release(&view);
  if (rc != 0)
    return PyErr_Format(PyExc_ValueError,
                        "stage block: worker %u outside it, or not a block",
                        w);
  Py_RETURN_NONE;
}

/* seed_mix(*words) -> a 63-bit seed: splitmix64 over each word's low 64
** bits, as _procs._mix (the per-sample seed of (base seed, epoch, key)),
** without the Python arithmetic it costs on every sample. */
PyObject *sk_seed_mix(PyObject *mod, PyObject *args) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *w = PyTuple_GET_ITEM(args, i);
    if (!PyLong_Check(w))
      return PyErr_Format(PyExc_TypeError, "seed_mix: word %zd is not an int",
                          i);
    uint64_t v = PyLong_AsUnsignedLongLongMask(w);
    if (v == (uint64_t)-1 && PyErr_Occurred()) return NULL;
    h ^= v;
    h += 0x9E3779B97F4A7C15ull;
    uint64_t z = h;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    h = z ^ (z >> 31);
  }
  return PyLong_FromUnsignedLongLong(h & ((1ull << 63) - 1));
}

/* The sem_t of a multiprocessing SemLock's handle, or NULL with an
** exception. */
static sem_t *sem_of(PyObject *handle) {
  void *p = PyLong_AsVoidPtr(handle);
  if (!p && !PyErr_Occurred())
    PyErr_SetString(PyExc_ValueError, "semaphore: a null handle");
  return (sem_t *)p;
}

/* sem_post_n(handle, n): post a multiprocessing semaphore n times (one
** token per unit published) in one call. */
PyObject *sk_sem_post_n(PyObject *mod, PyObject *args) {
  PyObject *handle;
  Py_ssize_t n;
  if (!PyArg_ParseTuple(args, "On", &handle, &n)) return NULL;
  sem_t *s = sem_of(handle);
  if (!s) return NULL;
  for (Py_ssize_t i = 0; i < n; i++)
    if (sem_post(s) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  Py_RETURN_NONE;
}

/* sem_take_n(handle, n) -> how many of n tokens were there to take
** without waiting (a worker's claim beyond its first token). */
PyObject *sk_sem_take_n(PyObject *mod, PyObject *args) {
  PyObject *handle;
  Py_ssize_t n;
  if (!PyArg_ParseTuple(args, "On", &handle, &n)) return NULL;
  sem_t *s = sem_of(handle);
  if (!s) return NULL;
  Py_ssize_t got = 0;
  while (got < n) {
    if (sem_trywait(s) == 0) {
      got++;
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) break;
    return PyErr_SetFromErrno(PyExc_OSError);
  }
  return PyLong_FromSsize_t(got);
}
