/* dataset.h — Python datasets on stoke's worker threads (dataset.c) and
** torch's default_collate in C (collate.c), for stoke.DataLoader. */
#ifndef STOKE_PY_DATASET_H
#define STOKE_PY_DATASET_H

#include "ext.h"

#include <pthread.h>

/* ---- collate.c ------------------------------------------------------------ */

/* torch, loaded once (with the GIL) by the first DataLoader engine. */
typedef struct sk_torch_api {
  PyObject *torch;
  PyTypeObject *tensor;     /* torch.Tensor */
  PyObject *empty;          /* torch.empty */
  PyTypeObject *ndarray;    /* numpy.ndarray, or NULL without numpy */
  PyTypeObject *np_generic; /* numpy.generic (NumPy scalars) */
  struct { int stoke; PyObject *torch; } dtypes[12];
  int n_dtypes;
} sk_torch_api;

extern sk_torch_api sk_tapi;
int sk_torch_api_load(void); /* 0 or -1 with an exception */

enum {
  SK_NODE_TENSOR = 1, /* torch.Tensor (exact type, CPU, strided) */
  SK_NODE_NDARRAY,    /* numpy.ndarray of a dtype torch has */
  SK_NODE_NPSCALAR,   /* numpy.bool_, numpy.float32, ... */
  SK_NODE_INT,        /* int: int64 */
  SK_NODE_FLOAT,      /* float: float64 */
  SK_NODE_BOOL,       /* bool: bool */
  SK_NODE_STR,        /* str or bytes: a list (a tuple inside a sequence) */
  SK_NODE_TUPLE,      /* tuple: a list of fields */
  SK_NODE_LIST,       /* list: a list of fields */
  SK_NODE_NAMEDTUPLE, /* its own type of fields */
  SK_NODE_DICT        /* dict: the first sample's keys */
};

/* One node of a batch's layout, and the batch's output for it. */
typedef struct sk_node {
  int kind;
  int dtype;                      /* stoke dtype of a leaf's tensor */
  int ndim;                       /* one sample's shape */
  Py_ssize_t shape[STOKE_MAX_DIMS];
  size_t bytes;                   /* one sample's bytes */
  int str_tuple;                  /* STR inside a tuple/list */
  PyObject *type;                 /* NAMEDTUPLE */
  PyObject *keys;                 /* DICT: list */
  struct sk_node *child;
  size_t n_child;
  PyObject *out;                  /* the batch's tensor (or list) */
  char *data;                     /* the tensor's memory */
  char path[96];                  /* "[0]['image']", for messages */
} sk_node;

/* A copy from a sample into its batch row, run without the GIL. */
typedef struct sk_copy {
  char *dst;
  const char *src;
  size_t bytes, itemsize;
  int contiguous, ndim;
  Py_ssize_t shape[STOKE_MAX_DIMS];
  Py_ssize_t strides[STOKE_MAX_DIMS];
} sk_copy;

typedef struct sk_copies {
  sk_copy *v;
  size_t n, cap;
} sk_copies;

/* A batch being built by the workers (all fields: GIL held). */
typedef struct sk_pbatch {
  size_t n;            /* samples */
  uint64_t epoch;
  size_t number;
  size_t received;     /* samples whose add started */
  size_t added;        /* samples whose add finished: the add that makes
                          it n finishes the batch (no other add is then in
                          progress; copies without the GIL may be) */
  PyObject *samples;   /* list of n: the samples, kept until finished */
  PyObject **keys;     /* n: each sample's key (for messages) */
  PyObject *keep;      /* list: contiguous copies of sample tensors */
  int probed, irregular;
  size_t probe_pos;    /* the sample whose layout the batch has */
  sk_node root;
  PyObject *result;    /* the finished batch */
  PyObject *error;     /* the batch's exception, with its note: the batch
                          raises it at its turn and the epoch goes on
                          (torch's iterator does) */
  size_t error_pos;    /* the position of the sample that raised it
                          (SIZE_MAX: collation): the lowest one is kept, as
                          torch fetches a batch's samples in order and
                          stops at the first error; samples after it are
                          not made */
} sk_pbatch;

sk_pbatch *sk_pbatch_new(size_t n, uint64_t epoch, size_t number);
void sk_pbatch_free(sk_pbatch *pb);
/* Add sample x (its key for messages) at pos.  fast: collate in C (else
** only kept for a Python collate function).  Copies to run without the GIL
** are appended to copies.  0; 1 when this add completed the batch (every
** sample added: the caller finishes it); or -1 with an exception (a shape
** mismatch, or torch failing).  The batch keeps its samples alive until it
** is freed, which must wait until every fill that added to it returned. */
int sk_pbatch_add(sk_pbatch *pb, PyObject *x, size_t pos, PyObject *key,
                  int fast, int pin, sk_copies *copies);
/* The finished batch: the C layout assembled, or py_collate(samples) for a
** batch the fast path did not take.  New reference or NULL. */
PyObject *sk_pbatch_finish(sk_pbatch *pb, PyObject *py_collate);
/* No GIL needed. */
void sk_copies_run(const sk_copies *c);
void sk_copies_free(sk_copies *c);

/* ---- dataset.c ------------------------------------------------------------ */

/* A source for the package's description {"kind": "dataset", ...}
** (source.c's dispatch). */
int sk_dataset_source(PyObject *spec, stoke_source **out, sk_keep *keep);

extern PyTypeObject sk_DatasetLoaderType;

/* A tune sweep's step: the finished batch b of the dataset source of spec
** (new reference; its entry is dropped).  NULL with an exception. */
PyObject *sk_dataset_result(PyObject *spec, const stoke_batch *b);

/* torch.utils.data.get_worker_info() inside a worker thread: that
** thread's (or the IterableDataset stream's) WorkerInfo; None elsewhere. */
PyObject *sk_worker_info(PyObject *mod, PyObject *noargs);
/* Is the calling thread a stoke.DataLoader worker (of any loader)? */
PyObject *sk_on_worker_thread(PyObject *mod, PyObject *noargs);
/* Give the calling thread's torch intra-op work n threads (OpenMP's
** per-thread setting), leaving other threads' alone. */
PyObject *sk_set_thread_intraop(PyObject *mod, PyObject *arg);

/* ---- shared.c ------------------------------------------------------------- */

/* Atomic int64 counters in a shared-memory buffer (worker processes). */
PyObject *sk_shared_fetch_add(PyObject *mod, PyObject *args);
PyObject *sk_shared_load(PyObject *mod, PyObject *args);
PyObject *sk_shared_store(PyObject *mod, PyObject *args);
/* The stage block of worker processes (stoke_stage_block, in a shared
** buffer): its size, its initialisation, one sample's record. */
PyObject *sk_stage_block_bytes(PyObject *mod, PyObject *args);
PyObject *sk_stage_block_init(PyObject *mod, PyObject *args);
PyObject *sk_stage_record(PyObject *mod, PyObject *args);
/* The per-sample seed (splitmix64 over ints), and a multiprocessing
** semaphore posted or taken n times in one call (its SemLock handle). */
PyObject *sk_seed_mix(PyObject *mod, PyObject *args);
PyObject *sk_sem_post_n(PyObject *mod, PyObject *args);
PyObject *sk_sem_take_n(PyObject *mod, PyObject *args);

#endif
