/* dataset.c — a Python dataset on stoke's worker threads, for
** stoke.DataLoader.
**
** DESIGN
** The source is a stoke callback source (stoke_source_create_callback_ex)
** whose callbacks run on the loader's worker threads (or, with
** num_workers=0, on the consumer's thread inside next()):
**   thread_start  once per worker thread: it gets a Python thread state for
**                 its whole life (PyGILState_Ensure, then it releases the
**                 GIL), its own shallow copy of the dataset and its
**                 WorkerInfo (make_worker, from the package), then runs the
**                 package's init_worker (torch's threads, worker_init_fn);
**   fill          one sample: take the GIL (timed as GIL_WAIT), call
**                 dataset[key] (PYTHON), add the result to its batch
**                 (COLLATE: collate.c), drop the GIL, then copy tensor
**                 bytes into the batch's own tensors without it.  The fill
**                 that adds a batch's last sample also finishes the batch
**                 while it holds the GIL: assembles it in torch's types, or
**                 runs the collate_fn over the samples (other fills' bytes
**                 may still be copying: the batch is handed out only once
**                 every fill has returned);
**   thread_stop   the worker's copy and thread state go.
** Batches are collated into fresh tensors of their own (torch.empty), as
** torch's DataLoader returns them: the loader's slot holds a one-byte
** placeholder per sample and is released as soon as the batch is taken,
** so Python may keep any number of batches.  A batch being built is found
** by its slot (a slot is reused only once every fill of its last batch has
** returned); the table lives under the GIL.
**
** Keys: the order is the user's sampler's (cfg.order_given).  An int key
** below 2^62 is its own stoke index; any other key (a negative int, a str,
** a tensor) gets a ticket, an index above 2^62 whose key is looked up.
**
** IterableDataset: each C batch of one "sample" is a whole DataLoader batch
** taken from one worker's stream, as torch's worker processes do; index
** seq * S + s is the seq-th batch of stream s (S = max(W, 1)).  Stream s
** iterates worker s's copy with worker s's WorkerInfo (get_worker_info()
** reports it, whichever stoke thread advances the stream), one batch at a
** time and in order.  The consumer gives batches round robin to the
** streams not yet exhausted; a stream's first empty batch ends it.
**
** Epochs: the DataLoader engine numbers epochs itself (set_epoch) and
** tells the source which one is current: samples and batches of an epoch
** that was left early are skipped unseen.
**
** Errors: an exception raised by the dataset or the collate function for a
** map-style batch is kept on that batch, with its traceback and a note
** naming the sample, worker and batch; the batch's other samples are not
** made, the batch is raised at its turn (the original exception) and the
** next call goes on with the next batch, as torch's iterator does.  A
** worker's start, an IterableDataset's stream or a tune sweep's step
** failing stops the loader instead: the first such exception is kept and
** re-raised, and the iteration ends.
**
** Locks: the GIL protects every Python object and the tables here; a
** stream's mutex (IterableDataset) is taken only without the GIL, and the
** GIL is never requested while it is held. */
#define _GNU_SOURCE
#include "dataset.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define TICKET_BASE ((size_t)1 << 62)
#define WAIT_SLICE_NS (50 * 1000000LL)

/* A worker thread's Python side. */
typedef struct sk_wstate {
  PyThreadState *ts;     /* while the worker does not hold the GIL */
  PyGILState_STATE gs;
  PyObject *dataset;     /* its copy (GIL) */
  PyObject *info;        /* its WorkerInfo (GIL) */
} sk_wstate;

/* An IterableDataset stream (one per worker). */
typedef struct sk_stream {
  pthread_mutex_t mu;    /* leaf; never held while asking for the GIL */
  pthread_cond_t cv;
  uint64_t epoch;        /* mu: the epoch next_seq counts in */
  size_t next_seq;       /* mu: the next batch of the stream to make */
  int ready, failed;     /* mu: its worker started (or could not) */
  /* GIL: */
  PyObject *it;          /* the stream's iterator this epoch */
  uint64_t it_epoch;
  int ended;             /* exhausted this epoch */
  size_t given;          /* consumer: batches given to it this epoch */
} sk_stream;

/* A batch in the making or made, found by its slot. */
typedef struct sk_pend {
  const stoke_batch *b;
  uint64_t epoch;
  size_t number;
  sk_pbatch *pb;
  int empty;             /* IterableDataset: an exhausted stream's batch */
} sk_pend;

typedef struct sk_ds {
  int iterable;
  int tune;              /* a tune sweep's: stoke's own order over
                            range(len(dataset)), its loaders' own epochs */
  unsigned n_workers;
  size_t batch_size;     /* IterableDataset: items per batch */
  int auto_collation;
  int drop_last;
  int fast;              /* default_collate in C */
  int pin;
  PyObject *dataset;
  PyObject *collate;     /* user's collate_fn, or torch's collation */
  PyObject *make_worker; /* (id) -> (dataset copy, WorkerInfo) */
  PyObject *init_worker; /* (id) -> None */
  PyObject *main_info;   /* W = 0: None */
  sk_wstate *workers;
  sk_stream *streams;
  size_t n_streams;
  atomic_uint_least64_t epoch; /* the current epoch (written under GIL) */
  /* GIL: */
  PyObject *tickets;     /* dict ticket -> key */
  uint64_t next_ticket;
  /* Entries are allocated one by one and never move: a caller may hold one
  ** across a call into Python, which may release the GIL and let another
  ** thread add an entry. */
  sk_pend **pend;
  size_t n_pend, cap_pend;
  PyObject *error;       /* the first exception, with its traceback */
  size_t rr;             /* IterableDataset: the next stream to give */
} sk_ds;

static _Thread_local sk_wstate *tls_worker;
static _Thread_local PyObject *tls_info; /* borrowed */

/* ---- the GIL ---------------------------------------------------------------- */

typedef struct sk_gil {
  int worker;
  PyGILState_STATE gs;
} sk_gil;

static int gil_take(sk_gil *g) {
  if (_Py_IsFinalizing()) return -1;
  if (tls_worker) {
    g->worker = 1;
    PyEval_RestoreThread(tls_worker->ts);
  } else {
    g->worker = 0;
    g->gs = PyGILState_Ensure();
  }
  return 0;
}

static void gil_drop(sk_gil *g) {
  if (g->worker)
    tls_worker->ts = PyEval_SaveThread();
  else
    PyGILState_Release(g->gs);
}

/* ---- errors ------------------------------------------------------------------ */

/* The pending exception, normalised, with its traceback and a note saying
** where it was raised (new reference; NULL when there was none); its text
** goes to msg for the sample's failure.  GIL held; clears the exception. */
static PyObject *take_exception(const char *where, char *msg, size_t cap) {
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyErr_NormalizeException(&t, &v, &tb);
  if (!v) {
    snprintf(msg, cap, "%s failed without an exception", where);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    return NULL;
  }
  if (tb) PyException_SetTraceback(v, tb);
  PyObject *s = PyObject_Str(v);
  const char *text = s ? PyUnicode_AsUTF8(s) : NULL;
  snprintf(msg, cap, "%s: %s", ((PyTypeObject *)t)->tp_name,
           text ? text : "?");
  if (!s || !text) PyErr_Clear();
  Py_XDECREF(s);
  PyObject *n = PyUnicode_FromFormat("stoke.DataLoader: raised by %s", where);
  if (n) {
    PyObject *r = PyObject_CallMethod(v, "add_note", "O", n);
    Py_XDECREF(r);
    Py_DECREF(n);
  }
  PyErr_Clear(); /* add_note is 3.11+; the message says it anyway */
  Py_XDECREF(t);
  Py_XDECREF(tb);
  return v;
}

/* Keep the pending exception as the loader's (the first one only): the
** iteration then stops.  GIL held; clears the exception. */
static void capture(sk_ds *ds, const char *where, char *msg, size_t cap) {
  if (ds->error) {
    /* Only the first one gets a note: it is the one raised. */
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    PyObject *s = v ? PyObject_Str(v) : NULL;
    const char *text = s ? PyUnicode_AsUTF8(s) : NULL;
    snprintf(msg, cap, "%s: %s", t ? ((PyTypeObject *)t)->tp_name : where,
             text ? text : "?");
    Py_XDECREF(s);
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
    PyErr_Clear();
    return;
  }
  ds->error = take_exception(where, msg, cap);
}

/* Keep the pending exception, raised by the sample at pos (SIZE_MAX: by
** collation), as batch pb's when it comes before the one it has: that
** batch raises it at its turn and the epoch goes on, as torch's iterator
** does.  A tune sweep has no turn to raise it at: its step fails (-1 with
** msg).  GIL held; clears the exception; 0 or -1. */
static int batch_failed(sk_ds *ds, sk_pbatch *pb, size_t pos,
                        const char *where, char *msg, size_t cap) {
  if (ds->tune || !pb) {
    capture(ds, where, msg, cap);
    return -1;
  }
  PyObject *e = take_exception(where, msg, cap);
  if (!e) e = PyUnicode_FromString(msg);
  if (!e) {
    PyErr_Clear();
    return 0; /* no memory even for the text: the batch has what it has */
  }
  if (!pb->error || pos < pb->error_pos) {
    Py_XSETREF(pb->error, e);
    pb->error_pos = pos;
  } else {
    Py_DECREF(e);
  }
  return 0;
}

/* "in worker thread 2" or "in the main thread (num_workers=0)". */
static void thread_words(char *buf, size_t cap) {
  if (!tls_worker) {
    snprintf(buf, cap, "in the main thread (num_workers=0)");
    return;
  }
  PyObject *id = tls_info ? PyObject_GetAttrString(tls_info, "id") : NULL;
  long n = id ? PyLong_AsLong(id) : -1;
  Py_XDECREF(id);
  PyErr_Clear();
  snprintf(buf, cap, "in worker thread %ld", n);
}

/* ---- keys ---------------------------------------------------------------------- */

static PyObject *key_of(sk_ds *ds, size_t index) {
  if (index < TICKET_BASE) return PyLong_FromSize_t(index);
  PyObject *t = PyLong_FromSize_t(index - TICKET_BASE);
  if (!t) return NULL;
  PyObject *k = PyDict_GetItemWithError(ds->tickets, t);
  Py_DECREF(t);
  if (!k && !PyErr_Occurred())
    PyErr_Format(PyExc_SystemError, "stoke: ticket %zu has no key",
                 index - TICKET_BASE);
  return Py_XNewRef(k);
}

/* The stoke index of key k: itself for an int in [0, 2^62), else a ticket.
** (size_t)-1 with an exception on failure. */
static size_t index_of(sk_ds *ds, PyObject *k) {
  if (PyLong_CheckExact(k)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(k, &overflow);
    if (!overflow && v >= 0 && (unsigned long long)v < TICKET_BASE)
      return (size_t)v;
    if (v == -1 && PyErr_Occurred()) return (size_t)-1;
  }
  PyObject *t = PyLong_FromUnsignedLongLong(ds->next_ticket);
  if (!t || PyDict_SetItem(ds->tickets, t, k) < 0) {
    Py_XDECREF(t);
    return (size_t)-1;
  }
  Py_DECREF(t);
  return TICKET_BASE + (size_t)ds->next_ticket++;
}

/* ---- batches in the making ----------------------------------------------------- */

static sk_pend *pend_lookup(sk_ds *ds, const stoke_batch *b) {
  for (size_t i = 0; i < ds->n_pend; i++)
    if (ds->pend[i]->b == b) return ds->pend[i];
  return NULL;
}

/* Unlink the entry's batch first: freeing it may run Python code. */
static void pend_clear(sk_pend *p) {
  sk_pbatch *pb = p->pb;
  p->pb = NULL;
  p->empty = 0;
  sk_pbatch_free(pb);
}

/* The entry of b for its current batch, made (or remade over a stale one)
** when `create`.  NULL: none, or with an exception. */
static sk_pend *pend_get(sk_ds *ds, const stoke_batch *b, int create) {
  uint64_t ep = stoke_batch_epoch(b);
  size_t number = stoke_batch_number(b);
  sk_pend *p = pend_lookup(ds, b);
  if (p && (p->epoch != ep || p->number != number)) pend_clear(p); /* stale */
  if (p && (p->pb || p->empty)) return p;
  if (!create) return NULL;
  if (!p) {
    if (ds->n_pend == ds->cap_pend) {
      size_t cap = ds->cap_pend ? 2 * ds->cap_pend : 16;
      sk_pend **q = PyMem_Realloc(ds->pend, cap * sizeof *q);
      if (!q) {
        PyErr_NoMemory();
        return NULL;
      }
      ds->pend = q;
      ds->cap_pend = cap;
    }
    p = PyMem_Calloc(1, sizeof *p);
    if (!p) {
      PyErr_NoMemory();
      return NULL;
    }
    p->b = b;
    ds->pend[ds->n_pend++] = p;
  }
  sk_pbatch *pb = sk_pbatch_new(stoke_batch_size(b), ep, number);
  if (!pb) return NULL;
  if (p->pb) {
    /* sk_pbatch_new ran no Python code, yet be safe: keep the first. */
    sk_pbatch_free(pb);
    return p;
  }
  p->epoch = ep;
  p->number = number;
  p->empty = 0;
  p->pb = pb;
  return p;
}

static uint64_t current_epoch(const sk_ds *ds) {
  return atomic_load_explicit(&((sk_ds *)ds)->epoch, memory_order_acquire);
}

/* A batch of an epoch the engine left (a sweep's loaders run their own
** epochs, never left). */
static int stale(const sk_ds *ds, const stoke_batch *b) {
  return !ds->tune && stoke_batch_epoch(b) != current_epoch(ds);
}

/* ---- map-style datasets --------------------------------------------------------- */

/* Every sample of batch b is added (GIL held): assemble the batch, or run
** the collate function.  Nothing is freed here: other fills of the batch
** may still be copying from their samples; the entry goes when the batch
** is taken or its slot reused, once every fill returned.  0, or -1 with
** msg. */
static int finish(sk_ds *ds, sk_pbatch *pb, const stoke_batch *b, char *msg,
                  size_t cap) {
  PyObject *r = sk_pbatch_finish(pb, ds->collate);
  if (stale(ds, b)) {
    PyErr_Clear(); /* the epoch was left while collate_fn ran */
    Py_XDECREF(r);
    return 0;
  }
  if (!r) {
    char where[128];
    snprintf(where, sizeof where, "%s of batch %zu (epoch %llu)",
             ds->fast && ds->auto_collation ? "default_collate" : "collate_fn",
             stoke_batch_number(b), (unsigned long long)stoke_batch_epoch(b));
    return batch_failed(ds, pb, SIZE_MAX, where, msg, cap);
  }
  Py_XSETREF(pb->result, r);
  return 0;
}

static int ds_fill_map(void *user, stoke_sample *s) {
  sk_ds *ds = user;
  const stoke_batch *b = stoke_sample_batch(s);
  if (stale(ds, b)) return 0; /* left early */
  stoke_sample_stage(s, STOKE_STAGE_GIL_WAIT);
  sk_gil g = {0, PyGILState_UNLOCKED};
  if (gil_take(&g) != 0)
    return stoke_sample_fail(s, "the interpreter is shutting down");
  /* begin() runs under the GIL: checked again now, the epoch (and its
  ** tickets) stays as it is until the next call into Python. */
  if (stale(ds, b)) {
    gil_drop(&g);
    return 0;
  }
  /* A batch that already failed raises at its turn: its samples after
  ** the one that raised are not made (torch's worker stops the batch at
  ** its first error; those before it are, one of them may raise first). */
  sk_pend *early = ds->tune ? NULL : pend_get(ds, b, 0);
  if (early && early->pb && early->pb->error &&
      stoke_sample_position(s) > early->pb->error_pos) {
    gil_drop(&g);
    return 0;
  }
  stoke_sample_stage(s, STOKE_STAGE_PYTHON);
  char msg[400];
  int rc = 0, failed = 0;
  sk_copies copies = {0};
  PyObject *key = key_of(ds, stoke_sample_index(s));
  PyObject *dset = g.worker && tls_worker->dataset ? tls_worker->dataset
                                                   : ds->dataset;
  PyObject *x = key ? PyObject_GetItem(dset, key) : NULL;
  if (stale(ds, b)) {
    /* The epoch was left while __getitem__ ran: drop what it made. */
    PyErr_Clear();
    Py_XDECREF(x);
    Py_XDECREF(key);
    gil_drop(&g);
    return 0;
  }
  if (!x) {
    char where[256], th[64];
    /* The exception is set aside while its place is described. */
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    thread_words(th, sizeof th);
    PyObject *kr = key ? PyObject_Repr(key) : NULL;
    const char *ks = kr ? PyUnicode_AsUTF8(kr) : NULL;
    snprintf(where, sizeof where, "dataset[%.80s] %s (position %zu of batch "
             "%zu, epoch %llu)", ks ? ks : "?", th, stoke_sample_position(s),
             stoke_batch_number(b), (unsigned long long)stoke_batch_epoch(b));
    Py_XDECREF(kr);
    PyErr_Clear();
    sk_pend *p = ds->tune ? NULL : pend_get(ds, b, 1);
    PyErr_Clear(); /* no memory for the entry: the loader stops instead */
    PyErr_Restore(t, v, tb);
    rc = batch_failed(ds, p ? p->pb : NULL, stoke_sample_position(s), where,
                      msg, sizeof msg);
  } else {
    stoke_sample_stage(s, STOKE_STAGE_COLLATE);
    sk_pend *p = pend_get(ds, b, 1);
    sk_pbatch *pb = p ? p->pb : NULL;
    int fast = ds->fast && ds->auto_collation;
    int added = pb ? sk_pbatch_add(pb, x, stoke_sample_position(s), key, fast,
                                   ds->pin, &copies)
                   : -1;
    if (added < 0) {
      char where[128];
      snprintf(where, sizeof where, "default_collate of batch %zu",
               stoke_batch_number(b));
      rc = batch_failed(ds, pb, SIZE_MAX, where, msg, sizeof msg);
      failed = 1; /* nothing of it is copied */
    } else if (added == 1) {
      rc = finish(ds, pb, b, msg, sizeof msg);
    }
    Py_DECREF(x);
  }
  Py_XDECREF(key);
  /* Giving the GIL up may wait too: when another thread asked for it,
  ** CPython's forced switch holds the releasing thread until that one has
  ** it (on a loaded machine, until it gets a core). */
  stoke_sample_stage(s, STOKE_STAGE_GIL_WAIT);
  gil_drop(&g);
  stoke_sample_stage(s, STOKE_STAGE_COLLATE);
  if (rc == 0 && !failed)
    sk_copies_run(&copies); /* the samples are kept alive */
  sk_copies_free(&copies);
  return rc ? stoke_sample_fail(s, "%s", msg) : 0;
}

/* ---- IterableDataset --------------------------------------------------------------- */

/* Wait (no GIL) for stream s's turn for batch seq of epoch ep: 1 its turn,
** 0 stale (another epoch), -1 its worker could not start. */
static int stream_turn(sk_stream *st, uint64_t ep, size_t seq) {
  pthread_mutex_lock(&st->mu);
  int r;
  for (;;) {
    if (st->failed) {
      r = -1;
      break;
    }
    if (st->epoch != ep) {
      r = 0;
      break;
    }
    if (st->ready && st->next_seq == seq) {
      r = 1;
      break;
    }
    pthread_cond_wait(&st->cv, &st->mu);
  }
  pthread_mutex_unlock(&st->mu);
  return r;
}

static void stream_next(sk_stream *st, uint64_t ep) {
  pthread_mutex_lock(&st->mu);
  if (st->epoch == ep) st->next_seq++;
  pthread_cond_broadcast(&st->cv);
  pthread_mutex_unlock(&st->mu);
}

static int ds_fill_iter(void *user, stoke_sample *s) {
  sk_ds *ds = user;
  const stoke_batch *b = stoke_sample_batch(s);
  uint64_t ep = stoke_batch_epoch(b);
  if (ep != current_epoch(ds)) return 0;
  size_t index = stoke_sample_index(s);
  size_t sid = index % ds->n_streams, seq = index / ds->n_streams;
  sk_stream *st = &ds->streams[sid];
  /* Waiting for the stream's previous batch counts as READ. */
  int turn = stream_turn(st, ep, seq);
  if (turn == 0) return 0;
  if (turn < 0)
    return stoke_sample_fail(s, "worker %zu could not start", sid);
  stoke_sample_stage(s, STOKE_STAGE_GIL_WAIT);
  sk_gil g = {0, PyGILState_UNLOCKED};
  if (gil_take(&g) != 0) {
    stream_next(st, ep);
    return stoke_sample_fail(s, "the interpreter is shutting down");
  }
  if (ep != current_epoch(ds)) {
    gil_drop(&g);
    stream_next(st, ep);
    return 0;
  }
  stoke_sample_stage(s, STOKE_STAGE_PYTHON);
  char msg[400];
  int rc = 0;
  PyObject *saved = tls_info;
  PyObject *info = ds->n_workers ? ds->workers[sid].info : Py_None;
  tls_info = info == Py_None ? NULL : info;
  sk_pend *p = NULL;
  PyObject *items = PyList_New(0);
  if (!items) rc = -1;
  if (rc == 0 && !st->ended && (!st->it || st->it_epoch != ep)) {
    Py_CLEAR(st->it);
    PyObject *dset = ds->n_workers ? ds->workers[sid].dataset : ds->dataset;
    st->it = PyObject_GetIter(dset);
    st->it_epoch = ep;
    if (!st->it) rc = -1;
  }
  size_t want = ds->auto_collation ? ds->batch_size : 1;
  while (rc == 0 && !st->ended && (size_t)PyList_GET_SIZE(items) < want) {
    PyObject *x = PyIter_Next(st->it);
    if (!x) {
      if (PyErr_Occurred()) rc = -1;
      st->ended = 1;
      break;
    }
    rc = PyList_Append(items, x);
    Py_DECREF(x);
  }
  if (ep != current_epoch(ds)) { /* left while the stream ran */
    PyErr_Clear();
    Py_XDECREF(items);
    tls_info = saved;
    gil_drop(&g);
    stream_next(st, ep);
    return 0;
  }
  size_t got = items ? (size_t)PyList_GET_SIZE(items) : 0;
  int empty = rc == 0 && (got == 0 || (ds->drop_last && got < want));
  if (empty) st->ended = 1;
  stoke_sample_stage(s, STOKE_STAGE_COLLATE);
  PyObject *result = NULL;
  if (rc == 0 && !empty) {
    /* One worker makes the whole batch: its copies run with the GIL held
    ** (the items are this batch's alone). */
    sk_pbatch *pb = sk_pbatch_new(got, ep, stoke_batch_number(b));
    sk_copies copies = {0};
    for (size_t i = 0; pb && i < got; i++) {
      PyObject *pos = PyLong_FromSize_t(i);
      int bad = !pos || sk_pbatch_add(pb, PyList_GET_ITEM(items, i), i, pos,
                                      ds->fast && ds->auto_collation,
                                      ds->pin, &copies) < 0;
      /* (the last add returns 1: this worker finishes the batch below) */
      Py_XDECREF(pos);
      if (bad) {
        sk_pbatch_free(pb);
        pb = NULL;
      }
    }
    if (pb) {
      sk_copies_run(&copies);
      result = sk_pbatch_finish(pb, ds->collate);
      sk_pbatch_free(pb);
    }
    sk_copies_free(&copies);
    if (!result) rc = -1;
  }
  if (rc != 0) {
    char where[200], th[64];
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    thread_words(th, sizeof th);
    snprintf(where, sizeof where, "the iterator of worker %zu's stream %s "
             "(its batch %zu, batch %zu of epoch %llu)", sid, th, seq,
             stoke_batch_number(b), (unsigned long long)ep);
    PyErr_Restore(t, v, tb);
    capture(ds, where, msg, sizeof msg);
  } else {
    p = pend_get(ds, b, 1);
    if (!p) {
      capture(ds, "stoke", msg, sizeof msg);
      rc = -1;
      Py_XDECREF(result);
    } else if (empty) {
      pend_clear(p);
      p->empty = 1;
    } else {
      p->pb->result = result;
    }
  }
  Py_XDECREF(items);
  tls_info = saved;
  stoke_sample_stage(s, STOKE_STAGE_GIL_WAIT); /* see ds_fill_map */
  gil_drop(&g);
  stream_next(st, ep);
  return rc ? stoke_sample_fail(s, "%s", msg) : 0;
}

/* ---- worker threads ------------------------------------------------------------------ */

static void stream_mark(sk_ds *ds, unsigned worker, int ok) {
  if (!ds->iterable || worker >= ds->n_streams) return;
  sk_stream *st = &ds->streams[worker];
  pthread_mutex_lock(&st->mu);
  if (ok)
    st->ready = 1;
  else
    st->failed = 1;
  pthread_cond_broadcast(&st->cv);
  pthread_mutex_unlock(&st->mu);
}

static int ds_thread_start(void *user, unsigned worker, char *err,
                           size_t cap) {
  sk_ds *ds = user;
  if (_Py_IsFinalizing()) {
    snprintf(err, cap, "the interpreter is shutting down");
    stream_mark(ds, worker, 0);
    return -1;
  }
  sk_wstate *w = &ds->workers[worker];
  w->gs = PyGILState_Ensure();
  int rc = 0;
  PyObject *r = PyObject_CallFunction(ds->make_worker, "I", worker);
  if (r && PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2) {
    w->dataset = Py_NewRef(PyTuple_GET_ITEM(r, 0));
    w->info = Py_NewRef(PyTuple_GET_ITEM(r, 1));
  } else if (r) {
    PyErr_SetString(PyExc_TypeError, "make_worker: expected (dataset, info)");
    rc = -1;
  } else {
    rc = -1;
  }
  Py_XDECREF(r);
  tls_worker = w;
  tls_info = w->info;
  if (rc == 0) {
    PyObject *x = PyObject_CallFunction(ds->init_worker, "I", worker);
    if (!x) rc = -1;
    Py_XDECREF(x);
  }
  if (rc != 0) {
    char where[96];
    snprintf(where, sizeof where, "worker_init_fn(%u) in worker thread %u",
             worker, worker);
    capture(ds, where, err, cap);
    Py_CLEAR(w->dataset);
    Py_CLEAR(w->info);
    tls_worker = NULL;
    tls_info = NULL;
    stream_mark(ds, worker, 0);
    PyGILState_Release(w->gs);
    return -1;
  }
  stream_mark(ds, worker, 1);
  w->ts = PyEval_SaveThread();
  return 0;
}

static void ds_thread_stop(void *user, unsigned worker) {
  sk_ds *ds = user;
  sk_wstate *w = &ds->workers[worker];
  if (_Py_IsFinalizing()) {
    /* Taking the GIL now would end this thread inside the interpreter:
    ** the thread state is leaked, as CPython does for daemon threads. */
    tls_worker = NULL;
    tls_info = NULL;
    return;
  }
  PyEval_RestoreThread(w->ts);
  Py_CLEAR(w->dataset);
  Py_CLEAR(w->info);
  tls_worker = NULL;
  tls_info = NULL;
  PyGILState_Release(w->gs);
}

/* ---- the source ------------------------------------------------------------------------ */

static void ds_free(sk_ds *ds) {
  if (!ds) return;
  for (size_t i = 0; i < ds->n_pend; i++) {
    pend_clear(ds->pend[i]);
    PyMem_Free(ds->pend[i]);
  }
  PyMem_Free(ds->pend);
  for (size_t i = 0; i < ds->n_streams; i++) {
    Py_XDECREF(ds->streams[i].it);
    pthread_mutex_destroy(&ds->streams[i].mu);
    pthread_cond_destroy(&ds->streams[i].cv);
  }
  PyMem_Free(ds->streams);
  if (ds->workers)
    for (unsigned i = 0; i < ds->n_workers; i++) {
      Py_XDECREF(ds->workers[i].dataset);
      Py_XDECREF(ds->workers[i].info);
    }
  PyMem_Free(ds->workers);
  Py_XDECREF(ds->dataset);
  Py_XDECREF(ds->collate);
  Py_XDECREF(ds->make_worker);
  Py_XDECREF(ds->init_worker);
  Py_XDECREF(ds->tickets);
  Py_XDECREF(ds->error);
  PyMem_Free(ds);
}

static void ds_capsule_free(PyObject *cap) {
  ds_free(PyCapsule_GetPointer(cap, "stoke.dataset"));
}

static PyObject *spec_obj(PyObject *spec, const char *key) {
  PyObject *v = PyDict_GetItemString(spec, key);
  if (!v) PyErr_Format(PyExc_KeyError, "dataset spec: %s", key);
  return v;
}

int sk_dataset_source(PyObject *spec, stoke_source **out, sk_keep *keep) {
  if (sk_torch_api_load() < 0) return -1;
  PyObject *dataset = spec_obj(spec, "dataset");
  PyObject *collate = dataset ? spec_obj(spec, "collate") : NULL;
  PyObject *make = collate ? spec_obj(spec, "make_worker") : NULL;
  PyObject *init = make ? spec_obj(spec, "init_worker") : NULL;
  if (!init) return -1;
  sk_ds *ds = PyMem_Calloc(1, sizeof *ds);
  if (!ds) {
    PyErr_NoMemory();
    return -1;
  }
  ds->batch_size = 1;
  if (sk_dict_int(spec, "iterable", &ds->iterable) ||
      sk_dict_int(spec, "tune", &ds->tune) ||
      sk_dict_uint(spec, "num_workers", &ds->n_workers) ||
      sk_dict_size(spec, "batch_size", &ds->batch_size) ||
      sk_dict_int(spec, "auto_collation", &ds->auto_collation) ||
      sk_dict_int(spec, "drop_last", &ds->drop_last) ||
      sk_dict_int(spec, "fast", &ds->fast) ||
      sk_dict_int(spec, "pin_memory", &ds->pin)) {
    ds_free(ds);
    return -1;
  }
  ds->dataset = Py_NewRef(dataset);
  ds->collate = Py_NewRef(collate);
  ds->make_worker = Py_NewRef(make);
  ds->init_worker = Py_NewRef(init);
  ds->tickets = PyDict_New();
  ds->workers = PyMem_Calloc(ds->n_workers ? ds->n_workers : 1,
                             sizeof *ds->workers);
  atomic_init(&ds->epoch, 0);
  if (ds->iterable) {
    ds->n_streams = ds->n_workers ? ds->n_workers : 1;
    ds->streams = PyMem_Calloc(ds->n_streams, sizeof *ds->streams);
    for (size_t i = 0; ds->streams && i < ds->n_streams; i++) {
      pthread_mutex_init(&ds->streams[i].mu, NULL);
      pthread_cond_init(&ds->streams[i].cv, NULL);
      ds->streams[i].ready = ds->n_workers == 0; /* no worker to wait for */
    }
  }
  if (!ds->tickets || !ds->workers || (ds->iterable && !ds->streams)) {
    ds_free(ds);
    PyErr_NoMemory();
    return -1;
  }
  PyObject *cap = PyCapsule_New(ds, "stoke.dataset", ds_capsule_free);
  if (!cap) {
    ds_free(ds);
    return -1;
  }
  /* The engine finds ds here; the loader's keep holds it until the loader
  ** (and its threads) are gone. */
  if (PyDict_SetItemString(spec, "_ds", cap) < 0) {
    Py_DECREF(cap);
    return -1;
  }
  keep->owner = cap;

  stoke_field_desc f;
  memset(&f, 0, sizeof f);
  f.name = "placeholder"; /* the batches live in their own tensors */
  f.dtype = STOKE_U8;
  stoke_callback_config cc;
  stoke_callback_config_init(&cc);
  /* A DataLoader's order is given (any int key or ticket is an index); a
  ** sweep's is stoke's own over the dataset's length. */
  cc.n_samples = SIZE_MAX / 2;
  if (ds->tune && sk_dict_size(spec, "length", &cc.n_samples) < 0) return -1;
  cc.n_fields = 1;
  cc.fields = &f;
  cc.fill = ds->iterable ? ds_fill_iter : ds_fill_map;
  cc.user = ds;
  cc.thread_start = ds_thread_start;
  cc.thread_stop = ds_thread_stop;
  int code = stoke_source_create_callback_ex(&cc, out);
  if (code != 0) {
    sk_raise_tls(code);
    return -1;
  }
  return 0;
}

/* ---- the engine: stoke._stoke.DatasetLoader ---------------------------------------- */

typedef struct sk_DatasetLoader {
  sk_Loader base;
  sk_ds *ds;            /* owned by the capsule in base.spec */
  PyObject *index_iter; /* map-style: the epoch's (batch) sampler iterator */
  size_t ahead;         /* batches given ahead of the consumer */
  size_t fed, taken;    /* this epoch */
  int order_ended, epoch_done, begun;
  int failed;           /* the loader stopped at an error: remake it */
  int64_t epoch;        /* -1 before the first */
} sk_DatasetLoader;

static int engine_init(sk_DatasetLoader *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"source", "config", "ahead", NULL};
  PyObject *spec, *config;
  Py_ssize_t ahead = 4;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!|n", kwlist, &PyDict_Type,
                                   &spec, &PyDict_Type, &config, &ahead))
    return -1;
  PyObject *names = Py_BuildValue("(s)", "placeholder");
  if (!names) return -1;
  PyObject *base_args = Py_BuildValue("(OOiiO)", spec, config, SK_OUT_STOKE,
                                      SK_LAYOUT_SINGLE, names);
  Py_DECREF(names);
  if (!base_args) return -1;
  int rc = sk_LoaderType.tp_init((PyObject *)self, base_args, NULL);
  Py_DECREF(base_args);
  if (rc < 0) return -1;
  PyObject *cap = PyDict_GetItemString(spec, "_ds");
  self->ds = cap ? PyCapsule_GetPointer(cap, "stoke.dataset") : NULL;
  if (!self->ds) {
    PyErr_SetString(PyExc_TypeError, "DatasetLoader: not a dataset source");
    return -1;
  }
  self->ahead = ahead > 0 ? (size_t)ahead : 1;
  self->epoch = -1;
  self->epoch_done = 1;
  return 0;
}

/* Is the calling thread one of ds's workers? */
static int on_own_worker(const sk_ds *ds) {
  return ds && tls_worker && tls_worker >= ds->workers &&
         tls_worker < ds->workers + (ds->n_workers ? ds->n_workers : 1);
}

static void engine_dealloc(sk_DatasetLoader *self) {
  PyObject_GC_UnTrack(self);
  Py_CLEAR(self->index_iter);
  if (self->base.l && on_own_worker(self->ds)) {
    /* The last reference went on one of this loader's own workers (the
    ** package defers closing from workers, so only a stray reference gets
    ** here): destroying would join this very thread.  Leak the loader and
    ** the source's state it uses rather than crash. */
    PyObject *cap = PyDict_GetItemString(self->base.spec, "_ds");
    Py_XINCREF(cap);
    Py_XINCREF(self->base.keep.owner);
    self->base.l = NULL;
    PyErr_WarnEx(PyExc_RuntimeWarning,
                 "stoke.DataLoader freed on its own worker thread: its "
                 "threads are left running", 1);
    PyErr_Clear();
  }
  sk_LoaderType.tp_dealloc((PyObject *)self);
}

static int engine_traverse(sk_DatasetLoader *self, visitproc visit,
                           void *arg) {
  Py_VISIT(self->index_iter);
  return sk_LoaderType.tp_traverse((PyObject *)self, visit, arg);
}

/* begin(index_iter): start the next epoch (ending one left early), its
** order from index_iter (map-style: each item a list of keys, or one key
** without auto-collation; IterableDataset: None). */
static PyObject *engine_begin(sk_DatasetLoader *self, PyObject *it) {
  stoke_loader *l = sk_loader_get(&self->base);
  if (!l) return NULL;
  sk_ds *ds = self->ds;
  if (self->base.in_epoch || self->begun) stoke_loader_end_epoch(l);
  self->base.in_epoch = 0;
  self->epoch++;
  atomic_store_explicit(&ds->epoch, (uint64_t)self->epoch,
                        memory_order_release);
  int rc = stoke_loader_set_epoch(l, (uint64_t)self->epoch);
  if (rc != 0) return sk_raise(rc, stoke_errmsg(l));
  Py_XSETREF(self->index_iter, it == Py_None ? NULL : Py_NewRef(it));
  self->fed = self->taken = 0;
  self->order_ended = 0;
  self->epoch_done = 0;
  self->begun = 1;
  /* Batches of the epoch left behind may still be filling: their entries
  ** stay until their slot is reused (then none of their fills is left),
  ** and their fills see the new epoch and stop (ds_fill_map). */
  PyDict_Clear(ds->tickets);
  if (ds->iterable) {
    ds->rr = 0;
    for (size_t i = 0; i < ds->n_streams; i++) {
      sk_stream *st = &ds->streams[i];
      Py_BEGIN_ALLOW_THREADS
      pthread_mutex_lock(&st->mu);
      st->epoch = (uint64_t)self->epoch;
      st->next_seq = 0;
      pthread_cond_broadcast(&st->cv);
      pthread_mutex_unlock(&st->mu);
      Py_END_ALLOW_THREADS
      st->ended = 0;
      st->given = 0;
      Py_CLEAR(st->it);
    }
  }
  Py_RETURN_NONE;
}

/* Give one more batch of the epoch's order, or end it.  0, 1 (ended), -1. */
static int give_one(sk_DatasetLoader *self, stoke_loader *l) {
  sk_ds *ds = self->ds;
  int rc;
  if (ds->iterable) {
    size_t s = ds->n_streams, tried = 0;
    while (tried < s && ds->streams[ds->rr].ended) {
      ds->rr = (ds->rr + 1) % s;
      tried++;
    }
    if (tried == s) {
      stoke_loader_order_end(l);
      return 1;
    }
    sk_stream *st = &ds->streams[ds->rr];
    size_t index = st->given++ * s + ds->rr;
    ds->rr = (ds->rr + 1) % s;
    rc = stoke_loader_order_append(l, &index, NULL, 1);
  } else {
    PyObject *item = self->index_iter ? PyIter_Next(self->index_iter) : NULL;
    if (!item) {
      if (PyErr_Occurred()) return -1;
      stoke_loader_order_end(l);
      return 1;
    }
    size_t stack[256], *idx = stack, n = 1;
    PyObject *seq = NULL;
    if (ds->auto_collation) {
      seq = PySequence_Fast(item, "batch_sampler: each batch must be a "
                                  "sequence of keys");
      if (!seq) {
        Py_DECREF(item);
        return -1;
      }
      n = (size_t)PySequence_Fast_GET_SIZE(seq);
      if (n > 256) idx = PyMem_Malloc(n * sizeof *idx);
      if (!idx) {
        Py_DECREF(seq);
        Py_DECREF(item);
        PyErr_NoMemory();
        return -1;
      }
    }
    rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
      idx[i] = index_of(ds, seq ? PySequence_Fast_GET_ITEM(seq, i) : item);
      if (idx[i] == (size_t)-1 && PyErr_Occurred()) rc = -1;
    }
    stoke_config c;
    stoke_loader_config(l, &c);
    if (rc == 0 && n == 0) {
      PyErr_SetString(PyExc_ValueError,
                      "stoke.DataLoader: the batch sampler gave an empty "
                      "batch");
      rc = -1;
    } else if (rc == 0 && n > c.batch_size) {
      PyErr_Format(PyExc_ValueError,
                   "stoke.DataLoader: the batch sampler gave a batch of %zu "
                   "samples, more than max_batch_size=%zu: pass a larger "
                   "max_batch_size", n, c.batch_size);
      rc = -1;
    }
    if (rc == 0) {
      rc = stoke_loader_order_append(l, idx, &n, 1);
      if (rc != 0) {
        sk_raise(rc, stoke_errmsg(l));
        rc = -1;
      }
    }
    if (idx != stack) PyMem_Free(idx);
    Py_XDECREF(seq);
    Py_DECREF(item);
    if (rc < 0) return -1;
  }
  if (rc != 0) {
    sk_raise(rc, stoke_errmsg(l));
    return -1;
  }
  self->fed++;
  return 0;
}

static int top_up(sk_DatasetLoader *self, stoke_loader *l) {
  while (!self->order_ended && self->fed < self->taken + self->ahead) {
    int r = give_one(self, l);
    if (r < 0) return -1;
    if (r > 0) self->order_ended = 1;
  }
  return 0;
}

/* The loader failed: the dataset's own exception if it raised one. */
static PyObject *engine_raise(sk_DatasetLoader *self, stoke_loader *l,
                              int rc) {
  sk_ds *ds = self->ds;
  if (ds->error && rc != STOKE_EBADSTATE) {
    PyObject *e = ds->error;
    PyObject *tb = PyException_GetTraceback(e);
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(e)), Py_NewRef(e), tb);
    return NULL;
  }
  if (rc == STOKE_EBADSTATE)
    return sk_raise(rc, "stoke.DataLoader: this iteration stopped at an "
                        "earlier error; start a new one with iter(loader)");
  return sk_raise(rc, stoke_errmsg(l));
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* next_batch(timeout=0): the epoch's next batch; StopIteration at its end.
** timeout > 0: RuntimeError after that many seconds without one, as
** torch's DataLoader. */
static PyObject *engine_next(sk_DatasetLoader *self, PyObject *args) {
  double timeout = 0;
  if (!PyArg_ParseTuple(args, "|d", &timeout)) return NULL;
  stoke_loader *l = sk_loader_get(&self->base);
  if (!l) return NULL;
  if (self->epoch_done) {
    PyErr_SetNone(PyExc_StopIteration);
    return NULL;
  }
  sk_ds *ds = self->ds;
  double t0 = timeout > 0 ? mono_s() : 0;
  for (;;) {
    if (top_up(self, l) < 0) return NULL;
    stoke_batch *b = NULL;
    int rc;
    for (;;) {
      Py_BEGIN_ALLOW_THREADS
      rc = stoke_loader_next_timed(l, &b, WAIT_SLICE_NS);
      Py_END_ALLOW_THREADS
      if (rc != STOKE_AGAIN) break;
      if (PyErr_CheckSignals() < 0) return NULL;
      if (timeout > 0 && mono_s() - t0 > timeout)
        return PyErr_Format(PyExc_RuntimeError,
                            "DataLoader timed out after %g seconds", timeout);
    }
    if (rc == STOKE_END) {
      self->epoch_done = 1;
      self->base.in_epoch = 0;
      PyErr_SetNone(PyExc_StopIteration);
      return NULL;
    }
    if (rc != STOKE_OK) {
      self->epoch_done = 1;
      self->failed = 1;
      return engine_raise(self, l, rc);
    }
    self->base.in_epoch = 1;
    self->taken++;
    sk_pend *p = pend_get(ds, b, 0);
    PyObject *r = NULL, *err = NULL;
    int empty = p && p->empty;
    if (p && p->pb && p->pb->error) err = Py_NewRef(p->pb->error);
    else if (p && p->pb && p->pb->result) r = Py_NewRef(p->pb->result);
    if (p) pend_clear(p);
    /* The slot goes back now: the batch lives in its own tensors. */
    stoke_batch_release(b);
    if (empty) continue; /* an exhausted IterableDataset stream */
    if (err) {
      /* This batch's error; the next call goes on with the next batch. */
      if (PyExceptionInstance_Check(err)) {
        PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(err)), err,
                      PyException_GetTraceback(err));
      } else {
        PyErr_SetObject(PyExc_RuntimeError, err);
        Py_DECREF(err);
      }
      return NULL;
    }
    if (!r)
      return PyErr_Format(PyExc_SystemError,
                          "stoke: batch %zu came without its contents",
                          self->taken - 1);
    return r;
  }
}

static PyObject *engine_error(sk_DatasetLoader *self, PyObject *noargs) {
  return Py_NewRef(self->ds && self->ds->error ? self->ds->error : Py_None);
}

static PyObject *engine_get_epoch(sk_DatasetLoader *self, void *c) {
  return PyLong_FromLongLong(self->epoch);
}

static PyMethodDef engine_methods[] = {
    {"begin", (PyCFunction)engine_begin, METH_O,
     "begin(index_iter): start the next epoch with this order."},
    {"next_batch", (PyCFunction)engine_next, METH_VARARGS,
     "next_batch(timeout=0): the next batch, StopIteration at the end."},
    {"error", (PyCFunction)engine_error, METH_NOARGS,
     "The first exception the dataset raised, or None."},
    {NULL, NULL, 0, NULL}};

static PyObject *engine_get_failed(sk_DatasetLoader *self, void *c) {
  return PyBool_FromLong(self->failed);
}

static PyGetSetDef engine_getset[] = {
    {"epoch", (getter)engine_get_epoch, NULL, "the current epoch", NULL},
    {"failed", (getter)engine_get_failed, NULL,
     "the loader stopped at an error (a batch's own error does not stop it)",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject sk_DatasetLoaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stoke._stoke.DatasetLoader",
    .tp_basicsize = sizeof(sk_DatasetLoader),
    .tp_dealloc = (destructor)engine_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The C engine of stoke.DataLoader.",
    .tp_traverse = (traverseproc)engine_traverse,
    .tp_methods = engine_methods,
    .tp_getset = engine_getset,
    .tp_init = (initproc)engine_init,
};

PyObject *sk_dataset_result(PyObject *spec, const stoke_batch *b) {
  PyObject *cap = PyDict_GetItemString(spec, "_ds");
  sk_ds *ds = cap ? PyCapsule_GetPointer(cap, "stoke.dataset") : NULL;
  if (!ds) return PyErr_Format(PyExc_SystemError, "stoke: no dataset");
  sk_pend *p = pend_get(ds, b, 0);
  PyObject *r = p && p->pb && p->pb->result ? Py_NewRef(p->pb->result)
                                            : NULL;
  if (p) pend_clear(p);
  if (!r && !PyErr_Occurred())
    PyErr_Format(PyExc_SystemError, "stoke: batch %zu has no contents",
                 stoke_batch_number(b));
  return r;
}

/* ---- worker info and threads ---------------------------------------------------------- */

PyObject *sk_worker_info(PyObject *mod, PyObject *noargs) {
  return Py_NewRef(tls_info ? tls_info : Py_None);
}

PyObject *sk_on_worker_thread(PyObject *mod, PyObject *noargs) {
  return PyBool_FromLong(tls_worker != NULL);
}

typedef void (*omp_set_fn)(int);

PyObject *sk_set_thread_intraop(PyObject *mod, PyObject *arg) {
  long n = PyLong_AsLong(arg);
  if (n == -1 && PyErr_Occurred()) return NULL;
  if (n < 1) {
    PyErr_SetString(PyExc_ValueError, "threads: expected >= 1");
    return NULL;
  }
  /* torch's intra-op work runs on OpenMP: its thread count is a per-thread
  ** setting (the nthreads-var ICV).  Only a runtime torch already loaded
  ** is asked; nothing is loaded here. */
  static const char *const libs[] = {"libgomp.so.1", "libomp.so",
                                     "libiomp5.so", NULL};
  omp_set_fn fn = NULL;
  for (int i = 0; !fn && libs[i]; i++) {
    void *h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
      fn = (omp_set_fn)(uintptr_t)dlsym(h, "omp_set_num_threads");
      dlclose(h);
    }
  }
  if (!fn) Py_RETURN_FALSE;
  fn((int)n);
  Py_RETURN_TRUE;
}
