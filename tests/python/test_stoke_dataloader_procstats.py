"""The doctor of stoke.DataLoader(worker_type="process"): one set of clocks
across the worker processes (python/stoke/_procstats.py).

The workers' stages (python, gil_wait, collate) come from a stage block in
shared memory, the consumer's clock from the main process, and the same C
summary, diagnosis and report as thread mode's judge them: stats() has
thread mode's keys, the verdicts are right (starving for a dataset that
sleeps, busy for a slow step, never python-bound: a process has its own
GIL), the report names the stages, and the counters survive a worker that
is killed.

Timing claims state their condition, with margins that hold beside two CPU
hogs: a sample that sleeps 5 ms (sleep never returns early) against a 1 ms
step starves any machine, 2 tiny samples against a 50 ms step leave the
consumer waiting a few percent at most.  Nothing retries."""

import json
import os
import signal
import subprocess
import time

import pytest
import torch
from torch.utils.data import Dataset

import stoke

from conftest import cli_path


class Sleeps(Dataset):
    """Each sample sleeps (the GIL released, no CPU): I/O-like."""

    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return torch.tensor([float(i)]), i


class Burns(Dataset):
    """Pure Python, holding the GIL: on threads, the python-bound kind."""

    def __len__(self):
        return 48

    def __getitem__(self, i):
        x = 0
        for k in range(20000):
            x += k * k % 7
        return torch.tensor([float(x)]), i


def run(loader, epochs, step_s):
    """Iterate, `step_s` of sleep per batch as the training step."""
    n = 0
    for _ in range(epochs):
        for _batch in loader:
            n += 1
            if step_s:
                time.sleep(step_s)
    return n


def procs(ds, **kw):
    kw.setdefault("persistent_workers", True)
    return stoke.DataLoader(ds, worker_type="process", **kw)


def stage(stats, name):
    return next(s for s in stats["stages"] if s["name"] == name)


def test_stats_has_thread_modes_keys():
    got = {}
    for mode in ("thread", "process"):
        loader = stoke.DataLoader(Sleeps(32, 0), batch_size=4, num_workers=2,
                                  worker_type=mode, warmup=0)
        run(loader, 1, 0)
        got[mode] = loader.stats()
        loader.close()
    t, p = got["thread"], got["process"]

    def keys(d, prefix=""):
        out = set()
        for k, v in d.items():
            out.add(prefix + k)
            if isinstance(v, dict):
                out |= keys(v, prefix + k + ".")
        return out
    assert keys(p) == keys(t)
    assert [s["name"] for s in p["stages"]] == [s["name"] for s in t["stages"]]
    assert set(p["stages"][0]) == set(t["stages"][0])
    # Every sample of the measured epoch was made and timed in a worker.
    assert stage(p, "python")["count"] == 32
    assert stage(p, "gil_wait")["count"] == 32
    assert stage(p, "gil_wait")["total_s"] == 0
    assert stage(p, "collate")["count"] == 32
    assert p["steps"] == t["steps"] == 8


def test_before_any_epoch_says_so():
    loader = procs(Sleeps(8, 0), batch_size=4, num_workers=1)
    with pytest.raises(stoke.Error, match="no epoch has run yet"):
        loader.stats()
    assert "processes" in repr(loader)
    run(loader, 1, 0)
    # As thread mode: no trace unless asked for, in its words.
    with pytest.raises(stoke.ConfigError, match="loader with trace=True"):
        loader.save_trace("unused.json")


def test_a_sleeping_dataset_is_starving():
    # 1 worker, 8 samples of >= 5 ms each: >= 40 ms a batch against a 1 ms
    # step.
    loader = procs(Sleeps(48, 0.005), batch_size=8, num_workers=1, warmup=1)
    run(loader, 2, 0.001)
    st = loader.stats()
    assert st["steps"] == 6
    assert stage(st, "python")["mean_us"] >= 4900   # sleep(5 ms) is >= 5 ms
    assert stage(st, "gil_wait")["total_s"] == 0
    d = loader.diagnose()
    assert d["verdict"] == "starving", d["reason"]
    # More workers help processes: the model sees no GIL.
    assert d["prediction"]["bound"] != "gil"
    text = loader.report()
    assert "starving" in text
    for name in ("python", "gil_wait", "collate"):
        assert name in text, text
    assert loader.autotune() is None
    loader.close()


def test_a_slow_step_is_busy():
    # 2 workers, 2 tiny samples a batch, 4 batches ahead, a 100 ms step:
    # busy unless the 20 measured next() calls wait 200 ms in all.
    loader = procs(Sleeps(40, 0), batch_size=2, num_workers=2, warmup=1)
    run(loader, 2, 0.1)
    d = loader.diagnose()
    assert d["verdict"] == "busy", d["reason"]
    assert loader.stats()["wait_ratio"] < 0.10


def test_pure_python_on_processes_is_never_python_bound():
    # The samples hold the GIL the whole time: on threads this is the
    # python-bound kind; on 2 processes each has its own GIL, so whatever
    # the load the verdict is one of the others, and the GIL is no bound.
    loader = procs(Burns(), batch_size=8, num_workers=2, warmup=1)
    run(loader, 2, 0.001)
    d = loader.diagnose()
    assert d["verdict"] != "python-bound", d["reason"]
    assert "GIL" not in d["reason"]
    st = loader.stats()
    assert stage(st, "gil_wait")["total_s"] == 0
    # The measured epoch's samples, less those made before its first step
    # ended the warm-up (as on threads).
    assert 0 < stage(st, "python")["count"] <= 48


def test_save_json_and_trace(tmp_path):
    loader = procs(Sleeps(16, 0), batch_size=4, num_workers=2, warmup=0,
                   trace=True)
    run(loader, 1, 0)
    loader.save_json(tmp_path / "run.json")
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["schema_version"] == 1
    assert doc["diagnosis"]["verdict"] in ("busy", "starving", "variance")
    assert [s["name"] for s in doc["stages"]][5:] == \
        ["python", "gil_wait", "collate"]
    loader.save_trace(tmp_path / "trace.json")
    assert json.loads((tmp_path / "trace.json").read_text())
    out = subprocess.run([cli_path(), "report", str(tmp_path / "run.json"),
                          "-o", str(tmp_path / "r.html")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_counters_survive_a_killed_worker():
    loader = procs(Sleeps(400, 0.001), batch_size=2, num_workers=2,
                   prefetch_factor=1, warmup=0)
    it = iter(loader)
    for _ in range(3):
        next(it)
    victim = it._pool.procs[1].pid
    os.kill(victim, signal.SIGKILL)
    while it._pool.procs[1].is_alive():   # until the main process sees it
        time.sleep(0.01)
    with pytest.raises(RuntimeError, match=f"pid {victim}.*SIGKILL"):
        for _ in it:
            pass
    st = loader.stats()
    assert st["steps"] >= 3
    assert stage(st, "python")["count"] >= 6   # the 3 batches handed out
    assert loader.diagnose()["verdict"] in ("busy", "starving", "variance")
    assert "python" in loader.report()
    # The next epoch starts new workers and the same clocks go on.
    steps = st["steps"]
    assert run(loader, 1, 0) == 200
    assert loader.stats()["steps"] == steps + 200
    loader.close()


def test_the_live_view_shows_the_processes(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run_dir))
    monkeypatch.setenv("STOKE_PUBLISH", "1")
    loader = procs(Sleeps(32, 0), batch_size=4, num_workers=2, warmup=0)
    run(loader, 2, 0)
    # The publisher writes every 200 ms: wait for a snapshot that has the
    # steps (a hang guard, not a speed check).
    deadline = time.monotonic() + 60
    while True:
        out = subprocess.run([cli_path(), "top", str(os.getpid()), "--once"],
                             capture_output=True, text=True, timeout=60,
                             env=dict(os.environ))
        assert out.returncode == 0, out.stderr
        if "(processes)" in out.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert "workers 2 (processes)" in out.stdout, out.stdout
    assert "python" in out.stdout, out.stdout
    loader.close()


def test_next_after_the_end_is_stopiteration_again():
    # Once the epoch ended (its workers gone: not persistent), next() is
    # StopIteration as in torch, not a worker "death", and adds no epoch.
    loader = stoke.DataLoader(Sleeps(8, 0), batch_size=4, num_workers=2,
                              worker_type="process", warmup=0)
    it = iter(loader)
    assert len(list(it)) == 2
    for _ in range(2):
        with pytest.raises(StopIteration):
            next(it)
    st = loader.stats()
    assert st["epochs"] == 1 and st["steps"] == 2
