"""worker_type="auto": the rule that decides between threads and worker
processes, as a pure function of what the workers measured on threads.

stoke.DataLoader(worker_type="auto") runs its first whole epoch on
threads, feeds that epoch's measurements to decide_from_epoch() and, when
it says so, runs on worker processes from the next iter() on
(docs/dataloader.md, "worker_type='auto'").

The model.  On threads each worker's sample takes
``wall_s`` of the worker's time (its stages read + gil_wait + python +
collate, or better the worker's busy time over its samples), of which
``gil_wait_s`` is spent waiting for the GIL (behind the other workers and
the consumer).  The threads' producer rate is then

    X_threads = W / wall_s

(measured, so the threads' own core cap is in it).  On processes the GIL
is each process's own: a sample costs what it costs alone, plus the
process mode's per-sample overhead (the ring, the row, the clocks:
28-41 us a sample measured on a 2-core AMD EPYC before chunked claims,
6-17 us after them, with the per-sample reseed the larger part;
bench/README.md's process section; the default stays 41 us, so the
prediction errs towards threads: the switch-back measured processes
slower than the rule's figure on pure Python under load):

    t_process = wall_s - gil_wait_s + overhead_s
    X_process = min(W / t_process, cores / (cpu_s + overhead_s))

where ``cpu_s`` is a sample's CPU time (the second bound: W processes on
fewer cores share them; 0 or None: taken as t_process - overhead_s, i.e.
all of a sample's own time on a core, the conservative case).  The
predicted gain is X_process / X_threads; the rule switches when it is at
least ``margin`` (1.15 by default: below that the copy of the dataset per
process, the pool's start and the measurement's own spread are not worth
it).

W = 1 is not special-cased: one worker waits for the GIL only behind the
consumer's Python, and the rule switches if that wait is large enough for
the gain to clear the margin (a process frees the worker from the
consumer's GIL); with no wait measured it stays.

Pure Python with W threads on enough cores waits about (W - 1)/W of its
time for the GIL: W = 2 gives a gain near 2 / (1 + overhead/work), well
above the margin, whatever else the machine runs (a busy process per core
slows both the work and the wait).  A sample that sleeps or runs C code
that releases the GIL waits for it hardly at all: t_process is about
wall_s + overhead_s and the gain is below 1.

The pool's start.  Without persistent_workers every epoch on processes
starts (and stops) a pool of W processes, which threads do not: about
0.13 s at W=2 on the 2-core machine, more than a short epoch gains.  So
the producers' gain is priced over the epochs to come (price_start()): an
epoch on threads takes E (as it recurs: less its own first batch's
latency), on processes E / gain + S each epoch, S the pool's start
(estimate_start() before one was measured, from W and the start method;
with persistent_workers S is paid once and left out).  The switch is made
on E / (E / gain + S).

Measured after.  After each whole epoch on processes judge() compares it
with the epoch on threads (both as they recur: with persistent_workers an
epoch that started the pool is judged without its start) and sends the
loader back to threads, for good, when processes took more than
BACK_MARGIN x the threads' epoch (the epoch that started a persistent
pool: BACK_MARGIN_FIRST, less its start): a wrong prediction costs one
epoch on processes (without persistent_workers), or the start and at most
two epochs (with them).

With persistent_workers the start is paid once, but when it pays off
depends on the epochs left, which are not known: as in the ski-rental
problem the loader waits on threads until as many epochs ran as the
predicted savings need to repay the start (repay_epochs()), so a start that
never pays off (a dataset of microseconds a sample) is never paid."""

# The per-sample overhead of process mode (seconds): the top of the range
# measured in bench/README.md's process section before chunked claims
# (28-41 us a sample, AMD EPYC, 2 cores; 6-17 us after them).  Kept high:
# under load processes measured slower than the rule predicts.
PROCESS_OVERHEAD_S = 41e-6
# The predicted gain at which "auto" switches to processes.
SWITCH_MARGIN = 1.15
# The pool's start and stop before one has been measured (seconds a
# worker process): with fork, 0.065 s (0.13 s at W=2 measured on the
# 2-core AMD EPYC VM, unloaded; 0.2-0.45 s a worker beside two builds);
# with spawn or forkserver each worker is a fresh interpreter that imports
# torch and unpickles the dataset (1.7-3.8 s a worker measured there,
# W=1 and 2, loaded): 2 s, and the dataset's pickle at PICKLE_BYTES_PER_S.
POOL_START_FORK_S = 0.065
POOL_START_SPAWN_S = 2.0
PICKLE_BYTES_PER_S = 500e6
# After an epoch on processes: back to threads (for good) when that epoch
# took more than BACK_MARGIN x the threads' (processes measured slower).
BACK_MARGIN = 1.05
# The epoch that started a persistent pool, less the start measured,
# against the threads': a fresh pool runs slower for longer than its first
# batch (0.95-1.25x the epochs after it measured at W=2), so that epoch
# goes back only past this margin.
BACK_MARGIN_FIRST = 1.5


def decide(wall_s, gil_wait_s, num_workers, cores, cpu_s=None,
           overhead_s=PROCESS_OVERHEAD_S, margin=None):
    """The decision from the threads' per-sample measurements (seconds,
    means over a worker's samples): a dict with ``switch`` (bool),
    ``predicted_gain`` (processes over threads, producer rate),
    ``gil_share`` (gil_wait_s / wall_s), ``threads_samples_per_s`` and
    ``processes_samples_per_s`` (the producers' predicted rates),
    ``margin`` (SWITCH_MARGIN when None) and ``reason`` (a sentence)."""
    margin = SWITCH_MARGIN if margin is None else margin
    # (num_workers="auto": the mean count the autotuner ran, a float)
    w = float(num_workers)
    if w == int(w):
        w = int(w)
    cores = max(1, int(cores or 1))
    wall = float(wall_s)
    gil = max(0.0, min(float(gil_wait_s), wall))
    out = {"switch": False, "predicted_gain": None, "gil_share": None,
           "threads_samples_per_s": None, "processes_samples_per_s": None,
           "margin": margin, "num_workers": w, "cores": cores,
           "overhead_s": overhead_s}
    if w < 1:
        out["reason"] = "num_workers=0: the samples are made in the main " \
                        "process, there is nothing to move"
        return out
    if wall <= 0:
        out["reason"] = "no sample measured on threads yet"
        return out
    own = wall - gil
    t_proc = own + overhead_s
    cpu = own if not cpu_s else min(float(cpu_s), own)
    x_threads = w / wall
    x_proc = min(w / t_proc, cores / (cpu + overhead_s))
    gain = x_proc / x_threads
    out.update(gil_share=gil / wall, threads_samples_per_s=x_threads,
               processes_samples_per_s=x_proc, predicted_gain=gain)
    share = 100 * gil / wall
    if gain >= margin:
        out["switch"] = True
        out["reason"] = (
            f"the workers wait {share:.0f}% of a sample for the GIL: "
            f"worker_type=\"process\" predicted {gain:.2f}x the threads' "
            f"samples/s (margin {margin:.2f}x)")
    else:
        out["reason"] = (
            f"the workers wait {share:.0f}% of a sample for the GIL: "
            f"processes predicted {gain:.2f}x the threads' samples/s, "
            f"below the margin {margin:.2f}x; threads stay")
    return out


# The stages of a worker's sample (stoke's stage names) that make its wall
# time on a worker: slot_wait is left out (a worker waiting for a free slot
# waits for the consumer, which processes do not change).
_SAMPLE_STAGES = ("read", "gil_wait", "python", "collate")


def stage_wall(stages):
    """A sample's mean time on a worker (seconds) from stats()'s stages, by
    name: read + gil_wait + python + collate, each stage's total over the
    python stage's count (the samples)."""
    n = stages.get("python", {}).get("count", 0)
    if not n:
        return 0.0
    return sum(stages.get(k, {}).get("total_s", 0) for k in _SAMPLE_STAGES) / n


def stage_delta(before, after):
    """The stages of one epoch (by name, count and total_s): stats()'s
    stages after it less those before it (lists of dicts)."""
    b = {s["name"]: s for s in before}
    out = {}
    for s in after:
        o = b.get(s["name"], {})
        out[s["name"]] = {"count": s["count"] - o.get("count", 0),
                          "total_s": s["total_s"] - o.get("total_s", 0)}
    return out


def decide_from_epoch(stages, epoch_s, num_workers, cores,
                      cpu_s=None, *, threads_epoch_s=None, start_s=None,
                      persistent=False, start_source="estimated",
                      margin=None, epochs_run=None):
    """decide() on one whole epoch on threads: its stages (stage_delta) and
    its wall time (iter() to StopIteration).

    The gil_wait stage alone misses most of the wait: it times the worker's
    wait to take the GIL before a sample, and a worker that lost the GIL
    inside __getitem__ or between its samples waits elsewhere (on this
    2-core machine, pure Python at W=2 showed a gil_wait of 2% to 45% of the
    sample from run to run).  So the workers' time is counted whole: W
    workers for the epoch's wall time make n samples, W x epoch_s / n of a
    worker's time each; less the wait for a free slot (the consumer's
    pace), less the sample's own stages (read, python, collate), the rest
    is the wait for the GIL (at least the gil_wait stage).

    With start_s (the pool's start, seconds), the decision is priced with
    it by price_start() over epochs of threads_epoch_s on threads (epoch_s
    when not given)."""
    w = max(1, int(num_workers))
    n = stages.get("python", {}).get("count", 0)
    if not n or epoch_s <= 0:
        return decide(0.0, 0.0, num_workers, cores)

    def per(name):
        return stages.get(name, {}).get("total_s", 0) / n

    own = per("read") + per("python") + per("collate")
    worker = w * epoch_s / n - per("slot_wait")
    gil = max(per("gil_wait"), worker - own)
    # The rest also holds the threads' start and a loaded machine's
    # delays, which processes would not remove; so it is bounded by what
    # the GIL can have cost: a worker waits for it only while another
    # thread (a worker or the consumer) holds it, and the GIL is held only
    # on a core, so the workers' wait a sample is at most W x the process's
    # CPU time over the epoch (cpu_s) / n.  A sleeping dataset uses hardly
    # any CPU and stays; pure Python keeps a core busy and its wait passes.
    if cpu_s is not None:
        gil = min(gil, max(per("gil_wait"), w * max(0.0, cpu_s) / n))
    d = decide(own + gil, gil, num_workers, cores, margin=margin)
    d["samples_measured"] = n
    d["epoch_s"] = epoch_s
    if start_s is not None:
        price_start(d, epoch_s if threads_epoch_s is None
                    else threads_epoch_s, start_s, persistent, margin,
                    start_source, epochs_run)
    return d


def estimate_start(num_workers, method="fork", pickled_bytes=0):
    """The pool's start and stop (seconds) before one has been measured:
    POOL_START_FORK_S a worker with fork; with spawn or forkserver
    POOL_START_SPAWN_S a worker and its copy of the pickled dataset
    (pickled_bytes) at PICKLE_BYTES_PER_S."""
    import math
    w = max(1, math.ceil(float(num_workers or 1)))
    if method == "fork":
        return w * POOL_START_FORK_S
    each = POOL_START_SPAWN_S + max(0, pickled_bytes) / PICKLE_BYTES_PER_S
    return w * each


def start_from_marks(first_s, last_s, batches, wall_s=None, ended_s=None):
    """An epoch's start (and stop), measured: seconds from its iter() to
    its first batch, beyond one steady batch's interval (the mean between
    the first batch and the last: (last_s - first_s) / (batches - 1)),
    plus, where the epoch's end is known, the time from its last next()
    (every batch handed out, ended_s) to its end (wall_s): the pool's stop.
    One batch has no steady interval to tell its making from the start: 0
    for that part.  None when no batch came."""
    if first_s is None or not batches:
        return None
    start = 0.0
    if batches > 1:
        start = max(0.0, first_s - (last_s - first_s) / (batches - 1))
    if wall_s is not None and ended_s is not None:
        start += max(0.0, wall_s - ended_s)
    return start


def repay_epochs(threads_epoch_s, gain, start_s):
    """How many epochs' savings on processes repay a pool's start: an
    epoch saves threads_epoch_s - threads_epoch_s / gain; None when it
    saves nothing."""
    import math
    saving = threads_epoch_s - threads_epoch_s / gain if gain > 0 else 0.0
    if saving <= 0:
        return None
    return max(1, math.ceil(start_s / saving - 1e-9))


def price_start(d, threads_epoch_s, start_s, persistent,
                margin=None, source="estimated", epochs_run=None):
    """decide()'s decision priced with the pool's start, over the epochs
    to come: an epoch on threads takes threads_epoch_s (as it recurs: the
    threads start once); on processes threads_epoch_s / (decide()'s gain)
    plus, without persistent_workers, the pool's start (start_s, each
    epoch starts a pool).  The predicted gain becomes the epochs' ratio
    (decide()'s is kept as producer_gain) and the switch is made on it.

    With persistent_workers the start is paid once, and when it is repaid
    is not known (the epochs left are not): as the ski-rental rule, the
    loader switches once as many epochs ran on threads (epochs_run) as the
    savings need to repay the start (repay_epochs); before, ``wait`` is
    True and ``switch`` False.  So the start never costs more than the
    time the threads already lost to processes.  epochs_run None: on the
    gain alone.  d is changed and returned."""
    margin = SWITCH_MARGIN if margin is None else margin
    g = d.get("predicted_gain")
    start_s = max(0.0, float(start_s or 0.0))
    d.update(producer_gain=g, start_s=start_s, start_source=source,
             persistent_workers=bool(persistent),
             threads_epoch_s=threads_epoch_s,
             predicted_process_epoch_s=None)
    if g is None or g <= 0 or not threads_epoch_s or threads_epoch_s <= 0:
        return d
    each = 0.0 if persistent else start_s
    proc = threads_epoch_s / g + each
    gain = threads_epoch_s / proc
    d["predicted_process_epoch_s"] = proc
    d["predicted_gain"] = gain
    share = 100 * (d.get("gil_share") or 0.0)
    start = (f"the pool's start ({start_s:.3f} s, {source}) paid once: "
             f"persistent_workers" if persistent else
             f"the pool's start {start_s:.3f} s ({source}) each epoch")
    why = (f"{g:.2f}x the threads' samples/s; epochs of "
           f"{threads_epoch_s:.3f} s on threads, {proc:.3f} s predicted on "
           f"processes with {start}")
    d["switch"] = gain >= margin
    d["wait"] = False
    d["repay_epochs"] = None
    if persistent and d["switch"]:
        k = repay_epochs(threads_epoch_s, gain, start_s)
        d["repay_epochs"] = k
        d["epochs_run"] = epochs_run
        if epochs_run is not None and k is not None and epochs_run < k:
            d["switch"] = False
            d["wait"] = True
            d["reason"] = (
                f"the workers wait {share:.0f}% of a sample for the GIL: "
                f"worker_type=\"process\" predicted {gain:.2f}x the "
                f"threads' epoch ({why}); the start is repaid after {k} "
                f"epochs' savings: threads until {k} epochs ran on them "
                f"({epochs_run} so far)")
            return d
        if k is not None:
            why += f", repaid after {k} epoch{'s' if k > 1 else ''}"
    if d["switch"]:
        d["reason"] = (
            f"the workers wait {share:.0f}% of a sample for the GIL: "
            f"worker_type=\"process\" predicted {gain:.2f}x the threads' "
            f"epoch ({why}; margin {margin:.2f}x)")
    else:
        d["reason"] = (
            f"the workers wait {share:.0f}% of a sample for the GIL: "
            f"processes predicted {gain:.2f}x the threads' epoch ({why}), "
            f"below the margin {margin:.2f}x; threads stay")
    return d


def judge(threads_epoch_s, process_epoch_s, start_s, persistent,
          started_pool, back_margin=None):
    """After a whole epoch on processes: the measured gain (the threads'
    epoch as it recurs over this one as it will recur) and whether to go
    back to threads.  process_epoch_s is iter() to its end.  With
    persistent_workers the pool starts once: the epoch that started it
    (started_pool) is measured less its start (start_s) and judged against
    BACK_MARGIN_FIRST (a fresh pool runs slower for longer than its first
    batch), the next ones against back_margin.  Back when the epoch took
    more than the margin x the threads' (BACK_MARGIN when back_margin is
    None)."""
    back_margin = BACK_MARGIN if back_margin is None else back_margin
    if persistent and started_pool:
        back_margin = max(back_margin, BACK_MARGIN_FIRST)
    out = {"threads_epoch_s": threads_epoch_s,
           "process_epoch_s": process_epoch_s, "start_s": start_s,
           "measured_gain": None, "back": False,
           "back_margin": back_margin}
    paid_once = bool(persistent and started_pool and start_s)
    recurring = process_epoch_s - (start_s if paid_once else 0.0)
    out["process_recurring_s"] = recurring
    if not threads_epoch_s or threads_epoch_s <= 0 or recurring <= 0:
        out["reason"] = "no epoch to compare"
        return out
    gain = threads_epoch_s / recurring
    out["measured_gain"] = gain
    less = " (less the pool's start, paid once)" if paid_once else ""
    figures = (f"the epoch took {recurring:.3f} s on processes{less} "
               f"against {threads_epoch_s:.3f} s on threads: measured "
               f"{gain:.2f}x")
    first = (" (the epoch that started the pool, persistent_workers: "
             f"judged against {back_margin:.2f}x)"
             if persistent and started_pool else "")
    if recurring > back_margin * threads_epoch_s:
        out["back"] = True
        out["reason"] = (f"{figures}, processes slower than threads by more "
                         f"than {back_margin:.2f}x{first}: back to threads "
                         f"for good")
    else:
        out["reason"] = f"{figures}; processes stay{first}"
    return out


def workers_over(decisions, initial, start_s, end_s):
    """num_workers="auto": the mean number of workers the autotuner ran
    over [start_s, end_s] (seconds on its clock), from its decisions (each
    with time_s and to_workers), starting from initial."""
    w = float(initial)
    if end_s <= start_s:
        for d in decisions:
            if d.get("time_s", 0) <= end_s:
                w = float(d["to_workers"])
        return w
    t, acc = start_s, 0.0
    for d in sorted(decisions, key=lambda d: d.get("time_s", 0)):
        at = d.get("time_s", 0)
        if at <= start_s:
            w = float(d["to_workers"])
            continue
        if at >= end_s:
            break
        acc += w * (at - t)
        t, w = at, float(d["to_workers"])
    acc += w * (end_s - t)
    return round(acc / (end_s - start_s), 6)   # (1.0, not 0.9999999...)


def cores():
    """The cores this process may run on."""
    import os
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def start_method(loader):
    """The loader's multiprocessing start method (fork by default)."""
    ctx = loader.multiprocessing_context
    return ctx.get_start_method() if ctx is not None else "fork"


def loader_start_estimate(loader, num_workers):
    """estimate_start() for this loader: its start method and, with spawn
    or forkserver, the pickled size of its dataset and worker_init_fn."""
    method = start_method(loader)
    size = 0
    if method != "fork":
        import pickle
        for obj in (loader.dataset, loader.worker_init_fn):
            if obj is not None:
                try:
                    size += len(pickle.dumps(obj))
                except Exception:   # noqa: BLE001 - cannot_move says why
                    pass
    return estimate_start(num_workers, method, size)


def cannot_move(loader):
    """Why the dataset cannot go into worker processes (a sentence), or
    None: a spawn or forkserver multiprocessing_context pickles the
    dataset (and worker_init_fn), as torch does."""
    ctx = loader.multiprocessing_context
    method = ctx.get_start_method() if ctx is not None else "fork"
    if method == "fork":
        return None
    import pickle
    for what, obj in (("the dataset", loader.dataset),
                      ("worker_init_fn", loader.worker_init_fn)):
        if obj is None:
            continue
        try:
            pickle.dumps(obj)
        except Exception as e:   # noqa: BLE001 - any failure to pickle
            return (f"{what} cannot be pickled for the {method!r} "
                    f"multiprocessing_context ({type(e).__name__}: {e})")
    return None
