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
  pure      a pure-Python sample: --pure-iters turns of a bytecode loop
            (dataloader.sh calibrates them to about 2 ms on the machine),
            1024 samples, batch 32: what threads cannot share out

stoke.DataLoader's --worker-type is thread, process or auto.  Every run
also records the time to its first batch (the warm-up epoch's: worker
start included) and the peak proportional set size of the main process
and every process below it (benchlib.PeakMemory).

  PYTHONPATH=build/python /usr/bin/python3 bench/dataloader_bench.py \\
      --loader stoke --workload seed000 --workers 4 --json /tmp/s.json
"""
import argparse
import sys
import time
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


class PurePython(Dataset):
    """Each sample runs `iters` turns of a loop that never leaves the
    interpreter (no call that releases the GIL)."""

    def __init__(self, n, iters):
        self.n, self.iters = n, iters

    def __len__(self):
        return self.n

    def __getitem__(self, idx):
        acc = idx
        for k in range(self.iters):
            acc = (acc * 31 + k) % 1000003
        return idx, acc


def images(corpus, transform=None):
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder
    return ImageFolder(corpus, transform=transform or T.Compose([
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


def calibrate_pure(ms):
    """The loop turns that make one pure sample cost about ms on this
    machine (best of 5, one process, nothing else running in it)."""
    probe = 200000
    ds = PurePython(1, probe)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        ds[0]
        best = min(best, time.perf_counter() - t0)
    return max(1, round(ms / 1e3 / (best / probe)))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--calibrate-pure":
        print(calibrate_pure(float(sys.argv[2])))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loader", choices=("torch", "stoke"), required=True)
    ap.add_argument("--workload", required=True,
                    choices=("seed000", "images", "trivial", "c-images",
                             "pure"))
    ap.add_argument("--worker-type", default="thread",
                    choices=("thread", "process", "auto"),
                    help="stoke.DataLoader's worker_type (thread)")
    ap.add_argument("--batch", type=int,
                    help="batch size (default: the workload's)")
    ap.add_argument("--pure-iters", type=int, default=20000,
                    help="the pure workload's loop turns per sample")
    ap.add_argument("--workers", "-j", type=int, default=0)
    ap.add_argument("--corpus")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--measured", type=int, default=2)
    ap.add_argument("--worker-policy", default="batch",
                    choices=["batch", "normal"],
                    help="stoke.DataLoader's worker_policy (batch)")
    ap.add_argument("--no-seed-per-sample", action="store_true",
                    help="stoke.DataLoader's seed_per_sample=False (the "
                    "per-sample reseed of worker processes off)")
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
    elif args.workload == "pure":
        ds = PurePython(1024, args.pure_iters)
        kw.update(batch_size=32, shuffle=False)
        extra = {"samples": 1024, "pure_iters": args.pure_iters}
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
    if args.batch:
        kw["batch_size"] = args.batch

    import stoke
    if args.workload == "c-images":
        loader = stoke.Loader(args.corpus, kw["batch_size"], num_workers=w,
                              shuffle=True,
                              transform="random-resized-crop=224,flip,chw,u8",
                              warmup=args.warmup)
        impl = "stoke.Loader"
    elif args.loader == "stoke":
        skw = {"seed_per_sample": False} if args.no_seed_per_sample else {}
        loader = stoke.DataLoader(ds, warmup=args.warmup,
                                  worker_policy=args.worker_policy,
                                  worker_type=args.worker_type, **kw, **skw)
        impl = "stoke.DataLoader"
        extra["worker_type"] = args.worker_type
        extra.update(skw)
    else:
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, **kw)
        impl = "torch"
    load_before = benchlib.loadavg()
    with benchlib.PeakMemory() as mem:
        epochs, waits = benchlib.run_epochs(lambda: iter(loader),
                                            warmup=args.warmup,
                                            measured=args.measured)
    summary = benchlib.summarize(epochs, waits,
                                 peak_rss_bytes=benchlib.self_peak_rss_bytes())
    summary["peak_pss_total_bytes"] = mem.peak
    summary["first_batch_s"] = epochs[0]["first_batch_s"] if epochs else None
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
