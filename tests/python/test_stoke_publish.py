"""The live view from Python: with STOKE_PUBLISH=1 stoke.Loader,
stoke.DataLoader and stoke.TwoClock publish their snapshots through the C
library while they live (`stoke top` reads them), and remove them when they
go; without it, nothing is written."""

import gc
import os
import subprocess

import pytest
import torch

import stoke

from conftest import cli_path


@pytest.fixture
def live(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    monkeypatch.setenv("STOKE_PUBLISH", "1")
    return run / "stoke"


def files(folder):
    return sorted(p.name for p in folder.glob("*.live")) if folder.exists() else []


def top_once():
    out = subprocess.run([cli_path(), "top", "--once"], capture_output=True,
                         text=True, timeout=60, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_loader_publishes_while_open(live):
    loader = stoke.Loader(stoke.synthetic("tensor", samples=64, shape=(4,)), 8,
                          num_workers=1)
    for _ in loader:
        pass
    assert files(live) == [f"{os.getpid()}-0.live"]
    assert (live.stat().st_mode & 0o777) == 0o700
    assert ((live / files(live)[0]).stat().st_mode & 0o777) == 0o600
    listed = top_once()
    assert f"{os.getpid()}   0 loader" in listed, listed
    loader.close()
    assert files(live) == []


def test_dataloader_and_twoclock_publish(live):
    class Squares(torch.utils.data.Dataset):
        def __len__(self):
            return 32

        def __getitem__(self, i):
            return torch.tensor([i * i])

    dl = stoke.DataLoader(Squares(), batch_size=4, num_workers=1)
    assert sum(len(b) for b in dl) == 32
    tc = stoke.TwoClock([1, 2, 3])
    assert list(tc) == [1, 2, 3]
    assert len(files(live)) == 2, files(live)
    listed = top_once()
    assert "twoclock" in listed and "loader" in listed, listed
    dl.close()
    del tc
    gc.collect()
    assert files(live) == []


def test_nothing_without_stoke_publish(live, monkeypatch):
    monkeypatch.delenv("STOKE_PUBLISH")
    loader = stoke.Loader(stoke.synthetic("tensor", samples=16, shape=(4,)), 8,
                          num_workers=1)
    list(loader)
    tc = stoke.TwoClock([1])
    list(tc)
    assert files(live) == []
    loader.close()
    del tc
