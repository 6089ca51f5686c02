"""stoke.DataLoader(worker_type="process"): workers claim chunks of
consecutive samples (python/stoke/_procs.py, _CHUNK_NS) and send a chunk's
results in one message.

What must not change with it: every sample made exactly once, the same
batches in the same order as torch's DataLoader for any W (and over
persistent workers' epochs), a sample that raises in the middle of a
chunk failing its batch alone (torch's next batch follows), a worker
killed while it holds a chunk named with its pid, the signal and the
sample, with nothing left in /dev/shm; and the C
per-sample seed (seed_mix) and the reseeder equal to their Python
definitions.

No timed assertion: the only timeouts are hang guards."""

import multiprocessing as mp
import os
import random
import signal

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset
from torch.utils.data import DataLoader as TorchDataLoader

import stoke
from stoke import _procs, _stoke


class Counted(Dataset):
    """Cheap samples (so that chunks are long), each call counted in shared
    memory (fork: the workers share the array); sample `bad` raises,
    sample `kill` SIGKILLs its worker."""

    def __init__(self, n, bad=-1, kill=-1):
        self.n, self.bad, self.kill = n, bad, kill
        self.calls = mp.get_context("fork").Array("i", n, lock=False)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.calls[i] += 1
        if i == self.kill:
            os.kill(os.getpid(), signal.SIGKILL)
        if i == self.bad:
            raise ValueError(f"sample {i} is bad")
        return torch.tensor([float(i)]), i


def epoch(loader):
    """Each batch's labels, or the error's class name, torch's way: the
    iteration goes on after a failing batch."""
    out, it = [], iter(loader)
    while True:
        try:
            b = next(it)
        except StopIteration:
            return out
        except ValueError as e:
            out.append(type(e).__name__ + ":" + str(e))
            continue
        out.append(b[1].tolist())


def ours():
    try:
        return sorted(os.listdir("/dev/shm"))
    except FileNotFoundError:
        return []


@pytest.fixture
def long_chunks(monkeypatch):
    """Chunks of up to 64 samples whatever a sample costs here."""
    monkeypatch.setattr(_procs, "_CHUNK_NS", 10 ** 9)
    monkeypatch.setattr(_procs, "_CHUNK_MAX", 64)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_chunks_keep_order_and_exactly_once(long_chunks, workers):
    ds = Counted(1000)
    loader = stoke.DataLoader(ds, batch_size=7, num_workers=workers,
                              worker_type="process")
    it = iter(loader)
    got = epoch(it)
    want = epoch(TorchDataLoader(Counted(1000), batch_size=7))
    assert got == want
    assert list(ds.calls) == [1] * 1000
    # the samples came back in fewer messages than samples: chunks
    assert sum(it._pool._taken) < 1000 // 2


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_a_sample_that_raises_mid_chunk_fails_its_batch_alone(long_chunks,
                                                              workers):
    ds = Counted(300, bad=101)
    got = epoch(stoke.DataLoader(ds, batch_size=8, num_workers=workers,
                                 worker_type="process", shuffle=True,
                                 generator=torch.Generator().manual_seed(3)))
    want = epoch(TorchDataLoader(Counted(300, bad=101), batch_size=8,
                                 num_workers=workers, shuffle=True,
                                 generator=torch.Generator().manual_seed(3)))
    errors = [b for b in got if isinstance(b, str)]
    assert len(errors) == 1 and "sample 101 is bad" in errors[0]
    assert [b for b in got if not isinstance(b, str)] == \
        [b for b in want if not isinstance(b, str)]
    assert list(ds.calls) == [1] * 300   # the others of its chunk are made


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_chunks_with_persistent_workers(long_chunks, workers):
    kw = dict(batch_size=5, num_workers=workers, worker_type="process",
              persistent_workers=True, shuffle=True,
              generator=torch.Generator().manual_seed(11))
    ds = Counted(200)
    loader = stoke.DataLoader(ds, **kw)
    whole = [epoch(loader) for _ in range(2)]
    assert list(ds.calls) == [2] * 200
    assert whole[0] != whole[1] and sorted(sum(whole[0], [])) == \
        list(range(200))
    # The same loader again from the same seed: the same two epochs.
    again = stoke.DataLoader(Counted(200), **dict(
        kw, generator=torch.Generator().manual_seed(11)))
    assert [epoch(again) for _ in range(2)] == whole


@pytest.mark.parametrize("workers", [1, 2])
def test_a_worker_killed_holding_a_chunk(long_chunks, workers):
    before = ours()
    loader = stoke.DataLoader(Counted(600, kill=333), batch_size=16,
                              num_workers=workers, worker_type="process")
    seen = []
    with pytest.raises(RuntimeError) as e:
        for b in loader:
            seen += b[1].tolist()
    text = str(e.value)
    assert "DataLoader worker (pid " in text and "SIGKILL" in text
    assert "dataset[333]" in text
    assert 333 not in seen and len(seen) < 600
    pid = int(text.split("(pid ")[1].split(")")[0])
    new = set(ours()) - set(before)
    assert not any(str(pid) in n or str(os.getpid()) in n for n in new)


def test_seed_mix_is_mix():
    rng = random.Random(5)
    for _ in range(2000):
        words = [rng.getrandbits(63), rng.randrange(1000),
                 rng.getrandbits(62) | (rng.random() < 0.1) << 40]
        assert _stoke.seed_mix(*words) == _procs._mix(*words)
    assert _stoke.seed_mix(-1, 2 ** 80 + 7) == _procs._mix(-1, 2 ** 80 + 7)
    assert _stoke.seed_mix() == _procs._mix()
    with pytest.raises(TypeError):
        _stoke.seed_mix(1.5)


def test_the_reseeder_draws_as_reseed():
    fast = _procs._reseeder()
    for seed in (0, 1, 2 ** 62 + 12345, _procs._mix(9, 1, 4)):
        random.gauss(0, 1)      # a cached normal variate is dropped too
        _procs._reseed(seed)
        a = (random.random(), random.gauss(0, 1), torch.rand(2).tolist(),
             np.random.rand())
        random.gauss(0, 1)
        fast(seed)
        b = (random.random(), random.gauss(0, 1), torch.rand(2).tolist(),
             np.random.rand())
        assert a == b


def test_sem_take_and_post():
    sem = mp.get_context("fork").Semaphore(0)
    take, post = _procs._taker(sem), _procs._poster(sem)
    assert take(3) == 0
    post(5)
    assert take(3) == 3 and take(3) == 2 and take(1) == 0
    post(2)
    assert sem.acquire(False) and sem.acquire(False)
    assert not sem.acquire(False)
