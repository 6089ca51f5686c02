#!/usr/bin/python3
"""One configuration of a Python dataset through torch's DataLoader or
stoke.DataLoader (--loader), timed by the same two clocks (benchlib's
run_epochs): a warm-up epoch, then measured epochs.  Writes the common
JSON (see benchlib.py); stoke's run adds its own summary (verdict, the
share of a Python sample spent waiting for the GIL).

Workloads (--workload):
  seed000   seed 000's SlowDataset: 256 samples that sleep 5 ms, a 3x32x32
            float32 tensor and an int label, batch 32; the ideal epoch is
            256 x 5 ms / max(W, 1)
  images    torchvision ImageFolder with RandomResizedCrop(224) +
            RandomHorizontalFlip + PILToTensor, batch 256, shuffled
  trivial   the per-sample overhead: __getitem__ returns its index, batch
            256, 65536 samples
  c-images  the same images through stoke.Loader(path, transform=
            "random-resized-crop=224,flip,chw,u8"): the route the
            python-bound advice points to

  PYTHONPATH=build/python /usr/bin/python3 bench/dataloader_bench.py \\
      --loader stoke --workload seed000 --workers 4 --json /tmp/s.json
"""
import argparse
import warnings

import torch
from torch.utils.data import Dataset

import benchlib
from torch_seed000 import SlowDataset  # seed 000's, as the torch side has it


class Trivial(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        return idx, idx


def images(corpus):
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder
    return ImageFolder(corpus, transform=T.Compose([
        T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()]))


def stoke_summary(loader):
    """stoke's own view of the run: the verdict and the GIL's share."""
    st = loader.stats()
    d = loader.diagnose()
    stage = {s["name"]: s["total_s"] for s in st.get("stages", [])}
    py = stage.get("python", 0) + stage.get("gil_wait", 0) + \
        stage.get("collate", 0)
    return {"verdict": d.get("verdict"), "reason": d.get("reason"),
            "gil_wait_share": stage.get("gil_wait", 0) / py if py else None,
            "python_s": stage.get("python"), "gil_wait_s":
            stage.get("gil_wait"), "collate_s": stage.get("collate"),
            "advice": [a["text"] for a in d.get("advice", [])][:3]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loader", choices=("torch", "stoke"), required=True)
    ap.add_argument("--workload", required=True,
                    choices=("seed000", "images", "trivial", "c-images"))
    ap.add_argument("--workers", "-j", type=int, default=0)
    ap.add_argument("--corpus")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--measured", type=int, default=2)
    ap.add_argument("--worker-policy", default="batch",
                    choices=["batch", "normal"],
                    help="stoke.DataLoader's worker_policy (batch)")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    torch.manual_seed(0)
    w = args.workers
    kw = {"num_workers": w}
    if w > 0:
        kw["persistent_workers"] = True
    extra = {}
    if args.workload == "seed000":
        ds = SlowDataset(256, 0.005)
        kw.update(batch_size=32, shuffle=False)
        extra = {"cost_ms": 5.0, "samples": 256,
                 "ideal_epoch_s": 256 * 0.005 / max(w, 1)}
    elif args.workload == "trivial":
        ds = Trivial(65536)
        kw.update(batch_size=256, shuffle=False)
        extra = {"samples": 65536}
    else:
        if not args.corpus:
            ap.error("--corpus is needed for the images")
        ds = images(args.corpus) if args.workload == "images" else None
        kw.update(batch_size=256, shuffle=True)
        extra = {"corpus": args.corpus}

    import stoke
    if args.workload == "c-images":
        loader = stoke.Loader(args.corpus, 256, num_workers=w, shuffle=True,
                              transform="random-resized-crop=224,flip,chw,u8",
                              warmup=args.warmup)
        impl = "stoke.Loader"
    elif args.loader == "stoke":
        loader = stoke.DataLoader(ds, warmup=args.warmup,
                                  worker_policy=args.worker_policy, **kw)
        impl = "stoke.DataLoader"
    else:
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, **kw)
        impl = "torch"
    load_before = benchlib.loadavg()
    epochs, waits = benchlib.run_epochs(lambda: iter(loader),
                                        warmup=args.warmup,
                                        measured=args.measured)
    summary = benchlib.summarize(epochs, waits,
                                 peak_rss_bytes=benchlib.self_peak_rss_bytes())
    doc = {"config": dict({"benchmark": "dataloader-" + args.workload,
                           "impl": impl, "workers": w,
                           "warmup_epochs": args.warmup,
                           "measured_epochs": args.measured,
                           "loader_kwargs": {k: v for k, v in kw.items()},
                           "torch": torch.__version__}, **extra),
           "machine": benchlib.machine_info({"loadavg_before": load_before,
                                             "loadavg_after":
                                             benchlib.loadavg()}),
           "epochs": epochs, "summary": summary}
    if impl != "torch":
        doc["stoke"] = stoke_summary(loader)
    benchlib.write_json(args.json, doc)


if __name__ == "__main__":
    main()
