"""stoke.TwoClock around loops stoke does not own."""

import json
import subprocess
import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import stoke

from conftest import cli_path


def slow_gen(n, wait_s, item=(1, 2)):
    for _ in range(n):
        time.sleep(wait_s)
        yield item


class Regen:
    """An iterable that makes a fresh generator per epoch."""

    def __init__(self, n, wait_s):
        self.n, self.wait_s = n, wait_s

    def __iter__(self):
        return slow_gen(self.n, self.wait_s,
                        (torch.zeros(8, 3), torch.zeros(8)))


def epoch(clock, compute_s=0.0):
    n = 0
    for _ in clock:
        time.sleep(compute_s)
        n += 1
    return n


def test_iterates_the_wrapped_and_times_both_clocks():
    clock = stoke.TwoClock(Regen(6, 0.01), warmup=1)
    assert epoch(clock, 0.002) == 6      # warm-up
    for _ in range(2):
        assert epoch(clock, 0.002) == 6
    st = clock.stats()
    assert st["steps"] == 12 and st["epochs"] == 2
    assert st["samples"] == 12 * 8       # the first field's length
    assert st["wait_p50_ms"] >= 9.5 and st["wait_s"] >= 12 * 0.0095
    assert 0.0015 * 12 <= st["compute_s"] < 12 * 0.009
    assert st["wait_p99_ms"] >= st["wait_p50_ms"]
    assert clock.verdict == "starving"


class SlowStart:
    """An iterable whose iter() takes start_s, as a torch DataLoader
    starting its worker processes each epoch."""

    def __init__(self, n, start_s):
        self.n, self.start_s = n, start_s

    def __iter__(self):
        time.sleep(self.start_s)
        return iter([(torch.zeros(2),)] * self.n)


def test_the_wrapped_iter_is_the_first_steps_wait():
    # A training loop's `for` line waits for the loader's iter() as for its
    # batches.  The clock left it out: the epoch began after it, so a
    # torch loader's worker start-up each epoch was neither waiting nor
    # computing.  (Lower bounds only: a sleep never ends early.)
    clock = stoke.TwoClock(SlowStart(4, 0.05), warmup=0)
    for _ in range(2):
        assert epoch(clock, 0.001) == 4
    st = clock.stats()
    assert st["steps"] == 8 and st["epochs"] == 2
    assert st["wait_s"] >= 2 * 0.05
    assert st["wait_max_ms"] >= 50
    for e in clock._document()["epochs"]:
        assert e["seconds"] >= 0.05 + 4 * 0.001, e
        assert e["wait_s"] >= 0.05, e


def test_busy_loop_and_the_verdict_thresholds():
    clock = stoke.TwoClock([(torch.zeros(4),)] * 10, warmup=0)
    epoch(clock, 0.01)
    assert clock.verdict == "busy"
    d = clock.diagnose()
    assert d["busy_wait_ratio"] == 0.10 and d["starving_empty_frac"] == 0.5
    assert "stage clocks" in d["limits"]
    assert d["advice"][0]["kind"] == "model"


def test_sync_is_called_before_each_compute_clock():
    calls = []
    clock = stoke.TwoClock(range(5), warmup=0,
                           sync=lambda: calls.append(time.monotonic()))
    assert list(clock) == [0, 1, 2, 3, 4]
    assert len(calls) == 6               # before every next, the last too
    with pytest.raises(ValueError):
        stoke.TwoClock(range(3), sync="tpu")
    with pytest.raises(TypeError):
        stoke._stoke.TwoClock(range(3), sync=3)


def test_break_starts_a_new_epoch_and_errors_propagate():
    clock = stoke.TwoClock(range(10), warmup=0)
    for i in clock:
        if i == 3:
            break
    assert list(clock) == list(range(10))
    st = clock.stats()
    assert st["epochs"] == 2 and st["steps"] == 14

    def bad():
        yield 1
        raise RuntimeError("the wrapped loader broke")
    clock = stoke.TwoClock(bad(), warmup=0)
    with pytest.raises(RuntimeError, match="broke"):
        list(clock)
    assert clock.stats()["steps"] == 1


def test_around_a_torch_dataloader_with_workers(tmp_path):
    class Slow(Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            time.sleep(0.004)
            return torch.zeros(3), i % 2

    loader = DataLoader(Slow(), batch_size=8, num_workers=2,
                        persistent_workers=True)
    clock = stoke.TwoClock(loader)
    assert clock.info["num_workers"] == 2 and clock.info["batch_size"] == 8
    for _ in range(2):
        epoch(clock, 0.001)
    assert clock.verdict == "starving"   # 16 ms a batch per worker vs 1 ms
    d = clock.diagnose()
    w = [a for a in d["advice"] if a["kind"] == "workers"]
    assert w and w[0]["num_workers"] > 2
    text = clock.report()
    assert "verdict: starving" in text and "num_workers=" in text
    path = tmp_path / "clock.json"
    clock.save_json(str(path))
    doc = json.loads(path.read_text())
    assert doc["config"]["num_workers"] == 2
    assert doc["summary"]["steps"] == 8
    html = tmp_path / "r.html"
    r = subprocess.run([cli_path(), "report", str(path), "-o", str(html)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    page = html.read_text()
    assert "starving" in page and "more workers" in page


def test_trace():
    clock = stoke.TwoClock(range(4), warmup=0, trace=64)
    list(clock)
    import tempfile, os
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.json")
        clock.save_trace(p)
        ev = json.load(open(p))["traceEvents"]
    assert sum(e.get("name") == "wait" for e in ev) == 4
    assert sum(e.get("name") == "compute" for e in ev) == 4
    with pytest.raises(stoke.ConfigError, match="trace"):
        stoke.TwoClock(range(2)).save_trace("/tmp/never.json")
