#!/usr/bin/python3
"""The Python consumer across epoch boundaries: `for x, y in loader` over
E epochs of one stoke.Loader, the loop doing nothing else, as a training
script iterates it.  Writes `stoke profile`'s JSON (the loader's own epoch
clocks, as `stoke bench --json` writes them for the C consumer) with a
"python" section beside it:

  wall_s            from the first iter() to the last batch, boundaries in
  samples           handed out
  first_batch_ms    per epoch: from iter() to its first batch
  boundary_ms       per boundary: from the last batch of an epoch to the
                    first of the next (the StopIteration, the new iter(),
                    the first next())

  PYTHONPATH=build/python /usr/bin/python3 bench/epoch_boundary.py \\
      DATA -b 64 -j 2 --epochs 2 --transform ... --json out.json
"""
import argparse
import json
import time

import stoke


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data")
    ap.add_argument("--batch", "-b", type=int, default=64)
    ap.add_argument("--workers", "-j", type=int, default=2)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--transform",
                    default="random-resized-crop=224,flip,chw,u8")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    loader = stoke.Loader(args.data, args.batch, shuffle=True,
                          num_workers=args.workers, prefetch=args.prefetch,
                          transform=args.transform, seed=args.seed, warmup=0)
    firsts, boundaries = [], []
    n = 0
    last = None
    t0 = time.perf_counter()
    for _ in range(args.epochs):
        start = time.perf_counter()
        first = True
        for x, _y in loader:
            if first:
                now = time.perf_counter()
                firsts.append((now - start) * 1e3)
                if last is not None:
                    boundaries.append((now - last) * 1e3)
                first = False
            n += x.shape[0]
        last = time.perf_counter()
    wall = last - t0
    loader.save_json(args.json)
    with open(args.json) as f:
        doc = json.load(f)
    doc["python"] = {"wall_s": wall, "samples": n,
                     "first_batch_ms": firsts, "boundary_ms": boundaries}
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
