"""stoke.Loader: stoke's loader from Python, and the sources it reads.

The C half (stoke._stoke.Loader) runs the epoch: worker threads fill batch
slots, next() hands them out with the GIL released, and every array given
to Python shares the slot's memory.  This half turns the arguments into the
C configuration and a description of the source."""

import functools
import glob as _glob
import os

from . import _stoke
from ._util import (deadline_kw, env_rank_world, is_torch_tensor, parse_bytes,
                    parse_duration_ns, parse_price, torch_available)

_SYNTH_KINDS = {"sleep": 1, "spin": 2, "tensor": 3}
_COST_DISTS = {"fixed": 1, "exp": 2, "lognormal": 3}
_IMAGE_KINDS = {None: 0, "auto": 0, "folder": 1, "tar": 2, "packed": 3}


class Synthetic:
    """A synthetic source, for measurement: each sample costs a known time.

    ``spec`` is ``"sleep:5ms"`` (the cost is spent waiting, like I/O),
    ``"spin:2ms"`` (burning the worker's CPU) or ``"tensor"`` (no cost,
    random features in memory).  Each sample has ``x`` (float32, ``shape``,
    uniform noise from its own random stream) and ``y`` (int64, index %
    classes).  ``cost_dist`` is ``"fixed"``, ``"exp"`` or
    ``"lognormal:SIGMA"``.  Build one with :func:`stoke.synthetic`."""

    def __init__(self, spec="sleep:5ms", samples=256, shape=(3, 32, 32),
                 cost_dist="fixed", classes=2, seed=0):
        kind, _, cost = str(spec).partition(":")
        if kind not in _SYNTH_KINDS:
            raise ValueError(f"synthetic: unknown kind {kind!r} in {spec!r} "
                             "(expected sleep:COST, spin:COST or tensor)")
        if kind == "tensor" and cost:
            raise ValueError(f"synthetic: tensor takes no cost, got {spec!r}")
        dist, _, sigma = str(cost_dist).partition(":")
        if dist not in _COST_DISTS:
            raise ValueError(f"synthetic: unknown cost_dist {cost_dist!r} "
                             "(expected fixed, exp or lognormal:SIGMA)")
        self.spec = str(spec)
        self.kind = kind
        self.cost_ns = (parse_duration_ns(cost, "synthetic cost") if cost
                        else (0 if kind == "tensor" else 5_000_000))
        self.cost_dist = str(cost_dist)
        self.dist = _COST_DISTS[dist]
        self.sigma = float(sigma) if sigma else 1.0
        self.samples = int(samples)
        self.shape = tuple(int(s) for s in shape)
        self.classes = int(classes)
        self.seed = int(seed)

    def _spec(self):
        return {"kind": "synthetic", "kind_code": _SYNTH_KINDS[self.kind],
                "cost_ns": self.cost_ns, "dist": self.dist,
                "sigma": self.sigma, "samples": self.samples,
                "shape": list(self.shape), "classes": self.classes,
                "seed": self.seed,
                "label": f"synthetic {self.spec} ({self.cost_dist})"}

    def __repr__(self):
        return (f"stoke.synthetic({self.spec!r}, samples={self.samples}, "
                f"shape={self.shape}, cost_dist={self.cost_dist!r})")


def synthetic(spec="sleep:5ms", samples=256, shape=(3, 32, 32),
              cost_dist="fixed", classes=2, seed=0):
    """A synthetic source (see :class:`Synthetic`), e.g.
    ``stoke.synthetic("sleep:5ms", samples=256, shape=(3, 32, 32))``."""
    return Synthetic(spec, samples, shape, cost_dist, classes, seed)


def _is_path(x):
    return isinstance(x, (str, bytes, os.PathLike))


def _as_array(x, name):
    """A buffer-protocol object sharing x's memory (torch CPU tensors via
    .numpy(), which shares it), refusing what cannot be borrowed as is."""
    if is_torch_tensor(x):
        if x.device.type != "cpu":
            raise _stoke.ConfigError(
                f"array '{name}' is on {x.device}: stoke.Loader reads host "
                "memory; pass a CPU tensor")
        if not x.is_contiguous():
            raise _stoke.ConfigError(
                f"array '{name}' is not contiguous; stoke borrows arrays "
                "without a copy, so pass x.contiguous()")
        try:
            return x.detach().numpy()
        except TypeError as e:  # bfloat16 and other types numpy lacks
            raise _stoke.ConfigError(f"array '{name}': {e}") from None
    try:
        memoryview(x)
    except TypeError:
        raise TypeError(f"array '{name}': {type(x).__name__} has no buffer "
                        "(expected a NumPy array or a CPU torch tensor)") from None
    return x


def _is_url(p):
    return p.lower().startswith(("http://", "https://", "s3://"))


def shown_path(p):
    """A path or URL as it may be shown: a URL without its user-info, its
    query replaced by "?..." (the C library's stoke_path_shown)."""
    if not _is_url(p):
        return p
    scheme, rest = p.split("://", 1)
    cut = len(rest)
    for c in "/?#":
        i = rest.find(c)
        if i >= 0:
            cut = min(cut, i)
    host = rest[:cut].rsplit("@", 1)[-1]
    tail = rest[cut:]
    q = min([i for i in (tail.find("?"), tail.find("#")) if i >= 0],
            default=len(tail))
    return f"{scheme}://{host}{tail[:q]}" + ("?..." if q < len(tail) else "")


# stoke.Loader's options for shards given as URLs (docs/remote.md), and the
# image config fields they set.
REMOTE_OPTIONS = ("io_concurrency", "tls_ca", "tls_verify", "http_attempts",
                  "retry_budget", "connect_timeout", "stall_timeout",
                  "retry_backoff")


def remote_options(io_concurrency=None, tls_ca=None, tls_verify=True,
                   http_attempts=None, retry_budget=None,
                   connect_timeout=None, stall_timeout=None,
                   retry_backoff=None):
    """The remote options as the C side's spec keys (None: the default)."""
    def count(v, name, hi):
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
            raise ValueError(f"{name}: expected an integer in 1..{hi}, "
                             f"got {v!r}")
        return v

    def ms(v, name):
        if v is None:
            return None
        t = parse_duration_ns(v, name)
        if not 10 ** 6 <= t <= 3600 * 10 ** 9:
            raise ValueError(f"{name}: expected 1 ms to 1 h, got {v!r}")
        return t // 10 ** 6
    if not isinstance(tls_verify, bool):
        raise TypeError(f"tls_verify: expected True or False, got {tls_verify!r}")
    return {"io_concurrency": count(io_concurrency, "io_concurrency", 64),
            "tls_ca_path": None if tls_ca is None else os.fsdecode(tls_ca),
            "tls_insecure": int(not tls_verify),
            "max_attempts": count(http_attempts, "http_attempts", 100),
            "retry_budget": count(retry_budget, "retry_budget", 2 ** 32 - 1),
            "connect_timeout_ms": ms(connect_timeout, "connect_timeout"),
            "stall_timeout_ms": ms(stall_timeout, "stall_timeout"),
            "retry_backoff_ms": ms(retry_backoff, "retry_backoff")}


def describe_source(source, transform=None, image_kind=None, max_pixels=None,
                    max_bytes=None, verify_checksums=False, remote=None):
    """(spec for the C side, layout, field names, objects to keep alive)."""
    if isinstance(source, Synthetic):
        if transform is not None:
            raise _stoke.ConfigError("transform= applies to image datasets, "
                                     "not to a synthetic source")
        return source._spec(), _stoke.LAYOUT_TUPLE, ("x", "y"), ()
    paths = None
    if _is_path(source):
        paths = [os.fsdecode(source)]
    elif (isinstance(source, (list, tuple)) and source and
          all(_is_path(p) for p in source)):
        paths = [os.fsdecode(p) for p in source]
    if paths is not None:
        if image_kind not in _IMAGE_KINDS:
            raise ValueError(f"image_kind: expected folder, tar or packed, "
                             f"got {image_kind!r}")
        for p in paths:
            if not (_is_url(p) or _glob.has_magic(p) or "{" in p or
                    os.path.exists(p)):
                raise FileNotFoundError(f"no such file or directory: {p!r}")
        spec = {"kind": "images", "paths": paths,
                "image_kind": _IMAGE_KINDS[image_kind],
                "transform": transform, "max_pixels": max_pixels,
                "max_bytes": max_bytes,
                "verify_checksums": int(bool(verify_checksums)),
                **(remote or remote_options()),
                "label": shown_path(paths[0]) if len(paths) == 1
                else f"{shown_path(paths[0])} and {len(paths) - 1} more"}
        return spec, _stoke.LAYOUT_TUPLE, ("image", "label"), ()
    if transform is not None:
        raise _stoke.ConfigError("transform= applies to image datasets (a "
                                 "path, a list of paths or a glob)")
    if isinstance(source, dict):
        if not source:
            raise ValueError("an empty dict of arrays")
        names = tuple(str(k) for k in source)
        arrays = [_as_array(v, n) for n, v in zip(names, source.values())]
        layout = _stoke.LAYOUT_DICT
    elif isinstance(source, (tuple, list)):
        if not source:
            raise ValueError("an empty tuple of arrays")
        names = tuple(f"f{i}" for i in range(len(source)))
        arrays = [_as_array(v, n) for n, v in zip(names, source)]
        layout = _stoke.LAYOUT_TUPLE
    elif (hasattr(source, "__getitem__") and hasattr(source, "__len__") and
          not is_torch_tensor(source) and not _has_buffer(source)):
        raise TypeError(
            f"stoke.Loader reads paths, arrays and synthetic sources; "
            f"{type(source).__name__} looks like a Python dataset: use "
            "stoke.DataLoader for those")
    else:
        names = ("data",)
        arrays = [_as_array(source, "data")]
        layout = _stoke.LAYOUT_SINGLE
    label = "arrays " + ", ".join(
        f"{n} {tuple(getattr(a, 'shape', ()))}" for n, a in zip(names, arrays))
    spec = {"kind": "arrays", "arrays": list(arrays), "names": list(names),
            "label": label}
    return spec, layout, names, tuple(arrays)


def _has_buffer(x):
    try:
        memoryview(x)
        return True
    except TypeError:
        return False


_OUTPUTS = {"stoke": _stoke.OUT_STOKE, "numpy": _stoke.OUT_NUMPY,
            "torch": _stoke.OUT_TORCH}


def output_converters(output):
    """(mode, to_torch, to_numpy) for an output name (None: torch when it
    imports, else numpy)."""
    if output is None:
        output = "torch" if torch_available() else "numpy"
    if output not in _OUTPUTS:
        raise ValueError(f"output: expected 'torch', 'numpy' or 'stoke', "
                         f"got {output!r}")
    to_torch = to_numpy = None
    if output == "torch":
        import torch.utils.dlpack
        # The capsule goes straight to torch's C converter when it has one
        # (torch.utils.dlpack.from_dlpack first asks the capsule for
        # __dlpack__, an AttributeError per tensor); same tensor either way.
        to_torch = getattr(torch._C, "_from_dlpack",
                           torch.utils.dlpack.from_dlpack)
    elif output == "numpy":
        import numpy
        to_numpy = numpy.asarray
    return output, _OUTPUTS[output], to_torch, to_numpy


# stoke_config.n_workers AUTO: with autotune, the library's most workers.
WORKERS_AUTO = 0xFFFFFFFF


def resolve_workers(num_workers):
    """num_workers as stoke_config's n_workers: an integer >= 0, "cores"
    (one per online CPU) or "auto" (the online autotuner: WORKERS_AUTO, the
    most it may use)."""
    if num_workers == "cores":
        return os.cpu_count() or 1
    if num_workers == "auto":
        return WORKERS_AUTO
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) \
            or num_workers < 0:
        raise ValueError(f"num_workers: expected an integer >= 0, 'cores' "
                         f"or 'auto', got {num_workers!r}")
    return num_workers


def _torch_cuda():
    """torch.cuda when torch is imported and has a usable GPU, else None."""
    import sys
    torch = sys.modules.get("torch")
    try:
        return torch.cuda if torch is not None and torch.cuda.is_available() \
            else None
    except Exception:
        return None


def device_config(device=None, device_prefetch=1, pin_memory=None,
                  device_normalize=True, cuda_library=None, cuda_stream=None):
    """The device stage's part of the C configuration, and the callable
    that gives torch's current stream (None without a torch GPU)."""
    if device in (None, "", "cpu"):
        device = None
    elif not (device == "cuda" or (isinstance(device, str) and
                                   device.startswith("cuda:") and
                                   device[5:].isdigit())):
        raise ValueError(f"device: expected None, 'cpu', 'cuda' or "
                         f"'cuda:N', got {device!r}")
    cuda = _torch_cuda() if (device or pin_memory) else None
    current = None
    if cuda:
        # Streams of the loader's device: a stream belongs to one device's
        # context, and torch's current device may be another ("cuda" is
        # device 0, as the C side reads it).
        ordinal = 0 if device in (None, "cuda") else int(device[5:])
        current = (cuda.current_stream if device is None else
                   functools.partial(cuda.current_stream, ordinal))
    if cuda_stream is None:
        # The consumer's stream: next() makes it wait on each copy, and a
        # release is recorded on it.  torch's current stream when torch has
        # a GPU; else the legacy default stream.
        cuda_stream = current().cuda_stream if cuda else 0
    return {
        "device": device,
        "device_prefetch": int(device_prefetch),
        "pin_memory": -1 if pin_memory is None else int(bool(pin_memory)),
        "device_normalize": int(bool(device_normalize)),
        "cuda_library": cuda_library,
        "cuda_stream": int(cuda_stream),
    }, current


_ECHO_MODES = {"batch": 0, "example": 1}


def _shuffle_config(shuffle, block_window):
    """shuffle=False/True/"uniform"/"block"/"block=64MiB" as stoke_config's
    shuffle, shuffle_block_bytes and shuffle_window."""
    block = 0
    if shuffle is None or shuffle is False:
        code = 0
    elif shuffle is True or shuffle == "uniform":
        code = 1
    elif isinstance(shuffle, str) and (shuffle == "block" or
                                       shuffle.startswith("block=")):
        code = 2
        if "=" in shuffle:
            block = parse_bytes(shuffle[6:], "shuffle")
            if not block:
                raise ValueError("shuffle: a block of 0 bytes")
    else:
        raise ValueError(f"shuffle: expected a bool, 'uniform' or "
                         f"'block[=SIZE]', got {shuffle!r}")
    if block_window is not None and code != 2:
        raise ValueError("block_window: applies to shuffle='block'")
    return {"shuffle": code, "shuffle_block_bytes": block,
            "shuffle_window": int(block_window or 0)}


_ON_ERROR = {"fail": 0, "skip": 1, "replace": 2}


def bad_sample_config(on_error="fail", max_failures=None,
                      max_replace_tries=8, quarantine=None):
    """The bad-sample part of the C configuration.  max_failures: None
    (the default budget, 1% of an epoch), a count (int), a share (a float
    below 1, or "0.1%"), or "none" (no limit)."""
    if on_error not in _ON_ERROR:
        raise ValueError(f"on_error: expected 'fail', 'skip' or 'replace', "
                         f"got {on_error!r}")
    d = {"on_error": _ON_ERROR[on_error],
         "max_replace_tries": int(max_replace_tries),
         "quarantine_path": os.fspath(quarantine) if quarantine else None}
    m = max_failures
    if isinstance(m, str) and m.strip().endswith("%"):
        m = float(m.strip()[:-1]) / 100
        if not 0 < m <= 1:
            raise ValueError(f"max_failures: a share above 0 and at most "
                             f"100%, got {max_failures!r}")
    elif isinstance(m, str) and m.strip() == "none":
        d.update(max_failures=0, max_failure_frac=0.0)
        return d
    elif isinstance(m, str):
        m = int(m)
    if m is None:
        return d
    if isinstance(m, bool) or m <= 0:
        raise ValueError(f"max_failures: 0 would allow none; use "
                         f"on_error='fail', a count, a share or 'none'")
    if isinstance(m, float) and m < 1:
        d.update(max_failures=0, max_failure_frac=m)
    else:
        d.update(max_failures=int(m), max_failure_frac=0.0)
    return d


def warmup_config(warmup=None, warmup_steps=None):
    """The warm-up's fields of stoke_config.  Neither given: the first
    epoch, or 10 steps and 5 s if those come first (the early end,
    STOKE_WARMUP_END_STEPS and _NS), so a long epoch is measured after its
    first seconds.  Either given: exactly that many epochs, then steps."""
    auto = warmup is None and warmup_steps is None
    return {
        "warmup_epochs": 1 if warmup is None else int(warmup),
        "warmup_steps": 0 if warmup_steps is None else int(warmup_steps),
        "warmup_end_steps": _stoke.WARMUP_END_STEPS if auto else 0,
        "warmup_end_ns": _stoke.WARMUP_END_NS if auto else 0,
    }


# stoke_worker_policy (include/stoke.h)
_WORKER_POLICIES = {"batch": 0, "normal": 1}


def loader_config(batch_size, *, shuffle=False, seed=0, num_workers=0,
                  prefetch=2, drop_last=False, rank=None, world_size=None,
                  mem_budget=None, timeout=None, out_of_order=False,
                  epoch_prefetch=True, warmup=None, warmup_steps=None,
                  trace=False, max_chunk=0, shard_drop_last=False, block_window=None,
                  echo=1, echo_mode="batch", cache=None, cache_max=None,
                  ram_cache=None, cpu_budget=None, worker_policy="batch",
                  metrics_file=None, metrics_every=10.0, log_jsonl=None,
                  log_every=100):
    """The C loader's configuration (stoke_config's names) from Python's.
    num_workers="auto" turns the online autotuner on (cpu_budget: the cores
    its workers may keep busy, None for all)."""
    from .distributed import dist_rank_world
    env_rank, env_world = dist_rank_world() or env_rank_world()
    rank = env_rank if rank is None else rank
    world = env_world if world_size is None else world_size
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or \
            batch_size < 1:
        raise ValueError(f"batch_size: expected an integer >= 1, got "
                         f"{batch_size!r}")
    if isinstance(prefetch, bool) or not isinstance(prefetch, int) or \
            prefetch < 1:
        raise ValueError(f"prefetch: expected an integer >= 1, got "
                         f"{prefetch!r}")
    trace_events = (16384 if trace is True else int(trace) if trace else 0)
    if isinstance(echo, bool) or not isinstance(echo, int) or echo < 1:
        raise ValueError(f"echo: expected an integer >= 1, got {echo!r}")
    if echo_mode not in _ECHO_MODES:
        raise ValueError(f"echo_mode: expected 'batch' or 'example', got "
                         f"{echo_mode!r}")
    if worker_policy not in _WORKER_POLICIES:
        raise ValueError(f"worker_policy: expected 'batch' or 'normal', got "
                         f"{worker_policy!r}")
    rungs = _shuffle_config(shuffle, block_window)
    rungs.update({
        "echo": echo, "echo_mode": _ECHO_MODES[echo_mode],
        "cache_dir": None if cache is None else os.fsdecode(cache),
        "cache_max_bytes": parse_bytes(cache_max, "cache_max"),
        "ram_cache_bytes": (0 if not ram_cache else (1 << 64) - 1
                            if ram_cache is True or ram_cache == "all"
                            else parse_bytes(ram_cache, "ram_cache")),
    })
    return rungs | {
        "batch_size": batch_size,
        "n_workers": resolve_workers(num_workers),
        "prefetch": prefetch,
        # Python's for loop holds the previous batch while it asks for the
        # next one: one more slot keeps `prefetch` batches made ahead.
        "consumer_slots": 2,
        "seed": int(seed),
        "drop_last": int(bool(drop_last)),
        "rank": int(rank), "world": int(world),
        "shard_drop_last": int(bool(shard_drop_last)),
        "in_order": int(not out_of_order),
        **warmup_config(warmup, warmup_steps),
        "sample_timeout_ms": (0 if not timeout else
                              max(1, parse_duration_ns(timeout, "timeout")
                                  // 1_000_000)),
        "mem_budget_bytes": parse_bytes(mem_budget, "mem_budget"),
        "prefetch_next_epoch": int(bool(epoch_prefetch)),
        "trace_events": trace_events,
        "max_chunk": int(max_chunk),
        "autotune": int(num_workers == "auto"),
        "cpu_budget": float(cpu_budget or 0),
        "worker_policy": _WORKER_POLICIES[worker_policy],
        "metrics_path": (None if metrics_file is None
                         else os.fsdecode(metrics_file)),
        "metrics_every_ns": int(float(metrics_every) * 1e9),
        "log_jsonl_path": None if log_jsonl is None else os.fsdecode(log_jsonl),
        "log_every_steps": int(log_every),
        "metrics_loader": "stoke.Loader",
    }


class Loader(_stoke.Loader):
    """stoke's loader: worker threads read, decode and transform samples
    straight into batch buffers, ``prefetch`` batches ahead, in an order
    that depends only on ``(seed, epoch, rank, world_size)``.

    ``source`` is a path, a list of paths or a glob (an ImageFolder
    directory, tar shards or packed shards; ``transform=`` says what to make
    of the images, e.g. ``"random-resized-crop=224,flip,normalize=imagenet,
    chw,f32"``); NumPy arrays or CPU torch tensors (one, a tuple or a dict of
    equal length, borrowed without a copy: keep them unchanged while the
    loader lives); or :func:`stoke.synthetic`.

    Iterating gives one epoch of batches: with ``output="torch"`` (the
    default when torch imports) torch tensors, ``"numpy"`` ndarrays,
    ``"stoke"`` :class:`stoke.Batch` objects.  They share the loader's
    memory; a batch's slot is reused once the batch and every array made
    from it are gone.  ``len(loader)`` is the batches per epoch; each
    ``iter()`` is the next epoch (``set_epoch(e)`` chooses its number).

    ``timeout`` (seconds or ``"5s"``) fails a sample that runs longer,
    naming it; ``mem_budget`` (bytes or ``"8GiB"``) is checked before
    anything is allocated.  ``rank``/``world_size`` default to
    torch.distributed's when it is initialised, else to the ``RANK`` and
    ``WORLD_SIZE`` that torchrun sets.  The other options are the CLI's:
    ``out_of_order``, ``epoch_prefetch``, ``warmup`` (epochs left out of the
    statistics; not given: the first epoch, or its first 10 steps and 5 s
    if those come first), ``warmup_steps``, ``trace`` (keep spans for
    :meth:`save_trace`), ``max_chunk``, ``shard_drop_last``, and for images
    ``image_kind``, ``max_pixels``, ``max_bytes``, ``verify_checksums``.

    Tar and packed shards may be ``http://`` or ``https://`` URLs, with the
    same brace patterns (docs/remote.md): ``io_concurrency`` requests in
    flight, ``tls_ca`` (a CA file, or a folder ending in ``/``) and
    ``tls_verify=False`` (explicit only) for https, ``http_attempts`` per
    request and a ``retry_budget`` for the loader's life,
    ``connect_timeout``, ``stall_timeout`` and ``retry_backoff`` (seconds
    or ``"100ms"``).  A URL's user-info and query never appear in a
    message, a report or a trace.  ``s3://bucket/key`` (braces as above)
    and ``s3://bucket/prefix`` (listed) read S3 with the ``AWS_*``
    environment's settings, signed with SigV4; the secret key and the
    session token are never shown either.

    The storage and sample-cost rungs (docs/echo.md, docs/cache.md):
    ``shuffle="block"`` (or ``"block=64MiB"``, with ``block_window``
    blocks per window) shuffles blocks of consecutive samples for datasets
    larger than RAM and reads the next ones ahead; ``echo=e`` feeds each
    batch made to ``e`` steps (``echo_mode="batch"``: the same batch;
    ``"example"``: each sample in ``e`` batches, each copy with its own
    random transform), the last resort when the producer cannot keep up;
    ``cache="DIR"`` packs a folder or tar dataset into DIR as the first
    epoch reads it, and reads it from there after (``cache_max`` bounds
    the disk); remote shards (URLs, ``s3://``) are instead fetched whole
    once per node into DIR/remote/, keyed by URL and ETag, the least
    recently used evicted past ``cache_max``; ``ram_cache=True`` (or a size) keeps an evaluation
    transform's samples (resize + center-crop) in RAM after their first
    epoch.  ``gpu_price`` (per hour: ``2.5`` or ``"2.50/h"``, ``"/min"``,
    ``"/s"``) turns the cost that :meth:`stats` and :meth:`report` give (time
    per sample and per epoch, the wait's share) into money, the CLI's
    ``--gpu-price``.

    ``device="cuda"`` (or ``"cuda:N"``) copies each batch to the GPU on
    stoke's own stream, ``device_prefetch`` batches ahead, and yields CUDA
    tensors: torch's current stream (``cuda_stream``) waits on each copy on
    the GPU, never the host, and a slot is refilled only after the work
    queued on that stream when the batch was let go.  An image transform
    ending in ``normalize,...,f32`` is copied as u8 and normalised there
    (``device_normalize``).  ``pin_memory=True`` puts batches in page-locked
    memory without copying them, for ``x.to("cuda", non_blocking=True)``:
    torch does not keep memory it did not allocate alive during such a
    copy, so a pinned or device batch given to torch is released on the
    stream that was current when it was handed out (``release_stream``: a
    callable giving that stream, or its handle; default
    ``torch.cuda.current_stream``), and its slot refilled only once the work
    queued there is done.  Without a CUDA driver the loader runs on the
    host and :meth:`device_info` says why.

    Bad samples: ``on_error="fail"`` (default: the first one raises
    :class:`SampleError`), ``"skip"`` (the batch is shorter:
    ``batch.n_skipped``) or ``"replace"`` (another sample, drawn from the
    bad one's own random stream, takes its place: the batch keeps its size
    and the run its determinism).  ``max_failures`` bounds them (a count, a
    share such as ``"0.1%"``, or ``"none"``; default 1% of an epoch);
    ``quarantine`` names a file that records each bad sample so that later
    epochs and runs never read it (``stoke inspect --verify`` writes one).
    :meth:`failures` lists the last ones; :meth:`state_dict` and
    :meth:`load_state_dict` save and restore the position.

    ``num_workers="auto"`` is the online autotuner: the loader starts with
    one worker and prefetch 2 and, from its own clocks, changes the active
    workers and prefetch while it runs (never what it delivers, nor the
    order) until the step stops waiting, within ``cpu_budget`` cores
    (default: all; workers that wait on I/O barely count) and
    ``mem_budget``; it adapts again when the step changes.
    :meth:`autotune` lists every decision with its reason and numbers.
    ``num_workers="cores"`` is one worker per CPU.

    ``worker_policy="batch"`` (the default) runs the worker threads under
    Linux's SCHED_BATCH: a worker woken to refill a slot never takes the
    core of the thread running the training step, which with more CPU-bound
    workers than cores otherwise waits for a core every step.
    ``"normal"`` keeps the OS default.
    ``metrics_file=PATH`` writes Prometheus text atomically every
    ``metrics_every`` seconds and at the end; ``log_jsonl=PATH`` appends a
    JSON line per epoch and every ``log_every`` steps (docs/metrics.md)."""

    def __init__(self, source, batch_size, *, shuffle=False, seed=0,
                 num_workers=0, prefetch=2, drop_last=False, transform=None,
                 rank=None, world_size=None, mem_budget=None, timeout=None,
                 output=None, out_of_order=False, epoch_prefetch=True,
                 warmup=None, warmup_steps=None, trace=False, max_chunk=0,
                 shard_drop_last=False, image_kind=None, max_pixels=None,
                 max_bytes=None, verify_checksums=False, device=None,
                 device_prefetch=1, pin_memory=None, device_normalize=True,
                 cuda_library=None, cuda_stream=None, release_stream=None,
                 on_error="fail", max_failures=None, max_replace_tries=8,
                 quarantine=None, block_window=None, echo=1,
                 echo_mode="batch", cache=None, cache_max=None,
                 ram_cache=None, gpu_price=None, cpu_budget=None,
                 worker_policy="batch", io_concurrency=None, tls_ca=None,
                 tls_verify=True, http_attempts=None, retry_budget=None,
                 connect_timeout=None, stall_timeout=None,
                 retry_backoff=None, metrics_file=None, metrics_every=10.0,
                 log_jsonl=None, log_every=100):
        spec, layout, names, keep = describe_source(
            source, transform, image_kind, max_pixels, max_bytes,
            verify_checksums, remote_options(
                io_concurrency, tls_ca, tls_verify, http_attempts,
                retry_budget, connect_timeout, stall_timeout, retry_backoff))
        spec["gpu_price_per_hour"] = parse_price(gpu_price, "gpu_price")
        config = loader_config(
            batch_size, shuffle=shuffle, seed=seed, num_workers=num_workers,
            prefetch=prefetch, drop_last=drop_last, rank=rank,
            world_size=world_size, mem_budget=mem_budget, timeout=timeout,
            out_of_order=out_of_order, epoch_prefetch=epoch_prefetch,
            warmup=warmup, warmup_steps=warmup_steps, trace=trace,
            max_chunk=max_chunk, shard_drop_last=shard_drop_last,
            block_window=block_window, echo=echo, echo_mode=echo_mode,
            cache=cache, cache_max=cache_max, ram_cache=ram_cache,
            cpu_budget=cpu_budget, worker_policy=worker_policy,
            metrics_file=metrics_file, metrics_every=metrics_every,
            log_jsonl=log_jsonl, log_every=log_every)
        if spec["kind"] == "images":  # remote shards cache below the source
            spec["cache_dir"] = config["cache_dir"]
            spec["cache_max_bytes"] = config["cache_max_bytes"]
        dev, stream = device_config(device, device_prefetch, pin_memory,
                                    device_normalize, cuda_library,
                                    cuda_stream)
        config.update(dev)
        config.update(bad_sample_config(on_error, max_failures,
                                        max_replace_tries, quarantine))
        output, mode, to_torch, to_numpy = output_converters(output)
        self._keep = keep  # the arrays the C source borrows
        self.output = output
        self.names = names
        if release_stream is not None:
            stream = release_stream
        super().__init__(spec, config, mode, layout, names, to_torch,
                         to_numpy, stream if output == "torch" else None)
        if pin_memory:
            info = self.device_info()
            if info["backend"] == "host":
                import warnings
                warnings.warn("pin_memory=True, but no CUDA driver serves "
                              "page-locked memory here (" + info["reason"] +
                              "): batches stay pageable", stacklevel=2)

    def diagnose(self, cores=0, consumer_cpu=None, *, train_epochs=None,
                 deadline=None):
        """The verdict, its numbers, the queue model (``model``), its
        prediction of this run and its error (``prediction``), a what-if
        table over workers and prefetch (``what_if``) and the escalation
        ladder (``advice``, each with its predicted ``speedup``).
        ``consumer_cpu`` is the cores the training step burns; by default it
        is measured (the process's CPU time less the workers', over the
        computing clock).  ``train_epochs=N, deadline=...`` (seconds, or a
        string as ``stoke profile --deadline``: ``"8h"``, ``"90min"``) adds
        ``deadline``: whether N epochs fit in the window at this
        configuration (``now``, from the measured epochs) and at the
        model's knee (``knee``, from its what-if prediction), each with its
        error bar and ``verdict`` fits / uncertain / misses."""
        return super().diagnose(
            cores, consumer_cpu, **deadline_kw(train_epochs, deadline))

    def report(self, cores=0, consumer_cpu=None, all_ranks=False, *,
               train_epochs=None, deadline=None):
        """``stoke profile``'s report of this loader: the epochs, the
        steady state, the verdict and its numbers, the queue model, the
        what-if table and the advice.  ``all_ranks=True`` gathers every
        rank's clocks through torch.distributed (a collective: call it on
        every rank) and adds a row per rank, the straggler and the job's
        verdict.  ``train_epochs`` and ``deadline`` as in diagnose()."""
        text = super().report(
            cores, consumer_cpu, **deadline_kw(train_epochs, deadline))
        if all_ranks:
            from .distributed import gather_stats, ranks_report
            text += "\n" + ranks_report(gather_stats(self))
        return text

    def save_json(self, path, cores=0, consumer_cpu=None, *,
                  train_epochs=None, deadline=None):
        """Write ``stoke profile --json``'s document, which ``stoke
        report`` renders as HTML."""
        super().save_json(os.fspath(path), cores, consumer_cpu,
                          **deadline_kw(train_epochs, deadline))

    def state_dict(self):
        """Where the loader is: the epoch, the batches of it handed out
        (a batch counts once next() returned it) and what makes that
        position mean the same samples, as a few bytes (``"stoke_state"``,
        what load_state_dict reads: version, CRC, the dataset's identity)
        and readable fields.  torch.save-able."""
        blob, fields = self._state()
        return dict(fields, stoke_state=blob)

    def load_state_dict(self, state):
        """Continue from state_dict(): the next iteration hands out the
        batches an uninterrupted run had left, in its order, whatever
        num_workers and prefetch are now.  With another world size (or
        rank, batch size, shuffle, drop_last) it starts at the next epoch,
        every sample of which is then delivered once across the ranks.  A
        state of another dataset raises ConfigError naming both."""
        blob = state["stoke_state"] if isinstance(state, dict) else state
        self._restore(bytes(blob))

    @property
    def config(self):
        """The configuration in force (defaults resolved)."""
        c = self._config()
        return {"batch_size": c["batch_size"], "num_workers": c["n_workers"],
                "prefetch": c["prefetch"],
                "shuffle": ("block" if c["shuffle"] == 2
                            else bool(c["shuffle"])),
                "echo": c["echo"],
                "echo_mode": ("example" if c["echo_mode"] else "batch"),
                "seed": c["seed"], "drop_last": bool(c["drop_last"]),
                "rank": c["rank"], "world_size": c["world"],
                "out_of_order": not c["in_order"],
                "epoch_prefetch": bool(c["prefetch_next_epoch"]),
                "warmup": c["warmup_epochs"],
                "warmup_steps": c["warmup_steps"],
                "timeout": c["sample_timeout_ms"] / 1e3 or None,
                "mem_budget": c["mem_budget_bytes"] or None,
                "output": self.output,
                "batches_per_epoch": c["n_batches"],
                "samples_per_epoch": c["n_samples"]}

    @property
    def batch_size(self):
        """Samples per batch."""
        return self._config()["batch_size"]

    @property
    def num_workers(self):
        """Worker threads (0: batches are made inside next())."""
        return self._config()["n_workers"]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        if self.closed:
            return "<stoke.Loader (closed)>"
        c = self._config()
        return (f"<stoke.Loader {c['n_batches']} batches of {c['batch_size']}"
                f", {c['n_workers']} workers, prefetch {c['prefetch']}, "
                f"output {self.output!r}, fields {self.names}>")
