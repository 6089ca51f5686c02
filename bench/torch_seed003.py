#!/usr/bin/python3
"""Seed 003 on PyTorch: in-memory 4096x32 float32 features with int64 labels
in a TensorDataset, batch 256, pin_memory False (no GPU), persistent workers
when W > 0.  A warm-up epoch, then epochs until --min-seconds of measured
time.  The numbers include torch's Python loop (the consumer does nothing).

  /usr/bin/python3 bench/torch_seed003.py --workers 2 --json /tmp/t.json
"""
import argparse

import torch
from torch.utils.data import TensorDataset

import benchlib


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", "-j", type=int, default=0)
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--batch", "-b", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--min-seconds", type=float, default=1.0)
    ap.add_argument("--min-epochs", type=int, default=3)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    features = torch.randn(args.samples, args.features)
    targets = torch.randint(0, 2, (args.samples,))
    ds = TensorDataset(features, targets)
    benchlib.torch_main(
        "seed003", args, ds,
        {"batch_size": args.batch, "num_workers": args.workers,
         "shuffle": False, "pin_memory": False},
        warmup=args.warmup, min_seconds=args.min_seconds,
        min_epochs=args.min_epochs,
        extra_config={"features": args.features})


if __name__ == "__main__":
    main()
