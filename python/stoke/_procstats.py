"""The doctor of stoke.DataLoader(worker_type="process"): one set of clocks
across the worker processes.

Two halves, measured where they happen and judged by the same C code as
thread mode's (python/ext/report.c, the library's queue model and
diagnose):
  - the producers' stages: each worker process times each sample it makes
    (read: its keys out of the ring and the reseeding; python: the
    __getitem__; collate: the sample into its row, or a whole batch through
    a collate_fn in the worker; gil_wait: 0, the process's GIL is its own)
    with its busy and CPU time, and records them in its own part of a stage
    block (stoke_stage_block) in shared memory: single-writer counters,
    no lock, nothing sent;
  - the consumer's clock, in the main process: a stoke_twoclock driven by
    the iterator (waiting = inside __next__, computing = from its return to
    the next call), told the ready queue each step found (the batches
    complete and not yet handed out), with the block attached, so that its
    statistics are a loader's: stages since the warm-up ended, the verdict,
    the queue model, the advice.

The block belongs to the loader, not to its worker processes: it outlives
a pool that stops at an epoch's end, and one whose worker was killed (a
killed worker leaves at most its last sample half counted).  The
consumer's CPU share (the cores the model leaves to the workers) is
measured here, over the computing spans: the main process's CPU time there
is the training step's."""

import os
import time

from . import _stoke
from .loader import warmup_config

_TRACE_EVENTS = 16384   # trace=True: spans kept, as stoke.Loader's


def _exports(loader):
    """The TwoClock's metrics and JSON lines arguments from the loader's
    (rank 0 as in thread mode's loader_config; labelled with the info's
    name, "stoke.DataLoader")."""
    kw = {}
    if loader.metrics_file is not None:
        kw["metrics_file"] = os.fsdecode(loader.metrics_file)
        kw["metrics_every"] = float(loader.metrics_every)
    if loader.log_jsonl is not None:
        kw["log_jsonl"] = os.fsdecode(loader.log_jsonl)
        kw["log_every"] = int(loader.log_every)
    if kw:
        kw["rank"] = 0
    return kw


class ProcStats:
    """The stage block and the consumer's clock of one loader."""

    def __init__(self, loader):
        import torch
        w = loader.num_workers
        n = _stoke.stage_block_bytes(w)
        # torch's shared memory, as the ring's: its segment is unlinked at
        # once and goes with the last process that maps it.
        self.block = torch.zeros((n,), dtype=torch.uint8).share_memory_()
        self._view = self.block.numpy()
        _stoke.stage_block_init(self._view, w)
        ahead = (loader.prefetch_factor or 2) * w
        info = {"name": "stoke.DataLoader", "num_workers": w,
                "prefetch": ahead,
                "label": f"Python dataset {type(loader.dataset).__name__} "
                         f"on {w} worker process{'es' if w != 1 else ''}",
                "gpu_price_per_hour": float(loader._gpu_price or 0.0)}
        if isinstance(loader.batch_size, int):
            info["batch_size"] = loader.batch_size
        # (len(loader) of an IterableDataset counts as torch's call of it:
        # not made here.)
        sizes = () if loader._iterable else (
            ("length", lambda: len(loader.dataset)),
            ("batches", lambda: len(loader)))
        for key, f in sizes:
            try:
                info[key] = int(f())
            except TypeError:
                pass
        wc = warmup_config(loader._warmup, None)
        trace = _TRACE_EVENTS if loader._trace is True else \
            int(loader._trace or 0)
        self.clock = _stoke.TwoClock(
            (), warmup=wc["warmup_epochs"], warmup_steps=wc["warmup_steps"],
            warmup_end_steps=wc["warmup_end_steps"],
            warmup_end=wc["warmup_end_ns"] / 1e9, num_workers=w,
            prefetch=ahead, trace=trace, info=info, count_samples=False,
            # metrics_file= and log_jsonl=: the clock's own writers (the
            # library's exporter, as a loader's), from these statistics.
            **_exports(loader))
        self.clock._attach_stages(self._view, True)
        from ._procmem import Ledger
        self.ledger = Ledger(n)
        self._tracing = trace > 0
        # num_workers="auto": the processes' tuner (_procauto.py).
        self.tuner = None
        if loader._autotune:
            from ._procauto import ProcTuner
            self.tuner = ProcTuner(w)
        self._step_compute = 0   # the compute before the step in progress
        # The workers' span rings (their trace tracks), beside the block.
        from . import _proctrace
        self.spans = _proctrace.make_rings(w, trace) if trace > 0 else None
        from ._procmem import tensor_bytes
        self.ledger.span_bytes = tensor_bytes(self.spans)
        self._iterable = loader._iterable
        self._entered = None     # the step in progress's enter() (ns)
        self._last_enter = None  # the last step handed out's
        self._left = None        # (wall, CPU) when the last step was handed out
        self._compute_ns = 0     # computing spans, summed
        self._compute_cpu_ns = 0  # the main process's CPU time in them
        # worker_type="auto": the marks of the latest epoch (perf_counter
        # ns): its begin, first and last batch out, batches, and its last
        # next() (every batch out: the pool stops after it); "ended" is
        # None for an epoch left early.
        self.marks = None
        self._batches = info.get("batches")
        self.epochs_ended = 0    # whole epochs marked

    # ---- driven by the iterator -------------------------------------------

    def enter(self):
        """__next__ was called: the step's compute ends, its wait starts."""
        left = self._left
        self._step_compute = 0
        if left is not None:
            self._step_compute = time.perf_counter_ns() - left[0]
            self._compute_ns += self._step_compute
            self._compute_cpu_ns += time.process_time_ns() - left[1]
            self._left = None
        self._entered = self.clock._enter()

    def leave(self, n_samples, depth):
        """A batch of n_samples is handed out; depth batches were ready."""
        self.clock._leave(n_samples, depth)
        self._last_enter = self._entered
        self._left = (time.perf_counter_ns(), time.process_time_ns())
        m = self.marks
        if m is not None:
            if m["first"] is None:
                m["first"] = self._left[0]
            m["last"] = self._left[0]
            m["batches"] += 1
        if self.tuner is not None:
            self.tuner.on_step(self._left[0] - self._entered,
                               self._step_compute, n_samples)

    def end_epoch(self):
        # Called at an epoch's end (its last next(), before the pool
        # stops) and at the next iter(): the first marks the end, the
        # second (or one after an epoch left early) begins new marks.
        # An epoch ended whole has every batch out (a map-style dataset's
        # len(loader); an iterable's: a next() entered and not left, as
        # at its StopIteration).
        now = time.perf_counter_ns()
        m = self.marks
        whole = m is not None and m["batches"] > 0 and (
            m["batches"] == self._batches if self._batches else
            self._entered is not None and self._entered != self._last_enter)
        if whole and m["ended"] is None:
            m["ended"] = now
            self.epochs_ended += 1
        else:
            self.marks = {"begin": now, "first": None, "last": None,
                          "batches": 0, "ended": None}
        if self._left is not None:
            self._compute_ns += time.perf_counter_ns() - self._left[0]
            self._compute_cpu_ns += time.process_time_ns() - self._left[1]
            self._left = None
        self.clock.end_epoch()

    # ---- what the loader's doctor methods call (thread mode's engine) ----

    def _consumer_cpu(self, given):
        if given is not None:
            return given
        if self._compute_ns <= 0:
            return 0.0
        return self._compute_cpu_ns / self._compute_ns

    def stats(self):
        return self.clock._procs_stats()

    def diagnose(self, cores=0, consumer_cpu=None, **kw):
        return self.clock._procs_diagnose(
            cores, self._consumer_cpu(consumer_cpu), **kw)

    def report(self, cores=0, consumer_cpu=None, **kw):
        text = self.clock._procs_report(
            cores, self._consumer_cpu(consumer_cpu), **kw)
        # The memory ledger under the peak RSS line (the main process's
        # alone), or at the end.
        from ._procmem import report_lines
        lines = text.split("\n")
        at = next((i + 1 for i, x in enumerate(lines)
                   if x.lstrip().startswith("peak RSS")), len(lines))
        lines[at:at] = report_lines(self.memory())
        return "\n".join(lines)

    def memory(self):
        return self.ledger.read()

    def save_json(self, path, cores=0, consumer_cpu=None, **kw):
        return self.clock._procs_save_json(
            path, cores, self._consumer_cpu(consumer_cpu), **kw)

    def save_trace(self, path):
        """The consumer's spans (waiting, computing) and a track per worker
        process with its samples' stages (python/stoke/_proctrace.py)."""
        if not self._tracing:
            # thread mode's words (the TwoClock's name trace=N otherwise)
            raise _stoke.ConfigError("tracing is off: create the loader with "
                                     "trace=True (or trace=N spans kept)")
        from . import _proctrace
        self.clock.save_trace(path)
        t0 = _proctrace.consumer_t0(path, self._last_enter)
        if t0 is not None:
            _proctrace.add_tracks(path, self.spans, t0, self._iterable)

    def autotune(self):
        return None if self.tuner is None else self.tuner.summary()
