"""num_workers="auto" for stoke.DataLoader(worker_type="process").

Thread mode's autotuner is the library's (it gates the C loader's
threads).  Worker processes are the Python side's, so this is its
counterpart for them, with the same rules in a smaller form
(docs/autotune.md):

  - it starts with 1 worker process, and may start up to the most workers
    (auto_max_workers(): max(2 x CPUs, 8), as thread mode's), each a
    process with its copy of the dataset, started when first needed;
  - every window of 12 steps (4 once half a second went by), on the
    consumer's thread inside next(), it reads the consumer's clocks
    (waiting, computing) and the workers' own counters (their busy and CPU
    time and samples, in the pool's shared counters), discarding the
    window right after a change (the queue refills);
  - stalled (waiting > 5% of the step): the fewest workers whose batch
    takes at most 95% of the step's compute (a sample's wall time x the
    batch / W), at least one more, capped by the CPU budget (the workers'
    share of a core each, against the online CPUs) and by the most
    workers: `grow`, or a `limit` decision naming the cap, once;
  - quiet (waiting < 2%): the model's count with 20% to spare, when fewer
    and above every count that stalled: `shrink` (the processes above it
    leave at their next sample).

The batches, their order and, with seed_per_sample, every sample's random
draws do not depend on which worker makes a sample or when: the number of
workers only changes when.  Each decision is kept with its reason and
numbers (autotune(), as thread mode's)."""

import math
import os
import time

WINDOW_STEPS = 12
WINDOW_SHORT_STEPS = 4
WINDOW_SHORT_NS = 500_000_000
GROW_WAIT = 0.05
QUIET_WAIT = 0.02
GROW_FILL = 0.95
SHRINK_SPARE = 1.2
MAX_DECISIONS = 256


class ProcTuner:
    """One loader's tuner: its active count lasts across epochs and pools."""

    def __init__(self, max_workers, cores=None):
        self.max_workers = int(max_workers)
        self.cpu_budget = float(cores or os.cpu_count() or 1)
        self.active = 1
        self.decisions = []
        self.changes = 0
        self._pool = None
        self._done = (0, 0, 0)   # the totals of the pools before this one
        self._stalled = 0        # the most workers that stalled
        self._limited = None     # the last limit said (once each)
        self._skip = False       # the window after a change is discarded
        self._epoch = 0
        self._step = 0
        self._t0 = time.perf_counter_ns()
        self._reset_window()

    def _reset_window(self):
        self._w_steps = 0
        self._w_wait = 0
        self._w_compute = 0
        self._w_samples = 0
        self._w_start = time.perf_counter_ns()
        self._base = self._totals()

    def _totals(self):
        now = self._pool.worker_totals() if self._pool else (0, 0, 0)
        return tuple(a + b for a, b in zip(self._done, now))

    def attach(self, pool, epoch):
        """A pool of this loader starts (with self.active workers), or
        goes on into another epoch.  The window goes on across it: an
        epoch shorter than a window is judged with the next."""
        if pool is not self._pool:
            self._done = self._totals()
            self._pool = pool
        self._epoch = epoch
        self._step = 0

    def on_step(self, wait_ns, compute_ns, n_samples):
        """A batch was handed out: its wait, the compute before it."""
        self._step += 1
        self._w_steps += 1
        self._w_wait += max(0, wait_ns)
        self._w_compute += max(0, compute_ns)
        self._w_samples += n_samples
        n = self._w_steps
        if n < WINDOW_SHORT_STEPS or (
                n < WINDOW_STEPS and
                time.perf_counter_ns() - self._w_start < WINDOW_SHORT_NS):
            return
        if self._skip or self._pool is None:
            self._skip = False
            self._reset_window()
            return
        self._decide()
        self._reset_window()

    def _decide(self):
        busy0, samples0, cpu0 = self._base
        busy1, samples1, cpu1 = self._totals()
        made = samples1 - samples0
        total = self._w_wait + self._w_compute
        if made <= 0 or total <= 0 or self._w_steps == 0:
            return
        waiting = self._w_wait / total
        sample_ns = (busy1 - busy0) / made
        on_core = min(1.0, max(1e-3, (cpu1 - cpu0) / max(busy1 - busy0, 1)))
        batch = self._w_samples / self._w_steps
        compute = max(self._w_compute / self._w_steps, 1.0)
        need = max(1, math.ceil(batch * sample_ns / (GROW_FILL * compute)))
        cpu_cap = max(1, math.floor(self.cpu_budget / on_core))
        w = self.active
        facts = (f"a sample takes {sample_ns / 1e6:.2f} ms "
                 f"({on_core:.0%} on a core), the step computes "
                 f"{compute / 1e6:.1f} ms: the model needs {need} workers")
        if waiting > GROW_WAIT:
            self._stalled = max(self._stalled, w)
            to = min(max(need, w + 1), self.max_workers, max(cpu_cap, w))
            if to > w:
                self._apply("grow", w, to, waiting, facts)
                return
            which = ("the most workers" if w >= self.max_workers else
                     f"the CPU budget ({self.cpu_budget:g} cores)")
            if self._limited != (w, which):
                self._limited = (w, which)
                self._record("limit", w, w, waiting,
                             f"{facts}; {which} stops it at {w}")
        elif waiting < QUIET_WAIT and w > 1:
            spare = max(1, math.ceil(SHRINK_SPARE * batch * sample_ns /
                                     compute))
            if spare < w and spare > self._stalled:
                self._apply("shrink", w, spare, waiting, facts)

    def _apply(self, kind, w, to, waiting, facts):
        self.active = to
        self.changes += 1
        self._skip = True
        self._pool.set_active(to)
        self._record(kind, w, to, waiting, facts)

    def _record(self, kind, w, to, waiting, facts):
        if len(self.decisions) >= MAX_DECISIONS:
            return
        head = (f"{w} -> {to} workers" if to != w else
                f"held at {w} workers")
        self.decisions.append({
            "kind": kind, "epoch": self._epoch, "step": self._step,
            "time_s": (time.perf_counter_ns() - self._t0) / 1e9,
            "from_workers": w, "to_workers": to,
            "wait_before": waiting,
            "text": f"epoch {self._epoch}, step {self._step}: {head} "
                    f"(processes), waiting {waiting:.0%}; {facts}"})

    def summary(self):
        return {"workers": self.active, "max_workers": self.max_workers,
                "cpu_budget": self.cpu_budget, "changes": self.changes,
                "rollbacks": 0, "worker_type": "process",
                "decisions": [dict(d) for d in self.decisions]}
