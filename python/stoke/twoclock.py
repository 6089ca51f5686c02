"""stoke.TwoClock: the two clocks around any loop.

Wrap any iterable, above all a ``torch.utils.data.DataLoader``; iterate the
wrapper instead.  The time inside the wrapped ``__next__`` is *waiting*, the
time from its return to the next call is *computing*; both are read in C on
every step, with per-step percentiles, and judged with the C doctor's
thresholds.  Without the producer's stage clocks some things cannot be known
(the report says which); stoke.Loader and stoke.DataLoader measure them."""

import math
import os
import weakref

from . import _stoke
from ._util import deadline_kw

_PY_WORKERS_UNKNOWN = _stoke.WORKERS_AUTO


def _loader_info(iterable, name):
    """What is known of a torch DataLoader (or anything with its fields)."""
    info = {"name": name or type(iterable).__name__}
    for key in ("batch_size", "num_workers", "pin_memory", "prefetch_factor",
                "persistent_workers", "drop_last"):
        v = getattr(iterable, key, None)
        if v is not None and not callable(v):
            info[key] = v
    if name is None and "num_workers" in info:
        info["name"] = (f"{type(iterable).__name__}(batch_size="
                        f"{info.get('batch_size')}, num_workers="
                        f"{info.get('num_workers')})")
    return info


def _is_torch_loader(x):
    import sys
    tud = sys.modules.get("torch.utils.data")
    # stoke.DataLoader subclasses it, but its workers share samples, not
    # whole batches in turn.
    return tud is not None and isinstance(x, tud.DataLoader) and \
        not getattr(x, "_stoke_shares_samples", False)


def _resolve_sync(sync):
    if sync is None or callable(sync):
        return sync
    if sync == "cuda":
        # With a GPU, sync="cuda" is EventTwoClock's (events, no sync);
        # without one nothing runs asynchronously: nothing to wait for.
        return None
    raise ValueError(f"sync: expected a callable, 'cuda' or None, got {sync!r}")


def _rank():
    from .distributed import dist_rank_world
    from ._util import env_rank_world
    return (dist_rank_world() or env_rank_world())[0]


def _torch_cuda_available():
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


class TwoClock(_stoke.TwoClock):
    def __new__(cls, iterable=None, *, sync=None, **kw):
        # sync="cuda" with a GPU times the steps with CUDA events instead
        # of a full synchronize, which would drain the very overlap it
        # measures.
        if cls is TwoClock and sync == "cuda" and _torch_cuda_available():
            cls = EventTwoClock
        return super().__new__(cls)

    """``TwoClock(iterable, *, sync=None, warmup=None, name=None)``

    Iterating it iterates ``iterable``; each ``iter()`` is an epoch and the
    first ``warmup`` epochs (then ``warmup_steps`` steps) are left out of
    the statistics.  Given neither, the warm-up is the first epoch or its
    first 10 steps and 5 seconds, whichever ends first, so that a long
    epoch is judged after seconds; the steady state then counts the steps
    of partial epochs.  ``sync`` (a
    callable such as ``torch.cuda.synchronize``) is called before each
    compute clock is read, so asynchronous GPU work is counted where it
    ran; ``sync="cuda"`` reads the clocks off the current CUDA stream with
    events instead (:class:`EventTwoClock`), which drains nothing.
    ``metrics_file=PATH`` writes Prometheus text (node_exporter's textfile
    collector) atomically every ``metrics_every`` seconds and at the end;
    ``log_jsonl=PATH`` appends a JSON line per epoch and every
    ``log_every`` steps (docs/metrics.md).  ``ready_wait`` (seconds, default 2 ms): a wait at most
    this long found a batch ready.  Around a torch DataLoader with W
    workers, whose workers each make whole batches in turn, the queue is
    judged over rounds of W steps.  ``trace=N`` keeps N spans for
    :meth:`save_trace`."""

    def __init__(self, iterable, *, sync=None, warmup=None, name=None,
                 warmup_steps=None, ready_wait=2e-3, trace=0, describe=None,
                 metrics_file=None, metrics_every=10.0, log_jsonl=None,
                 log_every=100):
        # describe: the loader to describe when iterable only stands for it
        # (the doctor wraps DataLoaders without keeping them alive).
        target = iterable if describe is None else describe
        info = _loader_info(target, name)
        workers = info.get("num_workers")
        known = isinstance(workers, int) and workers >= 0
        prefetch = rounds = 0
        if known and workers > 0:
            # torch counts prefetch_factor batches per worker, and each of
            # its workers makes whole batches in turn: judge rounds of W.
            prefetch = workers * (info.get("prefetch_factor") or 2)
            rounds = workers if _is_torch_loader(target) else 0
        from .loader import warmup_config
        w = warmup_config(warmup, warmup_steps)
        super().__init__(
            iterable, sync=_resolve_sync(sync), warmup=w["warmup_epochs"],
            warmup_steps=w["warmup_steps"],
            warmup_end_steps=w["warmup_end_steps"],
            warmup_end=w["warmup_end_ns"] / 1e9, ready_wait=float(ready_wait),
            metrics_file=None if metrics_file is None
            else os.fsdecode(metrics_file),
            metrics_every=float(metrics_every),
            log_jsonl=None if log_jsonl is None else os.fsdecode(log_jsonl),
            log_every=int(log_every), rank=_rank(),
            num_workers=workers if known else _PY_WORKERS_UNKNOWN,
            prefetch=prefetch, round_steps=rounds, trace=int(trace),
            info=info)

    @property
    def name(self):
        """What the clock is around, for the reports."""
        return self.info.get("name")

    def stats(self):
        """The steady-state summary (the fields of ``stoke bench --json``'s
        summary that a consumer can see)."""
        return self._summary()

    @property
    def verdict(self):
        """``"busy"``, ``"starving"``, ``"variance"`` or ``"unknown"``."""
        return self._diagnosis()["verdict"]

    def diagnose(self, *, train_epochs=None, deadline=None):
        """The verdict, its numbers, what cannot be known, and the ladder's
        advice for the wrapped loader.  ``train_epochs=N, deadline="8h"``
        (or seconds) adds ``deadline``: do N epochs fit in the window at
        the wrapped loader's configuration (``now``, from the measured
        epochs and their spread; a TwoClock has no model, so no knee)."""
        kw = deadline_kw(train_epochs, deadline)
        d = self._diagnosis()
        d["advice"] = advise(self.stats(), d["verdict"], self.info)
        if kw:
            d["deadline"] = self._deadline(**kw)[0]
        return d

    def report(self, *, train_epochs=None, deadline=None):
        """The human report: epochs, steady state, verdict, advice (and the
        deadline, with train_epochs and deadline as in diagnose())."""
        kw = deadline_kw(train_epochs, deadline)
        lines = [self._report().rstrip("\n"), "", "advice"]
        advice = self.diagnose()["advice"]
        if not advice:
            lines.append("  none: nothing on the ladder applies")
        lines += [f"  {i + 1}. {a['text']}" for i, a in enumerate(advice)]
        text = "\n".join(lines) + "\n"
        if kw:
            text += self._deadline(**kw)[1]
        return text

    def document(self):
        """The JSON document that ``stoke report`` renders."""
        doc = self._document()
        doc["diagnosis"]["advice"] = advise(doc["summary"],
                                            doc["diagnosis"]["verdict"],
                                            self.info)
        doc["config"].update({k: v for k, v in self.info.items()
                              if k not in ("name",)})
        return doc

    def save_json(self, path):
        """Write :meth:`document` to path (``stoke report`` renders it)."""
        import json
        with open(path, "w") as f:
            json.dump(self.document(), f, indent=2)
            f.write("\n")

    def __repr__(self):
        return f"<stoke.TwoClock around {self.name}>"


class EventTwoClock(TwoClock):
    """TwoClock(iterable, sync="cuda") on a machine with a GPU: each step's
    clocks are read off the consumer's CUDA stream with events, never by
    synchronising.  An event is recorded when the loop receives a batch
    (the step's work starts after it on the stream) and when it asks for
    the next one (its work was all queued before it): compute is the
    stream's time between the two, wait the stream's idle time from the
    last step's end to this one's start.  Events are read when they have
    completed, a few steps behind; the end of an epoch waits for the
    last ones.  ``events`` makes an event (default
    ``torch.cuda.Event(enable_timing=True)``, on the current stream)."""

    def __init__(self, iterable, *, sync="cuda", events=None, **kw):
        super().__init__(iterable, sync=None, **kw)
        if events is None:
            import torch
            events = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
        self._event = events
        self._pending = []   # [end of previous, start, end, samples]
        self._step = None
        self._epoch_it = None

    def __iter__(self):
        self._finish_epoch()
        self._epoch_it = iter(self.wrapped)
        return self

    def __next__(self):
        if self._epoch_it is None:
            iter(self)
        prev_end = None
        if self._step is not None:
            prev_end = self._event()
            prev_end.record()     # the step's work is all queued now
            self._step[2] = prev_end
            self._pending.append(self._step)
            self._step = None
        try:
            item = next(self._epoch_it)
        except StopIteration:
            self._finish_epoch()
            raise
        start = self._event()
        start.record()
        self._step = [prev_end, start, None, _stoke.TwoClock._batch_len(item)]
        self._drain(block=False)
        return item

    def _drain(self, block):
        """Record the pending steps whose events completed, in order."""
        while self._pending:
            before, start, end, n = self._pending[0]
            if not block and not end.query():
                return
            if block:
                end.synchronize()
            wait_ms = before.elapsed_time(start) if before is not None else 0.0
            compute_ms = start.elapsed_time(end)
            self._record(int(max(wait_ms, 0.0) * 1e6),
                         int(max(compute_ms, 0.0) * 1e6), n)
            self._pending.pop(0)

    def _finish_epoch(self):
        if self._step is not None:
            end = self._event()
            end.record()
            self._step[2] = end
            self._pending.append(self._step)
            self._step = None
        if self._pending:
            self._drain(block=True)
        if self._epoch_it is not None:
            self.end_epoch()
            self._epoch_it = None

    def stats(self):
        self._drain(block=False)
        return super().stats()


def _rung(kind, text, now_ms=None, predicted_ms=None, **extra):
    a = {"kind": kind, "text": text}
    if now_ms and predicted_ms:
        a["now_step_ns"] = now_ms * 1e6
        a["predicted_step_ns"] = predicted_ms * 1e6
        a["speedup"] = now_ms / predicted_ms
    a.update(extra)
    return a


def advise(summary, verdict, info):
    """The escalation ladder from two clocks and what is known of the loader.

    Without stage clocks the per-batch cost of the producer is inferred from
    the waits: with 0 workers every batch is made inside next(), so the wait
    is its whole cost; with W workers a starving step lasts about a batch's
    cost over W."""
    steps = summary.get("steps") or 0
    if not steps:
        return []
    wait_ms = 1e3 * summary["wait_s"] / steps
    compute_ms = 1e3 * summary["compute_s"] / steps
    step_ms = wait_ms + compute_ms
    workers = info.get("num_workers")
    cores = os.cpu_count() or 1
    out = []
    if verdict == "busy":
        out.append(_rung(
            "model", f"busy: the loop waits {wait_ms:.3f} ms of a "
            f"{step_ms:.3f} ms step; a faster loader gains at most "
            f"{step_ms / compute_ms:.2f}x — the model is the cost"
            if compute_ms > 0 else "busy: the model is the cost"))
        return out
    if verdict == "variance":
        pf = info.get("prefetch_factor") or 2
        out.append(_rung(
            "prefetch", f"variance: most steps find a batch ready but a few "
            f"wait long (p99 {summary.get('wait_p99_ms', 0):.2f} ms); deeper "
            f"prefetch absorbs the tail: prefetch_factor={2 * pf}",
            step_ms, max(compute_ms, 1e-6) if compute_ms else None,
            prefetch_factor=2 * pf))
    if verdict == "starving":
        if workers == 0:
            batch_ms = wait_ms  # made inside next(), nothing overlaps
            need = max(1, math.ceil(batch_ms / max(compute_ms, 1e-3)))
            io_w = min(need, 64)
            cpu_pred = max(compute_ms, batch_ms / min(cores, io_w))
            out.append(_rung(
                "workers",
                f"more workers: with num_workers=0 each batch costs "
                f"{batch_ms:.2f} ms inside next(). num_workers={io_w} hides it "
                f"under the {compute_ms:.2f} ms step if the work waits (I/O, "
                f"sleep: about {max(compute_ms, batch_ms / io_w):.2f} ms a "
                f"step); work that burns CPU gains at most {cores} cores' worth "
                f"(about {cpu_pred:.2f} ms). Add persistent_workers=True",
                step_ms, max(compute_ms, batch_ms / io_w),
                num_workers=io_w, persistent_workers=True))
        elif isinstance(workers, int) and workers > 0:
            batch_ms = step_ms * workers  # each worker makes one per W steps
            need = max(workers + 1,
                       math.ceil(batch_ms / max(compute_ms, 1e-3)))
            io_w = min(need, 4 * max(workers, cores), 256)
            cpu = (f"if it burns CPU, {workers} workers already cover the "
                   f"{cores} cores and more will not help: make samples "
                   f"cheaper (below)" if workers >= cores else
                   f"if it burns CPU, at most {cores} workers help")
            out.append(_rung(
                "workers",
                f"more workers: {workers} workers deliver a batch every "
                f"{step_ms:.2f} ms, so one costs about {batch_ms:.1f} ms of "
                f"a worker's time; if the work waits (I/O), "
                f"num_workers={io_w} keeps up with the {compute_ms:.2f} ms "
                f"step; {cpu}",
                step_ms, max(compute_ms, batch_ms / io_w),
                num_workers=io_w))
        else:
            out.append(_rung(
                "workers", f"starving: the loop waits {wait_ms:.2f} ms of a "
                f"{step_ms:.2f} ms step; the producer is slower than the "
                f"consumer: more parallel workers, or cheaper samples"))
    if verdict in ("starving", "variance"):
        if info.get("pin_memory") is False and _cuda_in_use():
            out.append(_rung(
                "pinned_async_copy", "pin_memory=True and "
                ".to(device, non_blocking=True): the copy overlaps compute"))
        out.append(_rung(
            "cheaper_samples", "cheaper samples: decode smaller images, "
            "pre-resize the dataset once on disk, move heavy transforms "
            "earlier; stoke.Loader(path, transform=...) runs decode and "
            "transforms in C on threads"))
        out.append(_rung(
            "measure_stages", "stoke.DataLoader (same arguments) runs this "
            "dataset on threads and measures its stages, so the doctor can "
            "say which one costs"))
    return out


def _cuda_in_use():
    import sys
    torch = sys.modules.get("torch")
    try:
        return bool(torch and torch.cuda.is_available() and
                    torch.cuda.is_initialized())
    except Exception:
        return False


class _WeakIterable:
    """Iterates a DataLoader through its original __iter__ without keeping
    it alive (the doctor patches DataLoader.__iter__ itself)."""

    def __init__(self, loader, iter_fn):
        self._ref = weakref.ref(loader)
        self._iter = iter_fn

    def __iter__(self):
        loader = self._ref()
        if loader is None:
            raise RuntimeError("the DataLoader is gone")
        return self._iter(loader)
