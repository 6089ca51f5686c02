"""stoke.DataLoader: torch's DataLoader, argument for argument, running any
Python dataset on stoke's worker threads.

Change one import and a loop written for torch.utils.data.DataLoader runs
unchanged; the loader then also has the two clocks, the stages of a Python
sample (its time in __getitem__, waiting for the GIL, collation), the
verdict (with "python-bound" when the GIL is what limits it) and the
advice: loader.stats(), .diagnose(), .report(), .save_json(),
.save_trace().

What threads change, and what stoke does about it (docs/dataloader.md):
  - the GIL is held only around the calls into Python (__getitem__, a
    collate_fn, worker_init_fn); default collation runs in C, into each
    batch's own tensors;
  - each worker thread has its own shallow copy of the dataset
    (copy.copy), as each of torch's worker processes has its own copy:
    attributes set on it are that worker's, what they refer to (arrays,
    lists, file contents) is shared, one copy in memory;
  - torch.utils.data.get_worker_info() and stoke.get_worker_info() report
    the calling worker thread (torch's is a process global: stoke makes it
    thread-aware);
  - torch's intra-op threads: each worker thread uses torch_threads of them
    (default 1, as torch's worker processes), the main thread keeps its
    own;
  - workers are threads that live as long as the loader: persistent_workers
    only decides whether iter() returns the same iterator object (as in
    torch), and worker_init_fn runs once per thread;
  - multiprocessing_context has no effect (it is checked as torch checks
    it).
worker_type="process" runs the dataset on worker processes instead: a
map-style one (python/stoke/_procs.py) with torch's semantics, samples
shared out through shared-memory atomics in the same order, per-sample
reseeding; an IterableDataset (python/stoke/_iterprocs.py) as torch
shards it, a stream per worker."""

import atexit
import copy as _copy
import math
import os
import time
import warnings
import weakref

from . import _stoke
from ._util import deadline_kw, parse_price
from .loader import _WORKER_POLICIES, _is_path, loader_config

_PROFILE_NAME = "enumerate(DataLoader)#stoke.DataLoader.__next__"
_WORKER_TYPES = ("thread", "process", "auto")
_MAX_BATCH = 4096

# Engines (the C loaders and their worker threads), closed at exit before
# the interpreter goes: threads must not run Python during finalization.
# An engine lives while its DataLoader or an iterator of it does (so
# next(iter(DataLoader(ds))) works), and stops its threads when the last
# reference goes.
_live = weakref.WeakSet()

# References dropped on a stoke worker thread (the garbage collector runs
# wherever an allocation triggers it): the last one would make a loader stop
# its threads from one of its own threads, so they are moved here and
# dropped from a thread that is not a worker.
_deferred = []


def _drop_on_a_good_thread(engine, close=False):
    if engine is None:
        return
    if _stoke.on_worker_thread():
        _deferred.append((engine, close))
    elif close:
        engine.close()


def _drop_deferred():
    if _stoke.on_worker_thread():
        return
    while _deferred:
        engine, close = _deferred.pop()
        if close:
            engine.close()


@atexit.register
def _close_all():
    for engine in list(_live):
        try:
            engine.close()
        except Exception:
            pass
    _deferred.clear()


def get_worker_info():
    """Inside a stoke.DataLoader worker thread: its WorkerInfo (``id``,
    ``num_workers``, ``seed``, ``dataset`` — that worker's copy), the same
    object torch.utils.data.get_worker_info() returns there.  None
    elsewhere."""
    return _stoke.worker_info()


def _install_worker_info():
    """Make torch.utils.data.get_worker_info() thread-aware.  torch keeps the
    worker's info in a module global of its worker process; threads share
    the process, so the function's code is replaced (in place: references
    imported before stoke see it too) by one that asks stoke for the
    calling thread's info first and falls back to torch's global, which
    torch's own worker processes still set."""
    from torch.utils.data._utils import worker as w
    if getattr(w, "_stoke_worker_info", None) is not None:
        return
    w._stoke_worker_info = _stoke.worker_info
    src = ("def get_worker_info():\n"
           "    info = _stoke_worker_info()\n"
           "    return _worker_info if info is None else info\n")
    ns = {}
    exec(compile(src, "<stoke: thread-aware get_worker_info>", "exec"), ns)
    w.get_worker_info.__code__ = ns["get_worker_info"].__code__


def _stock_collate_map():
    """True when torch's default_collate_fn_map is as torch ships it: then
    stoke's C collation gives torch's results."""
    try:
        from torch.utils.data._utils import collate as c
    except ImportError:
        return False
    m = getattr(c, "default_collate_fn_map", None)
    if m is None:
        return True  # an older torch without the registry
    import torch
    stock = {torch.Tensor: c.collate_tensor_fn, float: c.collate_float_fn,
             int: c.collate_int_fn}
    for k, v in stock.items():
        if m.get(k) is not v:
            return False
    extra = {k: v for k, v in m.items() if k not in stock}
    allowed = {c.collate_numpy_array_fn, c.collate_numpy_scalar_fn,
               c.collate_str_fn}
    return len(extra) <= 3 and all(v in allowed for v in extra.values())


def _torch_collate():
    """torch's default_collate without its shared-memory output (which it
    uses whenever get_worker_info() is set, i.e. in every stoke worker)."""
    import torch
    from torch.utils.data._utils import collate as c
    if not hasattr(c, "collate") or not hasattr(c, "default_collate_fn_map"):
        return c.default_collate
    fmap = dict(c.default_collate_fn_map)

    def stack(batch, *, collate_fn_map=None):
        return torch.stack(batch, 0)
    fmap[torch.Tensor] = stack

    def collate(batch):
        return c.collate(batch, collate_fn_map=fmap)
    return collate


def auto_max_workers():
    """The most threads DataLoader(num_workers="auto") starts (and gates):
    max(2 x CPUs, 8), as stoke.tune's ladder: a Python dataset is copied per
    worker, and one whose samples mostly hold the GIL gains nothing past a
    few."""
    return max(2 * (os.cpu_count() or 1), 8)


def _worker_functions(dataset, num_workers, base_seed, worker_init_fn,
                      torch_threads):
    """make_worker(id) -> (its dataset, its WorkerInfo); init_worker(id),
    both run on the worker thread.  No reference to the DataLoader: the
    engine holds these."""
    import torch
    from torch.utils.data._utils.worker import WorkerInfo

    def make_worker(worker_id):
        ds = dataset
        try:
            ds = _copy.copy(dataset)
        except Exception:
            pass  # not copyable: the workers share it
        info = WorkerInfo(id=worker_id, num_workers=num_workers,
                          seed=base_seed + worker_id, dataset=ds)
        return ds, info

    def init_worker(worker_id):
        if torch_threads:
            torch.get_num_threads()  # torch sets this thread up first
            _stoke.set_thread_intraop(int(torch_threads))
        if worker_init_fn is not None:
            worker_init_fn(worker_id)
    return make_worker, init_worker


def is_map_dataset(x):
    """A map-style Python dataset (torch's Dataset, or anything with
    __getitem__ and __len__ that is not an array)."""
    try:
        from torch.utils.data import Dataset, IterableDataset
    except ImportError:
        return False
    if isinstance(x, IterableDataset):
        return False
    if isinstance(x, Dataset):
        return True
    return False


def tune_spec(dataset, workers, max_workers, collate_fn=None,
              worker_init_fn=None, torch_threads=1):
    """The source description stoke.tune sweeps over a map-style dataset:
    stoke's own order over range(len(dataset)), collated as
    stoke.DataLoader collates."""
    import torch
    _install_worker_info()
    w = max(list(workers or []) + [max_workers or max(
        2 * (os.cpu_count() or 1), 8), 1])
    from torch.utils.data._utils import collate as _tc
    user = collate_fn is not None and collate_fn is not _tc.default_collate
    fast = not user and _stock_collate_map()
    collate = collate_fn if user else _torch_collate()
    make_worker, init_worker = _worker_functions(
        dataset, w, int(torch.empty((), dtype=torch.int64).random_().item()),
        worker_init_fn, torch_threads)
    return {"kind": "dataset", "dataset": dataset, "length": len(dataset),
            "tune": 1, "iterable": 0, "num_workers": w, "batch_size": 1,
            "auto_collation": 1, "drop_last": 0, "fast": int(fast),
            "pin_memory": 0, "collate": collate, "make_worker": make_worker,
            "init_worker": init_worker,
            "label": f"Python dataset {type(dataset).__name__}"}


def _check_exports(metrics_file, metrics_every, log_jsonl, log_every):
    """The metrics' and JSON lines' arguments, checked when the loader is
    made so that a bad value names its argument (loader_config builds their
    fields later, and takes what Loader allows)."""
    for v, name in ((metrics_file, "metrics_file"), (log_jsonl, "log_jsonl")):
        if v is None:
            continue
        if not _is_path(v):
            raise TypeError(f"{name}: expected a path, got {v!r}")
        if not os.fsdecode(v):
            raise ValueError(f"{name}: expected a path, got ''")
    if isinstance(metrics_every, bool) or \
            not isinstance(metrics_every, (int, float)) or \
            not metrics_every > 0:
        raise ValueError(f"metrics_every: expected seconds > 0, got "
                         f"{metrics_every!r}")
    if isinstance(log_every, bool) or not isinstance(log_every, int) or \
            log_every < 1:
        raise ValueError(f"log_every: expected an integer >= 1, got "
                         f"{log_every!r}")


class _DataLoader:
    """torch.utils.data.DataLoader on stoke's worker threads.

    The arguments are torch's, with torch's checks and errors.  Extra
    keyword arguments: ``torch_threads`` (torch intra-op threads per worker
    thread, default 1 as in torch's worker processes; None leaves torch's
    setting), ``max_batch_size`` (the largest batch a custom batch_sampler
    gives, default its batch_size or 4096), ``warmup`` (epochs left out of
    the statistics; not given: the first epoch, or its first 10 steps and
    5 s if those come first), ``trace`` (keep spans for
    :meth:`save_trace`) and ``gpu_price`` (the accelerator's price per hour,
    ``2.5`` or ``"2.50/h"``: the cost in :meth:`stats` and :meth:`report`
    in money) and ``worker_policy`` (``"batch"``, the default: the worker
    threads run under SCHED_BATCH, so that one woken to make a sample never
    takes the core of the thread running the training step; ``"normal"``:
    the OS default), ``worker_type`` (``"thread"``, the default;
    ``"process"``: worker processes; ``"auto"``:
    threads until the measured switch exists) and ``seed_per_sample``
    (process mode: reseed torch, random and NumPy before each sample from
    (base seed, epoch, key); default True).  ``metrics_file=PATH`` writes
    Prometheus text (node_exporter's textfile collector) atomically every
    ``metrics_every`` seconds and at the end; ``log_jsonl=PATH`` appends a
    JSON line per epoch and every ``log_every`` steps, as
    :class:`stoke.Loader` does (docs/metrics.md).  :meth:`memory`: the
    memory ledger.  See
    the module's documentation for what running on threads changes."""

    __initialized = False

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None,
                 batch_sampler=None, num_workers=0, collate_fn=None,
                 pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None,
                 generator=None, *, prefetch_factor=None,
                 persistent_workers=False, pin_memory_device="",
                 in_order=True, torch_threads=1, max_batch_size=None,
                 warmup=None, trace=False, gpu_price=None,
                 worker_policy="batch", worker_type="thread",
                 seed_per_sample=True, metrics_file=None, metrics_every=10.0,
                 log_jsonl=None, log_every=100):
        import torch
        from torch.utils.data import (BatchSampler, IterableDataset,
                                      RandomSampler, SequentialSampler)
        from torch.utils.data._utils import collate as _tc
        # num_workers="auto": stoke's online autotuner, up to
        # auto_max_workers() threads (each with its copy of the dataset);
        # worker_type="process": as many processes, by _procauto.py.
        self._autotune = num_workers == "auto"
        if self._autotune:
            num_workers = auto_max_workers()
        elif num_workers == "cores":
            num_workers = os.cpu_count() or 1
        # torch's checks, in torch's order and words.
        if num_workers < 0:
            raise ValueError('num_workers option should be non-negative; '
                             'use num_workers=0 to disable multiprocessing.')
        if timeout < 0:
            raise ValueError('timeout option should be non-negative')
        if num_workers == 0 and prefetch_factor is not None and \
                prefetch_factor != 2:
            raise ValueError('prefetch_factor option could only be specified '
                             'in multiprocessing.let num_workers > 0 to '
                             'enable multiprocessing, otherwise set '
                             'prefetch_factor to None.')
        if prefetch_factor is None and num_workers > 0:
            prefetch_factor = 2
        assert prefetch_factor is None or prefetch_factor > 0
        if persistent_workers and num_workers == 0:
            raise ValueError('persistent_workers option needs num_workers > 0')
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order
        from torch.utils.data.dataloader import _DatasetKind
        if isinstance(dataset, IterableDataset):
            self._dataset_kind = _DatasetKind.Iterable
            self._iterable = True
            if self._autotune:
                # Each worker iterates its own share of the dataset: a
                # worker gated off would hold its share back.
                raise ValueError(
                    "num_workers='auto': an IterableDataset is split among "
                    "its workers, so their number cannot change while it "
                    "runs; give num_workers=N")
            if shuffle not in {False, None}:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified "
                    "shuffle option, but got shuffle={}".format(shuffle))
            if sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified "
                    "sampler option, but got sampler={}".format(sampler))
            elif batch_sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified "
                    "batch_sampler option, but got batch_sampler={}".format(
                        batch_sampler))
        else:
            self._dataset_kind = _DatasetKind.Map
            shuffle = bool(shuffle)
            self._iterable = False
        if sampler is not None and shuffle:
            raise ValueError('sampler option is mutually exclusive with '
                             'shuffle')
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError('batch_sampler option is mutually exclusive '
                                 'with batch_size, shuffle, sampler, and '
                                 'drop_last')
            batch_size = None
            drop_last = False
        elif batch_size is None:
            if drop_last:
                raise ValueError('batch_size=None option disables '
                                 'auto-batching and is mutually exclusive '
                                 'with drop_last')
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        self._user_collate = collate_fn is not None and \
            collate_fn is not _tc.default_collate and \
            collate_fn is not _tc.default_convert
        if collate_fn is None:
            collate_fn = (_tc.default_collate if self._auto_collation
                          else _tc.default_convert)
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        if max_batch_size is None:
            max_batch_size = getattr(batch_sampler, "batch_size", None) \
                if batch_size is None else batch_size
        self._max_batch = int(max_batch_size or _MAX_BATCH)
        if torch_threads is not None and (isinstance(torch_threads, bool) or
                                          int(torch_threads) < 1):
            raise ValueError(f"torch_threads: expected an integer >= 1 or "
                             f"None, got {torch_threads!r}")
        self.torch_threads = torch_threads
        self._warmup = warmup
        self._trace = trace
        # stoke's own arguments as given, under their names: a framework
        # that re-creates the loader from its attributes and __init__'s
        # signature (Lightning) passes them on.
        self.max_batch_size = max_batch_size if max_batch_size is None \
            else int(max_batch_size)
        self.warmup = warmup
        self.trace = trace
        self.worker_policy = worker_policy
        self.gpu_price = gpu_price
        if worker_policy not in _WORKER_POLICIES:
            raise ValueError(f"worker_policy: expected 'batch' or 'normal', "
                             f"got {worker_policy!r}")
        self._worker_policy = worker_policy
        if worker_type not in _WORKER_TYPES:
            raise ValueError(f"worker_type: expected 'thread', 'process' or "
                             f"'auto', got {worker_type!r}")
        self.worker_type = worker_type
        # worker_type="auto": threads until the decision (python/stoke/
        # _autoswitch.py), made at the first iter() after an epoch on
        # threads; "process" from then on when it switched.
        self._auto_mode = "thread"
        self._auto_decision = None       # the first decision
        self._auto_epoch = None          # the epoch on threads, measured
        self._auto_process_epochs = []   # whole epochs' wall s, after it
        self._auto_history = []          # every decision (_auto_record)
        self._auto_judged = 0            # process epochs judged
        self._auto_final = False         # back on threads: no more
        self._auto_iters = 0             # iter()s so far (the epoch)
        self._auto_thread_epochs = 0     # whole epochs on threads, before
        self._auto_pending = None        # a decision waiting (persistent)
        self._auto_t0 = None             # the first iter() (ns)
        self._trace_origin_ns = None     # the trace's time origin (ns)
        self.seed_per_sample = bool(seed_per_sample)
        _check_exports(metrics_file, metrics_every, log_jsonl, log_every)
        self.metrics_file = metrics_file
        self.metrics_every = metrics_every
        self.log_jsonl = log_jsonl
        self.log_every = log_every
        self._gpu_price = parse_price(gpu_price, "gpu_price")
        self._engine = None
        self._engine_failed = False
        self._pstats = None      # process mode's clocks (_procstats.py)
        self._iterator = None
        self._IterableDataset_len_called = None
        self.__initialized = True

    # ---- torch's attributes ----------------------------------------------

    @property
    def multiprocessing_context(self):
        """Accepted and checked as torch checks it; threads need none."""
        return self.__multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, ctx):
        if ctx is not None:
            if self.num_workers > 0:
                import multiprocessing as mp
                if isinstance(ctx, str):
                    valid = mp.get_all_start_methods()
                    if ctx not in valid:
                        raise ValueError(
                            ('multiprocessing_context option should specify '
                             'a valid start method in {!r}, but got '
                             'multiprocessing_context={!r}').format(valid,
                                                                    ctx))
                    ctx = mp.get_context(ctx)
                if not isinstance(ctx, mp.context.BaseContext):
                    raise TypeError(
                        ('multiprocessing_context option should be a valid '
                         'context object or a string specifying the start '
                         'method, but got multiprocessing_context={}').format(
                             ctx))
            else:
                raise ValueError(
                    ('multiprocessing_context can only be used with '
                     'multi-process loading (num_workers > 0), but got '
                     'num_workers={}').format(self.num_workers))
        self.__multiprocessing_context = ctx

    def __setattr__(self, attr, val):
        if self.__initialized and attr in (
                'batch_size', 'batch_sampler', 'sampler', 'drop_last',
                'dataset', 'persistent_workers'):
            raise ValueError('{} attribute should not be set after {} is '
                             'initialized'.format(attr,
                                                  self.__class__.__name__))
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if self._iterable:
            length = self._IterableDataset_len_called = len(self.dataset)
            if self.batch_size is not None:
                from math import ceil
                if self.drop_last:
                    length = length // self.batch_size
                else:
                    length = ceil(length / self.batch_size)
            return length
        return len(self._index_sampler)

    def _processes(self):
        """Worker processes ("auto": once it switched)."""
        return self.num_workers > 0 and (
            self.worker_type == "process" or
            (self.worker_type == "auto" and self._auto_mode == "process"))

    def _auto_decide(self):
        """worker_type="auto" at an epoch boundary (iter()): after the
        first whole epoch on threads, the rule of _autoswitch.py on its
        workers' stages, priced with the pool's start; a switch starts
        worker processes at this iter() (the threads stop).  After each
        whole epoch on processes, its measured gain: back to threads, for
        good, when processes measured slower."""
        if self.worker_type != "auto" or self.num_workers < 1 or \
                self._auto_final:
            return
        if self._auto_mode == "process":
            self._auto_judge()
            return
        if self._auto_decision is not None or self._engine is None:
            return
        from . import _autoswitch
        measured = self._auto_epoch
        if measured is None:
            return   # no whole epoch measured yet: at the next boundary
        wait = self._auto_pending
        if wait is not None and \
                self._auto_thread_epochs < wait["repay_epochs"]:
            return   # persistent_workers: the start not repaid yet
        stages = _autoswitch.stage_delta(measured["before"],
                                         measured["after"])
        if not stages.get("python", {}).get("count", 0):
            return
        w = measured["workers"]
        persistent = bool(self.persistent_workers)
        start = _autoswitch.loader_start_estimate(self, w)
        d = _autoswitch.decide_from_epoch(
            stages, measured["wall_s"], w, _autoswitch.cores(),
            measured["cpu_s"], threads_epoch_s=measured["recurring_s"],
            start_s=start, persistent=persistent,
            start_source=f"estimated: {_autoswitch.start_method(self)}, "
                         f"{max(1, math.ceil(w))} worker"
                         f"{'s' if math.ceil(w) > 1 else ''}",
            epochs_run=self._auto_thread_epochs)
        d["num_workers_ceiling"] = self.num_workers
        if d["switch"] or d.get("wait"):
            why = _autoswitch.cannot_move(self)
            if why:
                d["switch"] = d["wait"] = False
                d["reason"] = f"{d['reason']}; stays on threads: {why}"
        d["epoch"] = self._auto_iters
        if d.get("wait"):
            # persistent_workers: the start not yet repaid; the next epoch
            # on threads is measured and the rule asked again.
            if self._auto_pending is None:
                self._auto_record(
                    "wait", "thread", "thread", d["predicted_gain"], None,
                    d["reason"], producer_gain=d.get("producer_gain"),
                    start_s=d.get("start_s"),
                    start_source=d.get("start_source"),
                    repay_epochs=d.get("repay_epochs"))
            self._auto_pending = d
            return
        d["worker_type"] = "process" if d["switch"] else "thread"
        self._auto_decision = d
        self._auto_record(
            "switch" if d["switch"] else "stay", "thread",
            d["worker_type"], d["predicted_gain"], None, d["reason"],
            producer_gain=d.get("producer_gain"), start_s=d.get("start_s"),
            start_source=d.get("start_source"),
            repay_epochs=d.get("repay_epochs"))
        if d["switch"]:
            self._auto_mode = "process"
            eng, self._engine = self._engine, None
            _drop_on_a_good_thread(eng, close=True)
            _drop_deferred()
            self._iterator = None

    def _auto_latest(self):
        """The latest whole epoch on processes, measured and judged
        (_autoswitch.judge(), with the prediction priced again with its
        measured start), or None when there is none."""
        from . import _autoswitch
        runs = self._auto_process_epochs
        d = self._auto_decision
        st = self._pstats
        m = st.marks if st is not None else None
        if d is None or self._auto_epoch is None or m is None or \
                m["ended"] is None or m["first"] is None:
            return None
        ns = 1e-9
        if self._iterable:
            # (_iterprocs.py's epochs are not timed to their end: from the
            # marks, to the last next(), without the pool's stop)
            runs = [None] * st.epochs_ended
            wall = (m["ended"] - m["begin"]) * ns
        elif not runs:
            return None
        else:
            wall = runs[-1]
        start = _autoswitch.start_from_marks(
            (m["first"] - m["begin"]) * ns, (m["last"] - m["begin"]) * ns,
            m["batches"], wall, (m["ended"] - m["begin"]) * ns)
        persistent = bool(self.persistent_workers)
        threads = self._auto_epoch["recurring_s"]
        j = _autoswitch.judge(threads, wall, start, persistent,
                              started_pool=len(runs) == 1)
        # the prediction again, with the start measured
        g = d.get("producer_gain")
        j["predicted_gain"] = None
        if g and threads > 0:
            each = 0.0 if persistent else start
            j["predicted_gain"] = threads / (threads / g + each)
        j["process_epochs"] = len(runs)
        return j

    def _auto_judge(self):
        st = self._pstats
        n = len(self._auto_process_epochs) if not self._iterable else \
            (st.epochs_ended if st is not None else 0)
        if n <= self._auto_judged:
            return   # no new whole epoch on processes
        j = self._auto_latest()
        if j is None or j["measured_gain"] is None:
            return
        self._auto_judged = n
        if not j["back"]:
            # The first two are recorded (with persistent_workers the
            # first is judged less its start, against 1.5x), later ones
            # only when they send it back.
            if self._auto_judged <= 2:
                self._auto_record(
                    "keep", "process", "process", j["predicted_gain"],
                    j["measured_gain"], j["reason"], start_s=j["start_s"],
                    start_source="measured",
                    process_epoch_s=j["process_epoch_s"],
                    threads_epoch_s=j["threads_epoch_s"])
            return
        self._auto_record(
            "back", "process", "thread", j["predicted_gain"],
            j["measured_gain"], j["reason"], start_s=j["start_s"],
            start_source="measured", process_epoch_s=j["process_epoch_s"],
            threads_epoch_s=j["threads_epoch_s"])
        self._auto_mode = "thread"
        self._auto_final = True
        self._auto_back = j
        for it in list(getattr(self, "_proc_iters", ())):
            it._close()
        self._iterator = None
        self._pstats = None

    def _auto_record(self, kind, from_mode, to_mode, predicted, measured,
                     reason, **more):
        """One decision into the history (the summary's ``decisions``, the
        trace's instant events)."""
        now = time.perf_counter_ns()
        rec = {"epoch": self._auto_iters, "kind": kind, "from": from_mode,
               "to": to_mode, "predicted_gain": predicted,
               "measured_gain": measured, "reason": reason,
               "time_s": (now - (self._auto_t0 or now)) / 1e9}
        rec.update(more)
        rec["_ns"] = now
        self._auto_history.append(rec)

    def _auto_summary(self):
        """stats()["auto"]: the first decision, the mode now, after a
        switch the measured gain, and every decision (``decisions``)."""
        d = self._auto_decision
        if self.worker_type != "auto":
            return None
        history = [{k: v for k, v in h.items() if k != "_ns"}
                   for h in self._auto_history]
        if d is None:
            if self._auto_pending is not None:   # waiting: its figures
                return dict(self._auto_pending, decided=False,
                            worker_type="thread", decisions=history)
            return {"decided": False, "worker_type": "thread",
                    "reason": "threads first: the decision comes at the "
                              "first iter() after an epoch on threads",
                    "decisions": history}
        out = dict(d, decided=True)
        out["worker_type"] = self._auto_mode
        out["decisions"] = history
        out["switched_back"] = self._auto_final
        # measured_gain: the epoch on threads over the latest whole epoch
        # on processes, both as they recur (_autoswitch.judge); after a
        # switch back, the one that sent it back.
        # measured_producer_gain: the workers' samples a second from their
        # stages over the threads' (the producers alone; a short epoch's
        # first samples, made while the pool starts, weigh on it).
        out["measured_gain"] = out["measured_producer_gain"] = None
        j = getattr(self, "_auto_back", None) if self._auto_final else \
            (self._auto_latest() if d["switch"] else None)
        if j is not None:
            out["measured_gain"] = j["measured_gain"]
            out["measured_start_s"] = j["start_s"]
            out["process_epochs"] = j["process_epochs"]
        if d["switch"] and self._pstats is not None:
            from . import _autoswitch
            st = {s["name"]: s for s in self._pstats.stats()["stages"]}
            wall = _autoswitch.stage_wall(st)
            if wall > 0 and d["threads_samples_per_s"]:
                w = d["num_workers"]
                tuner = self._pstats.tuner
                if tuner is not None:
                    w = tuner.active
                out["measured_producer_gain"] = (
                    w / wall / d["threads_samples_per_s"])
        return out

    def _auto_line(self):
        a = self._auto_summary()
        if a is None:
            return ""
        if not a["decided"]:
            return "worker_type=auto: threads; " + a["reason"]
        to = "process" if a["switch"] else "thread"   # the first decision
        text = (f"worker_type=auto: {to} from epoch {a['epoch']}: "
                f"{a['reason']}")
        first = a["measured_gain"] if not a["switched_back"] else None
        if first is not None:
            text += f"; measured {first:.2f}x"
        for h in a["decisions"][1:]:
            if h["kind"] == "back":
                text += (f"\nworker_type=auto: thread from epoch "
                         f"{h['epoch']}: {h['reason']}")
        return text

    def _auto_trace(self, path):
        """The decisions into the trace at path, as instant events on the
        whole process (ts on the trace's origin; one made before it, in an
        earlier mode's trace, at 0 with its time_s in its args)."""
        if not self._auto_history:
            return
        import json
        with open(path) as f:
            doc = json.load(f)
        origin = self._trace_origin_ns
        if self._processes() and self._pstats is not None:
            from . import _proctrace
            exact = _proctrace.consumer_t0(path, self._pstats._last_enter)
            if exact is not None:
                origin = exact
        for h in self._auto_history:
            ts = 0.0 if origin is None else max(0.0, (h["_ns"] - origin) / 1e3)
            args = {k: v for k, v in h.items() if k not in ("_ns", "kind")}
            args["from_mode"] = args.pop("from")
            args["to_mode"] = args.pop("to")
            doc["traceEvents"].append({
                "name": f"worker_type auto: {h['kind']} "
                        f"({h['from']} -> {h['to']})",
                "cat": "stoke", "ph": "i", "s": "g", "ts": round(ts, 3),
                "pid": 1, "tid": 0, "args": args})
        tmp = f"{path}.tmp.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, path)

    def __iter__(self):
        if self.worker_type == "auto":
            if self._auto_t0 is None:
                self._auto_t0 = time.perf_counter_ns()
            self._auto_decide()
            self._auto_iters += 1
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    def _get_iterator(self):
        # torch's own too: code that calls it gets stoke's iterator, never
        # torch's worker processes.
        if self._processes():
            if self._iterable:
                from ._iterprocs import IterableProcessIterator as cls
            else:
                from ._procs import ProcessIterator as cls
            it = cls(self)
            # close() stops them (weakly held: an iterator dropped stops
            # its workers itself).
            if getattr(self, "_proc_iters", None) is None:
                self._proc_iters = weakref.WeakSet()
            self._proc_iters.add(it)
            return it
        return _Iterator(self)

    def check_worker_number_rationality(self):
        """torch warns when its worker processes outnumber the cores; stoke
        shares samples among its workers, and says what to do about too
        many in its advice."""

    # ---- the engine --------------------------------------------------------

    def _fast_collate(self):
        return not self._user_collate and _stock_collate_map()

    def _engine_for(self, base_seed):
        """The C engine, started on first use (threads are started at the
        first iter(), as torch starts its workers); remade after an error
        poisoned it."""
        _drop_deferred()
        if self._engine is not None and self._engine_failed:
            _drop_on_a_good_thread(self._engine, close=True)
            self._engine = None
        self._engine_failed = False
        if self._engine is not None:
            return self._engine
        import torch
        _install_worker_info()
        w = self.num_workers
        pin = bool(self.pin_memory) and torch.cuda.is_available()
        if self.pin_memory_device and not self.pin_memory:
            warnings.warn("pin memory device is set and pin_memory flag is "
                          "not used then device pinned memory won't be used"
                          "please set pin_memory to true, if you need to use "
                          "the device pin memory")
        fast = self._fast_collate()
        if not self._auto_collation:
            convert = self.collate_fn

            def collate(batch):
                return convert(batch[0])
        elif self._user_collate or not fast:
            collate = self.collate_fn
        else:
            collate = _torch_collate()
        if pin and not fast:
            from torch.utils.data._utils.pin_memory import pin_memory
            inner = collate

            def collate(batch):
                return pin_memory(inner(batch))
        make_worker, init_worker = _worker_functions(
            self.dataset, w, base_seed, self.worker_init_fn,
            self.torch_threads)
        name = type(self.dataset).__name__
        try:
            length = len(self.dataset)
        except TypeError:
            length = 0
        spec = {"kind": "dataset", "dataset": self.dataset, "length": length,
                "iterable": int(self._iterable), "num_workers": w,
                "batch_size": self.batch_size or 1,
                "auto_collation": int(self._auto_collation),
                "drop_last": int(bool(self.drop_last)), "fast": int(fast),
                "pin_memory": int(pin), "collate": collate,
                "make_worker": make_worker, "init_worker": init_worker,
                "label": f"Python dataset {name}",
                "gpu_price_per_hour": self._gpu_price}
        pf = self.prefetch_factor or 2
        # The autotuner starts at prefetch 2 and goes up to 8 (the
        # library's default deepest).
        prefetch = 8 if self._autotune else max(2, pf * max(w, 1))
        c_batch = 1 if self._iterable else (
            self.batch_size if self.batch_size is not None
            else (self._max_batch if self.batch_sampler is not None else 1))
        config = loader_config(
            c_batch, num_workers=w, prefetch=prefetch, rank=0, world_size=1,
            out_of_order=not self.in_order, epoch_prefetch=False,
            warmup=self._warmup, trace=self._trace,
            worker_policy=self._worker_policy,
            metrics_file=self.metrics_file, metrics_every=self.metrics_every,
            log_jsonl=self.log_jsonl, log_every=self.log_every)
        config["order_given"] = 1
        config["metrics_loader"] = "stoke.DataLoader"
        if self._autotune:
            config["autotune"] = 1
        ahead = prefetch + config["consumer_slots"] + 1
        self._trace_origin_ns = time.perf_counter_ns()   # the trace's t0
        self._engine = _stoke.DatasetLoader(spec, config, ahead)
        _live.add(self._engine)
        return self._engine

    def _proc_stats(self):
        """Process mode's clocks: the workers' stage block and the
        consumer's clock, made at the first iter() and kept across epochs
        and worker pools."""
        if self._pstats is None:
            from ._procstats import ProcStats
            self._trace_origin_ns = time.perf_counter_ns()
            self._pstats = ProcStats(self)
        return self._pstats

    def _need_engine(self):
        if self._processes():
            if self._pstats is None:
                raise _stoke.Error("no epoch has run yet: iterate the "
                                   "loader first")
            return self._pstats
        if self._engine is None:
            raise _stoke.Error("no epoch has run yet: iterate the loader "
                               "first")
        return self._engine

    def close(self):
        """Stop the worker threads now (they also stop once the loader and
        its iterators are gone, and at exit); iterators of it then stop.  A
        later iter() starts new threads.  Process mode: the same for its
        worker processes, and its clocks go (with the last metrics_file
        written, as thread mode's engine writes it when it closes)."""
        eng, self._engine = self._engine, None
        _drop_on_a_good_thread(eng, close=True)
        _drop_deferred()
        for it in list(getattr(self, "_proc_iters", ())):
            it._close()
        self._pstats = None

    def __del__(self):
        _drop_on_a_good_thread(getattr(self, "_engine", None))

    # ---- the doctor ----------------------------------------------------------

    def stats(self):
        """The steady-state summary, as `stoke bench --json` writes it: both
        clocks, percentiles, the stages (python, gil_wait, collate), the
        queue, RSS."""
        st = self._need_engine().stats()
        if self.worker_type == "auto":
            st["auto"] = self._auto_summary()
        return st

    def autotune(self):
        """num_workers="auto": the autotuner's workers and prefetch in force,
        its limits and every decision with its reason and numbers (worker
        processes: their tuner's, without prefetch); None otherwise."""
        return self._need_engine().autotune()

    def diagnose(self, cores=0, consumer_cpu=None, *, train_epochs=None,
                 deadline=None):
        """The verdict (python-bound when the GIL limits the workers), its
        numbers, the queue model, a what-if table and the advice.
        ``train_epochs=N, deadline="8h"`` (or seconds) adds ``deadline``:
        do N epochs fit, now and at the model's knee (stoke.Loader's
        diagnose())."""
        return self._need_engine().diagnose(
            cores, consumer_cpu, words="dataloader",
            **deadline_kw(train_epochs, deadline))

    def report(self, cores=0, consumer_cpu=None, all_ranks=False, *,
               train_epochs=None, deadline=None):
        """`stoke profile`'s report of this loader.  all_ranks=True gathers
        every rank's clocks through torch.distributed (a collective: call it
        on every rank) and adds a row per rank, the straggler and the job's
        verdict.  train_epochs and deadline as in diagnose()."""
        text = self._need_engine().report(
            cores, consumer_cpu, words="dataloader",
            **deadline_kw(train_epochs, deadline))
        if self.worker_type == "auto":
            text = text.rstrip("\n") + "\n" + self._auto_line() + "\n"
        if all_ranks:
            from .distributed import gather_stats, ranks_report
            text += "\n" + ranks_report(gather_stats(self))
        return text

    def save_json(self, path, cores=0, consumer_cpu=None, *,
                  train_epochs=None, deadline=None):
        """Write `stoke profile --json`'s document (`stoke report` renders
        it), with the memory ledger (memory()) under ``memory`` and, for
        worker_type="auto", its decision (stats()["auto"]) under ``auto``."""
        path = os.fspath(path)
        self._need_engine().save_json(path, cores, consumer_cpu,
                                      words="dataloader",
                                      **deadline_kw(train_epochs, deadline))
        # The ledger is the Python side's (the workers' own memory is read
        # from /proc here), so it joins the C document afterwards; the
        # document is replaced whole, never left half written.
        import json
        with open(path) as f:
            doc = json.load(f)
        doc["memory"] = self.memory()
        if self.worker_type == "auto":
            doc["auto"] = self._auto_summary()   # as stats()["auto"]
        tmp = f"{path}.tmp.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)

    def memory(self):
        """The memory ledger: ``shared_bytes`` (process mode: the slots,
        ring and stage block in shared memory, counted once; ``shared``
        by segment), ``main_bytes`` (the main process's own: its
        proportional share of anonymous and file pages), ``workers``
        (process mode: each worker process's ``id``, ``pid`` and
        ``own_bytes``, read now, or as they stopped: ``workers_alive``)
        and ``total_bytes``, their sum.  Threads: one process, whose own
        memory holds the slots."""
        if self._processes():
            return self._need_engine().memory()
        from ._procmem import own_bytes
        main = own_bytes(os.getpid()) or 0
        return {"shared_bytes": 0, "shared": {}, "main_bytes": main,
                "workers": [], "workers_alive": self._engine is not None,
                "total_bytes": main}

    def save_trace(self, path):
        """A Chrome/Perfetto trace of the spans kept (create with
        trace=True)."""
        path = os.fspath(path)
        self._need_engine().save_trace(path)
        if self.worker_type == "auto":
            self._auto_trace(path)   # its decisions, as instant events

    def __repr__(self):
        kind = "processes" if self._processes() else "threads"
        return (f"<stoke.DataLoader over {type(self.dataset).__name__}: "
                f"batch_size={self.batch_size}, num_workers="
                f"{self.num_workers} {kind}>")


# stoke.DataLoader is a subclass of torch.utils.data.DataLoader (isinstance
# holds where frameworks look for torch's loader), made at its first use so
# that `import stoke` does not import torch.  _DataLoader's methods come
# first: torch's __init__ and its worker processes never run; torch's
# attribute guards are _DataLoader's own copy of them.
_dataloader_class = None


def dataloader_class():
    """The class stoke.DataLoader: _DataLoader's methods on torch's
    DataLoader (on nothing when torch is missing: its __init__ then says
    so)."""
    global _dataloader_class
    if _dataloader_class is None:
        try:
            from torch.utils.data import DataLoader as base
            bases = (_DataLoader, base)
        except ImportError:
            bases = (_DataLoader,)
        cls = type("DataLoader", bases, {
            "__module__": __name__, "__qualname__": "DataLoader",
            "__doc__": _DataLoader.__doc__,
            # samples (not whole batches) are shared among the workers
            "_stoke_shares_samples": True})
        _dataloader_class = cls
    return _dataloader_class


def __getattr__(name):
    if name == "DataLoader":
        return dataloader_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _dataloader_words(d):
    """A diagnosis in stoke.DataLoader's words: each advice (a
    stoke._stoke.Advice, which keeps its structure) written again with
    DataLoader's arguments (prefetch_factor=, no echo=: the loop echoes)."""
    for a in d.get("advice", ()):
        if isinstance(a, _stoke.Advice):
            a["text"] = a.text_for("dataloader")
    return d


class _InfiniteConstantSampler:
    """torch's sampler for an IterableDataset: None forever."""

    def __iter__(self):
        while True:
            yield None


class _Iterator:
    """One epoch of a stoke.DataLoader (torch's _BaseDataLoaderIter).

    It keeps what it needs of its loader, and the loader itself only
    weakly: a persistent loader keeps its iterator, and a cycle between them
    would leave the loader to the garbage collector, which may run on one
    of the loader's own worker threads."""

    def __init__(self, loader):
        if loader.num_workers == 0:
            assert loader.timeout == 0  # as torch's single-process iterator
        self._reset(loader)

    def _reset(self, loader, first_iter=False):
        import torch
        self._loader_ref = weakref.ref(loader)
        self._index_sampler = loader._index_sampler
        # torch's order of random draws: the sampler's iterator (lazy), then
        # the workers' base seed from the loader's generator.
        it = None if loader._iterable else iter(loader._index_sampler)
        base_seed = torch.empty((), dtype=torch.int64).random_(
            generator=loader.generator).item()
        self._engine = loader._engine_for(base_seed)
        self._engine.begin(it)
        self._epoch = self._engine.epoch
        # worker_type="auto" before its decision: the epoch's stages and
        # wall time (from here to its StopIteration) for _autoswitch.py.
        self._auto_start = None
        # (undecided, measured: its whole epochs on threads are counted)
        self._auto_count = loader.worker_type == "auto" and \
            loader._auto_decision is None and loader.num_workers > 0
        if self._auto_count and loader._auto_epoch is None:
            # (begin ns, CPU s, stages, first and last batch out ns, batches)
            self._auto_start = [time.perf_counter_ns(), time.process_time(),
                                self._engine.stats()["stages"], None, None,
                                0]
        self._num_yielded = 0
        self._timeout = float(loader.timeout or 0)
        self._profiled = _profiler_check()

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._index_sampler)

    def _failed(self):
        """The engine stopped at an error (not a batch's own: after that
        one the epoch goes on): the next iter() remakes it."""
        if not self._engine.failed:
            return
        loader = self._loader_ref()
        if loader is not None and loader._engine is self._engine:
            loader._engine_failed = True

    def __next__(self):
        eng = self._engine
        loader = self._loader_ref()
        if (loader is not None and eng is not loader._engine) or \
                eng.closed or eng.epoch != self._epoch:
            raise RuntimeError("stoke.DataLoader: this iterator was replaced "
                               "by a newer iter(loader): stoke runs one "
                               "epoch of a loader at a time")
        try:
            if self._profiled():
                from torch.autograd.profiler import record_function
                with record_function(_PROFILE_NAME):
                    data = eng.next_batch(self._timeout)
            else:
                data = eng.next_batch(self._timeout)
        except StopIteration:
            if self._auto_start is not None and loader is not None:
                self._auto_measured(loader, eng)
            elif self._auto_count and loader is not None:
                loader._auto_thread_epochs += 1
            self._auto_count = False
            raise
        except KeyboardInterrupt:
            raise
        except RuntimeError as e:
            if not str(e).startswith("DataLoader timed out"):
                self._failed()
            raise
        except BaseException:
            self._failed()
            raise
        self._num_yielded += 1
        m = self._auto_start
        if m is not None:
            m[4] = time.perf_counter_ns()
            if m[3] is None:
                m[3] = m[4]
            m[5] += 1
        return data

    def _auto_measured(self, loader, eng):
        """worker_type="auto": the whole epoch on threads just ended, its
        measurements to the loader (dataloader._auto_decide)."""
        from . import _autoswitch
        t0, c0, before, first, last, batches = self._auto_start
        self._auto_start = None
        self._auto_count = False
        now = time.perf_counter_ns()
        wall = (now - t0) / 1e9
        start = 0.0
        if first is not None:
            start = _autoswitch.start_from_marks(
                (first - t0) / 1e9, (last - t0) / 1e9, batches) or 0.0
        # num_workers="auto": the workers the autotuner ran over this
        # epoch (a time-weighted mean from its decisions), not its ceiling.
        workers = loader.num_workers
        if loader._autotune and loader._trace_origin_ns is not None:
            at = eng.autotune() or {}
            decisions = at.get("decisions") or []
            initial = decisions[0]["from_workers"] if decisions else \
                at.get("workers", workers)
            origin = loader._trace_origin_ns
            workers = _autoswitch.workers_over(
                decisions, initial, (t0 - origin) / 1e9,
                (now - origin) / 1e9)
        loader._auto_thread_epochs += 1
        loader._auto_epoch = {
            "wall_s": wall, "cpu_s": time.process_time() - c0,
            "before": before, "after": eng.stats()["stages"],
            "start_s": start, "recurring_s": wall - start,
            "batches": batches, "workers": workers}

    def __getstate__(self):
        raise NotImplementedError("{} cannot be pickled",
                                  self.__class__.__name__)

    def __del__(self):
        _drop_on_a_good_thread(getattr(self, "_engine", None))


def _profiler_check():
    try:
        from torch.autograd import _profiler_enabled
        return _profiler_enabled
    except ImportError:
        return lambda: False
