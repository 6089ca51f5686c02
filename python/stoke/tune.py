"""stoke.tune: sweep workers x prefetch (x batch size) and pick the knee."""

from . import _stoke
from ._util import parse_duration_ns
from .loader import (REMOTE_OPTIONS, describe_source, loader_config,
                     output_converters, remote_options)


def _step_of(step):
    if step is None or callable(step):
        return step
    kind, _, t = str(step).partition(":")
    if kind not in ("sleep", "spin") or not t:
        raise ValueError(f"step: expected a callable or 'sleep:TIME' / "
                         f"'spin:TIME', got {step!r}")
    return (kind, parse_duration_ns(t, "step"))


def tune(source, batch_size=32, step=None, *, workers=None, prefetch=None,
         batch_sizes=None, max_workers=0, warmup_epochs=1, min_epochs=1,
         min_measure=0.0, progress=None, output=None, transform=None,
         io_sweep=None, **loader_kwargs):
    """Sweep a loader over ``source`` (a stoke source, or a map-style Python
    dataset as stoke.DataLoader runs it) and return its knee: the cheapest
    configuration (fewest workers, then least memory) within 5% of the best
    throughput that removes the stall.

    ``step`` is the consumer: a callable given each batch (in ``output``
    form; lent for the call only: copy what you keep), or a synthetic
    ``"sleep:12ms"`` (a GPU-like step) / ``"spin:12ms"`` (CPU-bound).
    ``workers`` and ``prefetch`` are the lists to sweep (default 0, 1, 2,
    4, ... up to ``max_workers``; 1, 2, 4); ``batch_sizes`` adds batch sizes.
    ``progress(i, n, point)`` is called before and after each point.  Other
    keyword arguments are :class:`stoke.Loader`'s.

    Returns the knee as a dict (workers, prefetch, batch_size, samples/s,
    wait ratio, verdict, the reason), with ``dataloader_kwargs`` for
    ``torch.utils.data.DataLoader`` and ``loader_kwargs`` for
    :class:`stoke.Loader` (for a Python dataset: stoke.DataLoader's, the
    same names as torch's), and ``points``, every point measured.  A Python
    dataset is read in index order (``shuffle=True`` shuffles with stoke's
    seeded order), with ``collate_fn``, ``worker_init_fn`` and
    ``torch_threads`` as stoke.DataLoader takes them; the step gets each
    collated batch.

    For remote packed shards (``http(s)://``, ``s3://``) ``io_concurrency``
    is then swept at the worker knee, as ``stoke tune`` does: each point a
    source of its own at that many requests in flight (``io_sweep``: a
    list of values, default the ladder 1, 2, 4, ... while a doubling still
    gains; ``"off"``: none).  The result's ``io_sweep`` holds its points
    and knee, and ``io_concurrency`` and ``loader_kwargs`` the knee's."""
    from .dataloader import is_map_dataset, tune_spec
    if is_map_dataset(source):
        if transform is not None:
            raise ValueError("transform= applies to image datasets")
        spec = tune_spec(source, workers, max_workers,
                         collate_fn=loader_kwargs.pop("collate_fn", None),
                         worker_init_fn=loader_kwargs.pop("worker_init_fn",
                                                          None),
                         torch_threads=loader_kwargs.pop("torch_threads", 1))
        layout, names, keep = _stoke.LAYOUT_SINGLE, ("placeholder",), ()
    else:
        spec, layout, names, keep = describe_source(
            source, transform, loader_kwargs.pop("image_kind", None),
            loader_kwargs.pop("max_pixels", None),
            loader_kwargs.pop("max_bytes", None),
            loader_kwargs.pop("verify_checksums", False),
            remote_options(**{k: loader_kwargs.pop(k) for k in REMOTE_OPTIONS
                              if k in loader_kwargs}))
    config = loader_config(batch_size, **loader_kwargs)
    _, mode, to_torch, to_numpy = output_converters(output)
    if io_sweep is not None and io_sweep != "off":
        io_sweep = [int(v) for v in io_sweep]
        if not io_sweep or not all(1 <= v <= 64 for v in io_sweep):
            raise ValueError(f"io_sweep: expected 'off' or values in "
                             f"1..64, got {io_sweep!r}")
    t = {"workers": workers, "prefetch": prefetch,
         "batch_sizes": batch_sizes, "max_workers": max_workers,
         "warmup_epochs": warmup_epochs, "min_epochs": min_epochs,
         "min_measure_s": float(min_measure),
         "io_off": io_sweep == "off",
         "io_sweep": None if io_sweep == "off" else io_sweep}
    res = _stoke.tune(spec, config, t, _step_of(step), mode, layout, names,
                      to_torch, to_numpy, progress)
    del keep  # the arrays were borrowed for the sweep only
    knee = res["knee"]
    if knee is None:
        return {"points": res["points"], "reason": "no point was measured"}
    out = dict(knee)
    out["dataloader_kwargs"] = {
        k: v for k, v in knee["pytorch"].items() if k != "call"}
    out["dataloader_call"] = knee["pytorch"]["call"]
    out["loader_kwargs"] = {"batch_size": knee["batch_size"],
                            "num_workers": knee["workers"],
                            "prefetch": knee["prefetch"]}
    if spec.get("kind") == "dataset":
        # stoke.DataLoader counts prefetch per worker, as torch does.
        out["loader_kwargs"] = dict(out["dataloader_kwargs"])
    io = res.get("io_sweep")
    if io is not None:
        out["io_sweep"] = io
        if io.get("knee"):
            n = io["knee"]["io_concurrency"]
            out["io_concurrency"] = n
            out["loader_kwargs"]["io_concurrency"] = n
    out["points"] = res["points"]
    out["tolerance"] = res["tolerance"]
    return out
