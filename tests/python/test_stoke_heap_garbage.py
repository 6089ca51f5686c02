"""A batch's bytes do not depend on what the heap held before.

valgrind's memcheck reports "uninitialised value" in resample.c's
horizontal pass on JPEGs decoded through libjpeg-turbo's SIMD routines
(origin: its main controller's buffer), and none with JSIMD_FORCENONE=1:
its tracking through vector instructions is approximate.  This is the
check that the report is no defect of ours: the same epochs are read in
child interpreters whose glibc fills every allocation with a different
byte (MALLOC_PERTURB_), from a folder of 4:2:0 JPEGs of odd sizes and
from the same images packed, with crop decoding and restart cuts.  Any
pixel that read memory nobody wrote would differ between the fills."""

import random
import subprocess
import sys

import pytest

from conftest import cli_path, python_env

PIL = pytest.importorskip("PIL.Image")

CHILD = r"""
import hashlib, sys
import stoke
loader = stoke.Loader(sys.argv[1], batch_size=5, num_workers=2, seed=11,
                      shuffle=True,
                      transform="random-resized-crop=96,flip,chw,u8")
h = hashlib.sha256()
for epoch in range(2):
    for image, label in loader:
        h.update(image.numpy().tobytes())
        h.update(label.numpy().tobytes())
print(h.hexdigest())
"""


def make_folder(root):
    rng = random.Random(5)
    for c in ("a", "b"):
        (root / c).mkdir(parents=True)
        for i in range(7):
            w, h = rng.randrange(41, 333, 2) + 1, rng.randrange(37, 301)
            img = PIL.new("RGB", (w, h))
            img.putdata([((x * 13) % 256, (x // w * 5) % 256,
                          rng.randrange(256)) for x in range(w * h)])
            img.save(root / c / f"{i}.jpg", quality=85, subsampling=2)


def digest(path, fill):
    env = python_env(MALLOC_PERTURB_=str(fill))
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_batches_do_not_read_uninitialised_memory(tmp_path):
    folder = tmp_path / "folder"
    make_folder(folder)
    packed = tmp_path / "packed"
    res = subprocess.run([cli_path(), "pack", str(folder), "-o",
                          str(packed / "p")], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    shard = packed / "p-00000.stoke"
    seen = {(name, fill): digest(path, fill)
            for name, path in (("folder", folder), ("packed", shard))
            for fill in (1, 165)}
    assert len(set(seen.values())) == 1, seen
