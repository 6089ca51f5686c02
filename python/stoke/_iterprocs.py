"""stoke.DataLoader(worker_type="process") over an IterableDataset: torch's
sharding semantics on worker processes.

An IterableDataset has no keys to share out: each worker process iterates
its own copy of the dataset's stream (iter(dataset) with its own
get_worker_info(), so a dataset that shards by worker id gives every item
once, and one that does not gives each item once per worker, as in torch),
makes whole batches from it (batch_size items, collated in the worker by
the loader's collate_fn, torch's default_collate by default; batch_size=None:
one item through default_convert) and sends each batch once.  As torch
does, the main process asks the workers for batches in turn (task i to the
next worker still active), prefetch_factor tasks per worker ahead, and
hands the batches out in task order; a worker whose stream ended answers
"stop", and its later turns are skipped.  So the batches and their order
are torch's for any timing.

What map mode has too (python/stoke/_procs.py): torch's seeds and
get_worker_info() in each worker, worker_init_fn, persistent_workers (the
stream starts again at each epoch), timeout, pin_memory, an exception back
with the worker's traceback (the stream then goes on, as torch's), a dead
worker named with its pid, signal and the batch it was making; and the
doctor: each item's time in the stream's __next__ is its `python` stage,
the batch's collation the `collate` of its last item, recorded in the
loader's stage block (python/stoke/_procstats.py)."""

import multiprocessing as _mp
import os
import time
import weakref

from . import _proctrace, _stoke
from ._procs import (IteratorBase, PoolBase, _how, record_unit,
                     worker_setup)

_NO_TASK = -1


class _IterJob:
    """What an iterable worker needs (pickled under spawn and forkserver)."""

    def __init__(self, loader, tasks, results, held, base_seed, stages):
        self.dataset = loader.dataset
        self.num_workers = loader.num_workers
        self.worker_init_fn = loader.worker_init_fn
        self.torch_threads = loader.torch_threads
        self.auto_collation = loader._auto_collation
        self.batch_size = loader.batch_size
        self.drop_last = bool(loader.drop_last)
        self.collate = loader.collate_fn
        self.tasks, self.results, self.held = tasks, results, held
        self.base_seed, self.stages = base_seed, stages
        self.spans = None        # trace=True: the span rings (_proctrace.py)


def _iter_worker_main(worker_id, job):
    """A worker process: one batch of its own stream per task."""
    from torch._utils import ExceptionWrapper
    if not worker_setup(worker_id, job):
        return
    held = job.held.numpy()
    stages = job.stages.numpy()
    spans = _proctrace.start_worker(job.spans, worker_id, os.getpid())
    clock, cpu_clock = time.perf_counter_ns, time.thread_time_ns
    record = _stoke.stage_record
    results, tasks = job.results, job.tasks[worker_id]
    stream, stream_epoch, ended = None, None, False
    cpu_was = cpu_clock()   # once a task: see _procs._worker_main
    while True:
        msg = tasks.get()
        if msg is None:
            results.cancel_join_thread()
            return
        epoch, task = msg
        if epoch != stream_epoch:   # an epoch's first task: a new stream
            stream_epoch, ended, stream = epoch, False, None
        if ended:
            results.put((epoch, task, "stop", worker_id, None))
            continue
        _stoke.shared_store(held, worker_id, task)
        times, t = [], clock()
        start = t
        try:
            if stream is None:
                stream = iter(job.dataset)
            n = job.batch_size if job.auto_collation else 1
            items = []
            for _ in range(n):
                try:
                    items.append(next(stream))
                except StopIteration:
                    ended = True
                    break
                finally:
                    t2 = clock()
                    times.append((0, t2 - t))
                    t = t2
            if ended and (not items or not job.auto_collation or
                          job.drop_last):
                kind, data = "stop", None
            elif job.auto_collation:
                kind, data = "batch", job.collate(items)
            else:
                kind, data = "batch", job.collate(items[0])
        except Exception:
            # The stream that raised goes on (a generator then ends), as
            # torch's worker goes on after a failing fetch.
            kind = "error"
            data = ExceptionWrapper(
                where=f"in DataLoader worker process {worker_id}")
        co = clock() - t
        if ended and times:
            co += times.pop()[1]   # the next() that found the end: no item
        cpu = cpu_clock()
        record_unit(record, stages, worker_id, times, co, cpu - cpu_was)
        if spans is not None:
            _proctrace.write_unit(spans, start, times, co, [task] * len(times))
        cpu_was = cpu
        _stoke.shared_store(held, worker_id, _NO_TASK)
        results.put((epoch, task, kind, worker_id, data))
        items = data = None


class _IterPool(PoolBase):
    """An iterable loader's worker processes: a task queue each, one
    results queue, and the task each is making (for a death's message)."""

    def __init__(self, loader, base_seed, stages, spans=None):
        import torch
        ctx = loader.multiprocessing_context or _mp.get_context("fork")
        w = loader.num_workers
        self.held = torch.full((w,), _NO_TASK,
                               dtype=torch.int64).share_memory_()
        self._held = self.held.numpy()
        self.tasks = [ctx.SimpleQueue() for _ in range(w)]
        self.results = ctx.Queue()
        job = _IterJob(loader, self.tasks, self.results, self.held,
                       base_seed, stages)
        job.spans = spans
        self._start(ctx, _iter_worker_main, job, w)

    def dead(self):
        for i, p in enumerate(self.procs):
            if p.exitcode is not None:
                task = _stoke.shared_load(self._held, i)
                held = "no batch" if task < 0 else \
                    f"batch {task} of its stream's epoch"
                return (f"DataLoader worker (pid {p.pid}) {_how(p)}; it was "
                        f"making {held} (stoke.DataLoader, "
                        f"worker_type='process', IterableDataset)")
        return None

    def shared_segments(self):
        from ._procmem import tensor_bytes
        return {"ring": tensor_bytes(self.held)}

    def _signal_stop(self):
        for q in self.tasks:
            try:
                q.put(None)
            except Exception:
                pass


class IterableProcessIterator(IteratorBase):
    """One epoch of a stoke.DataLoader over an IterableDataset on worker
    processes (torch's task order: round robin over the active workers)."""

    def __init__(self, loader):
        self._reset(loader)

    def _reset(self, loader, first_iter=False):
        import torch
        self._loader_ref = weakref.ref(loader)
        iter(loader._index_sampler)   # torch's order of draws (none here)
        base_seed = torch.empty((), dtype=torch.int64).random_(
            generator=loader.generator).item()
        self._stats = loader._proc_stats()
        self._stats.end_epoch()
        w = loader.num_workers
        pool = getattr(self, "_pool", None)
        if pool is None or pool.closed or not loader.persistent_workers:
            if pool is not None:
                pool.shutdown()
            pool = _IterPool(loader, base_seed, self._stats.block,
                             self._stats.spans)
        self._stats.ledger.attach(pool)
        self._pool = pool
        loader._proc_epoch = getattr(loader, "_proc_epoch", -1) + 1
        self._epoch = loader._proc_epoch
        self._ahead = (loader.prefetch_factor or 2) * w
        self._active = [True] * w
        self._turn = 0           # the next worker to ask, in turn
        self._sent = 0           # tasks sent
        self._out = 0            # the next task to hand out
        self._of = {}            # task -> worker, while outstanding
        self._got = {}           # task -> (kind, data), come back
        self._pin = bool(loader.pin_memory) and torch.cuda.is_available()
        self._timeout = float(loader.timeout or 0)
        self._failed = None
        self._done = False
        self._closed = False
        self._top_up()

    def _top_up(self):
        """Ask the active workers, in turn, until _ahead tasks are out."""
        w = len(self._active)
        while len(self._of) < self._ahead and any(self._active):
            while not self._active[self._turn % w]:
                self._turn += 1
            wk = self._turn % w
            self._turn += 1
            self._pool.tasks[wk].put((self._epoch, self._sent))
            self._of[self._sent] = wk
            self._sent += 1

    def _receive(self, block):
        msg = self._receive_msg(block)
        if msg is None:
            return False
        epoch, task, kind, wk, data = msg
        if kind == "init":
            self._fail(data)
        if epoch != self._epoch or task not in self._of:
            return True   # a task of an epoch left early
        del self._of[task]
        if kind == "stop":
            self._active[wk] = False   # its later turns are skipped
        self._got[task] = (kind, data)
        return True

    def _depth(self):
        """Batches come back and not yet handed out (stops not counted)."""
        while self._receive(block=False):
            pass
        return sum(1 for k, _ in self._got.values() if k != "stop")

    def __next__(self):
        self._check_next()
        self._stats.enter()
        depth = self._depth()
        while True:
            while self._got.get(self._out, ("",))[0] == "stop":
                del self._got[self._out]
                self._out += 1
                self._top_up()
            if self._out in self._got:
                break
            if self._out >= self._sent:   # nothing out, no worker active
                self._end()
                raise StopIteration
            self._receive(block=True)
        kind, data = self._got.pop(self._out)
        self._out += 1
        self._top_up()
        if kind == "error":
            self._raise(data)
        data = self._pin_data(data)
        self._stats.leave(_stoke.TwoClock._batch_len(data), depth)
        return data
