"""stoke keeps an accelerator fed, and tells you, with measured numbers,
whether it is waiting for data and what to do about it.

    loader = stoke.Loader("train/", batch_size=256, num_workers=4,
                          transform="random-resized-crop=224,flip,"
                                    "normalize=imagenet,chw,f32")
    for x, y in loader:          # torch tensors sharing stoke's memory
        train_step(x, y)
    print(loader.report())       # the two clocks, the verdict, the advice

    for x, y in stoke.TwoClock(torch_loader):   # any existing loop
        train_step(x, y)

    python3 -m stoke.doctor train.py            # an unmodified script

    for x, y in stoke.DataLoader(dataset, batch_size=32, num_workers=8):
        train_step(x, y)         # torch's DataLoader, on threads

The pieces: :class:`Loader` (paths, arrays, synthetic sources),
:class:`DataLoader` (torch's DataLoader for any Python dataset),
:func:`get_worker_info`, :func:`gather_stats` (every rank's clocks),
:class:`Batch` and :class:`Field` (zero-copy views: DLPack and the buffer
protocol), :class:`TwoClock`, :func:`tune`, :func:`synthetic`, and the
errors, all subclasses of :class:`Error`."""

from . import _stoke
from ._stoke import (Batch, BudgetError, BusyError, ConfigError, Error, Field,
                     FormatError, IOError, SampleError, SampleTimeout)
from .dataloader import get_worker_info
from .distributed import gather_stats
from .loader import Loader, Synthetic, synthetic
from .tune import tune
from .twoclock import TwoClock

__version__ = _stoke.version()

__all__ = [
    "Batch", "BudgetError", "BusyError", "ConfigError", "DataLoader", "Error",
    "Field", "FormatError", "IOError", "Loader", "SampleError",
    "SampleTimeout", "Synthetic", "TwoClock", "gather_stats",
    "get_worker_info", "synthetic", "tune", "__version__",
]


def __getattr__(name):
    # DataLoader subclasses torch's: made (and torch imported) when first
    # asked for, not at `import stoke`.
    if name == "DataLoader":
        from .dataloader import dataloader_class
        cls = globals()["DataLoader"] = dataloader_class()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
