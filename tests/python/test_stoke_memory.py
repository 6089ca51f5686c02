"""Batches without a copy, and their lifetime.

Every view of a batch (stoke.Field, NumPy arrays through the buffer
protocol, torch tensors through DLPack) shares the loader's slot: the tests
compare data pointers and write through one view to read through the
others.  A slot is reused only when the batch and every view are gone;
holding every slot raises BusyError."""

import ctypes
import gc
import sys

import numpy as np
import pytest
import torch
import torch.utils.dlpack

import stoke


def batch_loader(n=32, batch=4, workers=1, prefetch=2, **kw):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    y = np.arange(n, dtype=np.int64)
    return stoke.Loader({"x": x, "y": y}, batch, num_workers=workers,
                        prefetch=prefetch, output="stoke", **kw), x, y


def test_every_view_shares_the_slot():
    loader, x, _ = batch_loader()
    batch = next(iter(loader))
    f = batch.x
    a = np.asarray(f)
    t = torch.utils.dlpack.from_dlpack(f)
    t2 = f.torch()
    a2 = f.numpy()
    n3 = np.from_dlpack(f)
    ptr = f.data_ptr
    assert a.__array_interface__["data"][0] == ptr
    assert t.data_ptr() == ptr and t2.data_ptr() == ptr
    assert a2.__array_interface__["data"][0] == ptr
    assert n3.__array_interface__["data"][0] == ptr
    assert a.shape == (4, 3) and t.shape == (4, 3)
    assert not np.shares_memory(a, x)   # a copy *into* the slot, once
    # Writes through one view show through the others.
    a[0, 0] = -1.5
    assert t[0, 0].item() == -1.5 and n3[0, 0] == -1.5
    t[1, 2] = 42.0
    assert a[1, 2] == 42.0 and np.asarray(batch["x"])[1, 2] == 42.0
    memoryview(f).cast("B")[0:4] = np.float32(7).tobytes()
    assert a[0, 0] == 7.0


def test_torch_output_shares_one_slot_per_batch():
    x = np.zeros((8, 2), np.float32)
    loader = stoke.Loader((x, np.arange(8)), 4, output="torch", num_workers=1)
    ptrs = set()
    for bx, by in loader:
        ptrs.add(bx.data_ptr())
        assert not np.shares_memory(bx.numpy(), x)
    assert len(ptrs) >= 1


def test_slot_returns_when_the_last_view_goes():
    # prefetch 1 with a for-loop's two held batches: 3 slots.
    loader, _, _ = batch_loader(n=64, batch=4, workers=1, prefetch=1)
    it = iter(loader)
    held = [next(it) for _ in range(3)]
    with pytest.raises(stoke.BusyError, match="held by Python"):
        next(it)
    # A view outliving its batch keeps the slot.
    view = np.asarray(held[0].x)
    ptr = view.__array_interface__["data"][0]
    del held[0]
    gc.collect()
    with pytest.raises(stoke.BusyError):
        next(it)
    assert view[0, 0] == 0.0
    del view
    b = next(it)                       # the slot came back
    assert b.number == 3
    assert b.x.data_ptr == ptr         # and it was that slot
    b.release()


def test_release_early_and_released_batches_raise():
    loader, _, _ = batch_loader(n=64, batch=4, prefetch=1)
    it = iter(loader)
    batches = [next(it) for _ in range(3)]
    batches[0].release()
    assert batches[0].released
    with pytest.raises(stoke.Error, match="released"):
        batches[0].x
    with pytest.raises(stoke.Error, match="released"):
        batches[0].indices
    batches[0].release()               # twice is harmless
    b = next(it)                       # its slot is free again
    with b:
        assert b.size == 4
    assert b.released


def test_release_keeps_views_valid():
    loader, _, _ = batch_loader(n=16, batch=4, prefetch=1)
    it = iter(loader)
    b = next(it)
    t = torch.utils.dlpack.from_dlpack(b.y)
    b.release()
    more = [next(it), next(it)]        # fills the other slots
    assert t.tolist() == [0, 1, 2, 3]  # the view still owns its slot
    with pytest.raises(stoke.BusyError):
        next(it)
    del t
    assert next(it).number == 3
    del more


def test_refcounts():
    loader, _, _ = batch_loader()
    b = next(iter(loader))
    base = sys.getrefcount(b)
    f = b.x
    assert sys.getrefcount(b) == base  # a field does not hold its batch
    assert b.x is f                    # fields are made once
    a = np.asarray(f)
    assert sys.getrefcount(f) >= 3     # ours, the batch's, the export's
    del a
    gc.collect()


def test_views_outlive_batch_and_loader():
    loader, x, _ = batch_loader(n=8, batch=4, workers=2)
    b = next(iter(loader))
    t = b.x.torch()
    a = np.asarray(b.y)
    del b
    loader.close()
    del loader
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), x[:4])
    assert a.tolist() == [0, 1, 2, 3]
    t.add_(1)                          # still writable, still owned
    assert t[0, 0].item() == 1.0


def test_torch_tensors_outlive_the_loader():
    x = np.ones((8, 2), np.float32)
    loader = stoke.Loader((x, np.arange(8)), 4, num_workers=2)
    keep = [bx for bx, _ in loader]
    del loader
    gc.collect()
    assert [float(k.sum()) for k in keep] == [8.0, 8.0]


def test_dlpack_protocol_details():
    loader, _, _ = batch_loader()
    f = next(iter(loader)).x
    assert f.__dlpack_device__() == (1, 0)
    cap = f.__dlpack__()
    assert "dltensor" in repr(cap) and "versioned" not in repr(cap)
    # numpy 1.24 calls __dlpack__() bare; newer consumers ask for a version.
    assert "dltensor" in repr(f.__dlpack__(stream=None))
    assert "dltensor" in repr(f.__dlpack__(max_version=(0, 8)))
    assert "dltensor" in repr(f.__dlpack__(unknown_future_kw=1))
    with pytest.raises(BufferError):
        f.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        f.__dlpack__(dl_device=(2, 0))
    assert "dltensor" in repr(f.__dlpack__(dl_device=(1, 0)))
    # A capsule nobody consumed frees its count when it goes.
    for _ in range(1000):
        f.__dlpack__()
    gc.collect()


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int),
                ("device_id", ctypes.c_int), ("ndim", ctypes.c_int),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Versioned(ctypes.Structure):
    _fields_ = [("version", _DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64),
                ("dl_tensor", _DLTensor)]


def test_dlpack_versioned_capsule_layout():
    """DLPack 1.0, read as the specification lays it out (ctypes is the
    independent reader here; torch 1.13 and numpy 1.24 predate 1.0)."""
    loader, _, _ = batch_loader()
    f = next(iter(loader)).y
    cap = f.__dlpack__(max_version=(1, 0))
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    p = get(cap, b"dltensor_versioned")
    mt = _Versioned.from_address(p)
    assert (mt.version.major, mt.version.minor) == (1, 0)
    assert mt.flags == 0                     # writable, not a copy
    t = mt.dl_tensor
    assert t.data == f.data_ptr and t.device_type == 1 and t.ndim == 1
    assert (t.code, t.bits, t.lanes) == (0, 64, 1)    # int64
    assert t.shape[0] == 4 and t.strides[0] == 1 and t.byte_offset == 0
    del cap                                  # unconsumed: deleter runs


TORCH_OF = {np.uint8: torch.uint8, np.int32: torch.int32,
            np.int64: torch.int64, np.float16: torch.float16,
            np.float32: torch.float32, np.float64: torch.float64}


def test_dtypes_round_trip():
    for dt, tdt in TORCH_OF.items():
        a = (np.arange(24) % 7).astype(dt).reshape(6, 2, 2)
        loader = stoke.Loader(a, 3, output="stoke")
        f = next(iter(loader))["data"]
        assert np.asarray(f).dtype == dt
        np.testing.assert_array_equal(np.asarray(f), a[:3])
        t = f.torch()
        assert t.dtype == tdt
        np.testing.assert_array_equal(t.numpy(), a[:3])


def test_torch_source_is_borrowed():
    x = torch.arange(12, dtype=torch.float32).reshape(6, 2)
    loader = stoke.Loader(x, 3, output="numpy")
    x[0, 0] = 100.0                    # the loader reads the tensor itself
    first = next(iter(loader))
    assert first[0, 0] == 100.0
