#!/usr/bin/python3
"""The python benchmark's table: per workload and worker count, the C
consumer (`stoke bench`), the Python consumer (stoke.Loader into torch
tensors) and torch's best, as samples/s and ratios; then TwoClock's cost.

  python_table.py RAW_DIR OUT_JSON

Target: Python >= 0.9x C on every workload.  BENCH_STRICT=1: exit 3 when
it is missed.  Standard library only (benchlib)."""

import glob
import os
import re
import sys

import benchlib

TARGET = 0.9


def rate(path):
    return benchlib.get(benchlib.read_json(path), "summary.samples_per_s")


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def load(raw):
    """rows: (workload, W) -> {side: median rate}, with "pairs": the
    median of the per-pair Python/C ratios when runs were repeated
    (_r<k> files, alternating C and Python); torch: workload -> {W: r}."""
    runs = {}  # (workload, W) -> {side: {rep: rate}}
    torch = {}
    for path in glob.glob(os.path.join(raw, "*_w*.json")):
        m = re.match(r"(c|py|pyarrays|torch)_(.+)_w(\d+)(?:_r(\d+))?\.json$",
                     os.path.basename(path))
        if not m or ".calib" in path:
            continue
        side, workload, w = m.group(1), m.group(2), int(m.group(3))
        rep = int(m.group(4) or 0)
        if side == "torch":
            torch.setdefault(workload, {})[w] = rate(path)
        else:
            runs.setdefault((workload, w), {}).setdefault(side, {})[rep] = \
                rate(path)
    rows = {}
    for key, sides in runs.items():
        row = {side: median(list(reps.values()))
               for side, reps in sides.items()}
        row["n"] = max(len(reps) for reps in sides.values())
        c = sides.get("c", {})
        for side in ("py", "pyarrays"):
            pairs = [sides[side][k] / c[k] for k in sides.get(side, {})
                     if k in c and c[k]]
            if pairs:
                row[side + "_pair_ratio"] = median(pairs)
        rows[key] = row
    return rows, torch


def torch_key(workload):
    """The torch runs a workload compares with: images-u8 for folder-u8."""
    if workload.startswith(("folder-", "packed-")):
        return "images-" + workload.split("-", 1)[1]
    return workload


def main():
    raw, out = sys.argv[1], sys.argv[2]
    rows, torch = load(raw)
    table, worst = [], None
    print("python: stoke.Loader (Python, torch tensors) against stoke bench "
          "(C) and torch's best")
    print("(medians of the runs; Py/C is the median of alternating pairs' "
          "ratios where runs were repeated)")
    print("%-12s %2s %14s %14s %7s %12s %9s %9s" % (
        "workload", "W", "C samples/s", "Py samples/s", "Py/C",
        "torch best", "C/torch", "Py/torch"))
    for (workload, w) in sorted(rows):
        r = rows[(workload, w)]
        c, py = r.get("c"), r.get("py")
        tb = max(torch.get(torch_key(workload), {}).values(), default=None)
        # Repeated pairs: the median of each pair's ratio.
        ratio = r.get("py_pair_ratio") or (py / c if c and py else None)
        row = {"workload": workload, "workers": w, "c_samples_per_s": c,
               "py_samples_per_s": py, "py_over_c": ratio,
               "torch_best_samples_per_s": tb,
               "c_over_torch": c / tb if c and tb else None,
               "py_over_torch": py / tb if py and tb else None}
        row["runs"] = r["n"]
        if "pyarrays" in r:
            row["py_arrays_samples_per_s"] = r["pyarrays"]
            row["py_arrays_over_c"] = (r.get("pyarrays_pair_ratio") or
                                       (r["pyarrays"] / c if c else None))
        table.append(row)
        if ratio is not None:
            worst = ratio if worst is None else min(worst, ratio)

        def f(x, fmt):
            return fmt % x if x is not None else "-"
        print("%-12s %2d %14s %14s %7s %12s %9s %9s" % (
            workload, w, f(c, "%.0f"), f(py, "%.0f"), f(ratio, "%.3f"),
            f(tb, "%.0f"), f(row["c_over_torch"], "%.1fx"),
            f(row["py_over_torch"], "%.1fx")))
        if "pyarrays" in r:
            print("%-12s %2s %14s %14s %7s   (stoke.Loader((features, "
                  "targets)): the arrays source)" % (
                      "", "", "", f(r["pyarrays"], "%.0f"),
                      f(row["py_arrays_over_c"], "%.3f")))
    tc = None
    tc_path = os.path.join(raw, "twoclock.json")
    if os.path.exists(tc_path):
        tc = benchlib.read_json(tc_path)
        print("\nTwoClock: +%.1f ns per step over a bare loop (%.1f without "
              "counting samples); target < 1000 ns: %s" % (
                  tc["overhead_ns_per_step"],
                  tc["overhead_nocount_ns_per_step"],
                  "MET" if tc["met"] else "MISSED"))
    met = worst is not None and worst >= TARGET
    print("\ntarget: Python >= %.1fx C on every workload: %s (worst %s)" % (
        TARGET, "MET" if met else "MISSED",
        "%.3f" % worst if worst is not None else "-"))
    benchlib.write_json(out, {
        "benchmark": "python", "rows": table, "twoclock": tc,
        "target": {"py_over_c_min": TARGET, "worst": worst, "met": met},
        "machine": benchlib.machine_info(),
        "commands": open(os.path.join(raw, "commands.txt")).read().splitlines()
        if os.path.exists(os.path.join(raw, "commands.txt")) else []})
    if os.environ.get("BENCH_STRICT") and not met:
        sys.exit(3)


if __name__ == "__main__":
    main()
