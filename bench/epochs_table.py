#!/usr/bin/python3
"""bench/epochs.sh's table: per epoch count, the medians of the C and the
Python consumer's samples/s (the loader's epoch clocks), the Python loop's
own wall-clock figure, the ratios, and the Python side's boundaries.

  epochs_table.py RAW_DIR OUT_JSON"""
import glob
import json
import os
import re
import statistics
import sys


def clock_rate(doc):
    """samples/s over every epoch, by the loader's epoch clocks."""
    eps = doc["epochs"]
    secs = sum(e["seconds"] for e in eps)
    return sum(e["samples"] for e in eps) / secs if secs > 0 else 0.0


def main():
    raw, out = sys.argv[1], sys.argv[2]
    runs = {}
    for path in glob.glob(os.path.join(raw, "*-e*-r*.json")):
        m = re.match(r"(c|py)-e(\d+)-r(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            runs.setdefault(int(m.group(2)), {}).setdefault(
                m.group(1), []).append(json.load(f))
    rows = []
    print("epochs  C samples/s  Python (clocks)  Python (loop wall)  "
          "Py/C clocks  Py/C wall  boundary ms (median)  first batch ms")
    for e in sorted(runs):
        c = [clock_rate(d) for d in runs[e].get("c", [])]
        py = runs[e].get("py", [])
        pc = [clock_rate(d) for d in py]
        pw = [d["python"]["samples"] / d["python"]["wall_s"] for d in py]
        bnd = [b for d in py for b in d["python"]["boundary_ms"]]
        fst = [d["python"]["first_batch_ms"][0] for d in py]
        if not c or not py:
            continue
        row = {"epochs": e, "runs": min(len(c), len(py)),
               "c_samples_per_s": statistics.median(c),
               "py_clock_samples_per_s": statistics.median(pc),
               "py_wall_samples_per_s": statistics.median(pw),
               "boundary_ms_median": statistics.median(bnd) if bnd else None,
               "first_batch_ms_median": statistics.median(fst)}
        row["ratio_clocks"] = row["py_clock_samples_per_s"] / row["c_samples_per_s"]
        row["ratio_wall"] = row["py_wall_samples_per_s"] / row["c_samples_per_s"]
        rows.append(row)
        print(f"{e:6d}  {row['c_samples_per_s']:11.0f}  "
              f"{row['py_clock_samples_per_s']:15.0f}  "
              f"{row['py_wall_samples_per_s']:18.0f}  "
              f"{row['ratio_clocks']:11.3f}  {row['ratio_wall']:9.3f}  "
              f"{row['boundary_ms_median'] or 0:20.1f}  "
              f"{row['first_batch_ms_median']:14.1f}")
    load = {}
    for k in ("start", "end"):
        p = os.path.join(raw, f"loadavg_{k}.txt")
        if os.path.exists(p):
            load[k] = open(p).read().split()[:3]
    print(f"load average at start/end: {load}")
    with open(out, "w") as f:
        json.dump({"rows": rows, "loadavg": load}, f, indent=1)


if __name__ == "__main__":
    main()
