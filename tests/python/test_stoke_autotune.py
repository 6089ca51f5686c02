"""num_workers="auto": the online autotuner from Python (stoke.Loader and
stoke.DataLoader).  The batches and their order are those of a fixed
num_workers run; a consumer that does not compute waits at every step, so
the autotuner grows by construction (no timed assertion)."""

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset

import stoke


def epochs(loader, n):
    out = []
    for _ in range(n):
        out.append([y.tolist() for _, y in loader])
    return out


def test_loader_auto_keeps_order_and_logs():
    src = stoke.synthetic("sleep:500us", samples=192, shape=(4,))
    auto = stoke.Loader(src, 8, num_workers="auto", shuffle=True, seed=3,
                        output="numpy")
    fixed = stoke.Loader(stoke.synthetic("sleep:500us", samples=192,
                                         shape=(4,)),
                         8, num_workers=2, shuffle=True, seed=3,
                         output="numpy")
    got, want = epochs(auto, 3), epochs(fixed, 3)
    assert got == want
    for e in got:
        assert sorted(sum(e, [])) == sorted(sum(want[0], []))
    a = auto.autotune()
    assert a["max_workers"] >= 8 and 1 <= a["workers"] <= a["max_workers"]
    assert a["changes"] >= 1
    first = a["decisions"][0]
    assert first["kind"] == "grow" and first["from_workers"] == 1
    assert first["to_workers"] > 1 and first["wait_before"] > 0.05
    assert "1 -> %d workers" % first["to_workers"] in first["text"]
    assert fixed.autotune() is None
    text = auto.report()
    assert "autotune: " in text and "autotuned (up to" in text


def test_loader_auto_cpu_budget_and_errors():
    x = np.arange(64, dtype=np.float32)
    loader = stoke.Loader((x,), 8, num_workers="auto", cpu_budget=1.5,
                          output="numpy")
    for _ in loader:
        pass
    assert loader.autotune()["cpu_budget"] == 1.5
    with pytest.raises(ValueError, match="'auto'"):
        stoke.Loader((x,), 8, num_workers="many")
    cores = stoke.Loader((x,), 8, num_workers="cores")
    assert cores.autotune() is None and cores.num_workers >= 1


class Slow(Dataset):
    """Sample i is (i as a tensor, i), after a short sleep (I/O-like)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import time
        time.sleep(0.0005)
        return torch.tensor([float(i)]), i


def test_dataloader_auto_refuses_iterable_datasets():
    from torch.utils.data import IterableDataset

    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(8))

    with pytest.raises(ValueError, match="IterableDataset"):
        stoke.DataLoader(Stream(), batch_size=2, num_workers="auto")


def test_dataloader_auto_same_batches_as_fixed():
    torch.manual_seed(0)
    auto = stoke.DataLoader(Slow(96), batch_size=8, shuffle=True,
                            num_workers="auto",
                            generator=torch.Generator().manual_seed(5))
    fixed = stoke.DataLoader(Slow(96), batch_size=8, shuffle=True,
                             num_workers=2,
                             generator=torch.Generator().manual_seed(5))
    got = [[y.tolist() for _, y in auto] for _ in range(2)]
    want = [[y.tolist() for _, y in fixed] for _ in range(2)]
    assert got == want
    assert sorted(sum(got[0], [])) == list(range(96))
    a = auto.autotune()
    assert a is not None and a["max_workers"] >= 8
    assert a["decisions"] and a["decisions"][0]["kind"] == "grow"
    assert fixed.autotune() is None
