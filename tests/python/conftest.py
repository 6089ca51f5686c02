"""Shared fixtures of the Python tests.

The module's tests (test_stoke_*.py) import the stoke package from a build
tree: CTest sets PYTHONPATH to build/python; by hand,

    PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/python

Under CTest (STOKE_TESTS_STRICT=1) a missing dependency (torch, numpy, PIL,
the built module) is a failure, never a skip."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
STRICT = bool(os.environ.get("STOKE_TESTS_STRICT"))


def build_dir():
    b = pathlib.Path(os.environ.get("STOKE_BUILD_DIR", "build"))
    return b if b.is_absolute() else ROOT / b


def cli_path():
    """The stoke tool of the build tree."""
    return os.environ.get("STOKE_CLI") or str(build_dir() / "stoke")


def python_env(**extra):
    """The environment a child interpreter needs to import the build's
    stoke (and, under ASan, its preloaded runtime)."""
    env = dict(os.environ)
    path = str(build_dir() / "python")
    if os.environ.get("PYTHONPATH"):
        path = os.environ["PYTHONPATH"]
    env["PYTHONPATH"] = path
    env.update(extra)
    return env


def run_python(code_or_args, timeout=120, **kw):
    args = [sys.executable] + (["-c", code_or_args]
                               if isinstance(code_or_args, str)
                               else list(code_or_args))
    return subprocess.run(args, env=python_env(), capture_output=True,
                          text=True, timeout=timeout, **kw)


def make_image_folder(root, classes=3, per_class=8, size=(64, 48), seed=0):
    """An ImageFolder of small JPEGs with a per-class colour, so that a
    model can learn the label from the pixels."""
    from PIL import Image
    import numpy as np
    rng = np.random.default_rng(seed)
    root = pathlib.Path(root)
    for c in range(classes):
        d = root / f"class{c}"
        d.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            base = np.zeros((size[1], size[0], 3), np.uint8)
            base[..., c % 3] = 200
            noise = rng.integers(0, 40, base.shape, dtype=np.uint8)
            Image.fromarray(base + noise).save(d / f"{i:03d}.jpg", quality=90)
    return root


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory):
    return make_image_folder(tmp_path_factory.mktemp("images") / "train")
