"""stoke.DataLoader where frameworks expect torch's DataLoader: a subclass
of it (isinstance holds), torch's attribute guards kept, and a re-creation
the way Lightning documents it (read __init__'s signature and the
loader's attributes, swap in a DistributedSampler, build type(dl)(...))
gives a stoke loader again, whose batches are torch's.

Lightning is not installable here: recreate() below follows its
documented behaviour (its _get_dataloader_init_args_and_kwargs)."""

import inspect
import subprocess
import sys

import pytest
import torch
from torch.utils.data import Dataset, DistributedSampler, IterableDataset
from torch.utils.data import DataLoader as TorchDataLoader

import stoke


class Range(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.tensor([float(i)]), i


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(8))


def recreate(dl, sampler):
    """Lightning's re-creation of a DataLoader with another sampler."""
    attrs = {k: v for k, v in vars(dl).items() if not k.startswith("_")}
    attrs["multiprocessing_context"] = dl.multiprocessing_context  # a property
    params = dict(inspect.signature(dl.__init__).parameters)
    has_variadic_kwargs = any(p.kind is p.VAR_KEYWORD
                              for p in params.values())
    if has_variadic_kwargs:
        params.update(inspect.signature(TorchDataLoader.__init__).parameters)
        del params["self"]
    non_defaults = {name for name, p in params.items()
                    if name in attrs and p.default is not attrs[name]
                    and p.default != attrs[name]}
    non_defaults.add("dataset")
    kwargs = {k: v for k, v in attrs.items() if k in non_defaults}
    if isinstance(kwargs["dataset"], IterableDataset):
        kwargs["batch_sampler"] = None
        kwargs["sampler"] = None
    else:
        kwargs.update(sampler=sampler, shuffle=False, batch_sampler=None)
    required = {p.name for p in params.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                and p.default is p.empty and p.name not in kwargs}
    assert not required, f"Lightning would fail: {required} missing"
    if not has_variadic_kwargs:
        missing = set(kwargs) - params.keys()
        assert not missing, f"Lightning would fail: {missing} not accepted"
    return type(dl)(**kwargs)


def test_isinstance_of_torchs_dataloader():
    dl = stoke.DataLoader(Range(4), batch_size=2)
    assert isinstance(dl, TorchDataLoader)
    assert isinstance(dl, stoke.DataLoader)
    assert type(dl).__name__ == "DataLoader"
    assert type(dl) is stoke.dataloader.DataLoader
    assert [b[1].tolist() for b in dl] == [[0, 1], [2, 3]]
    assert not isinstance(TorchDataLoader(Range(4)), stoke.DataLoader)


def test_torchs_attribute_guards():
    dl = stoke.DataLoader(Range(4), batch_size=2, num_workers=1)
    for attr in ("batch_size", "sampler", "batch_sampler", "drop_last",
                 "dataset", "persistent_workers"):
        with pytest.raises(ValueError, match=f"{attr} attribute should not "
                           "be set after DataLoader is initialized"):
            setattr(dl, attr, None)
    dl.num_workers = 2   # torch lets these change, so does stoke
    dl.timeout = 0
    assert dl.num_workers == 2


def test_torchs_iterator_machinery_runs_stoke():
    """torch's own entry points give stoke's iterator, never torch's worker
    processes."""
    dl = stoke.DataLoader(Range(6), batch_size=3, num_workers=2)
    it = dl._get_iterator()
    assert type(it).__module__ == "stoke.dataloader"
    assert [b[1].tolist() for b in it] == [[0, 1, 2], [3, 4, 5]]
    assert [b[1].tolist() for b in TorchDataLoader.__iter__(dl)] == \
        [[0, 1, 2], [3, 4, 5]]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("rank", [0, 1])
def test_lightning_style_recreation_keeps_stoke(workers, rank):
    ds = Range(23)
    dl = stoke.DataLoader(ds, batch_size=4, shuffle=True, num_workers=workers,
                          drop_last=True, warmup=0, torch_threads=1)
    sampler = DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True,
                                 seed=3)
    again = recreate(dl, sampler)
    assert type(again) is type(dl)
    assert again.sampler is sampler and again.batch_size == 4
    assert again.drop_last is True and again.num_workers == workers
    assert again.warmup == 0     # stoke's own arguments come along
    torch_dl = TorchDataLoader(ds, batch_size=4, sampler=DistributedSampler(
        ds, num_replicas=2, rank=rank, shuffle=True, seed=3),
        num_workers=workers, drop_last=True)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        torch_dl.sampler.set_epoch(epoch)
        got = [b[1].tolist() for b in again]
        want = [b[1].tolist() for b in torch_dl]
        assert got == want and len(got) == len(again) == len(torch_dl)


def test_lightning_style_recreation_of_an_iterable_dataset():
    dl = stoke.DataLoader(Stream(), batch_size=4, num_workers=0)
    again = recreate(dl, None)
    assert type(again) is type(dl)
    assert [b.tolist() for b in again] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_import_stoke_does_not_import_torch():
    code = ("import sys, stoke; assert 'torch' not in sys.modules; "
            "stoke.get_worker_info; assert 'torch' not in sys.modules; "
            "import torch.utils.data as t; "
            "assert issubclass(stoke.DataLoader, t.DataLoader)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
