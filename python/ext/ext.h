/* ext.h — shared declarations of the stoke._stoke extension.
**
** The extension is a client of include/stoke.h and of the report library
** (report/report.h, which the tool uses too, so that Python prints and
** writes what the tool does); it links nothing of the tool itself.
** Its files:
**   module.c    the module, its exceptions, small helpers
**   words.c     the advice in Python's words (keyword arguments) and
**               stoke._stoke.Advice
**   batch.c     batch references, stoke.Batch and stoke.Field (DLPack and
**               the buffer protocol), conversion to torch and NumPy
**   source.c    a stoke_source from the Python package's description
**   loader.c    stoke._stoke.Loader: iteration, epochs, errors
**   report.c    stats, diagnosis, reports and JSON for loaders and clocks
**   twoclock.c  stoke._stoke.TwoClock: the two clocks around any iterable
**   tune.c      stoke._stoke.tune: the sweep with a Python or synthetic step
**   dataset.c   a Python dataset on the worker threads, stoke.DataLoader's
**               engine (stoke._stoke.DatasetLoader); dataset.h
**   collate.c   torch's default_collate in C, into each batch's tensors
**   profiler.c  record_function around next() while torch's profiler runs
**
** Lifetime: every array handed to Python holds an sk_bref, an atomic count
** on one lent batch.  The last reference (a Batch, a Field, a DLPack
** deleter) releases the batch, from whatever thread, without the GIL: the
** library lets a lent batch outlive its loader, so no Python object has to
** keep the loader alive. */
#ifndef STOKE_PY_EXT_H
#define STOKE_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdatomic.h>
#include <sys/types.h>

#include "stoke.h"

/* ---- module.c ------------------------------------------------------------ */

/* The exception classes (module attributes; created at import). */
typedef struct sk_errors {
  PyObject *Error;       /* stoke.Error(Exception): code, message */
  PyObject *SampleError; /* a sample could not be produced: index, path */
  PyObject *Timeout;     /* stoke.SampleTimeout(SampleError, TimeoutError) */
  PyObject *Busy;        /* stoke.BusyError: every slot held by Python */
  PyObject *Budget;      /* stoke.BudgetError(Error, MemoryError) */
  PyObject *Config;      /* stoke.ConfigError(Error, ValueError) */
  PyObject *Format;      /* stoke.FormatError(Error, ValueError) */
  PyObject *IO;          /* stoke.IOError(Error, OSError) */
} sk_errors;

extern sk_errors sk_err;

/* Raise the stoke.Error subclass for code with msg (the library's message,
** or its code's text when empty); returns NULL. */
PyObject *sk_raise(int code, const char *msg);
/* The calling thread's last create-time error (stoke_errmsg(NULL)). */
PyObject *sk_raise_tls(int code);

/* dict[key] as an integer / float / str; absent or None keeps *out. */
int sk_dict_u64(PyObject *d, const char *key, uint64_t *out);
int sk_dict_i64(PyObject *d, const char *key, int64_t *out);
int sk_dict_uint(PyObject *d, const char *key, unsigned *out);
int sk_dict_size(PyObject *d, const char *key, size_t *out);
int sk_dict_int(PyObject *d, const char *key, int *out);
int sk_dict_double(PyObject *d, const char *key, double *out);
/* A new reference to dict[key] as UTF-8 (*out points into it), or
** Py_None with *out NULL when absent. */
PyObject *sk_dict_str(PyObject *d, const char *key, const char **out);

/* A JSON text made by cJSON, parsed with the json module (new reference). */
PyObject *sk_json_loads(const char *text);

/* ---- batch.c ------------------------------------------------------------- */

typedef struct sk_bref {
  atomic_int refs;
  stoke_batch *b;
  int borrowed;  /* b belongs to someone else (a tune sweep), who releases
                    it: the last count frees only the reference */
  int on_stream; /* release after the work queued on release_stream (torch's
                    current stream when the batch was handed out): a pinned
                    or device slot is not refilled under an asynchronous
                    copy or kernel that still reads it */
  uintptr_t release_stream;
} sk_bref;

/* A reference owning b (count 1).  NULL with MemoryError set (b is then
** released). */
sk_bref *sk_bref_new(stoke_batch *b);
/* A reference to a batch lent for the length of one call (count 1). */
sk_bref *sk_bref_borrow(stoke_batch *b);
void sk_bref_incref(sk_bref *r);
/* Drop one reference; the last releases the batch.  Any thread, no GIL. */
void sk_bref_decref(sk_bref *r);

enum { SK_OUT_STOKE = 0, SK_OUT_NUMPY = 1, SK_OUT_TORCH = 2 };
enum { SK_LAYOUT_SINGLE = 0, SK_LAYOUT_TUPLE = 1, SK_LAYOUT_DICT = 2 };

/* How a loader's batches reach Python. */
typedef struct sk_output {
  int mode;           /* SK_OUT_* */
  int layout;         /* SK_LAYOUT_*: one array, a tuple, a dict */
  PyObject *names;    /* tuple of the field names (str) */
  PyObject *to_torch; /* torch.utils.dlpack.from_dlpack, or NULL */
  PyObject *to_numpy; /* numpy.asarray, or NULL */
  PyObject *stream;   /* torch.cuda.current_stream, or NULL: called for a
                         pinned or device batch to know its release stream */
} sk_output;

/* What one batch becomes in mode out->mode: a stoke.Batch, or the fields
** as torch tensors / ndarrays in out->layout.  Steals r. */
PyObject *sk_deliver(sk_bref *r, const sk_output *out);
/* A DLPack capsule of field f of r's batch: legacy "dltensor", or with
** versioned "dltensor_versioned" (DLPack 1.0).  NULL with an exception. */
PyObject *sk_capsule_new(sk_bref *r, size_t f, int versioned);

extern PyTypeObject sk_BatchType, sk_FieldType;

/* ---- source.c ------------------------------------------------------------ */

/* Objects a source borrows: exported buffers of arrays, released after the
** loader that reads them is destroyed. */
typedef struct sk_keep {
  Py_buffer *views;
  size_t n_views;
  PyObject *owner;  /* a Python dataset source's state (dataset.c) */
} sk_keep;

/* A source from the package's description (a dict with "kind": "images",
** "arrays" or "synthetic"); *label describes it for the reports.  Returns
** 0 or -1 with an exception. */
int sk_source_from_spec(PyObject *spec, stoke_source **out, sk_keep *keep);
void sk_keep_release(sk_keep *keep);
/* The synthetic part of a source description. */
int sk_synthetic_config(PyObject *spec, stoke_synthetic_config *out);
/* config dict (stoke_config's field names) into cfg (source not set). */
int sk_config_from_dict(PyObject *d, stoke_config *cfg);

/* ---- profiler.c ----------------------------------------------------------- */

/* When torch's profiler is recording: enter record_function(name) and
** return it for sk_profile_exit, else NULL.  Never raises. */
PyObject *sk_profile_enter(const char *name);
/* Leave it (ctx NULL: nothing), keeping any pending exception. */
void sk_profile_exit(PyObject *ctx);

/* ---- loader.c ------------------------------------------------------------ */

typedef struct sk_Loader {
  PyObject_HEAD
  stoke_loader *l;
  pid_t pid;            /* the process that made it: a child may not use it */
  sk_output out;
  sk_keep keep;
  PyObject *spec;       /* the source description, for the reports */
  int in_epoch;         /* an iteration is in progress */
  uint64_t gen;         /* counts iter() calls: one iterator is current */
  int has_workers;      /* n_workers > 0: a ready batch is polled for with
                           the GIL held */
  int64_t cpu0_ns;      /* process CPU when measuring began, for the
                           consumer's CPU share; -1 until then */
  PyObject *weakrefs;
} sk_Loader;

extern PyTypeObject sk_LoaderType, sk_LoaderIterType;

/* NULL with an exception unless self is usable in this process. */
stoke_loader *sk_loader_get(sk_Loader *self);

/* ---- report.c ------------------------------------------------------------ */

/* loader.stats/diagnose/report/save_json, as Loader methods. */
PyObject *sk_loader_stats(sk_Loader *self, PyObject *noargs);
PyObject *sk_loader_diagnose(sk_Loader *self, PyObject *args, PyObject *kw);
PyObject *sk_loader_report(sk_Loader *self, PyObject *args, PyObject *kw);
PyObject *sk_loader_save_json(sk_Loader *self, PyObject *args, PyObject *kw);
/* `stoke report` on JSON files: _stoke.render_report([paths], out). */
PyObject *sk_render_report(PyObject *mod, PyObject *args);

/* ---- words.c -------------------------------------------------------------- */

/* stoke.Loader's and stoke.DataLoader's keyword arguments, where the tool
** writes flags. */
extern const stoke_advice_words sk_loader_words, sk_dataloader_words;
/* "loader" (or NULL) or "dataloader"; -1 with ValueError otherwise. */
int sk_words_of(const char *name, const stoke_advice_words **out);
extern PyTypeObject sk_AdviceType;
int sk_advice_type_ready(void);
/* Make each entry of diag["advice"] an Advice keeping a[i] and b[i]. */
int sk_advice_wrap(PyObject *diag, const stoke_advice *a,
                   const stoke_advice_basis *b, size_t n);

/* ---- twoclock.c ----------------------------------------------------------- */

typedef struct sk_TwoClock {
  PyObject_HEAD
  stoke_twoclock *c;
  PyObject *iterable;   /* what is wrapped */
  PyObject *it;         /* its iterator during an epoch, else NULL */
  PyObject *sync;       /* called before each compute clock is read */
  PyObject *info;       /* dict: name, loader configuration for reports */
  int count_samples;    /* leave(len(first field)) */
  int entered;          /* iter() started the epoch's first wait */
  Py_buffer stages;     /* the attached stage block's memory (held while
                           attached: the library borrows it) */
  int has_stages;
  PyObject *weakrefs;
} sk_TwoClock;

extern PyTypeObject sk_TwoClockType;

/* The two-clock reports (report.c). */
PyObject *sk_twoclock_json(sk_TwoClock *self, int what);
PyObject *sk_twoclock_report(sk_TwoClock *self);
PyObject *sk_twoclock_deadline(sk_TwoClock *self, PyObject *args,
                               PyObject *kw);
enum { SK_JSON_SUMMARY = 0, SK_JSON_DOCUMENT = 1, SK_JSON_DIAGNOSIS = 2 };
/* A TwoClock with worker processes' stages attached, reported as a loader
** (stoke.DataLoader(worker_type="process")): stats, diagnose, report,
** save_json with the Loader methods' arguments. */
PyObject *sk_procs_stats(sk_TwoClock *self, PyObject *noargs);
PyObject *sk_procs_diagnose(sk_TwoClock *self, PyObject *args, PyObject *kw);
PyObject *sk_procs_report(sk_TwoClock *self, PyObject *args, PyObject *kw);
PyObject *sk_procs_save_json(sk_TwoClock *self, PyObject *args, PyObject *kw);

/* ---- tune.c --------------------------------------------------------------- */

PyObject *sk_tune(PyObject *mod, PyObject *args, PyObject *kw);

#endif /* STOKE_PY_EXT_H */
