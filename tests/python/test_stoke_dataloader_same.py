"""Every claim that stoke.DataLoader behaves as torch.utils.data.DataLoader,
checked against the real thing: each test takes `DL`, parametrised over
both loaders, and makes the same assertions of either.

Covered: exactly-once delivery, order, len, drop_last, collation of every
supported type (compared with torch's default_collate itself), samplers
(custom, batch, subset, weighted, distributed), generator
reproducibility, worker_init_fn and get_worker_info, IterableDataset (seed
002's ShardedRange at 4 workers), errors (conflicting arguments, exceptions
raised by a dataset, shape mismatches, timeouts), early break, two epochs,
persistent workers and an empty dataset.  A few tests at the end compare
the two loaders' outputs with each other."""

import collections
import time

import numpy as np
import pytest
import torch
from torch.utils.data import (BatchSampler, Dataset, DistributedSampler,
                              IterableDataset, RandomSampler, Sampler,
                              SequentialSampler, SubsetRandomSampler,
                              WeightedRandomSampler, get_worker_info)
from torch.utils.data import DataLoader as TorchDataLoader
from torch.utils.data import default_collate

import stoke

def ProcessDataLoader(*args, **kwargs):
    """stoke.DataLoader on worker processes."""
    return stoke.DataLoader(*args, worker_type="process", **kwargs)


LOADERS = {"torch": TorchDataLoader, "stoke": stoke.DataLoader,
           "stoke-process": ProcessDataLoader}


@pytest.fixture(params=["torch", "stoke", "stoke-process"])
def DL(request):
    return LOADERS[request.param]


# ---- datasets ----------------------------------------------------------------

class Range(Dataset):
    """Sample i is (i as a float tensor of shape (2,), i)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.tensor([float(i), -float(i)]), i


Point = collections.namedtuple("Point", "x y")


class Kinds(Dataset):
    """Every type default_collate handles, nested."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        return {
            "f32": torch.full((2, 3), float(i)),
            "f16": torch.full((2,), i, dtype=torch.float16),
            "bf16": torch.full((2,), i, dtype=torch.bfloat16),
            "f64": torch.tensor(float(i), dtype=torch.float64),
            "i8": torch.tensor([i, -i], dtype=torch.int8),
            "i16": torch.tensor([i], dtype=torch.int16),
            "i32": torch.tensor([i], dtype=torch.int32),
            "u8": torch.tensor([i, 255 - i], dtype=torch.uint8),
            "bool_t": torch.tensor([i % 2 == 0, True]),
            "np_f32": np.full((2, 2), i, dtype=np.float32),
            "np_u8": np.arange(4, dtype=np.uint8) + i,
            "np_bool": np.array([i % 3 == 0]),
            "np_i64": np.array(i, dtype=np.int64),
            "np_strided": np.arange(12, dtype=np.float64).reshape(3, 4)[:, 1],
            "np_scalar_f32": np.float32(i) / 2,
            "np_scalar_i16": np.int16(i),
            "np_scalar_bool": np.bool_(i % 2),
            "int": i,
            "float": i / 4,
            "bool": i % 2 == 1,
            "str": f"s{i}",
            "bytes": b"b%d" % i,
            "tuple": (i, f"t{i}", torch.tensor([i])),
            "list": [i, [float(i), torch.zeros(1)]],
            "point": Point(i, f"p{i}"),
            "nested": {"a": {"b": (i, "x")}},
            "t_noncontig": torch.arange(6.0).reshape(2, 3).t() + i,
            # PILToTensor's permuted HWC image, and a slice with an offset
            "t_hwc_view": (torch.arange(24, dtype=torch.uint8)
                           .reshape(2, 4, 3) + i).permute(2, 0, 1),
            "t_slice": (torch.arange(10.0) + i)[2:8:2],
        }


class Irregular(Dataset):
    """Batches the fast path leaves to torch: None, mixed dtypes, keys."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i % 4 == 3:
            x = torch.tensor([i], dtype=torch.int32)  # int32 in int64 batches
        else:
            x = torch.tensor([i], dtype=torch.int64)
        return {"x": x, "y": [i] * (1 + (i >= 4))}  # list length per batch


class NoneSample(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return None


class Shapes(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.zeros(3, 4 if i != 5 else 5)


class BadSample(Exception):
    pass


class Failing(Dataset):
    def __init__(self, n=20, bad=7, exc=BadSample):
        self.n, self.bad, self.exc = n, bad, exc

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            raise self.exc(f"bad sample {i}")
        return i


class Sleepy(Dataset):
    def __init__(self, n, seconds, slow=None):
        self.n, self.seconds, self.slow = n, seconds, slow

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.slow is None or i == self.slow:
            time.sleep(self.seconds)
        return i


class WorkerSeen(Dataset):
    """Reports, per sample, the worker that made it and the worker that
    initialised that worker's copy of the dataset."""

    def __init__(self, n):
        self.n = n
        self.initialized_by = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = get_worker_info()
        if info is None:
            return i, -1, -1, -1, True
        return (i, info.id, info.num_workers, self.initialized_by,
                info.dataset is self)


def init_worker(worker_id):
    get_worker_info().dataset.initialized_by = worker_id


class ShardedRange(IterableDataset):
    """Seed 002's worker-aware IterableDataset."""

    def __init__(self, start, end):
        self.start = start
        self.end = end

    def __iter__(self):
        worker = get_worker_info()
        if worker is None:
            start = self.start
            end = self.end
        else:
            total = self.end - self.start
            per_worker = (total + worker.num_workers - 1) // worker.num_workers
            start = self.start + worker.id * per_worker
            end = min(start + per_worker, self.end)
        yield from range(start, end)


class NaiveStream(IterableDataset):
    def __iter__(self):
        return iter(range(6))


class Empty(Dataset):
    def __len__(self):
        return 0

    def __getitem__(self, i):
        raise IndexError(i)


class Keyed(Dataset):
    """A dataset keyed by strings (with a sampler of keys)."""

    def __getitem__(self, key):
        return torch.tensor([ord(key[0])]), key


class Keys(Sampler):
    def __init__(self, keys):
        super().__init__(None)
        self.keys = keys

    def __iter__(self):
        return iter(self.keys)

    def __len__(self):
        return len(self.keys)


# ---- comparison ------------------------------------------------------------------

def same(a, b, where="batch"):
    """a and b are the same batch: types, dtypes, shapes and values."""
    assert type(a) is type(b), f"{where}: {type(a)} vs {type(b)}"
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype, f"{where}: {a.dtype} vs {b.dtype}"
        assert a.shape == b.shape, f"{where}: {a.shape} vs {b.shape}"
        assert torch.equal(a, b), f"{where}: {a} vs {b}"
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys {list(a)} vs {list(b)}"
        for k in a:
            same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{where}: {len(a)} vs {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def labels(loader):
    """The i of every (x, i) sample, per batch."""
    return [y.tolist() for _, y in loader]


# ---- delivery, order, len, drop_last -------------------------------------------------

@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("batch,drop_last", [(4, False), (4, True), (7, False),
                                             (1, False), (32, True)])
def test_order_len_drop_last(DL, workers, batch, drop_last):
    n = 30
    loader = DL(Range(n), batch_size=batch, num_workers=workers,
                drop_last=drop_last)
    full = n // batch * batch
    want_len = n // batch if drop_last else -(-n // batch)
    assert len(loader) == want_len
    for _ in range(2):  # two epochs, the same
        got = labels(loader)
        assert len(got) == want_len
        flat = [i for b in got for i in b]
        assert flat == list(range(full if drop_last else n))
        for b in got[:-1]:
            assert len(b) == batch
        if want_len:
            x, _ = next(iter(loader))
            assert x.shape == (min(batch, n), 2) and x.dtype == torch.float32


@pytest.mark.parametrize("workers", [0, 2])
def test_shuffle_exactly_once_and_generator(DL, workers):
    def epoch_orders(seed, epochs=2):
        g = torch.Generator()
        g.manual_seed(seed)
        loader = DL(Range(40), batch_size=8, shuffle=True, num_workers=workers,
                    generator=g)
        return [[i for b in labels(loader) for i in b] for _ in range(epochs)]
    a, b, c = epoch_orders(1), epoch_orders(1), epoch_orders(2)
    for order in a + c:
        assert sorted(order) == list(range(40))  # each sample once
    assert a == b          # the generator makes shuffling reproducible
    assert a != c
    assert a[0] != a[1]    # each epoch is reshuffled


# ---- collation ---------------------------------------------------------------------

@pytest.mark.parametrize("workers", [0, 2])
def test_collation_of_every_type(DL, workers):
    ds = Kinds()
    loader = DL(ds, batch_size=5, num_workers=workers)
    got = list(loader)
    assert len(got) == 3
    for k, batch in enumerate(got):
        idx = range(5 * k, min(5 * k + 5, len(ds)))
        same(batch, default_collate([ds[i] for i in idx]), f"batch {k}")


@pytest.mark.parametrize("workers", [0, 2])
def test_irregular_batches_as_torch(DL, workers):
    ds = Irregular()
    for k, batch in enumerate(DL(ds, batch_size=4, num_workers=workers)):
        same(batch, default_collate([ds[i] for i in range(4 * k, 4 * k + 4)]))


@pytest.mark.parametrize("workers", [0, 2])
def test_unsupported_type_is_torchs_error(DL, workers):
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        list(DL(NoneSample(), batch_size=2, num_workers=workers))


@pytest.mark.parametrize("workers", [0, 2])
def test_shape_mismatch_is_a_runtime_error(DL, workers):
    loader = DL(Shapes(), batch_size=4, num_workers=workers)
    it = iter(loader)
    next(it)  # samples 0-3 agree
    with pytest.raises(RuntimeError) as e:
        next(it)  # sample 5 is (3, 5)
    assert "5" in str(e.value)


@pytest.mark.parametrize("workers", [0, 2])
def test_no_auto_collation(DL, workers):
    ds = Kinds()
    got = list(DL(ds, batch_size=None, num_workers=workers))
    assert len(got) == len(ds)
    from torch.utils.data import default_convert
    for i, sample in enumerate(got):
        same(sample, default_convert(ds[i]), f"sample {i}")


@pytest.mark.parametrize("workers", [0, 2])
def test_custom_collate_fn(DL, workers):
    def collate(samples):
        assert isinstance(samples, list)
        return {"n": len(samples), "ids": [i for _, i in samples]}
    got = list(DL(Range(10), batch_size=4, num_workers=workers,
                  collate_fn=collate))
    assert got == [{"n": 4, "ids": [0, 1, 2, 3]}, {"n": 4, "ids": [4, 5, 6, 7]},
                   {"n": 2, "ids": [8, 9]}]


# ---- samplers --------------------------------------------------------------------------

class Repeats(Sampler):
    def __init__(self):
        super().__init__(None)

    def __iter__(self):
        return iter([3, 3, 0, 9, 1, 1, 1])

    def __len__(self):
        return 7


class Buckets(Sampler):
    """A batch sampler with batches of different sizes."""

    def __init__(self):
        super().__init__(None)

    def __iter__(self):
        return iter([[0], [1, 2, 3], [4, 5], [9, 8, 7, 6]])

    def __len__(self):
        return 4


@pytest.mark.parametrize("workers", [0, 2])
def test_samplers(DL, workers):
    ds = Range(10)
    got = labels(DL(ds, batch_size=3, sampler=Repeats(), num_workers=workers))
    assert got == [[3, 3, 0], [9, 1, 1], [1]]
    bs = DL(ds, batch_sampler=Buckets(), num_workers=workers)
    assert len(bs) == 4
    assert labels(bs) == [[0], [1, 2, 3], [4, 5], [9, 8, 7, 6]]
    g = torch.Generator()
    g.manual_seed(3)
    sub = labels(DL(ds, batch_size=2, num_workers=workers,
                    sampler=SubsetRandomSampler([1, 4, 6, 8], generator=g)))
    assert sorted(i for b in sub for i in b) == [1, 4, 6, 8]
    g.manual_seed(4)
    wr = labels(DL(ds, batch_size=5, num_workers=workers,
                   sampler=WeightedRandomSampler([0, 1, 0, 0, 1, 0, 0, 0, 0, 0],
                                                 10, generator=g)))
    assert set(i for b in wr for i in b) <= {1, 4} and sum(map(len, wr)) == 10
    keyed = list(DL(Keyed(), batch_size=2, num_workers=workers,
                    sampler=Keys(["ab", "cd", "ef"])))
    assert [k for _, ks in keyed for k in ks] == ["ab", "cd", "ef"]
    assert keyed[0][0].tolist() == [[97], [99]]


@pytest.mark.parametrize("workers", [0, 2])
def test_distributed_sampler(DL, workers):
    ds = Range(11)
    seen = {}
    for rank in range(2):
        s = DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True,
                               seed=5)
        loader = DL(ds, batch_size=3, sampler=s, num_workers=workers)
        orders = []
        for epoch in range(2):
            s.set_epoch(epoch)
            orders.append([i for b in labels(loader) for i in b])
        assert all(len(o) == 6 for o in orders)  # padded to ceil(11 / 2)
        assert orders[0] != orders[1]           # set_epoch reshuffles
        seen[rank] = orders
    for epoch in range(2):
        both = seen[0][epoch] + seen[1][epoch]
        assert set(both) == set(range(11)) and len(both) == 12


# ---- workers -------------------------------------------------------------------------

@pytest.mark.parametrize("workers", [0, 1, 3])
def test_worker_init_fn_and_get_worker_info(DL, workers):
    ds = WorkerSeen(24)
    assert get_worker_info() is None
    loader = DL(ds, batch_size=2, num_workers=workers,
                worker_init_fn=init_worker)
    rows = [tuple(col[k].item() for col in batch) for batch in loader
            for k in range(len(batch[0]))]
    assert sorted(r[0] for r in rows) == list(range(24))
    for i, wid, num, init_by, own in rows:
        if workers == 0:
            assert (wid, num, init_by) == (-1, -1, -1)
        else:
            assert 0 <= wid < workers and num == workers
            assert init_by == wid   # its own copy, set up by its own init
            assert own              # info.dataset is the copy it runs on
    assert ds.initialized_by is None  # the workers' copies, not this one
    assert get_worker_info() is None


# ---- IterableDataset -----------------------------------------------------------------

@pytest.mark.parametrize("workers", [0, 1, 4])
def test_sharded_range_every_value_once(DL, workers):
    loader = DL(ShardedRange(0, 100), num_workers=workers, batch_size=10)
    for _ in range(2):
        values = []
        for batch in loader:
            values.extend(batch.tolist())
        assert len(values) == 100
        assert len(set(values)) == 100


@pytest.mark.parametrize("workers", [0, 2])
def test_iterable_without_sharding_duplicates(DL, workers):
    values = [v for b in DL(NaiveStream(), batch_size=4, num_workers=workers)
              for v in b.tolist()]
    assert sorted(values) == sorted(list(range(6)) * max(workers, 1))


@pytest.mark.parametrize("workers", [0, 3])
def test_iterable_drop_last_and_no_batching(DL, workers):
    got = [b.tolist() for b in DL(ShardedRange(0, 20), batch_size=3,
                                  drop_last=True, num_workers=workers)]
    assert all(len(b) == 3 for b in got)
    items = list(DL(ShardedRange(0, 5), batch_size=None, num_workers=workers))
    assert sorted(items) == list(range(5))


# ---- errors ----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    dict(batch_sampler=Buckets(), batch_size=2),
    dict(batch_sampler=Buckets(), shuffle=True),
    dict(batch_sampler=Buckets(), sampler=Repeats()),
    dict(batch_sampler=Buckets(), drop_last=True),
    dict(sampler=Repeats(), shuffle=True),
    dict(batch_size=None, drop_last=True),
    dict(num_workers=-1),
    dict(timeout=-1),
    dict(persistent_workers=True),
    dict(prefetch_factor=4),
    dict(multiprocessing_context="spawn"),
])
def test_conflicting_arguments(DL, kwargs):
    with pytest.raises(ValueError):
        DL(Range(10), **kwargs)


@pytest.mark.parametrize("kwargs", [dict(shuffle=True),
                                    dict(sampler=Repeats()),
                                    dict(batch_sampler=Buckets())])
def test_iterable_conflicting_arguments(DL, kwargs):
    with pytest.raises(ValueError, match="IterableDataset"):
        DL(ShardedRange(0, 4), **kwargs)


def test_multiprocessing_context_checked(DL):
    with pytest.raises(ValueError, match="start method"):
        DL(Range(4), num_workers=1, multiprocessing_context="nope")
    loader = DL(Range(4), num_workers=1, multiprocessing_context="fork")
    assert labels(loader) == [[0], [1], [2], [3]]


def test_attributes_frozen(DL):
    loader = DL(Range(4), batch_size=2)
    for attr in ("batch_size", "sampler", "batch_sampler", "drop_last",
                 "dataset"):
        with pytest.raises(ValueError, match="should not be set"):
            setattr(loader, attr, None)
    assert loader.batch_size == 2 and loader.drop_last is False
    assert isinstance(loader.sampler, SequentialSampler)
    assert isinstance(loader.batch_sampler, BatchSampler)
    shuffled = DL(Range(4), shuffle=True)
    assert isinstance(shuffled.sampler, RandomSampler)


@pytest.mark.parametrize("workers", [0, 2])
def test_dataset_exception(DL, workers):
    loader = DL(Failing(), batch_size=4, num_workers=workers)
    with pytest.raises(BadSample, match="bad sample 7"):
        for _ in loader:
            pass
    # A new iteration starts afresh, as a new torch iterator does.
    with pytest.raises(BadSample):
        list(loader)
    ok = DL(Failing(bad=-1), batch_size=4, num_workers=workers)
    assert [i for b in ok for i in b.tolist()] == list(range(20))


class FailingAt(Dataset):
    """Samples i in `bad` raise BadSample; others are i."""

    def __init__(self, n, bad):
        self.n, self.bad = n, set(bad)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i in self.bad:
            raise BadSample(f"bad sample {i}")
        return i


def caught(loader):
    """Every next() of one iteration: a batch's labels, or the error's
    text when it raised (the iteration then goes on, as torch's does)."""
    it, out = iter(loader), []
    while True:
        try:
            out.append(next(it).tolist())
        except StopIteration:
            return out
        except BadSample as e:
            # torch's worker processes wrap the message with the worker's
            # traceback: the dataset's own words are its last line.
            out.append(str(e).strip().splitlines()[-1].split(": ")[-1])


@pytest.mark.parametrize("workers", [0, 1, 3])
@pytest.mark.parametrize("shuffle", [False, True])
def test_next_after_a_failing_batch_goes_on(DL, workers, shuffle):
    def run(bad):
        g = torch.Generator()
        g.manual_seed(5)
        return caught(DL(FailingAt(30, bad=bad), batch_size=4,
                         shuffle=shuffle, generator=g, num_workers=workers))
    bad = {4, 6, 17, 29}
    order = run(())      # the same draws: the same batches, none failing
    want = []
    for keys in order:
        first_bad = [k for k in keys if k in bad]
        want.append(f"bad sample {first_bad[0]}" if first_bad else keys)
    assert run(bad) == want
    # The loader is usable again at once, and the next epoch is whole.
    assert caught(DL(FailingAt(8, bad=()), batch_size=4,
                     num_workers=workers)) == [[0, 1, 2, 3], [4, 5, 6, 7]]


@pytest.mark.parametrize("workers", [0, 2])
def test_every_batch_failing_then_the_end(DL, workers):
    got = caught(DL(FailingAt(6, bad=range(6)), batch_size=2,
                    num_workers=workers))
    assert got == ["bad sample 0", "bad sample 2", "bad sample 4"]


@pytest.mark.parametrize("workers", [0, 2])
def test_collate_error_then_the_next_batch(DL, workers):
    def collate(batch):
        if 3 in batch:
            raise BadSample("collate of a batch with 3")
        return torch.tensor(batch)
    got = caught(DL(FailingAt(8, bad=()), batch_size=2, collate_fn=collate,
                    num_workers=workers))
    assert got == [[0, 1], "collate of a batch with 3", [4, 5], [6, 7]]


@pytest.mark.parametrize("workers", [0, 2])
def test_key_error_keeps_its_type(DL, workers):
    with pytest.raises(KeyError):
        list(DL(Failing(exc=KeyError), batch_size=4, num_workers=workers))


def test_timeout(DL):
    with pytest.raises(AssertionError):
        iter(DL(Range(4), timeout=1))  # torch: timeout needs workers
    loader = DL(Sleepy(4, 3.0, slow=1), batch_size=1, num_workers=1,
                timeout=0.3)
    with pytest.raises(RuntimeError, match="DataLoader timed out after"):
        for _ in loader:
            pass


# ---- epochs ------------------------------------------------------------------------------

@pytest.mark.parametrize("workers", [0, 2])
def test_break_then_iterate_again(DL, workers):
    loader = DL(Range(20), batch_size=3, num_workers=workers)
    for k, _ in enumerate(loader):
        if k == 1:
            break
    assert [i for b in labels(loader) for i in b] == list(range(20))
    it = iter(loader)
    assert next(it)[1].tolist() == [0, 1, 2]
    assert [i for b in labels(loader) for i in b] == list(range(20))


@pytest.mark.parametrize("persistent", [False, True])
def test_persistent_workers(DL, persistent):
    loader = DL(Range(9), batch_size=4, num_workers=2,
                persistent_workers=persistent)
    a = iter(loader)
    first = [b[1].tolist() for b in a]
    b = iter(loader)
    assert (a is b) == persistent
    assert first == [b_[1].tolist() for b_ in b] == [[0, 1, 2, 3],
                                                     [4, 5, 6, 7], [8]]


@pytest.mark.parametrize("workers", [0, 2])
def test_empty_dataset(DL, workers):
    loader = DL(Empty(), batch_size=4, num_workers=workers)
    assert len(loader) == 0
    assert list(loader) == [] and list(loader) == []
    with pytest.raises(StopIteration):
        next(iter(loader))


def test_exhausted_iterator_stays_exhausted(DL):
    it = iter(DL(Range(3), batch_size=2))
    assert len(list(it)) == 2
    with pytest.raises(StopIteration):
        next(it)
    assert len(it) == 2


# ---- the two loaders side by side ------------------------------------------------------------

def both(ds, **kw):
    return ([b for b in TorchDataLoader(ds, **kw)],
            [b for b in stoke.DataLoader(ds, **kw)])


def test_process_mode_same_batches_as_torch_with_a_generator():
    g1, g2 = torch.Generator(), torch.Generator()
    g1.manual_seed(11)
    g2.manual_seed(11)
    t = list(TorchDataLoader(Kinds(), batch_size=4, shuffle=True,
                             generator=g1, num_workers=2))
    s = list(ProcessDataLoader(Kinds(), batch_size=4, shuffle=True,
                               generator=g2, num_workers=2))
    same(s, t)


def test_same_batches_as_torch_with_a_generator():
    for workers in (0, 2):
        g1, g2 = torch.Generator(), torch.Generator()
        g1.manual_seed(11)
        g2.manual_seed(11)
        t = list(TorchDataLoader(Kinds(), batch_size=4, shuffle=True,
                                 generator=g1, num_workers=workers))
        s = list(stoke.DataLoader(Kinds(), batch_size=4, shuffle=True,
                                  generator=g2, num_workers=workers))
        same(s, t)


def test_same_order_as_torch_from_the_global_rng():
    torch.manual_seed(7)
    t = [labels(TorchDataLoader(Range(25), batch_size=4, shuffle=True))
         for _ in range(2)]
    torch.manual_seed(7)
    s = [labels(stoke.DataLoader(Range(25), batch_size=4, shuffle=True))
         for _ in range(2)]
    assert s == t


def test_sharded_range_same_batches_as_torch():
    t, s = both(ShardedRange(0, 100), num_workers=4, batch_size=10)
    assert [b.tolist() for b in s] == [b.tolist() for b in t]
