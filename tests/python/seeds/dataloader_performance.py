# Seed 002's code ("PyTorch DataLoader Performance: num_workers,
# pin_memory, Prefetching and Why Your GPU Is Waiting"), its snippets in the
# article's order with the article's values, joined into one script.  Left
# out: the matplotlib plot, the CUDA-only timing (time_cuda_step, the
# transfer comparison), and snippets that use names the article never
# defines (load_image, expensive_python_transform, slow_python_tokenizer,
# open_database, expensive_preprocess, model, optimizer).  The only edit a
# test makes is the DataLoader import.
import time
import torch
from torch.utils.data import Dataset, DataLoader


class SlowDataset(Dataset):
    def __init__(self, size=10_000, feature_dim=1024, delay=0.002):
        self.size = size
        self.feature_dim = feature_dim
        self.delay = delay

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        # Simulate decoding, parsing, augmentation, disk work, etc.
        time.sleep(self.delay)
        x = torch.randn(self.feature_dim)
        y = torch.randint(0, 10, ()).long()
        return x, y


from time import perf_counter


def benchmark_loader(loader, max_batches=100):
    start = perf_counter()
    batches = 0
    examples = 0
    for x, y in loader:
        batches += 1
        examples += x.shape[0]
        if batches >= max_batches:
            break
    elapsed = perf_counter() - start
    return {
        "batches": batches,
        "examples": examples,
        "seconds": elapsed,
        "batches_per_second": batches / elapsed,
        "examples_per_second": examples / elapsed,
    }


dataset = SlowDataset()
loader = DataLoader(
    dataset,
    batch_size=64,
    shuffle=True,
    num_workers=0,
)
print(benchmark_loader(loader))


def make_loader(num_workers):
    return DataLoader(
        dataset,
        batch_size=64,
        shuffle=True,
        num_workers=num_workers,
    )


for workers in [0, 1, 2, 4, 8]:
    loader = make_loader(workers)
    result = benchmark_loader(loader)
    print(
        f"workers={workers:<2} "
        f"batches/s={result['batches_per_second']:.2f} "
        f"examples/s={result['examples_per_second']:.0f}"
    )

print(torch.get_num_threads())


def worker_init_fn(worker_id):
    torch.set_num_threads(1)


loader = DataLoader(
    dataset,
    batch_size=64,
    num_workers=4,
    worker_init_fn=worker_init_fn,
)
print(benchmark_loader(loader))


def wait_ratio(data_seconds, compute_seconds):
    total = data_seconds + compute_seconds
    return data_seconds / total if total else 0.0


for prefetch in [1, 2, 4, 8]:
    loader = DataLoader(
        dataset,
        batch_size=64,
        num_workers=4,
        prefetch_factor=prefetch,
    )
    result = benchmark_loader(loader)
    print(prefetch, result["examples_per_second"])


def benchmark_epochs(loader, epochs=5):
    start = perf_counter()
    for _ in range(epochs):
        for _batch in loader:
            pass
    return perf_counter() - start


for persistent in [False, True]:
    loader = DataLoader(
        dataset,
        batch_size=64,
        num_workers=4,
        persistent_workers=persistent,
    )
    print(persistent, benchmark_epochs(loader))


def warmup(loader, batches=20):
    for i, _ in enumerate(loader):
        if i + 1 >= batches:
            break


warmup(loader)

for batch_size in [8, 16, 32, 64, 128, 256]:
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        num_workers=4,
    )
    result = benchmark_loader(loader)
    print(batch_size, result["examples_per_second"])


class TimedDataset(Dataset):
    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.total_time = 0.0

    def __len__(self):
        return len(self.wrapped)

    def __getitem__(self, index):
        start = perf_counter()
        item = self.wrapped[index]
        elapsed = perf_counter() - start
        # Fine for debugging with num_workers=0.
        # With multiprocessing, each worker owns its own dataset copy/state.
        self.total_time += elapsed
        return item


from torch.utils.data import get_worker_info
from torch.utils.data import IterableDataset


class ShardedRange(IterableDataset):
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


loader = DataLoader(
    ShardedRange(0, 100),
    num_workers=4,
    batch_size=10,
)
values = []
for batch in loader:
    values.extend(batch.tolist())
print(len(values))
print(len(set(values)))


def main():
    dataset = SlowDataset()
    loader = DataLoader(
        dataset,
        batch_size=64,
        num_workers=4,
    )
    for batch in loader:
        pass


loader = DataLoader(
    dataset,
    batch_size=32,
    num_workers=2,
    prefetch_factor=1,
)


def tensor_bytes(tensor):
    return tensor.numel() * tensor.element_size()


def object_bytes(obj):
    if torch.is_tensor(obj):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(object_bytes(v) for v in obj.values())
    if isinstance(obj, (tuple, list)):
        return sum(object_bytes(v) for v in obj)
    return 0


batch = next(iter(loader))
print(object_bytes(batch) / 1024**2, "MiB")

import random
import numpy as np


def seed_worker(worker_id):
    worker_seed = torch.initial_seed() % 2**32
    random.seed(worker_seed)
    np.random.seed(worker_seed)


generator = torch.Generator()
generator.manual_seed(1234)
loader = DataLoader(
    dataset,
    batch_size=64,
    num_workers=4,
    worker_init_fn=seed_worker,
    generator=generator,
)


def batch_wait_times(loader, count=100):
    iterator = iter(loader)
    waits = []
    for _ in range(count):
        start = perf_counter()
        try:
            next(iterator)
        except StopIteration:
            break
        waits.append(perf_counter() - start)
    return waits


waits = batch_wait_times(loader)
waits_sorted = sorted(waits)
print("mean:", sum(waits) / len(waits))
print("max:", max(waits))
print("p95:", waits_sorted[int(len(waits_sorted) * 0.95)])


def inspect_batch(batch, prefix="batch"):
    if torch.is_tensor(batch):
        print(
            prefix,
            "shape=", tuple(batch.shape),
            "dtype=", batch.dtype,
            "device=", batch.device,
            "pinned=", batch.is_pinned() if batch.device.type == "cpu" else False,
        )
        return
    if isinstance(batch, dict):
        for key, value in batch.items():
            inspect_batch(value, f"{prefix}.{key}")
        return
    if isinstance(batch, (tuple, list)):
        for i, value in enumerate(batch):
            inspect_batch(value, f"{prefix}[{i}]")
        return
    print(prefix, type(batch).__name__)


batch = next(iter(loader))
inspect_batch(batch)


def describe_loader(loader):
    attrs = [
        "batch_size",
        "num_workers",
        "pin_memory",
        "prefetch_factor",
        "persistent_workers",
        "drop_last",
    ]
    for name in attrs:
        print(f"{name:20} {getattr(loader, name, None)}")


describe_loader(loader)


def tune_num_workers(
    dataset,
    batch_size,
    worker_options=(0, 1, 2, 4, 8),
    batches=100,
):
    results = []
    for workers in worker_options:
        kwargs = {
            "dataset": dataset,
            "batch_size": batch_size,
            "num_workers": workers,
            "shuffle": False,
        }
        if workers > 0:
            kwargs["persistent_workers"] = True
            kwargs["prefetch_factor"] = 2
        loader = DataLoader(**kwargs)
        start = perf_counter()
        examples = 0
        count = 0
        for batch in loader:
            x = batch[0] if isinstance(batch, (tuple, list)) else batch
            try:
                examples += len(x)
            except TypeError:
                pass
            count += 1
            if count >= batches:
                break
        elapsed = perf_counter() - start
        results.append({
            "num_workers": workers,
            "seconds": elapsed,
            "batches_per_second": count / elapsed,
            "examples_per_second": examples / elapsed if examples else None,
        })
    return results


for result in tune_num_workers(dataset, batch_size=64):
    print(result)
