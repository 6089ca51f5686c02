#!/usr/bin/python3
"""The image workload on PyTorch: torchvision ImageFolder + DataLoader,
RandomResizedCrop(224) + RandomHorizontalFlip, then PILToTensor (u8) or
ToTensor + Normalize (f32), batch 256, persistent workers when W > 0.  A
warm-up epoch, then --measured epochs (images.sh measures as many as it
measures stoke's).

  /usr/bin/python3 bench/torch_images.py CORPUS --workers 2 --dtype u8 --json /tmp/t.json
"""
import argparse

import torch
import torchvision.transforms as T
from torchvision.datasets import ImageFolder

import benchlib


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus")
    ap.add_argument("--workers", "-j", type=int, default=0)
    ap.add_argument("--batch", "-b", type=int, default=256)
    ap.add_argument("--dtype", choices=("u8", "f32"), default="u8")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--measured", type=int, default=1)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    head = [T.RandomResizedCrop(224), T.RandomHorizontalFlip()]
    if args.dtype == "u8":
        tail = [T.PILToTensor()]
    else:
        tail = [T.ToTensor(),
                T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))]
    ds = ImageFolder(args.corpus, transform=T.Compose(head + tail))
    benchlib.torch_main(
        "images-" + args.dtype, args, ds,
        {"batch_size": args.batch, "num_workers": args.workers,
         "shuffle": True, "pin_memory": False},
        warmup=args.warmup, measured=args.measured,
        extra_config={"dtype": args.dtype, "corpus": args.corpus,
                      "transform": "RandomResizedCrop(224),"
                                   "RandomHorizontalFlip," +
                                   ("PILToTensor" if args.dtype == "u8"
                                    else "ToTensor,Normalize(imagenet)")})


if __name__ == "__main__":
    main()
