# Type stubs of the stoke package (the C extension's classes included).
from os import PathLike
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping,
                    Optional, Sequence, Tuple, Union)

__version__: str

class Error(Exception):
    code: int
    reason: str

class SampleError(Error):
    index: int
    path: Optional[str]
    where: Optional[str]

class SampleTimeout(SampleError, TimeoutError): ...
class BusyError(Error): ...
class BudgetError(Error, MemoryError): ...
class ConfigError(Error, ValueError): ...
class FormatError(Error, ValueError): ...
class IOError(Error, OSError): ...

class Field:
    """One field of a batch, sharing the batch's memory."""
    shape: Tuple[int, ...]
    dtype: str
    name: str
    nbytes: int
    data_ptr: int
    memory: str
    def __dlpack__(self, stream: Any = ..., *, max_version: Optional[Tuple[int, int]] = ...,
                   dl_device: Optional[Tuple[int, int]] = ..., copy: Optional[bool] = ...,
                   **kwargs: Any) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    def __len__(self) -> int: ...
    def numpy(self) -> Any: ...
    def torch(self) -> Any: ...

class Batch:
    """A batch lent by a loader; its slot returns when it and its views go."""
    indices: List[int]
    size: int
    number: int
    epoch: int
    released: bool
    n_skipped: int
    n_replaced: int
    names: Tuple[str, ...]
    def __getattr__(self, name: str) -> Field: ...
    def __getitem__(self, key: Union[str, int]) -> Field: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Field]: ...
    def keys(self) -> List[str]: ...
    def release(self) -> None: ...
    def __enter__(self) -> "Batch": ...
    def __exit__(self, *exc: Any) -> bool: ...

class Synthetic:
    spec: str
    samples: int
    shape: Tuple[int, ...]

def synthetic(spec: str = ..., samples: int = ..., shape: Sequence[int] = ...,
              cost_dist: str = ..., classes: int = ..., seed: int = ...) -> Synthetic: ...

Source = Union[str, PathLike, Sequence[Union[str, PathLike]], Any, Synthetic]

class Loader:
    output: str
    names: Tuple[str, ...]
    closed: bool
    def __init__(self, source: Source, batch_size: int, *,
                 shuffle: Union[bool, str] = ...,
                 seed: int = ..., num_workers: Union[int, str] = ..., prefetch: int = ...,
                 drop_last: bool = ..., transform: Optional[str] = ...,
                 rank: Optional[int] = ..., world_size: Optional[int] = ...,
                 mem_budget: Union[int, str, None] = ...,
                 timeout: Union[float, str, None] = ..., output: Optional[str] = ...,
                 out_of_order: bool = ..., epoch_prefetch: bool = ...,
                 warmup: Optional[int] = ..., warmup_steps: Optional[int] = ...,
                 trace: Union[bool, int] = ..., max_chunk: int = ...,
                 shard_drop_last: bool = ..., image_kind: Optional[str] = ...,
                 max_pixels: Optional[int] = ..., max_bytes: Optional[int] = ...,
                 verify_checksums: bool = ..., device: Optional[str] = ...,
                 device_prefetch: int = ..., pin_memory: Optional[bool] = ...,
                 device_normalize: bool = ..., cuda_library: Optional[str] = ...,
                 cuda_stream: Optional[int] = ...,
                 release_stream: Union[None, int, Callable[[], Any]] = ...,
                 on_error: str = ..., max_failures: Union[None, int, float, str] = ...,
                 max_replace_tries: int = ...,
                 quarantine: Union[None, str, PathLike] = ...,
                 block_window: Optional[int] = ..., echo: int = ...,
                 echo_mode: str = ...,
                 cache: Union[str, PathLike, None] = ...,
                 cache_max: Union[int, str, None] = ...,
                 ram_cache: Union[bool, int, str, None] = ...,
                 gpu_price: Union[float, str, None] = ...,
                 cpu_budget: Optional[float] = ...,
                 worker_policy: str = ...,
                 io_concurrency: Optional[int] = ...,
                 tls_ca: Union[str, PathLike, None] = ...,
                 tls_verify: bool = ...,
                 http_attempts: Optional[int] = ...,
                 retry_budget: Optional[int] = ...,
                 connect_timeout: Union[float, str, None] = ...,
                 stall_timeout: Union[float, str, None] = ...,
                 retry_backoff: Union[float, str, None] = ...,
                 metrics_file: Union[None, str, PathLike] = ...,
                 metrics_every: float = ...,
                 log_jsonl: Union[None, str, PathLike] = ...,
                 log_every: int = ...) -> None: ...
    def __iter__(self) -> "LoaderIterator": ...
    def __len__(self) -> int: ...
    def __enter__(self) -> "Loader": ...
    def __exit__(self, *exc: Any) -> bool: ...
    @property
    def config(self) -> Dict[str, Any]: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def num_workers(self) -> int: ...
    def set_epoch(self, epoch: int) -> None: ...
    def end_epoch(self) -> None: ...
    def close(self) -> None: ...
    def host_bytes(self) -> int: ...
    def device_info(self) -> Dict[str, Any]: ...
    def failures(self) -> List[Dict[str, Any]]: ...
    def autotune(self) -> Optional[Dict[str, Any]]: ...
    def state_dict(self) -> Dict[str, Any]: ...
    def load_state_dict(self, state: Union[Mapping[str, Any], bytes]) -> None: ...
    def device_sync(self) -> None: ...
    def stats(self) -> Dict[str, Any]: ...
    def diagnose(self, cores: int = ..., consumer_cpu: Optional[float] = ..., *,
                 train_epochs: Optional[int] = ...,
                 deadline: Union[float, str, None] = ...) -> Dict[str, Any]: ...
    def report(self, cores: int = ..., consumer_cpu: Optional[float] = ...,
               all_ranks: bool = ..., *, train_epochs: Optional[int] = ...,
               deadline: Union[float, str, None] = ...) -> str: ...
    def save_json(self, path: Union[str, PathLike], cores: int = ...,
                  consumer_cpu: Optional[float] = ..., *,
                  train_epochs: Optional[int] = ...,
                  deadline: Union[float, str, None] = ...) -> None: ...
    def save_trace(self, path: Union[str, PathLike]) -> None: ...

class LoaderIterator:
    """One epoch of a loader: iter(loader) makes one."""
    loader: Loader
    def __iter__(self) -> "LoaderIterator": ...
    def __next__(self) -> Any: ...
    def __length_hint__(self) -> int: ...

class DataLoader:
    """torch.utils.data.DataLoader on stoke's worker threads."""
    dataset: Any
    batch_size: Optional[int]
    num_workers: int
    pin_memory: bool
    drop_last: bool
    timeout: float
    sampler: Any
    batch_sampler: Any
    generator: Any
    collate_fn: Callable[..., Any]
    persistent_workers: bool
    prefetch_factor: Optional[int]
    pin_memory_device: str
    worker_init_fn: Optional[Callable[[int], Any]]
    in_order: bool
    torch_threads: Optional[int]
    max_batch_size: Optional[int]
    warmup: int
    trace: Union[bool, int]
    gpu_price: Union[float, str, None]
    worker_policy: str
    worker_type: str
    seed_per_sample: bool
    metrics_file: Union[None, str, PathLike]
    metrics_every: float
    log_jsonl: Union[None, str, PathLike]
    log_every: int
    def __init__(self, dataset: Any, batch_size: Optional[int] = ...,
                 shuffle: Optional[bool] = ..., sampler: Any = ...,
                 batch_sampler: Any = ..., num_workers: Union[int, str] = ...,
                 collate_fn: Optional[Callable[[List[Any]], Any]] = ...,
                 pin_memory: bool = ..., drop_last: bool = ..., timeout: float = ...,
                 worker_init_fn: Optional[Callable[[int], Any]] = ...,
                 multiprocessing_context: Any = ..., generator: Any = ..., *,
                 prefetch_factor: Optional[int] = ..., persistent_workers: bool = ...,
                 pin_memory_device: str = ..., in_order: bool = ...,
                 torch_threads: Optional[int] = ..., max_batch_size: Optional[int] = ...,
                 warmup: Optional[int] = ..., trace: Union[bool, int] = ...,
                 gpu_price: Union[float, str, None] = ...,
                 worker_policy: str = ..., worker_type: str = ...,
                 seed_per_sample: bool = ...,
                 metrics_file: Union[None, str, PathLike] = ...,
                 metrics_every: float = ...,
                 log_jsonl: Union[None, str, PathLike] = ...,
                 log_every: int = ...) -> None: ...
    @property
    def multiprocessing_context(self) -> Any: ...
    def check_worker_number_rationality(self) -> None: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __len__(self) -> int: ...
    def close(self) -> None: ...
    def stats(self) -> Dict[str, Any]: ...
    def autotune(self) -> Optional[Dict[str, Any]]: ...
    def diagnose(self, cores: int = ..., consumer_cpu: Optional[float] = ..., *,
                 train_epochs: Optional[int] = ...,
                 deadline: Union[float, str, None] = ...) -> Dict[str, Any]: ...
    def report(self, cores: int = ..., consumer_cpu: Optional[float] = ...,
               all_ranks: bool = ..., *, train_epochs: Optional[int] = ...,
               deadline: Union[float, str, None] = ...) -> str: ...
    def save_json(self, path: Union[str, PathLike], cores: int = ...,
                  consumer_cpu: Optional[float] = ..., *,
                  train_epochs: Optional[int] = ...,
                  deadline: Union[float, str, None] = ...) -> None: ...
    def memory(self) -> Dict[str, Any]: ...
    def save_trace(self, path: Union[str, PathLike]) -> None: ...

def get_worker_info() -> Any: ...
def gather_stats(loader: Any, group: Any = ...) -> List[Dict[str, Any]]: ...

class TwoClock:
    info: Dict[str, Any]
    wrapped: Iterable[Any]
    def __init__(self, iterable: Iterable[Any], *,
                 sync: Union[None, str, Callable[[], Any]] = ...,
                 warmup: Optional[int] = ...,
                 name: Optional[str] = ..., warmup_steps: Optional[int] = ...,
                 ready_wait: float = ..., trace: int = ...,
                 describe: Any = ...,
                 metrics_file: Union[None, str, PathLike] = ...,
                 metrics_every: float = ...,
                 log_jsonl: Union[None, str, PathLike] = ...,
                 log_every: int = ...) -> None: ...
    def __iter__(self) -> "TwoClock": ...
    def __next__(self) -> Any: ...
    @property
    def name(self) -> Optional[str]: ...
    @property
    def verdict(self) -> str: ...
    def end_epoch(self) -> None: ...
    def stats(self) -> Dict[str, Any]: ...
    def diagnose(self, *, train_epochs: Optional[int] = ...,
                 deadline: Union[float, str, None] = ...) -> Dict[str, Any]: ...
    def report(self, *, train_epochs: Optional[int] = ...,
               deadline: Union[float, str, None] = ...) -> str: ...
    def document(self) -> Dict[str, Any]: ...
    def save_json(self, path: Union[str, PathLike]) -> None: ...
    def save_trace(self, path: Union[str, PathLike]) -> None: ...

class EventTwoClock(TwoClock): ...

def tune(source: Source, batch_size: int = ...,
         step: Union[None, str, Callable[[Any], Any]] = ..., *,
         workers: Optional[Sequence[int]] = ..., prefetch: Optional[Sequence[int]] = ...,
         batch_sizes: Optional[Sequence[int]] = ..., max_workers: int = ...,
         warmup_epochs: int = ..., min_epochs: int = ..., min_measure: float = ...,
         progress: Optional[Callable[[int, int, Mapping[str, Any]], Any]] = ...,
         output: Optional[str] = ..., transform: Optional[str] = ...,
         **loader_kwargs: Any) -> Dict[str, Any]: ...
