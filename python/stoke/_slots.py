"""Sample rows in shared memory for stoke.DataLoader's worker processes.

Without them each tensor of each sample would cross as torch pickles it:
a new shared-memory segment per tensor, its file descriptor sent over a
socket.  Instead each worker keeps an arena, one shared block of rows made
at its first sample: a sample whose leaves are plain CPU tensors and
NumPy arrays is written into a free row, and only its description (the
structure, each leaf's offset, dtype and shape) crosses the queue.  The
arena itself crosses once, with the first row that uses it.  The main
process views the rows, collates the batch out of them (torch.stack: the
copy default_collate makes anyway) and marks the rows free; the worker
then reuses them.

A sample that does not fit (another kind of leaf, larger than a row, or
every row still in use) crosses whole, as before: nothing waits for a row.
"""

import os

import numpy as np

from . import _stoke

_ALIGN = 64          # each leaf starts on a cache line
_ROW_ROUND = 4096    # a row's size, rounded up to a page
_FREE, _BUSY = 0, 1
_SCALARS = (int, float, bool, str, bytes, type(None))


class Leaf:
    """A tensor or array of a sample, written into its row."""

    __slots__ = ("offset", "dtype", "shape", "nbytes", "numpy")

    def __init__(self, offset, dtype, shape, nbytes, numpy):
        self.offset, self.dtype = offset, dtype
        self.shape, self.nbytes = shape, nbytes
        self.numpy = numpy   # given back as an ndarray, as it was made

    def __reduce__(self):   # (pickled as a call: a quarter of the default)
        return Leaf, (self.offset, self.dtype, self.shape, self.nbytes,
                      self.numpy)


class Row:
    """What crosses the queue for a sample written into a row."""

    __slots__ = ("worker", "arena_id", "row", "tree", "arena")

    def __init__(self, worker, arena_id, row, tree, arena):
        self.worker, self.arena_id, self.row = worker, arena_id, row
        self.tree, self.arena = tree, arena

    def __reduce__(self):
        return Row, (self.worker, self.arena_id, self.row, self.tree,
                     self.arena)


def _plain(x, torch):
    """The tensor for leaf x when it can be written into a row (exact
    torch.Tensor on the CPU without autograd, or a NumPy array of a dtype
    torch has), else None."""
    if type(x) is torch.Tensor:
        if x.device.type != "cpu" or x.requires_grad or x.is_sparse or \
                x.is_quantized or x.is_nested:
            return None
        return x
    if type(x) is np.ndarray:
        if x.dtype.kind not in "biufc" or x.dtype.byteorder == ">":
            return None
        try:
            # (not np.ascontiguousarray: it makes a 0-d array 1-d)
            return torch.from_numpy(x if x.flags.c_contiguous else x.copy())
        except (TypeError, ValueError):
            return None
    return None


def _describe(x, torch, leaves):
    """x with each plain leaf replaced by a Leaf (its tensor appended to
    leaves), or None when some part cannot cross this way."""
    t = _plain(x, torch)
    if t is not None:
        leaves.append(t)
        return Leaf(0, t.dtype, tuple(t.shape), t.numel() * t.element_size(),
                    type(x) is np.ndarray)
    if isinstance(x, (torch.Tensor, np.ndarray)):
        return None
    if type(x) is dict:
        out = {}
        for k, v in x.items():
            d = _describe(v, torch, leaves)
            if d is None:
                return None
            out[k] = d
        return out
    if type(x) in (list, tuple) or (isinstance(x, tuple) and
                                    hasattr(x, "_fields")):
        out = []
        for v in x:
            d = _describe(v, torch, leaves)
            if d is None:
                return None
            out.append(d)
        if type(x) is list:
            return out
        return type(x)(*out) if hasattr(x, "_fields") else tuple(out)
    return x    # a number, a string, None: crosses as it is


def _place(tree, offsets):
    """Give each Leaf of tree its offset, in the order _describe met them."""
    it = iter(offsets)

    def walk(x):
        if isinstance(x, Leaf):
            x.offset = next(it)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
    walk(tree)


class WorkerArena:
    """A worker's side: write samples into rows of its arena."""

    def __init__(self, worker_id, rows):
        self.worker_id, self.rows = worker_id, rows
        self.arena = None      # uint8 (rows, row_bytes), shared
        self.flags = None      # int64 (rows,), shared: FREE / BUSY
        # Unique to the process: a worker id whose process left
        # (num_workers="auto" shrank) and came back makes arenas anew
        # while the old one's rows may still be in the main process.
        self.arena_id = (os.getpid() << 20) - 1
        self.sent = False
        self._dst = {}   # (row, offset, dtype, shape) -> its view

    def _make(self, nbytes, torch):
        row_bytes = -(-max(nbytes, 1) * 5 // 4 // _ROW_ROUND) * _ROW_ROUND
        self.arena = torch.zeros((self.rows, row_bytes),
                                 dtype=torch.uint8).share_memory_()
        self.flags = torch.zeros((self.rows,), dtype=torch.int64
                                 ).share_memory_()
        self._flags = self.flags.numpy()
        self.arena_id += 1
        self.sent = False
        self._dst = {}

    def write(self, sample, torch):
        """The Row for sample, written; or None (it crosses whole)."""
        if type(sample) in _SCALARS:
            return None     # no leaf: it crosses as it is
        leaves = []
        tree = _describe(sample, torch, leaves)
        if tree is None or not leaves:
            return None
        offsets, size = [], 0
        for t in leaves:
            size = -(-size // _ALIGN) * _ALIGN
            offsets.append(size)
            size += t.numel() * t.element_size()
        if self.arena is None:
            self._make(size, torch)
        if size > self.arena.shape[1]:
            return None
        free = np.flatnonzero(self._flags == _FREE)
        if free.size == 0:
            return None
        r = int(free[0])
        _stoke.shared_store(self._flags, r, _BUSY)
        views = self._dst
        for t, off in zip(leaves, offsets):
            key = (r, off, t.dtype, t.shape)
            dst = views.get(key)
            if dst is None:
                n = t.numel() * t.element_size()
                if not n:
                    continue
                if len(views) > 4096:
                    views.clear()
                dst = views[key] = self.arena[r][off:off + n].view(
                    t.dtype).view(t.shape)
            dst.copy_(t)
        _place(tree, offsets)
        arena = None if self.sent else (self.arena, self.flags)
        self.sent = True
        return Row(self.worker_id, self.arena_id, r, tree, arena)


class MainArenas:
    """The main process's side: the workers' arenas it has been sent."""

    def __init__(self):
        self.arenas = {}   # (worker, arena_id) -> (arena, flags numpy)
        # (worker, arena_id, row, offset, dtype, shape, numpy) -> the
        # leaf's view of its row: rows are reused, so are their views.
        self._views = {}

    def register(self, row):
        """Take in the arena a Row brings (the first of each arena)."""
        if row.arena is not None:
            self.arenas[(row.worker, row.arena_id)] = (
                row.arena[0], row.arena[1].numpy(), row.arena[1])
            row.arena = None

    def sample(self, row):
        """The sample of a Row, its leaves viewing the row (valid until
        free(row))."""
        self.register(row)
        where = (row.worker, row.arena_id, row.row)
        views = self._views

        def build(x):
            if isinstance(x, Leaf):
                key = where + (x.offset, x.dtype, x.shape, x.numpy)
                t = views.get(key)
                if t is None:
                    if len(views) > 8192:
                        views.clear()
                    mem = self.arenas[where[:2]][0][where[2]]
                    t = mem[x.offset:x.offset + x.nbytes].view(
                        x.dtype).view(x.shape)
                    t = views[key] = t.numpy() if x.numpy else t
                return t
            if isinstance(x, dict):
                return {k: build(v) for k, v in x.items()}
            if type(x) is list:
                return [build(v) for v in x]
            if isinstance(x, tuple) and hasattr(x, "_fields"):
                return type(x)(*[build(v) for v in x])
            if type(x) is tuple:
                return tuple(build(v) for v in x)
            return x
        return build(row.tree)

    def shared_bytes(self):
        """The arenas' shared memory (rows and flags), each once."""
        return sum(a.numel() * a.element_size() + f.numel() * f.element_size()
                   for a, _, f in self.arenas.values())

    def free(self, row):
        entry = self.arenas.get((row.worker, row.arena_id))
        if entry is not None:
            _stoke.shared_store(entry[1], row.row, _FREE)
