#!/usr/bin/python3
"""stoke's Python consumer: stoke.Loader into torch tensors (or NumPy), the
loop doing nothing else, measured by the loader's own clocks as `stoke
bench` measures the C consumer: one warm-up epoch, then epochs until
--min-seconds (or --epochs), samples/s from the measured epochs' wall time.
Writes `stoke profile`'s JSON (summary.samples_per_s, epochs, config).

  PYTHONPATH=build/python /usr/bin/python3 bench/stoke_py.py \\
      --synthetic tensor --samples 4096 --shape 32 -b 256 -j 2 --json out.json
  ... --arrays 4096x32            the seed-003 TensorDataset as arrays
  ... --images DIR --transform random-resized-crop=224,flip,chw,u8
"""
import argparse
import json
import math
import os
import sys
import time

import stoke


def source_of(args):
    if args.images:
        return args.images, args.transform
    if args.arrays:
        import torch
        n, d = (int(v) for v in args.arrays.split("x"))
        torch.manual_seed(0)
        return (torch.randn(n, d), torch.randint(0, 2, (n,))), None
    shape = tuple(int(v) for v in args.shape.split("x"))
    return stoke.synthetic(args.synthetic, samples=args.samples,
                           shape=shape), None


def run(args, source, transform, epochs):
    loader = stoke.Loader(source, args.batch, num_workers=args.workers,
                          prefetch=args.prefetch, shuffle=args.shuffle,
                          transform=transform, output=args.output, warmup=1)
    for _ in range(epochs):
        for _ in loader:
            pass
    return loader


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic", default="tensor")
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--shape", default="32")
    ap.add_argument("--arrays")
    ap.add_argument("--images")
    ap.add_argument("--transform")
    ap.add_argument("--batch", "-b", type=int, default=256)
    ap.add_argument("--workers", "-j", type=int, default=0)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--shuffle", action="store_true")
    ap.add_argument("--output", default="torch")
    ap.add_argument("--epochs", type=int, help="total, warm-up included")
    ap.add_argument("--min-seconds", type=float, default=1.0)
    ap.add_argument("--min-epochs", type=int, default=3)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    source, transform = source_of(args)
    epochs = args.epochs
    if epochs is None:
        # Calibrate: a few epochs, then as many as make --min-seconds.
        probe = run(args, source, transform, args.min_epochs + 1)
        epoch_s = probe.stats()["epoch_s"]
        probe.close()
        epochs = 1 + int(min(200000, max(args.min_epochs, math.ceil(
            args.min_seconds / max(epoch_s, 1e-9)))))
    loader = run(args, source, transform, epochs)
    loader.save_json(args.json)
    with open(args.json) as f:
        doc = json.load(f)
    doc["config"]["consumer"] = f"python stoke.Loader, output {args.output}"
    doc["config"]["python_source"] = ("images" if args.images else
                                      "arrays" if args.arrays else "synthetic")
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
    s = doc["summary"]
    print(f"stoke_py: {s['samples_per_s']:.0f} samples/s over {s['epochs']} "
          f"epochs", file=sys.stderr)


if __name__ == "__main__":
    main()
