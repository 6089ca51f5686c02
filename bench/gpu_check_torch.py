"""bench/gpu_check_torch.py — what users run, on a GPU: stoke.Loader(device=
"cuda") from PyTorch, each result checked bit for bit against the host path
(bench/gpu_check.sh runs it when the machine's Python has torch with CUDA).

  1. output="torch" iterated under ``with torch.cuda.stream(s):`` (the
     loader built before), a kernel on s reading each batch;
  2. output="stoke", each field taken with torch.from_dlpack on a side
     stream (``__dlpack__(stream=...)``), read there;
  3. cuda_stream=2, the per-thread default stream;
  4. device 1 when there are two GPUs.

Each case prints one line: "ok" or "FAIL" with the first difference.  Exit
status 0 when every case held.

Every case reads each batch back to the host (.cpu(), or a synchronised
stream) before it releases the batch, so what they check is the wait for
the copy (the stream that reads a batch sees all of it), not that a slot
is never refilled under a reader still running: nothing is left running on
a released batch.  tests/unit/test_device.c checks that against the test
driver's held streams.

Without torch's CUDA (``--shim``, the test driver of tests/shim/ in
STOKE_CUDA_LIBRARY) the same cases run on stoke's DLPack fields read back
through the driver (a side stream made to wait, then the host-backed
memory), so that the script's logic is exercised on a machine without a
GPU."""

import ctypes
import os
import sys
import time

import numpy as np

import stoke

N, B = 96, 8


def source():
    x = (np.arange(N * 3 * 16 * 16, dtype=np.uint32) * 2654435761 % 251)
    x = x.astype(np.float32).reshape(N, 3, 16, 16)
    return x, np.arange(N, dtype=np.int64)


def host_batches(x, y):
    loader = stoke.Loader((x, y), B, num_workers=2, output="numpy",
                          shuffle=True, seed=5, warmup=0)
    return [(a.copy(), b.copy()) for a, b in loader]


def compare(name, got, want):
    if len(got) != len(want):
        print(f"  {name}: FAIL ({len(got)} batches, the host path "
              f"{len(want)})")
        return False
    for i, ((ga, gb), (wa, wb)) in enumerate(zip(got, want)):
        if ga.tobytes() != wa.tobytes() or gb.tobytes() != wb.tobytes():
            print(f"  {name}: FAIL at batch {i} (labels {gb[:4]} against "
                  f"{wb[:4]})")
            return False
    print(f"  {name}: ok ({len(got)} batches bit for bit)")
    return True


# ---- on torch's CUDA ---------------------------------------------------------

def torch_cases(x, y, want):
    import torch
    ok = True
    kw = dict(num_workers=2, shuffle=True, seed=5, warmup=0)

    loader = stoke.Loader((x, y), B, device="cuda", output="torch", **kw)
    s = torch.cuda.Stream()
    got = []
    with torch.cuda.stream(s):
        for a, b in loader:
            # A kernel on s reads the batch; the copy back waits for s.
            got.append(((a * 1).cpu().numpy(), b.cpu().numpy()))
    ok &= compare("output='torch' under torch.cuda.stream(s)", got, want)
    del loader

    loader = stoke.Loader((x, y), B, device="cuda", output="stoke", **kw)
    side = torch.cuda.Stream()
    got = []
    for batch in loader:
        with torch.cuda.stream(side):
            a = torch.from_dlpack(batch.f0)
            b = torch.from_dlpack(batch.f1)
            got.append(((a * 1).cpu().numpy(), b.cpu().numpy()))
        del a, b, batch
    ok &= compare("output='stoke' + from_dlpack on a side stream", got,
                  want)
    del loader

    loader = stoke.Loader((x, y), B, device="cuda", output="torch",
                          cuda_stream=2, **kw)
    got = [((a * 1).cpu().numpy(), b.cpu().numpy()) for a, b in loader]
    ok &= compare("cuda_stream=2 (the per-thread default stream)", got, want)
    del loader

    if torch.cuda.device_count() >= 2:
        loader = stoke.Loader((x, y), B, device="cuda:1", output="torch", **kw)
        got = []
        with torch.cuda.device(1):
            for a, b in loader:
                assert a.device.index == 1, a.device
                got.append(((a * 1).cpu().numpy(), b.cpu().numpy()))
        ok &= compare("device='cuda:1'", got, want)
        del loader
    else:
        print("  device='cuda:1': skipped (one GPU)")
    torch.cuda.synchronize()
    return ok


# ---- on the test driver (no torch CUDA) --------------------------------------

_NP = {"u8": np.uint8, "i8": np.int8, "i16": np.int16, "i32": np.int32,
       "i64": np.int64, "f16": np.float16, "f32": np.float32,
       "f64": np.float64, "bool": np.bool_}


class Driver:
    """The few driver calls a side stream needs, from the library stoke
    opened (STOKE_CUDA_LIBRARY)."""

    def __init__(self, path, device=0):
        self.cu = ctypes.CDLL(path)
        self.ctx = ctypes.c_void_p()
        assert self.cu.cuInit(0) == 0
        assert self.cu.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx),
                                                device) == 0
        self.device = device

    def __enter__(self):
        assert self.cu.cuCtxPushCurrent_v2(self.ctx) == 0
        return self

    def __exit__(self, *exc):
        self.cu.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))

    def stream(self):
        s = ctypes.c_void_p()
        with self:
            assert self.cu.cuStreamCreate(ctypes.byref(s), 1) == 0
        return s.value

    def read(self, field, stream):
        """The field's bytes read on `stream`, after DLPack's wait."""
        field.__dlpack__(stream=stream)
        with self:
            assert self.cu.cuStreamSynchronize(ctypes.c_void_p(stream)) == 0
        raw = ctypes.string_at(field.data_ptr, field.nbytes)
        return np.frombuffer(raw, dtype=_NP[field.dtype]).reshape(
            field.shape).copy()


def shim_cases(x, y, want, path):
    ok = True
    kw = dict(num_workers=2, shuffle=True, seed=5, warmup=0,
              cuda_library=path, output="stoke")
    drv = Driver(path)
    side = drv.stream()   # lives as long as the script: a reader must
    got = []              # outlive the batches it read
    for batch in stoke.Loader((x, y), B, device="cuda", **kw):
        got.append((drv.read(batch.f0, side), drv.read(batch.f1, side)))
        del batch
    ok &= compare("output='stoke' read on a side stream", got, want)
    got = []
    for batch in stoke.Loader((x, y), B, device="cuda", cuda_stream=2, **kw):
        got.append((drv.read(batch.f0, 2), drv.read(batch.f1, 2)))
        del batch
    ok &= compare("cuda_stream=2 (the per-thread default stream)", got, want)
    devices = int(os.environ.get("STOKE_SHIM_DEVICES", "1"))
    if devices >= 2:
        d1 = Driver(path, 1)
        s1 = d1.stream()
        got = []
        for batch in stoke.Loader((x, y), B, device="cuda:1", **kw):
            assert batch.f0.__dlpack_device__() == (2, 1)
            got.append((d1.read(batch.f0, s1), d1.read(batch.f1, s1)))
            del batch
        ok &= compare("device='cuda:1'", got, want)
    else:
        print("  device='cuda:1': skipped (one device)")
    return ok


def main():
    t0 = time.monotonic()
    x, y = source()
    want = host_batches(x, y)
    if "--shim" in sys.argv:
        path = os.environ.get("STOKE_CUDA_LIBRARY")
        if not path:
            print("  --shim needs STOKE_CUDA_LIBRARY (the test driver)")
            return 2
        print(f"  on the test driver {path} (no torch CUDA)")
        ok = shim_cases(x, y, want, path)
    else:
        import torch
        print(f"  torch {torch.__version__}, {torch.cuda.device_count()} "
              f"GPU(s): {torch.cuda.get_device_name(0)}")
        ok = torch_cases(x, y, want)
    print(f"  python checks {'held' if ok else 'FAILED'} in "
          f"{time.monotonic() - t0:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
