"""stoke.DataLoader(worker_type="process"): what thread mode has besides
the batches, on worker processes: the memory ledger (memory(): the shared
slots counted once, each worker process's own memory beside them), the
workers' tracks in the Chrome trace (save_trace), and num_workers="auto".

Short (a few hundred samples at most) and never timed: the assertions are
on counts, names and sums, which no load on the machine changes."""

import gc
import json
import os

import pytest
import torch
from torch.utils.data import Dataset

import stoke


class Big(Dataset):
    """Samples of 64 KiB (a row each in the workers' arenas) that name the
    process that made them."""

    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.full((16384,), float(i)), os.getpid()


@pytest.fixture(autouse=True)
def collected():
    gc.collect()
    yield
    gc.collect()


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def test_memory_ledger_counts_the_slots_once_and_each_worker():
    dl = stoke.DataLoader(Big(), batch_size=8, num_workers=2,
                          worker_type="process", persistent_workers=True)
    it = iter(dl)
    makers = set()
    for _ in range(4):
        _, pids = next(it)
        makers |= set(pids.tolist())
    m = dl.memory()
    assert m["workers_alive"]
    workers = m["workers"]
    assert sorted(w["id"] for w in workers) == [0, 1]
    pids = {w["pid"] for w in workers}
    assert len(pids) == 2 and os.getpid() not in pids
    assert makers <= pids                  # the processes that made samples
    assert all(w["own_bytes"] > 0 for w in workers)
    shared = m["shared"]
    assert set(shared) == {"ring", "arenas", "stage_block"}
    assert shared["arenas"] >= 16384 * 4   # at least one row of one arena
    assert shared["ring"] > 0 and shared["stage_block"] > 0
    assert m["shared_bytes"] == sum(shared.values())
    assert m["total_bytes"] == m["shared_bytes"] + m["main_bytes"] + \
        sum(w["own_bytes"] for w in workers)
    # Each process's RSS, added up, counts torch's pages (shared with the
    # workers since fork) once per process: the ledger counts them once.
    naive = rss(os.getpid()) + sum(rss(p) for p in pids)
    assert m["total_bytes"] < naive
    text = dl.report()
    assert "counted once" in text and "2 worker processes' own" in text
    dl.close()


def test_memory_ledger_keeps_the_workers_as_they_stopped():
    dl = stoke.DataLoader(Big(), batch_size=8, num_workers=2,
                          worker_type="process")
    assert sum(1 for _ in dl) == 8
    m = dl.memory()     # the epoch ended: its workers are gone
    assert not m["workers_alive"]
    assert sorted(w["id"] for w in m["workers"]) == [0, 1]
    assert m["shared"]["arenas"] > 0


def test_memory_in_thread_mode_is_one_process():
    dl = stoke.DataLoader(Big(), batch_size=8, num_workers=2)
    assert sum(1 for _ in dl) == 8
    m = dl.memory()
    assert m["workers"] == [] and m["shared_bytes"] == 0
    assert m["total_bytes"] == m["main_bytes"] > 0
    dl.close()
