"""Seed 000's and seed 002's scripts, unchanged but for one import:
torch's DataLoader replaced by stoke's.  They must run and print what they
print with torch (their timings are theirs to print, not ours to judge).

seeds/starving_or_busy.py is seed 000's script; seeds/
dataloader_performance.py is seed 002's snippets in the article's order
(see its header for the few left out)."""

import pathlib
import re
import subprocess
import sys

from conftest import python_env

SEEDS = pathlib.Path(__file__).parent / "seeds"
TORCH_IMPORT = "from torch.utils.data import Dataset, DataLoader\n"
STOKE_IMPORT = ("from torch.utils.data import Dataset\n"
                "from stoke import DataLoader\n")


def with_stoke(path, tmp_path):
    src = path.read_text()
    assert src.count(TORCH_IMPORT) == 1, "the script's import changed"
    out = tmp_path / path.name
    out.write_text(src.replace(TORCH_IMPORT, STOKE_IMPORT))
    return out


def run(script, tmp_path, timeout):
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path,
                       env=python_env(), capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr[-4000:]
    return r.stdout


def test_seed000_with_stoke_dataloader(tmp_path):
    out = run(with_stoke(SEEDS / "starving_or_busy.py", tmp_path), tmp_path,
              300)
    lines = re.findall(r"num_workers=(\d+): epoch ([\d.]+) s \(waiting "
                       r"([\d.]+) s, computing ([\d.]+) s\)", out)
    assert [w for w, *_ in lines] == ["0", "4"], out
    for _, epoch, wait, comp in lines:
        assert abs(float(epoch) - float(wait) - float(comp)) < 0.015


def test_seed002_with_stoke_dataloader(tmp_path):
    out = run(with_stoke(SEEDS / "dataloader_performance.py", tmp_path),
              tmp_path, 580)
    # The worker sweep, the prefetch and batch-size sweeps.
    workers = re.findall(r"^workers=(\d+) +batches/s=[\d.]+ examples/s=\d+$",
                         out, re.M)
    assert workers == ["0", "1", "2", "4", "8"], out
    # ShardedRange at 4 workers: 100 values, 100 distinct.
    assert re.search(r"^100\n100$", out, re.M), out
    # The batch inspector and the configuration reporter.
    assert "batch[0] shape= (64, 1024) dtype= torch.float32" in out
    assert "batch[1] shape= (64,) dtype= torch.int64" in out
    assert re.search(r"^num_workers +4$", out, re.M)
    assert re.search(r"^prefetch_factor +2$", out, re.M)
    assert re.search(r"^persistent_workers +False$", out, re.M)
    # tune_num_workers: one result per worker count.
    assert len(re.findall(r"^\{'num_workers': \d+, 'seconds'", out,
                          re.M)) == 5
    assert "mean:" in out and "p95:" in out and "MiB" in out
