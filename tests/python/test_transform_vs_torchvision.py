"""stoke's src/transform/ against torchvision on PIL images.

The C side runs through tests/python/tf_cli.c, compiled here against the
static library of a build tree ($STOKE_BUILD_DIR, default "build", relative
to the repository root); the tests skip when that library is missing.
Run with Debian's interpreter, which has python3-torchvision:

    STOKE_BUILD_DIR=build-tf /usr/bin/python3 -m pytest -s tests/python

stoke uses Pillow's own fixed-point resampler, and the README says the
result is bit-identical to torchvision's PIL path: every u8 comparison
asserts equality (the PSNR and the largest difference are only printed, to
say how far off a failure is), f16 compares bit patterns, f32 values.
"""

import math
import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

# Under CTest (STOKE_TESTS_STRICT=1) a missing reference is a failure, not a
# skip: CI must not pass by comparing with nothing.
if os.environ.get("STOKE_TESTS_STRICT"):
    import PIL.Image as Image
    import torch
    import torchvision
    import torchvision.transforms as T
    import torchvision.transforms.functional as F
else:
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    Image = pytest.importorskip("PIL.Image")
    F = pytest.importorskip("torchvision.transforms.functional")
    T = pytest.importorskip("torchvision.transforms")
from torchvision.transforms import InterpolationMode  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    # CTest builds tf_cli as a target (with the build's sanitizer flags) and
    # names it here; by hand, it is compiled against a build tree below.
    prebuilt = os.environ.get("STOKE_TF_CLI")
    if prebuilt:
        return pathlib.Path(prebuilt)
    build = pathlib.Path(os.environ.get("STOKE_BUILD_DIR", "build"))
    if not build.is_absolute():
        build = ROOT / build
    lib = build / "libstoke.a"
    if not lib.exists():
        pytest.skip(f"{lib} not built (set STOKE_BUILD_DIR to a build tree "
                    "with the stoke_static target)")
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler 'cc' on PATH")
    exe = tmp_path_factory.mktemp("tf_cli") / "tf_cli"
    cmd = [cc, "-std=c11", "-O2", "-I", str(ROOT / "include"),
           "-I", str(ROOT / "src"), "-I", str(build / "include"),
           "-I", str(build), str(ROOT / "tests/python/tf_cli.c"), str(lib),
           "-lpthread", "-lm", "-ljpeg", "-lspng", "-o", str(exe)]
    subprocess.run(cmd, check=True)
    return exe


def run(cli, args, stdin=None):
    r = subprocess.run([str(cli)] + [str(a) for a in args], input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


def make_image(w, h, seed=0):
    """Smooth gradients, a few hard edges and noise: like a photo, in the
    ways that matter to a resampler."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    u, v = x / max(w - 1, 1), y / max(h - 1, 1)
    img = np.stack([
        200 * u + 30 * np.sin(9 * v),
        60 + 150 * v * (1 - u) + 20 * np.cos(13 * u * v),
        120 + 100 * np.sin(5 * (u + v)),
    ], axis=-1)
    img[(x // max(w // 7, 1) + y // max(h // 5, 1)) % 2 == 0] += 40  # edges
    cx, cy, r = 0.6 * w, 0.4 * h, 0.2 * min(w, h)
    img[(x - cx) ** 2 + (y - cy) ** 2 < r * r] = (250, 20, 10)  # a disc
    img += rng.normal(0, 6, img.shape)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def psnr(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    mse = np.mean((a - b) ** 2)
    return math.inf if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)


def assert_identical(name, got, ref):
    """Bit-identical u8 pixels; the PSNR goes to the summary either way."""
    p = psnr(got, ref)
    PSNRS[name] = p
    diff = np.abs(got.astype(int) - ref.astype(int))
    print(f"\n  PSNR {p:.2f} dB, max |diff| {diff.max()}")
    assert got.shape == ref.shape, (got.shape, ref.shape)
    assert np.array_equal(got, ref), \
        (f"{name}: {np.count_nonzero(diff)} of {diff.size} values differ "
         f"(max {diff.max()}, PSNR {p:.2f} dB)")


def tv_resized_crop(img, top, left, h, w, out_hw):
    pil = Image.fromarray(img, "RGB")
    out = F.resized_crop(pil, top, left, h, w, list(out_hw),
                         InterpolationMode.BILINEAR)
    return F.pil_to_tensor(out).permute(1, 2, 0).numpy()  # HWC u8


def stoke_crop(cli, img, top, left, h, w, out_hw, extra="hwc,u8"):
    H, W = img.shape[:2]
    spec = f"center-crop={out_hw[0]}x{out_hw[1]},{extra}"
    return run(cli, ["crop", spec, W, H, left, top, w, h],
               stdin=img.tobytes())


PSNRS = {}

# (image w, h), crop (top, left, h, w), output (h, w)
CASES = [
    ((500, 375), (37, 50, 300, 400), (224, 224)),  # shrink, aspect change
    ((500, 375), (0, 0, 375, 500), (160, 224)),  # whole image
    ((500, 375), (100, 120, 57, 83), (224, 224)),  # upscale
    ((500, 375), (10, 20, 224, 224), (224, 224)),  # identity
    ((64, 48), (0, 0, 48, 64), (224, 224)),  # upscale a small image
    ((64, 48), (5, 7, 20, 30), (100, 80)),
    ((1, 1), (0, 0, 1, 1), (224, 224)),  # 1x1 edge case
    ((1, 1), (0, 0, 1, 1), (1, 1)),
    ((4000, 3000), (0, 0, 3000, 4000), (224, 224)),  # large shrink
    ((4000, 3000), (1234, 777, 1500, 2100), (224, 224)),
    ((333, 7), (0, 3, 7, 300), (31, 17)),  # thin
]


@pytest.mark.parametrize("size,crop,out", CASES,
                         ids=[f"{s[0]}x{s[1]}-{c}-{o[0]}x{o[1]}"
                              for s, c, o in CASES])
def test_resized_crop_matches_pil(cli, size, crop, out):
    img = make_image(*size, seed=size[0] + size[1])
    ref = tv_resized_crop(img, *crop, out)
    got = np.frombuffer(stoke_crop(cli, img, *crop, out), np.uint8)
    got = got.reshape(out[0], out[1], 3)
    assert_identical(f"resized_crop {size} {crop} -> {out}", got, ref)


def test_chw_f32_normalize_matches_to_tensor_normalize(cli):
    img = make_image(500, 375, seed=3)
    crop, out = (37, 50, 300, 400), (224, 224)
    pil = F.resized_crop(Image.fromarray(img, "RGB"), *crop, list(out),
                         InterpolationMode.BILINEAR)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    ref = F.normalize(F.to_tensor(pil), mean, std).numpy()
    got = np.frombuffer(stoke_crop(cli, img, *crop, out,
                                   "normalize=imagenet,chw,f32"), np.float32)
    got = got.reshape(3, *out)
    err = np.abs(got - ref).max()
    print(f"\n  f32 chw normalize: max |diff| {err:g}")
    assert np.array_equal(got.view(np.uint32), ref.view(np.uint32)), err
    # f16: torchvision's .half() of the same values.
    got16 = np.frombuffer(stoke_crop(cli, img, *crop, out,
                                     "normalize=imagenet,chw,f16"),
                          np.float16).reshape(3, *out)
    ref16 = ref.astype(np.float16)
    assert np.array_equal(got16.view(np.uint16), ref16.view(np.uint16))
    # f32 without normalize is ToTensor's x / 255, in HWC.
    got = np.frombuffer(stoke_crop(cli, img, *crop, out, "hwc,f32"),
                        np.float32).reshape(*out, 3)
    ref = np.ascontiguousarray(F.to_tensor(pil).permute(1, 2, 0).numpy())
    assert np.array_equal(got.view(np.uint32), ref.view(np.uint32)), \
        np.abs(got - ref).max()


RESIZE_CASES = [((500, 375), 256, 224), ((375, 500), 256, 224),
                ((4000, 3000), 256, 224), ((64, 48), 256, 224),
                ((300, 300), 256, 200)]


@pytest.mark.parametrize("size,short,crop", RESIZE_CASES,
                         ids=[f"{s[0]}x{s[1]}-{r}-{c}"
                              for s, r, c in RESIZE_CASES])
def test_resize_center_crop_matches(cli, size, short, crop):
    img = make_image(*size, seed=7)
    pil = Image.fromarray(img, "RGB")
    ref = F.pil_to_tensor(F.center_crop(
        F.resize(pil, short, InterpolationMode.BILINEAR), crop))
    ref = ref.permute(1, 2, 0).numpy()
    spec = f"resize={short},center-crop={crop},hwc"
    got = np.frombuffer(run(cli, ["plan-apply", spec, size[0], size[1], 1],
                            stdin=img.tobytes()), np.uint8)
    got = got.reshape(crop, crop, 3)
    assert_identical(f"resize={short},center-crop={crop} {size}", got, ref)


@pytest.mark.parametrize("seed", range(6))
def test_planned_rrc_and_flip_apply_like_torchvision(cli, seed):
    """Boxes and flips that stoke plans, applied by both sides."""
    w, h = 500, 375
    img = make_image(w, h, seed=11)
    spec = "random-resized-crop=224x192,flip,hwc"
    lines = run(cli, ["plan", spec, w, h, seed, 1]).decode().split()
    x, y, bw, bh = (int(float(v)) for v in lines[:4])
    flip = lines[4] == "1"
    got = np.frombuffer(run(cli, ["plan-apply", spec, w, h, seed],
                            stdin=img.tobytes()), np.uint8)
    got = got.reshape(224, 192, 3)
    pil = F.resized_crop(Image.fromarray(img, "RGB"), y, x, bh, bw,
                         [224, 192], InterpolationMode.BILINEAR)
    if flip:
        pil = F.hflip(pil)
    ref = F.pil_to_tensor(pil).permute(1, 2, 0).numpy()
    assert_identical(f"planned rrc+flip 500x375 seed {seed} box "
                     f"{(x, y, bw, bh)} flip {int(flip)}", got, ref)


# ---- RandomResizedCrop parameter semantics (not the random stream) --------

def stoke_boxes(cli, w, h, n, spec="random-resized-crop=224", seed=1):
    out = run(cli, ["plan", spec, w, h, seed, n]).decode().split("\n")
    rows = [ln.split() for ln in out if ln]
    return [(int(float(r[1])), int(float(r[0])), int(float(r[3])),
             int(float(r[2]))) for r in rows]  # (i, j, h, w) as torchvision


def tv_boxes(w, h, n, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    img = Image.new("RGB", (w, h))
    torch.manual_seed(0)
    return [T.RandomResizedCrop.get_params(img, list(scale), list(ratio))
            for _ in range(n)]


@pytest.mark.parametrize("w,h", [(2000, 10), (10, 2000), (1, 1), (3, 1000),
                                 (1000, 3), (1, 2), (7, 5)])
def test_rrc_fallback_matches(cli, w, h):
    """Shapes where most tries fail: the set of boxes (the central fallback
    included) must be what torchvision produces."""
    ours = stoke_boxes(cli, w, h, 400)
    theirs = tv_boxes(w, h, 400)
    for (i, j, bh, bw) in ours:
        assert 0 <= i and 0 <= j and i + bh <= h and j + bw <= w
    # Extreme aspects always fall back: one deterministic box, same on both.
    if max(w, h) / min(w, h) > 100:
        assert set(ours) == set(theirs) and len(set(ours)) == 1, \
            (set(ours), set(theirs))
    else:
        # Every box size stoke draws must be one torchvision draws (tiny
        # images have few possible sizes; 20000 draws see them all), and
        # the fallback sizes agree.
        sizes = {(bh, bw) for (_, _, bh, bw) in ours}
        tv_sizes = {(bh, bw) for (_, _, bh, bw) in tv_boxes(w, h, 20000)}
        assert sizes <= tv_sizes, sizes - tv_sizes


def test_rrc_distribution_matches(cli):
    """Area fraction and aspect of the boxes follow the same law."""
    w, h, n = 500, 375, 4000
    ours = np.array(stoke_boxes(cli, w, h, n), dtype=np.float64)
    theirs = np.array(tv_boxes(w, h, n), dtype=np.float64)
    for name, arr in (("stoke", ours), ("torchvision", theirs)):
        area = arr[:, 2] * arr[:, 3] / (w * h)
        assert area.min() >= 0.08 * 0.9 and area.max() <= 1.0
        aspect = arr[:, 3] / arr[:, 2]
        assert aspect.min() >= 0.75 * 0.9 and aspect.max() <= 4 / 3 * 1.1
    a_ours = ours[:, 2] * ours[:, 3] / (w * h)
    a_tv = theirs[:, 2] * theirs[:, 3] / (w * h)
    print(f"\n  mean area fraction: stoke {a_ours.mean():.4f}, "
          f"torchvision {a_tv.mean():.4f}")
    assert abs(a_ours.mean() - a_tv.mean()) < 0.03
    lr_ours = np.log(ours[:, 3] / ours[:, 2]).mean()
    lr_tv = np.log(theirs[:, 3] / theirs[:, 2]).mean()
    assert abs(lr_ours - lr_tv) < 0.03
    # Centre of the boxes: uniform placement on both sides.
    cx_ours = (ours[:, 1] + ours[:, 3] / 2).mean() / w
    cx_tv = (theirs[:, 1] + theirs[:, 3] / 2).mean() / w
    assert abs(cx_ours - cx_tv) < 0.03


PIXEL_TESTS = ("test_resized_crop_matches_pil", "test_resize_center_crop_matches",
               "test_planned_rrc_and_flip_apply_like_torchvision")


def test_report_psnr(request):
    """Every pixel comparison selected in this session ran and was
    identical (PSNR infinite); prints the PSNRs (run with -s to see them).
    Runs last, after the comparisons it counts."""
    selected = [it for it in request.session.items
                if getattr(it, "originalname", it.name) in PIXEL_TESTS]
    if not selected:
        pytest.skip("no pixel comparison selected")
    print("\n  PSNR summary (dB):")
    for k, v in PSNRS.items():
        print(f"    {v:7.2f}  {k}")
    assert len(PSNRS) == len(selected), \
        f"{len(selected)} comparisons selected, {len(PSNRS)} measured"
    worst = {k: v for k, v in PSNRS.items() if v != math.inf}
    assert not worst, f"not bit-identical: {worst}"
