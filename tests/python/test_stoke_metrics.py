"""metrics_file= and log_jsonl= on stoke.DataLoader as on stoke.Loader:
Prometheus text that promtool accepts, JSON lines that match
docs/metrics.md's schema (one per log_every steps and per epoch, numbered
by their steps), labelled with the loader's name; bad values named before
anything runs.  No timed assertion: the files are read once the epoch (or
the loader) is over, when they are whole."""

import gc
import json
import shutil
import subprocess

import pytest
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

import stoke

COMMON = {"schema_version", "kind", "time", "rank", "loader", "epoch"}
STEPS_KEYS = COMMON | {"step", "steps", "samples", "wait_s", "compute_s",
                       "wait_ratio", "queue_empty_frac", "wait_p50_ms",
                       "wait_p95_ms", "step_p50_ms", "step_p95_ms",
                       "workers"}
EPOCH_KEYS = COMMON | {"warmup", "warmup_ended", "seconds", "wait_s",
                       "compute_s", "batches", "samples"}


class Squares(Dataset):
    def __len__(self):
        return 48

    def __getitem__(self, i):
        return torch.tensor([float(i * i)]), i


@pytest.fixture(autouse=True)
def no_other_loaders():
    gc.collect()
    yield
    gc.collect()


def check_schema(path, loader, every, epochs, batches):
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    for r in rows:
        assert r["schema_version"] == 1
        want = STEPS_KEYS if r["kind"] == "steps" else EPOCH_KEYS
        assert set(r) == want, sorted(set(r) ^ want)
        assert r["loader"] == loader and r["rank"] == 0
    kinds = [r["kind"] for r in rows]
    assert kinds.count("epoch") == epochs, kinds
    steps = [r["step"] for r in rows if r["kind"] == "steps"]
    assert steps == list(range(every, epochs * batches + 1, every)), steps
    # Each epoch's line comes after its steps' lines, before the next's.
    ends = [i for i, r in enumerate(rows) if r["kind"] == "epoch"]
    for n, i in enumerate(ends):
        assert rows[i]["batches"] == batches
        cut = (n + 1) * batches
        assert all(r["step"] <= cut for r in rows[:i] if r["kind"] == "steps")
        assert all(r["step"] > cut for r in rows[i:] if r["kind"] == "steps")
    return rows


def check_metrics(path, loader):
    text = path.read_text()
    assert f'stoke_steps_total{{rank="0",loader="{loader}"}}' in text
    assert (f'stoke_step_seconds{{rank="0",loader="{loader}",'
            f'quantile="0.95"}}') in text
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool missing (Debian's prometheus package)")
    r = subprocess.run([promtool, "check", "metrics"], input=text,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_dataloader_metrics_and_jsonl(tmp_path):
    prom, lines = tmp_path / "d.prom", tmp_path / "d.jsonl"
    dl = stoke.DataLoader(Squares(), batch_size=4, num_workers=2,
                          metrics_file=prom, metrics_every=0.5,
                          log_jsonl=lines, log_every=5)
    assert dl.metrics_file == prom and dl.log_every == 5
    for _ in range(2):
        n = sum(1 for _ in dl)
        assert n == 12
    # Whole once the epoch is over, before the loader goes.
    check_schema(lines, "stoke.DataLoader", 5, 2, 12)
    dl.close()
    check_metrics(prom, "stoke.DataLoader")
    assert 'stoke_epochs_total{rank="0",loader="stoke.DataLoader"} 2' in \
        prom.read_text()
    assert not [p for p in tmp_path.iterdir() if ".tmp." in p.name]


def test_loader_metrics_and_jsonl(tmp_path):
    prom, lines = tmp_path / "l.prom", tmp_path / "l.jsonl"
    loader = stoke.Loader(stoke.synthetic("tensor", samples=64, shape=(2,)),
                          8, num_workers=2, metrics_file=prom,
                          log_jsonl=lines, log_every=3)
    for _ in range(3):
        for _ in loader:
            pass
    check_schema(lines, "stoke.Loader", 3, 3, 8)
    del loader
    gc.collect()
    check_metrics(prom, "stoke.Loader")


def test_dataloader_without_them_writes_nothing(tmp_path):
    dl = stoke.DataLoader(Squares(), batch_size=8)
    assert sum(1 for _ in dl) == 6
    assert dl.metrics_file is None and dl.log_jsonl is None
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kw, word", [
    ({"metrics_every": 0}, "metrics_every"),
    ({"metrics_every": -1.0}, "metrics_every"),
    ({"metrics_every": "10s"}, "metrics_every"),
    ({"log_every": 0}, "log_every"),
    ({"log_every": 2.5}, "log_every"),
    ({"log_every": True}, "log_every"),
    ({"log_jsonl": ""}, "log_jsonl"),
])
def test_dataloader_bad_values_are_named(kw, word):
    with pytest.raises(ValueError, match=word):
        stoke.DataLoader(Squares(), batch_size=4, **kw)


def test_dataloader_bad_path_types_are_named():
    with pytest.raises(TypeError, match="metrics_file"):
        stoke.DataLoader(Squares(), batch_size=4, metrics_file=3)


def test_dataloader_unwritable_path_fails_at_first_iter(tmp_path):
    dl = stoke.DataLoader(Squares(), batch_size=4,
                          log_jsonl=tmp_path / "no" / "such" / "x.jsonl")
    with pytest.raises(Exception, match="x.jsonl"):
        next(iter(dl))


class Stream(IterableDataset):
    """48 items, shared out by worker id: 12 batches of 4 at any W."""

    def __iter__(self):
        info = get_worker_info()
        w, n = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(w, 48, n):
            yield torch.tensor([float(i * i)]), i


@pytest.mark.parametrize("dataset", [Squares, Stream])
def test_dataloader_process_workers_write_them(tmp_path, dataset):
    # Process mode: the same files, from the consumer's clock and the
    # workers' stage block (the TwoClock's writers), labelled as thread
    # mode's; the last metrics written when the loader closes.
    prom, lines = tmp_path / "p.prom", tmp_path / "p.jsonl"
    dl = stoke.DataLoader(dataset(), batch_size=4, num_workers=2,
                          worker_type="process", metrics_file=prom,
                          metrics_every=0.5, log_jsonl=lines, log_every=5)
    for _ in range(2):
        assert sum(1 for _ in dl) == 12
    check_schema(lines, "stoke.DataLoader", 5, 2, 12)
    assert {json.loads(x)["workers"] for x in lines.read_text().splitlines()
            if json.loads(x)["kind"] == "steps"} == {2}
    dl.close()
    gc.collect()
    check_metrics(prom, "stoke.DataLoader")
    assert 'stoke_epochs_total{rank="0",loader="stoke.DataLoader"} 2' in \
        prom.read_text()
    assert not [p for p in tmp_path.iterdir() if ".tmp." in p.name]


def test_dataloader_process_close_stops_its_iteration(tmp_path):
    dl = stoke.DataLoader(Squares(), batch_size=4, num_workers=2,
                          worker_type="process", persistent_workers=True,
                          log_jsonl=tmp_path / "c.jsonl")
    it = iter(dl)
    next(it)
    dl.close()
    with pytest.raises(RuntimeError, match="closed"):
        next(it)
    assert sum(1 for _ in dl) == 12   # a new iteration, new workers


def test_dataloader_process_unwritable_path_fails_at_first_iter(tmp_path):
    dl = stoke.DataLoader(Squares(), batch_size=4, num_workers=2,
                          worker_type="process",
                          log_jsonl=tmp_path / "no" / "such" / "x.jsonl")
    with pytest.raises(Exception, match="x.jsonl"):
        next(iter(dl))
