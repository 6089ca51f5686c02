/* words.c — Python's words for the settings an advice names: stoke.Loader's
** and stoke.DataLoader's keyword arguments ("num_workers=4", "prefetch=3" or
** "prefetch_factor=2"), where the tool writes its flags.  The sentence
** around them is the library's (stoke_advice_format).
**
** Each advice a diagnosis returns is an Advice: a dict (its JSON keys, as
** `stoke profile --json` writes them) that also keeps the advice's
** structure, so that advice.text_for("dataloader") writes the same line in
** another front end's words without reading the text back. */
#include "ext.h"

#include <stdio.h>
#include <string.h>

static void python_words(void *user, int setting, unsigned v,
                         unsigned workers, char *buf, size_t n) {
  int dataloader = user != NULL;
  switch (setting) {
  case STOKE_SETTING_WORKERS: snprintf(buf, n, "num_workers=%u", v); break;
  case STOKE_SETTING_PREFETCH:
    /* torch counts prefetch per worker, stoke in all. */
    if (dataloader)
      snprintf(buf, n, "prefetch_factor=%u",
               stoke_tune_prefetch_factor(workers ? workers : 1, v));
    else
      snprintf(buf, n, "prefetch=%u", v);
    break;
  case STOKE_SETTING_SAME_WORKERS:
    snprintf(buf, n, "with those workers");
    break;
  case STOKE_SETTING_ECHO:
    /* A DataLoader, whose batches come in its sampler's order, has no
    ** echo: the training loop does it. */
    if (dataloader)
      snprintf(buf, n,
               "each batch %u times in the training loop (stoke.DataLoader "
               "has no echo=; stoke.Loader(echo=%u) has, for paths and "
               "arrays)", v, v);
    else
      snprintf(buf, n, "echo=%u", v);
    break;
  case STOKE_SETTING_PIN_MEMORY: snprintf(buf, n, "pin_memory=True"); break;
  case STOKE_SETTING_DEVICE_PREFETCH:
    snprintf(buf, n, "device_prefetch=%u", v);
    break;
  case STOKE_SETTING_MAX_SIDE:
    snprintf(buf, n, "stoke pack DATA -o OUT --max-side %u", v);
    break;
  case STOKE_SETTING_ONE_THREAD:
    /* stoke.DataLoader already runs each worker's torch with one thread. */
    snprintf(buf, n, dataloader ? "torch_threads=1, the default"
                                : "OMP_NUM_THREADS=1");
    break;
  case STOKE_SETTING_C_TRANSFORMS:
    snprintf(buf, n, "stoke.Loader(path, transform=...)");
    break;
  case STOKE_SETTING_IO_CONCURRENCY:
    snprintf(buf, n, "io_concurrency=%u", v);
    break;
  case STOKE_SETTING_CACHE: snprintf(buf, n, "cache=\"DIR\""); break;
  case STOKE_SETTING_PROCESSES:
    /* stoke.DataLoader has its own worker processes. */
    if (dataloader)
      snprintf(buf, n, "%u worker processes (worker_type=\"process\", "
               "num_workers=%u)", v, v);
    else
      snprintf(buf, n, "%u worker processes (torch's DataLoader)", v);
    break;
  default: snprintf(buf, n, "?");
  }
}

static int dataloader_tag;
const stoke_advice_words sk_loader_words = {python_words, NULL};
const stoke_advice_words sk_dataloader_words = {python_words, &dataloader_tag};

int sk_words_of(const char *name, const stoke_advice_words **out) {
  if (!name || strcmp(name, "loader") == 0)
    *out = &sk_loader_words;
  else if (strcmp(name, "dataloader") == 0)
    *out = &sk_dataloader_words;
  else {
    PyErr_Format(PyExc_ValueError,
                 "words: 'loader' or 'dataloader', got '%s'", name);
    return -1;
  }
  return 0;
}

/* ---- Advice: a dict that keeps its structure --------------------------- */

typedef struct sk_Advice {
  PyDictObject dict;
  stoke_advice a;
  stoke_advice_basis b;
  int have; /* 0: made from Python (a copy), no structure */
} sk_Advice;

static PyObject *advice_text_for(sk_Advice *self, PyObject *arg) {
  const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
  const stoke_advice_words *w;
  if (!name) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "text_for: a str");
    return NULL;
  }
  if (sk_words_of(name, &w) < 0) return NULL;
  if (!self->have)
    return PyErr_Format(PyExc_ValueError,
                        "text_for: this advice was copied without its "
                        "structure");
  char buf[sizeof self->a.text];
  stoke_advice_format(&self->a, &self->b, w, buf, sizeof buf);
  return PyUnicode_FromString(buf);
}

static PyMethodDef advice_methods[] = {
    {"text_for", (PyCFunction)advice_text_for, METH_O,
     "text_for(words): the line in 'loader' or 'dataloader' words."},
    {NULL, NULL, 0, NULL}};

PyTypeObject sk_AdviceType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stoke._stoke.Advice",
    .tp_basicsize = sizeof(sk_Advice),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One line of the doctor's advice: a dict of its JSON keys "
              "that can write itself in another front end's words "
              "(text_for).",
    .tp_methods = advice_methods,
};

int sk_advice_type_ready(void) {
  sk_AdviceType.tp_base = &PyDict_Type;
  return PyType_Ready(&sk_AdviceType);
}

int sk_advice_wrap(PyObject *diag, const stoke_advice *a,
                   const stoke_advice_basis *b, size_t n) {
  PyObject *list = PyDict_GetItemString(diag, "advice"); /* borrowed */
  if (!list || !PyList_Check(list)) return 0;
  Py_ssize_t m = PyList_GET_SIZE(list);
  for (Py_ssize_t i = 0; i < m && (size_t)i < n; i++) {
    PyObject *plain = PyList_GET_ITEM(list, i);
    PyObject *o = PyObject_CallNoArgs((PyObject *)&sk_AdviceType);
    if (!o) return -1;
    if (PyDict_Update(o, plain) < 0) {
      Py_DECREF(o);
      return -1;
    }
    sk_Advice *ad = (sk_Advice *)o;
    ad->a = a[i];
    ad->b = b[i];
    ad->have = 1;
    PyList_SetItem(list, i, o); /* steals o, drops plain */
  }
  return 0;
}
