"""worker_policy from Python: the worker threads run under SCHED_BATCH by
default (so that a worker woken to refill a slot never takes the training
thread's core), "normal" keeps the OS default, and the thread that runs the
loop is never changed.  The policy is read inside the dataset's
__getitem__, on the thread that makes the sample (os.sched_getscheduler(0)
is the calling thread's on Linux)."""

import os
import threading

import pytest
from torch.utils.data import Dataset

import stoke


class PolicySeen(Dataset):
    """Records the scheduling policy of every thread that makes a sample."""

    def __init__(self, n=64):
        self.n = n
        self.seen = {}
        self.lock = threading.Lock()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        with self.lock:
            self.seen[threading.get_ident()] = os.sched_getscheduler(0)
        return i


def test_dataloader_workers_run_under_sched_batch():
    ds = PolicySeen()
    main = os.sched_getscheduler(0)
    loader = stoke.DataLoader(ds, batch_size=8, num_workers=3)
    got = [int(x) for batch in loader for x in batch]
    assert sorted(got) == list(range(64))
    assert ds.seen, "no sample was made"
    assert threading.get_ident() not in ds.seen, "the loop's thread filled"
    assert set(ds.seen.values()) == {os.SCHED_BATCH}, ds.seen
    assert os.sched_getscheduler(0) == main == os.SCHED_OTHER
    st = loader.stats()
    assert st["worker_policy"] == "batch"
    assert len(ds.seen) <= st["workers_policy_applied"] <= 3


def test_dataloader_policy_normal():
    ds = PolicySeen()
    loader = stoke.DataLoader(ds, batch_size=8, num_workers=2,
                              worker_policy="normal")
    assert len([b for b in loader]) == 8
    assert set(ds.seen.values()) == {os.SCHED_OTHER}, ds.seen
    assert loader.stats()["worker_policy"] == "normal"
    with pytest.raises(ValueError, match="worker_policy"):
        stoke.DataLoader(ds, batch_size=8, worker_policy="idle")


def test_loader_policy_normal_and_stats():
    for policy, want in (("batch", "batch"), ("normal", "normal")):
        loader = stoke.Loader(stoke.synthetic("sleep:100us", samples=64),
                              batch_size=8, num_workers=2,
                              worker_policy=policy, output="numpy")
        n = sum(len(b[0]) for b in loader)
        assert n == 64
        st = loader.stats()
        assert st["worker_policy"] == want
        assert 1 <= st["workers_policy_applied"] <= 2


def test_num_workers_0_fills_in_the_callers_thread():
    ds = PolicySeen(16)
    loader = stoke.DataLoader(ds, batch_size=4, num_workers=0)
    assert len([b for b in loader]) == 4
    assert set(ds.seen) == {threading.get_ident()}
    assert set(ds.seen.values()) == {os.SCHED_OTHER}


def test_bad_policy_is_refused():
    with pytest.raises(ValueError, match="worker_policy"):
        stoke.Loader(stoke.synthetic("sleep:1ms", samples=8), batch_size=4,
                     worker_policy="fifo")
