"""The device stage from Python, on the test CUDA driver (tests/shim/:
the driver API on host memory, stricter than a GPU: streams are threads
with random delays, a slot read too early is poisoned, a held stream
stops where it is held).  This machine has no GPU, and torch here has no
CUDA, so CUDA batches are checked through stoke.Field (DLPack, read back
through the shim's host-backed device memory) rather than torch tensors."""

import ctypes
import os
import threading
import time
import warnings

import numpy as np
import pytest

import stoke

SHIM = os.environ.get("STOKE_CUDA_SHIM")
if not SHIM:
    from conftest import build_dir
    SHIM = str(build_dir() / "tests" / "libstoke_cuda_shim.so")
if not os.path.exists(SHIM):
    raise RuntimeError(f"the test CUDA driver {SHIM} is not built")
shim = ctypes.CDLL(SHIM)   # the same library stoke dlopens: one instance
shim.stoke_shim_get.restype = ctypes.c_longlong
shim.stoke_shim_get.argtypes = [ctypes.c_char_p]
shim.stoke_shim_hold.argtypes = [ctypes.c_void_p]


def count(key):
    return shim.stoke_shim_get(key.encode())


def arrays(n=32):
    return (np.arange(n * 3, dtype=np.float32).reshape(n, 3),
            np.arange(n, dtype=np.int64))


class _Managed(ctypes.Structure):  # DLManagedTensor's head (dlpack.h 0.6)
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int),
                ("device_id", ctypes.c_int), ("ndim", ctypes.c_int)]


_READER = []


def read_back(field):
    """The field's device bytes, read the way a consumer on a stream of its
    own may: a stream of the test's (not the loader's, which next() already
    made wait) is made to wait for the batch's copy through DLPack's stream
    protocol, the host waits for that stream (cuStreamSynchronize, in the
    primary context), then reads the shim's host-backed device memory.  The
    stream lives as long as the tests: a stream that read a batch must
    outlive the batch's release, which records an event on it."""
    ctx = ctypes.c_void_p()
    assert shim.cuInit(0) == 0
    assert shim.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
    assert shim.cuCtxPushCurrent_v2(ctx) == 0
    try:
        if not _READER:
            stream = ctypes.c_void_p()
            assert shim.cuStreamCreate(ctypes.byref(stream), 1) == 0
            _READER.append(stream)
        stream = _READER[0]
        field.__dlpack__(stream=stream.value)
        assert shim.cuStreamSynchronize(stream) == 0
    finally:
        shim.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
        shim.cuDevicePrimaryCtxRelease_v2(0)
    return ctypes.string_at(field.data_ptr, field.nbytes)


def capsule_device(cap):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    t = _Managed.from_address(get(cap, b"dltensor"))
    return t.device_type, t.device_id, t.data


def test_no_driver_falls_back_with_the_reason():
    x, y = arrays()
    loader = stoke.Loader((x, y), 8, device="cuda",
                          cuda_library="/nonexistent/libcuda.so.1",
                          output="numpy")
    info = loader.device_info()
    assert info["requested"] == "cuda" and info["backend"] == "host"
    assert "/nonexistent/libcuda.so.1" in info["reason"]
    assert sum(len(b) for _, b in loader) == 32  # runs all the same


def test_device_batches_through_dlpack():
    x, y = arrays()
    loader = stoke.Loader((x, y), 8, device="cuda", cuda_library=SHIM,
                          num_workers=2, output="stoke", warmup=0)
    info = loader.device_info()
    assert info["backend"] == "cuda" and info["device"] == 0, info
    assert "stoke shim" in info["name"] and info["device_slots"] >= 3
    waits0 = count("calls:cuStreamWaitEvent")
    seen = []
    for batch in loader:
        f = batch.f0
        assert f.memory == "cuda" and f.__dlpack_device__() == (2, 0)
        dtype, dev, ptr = capsule_device(f.__dlpack__(stream=2))
        assert (dtype, dev) == (2, 0) and ptr == f.data_ptr
        # The shim's device memory is host memory: read it back, once the
        # copy is done (reading it before would be reading too early).
        got = np.frombuffer(read_back(f), np.float32).reshape(f.shape)
        idx = batch.indices
        np.testing.assert_array_equal(got, x[idx])
        with pytest.raises(BufferError, match="CUDA device 0"):
            memoryview(f)
        with pytest.raises(BufferError):
            f.__dlpack__(dl_device=(1, 0))
        seen += idx
    assert sorted(seen) == list(range(32))
    # next() made the consumer's stream wait on each copy, and each
    # __dlpack__(stream=2) made stream 2 wait too: on the GPU, not the host.
    assert count("calls:cuStreamWaitEvent") - waits0 >= 2 * 4
    assert count("poison_reads") == 0 and count("bad_address") == 0
    with pytest.raises(stoke.ConfigError, match="numpy"):
        stoke.Loader((x, y), 8, device="cuda", cuda_library=SHIM,
                     output="numpy")


def test_pinned_slot_waits_for_the_release_stream():
    """x.to("cuda", non_blocking=True); del x: torch does not keep stoke's
    memory alive during the copy, so the slot is refilled only after the
    work queued on the stream current when the batch was handed out (here
    the legacy stream 0, held still by the shim) is done."""
    x, y = arrays()

    def fourth_next(hold):
        loader = stoke.Loader((x, y), 4, pin_memory=True, cuda_library=SHIM,
                              release_stream=lambda: 0, num_workers=1,
                              prefetch=1, output="torch")
        assert loader.device_info()["backend"] == "pinned"
        it = iter(loader)
        a = next(it)
        if hold:
            shim.stoke_shim_hold(None)   # stream 0 stops here
        del a                            # released onto the held stream
        b, c = next(it), next(it)        # the other two slots
        if hold:
            threading.Timer(0.4, shim.stoke_shim_unhold).start()
        t0 = time.monotonic()
        d = next(it)                     # needs a's slot
        dt = time.monotonic() - t0
        assert d[1].tolist() == [12, 13, 14, 15]
        del b, c, d
        return dt

    assert fourth_next(False) < 0.3
    assert fourth_next(True) >= 0.35


def test_pin_memory_without_a_driver_warns():
    x, y = arrays()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        loader = stoke.Loader((x, y), 8, pin_memory=True,
                              cuda_library="/nonexistent/libcuda.so.1")
    assert loader.device_info()["backend"] == "host"
    assert any("pageable" in str(m.message) for m in w)


def test_bad_device_names():
    x, y = arrays()
    for bad in ("gpu", "cuda:x", "cuda:"):
        with pytest.raises(ValueError, match="device"):
            stoke.Loader((x, y), 8, device=bad)


class FakeEvent:
    """A CUDA event on a stream with a clock of its own: the test moves the
    stream's time (FakeEvent.now, seconds) while the host barely runs, so
    the figures can only have come from the events, and they are exact
    however loaded the machine is."""
    made = 0
    now = 0.0

    def __init__(self):
        FakeEvent.made += 1
        self.t = None

    def record(self):
        self.t = FakeEvent.now

    def query(self):
        return self.t is not None

    def synchronize(self):
        pass

    def elapsed_time(self, other):  # milliseconds, as torch's
        return (other.t - self.t) * 1e3


def test_event_clock_reads_the_stream_not_the_host():
    def slow(n):
        for i in range(n):
            FakeEvent.now += 0.004  # the stream idles 4 ms for the batch
            yield (np.zeros(8), i)

    class Regen:
        def __iter__(self):
            return slow(6)

    clock = stoke.twoclock.EventTwoClock(Regen(), events=FakeEvent,
                                         warmup=1)
    for _ in range(3):
        for _ in clock:
            FakeEvent.now += 0.002  # the step's kernels run 2 ms
    st = clock.stats()
    assert st["steps"] == 12 and st["samples"] == 96
    # The host took microseconds per step; the stream's times are these.
    assert st["wait_p50_ms"] == pytest.approx(4.0, abs=0.1)
    assert st["compute_s"] == pytest.approx(0.002 * 12, rel=0.05)
    assert clock.verdict == "starving"
    assert FakeEvent.made >= 3 * 6 * 2
    # Without a GPU, TwoClock(sync="cuda") is a plain TwoClock: there is
    # nothing asynchronous to wait for.
    plain = stoke.TwoClock(range(3), sync="cuda")
    assert type(plain) is stoke.TwoClock and list(plain) == [0, 1, 2]


def test_dlpack_stream_values_of_the_array_api():
    """-1 means "do not synchronise" and must be taken; 0 is ambiguous for
    CUDA (legacy or per-thread?) and must be refused, as must anything
    below -1; 1 and 2 are the default streams, both made to wait."""
    x, y = arrays()
    loader = stoke.Loader((x, y), 8, device="cuda", cuda_library=SHIM,
                          output="stoke", warmup=0)
    for batch in loader:
        f = batch.f0
        waits0 = count("calls:cuStreamWaitEvent")
        dtype, dev, ptr = capsule_device(f.__dlpack__(stream=-1))
        assert (dtype, dev, ptr) == (2, 0, f.data_ptr)
        assert count("calls:cuStreamWaitEvent") == waits0  # no wait queued
        for bad in (0, -2):
            with pytest.raises(ValueError, match=f"stream={bad}"):
                f.__dlpack__(stream=bad)
        assert count("calls:cuStreamWaitEvent") == waits0
        f.__dlpack__(stream=1)
        f.__dlpack__(stream=2)
        assert count("calls:cuStreamWaitEvent") == waits0 + 2
        read_back(f)
        break


# ---- torch's streams, without a torch GPU --------------------------------
# torch here has no CUDA, so these tests stand in for torch.cuda with a fake
# whose current_stream(device) gives shim streams, and for torch's DLPack
# importer with one that keeps the capsule.

class _Stream:
    def __init__(self, handle):
        self.cuda_stream = handle


class _FakeCuda:
    """torch.cuda's current_stream: per device, settable like
    ``with torch.cuda.stream(s):``; device None is the current device 0."""
    def __init__(self, streams):
        self.streams = dict(streams)

    def current_stream(self, device=None):
        return _Stream(self.streams[0 if device is None else device])


def shim_stream(device=0):
    """A non-blocking stream in device's primary context, and a function
    that destroys it."""
    ctx, stream = ctypes.c_void_p(), ctypes.c_void_p()
    assert shim.cuInit(0) == 0
    assert shim.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device) == 0
    assert shim.cuCtxPushCurrent_v2(ctx) == 0
    assert shim.cuStreamCreate(ctypes.byref(stream), 1) == 0
    shim.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))

    def destroy():
        assert shim.cuCtxPushCurrent_v2(ctx) == 0
        assert shim.cuStreamDestroy_v2(stream) == 0
        shim.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
        shim.cuDevicePrimaryCtxRelease_v2(device)
    return stream.value, destroy


def read_on(ptr, nbytes, stream, device=0):
    """Device bytes read on `stream` (in device's context), after the work
    queued there."""
    ctx = ctypes.c_void_p()
    buf = ctypes.create_string_buffer(nbytes)
    assert shim.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device) == 0
    assert shim.cuCtxPushCurrent_v2(ctx) == 0
    try:
        assert shim.cuMemcpyDtoHAsync_v2(buf, ctypes.c_void_p(ptr),
                                         ctypes.c_size_t(nbytes),
                                         ctypes.c_void_p(stream)) == 0
        assert shim.cuStreamSynchronize(ctypes.c_void_p(stream)) == 0
    finally:
        shim.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
        shim.cuDevicePrimaryCtxRelease_v2(device)
    return buf.raw


def fake_torch(monkeypatch, cuda):
    """Loader(output="torch") as with a torch GPU: torch.cuda is `cuda`, and
    a delivered tensor is the DLPack capsule itself."""
    import stoke.loader as sl
    real = sl.output_converters
    monkeypatch.setattr(sl, "_torch_cuda", lambda: cuda)

    def converters(output):
        if output != "torch":
            return real(output)
        return "torch", sl._OUTPUTS["torch"], (lambda cap: cap), None
    monkeypatch.setattr(sl, "output_converters", converters)


def test_torch_current_stream_waits_at_each_delivery(monkeypatch):
    """Iterating under ``with torch.cuda.stream(s):`` (the loader built
    before): s, current at the delivery, waits for each batch's copy, not
    only the stream current at construction."""
    x, y = arrays()
    a, free_a = shim_stream()
    s, free_s = shim_stream()
    cuda = _FakeCuda({0: a})
    fake_torch(monkeypatch, cuda)
    loader = stoke.Loader((x, y), 8, device="cuda", cuda_library=SHIM,
                          num_workers=1, output="torch", warmup=0)
    assert loader.device_info()["backend"] == "cuda"
    cuda.streams[0] = s                 # with torch.cuda.stream(s):
    n = 0
    for xcap, _ in loader:
        n += 1
        assert count(f"waits:{s}") >= n, \
            "the current stream did not wait for the batch's copy"
        _, _, ptr = capsule_device(xcap)
        got = np.frombuffer(read_on(ptr, 8 * 3 * 4, s), np.float32)
        np.testing.assert_array_equal(got.reshape(8, 3),
                                      x[8 * (n - 1):8 * n])
        del xcap
    assert n == 4
    del loader
    free_a()
    free_s()
    assert count("poison_reads") == 0


def test_current_stream_of_the_loaders_device(monkeypatch):
    """device="cuda:1" while torch's current device is 0: the consumer's
    stream is device 1's current stream; device 0's would be another
    context's handle, refused by the driver at the first next()."""
    assert shim.stoke_shim_set(b"devices", 2) == 0
    try:
        s0, free0 = shim_stream(0)
        s1, free1 = shim_stream(1)
        fake_torch(monkeypatch, _FakeCuda({0: s0, 1: s1}))
        x, y = arrays()
        loader = stoke.Loader((x, y), 8, device="cuda:1", cuda_library=SHIM,
                              num_workers=1, output="stoke", warmup=0)
        assert loader.device_info()["device"] == 1
        for i, batch in enumerate(loader):
            f = batch.f0
            assert f.__dlpack_device__() == (2, 1)
            f.__dlpack__(stream=s1)
            got = np.frombuffer(read_on(f.data_ptr, f.nbytes, s1, 1),
                                np.float32).reshape(f.shape)
            np.testing.assert_array_equal(got, x[batch.indices])
            del f, batch
        del loader
        free0()
        free1()
    finally:
        shim.stoke_shim_set(b"devices", 1)
    assert count("poison_reads") == 0 and count("bad_address") == 0



def test_stoke_output_slot_waits_for_the_dlpack_stream():
    """output="stoke": a field read on stream S (``from_dlpack`` with
    ``__dlpack__(stream=S)``) keeps its slot until S's work queued by the
    release is done, not only cfg.cuda_stream's: the next copy into the
    slot must not overtake S's read."""
    x, y = arrays()
    s, free_s = shim_stream()
    loader = stoke.Loader((x, y), 8, device="cuda", cuda_library=SHIM,
                          num_workers=1, output="stoke", warmup=0,
                          device_prefetch=1, prefetch=2)
    slots = loader.device_info()["device_slots"]
    it = iter(loader)
    b0 = next(it)
    f = b0.f0
    f.__dlpack__(stream=s)           # S waits for the copy ...
    shim.stoke_shim_hold(ctypes.c_void_p(s))   # ... and reads later
    nbytes, ptr, want = f.nbytes, f.data_ptr, x[b0.indices].copy()
    ctx, buf = ctypes.c_void_p(), ctypes.c_void_p()
    assert shim.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
    assert shim.cuCtxPushCurrent_v2(ctx) == 0
    # Page-locked, so that the read is queued behind the hold and this
    # thread goes on (into pageable memory the call itself would wait).
    assert shim.cuMemHostAlloc(ctypes.byref(buf), ctypes.c_size_t(nbytes),
                               0) == 0
    assert shim.cuMemcpyDtoHAsync_v2(buf, ctypes.c_void_p(ptr),
                                     ctypes.c_size_t(nbytes),
                                     ctypes.c_void_p(s)) == 0
    shim.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
    del f, b0                        # released while S still reads
    later = [next(it) for _ in range(slots)]   # the last into b0's slot
    assert later[-1].f0.data_ptr == ptr
    # That copy waits behind the held reader: give it every chance to run
    # (it would within a millisecond) before the reader goes on.
    time.sleep(0.05)
    shim.stoke_shim_unhold()
    assert shim.cuCtxPushCurrent_v2(ctx) == 0
    assert shim.cuStreamSynchronize(ctypes.c_void_p(s)) == 0
    got = np.frombuffer(ctypes.string_at(buf.value, nbytes),
                        np.float32).reshape(want.shape).copy()
    assert shim.cuMemFreeHost(buf) == 0
    shim.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
    shim.cuDevicePrimaryCtxRelease_v2(0)
    np.testing.assert_array_equal(got, want,
                                  "the slot was refilled under S's read")
    del later, it, loader
    free_s()
    assert count("poison_reads") == 0
