"""Small parsers shared by the package: durations, byte counts, the
environment's distributed settings, and what torch is (if it imports)."""

import importlib.util
import os
import re

_DURATION = re.compile(
    r"^\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*(ns|us|ms|s|min|h)\s*$")
_UNITS_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
             "min": 60_000_000_000, "h": 3_600_000_000_000}


def parse_duration_ns(value, what):
    """'5ms', '1.5s', '250us', '90min', '8h' (the CLI's units) or a number
    of seconds -> integer ns."""
    if isinstance(value, bool):
        raise TypeError(f"{what}: expected a duration, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"{what}: {value!r} is negative")
        return int(round(value * 1e9))
    if str(value).strip() in ("0", "0.0"):
        return 0  # as the CLI: a bare number only for zero
    m = _DURATION.match(str(value))
    if not m:
        raise ValueError(f"{what}: expected a duration such as '5ms', "
                         f"'1.5s' or '8h', got {value!r}")
    return int(round(float(m.group(1)) * _UNITS_NS[m.group(2)]))


_BYTES = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([KMGT]?)(i?)(B?)\s*$", re.I)
_POW = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}


def parse_bytes(value, what):
    """8589934592, '8GiB', '512MiB', '100MB' (decimal), '4G' (binary)."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise TypeError(f"{what}: expected a byte count, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{what}: {value!r} is negative")
        return value
    m = _BYTES.match(str(value))
    if not m:
        raise ValueError(f"{what}: expected a size such as '8GiB' or "
                         f"'512MB', got {value!r}")
    number, prefix, binary, unit_b = m.groups()
    prefix = prefix.upper()
    # As the CLI reads them: K, M, G, T alone and KiB... are binary; KB... decimal.
    base = 1024 if (binary or not unit_b) else 1000
    return int(float(number) * base ** _POW[prefix])


_PRICE = re.compile(r"^\$?([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
                    r"(/h|/hour|/min|/s)?$")
_PER_HOUR = {None: 1.0, "/h": 1.0, "/hour": 1.0, "/min": 60.0, "/s": 3600.0}


def parse_price(value, what):
    """The accelerator's price per hour, as the CLI's --gpu-price reads it:
    2.5 (per hour), '2.50/h', '$2.50/h', '0.05/min', '0.0007/s'; None: 0
    (no price)."""
    if value is None:
        return 0.0
    if isinstance(value, bool):
        raise TypeError(f"{what}: expected a price, got {value!r}")
    if isinstance(value, (int, float)):
        x = float(value)
        if not 0 <= x <= 1e9:
            raise ValueError(f"{what}: {value!r} is not a price per hour")
        return x
    m = _PRICE.match(str(value).strip())
    if not m or float(m.group(1)) > 1e9:
        raise ValueError(f"{what}: expected a price such as '2.50/h' (or "
                         f"/min, /s), got {value!r}")
    return float(m.group(1)) * _PER_HOUR[m.group(2)]


def env_rank_world():
    """RANK and WORLD_SIZE as torchrun sets them (0 and 1 when unset)."""
    def get(name, default):
        v = os.environ.get(name)
        if v is None or v == "":
            return default
        try:
            return int(v)
        except ValueError:
            raise ValueError(f"the environment's {name}={v!r} is not an integer")
    return get("RANK", 0), get("WORLD_SIZE", 1)


def torch_available():
    return importlib.util.find_spec("torch") is not None


def is_torch_tensor(x):
    t = type(x)
    return t.__module__.startswith("torch") and t.__name__ in ("Tensor", "Parameter")


def deadline_kw(train_epochs, deadline):
    """diagnose()/report()'s train_epochs and deadline (seconds, or a
    duration string: '8h') as the extension takes them: {} when neither is
    given, else both, the deadline in seconds."""
    if train_epochs is None and deadline is None:
        return {}
    if train_epochs is None or deadline is None:
        raise ValueError("train_epochs and deadline go together")
    if isinstance(train_epochs, bool) or not isinstance(train_epochs, int) \
            or train_epochs < 1:
        raise ValueError(f"train_epochs: expected a positive integer, got "
                         f"{train_epochs!r}")
    ns = parse_duration_ns(deadline, "deadline")
    if ns <= 0:
        raise ValueError(f"deadline: expected a positive duration, got "
                         f"{deadline!r}")
    return {"train_epochs": train_epochs, "deadline": ns / 1e9}
