"""stoke.tune from Python: synthetic and Python steps, the knee's
arguments for torch and for stoke, errors from the step."""

import numpy as np
import pytest
import torch

import stoke


def test_synthetic_step_finds_the_knee():
    src = stoke.synthetic("sleep:2ms", samples=64, shape=(4,))
    seen = []
    knee = stoke.tune(src, batch_size=8, step="sleep:6ms",
                      workers=[0, 1, 2, 4, 8], prefetch=[2],
                      progress=lambda i, n, p: seen.append((i, n, p["status"])))
    # A batch costs 16 ms of sleeping against a 6 ms step: 4 workers (4 ms
    # a batch) remove the stall with a margin, 2 (8 ms) do not, 8 buy
    # nothing more.  (A 4 ms step put 4 workers at the balance, where a
    # jitter of the load read "starving".)  Sleeps scale with threads only while
    # a woken thread gets a core: beside busy processes (load 20 on 2
    # cores) the 4-worker point was no faster than the 2-worker one and the
    # knee was, rightly, 2.  So the knee is held to 4 or 8 only where the
    # points scaled as the sleeps say.
    # The knee follows knee.c's rule over the points it returns, whatever
    # the load did to them: the cheapest of the points within the tolerance
    # of the best, busy ones only where any of those is busy.
    pts = knee["points"]
    best = max(p["samples_per_s"] for p in pts)
    good = [p for p in pts
            if p["samples_per_s"] >= (1 - knee["tolerance"]) * best]
    busy = [p for p in good if p["verdict"] == "busy"]
    expect = min(busy or good,
                 key=lambda p: (p["workers"], p["host_bytes"],
                                -p["samples_per_s"]))
    assert knee["workers"] == expect["workers"], (knee, pts)
    assert knee["stall_removed"] is bool(busy), knee
    # 0 workers read inline: 16 ms of loading a batch before each 6 ms step.
    assert {p["workers"]: p for p in pts}[0]["verdict"] == "starving", pts
    # A batch costs 16 ms of sleeping against a 6 ms step: 4 workers (4 ms
    # a batch) remove the stall with a margin, 2 (8 ms) do not, 8 buy
    # nothing more.  (A 4 ms step put 4 workers at the balance, where a
    # jitter of the load read "starving".)  Sleeps scale with threads only
    # while a woken thread gets a core, and a point is 8 steps: beside busy
    # processes one late wake-up can make the 4- or 8-worker point read
    # starving (stress run, CI).  So the knee is held to 4 or 8 and busy
    # only where one of those points measured busy and as fast as the best.
    if busy:
        assert knee["workers"] in (4, 8) and knee["verdict"] == "busy", knee
    else:
        rate = {p["workers"]: round(p["samples_per_s"]) for p in pts}
        print(f"note: no point as fast as the best was busy (samples/s "
              f"{rate}): the knee ({knee['workers']}) is not held to 4 or 8")
    dl = knee["dataloader_kwargs"]
    assert dl["num_workers"] == knee["workers"]
    assert dl["batch_size"] == 8 and dl["persistent_workers"] is True
    assert "DataLoader(" in knee["dataloader_call"]
    kw = knee["loader_kwargs"]
    assert kw == {"batch_size": 8, "num_workers": knee["workers"],
                  "prefetch": knee["prefetch"]}
    loader = stoke.Loader(src, **kw)     # the kwargs work as they are
    assert len(loader) == 8
    assert len(knee["points"]) == 5
    assert all(p["status"] == "measured" for p in knee["points"])
    assert [s for _, _, s in seen].count("measured") == 5
    assert seen[0] == (0, 5, "pending")


def test_python_step_sees_each_batch():
    x = np.arange(64 * 2, dtype=np.float32).reshape(64, 2)
    calls = []

    def step(batch):
        bx, by = batch
        assert isinstance(bx, torch.Tensor) and bx.shape == (8, 2)
        calls.append(int(by[0]))

    knee = stoke.tune((x, np.arange(64)), batch_size=8, step=step,
                      workers=[0, 2], prefetch=[1], warmup_epochs=0)
    assert knee["workers"] in (0, 2)
    assert len(calls) == 2 * 8               # two points, one epoch each
    assert sorted(calls[:8]) == list(range(0, 64, 8))


def test_a_failing_step_stops_the_sweep():
    src = stoke.synthetic("tensor", samples=16, shape=(2,))

    def step(batch):
        raise ZeroDivisionError("bad step")

    with pytest.raises(ZeroDivisionError, match="bad step"):
        stoke.tune(src, batch_size=4, step=step, workers=[0, 1])


def test_a_step_that_keeps_its_batch_is_refused():
    src = stoke.synthetic("tensor", samples=16, shape=(2,))
    kept = []
    with pytest.raises(stoke.Error, match="kept a reference"):
        stoke.tune(src, batch_size=4, step=kept.append, workers=[0],
                   warmup_epochs=0)


def test_bad_arguments():
    src = stoke.synthetic("tensor", samples=16, shape=(2,))
    with pytest.raises(ValueError, match="step"):
        stoke.tune(src, batch_size=4, step="nap:3ms")
    with pytest.raises(stoke.ConfigError):
        stoke.tune(src, batch_size=4, step="sleep:1ms", prefetch=[0])
