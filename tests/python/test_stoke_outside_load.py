"""The machine's other load in Python, as the CLI says it
(tests/cli/t0014-outside-load.sh): stoke.Loader's and stoke.DataLoader's
stats(), diagnose() and report(), stoke.TwoClock's, and the output of
`python -m stoke.doctor` carry summary.outside_load with the CLI's keys,
and the note ("the machine's other load moved from ...") appears exactly
when it moved.

The hog halves switch a busy loop on half way through a run and check
that the move is seen and said.  They run only on a quiet machine: on a
busy one (CI's stress stage runs beside two busy loops) the loop's CPU
comes out of the other jobs' instead of showing as a move, so they skip
themselves, saying why, as t0014 does.  Nothing here times anything: the
figures are checked for their shape and for agreeing with each other."""

import json
import subprocess
import sys
import time

import pytest

from conftest import python_env

stoke = pytest.importorskip("stoke")

KEYS = {"windows", "window_s", "mean_cores", "min_cores", "max_cores",
        "moved", "shift_frac", "other_moved", "delay_moved",
        "delay_windows", "delay_min_cores", "delay_max_cores",
        "taken_cores"}
NOTE = "the machine's other load moved from"
HOG = ["timeout", "1.5", "sh", "-c", "while :; do :; done"]
QUIET = 0.2  # other cores above which the machine counts as busy


def check(o, text):
    """The key's shape, and the note in text exactly when it moved."""
    assert set(o) == KEYS, sorted(o)
    assert o["windows"] >= 2, o
    assert o["window_s"] == 0.5, o
    assert 0 <= o["min_cores"] <= o["mean_cores"] + 1e-9, o
    assert o["mean_cores"] <= o["max_cores"] + 1e-9, o
    assert isinstance(o["moved"], bool), o
    assert 0 <= o["shift_frac"] <= 1, o
    # The run delay's sign beside it: moved is either's.
    assert o["moved"] == (o["other_moved"] or o["delay_moved"]), o
    assert 0 <= o["delay_windows"] <= o["windows"], o
    assert 0 <= o["delay_min_cores"] <= o["delay_max_cores"] + 1e-9, o
    assert 0 <= o["taken_cores"] <= o["delay_max_cores"] - \
        o["delay_min_cores"] + 1e-9, o
    assert (NOTE in text) == o["moved"], (o, text[-600:])
    if o["moved"]:
        assert "may be off by up to" in text
        assert o["shift_frac"] > 0, o
    else:
        assert o["shift_frac"] == 0, o


def run_loader(hog_at=None, seconds=2.5):
    """A loader over sleeping samples, its steps sleeping 20 ms, for about
    `seconds` after its warm-up epoch; a busy loop started hog_at seconds
    in (None: none).  The loader, and the loop's process (or None)."""
    loader = stoke.Loader(stoke.synthetic("sleep:1ms", samples=80,
                                          shape=(4,)),
                          8, num_workers=2, warmup=1)
    t0, hog = time.monotonic(), None
    epochs = 0
    while epochs < 2 or time.monotonic() - t0 < seconds + 0.3:
        for _ in loader:
            if hog_at is not None and hog is None and \
                    time.monotonic() - t0 >= hog_at:
                hog = subprocess.Popen(HOG)
            time.sleep(0.02)
        epochs += 1
    if hog:
        hog.wait()
    return loader


def quiet_or_skip(o):
    if o["moved"] or o["max_cores"] >= QUIET:
        pytest.skip(f"the machine is busy ({o['max_cores']:.2f} other "
                    f"cores at most, moved: {o['moved']}): the busy loop "
                    "would not show as a move")


def seen_or_skip(o):
    if not o["moved"] and o["min_cores"] >= QUIET:
        pytest.skip("the machine got busy before the busy loop did "
                    f"({o}): not this test's case")
    assert o["moved"], f"the busy loop was not seen: {o}"


def test_loader_stats_diagnose_report():
    loader = run_loader()
    st = loader.stats()
    check(st["outside_load"], loader.report())
    check(loader.diagnose()["outside_load"], loader.report())
    quiet_or_skip(st["outside_load"])

    loader = run_loader(hog_at=1.2)
    st = loader.stats()
    text = loader.report()
    seen_or_skip(st["outside_load"])
    check(st["outside_load"], text)
    check(loader.diagnose()["outside_load"], text)


def test_dataloader_stats():
    torch = pytest.importorskip("torch")
    ds = [torch.zeros(4) for _ in range(80)]
    loader = stoke.DataLoader(ds, batch_size=8, num_workers=2, warmup=1)
    t0 = time.monotonic()
    epochs = 0
    while epochs < 2 or time.monotonic() - t0 < 2.8:
        for _ in loader:
            time.sleep(0.02)
        epochs += 1
    st = loader.stats()
    check(st["outside_load"], loader.report())
    check(loader.diagnose()["outside_load"], loader.report())


def test_twoclock():
    clock = stoke.TwoClock(range(10**6), warmup=0)
    t0 = time.monotonic()
    for _ in clock:
        time.sleep(0.02)
        if time.monotonic() - t0 > 2.5:
            break
    st = clock.stats()
    check(st["outside_load"], clock.report())


DOCTORED = r'''
import subprocess, sys, time
import torch
from torch.utils.data import DataLoader

hog_at = float(sys.argv[1])      # seconds into the loop; < 0: no busy loop
loader = DataLoader([torch.zeros(4)] * 800000, batch_size=8, num_workers=0)
t0, hog = time.monotonic(), None
for x in loader:
    time.sleep(0.02)
    if hog_at >= 0 and hog is None and time.monotonic() - t0 >= hog_at:
        hog = subprocess.Popen(["timeout", "1.5", "sh", "-c",
                                "while :; do :; done"])
'''


def doctor(tmp_path, hog_at):
    """The doctor over the script for 3.5 s after its warm-up (10 steps
    and 5 s): its stderr and its loader's JSON."""
    script = tmp_path / "doctored.py"
    script.write_text(DOCTORED)
    r = subprocess.run([sys.executable, "-m", "stoke.doctor", "--seconds",
                        "3.5", str(script), str(hog_at)], cwd=tmp_path,
                       env=python_env(), capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "stoke-doctor" / "loader-1.json")
                     .read_text())
    return r.stderr, doc


def test_doctor(tmp_path):
    text, doc = doctor(tmp_path, -1)
    o = doc["summary"]["outside_load"]
    check(o, text)
    assert doc["diagnosis"]["outside_load"] == o
    quiet_or_skip(o)

    # The warm-up ends 5 s into the loop; the busy loop starts 6.5 s in.
    text, doc = doctor(tmp_path, 6.5)
    o = doc["summary"]["outside_load"]
    seen_or_skip(o)
    check(o, text)
    assert doc["diagnosis"]["outside_load"] == o
