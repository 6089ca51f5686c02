"""The seed texts' experiments, as acceptance tests of the Python module.

seeds/starving_or_busy.py is seed 000's script as the seed shows it."""

import pathlib
import re
import subprocess
import sys

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import stoke

from conftest import python_env

SEED000 = pathlib.Path(__file__).parent / "seeds" / "starving_or_busy.py"

SPLIT = re.compile(r"num_workers=(\d+): epoch ([\d.]+) s \(waiting ([\d.]+) s, "
                   r"computing ([\d.]+) s\)")


def script_splits(stdout):
    return {int(m[1]): (float(m[3]), float(m[4]))
            for m in SPLIT.finditer(stdout)}


def agree(a, b):
    """Two measurements of one epoch's clock, within noise: the doctor's
    clock and the script's perf_counter marks bracket slightly different
    code (a few Python lines per step)."""
    return abs(a - b) <= 0.1 * max(a, b) + 0.02


def run(args, cwd):
    return subprocess.run([sys.executable] + args, cwd=cwd, env=python_env(),
                          capture_output=True, text=True, timeout=300)


def doctor_epochs(section):
    """The doctor's measured epochs of one loader: (waiting s, computing s)."""
    rows = re.findall(r"^\s+\d+\s{10,}[\d.]+\s+([\d.]+)\s+([\d.]+)", section,
                      re.M)
    return [(float(w), float(c)) for w, c in rows]


def test_seed000_under_the_doctor(tmp_path):
    r = run(["-m", "stoke.doctor", str(SEED000)], tmp_path)
    assert r.returncode == 0, r.stderr
    own = script_splits(r.stdout)
    assert set(own) == {0, 4}
    report = r.stderr
    sections = report.split("== loader ")[1:]
    assert len(sections) == 2
    w0, w4 = sections
    assert "num_workers=0" in w0 and "num_workers=4" in w4
    assert "verdict: starving" in w0
    assert "with 0 workers every batch is produced inside next()" in w0
    # The split the doctor measured for the measured epoch agrees with the
    # one the script printed for it.
    (wait, comp), = doctor_epochs(w0)
    assert agree(wait, own[0][0]) and agree(comp, own[0][1]), (wait, comp,
                                                                own[0])
    (wait4, comp4), = doctor_epochs(w4)
    assert agree(wait4, own[4][0]) and agree(comp4, own[4][1])
    # Seed 000: four workers still wait most of the step: more parallelism.
    assert "verdict: starving" in w4
    assert "more workers" in w0 and "num_workers=" in w0
    html = tmp_path / "stoke-doctor" / "report.html"
    assert html.exists() and "starving" in html.read_text()
    assert (tmp_path / "stoke-doctor" / "loader-2.json").exists()


def test_seed000_with_twoclock_around_its_loader(tmp_path):
    src = SEED000.read_text()
    wrapped = src.replace(
        "        loader = DataLoader(SlowDataset(), batch_size=32, "
        "num_workers=workers,\n"
        "                            persistent_workers=workers > 0)\n",
        "        loader = stoke.TwoClock(DataLoader(SlowDataset(), "
        "batch_size=32, num_workers=workers,\n"
        "                            persistent_workers=workers > 0))\n")
    assert wrapped != src
    wrapped = "import stoke\n" + wrapped + (
        "        print(f'twoclock {workers} {loader.verdict} '\n"
        "              f'{loader.stats()[\"wait_s\"]:.4f} '\n"
        "              f'{loader.stats()[\"compute_s\"]:.4f}')\n")
    script = tmp_path / "wrapped.py"
    script.write_text(wrapped)
    r = run([str(script)], tmp_path)
    assert r.returncode == 0, r.stderr
    own = script_splits(r.stdout)
    clocks = {int(m[1]): (m[2], float(m[3]), float(m[4])) for m in
              re.finditer(r"twoclock (\d) (\w+) ([\d.]+) ([\d.]+)", r.stdout)}
    assert clocks[0][0] == "starving"
    for w in (0, 4):
        assert agree(clocks[w][1], own[w][0]) and agree(clocks[w][2],
                                                        own[w][1])


def test_seed003_same_batches_as_torch():
    features = torch.randn(4096, 32)
    targets = torch.randint(0, 2, (4096,))
    ref = DataLoader(TensorDataset(features, targets), batch_size=256,
                     shuffle=False)
    ours = stoke.Loader((features, targets), batch_size=256, num_workers=2)
    assert len(ours) == len(ref) == 16
    n = 0
    for (x, y), (rx, ry) in zip(ours, ref):
        assert x.dtype == rx.dtype and y.dtype == ry.dtype
        assert torch.equal(x, rx) and torch.equal(y, ry)   # bit for bit
        n += 1
    assert n == 16


def test_image_training_loop(image_folder):
    torch.manual_seed(0)
    loader = stoke.Loader(str(image_folder), batch_size=8, shuffle=True,
                          num_workers=2, warmup=1, output="torch",
                          transform="random-resized-crop=24,flip,"
                                    "normalize=imagenet,chw,f32")
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 24 * 24, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    for _ in range(12):
        total = 0.0
        for x, y in loader:
            assert x.shape[1:] == (3, 24, 24) and x.dtype == torch.float32
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            total += loss.item() * len(y)
        losses.append(total / 24)
    assert losses[-1] < 0.5 * losses[0], losses
    text = loader.report()
    assert re.search(r"verdict: (busy|starving|variance)", text)
    assert loader.diagnose()["verdict"] in ("busy", "starving", "variance")
