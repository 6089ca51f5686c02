#!/usr/bin/python3
"""Make a corpus of large photographs for the pre-resizing benchmark
(bench/photos.sh): N JPEGs of MEGAPIXELS (4:3 or 3:2, as cameras write
them), cut from Debian's plasma-workspace-wallpapers photographs
(2560x1600, 4.1 MP) and UPSCALED with Lanczos to reach 6-12 MP, since no
larger real photographs are packaged here; sharpened as cameras do, saved
at JPEG quality 90-95, one folder per class.  Honestly labelled: the
pixels above 4.1 MP are interpolated, so the files compress a little
better than a real 12 MP photo of the same scene (fewer fine details),
which, if anything, flatters decoding the originals.

  /usr/bin/python3 bench/make_photos.py OUT --images 96 --megapixels 12

Deterministic for a given --seed.  Needs python3-pil."""
import argparse
import os
import random
import sys

from PIL import Image, ImageFilter

from make_corpus import load_photos  # bench/ is the script's directory


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--images", type=int, default=96)
    ap.add_argument("--megapixels", type=float, default=12)
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    sources = load_photos("make_photos", " (scripts/deps.sh --bench)")
    for c in range(args.classes):
        os.makedirs(os.path.join(args.out, "class_%d" % c), exist_ok=True)
    total = 0
    for i in range(args.images):
        src = sources[rng.randrange(len(sources))]
        aspect = rng.choice((4 / 3, 3 / 2))
        w = int((args.megapixels * 1e6 * aspect) ** 0.5)
        h = int(w / aspect)
        if rng.random() < 0.25:  # a portrait now and then
            w, h = h, w
        # A crop of 70-100% of the photo at the output's aspect, upscaled.
        k = rng.uniform(0.7, 1.0)
        cw = min(src.width, int(src.height * w / h)) * k
        ch = cw * h / w
        x = rng.uniform(0, src.width - cw)
        y = rng.uniform(0, src.height - ch)
        img = src.resize((w, h), Image.LANCZOS,
                         box=(x, y, x + cw, y + ch))
        img = img.filter(ImageFilter.UnsharpMask(radius=2, percent=120,
                                                 threshold=2))
        path = os.path.join(args.out, "class_%d" % (i % args.classes),
                            "photo_%04d.jpg" % i)
        img.save(path, "JPEG", quality=rng.randint(90, 95))
        total += os.path.getsize(path)
    print("make_photos: %d images of %.1f MP (upscaled from %d wallpapers of "
          "2560x1600), %.1f MB" % (args.images, args.megapixels,
                                   len(sources), total / 1e6), file=sys.stderr)


if __name__ == "__main__":
    main()
