#!/usr/bin/python3
"""The remote image workload as users write it without a library: a
torch DataLoader over a Python Dataset that does one HTTP Range GET per
sample with urllib (a new connection each, as urllib does), decodes it
with PIL and applies RandomResizedCrop(224) + RandomHorizontalFlip +
PILToTensor (u8).  The samples are the members of WebDataset-style tar
shards, whose offsets the dataset reads once from the local copies (the
index a user would keep beside the shards); the bytes come from BASE_URL,
or, when BASE_URL is a local folder, from its files (open, seek, read:
the local baseline of the same code).

  /usr/bin/python3 bench/remote_torch.py TAR_DIR OUT_DIR SUFFIX \\
      local=DIR ms20=http://127.0.0.1:PORT/slow20/tar ms100=...:64 \\
      --workers 2 3

One process runs every condition (NAME=BASE[:SAMPLES]) at every W, one
DataLoader each (torch is imported once: on a loaded 2-core machine its
import and teardown took longer than the runs), and writes
OUT_DIR/torch_NAME_wW_SUFFIX.json for each.  SAMPLES takes a fixed random
subset of the samples (the same for every W), so that a slow server's
epoch stays short; shuffled each epoch.
"""
import argparse
import glob
import io
import os
import random
import re
import tarfile
import urllib.request

import torch
import torchvision.transforms as T
from PIL import Image

import benchlib


def tar_index(tar_dir, base_url):
    """(url, offset, size, label) of every .jpg member, from the local tars."""
    items = []
    for path in sorted(glob.glob(os.path.join(tar_dir, "train-*.tar"))):
        url = os.path.join(base_url, os.path.basename(path))
        if "://" in base_url:
            url = base_url.rstrip("/") + "/" + os.path.basename(path)
        labels, jpegs = {}, []
        with tarfile.open(path) as t:
            for m in t.getmembers():
                key, ext = os.path.splitext(m.name)
                if ext == ".jpg":
                    jpegs.append((key, m.offset_data, m.size))
                elif ext == ".cls":
                    labels[key] = int(t.extractfile(m).read())
        items += [(url, off, size, labels[key]) for key, off, size in jpegs]
    return items


class RangeGetDataset(torch.utils.data.Dataset):
    def __init__(self, items, transform):
        self.items = items
        self.transform = transform

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        url, off, size, label = self.items[i]
        if "://" in url:
            req = urllib.request.Request(
                url, headers={"Range": "bytes=%d-%d" % (off, off + size - 1)})
            with urllib.request.urlopen(req, timeout=60) as r:
                data = r.read()
        else:
            with open(url, "rb") as f:
                f.seek(off)
                data = f.read(size)
        if len(data) != size:
            raise IOError("%s bytes %d-%d: got %d bytes"
                          % (url, off, off + size - 1, len(data)))
        img = Image.open(io.BytesIO(data)).convert("RGB")
        return self.transform(img), label


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tar_dir")
    ap.add_argument("out_dir")
    ap.add_argument("suffix")
    ap.add_argument("conds", nargs="+", help="NAME=BASE_URL[:SAMPLES]")
    ap.add_argument("--workers", "-j", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--batch", "-b", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--measured", type=int, default=2)
    args = ap.parse_args()
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                    T.PILToTensor()])
    for cond in args.conds:
        name, base = cond.split("=", 1)
        samples = 0
        m = re.fullmatch(r"(.*):(\d+)", base)
        if m and not base.endswith("/"):
            base, samples = m.group(1), int(m.group(2))
        items = tar_index(args.tar_dir, base)
        if samples and samples < len(items):
            items = random.Random(0).sample(items, samples)
        for w in args.workers:
            torch.manual_seed(0)
            args.json = os.path.join(args.out_dir, "torch_%s_w%d_%s.json"
                                     % (name, w, args.suffix))
            benchlib.torch_main(
                "remote", args, RangeGetDataset(items, tf),
                {"batch_size": args.batch, "num_workers": w,
                 "shuffle": True, "pin_memory": False},
                warmup=args.warmup, measured=args.measured,
                extra_config={"dtype": "u8", "label": name, "base_url": base,
                              "bytes": sum(it[2] for it in items),
                              "transform": "RandomResizedCrop(224),"
                                           "RandomHorizontalFlip,PILToTensor",
                              "fetch": "urllib, one Range GET per sample"})


if __name__ == "__main__":
    main()
