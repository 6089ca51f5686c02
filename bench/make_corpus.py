#!/usr/bin/python3
"""Make an ImageNet-like corpus from the photographs in Debian's
plasma-workspace-wallpapers (2560x1600 JPEG photos): random crops,
rescaled to ImageNet's typical size (mean about 430x365 px), re-encoded at
quality 85-92, in an ImageFolder layout (one folder per class).

  /usr/bin/python3 bench/make_corpus.py OUT [--images 2000] [--classes 10]

Deterministic for a given --seed.  Needs python3-pil."""
import argparse
import glob
import os
import random
import sys

from PIL import Image, ImageFilter

PHOTOS = "/usr/share/wallpapers/*/contents/images/2560x1600.jpg"


def load_photos(tool, hint=""):
    """Every packaged wallpaper photograph, decoded to RGB; exits naming
    `tool` when there are none."""
    photos = sorted(glob.glob(PHOTOS))
    if not photos:
        sys.exit("%s: no photos under %s; install "
                 "plasma-workspace-wallpapers (scripts/deps.sh --bench "
                 "does)%s" % (tool, PHOTOS, hint))
    return [Image.open(p).convert("RGB") for p in photos]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    sources = load_photos("make_corpus")
    total_bytes = 0
    sizes = []
    for c in range(args.classes):
        os.makedirs(os.path.join(args.out, "class_%02d" % c), exist_ok=True)
    for i in range(args.images):
        src = sources[rng.randrange(len(sources))]
        # Output size: ImageNet's train set averages about 400x350 with a
        # wide spread; draw the width and an aspect ratio around 1.2.
        w = int(rng.triangular(250, 640, 430))
        aspect = rng.triangular(0.9, 1.6, 1.18)
        h = max(120, int(w / aspect))
        # Crop 3-5.5x larger than the output from the photo, so the
        # rescale mixes detail as a camera's downscale would.
        k = rng.uniform(3.0, 5.5)
        cw, ch = min(int(w * k), src.width), min(int(h * k), src.height)
        x, y = rng.randrange(src.width - cw + 1), rng.randrange(src.height - ch + 1)
        img = src.crop((x, y, x + cw, y + ch)).resize((w, h), Image.LANCZOS)
        # Wallpapers are smoother than camera pictures; the in-camera
        # sharpening most photos get brings the file size to ImageNet's.
        img = img.filter(ImageFilter.UnsharpMask(radius=1.5, percent=180,
                                                 threshold=1))
        path = os.path.join(args.out, "class_%02d" % (i % args.classes),
                            "img_%05d.jpg" % i)
        img.save(path, "JPEG", quality=rng.randint(85, 92))
        total_bytes += os.path.getsize(path)
        sizes.append((w, h))
    n = len(sizes)
    print("make_corpus: %d images in %d classes under %s; mean %.0fx%.0f px, "
          "%.1f KB per file, from %d photos" % (
              n, args.classes, args.out, sum(s[0] for s in sizes) / n,
              sum(s[1] for s in sizes) / n, total_bytes / n / 1000,
              len(sources)))


if __name__ == "__main__":
    main()
