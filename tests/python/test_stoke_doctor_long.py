"""The doctor on a few minutes of a long job: the warm-up ends after 10
steps and 5 s instead of a whole epoch, `--steps N` / `--seconds S` end the
script with exit 0 after that much of the steady state, `--every S` prints
a line as it goes, and SIGTERM prints what was measured so far.

The script has 100,000 steps per epoch, so no epoch ever ends: every
verdict below comes from part of the first one.  The busy case's model
sleeps 20 ms a step against an instant loader; the starving case's loader
sleeps 2 ms a sample (16 ms a batch) against a 1 ms step.  Both margins are
wide (a few % against 90%), so a loaded machine does not turn a verdict."""

import json
import re
import signal
import subprocess
import sys
import time

from conftest import python_env

LONG_EPOCH = r'''
import sys, time
import torch
from torch.utils.data import DataLoader, Dataset

mode = sys.argv[1]


class Long(Dataset):
    def __len__(self):
        return 100000 * 8          # 100,000 steps per epoch

    def __getitem__(self, i):
        if mode == "starving":
            time.sleep(0.002)
        return torch.zeros(4), i


loader = DataLoader(Long(), batch_size=8, num_workers=0)
print("LOOP STARTS", flush=True)
try:
    for epoch in range(3):
        for x, y in loader:
            time.sleep(0.02 if mode == "busy" else 0.001)
    print("ALL EPOCHS DONE")
finally:
    print("SCRIPT FINALLY RAN", flush=True)
'''


def doctor(tmp_path, args, timeout=240):
    script = tmp_path / "long_epoch.py"
    script.write_text(LONG_EPOCH)
    return subprocess.run([sys.executable, "-m", "stoke.doctor"] + args[:-1] +
                          [str(script), args[-1]], cwd=tmp_path,
                          env=python_env(), capture_output=True, text=True,
                          timeout=timeout)


def steady(text):
    m = re.search(r"steady state over part of an epoch \((\d+) steps", text)
    assert m, text
    return int(m[1])


def test_steps_busy(tmp_path):
    r = doctor(tmp_path, ["--steps", "30", "busy"])
    assert r.returncode == 0, r.stderr
    assert "SCRIPT FINALLY RAN" in r.stdout       # unwound, not killed
    assert "ALL EPOCHS DONE" not in r.stdout
    assert "30 steps measured after the warm-up; ending the script" in \
        r.stderr
    assert steady(r.stderr) == 30
    assert "verdict: busy" in r.stderr, r.stderr
    doc = json.loads((tmp_path / "stoke-doctor" / "loader-1.json")
                     .read_text())
    assert doc["schema_version"] == 1
    assert doc["summary"]["steps"] == 30
    assert doc["summary"]["partial_epoch"] is True
    assert doc["summary"]["samples_per_s"] > 0
    assert doc["diagnosis"]["verdict"] == "busy"


def test_steps_starving(tmp_path):
    r = doctor(tmp_path, ["--steps", "30", "starving"])
    assert r.returncode == 0, r.stderr
    assert "SCRIPT FINALLY RAN" in r.stdout
    assert steady(r.stderr) == 30
    assert "verdict: starving" in r.stderr, r.stderr


def test_seconds_with_every(tmp_path):
    r = doctor(tmp_path, ["--seconds", "1", "--every", "1", "busy"])
    assert r.returncode == 0, r.stderr
    assert "SCRIPT FINALLY RAN" in r.stdout
    # A second of 20 ms steps: tens of steps, never zero.
    assert steady(r.stderr) >= 5
    assert "verdict: busy" in r.stderr
    # One-line summaries while it ran (the warm-up alone lasts 5 s).
    lines = re.findall(r"^stoke doctor \[\d+ s\] loader 1: .*$", r.stderr,
                       re.M)
    assert lines, r.stderr
    assert all("warming up" in ln or "verdict" in ln for ln in lines)


def test_sigterm_prints_what_was_measured(tmp_path):
    script = tmp_path / "long_epoch.py"
    script.write_text(LONG_EPOCH)
    p = subprocess.Popen([sys.executable, "-m", "stoke.doctor", "--every",
                          "0.5", str(script), "busy"], cwd=tmp_path,
                         env=python_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    # Wait (a hang guard, not a timing) until some steps are measured.
    deadline = time.monotonic() + 180
    seen = []
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        seen.append(line)
        if re.search(r"loader 1: \d+ steps, waiting", line):
            break
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    err = "".join(seen) + err
    assert p.returncode == 128 + signal.SIGTERM, err
    assert "SCRIPT FINALLY RAN" in out
    assert steady(err) > 0
    assert "verdict: busy" in err


def test_usage_errors(tmp_path):
    for args in (["--steps"], ["--steps", "0", "x.py"],
                 ["--steps", "ten", "x.py"], ["--bogus", "1", "x.py"],
                 ["--every", "1"]):
        r = subprocess.run([sys.executable, "-m", "stoke.doctor"] + args,
                           cwd=tmp_path, env=python_env(),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.startswith("stoke doctor: "), r.stderr


def test_twoclock_partial_epoch_and_explicit_warmup():
    """In a TwoClock: not given, the warm-up ends mid-epoch (here after its
    10 steps, the time rule set to 0 through the C clock's own argument);
    an explicit warmup=1 keeps the whole first epoch out."""
    import stoke
    from stoke import _stoke
    c = _stoke.TwoClock(range(40), warmup_end_steps=10, warmup_end=0.0)
    for _ in c:
        pass
    assert c._summary()["steps"] == 30
    assert c._measured_steps() == 30
    t = stoke.TwoClock(range(40), warmup=1)
    for _ in t:
        pass
    assert t.stats()["steps"] == 0
    t = stoke.TwoClock(range(40), warmup_steps=5)   # explicit: epoch + 5
    for _ in range(2):
        for _ in t:
            pass
    assert t.stats()["steps"] == 35


def test_metrics_and_jsonl_from_python(tmp_path):
    """TwoClock and Loader write the same Prometheus text and JSON lines as
    the CLI (one writer in the library)."""
    import json as _json
    import stoke
    prom, lines = tmp_path / "t.prom", tmp_path / "t.jsonl"
    t = stoke.TwoClock(range(30), warmup=0, metrics_file=prom,
                       log_jsonl=lines, log_every=10, name="mine")
    for _ in t:
        pass
    del t
    text = prom.read_text()
    assert 'stoke_steps_total{rank="0",loader="mine"} 30' in text
    rows = [_json.loads(x) for x in lines.read_text().splitlines()]
    assert [r["kind"] for r in rows] == ["steps"] * 3 + ["epoch"]
    assert all(r["schema_version"] == 1 for r in rows)
    lp = tmp_path / "l.jsonl"
    loader = stoke.Loader(stoke.synthetic("tensor", samples=64, shape=(2,)),
                          8, warmup=0, log_jsonl=lp, log_every=4)
    for _ in loader:
        pass
    rows = [_json.loads(x) for x in lp.read_text().splitlines()]
    assert [r["kind"] for r in rows] == ["steps", "steps", "epoch"]
    assert rows[-1]["batches"] == 8 and rows[0]["loader"] == "stoke.Loader"
