"""stoke.DataLoader(worker_type="process"): what thread mode has besides
the batches, on worker processes: the memory ledger (memory(): the shared
slots counted once, each worker process's own memory beside them), the
workers' tracks in the Chrome trace (save_trace), and num_workers="auto".

Short (a few hundred samples at most) and never timed: the assertions are
on counts, names and sums, which no load on the machine changes."""

import gc
import json
import os

import pytest
import torch
from torch.utils.data import Dataset

import stoke


class Big(Dataset):
    """Samples of 64 KiB (a row each in the workers' arenas) that name the
    process that made them."""

    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.full((16384,), float(i)), os.getpid()


@pytest.fixture(autouse=True)
def collected():
    gc.collect()
    yield
    gc.collect()


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def test_memory_ledger_counts_the_slots_once_and_each_worker():
    dl = stoke.DataLoader(Big(), batch_size=8, num_workers=2,
                          worker_type="process", persistent_workers=True)
    it = iter(dl)
    makers = set()
    for _ in range(4):
        _, pids = next(it)
        makers |= set(pids.tolist())
    m = dl.memory()
    assert m["workers_alive"]
    workers = m["workers"]
    assert sorted(w["id"] for w in workers) == [0, 1]
    pids = {w["pid"] for w in workers}
    assert len(pids) == 2 and os.getpid() not in pids
    assert makers <= pids                  # the processes that made samples
    assert all(w["own_bytes"] > 0 for w in workers)
    shared = m["shared"]
    assert set(shared) == {"ring", "arenas", "stage_block"}
    assert shared["arenas"] >= 16384 * 4   # at least one row of one arena
    assert shared["ring"] > 0 and shared["stage_block"] > 0
    assert m["shared_bytes"] == sum(shared.values())
    assert m["total_bytes"] == m["shared_bytes"] + m["main_bytes"] + \
        sum(w["own_bytes"] for w in workers)
    # Each process's RSS, added up, counts torch's pages (shared with the
    # workers since fork) once per process: the ledger counts them once.
    naive = rss(os.getpid()) + sum(rss(p) for p in pids)
    assert m["total_bytes"] < naive
    text = dl.report()
    assert "counted once" in text and "2 worker processes' own" in text
    dl.close()


def test_save_json_carries_the_memory_ledger(tmp_path):
    # Process mode: the shared slots once and each worker's own, as
    # memory() gives them; threads: one process.
    for kw, workers in (({"worker_type": "process"}, 2), ({}, 0)):
        dl = stoke.DataLoader(Big(), batch_size=8, num_workers=2, **kw)
        assert sum(1 for _ in dl) == 8
        path = tmp_path / f"run-{workers}.json"
        dl.save_json(path)
        doc = json.loads(path.read_text())
        m = doc["memory"]
        assert len(m["workers"]) == workers
        assert (m["shared_bytes"] > 0) == (workers > 0)
        assert m["main_bytes"] > 0
        assert m["total_bytes"] == m["shared_bytes"] + m["main_bytes"] + \
            sum(w["own_bytes"] for w in m["workers"])
        assert doc["schema_version"] == 1 and "summary" in doc
        assert not list(tmp_path.glob("*.tmp.*"))
        dl.close()


def test_memory_ledger_keeps_the_workers_as_they_stopped():
    dl = stoke.DataLoader(Big(), batch_size=8, num_workers=2,
                          worker_type="process")
    assert sum(1 for _ in dl) == 8
    m = dl.memory()     # the epoch ended: its workers are gone
    assert not m["workers_alive"]
    assert sorted(w["id"] for w in m["workers"]) == [0, 1]
    assert m["shared"]["arenas"] > 0


def test_memory_in_thread_mode_is_one_process():
    dl = stoke.DataLoader(Big(), batch_size=8, num_workers=2)
    assert sum(1 for _ in dl) == 8
    m = dl.memory()
    assert m["workers"] == [] and m["shared_bytes"] == 0
    assert m["total_bytes"] == m["main_bytes"] > 0
    dl.close()


class Small(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.tensor([float(i)]), os.getpid()


def test_trace_has_a_track_per_worker_process(tmp_path):
    dl = stoke.DataLoader(Small(), batch_size=8, num_workers=2,
                          worker_type="process", persistent_workers=True,
                          trace=True)
    makers = set()
    for _ in range(2):
        for _, pids in dl:
            makers |= set(pids.tolist())
    path = tmp_path / "t.json"
    dl.save_trace(path)
    # 2 workers x 16384 spans x 4 int64 + 2 words each, counted once
    assert dl.memory()["shared"]["span_rings"] == 2 * (16384 * 4 + 2) * 8
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert set(names) == {0, 1, 2}
    track_pids = {int(names[t].split("pid ")[1].rstrip(")")) for t in (1, 2)}
    assert names[1].startswith("stoke-p0") and names[2].startswith("stoke-p1")
    assert makers <= track_pids and os.getpid() not in track_pids
    spans = [e for e in events if e.get("ph") == "X" and e["tid"] in (1, 2)]
    py = {}
    for e in spans:
        if e["name"] == "python":
            py.setdefault(e["args"]["sample"], []).append(e)
    # Every sample made once an epoch, on a worker's track.
    assert sorted(py) == list(range(64))
    assert all(len(v) == 2 for v in py.values())
    assert {e["name"] for e in spans} <= {"read", "python", "collate"}
    # The tracks are on the consumer's clock: a sample's python span ends
    # before the wait for its batch does (it was made before the batch was
    # handed out), whatever the load.
    waits = [e for e in events if e.get("name") == "wait" and e["tid"] == 0]
    assert len(waits) == 16
    for k, made in py.items():
        for epoch, e in enumerate(sorted(made, key=lambda e: e["ts"])):
            w = waits[epoch * 8 + k // 8]
            assert e["ts"] >= 0
            assert e["ts"] + e["dur"] <= w["ts"] + w["dur"] + 0.01, (k, epoch)
    dl.close()


def test_trace_of_an_iterable_dataset_has_the_workers_tracks(tmp_path):
    from torch.utils.data import IterableDataset, get_worker_info

    class Stream(IterableDataset):
        def __iter__(self):
            info = get_worker_info()
            for i in range(info.id, 32, info.num_workers):
                yield torch.tensor([float(i)])

    dl = stoke.DataLoader(Stream(), batch_size=4, num_workers=2,
                          worker_type="process", trace=True)
    assert sum(1 for _ in dl) == 8
    path = tmp_path / "i.json"
    dl.save_trace(path)
    events = json.loads(path.read_text())["traceEvents"]
    for tid in (1, 2):
        mine = [e for e in events if e.get("ph") == "X" and e["tid"] == tid
                and e["name"] == "python"]
        # 16 items and the next() that found the end, over 4 or 5 tasks
        assert len(mine) >= 16
        assert {e["args"]["batch"] for e in mine} <= set(range(10))


# Samples that sleep (no CPU): a consumer that computes nothing waits on
# one worker, whatever the load, so the tuner must grow.
from test_stoke_autotune import Slow  # noqa: E402


def batches(loader, epochs):
    return [[y.tolist() for _, y in loader] for _ in range(epochs)]


def test_auto_grows_the_worker_processes_and_keeps_the_batches():
    kw = dict(batch_size=8, shuffle=True, worker_type="process")
    auto = stoke.DataLoader(Slow(96), num_workers="auto",
                            persistent_workers=True,
                            generator=torch.Generator().manual_seed(5), **kw)
    fixed = stoke.DataLoader(Slow(96), num_workers=2,
                             generator=torch.Generator().manual_seed(5), **kw)
    got, want = batches(auto, 2), batches(fixed, 2)
    assert got == want
    assert sorted(sum(got[0], [])) == list(range(96))
    a = auto.autotune()
    assert a is not None and a["worker_type"] == "process"
    assert a["max_workers"] >= 8 and auto.num_workers == a["max_workers"]
    first = a["decisions"][0]
    assert first["kind"] == "grow" and first["from_workers"] == 1
    assert first["to_workers"] > 1 and "processes" in first["text"]
    # The processes it grew to are running (persistent workers).
    assert len(auto.memory()["workers"]) == a["workers"] > 1
    assert fixed.autotune() is None
    auto.close()


def _gate_run(dataset, steps, moves, values, **kw):
    """A num_workers="auto" process loader driven by hand: the tuner's
    moves switched off, moves[step](pool) called before that step's batch.
    Runs the epoch's `steps` batches, checks that it then ends, and returns
    every batch's values(batch) in order, and the pool."""
    dl = stoke.DataLoader(dataset, batch_size=8, num_workers="auto",
                          worker_type="process", **kw)
    it = iter(dl)
    it._stats.tuner.on_step = lambda *a: None   # the gate is the test's
    pool = it._pool
    seen = []
    for step in range(steps):
        if step in moves:
            moves[step](pool)
        seen += values(next(it)).tolist()
    with pytest.raises(StopIteration):
        next(it)
    return seen, pool


def test_auto_shrinks_and_grows_again_without_losing_a_sample():
    # The pool's gate, moved by hand at fixed steps (the tuner moves it
    # from its windows): workers above it leave at their next claim, and
    # come back as new processes when it rises again.
    # 480 samples: enough that workers still claim after the gate falls
    # (and leave), and after it rises.
    seen, pool = _gate_run(
        Slow(480), 60, {2: lambda p: p.set_active(3),
                        8: lambda p: p.set_active(1),
                        40: lambda p: p.set_active(2)},
        values=lambda batch: batch[1])
    assert seen == list(range(480))
    assert len(pool.procs) == 3


def _gate_ctl(workers, gate):
    """A pool's control block, as _procs lays it out, with the gate set."""
    from stoke import _procs
    ctl = torch.zeros(_procs._HELD + 5 * workers, dtype=torch.int64).numpy()
    ctl[_procs._GATE] = gate
    return ctl


def test_a_worker_leaving_at_the_gate_waits_until_its_results_are_taken():
    # A result that crosses as a tensor has its storage's fd fetched from
    # the sender when the main process unpickles it, so a worker that left
    # first made the main process's get fail (CI: ConnectionRefusedError in
    # test_auto_shrinks_and_grows_again_without_losing_a_sample).  The
    # leaving worker now waits for the main process's count of its results.
    import threading
    from stoke import _procs
    ctl = _gate_ctl(3, gate=1)
    at = _procs._HELD + 4 * 3 + 2
    ctl[at] = 4
    parent = os.getppid()
    assert _procs._leave_when_taken(ctl, at, 4, 2, parent) == "leave"
    # Two results still out: it waits, and leaves once they are taken.
    taker = threading.Timer(0.05, lambda: ctl.__setitem__(at, 6))
    taker.start()
    assert _procs._leave_when_taken(ctl, at, 6, 2, parent) == "leave"
    assert ctl[at] == 6
    taker.join()
    # The gate rises again while it waits: it stays and works on.
    rise = threading.Timer(0.05, lambda: ctl.__setitem__(_procs._GATE, 3))
    rise.start()
    assert _procs._leave_when_taken(ctl, at, 9, 2, parent) == "stay"
    rise.join()
    # The loader stops, or the main process is gone: it leaves at once.
    ctl[_procs._GATE] = 1
    ctl[_procs._STOP] = 1
    assert _procs._leave_when_taken(ctl, at, 9, 2, parent) == "stop"
    ctl[_procs._STOP] = 0
    assert _procs._leave_when_taken(ctl, at, 9, 2, parent + 1) == "stop"


class _Batches(Dataset):
    """Samples that a custom collate_fn turns into one tensor a batch: the
    result crosses pickled, its storage as a file descriptor."""

    def __len__(self):
        return 160

    def __getitem__(self, i):
        import time
        time.sleep(0.01)   # a unit of 8 takes 80 ms: workers are mid-unit
        return i           # with claims to spare when the gate falls


def _as_tensor(items):
    return torch.tensor(items)


def test_auto_shrinks_while_pickled_batches_are_in_flight():
    # The gate falls while the workers' batches cross as pickled tensors,
    # and the main process naps after each publish (when a leaving worker
    # wakes): no batch is lost or reordered, and none fails to unpickle.
    # (The race CI met did not reproduce here on demand, with or without
    # the wait: the unit test above is the one that pins the wait down.)
    import time
    plain = {}

    def shrink_and_nap(pool):
        # Workers 1 and 2 put their units; then each unit published wakes
        # one, which sees the gate and leaves, while the main process
        # takes nothing in for 0.2 s.
        pool.set_active(1)
        time.sleep(0.2)
        publish = plain["publish"] = pool.publish

        def publish_then_nap(*args):
            publish(*args)
            time.sleep(0.2)
        pool.publish = publish_then_nap

    def grow(pool):
        pool.publish = plain["publish"]
        pool.set_active(2)

    seen, _ = _gate_run(
        _Batches(), 20, {1: lambda p: p.set_active(3), 4: shrink_and_nap,
                         12: grow},
        values=lambda batch: batch, collate_fn=_as_tensor)
    assert seen == list(range(160))
