/* profiler.c — stoke's next() inside torch's profiler.
**
** torch's DataLoader runs each __next__ inside
** record_function("enumerate(DataLoader)#<iterator class>.__next__"), the
** name torch's profiler and its TensorBoard plugin count as data loading.
** While a profiler records (torch.autograd._profiler_enabled()), stoke's
** loaders do the same, so a user's trace shows stoke's waits where torch's
** would be.  torch is never imported here: a process that has not imported
** it is not profiling. */
#include "ext.h"

static PyObject *enabled_fn;  /* torch.autograd._profiler_enabled */
static PyObject *record_cls;  /* torch.autograd.profiler.record_function */

static int profiling(void) {
  if (!enabled_fn) {
    PyObject *name = PyUnicode_FromString("torch.autograd.profiler");
    PyObject *prof = name ? PyImport_GetModule(name) : NULL;
    Py_XDECREF(name);
    if (!prof) {
      PyErr_Clear();
      return 0; /* torch's profiler not imported: not profiling */
    }
    PyObject *autograd = PyImport_ImportModule("torch.autograd");
    enabled_fn = autograd ? PyObject_GetAttrString(autograd,
                                                   "_profiler_enabled")
                          : NULL;
    record_cls = PyObject_GetAttrString(prof, "record_function");
    Py_XDECREF(autograd);
    Py_DECREF(prof);
    if (!enabled_fn || !record_cls) {
      Py_CLEAR(enabled_fn);
      Py_CLEAR(record_cls);
      PyErr_Clear();
      return 0;
    }
  }
  PyObject *r = PyObject_CallNoArgs(enabled_fn);
  int on = r ? PyObject_IsTrue(r) : 0;
  Py_XDECREF(r);
  if (on < 0 || !r) {
    PyErr_Clear();
    on = 0;
  }
  return on;
}

PyObject *sk_profile_enter(const char *name) {
  if (!profiling()) return NULL;
  PyObject *ctx = PyObject_CallFunction(record_cls, "s", name);
  PyObject *r = ctx ? PyObject_CallMethod(ctx, "__enter__", NULL) : NULL;
  if (!r) {
    Py_CLEAR(ctx);
    PyErr_Clear();
  }
  Py_XDECREF(r);
  return ctx;
}

void sk_profile_exit(PyObject *ctx) {
  if (!ctx) return;
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyObject *r = PyObject_CallMethod(ctx, "__exit__", "OOO", Py_None, Py_None,
                                    Py_None);
  if (!r) PyErr_Clear();
  Py_XDECREF(r);
  Py_DECREF(ctx);
  PyErr_Restore(t, v, tb);
}
