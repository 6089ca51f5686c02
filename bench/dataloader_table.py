#!/usr/bin/python3
"""The dataloader benchmark's tables from its raw JSON (bench/dataloader.sh):
seed 000 against the ideal epoch, the images against torch's best with the
GIL-wait share, stoke.Loader's C transforms on the same images, and the
per-sample overhead; then the process section: worker_type thread,
process and auto against torch (samples/s, time to the first batch, peak
PSS of main + workers), seed 000 and the overhead on processes.  Writes
the combined JSON.

  /usr/bin/python3 bench/dataloader_table.py bench/out/raw/dataloader OUT.json
"""
import glob
import os
import re
import sys

import benchlib


def load(raw):
    runs = {}
    for path in sorted(glob.glob(os.path.join(raw, "*.json"))):
        m = re.match(r"(torch|stoke|c|ptorch|thread|process|auto)_"
                     r"(seed000|images64|images|trivial|pure)_w(\d+)\.json$",
                     os.path.basename(path))
        if m:
            runs[(m[1], m[2], int(m[3]))] = benchlib.read_json(path)
    return runs


def f(v, fmt):
    return fmt % v if v is not None else "-"


MODES = (("ptorch", "torch"), ("thread", "thread"), ("process", "process"),
         ("auto", "auto"))


def mode_rows(runs, workload, title):
    """One row per W: each mode's samples/s, time to the first batch and
    peak PSS (main + workers), and the ratios the issue's targets name."""
    ws = sorted({w for (s, k, w) in runs if k == workload})
    rows = []
    if not ws:
        return rows
    print(f"\n{title}")
    print("   W  mode      samples/s  x torch  x thread  first batch s  "
          "peak PSS MiB")
    for w in ws:
        got = {name: runs.get((tag, workload, w)) for tag, name in MODES}
        sps = {n: benchlib.get(r, "summary.samples_per_s")
               for n, r in got.items()}
        row = {"workers": w}
        for name, r in got.items():
            if r is None:
                continue
            v = sps[name]
            pss = benchlib.get(r, "summary.peak_pss_total_bytes")
            row[name] = {
                "samples_per_s": v,
                "x_torch": v / sps["torch"] if v and sps.get("torch") else
                None,
                "x_thread": v / sps["thread"] if v and sps.get("thread") else
                None,
                "first_batch_s": benchlib.get(r, "summary.first_batch_s"),
                "peak_pss_total_bytes": pss}
            c = row[name]
            print(f"  {w:2d}  {name:8s} {f(v, '%10.0f')} "
                  f"{f(c['x_torch'], '%7.2fx')} {f(c['x_thread'], '%8.2fx')} "
                  f"{f(c['first_batch_s'], '%14.3f')} "
                  f"{f(pss / 2**20 if pss else None, '%13.0f')}")
        rows.append(row)
    return rows


def process_section(raw, runs, doc):
    """worker_type thread / process / auto against torch (dataloader.sh's
    process section)."""
    iters = benchlib._read(os.path.join(raw, "pure_iters.txt")).strip()
    doc["pure"] = mode_rows(
        runs, "pure", f"pure Python: {iters or '?'} bytecode turns per sample "
        "(about 2 ms here), 1024 samples, batch 32")
    doc["images64"] = mode_rows(
        runs, "images64", "images on processes: ImageFolder + "
        "RandomResizedCrop(224) + flip + PILToTensor, batch 64")
    if doc["images64"]:
        best = {}
        for row in doc["images64"]:
            for name in ("torch", "thread", "process", "auto"):
                v = benchlib.get(row, name + ".samples_per_s")
                if v:
                    best[name] = max(best.get(name, 0), v)
        doc["images64_best"] = best
        sb = max((best.get(n, 0) for n in ("thread", "process", "auto")),
                 default=0)
        if best.get("torch") and sb:
            print(f"  best: stoke {sb:.0f} vs torch {best['torch']:.0f} "
                  f"images/s = {sb / best['torch']:.2f}x")
    def seed000_row(w, r):
        es = benchlib.get(r, "summary.epoch_s")
        ideal = 256 * 0.005 / max(w, 1)
        row = {"workers": w, "epoch_s": es,
               "x_ideal": es / ideal if es else None}
        return row, (f"  {w:2d}  {f(es, '%8.3f')}  "
                     f"{f(row['x_ideal'], '%6.2fx')}")

    def trivial_row(w, r):
        v = benchlib.get(r, "summary.samples_per_s")
        t = benchlib.get(runs.get(("torch", "trivial", w)),
                         "summary.samples_per_s")
        row = {"workers": w, "process_us": 1e6 / v if v else None,
               "torch_us": 1e6 / t if t else None}
        return row, (f"  {w:2d}  process {f(row['process_us'], '%8.2f')}"
                     f"   torch {f(row['torch_us'], '%8.2f')}")

    doc["seed000_process"] = process_rows(
        runs, "seed000", "seed 000 on worker processes (epoch seconds; "
        "ratio to the ideal 1.28 s / W)", seed000_row)
    doc["trivial_process"] = process_rows(
        runs, "trivial", "per-sample overhead on worker processes (us per "
        "sample)", trivial_row)


def process_rows(runs, workload, title, row_of):
    """The process runs of one workload, a row per W: row_of(w, run) gives
    the row and its printed line."""
    ws = sorted({w for (s, k, w) in runs if s == "process" and
                 k == workload})
    rows = []
    if ws:
        print(f"\n{title}")
    for w in ws:
        row, line = row_of(w, runs[("process", workload, w)])
        rows.append(row)
        print(line)
    return rows

def main():
    raw, out = sys.argv[1], sys.argv[2]
    runs = load(raw)
    doc = {"seed000": [], "images": [], "trivial": [],
           "loadavg_start": benchlib._read(os.path.join(
               raw, "loadavg_start.txt")).split()[:3],
           "loadavg_end": benchlib._read(os.path.join(
               raw, "loadavg_end.txt")).split()[:3]}

    ws = sorted({w for (s, k, w) in runs if k == "seed000"})
    if ws:
        print("seed 000: SlowDataset, 256 x 5 ms asleep, batch 32 "
              "(epoch seconds; ratio to the ideal 1.28 s / W)")
        print("   W    ideal s   torch s  x ideal   stoke s  x ideal  "
              "stoke vs torch  stoke verdict")
        for w in ws:
            t = runs.get(("torch", "seed000", w))
            s = runs.get(("stoke", "seed000", w))
            ideal = 256 * 0.005 / max(w, 1)
            ts = benchlib.get(t, "summary.epoch_s") if t else None
            ss = benchlib.get(s, "summary.epoch_s") if s else None
            row = {"workers": w, "ideal_s": ideal, "torch_s": ts,
                   "stoke_s": ss,
                   "torch_x_ideal": ts / ideal if ts else None,
                   "stoke_x_ideal": ss / ideal if ss else None,
                   "stoke_speedup": ts / ss if ts and ss else None,
                   "stoke_verdict": benchlib.get(s, "stoke.verdict")}
            doc["seed000"].append(row)
            print(f"  {w:2d}  {ideal:9.3f} {f(ts, '%9.3f')} "
                  f"{f(row['torch_x_ideal'], '%7.2fx')} {f(ss, '%9.3f')} "
                  f"{f(row['stoke_x_ideal'], '%7.2fx')} "
                  f"{f(row['stoke_speedup'], '%14.2fx')}  "
                  f"{row['stoke_verdict'] or '-'}")

    ws = sorted({w for (s, k, w) in runs if k == "images"})
    if ws:
        print("\nimages: ImageFolder + RandomResizedCrop(224) + flip + "
              "PILToTensor, batch 256 (images/s)")
        print("   W     torch  stoke.DataLoader  GIL wait  verdict        "
              "stoke.Loader (C transforms)")
        for w in ws:
            t, s, c = (runs.get((k, "images", w)) for k in ("torch", "stoke",
                                                             "c"))
            row = {"workers": w,
                   "torch": benchlib.get(t, "summary.samples_per_s"),
                   "stoke": benchlib.get(s, "summary.samples_per_s"),
                   "gil_wait_share": benchlib.get(s, "stoke.gil_wait_share"),
                   "stoke_verdict": benchlib.get(s, "stoke.verdict"),
                   "stoke_loader": benchlib.get(c, "summary.samples_per_s")}
            doc["images"].append(row)
            gil = row["gil_wait_share"]
            print(f"  {w:2d}  {f(row['torch'], '%8.0f')}  "
                  f"{f(row['stoke'], '%16.0f')}  "
                  f"{f(100 * gil if gil is not None else None, '%7.1f%%')}  "
                  f"{(row['stoke_verdict'] or '-'):13s}  "
                  f"{f(row['stoke_loader'], '%8.0f')}")
        best = lambda k: max((r[k] for r in doc["images"] if r[k]),
                             default=None)
        bt, bs, bc = best("torch"), best("stoke"), best("stoke_loader")
        doc["images_best"] = {"torch": bt, "stoke": bs, "stoke_loader": bc}
        if bt and bs:
            print(f"  best: stoke.DataLoader {bs:.0f} vs torch {bt:.0f} "
                  f"images/s = {bs / bt:.2f}x"
                  + (f"; stoke.Loader {bc:.0f} = {bc / bt:.2f}x torch" if bc
                     else ""))

    ws = sorted({w for (s, k, w) in runs if k == "trivial"})
    if ws:
        print("\nper-sample overhead: __getitem__ returns its index, batch "
              "256 (us per sample, from samples/s)")
        print("   W     torch   stoke.DataLoader")
        for w in ws:
            t, s = (runs.get((k, "trivial", w)) for k in ("torch", "stoke"))
            tv = benchlib.get(t, "summary.samples_per_s")
            sv = benchlib.get(s, "summary.samples_per_s")
            row = {"workers": w, "torch_us": 1e6 / tv if tv else None,
                   "stoke_us": 1e6 / sv if sv else None}
            doc["trivial"].append(row)
            print(f"  {w:2d}  {f(row['torch_us'], '%8.2f')}  "
                  f"{f(row['stoke_us'], '%16.2f')}")
    process_section(raw, runs, doc)
    print(f"\nload average at start {' '.join(doc['loadavg_start'])}, at end "
          f"{' '.join(doc['loadavg_end'])}")
    benchlib.write_json(out, doc)


if __name__ == "__main__":
    main()
