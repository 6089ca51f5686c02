"""train_epochs= and deadline= (seed 003's nightly window): diagnose(),
report() and save_json() of stoke.Loader, stoke.DataLoader and TwoClock
say whether N epochs fit, as `stoke profile --train-epochs N --deadline`.

Nothing here is timed tightly: every epoch sleeps at least a known time,
so a one-hour window fits ten of them and 50 ms cannot hold a hundred,
even at the end of the error bars (at most 90% for measured epochs, the
truth grid's what-if error for the knee)."""

import json
import time

import pytest
import torch
from torch.utils.data import Dataset

import stoke


def run(loader, epochs=3):
    for _ in range(epochs):
        for _batch in loader:
            pass


def check_deadline(dl, epochs, window_s, verdict, knee=True):
    assert dl["train_epochs"] == epochs
    assert dl["deadline_s"] == pytest.approx(window_s)
    rows = ["now", "knee"] if knee else ["now"]
    assert sorted(k for k in ("now", "knee") if k in dl) == sorted(rows)
    for name in rows:
        row = dl[name]
        assert row["epoch_s"] > 0
        assert row["total_s"] == pytest.approx(epochs * row["epoch_s"],
                                               rel=1e-6)
        assert row["low_s"] <= row["total_s"] <= row["high_s"]
        assert 0 < row["error"] < 1
        assert row["verdict"] == verdict, (name, row)
        assert row["epochs_in_window"] == pytest.approx(
            window_s / row["epoch_s"], rel=1e-6)


def test_loader_deadline_in_diagnose_report_and_json(tmp_path):
    # 64 samples of 2 ms inline: an epoch takes at least 128 ms.
    src = stoke.synthetic("sleep:2ms", samples=64, shape=(4,))
    loader = stoke.Loader(src, 8, num_workers=0, warmup=1)
    run(loader)
    assert "deadline" not in loader.diagnose()
    d = loader.diagnose(train_epochs=10, deadline="1h")
    check_deadline(d["deadline"], 10, 3600, "fits")
    assert d["deadline"]["now"]["workers"] == 0
    # The epoch's clock starts at its first next(), a moment after the first
    # sample began (CI read 0.1279 s): a margin below 64 x 2 ms.
    assert d["deadline"]["now"]["epoch_s"] >= 0.12
    # A number is seconds; 100 epochs of >= 128 ms (>= 8 ms at 16 workers)
    # cannot fit in 50 ms.
    d = loader.diagnose(train_epochs=100, deadline=0.05)
    check_deadline(d["deadline"], 100, 0.05, "misses")
    text = loader.report(train_epochs=10, deadline="8h")
    assert "deadline: 10 epochs in 8.00 h" in text
    # The rows speak Python (num_workers=, not the CLI's -j).
    assert "now  num_workers=0" in text and "knee num_workers=" in text
    assert "fits" in text
    assert "deadline:" not in loader.report()
    path = tmp_path / "run.json"
    loader.save_json(path, train_epochs=10, deadline="90min")
    doc = json.loads(path.read_text())
    check_deadline(doc["diagnosis"]["deadline"], 10, 5400, "fits")


def test_deadline_arguments_are_checked():
    src = stoke.synthetic("sleep:1ms", samples=16, shape=(4,))
    loader = stoke.Loader(src, 4, num_workers=0, warmup=0)
    run(loader, 1)
    with pytest.raises(ValueError, match="go together"):
        loader.diagnose(train_epochs=3)
    with pytest.raises(ValueError, match="go together"):
        loader.report(deadline="8h")
    with pytest.raises(ValueError, match="deadline"):
        loader.diagnose(train_epochs=3, deadline="8 parsecs")
    with pytest.raises(ValueError, match="deadline"):
        loader.diagnose(train_epochs=3, deadline=0)
    with pytest.raises(ValueError, match="train_epochs"):
        loader.diagnose(train_epochs=0, deadline="8h")
    with pytest.raises(TypeError):  # keywords only
        loader.diagnose(0, None, 3, "8h")


class Sleeper(Dataset):
    """I/O-like: waits 2 ms with the GIL released."""

    def __len__(self):
        return 32

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.zeros(4), i


def test_dataloader_deadline():
    loader = stoke.DataLoader(Sleeper(), batch_size=8, num_workers=2)
    run(loader, 2)
    d = loader.diagnose(train_epochs=5, deadline="2h")
    check_deadline(d["deadline"], 5, 7200, "fits")
    assert d["deadline"]["now"]["workers"] == 2
    text = loader.report(train_epochs=5, deadline=7200)
    assert "deadline: 5 epochs in 2.00 h" in text


def slow_gen(n, wait_s):
    for _ in range(n):
        time.sleep(wait_s)
        yield torch.zeros(8, 3)


class Regen:
    def __iter__(self):
        return slow_gen(6, 0.01)


def test_twoclock_deadline_from_the_measured_epochs():
    # A TwoClock has no model: the measured epochs only, no knee.
    clock = stoke.TwoClock(Regen(), warmup=1)
    run(clock, 3)
    d = clock.diagnose(train_epochs=10, deadline="1h")
    check_deadline(d["deadline"], 10, 3600, "fits", knee=False)
    assert d["deadline"]["now"]["epoch_s"] >= 0.055  # 6 x 10 ms, a margin
    assert "deadline" not in clock.diagnose()
    # 1000 epochs of >= 55 ms are >= 55 s, >= 5.5 s at the -90% end.
    d = clock.diagnose(train_epochs=1000, deadline="5s")
    check_deadline(d["deadline"], 1000, 5, "misses", knee=False)
    text = clock.report(train_epochs=10, deadline="1h")
    assert "deadline: 10 epochs in 1.00 h" in text
    assert "measured epochs" in text and "knee" not in text.split(
        "deadline:")[1]
    with pytest.raises(ValueError, match="go together"):
        clock.diagnose(deadline="1h")
