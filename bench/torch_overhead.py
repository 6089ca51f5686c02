#!/usr/bin/python3
"""Pipeline overhead on PyTorch, for scale: a sample that costs nothing
(torch.rand(1) and an int label, as stoke's `--synthetic spin:0 --shape 1`
fills noise and a label), batch 256, persistent workers when W > 0.  A
warm-up epoch, then epochs until --min-seconds of measured time.

  /usr/bin/python3 bench/torch_overhead.py --workers 1 --json /tmp/t.json
"""
import argparse

import torch
from torch.utils.data import Dataset

import benchlib


class EmptyDataset(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        return torch.rand(1), idx % 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", "-j", type=int, default=1)
    ap.add_argument("--samples", type=int, default=65536)
    ap.add_argument("--batch", "-b", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--min-seconds", type=float, default=1.0)
    ap.add_argument("--min-epochs", type=int, default=1)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    benchlib.torch_main(
        "overhead", args, EmptyDataset(args.samples),
        {"batch_size": args.batch, "num_workers": args.workers,
         "shuffle": False, "pin_memory": False},
        warmup=args.warmup, min_seconds=args.min_seconds,
        min_epochs=args.min_epochs, extra_config={"shape": [1]})


if __name__ == "__main__":
    main()
