#!/usr/bin/python3
"""The dataloader benchmark's tables from its raw JSON (bench/dataloader.sh):
seed 000 against the ideal epoch, the images against torch's best with the
GIL-wait share, stoke.Loader's C transforms on the same images, and the
per-sample overhead.  Writes the combined JSON.

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
        m = re.match(r"(torch|stoke|c)_(seed000|images|trivial)_w(\d+)\.json$",
                     os.path.basename(path))
        if m:
            runs[(m[1], m[2], int(m[3]))] = benchlib.read_json(path)
    return runs


def f(v, fmt):
    return fmt % v if v is not None else "-"


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
    print(f"\nload average at start {' '.join(doc['loadavg_start'])}, at end "
          f"{' '.join(doc['loadavg_end'])}")
    benchlib.write_json(out, doc)


if __name__ == "__main__":
    main()
