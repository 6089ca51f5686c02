"""The workers' tracks in the Chrome trace of stoke.DataLoader(
worker_type="process", trace=True).

Thread mode's trace has a track per worker thread (stoke-w0, ...) with the
stages of each sample.  Worker processes cannot push to the library's span
rings (they are in the main process), so each worker has a ring of its own
in shared memory beside the stage block, made with it by the loader
(python/stoke/_procstats.py), one writer each and no lock:

    spans[w] = [head, pid, (ts_ns, dur_ns, arg, stage) x cap]

head counts the spans written; span n is at n % cap (a full ring
overwrites its oldest, as the library's).  ts is CLOCK_MONOTONIC
(time.perf_counter_ns), the clock the consumer's spans are taken on, so
the tracks line up.  save_trace writes the consumer's trace (the
library's, through the TwoClock) and adds a track per worker process,
"stoke-p<w> (pid N)" (a worker id never started has none), with its
read, python and collate spans, each naming its sample (a map-style dataset's key; an IterableDataset's task,
the batch of its stream).

A span being written while the trace is read may come out torn: the
reader leaves out the spans the writer may have overwritten meanwhile
(those within 2 of the head it read after copying)."""

import json

_HEAD, _PID, _FIRST = 0, 1, 2
_WIDTH = 4       # ts, dur, arg, stage
# The stages' numbers and names (include/stoke.h's stoke_stage).
STAGE_READ, STAGE_PYTHON, STAGE_COLLATE = 0, 5, 7
_NAMES = {STAGE_READ: "read", STAGE_PYTHON: "python",
          STAGE_COLLATE: "collate"}


def make_rings(num_workers, cap):
    """The shared rings (torch's shared memory, as the stage block's)."""
    import torch
    return torch.zeros((num_workers, _FIRST + cap * _WIDTH),
                       dtype=torch.int64).share_memory_()


def start_worker(rings, worker_id, pid):
    """In the worker process: its ring's numpy view, its pid written."""
    if rings is None:
        return None
    row = rings.numpy()[worker_id]
    row[_PID] = pid
    return row


def write_unit(row, start, times, collate_ns, args):
    """A unit's spans: each sample's read and python (contiguous from
    start, as the worker timed them: times[i] = (read_ns, python_ns)),
    then the unit's collation; args[i] names sample i."""
    cap = (row.shape[0] - _FIRST) // _WIDTH
    h = int(row[_HEAD])
    t = start

    def push(ts, dur, arg, stage):
        nonlocal h
        at = _FIRST + (h % cap) * _WIDTH
        row[at:at + _WIDTH] = (ts, dur, arg, stage)
        h += 1

    for (rd, py), arg in zip(times, args):
        if rd > 0:
            push(t, rd, arg, STAGE_READ)
        push(t + rd, py, arg, STAGE_PYTHON)
        t += rd + py
    if times and collate_ns > 0:
        push(t, collate_ns, args[len(times) - 1], STAGE_COLLATE)
    row[_HEAD] = h      # published after the spans


def _read(row):
    """A ring's spans, oldest first, and the number lost (overwritten)."""
    cap = (row.shape[0] - _FIRST) // _WIDTH
    head = int(row[_HEAD])
    copy = row[_FIRST:].reshape(cap, _WIDTH).copy()
    after = int(row[_HEAD])
    lo = max(0, head - cap, after + 2 - cap)   # not overwritten meanwhile
    spans = [copy[n % cap] for n in range(lo, head)]
    return spans, lo


def add_tracks(path, rings, t0_ns, iterable):
    """Add the workers' tracks to the trace at path (written by the
    consumer's TwoClock, whose spans start at t0_ns)."""
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    arg_name = "batch" if iterable else "sample"
    view = rings.numpy()
    lost = 0
    for w in range(view.shape[0]):
        row = view[w]
        tid = 1 + w
        pid = int(row[_PID])
        if not pid:
            continue    # never started (num_workers="auto" stayed below)
        name = f"stoke-p{w} (pid {pid})"
        events.append({"name": "thread_name", "ph": "M", "pid": 1,
                       "tid": tid, "args": {"name": name}})
        spans, lost_w = _read(row)
        lost += lost_w
        for ts, dur, arg, stage in spans:
            events.append({
                "name": _NAMES.get(int(stage), str(int(stage))),
                "cat": "stoke", "ph": "X",
                "ts": round((int(ts) - t0_ns) / 1e3, 3),
                "dur": round(int(dur) / 1e3, 3), "pid": 1, "tid": tid,
                "args": {arg_name: int(arg)}})
    other = doc.setdefault("otherData", {})
    other["dropped_events"] = int(other.get("dropped_events", 0)) + lost
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    import os
    os.replace(tmp, path)


def consumer_t0(path, last_enter_ns):
    """The consumer trace's time origin: its last wait span starts at the
    last step's enter() (CLOCK_MONOTONIC), so origin = that - its ts.
    None when it has no wait span."""
    with open(path) as f:
        doc = json.load(f)
    waits = [e for e in doc["traceEvents"]
             if e.get("name") == "wait" and e.get("ph") == "X"]
    if not waits or last_enter_ns is None:
        return None
    return last_enter_ns - int(round(waits[-1]["ts"] * 1e3))
