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
28-41 us a sample measured on a 2-core AMD EPYC, bench/README.md's
process section; the default, 41 us, is the top of that range, so the
prediction errs towards threads):

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
wall_s + overhead_s and the gain is below 1."""

# The per-sample overhead of process mode (seconds), the top of the range
# measured in bench/README.md's process section (28-41 us a sample, AMD
# EPYC, 2 cores).
PROCESS_OVERHEAD_S = 41e-6
# The predicted gain at which "auto" switches to processes.
SWITCH_MARGIN = 1.15


def decide(wall_s, gil_wait_s, num_workers, cores, cpu_s=None,
           overhead_s=PROCESS_OVERHEAD_S, margin=SWITCH_MARGIN):
    """The decision from the threads' per-sample measurements (seconds,
    means over a worker's samples): a dict with ``switch`` (bool),
    ``predicted_gain`` (processes over threads, producer rate),
    ``gil_share`` (gil_wait_s / wall_s), ``threads_samples_per_s`` and
    ``processes_samples_per_s`` (the producers' predicted rates),
    ``margin`` and ``reason`` (a sentence)."""
    w = int(num_workers)
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
                      cpu_s=None):
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
    is the wait for the GIL (at least the gil_wait stage)."""
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
    d = decide(own + gil, gil, num_workers, cores)
    d["samples_measured"] = n
    d["epoch_s"] = epoch_s
    return d


def cores():
    """The cores this process may run on."""
    import os
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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
