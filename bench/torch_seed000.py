#!/usr/bin/python3
"""Seed 000 on PyTorch: 256 samples that each cost 5 ms (time.sleep in
__getitem__), a 3x32x32 float32 tensor and an int label, batch 32.

Warm-up epoch(s) then measured epoch(s); persistent_workers=True when W > 0;
the consumer does nothing.  Writes the common JSON (see benchlib.py).

  /usr/bin/python3 bench/torch_seed000.py --workers 4 --json /tmp/t.json
"""
import argparse
import time

import torch
from torch.utils.data import Dataset

import benchlib


class SlowDataset(Dataset):
    """Each sample costs cost_s seconds - a stand-in for decode + augment."""

    def __init__(self, n, cost_s):
        self.n = n
        self.cost_s = cost_s

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        time.sleep(self.cost_s)
        return torch.rand(3, 32, 32), idx % 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", "-j", type=int, default=0)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--cost-ms", type=float, default=5.0)
    ap.add_argument("--batch", "-b", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=1, help="measured epochs")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    ds = SlowDataset(args.samples, args.cost_ms / 1e3)
    benchlib.torch_main(
        "seed000", args, ds,
        {"batch_size": args.batch, "num_workers": args.workers,
         "shuffle": False, "pin_memory": False},
        warmup=args.warmup, measured=args.epochs,
        extra_config={"cost_ms": args.cost_ms, "shape": [3, 32, 32]})


if __name__ == "__main__":
    main()
