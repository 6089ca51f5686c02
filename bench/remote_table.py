#!/usr/bin/python3
"""Table for bench/remote.sh: stoke and torch (urllib Range GET per sample,
best W) per condition (local, loopback 0/20/100 ms, a shared cap of B),
images/s with each round's figure, the ratios to the local run and between
the two, the MB/s against the cap, and the targets of issue 21.

  remote_table.py RAW_DIR OUT_JSON"""
import glob
import json
import math
import os
import re
import sys

import benchlib

CONDS = ["local", "ms0", "ms20", "ms100", "cap"]
NAMES = {"local": "local files", "ms0": "loopback, 0 ms",
         "ms20": "loopback, 20 ms", "ms100": "loopback, 100 ms",
         "cap": "shared cap"}


def load(path):
    with open(path) as f:
        return json.load(f)


def mean(xs):
    return sum(xs) / len(xs) if xs else None


def text(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def knee_check(raw):
    """The tuner's io knee (knee_tune.json: its ladder and knee) against
    stoke bench at every io_concurrency (knee_io*.json), the knee by the
    same rule on both (the fewest requests within the tolerance of the
    best); None when the check did not run."""
    path = os.path.join(raw, "knee_tune.json")
    if not os.path.exists(path):
        return None
    d = json.load(open(path))
    sweep = d.get("io_sweep")
    if not sweep:
        return None
    tol = d["config"]["tolerance"]
    ladder = [(p["io_concurrency"], p["samples_per_s"]) for p in sweep["points"]]
    every = []
    for f in glob.glob(os.path.join(raw, "knee_io*.json")):
        io = int(re.search(r"knee_io(\d+)\.json$", f).group(1))
        every.append((io, json.load(open(f))["summary"]["samples_per_s"]))
    every.sort()
    if not every:
        return None
    best = max(v for _, v in every)
    every_knee = min(io for io, v in every if v >= (1 - tol) * best)
    tune_knee = sweep["knee"]["io_concurrency"]
    steps = abs(math.log2(tune_knee) - math.log2(every_knee))
    return {"set": text(os.path.join(raw, "knee_set.txt")),
            "tolerance": tol, "ladder": ladder, "every": every,
            "tune_knee": tune_knee, "every_knee": every_knee,
            "doublings_apart": steps, "within_one_step": steps <= 1}


def main(raw, out_path):
    cap_kbps = int(text(os.path.join(raw, "cap.txt")).split()[1])
    cap_bps = cap_kbps * 1000.0
    io_chosen = dict(l.split() for l in text(os.path.join(raw, "io_chosen.txt")).splitlines())
    du = {os.path.basename(l.split()[1]): int(l.split()[0])
          for l in text(os.path.join(raw, "corpus_bytes.txt")).splitlines()}
    n_images = int(text(os.path.join(raw, "corpus_images.txt")))
    fmt = text(os.path.join(raw, "format.txt")) or "packed"
    packed_per_sample = du[fmt] / n_images  # a sample of what stoke reads
    machine = None
    sweep = {}
    for p in sorted(glob.glob(os.path.join(raw, "sweep_*_io*.json"))):
        cond, io = re.search(r"sweep_(\w+?)_io(\d+)\.json$", p).groups()
        d = load(p)
        sweep.setdefault(cond, {})[int(io)] = d["summary"]["samples_per_s"]
    rows = {}
    for cond in CONDS:
        st = []
        fetch = []
        for p in sorted(glob.glob(os.path.join(raw, "stoke_%s_r*.json" % cond))):
            d = load(p)
            machine = machine or d.get("machine")
            st.append(d["summary"]["samples_per_s"])
            f = d["summary"].get("fetch")
            if f:
                fetch.append({k: f.get(k) for k in (
                    "bytes_per_s", "latency_p50_ms", "in_flight", "body_frac",
                    "verdict", "io_concurrency")})
        torch = {}
        for p in sorted(glob.glob(os.path.join(raw, "torch_%s_w*_r*.json" % cond))):
            d = load(p)
            w = d["config"]["workers"]
            torch.setdefault(w, {"images_per_s": [], "bytes": 0, "n": 0})
            torch[w]["images_per_s"].append(d["summary"]["samples_per_s"])
            torch[w]["bytes"] = d["config"]["bytes"]
            torch[w]["n"] = d["config"]["n_samples"]
        best_w = max(torch, key=lambda w: mean(torch[w]["images_per_s"])) if torch else None
        rows[cond] = {
            "name": NAMES[cond],
            "stoke_images_per_s": st, "stoke_mean": mean(st),
            "stoke_io_concurrency": int(io_chosen.get(cond, 0)),
            "stoke_fetch": fetch,
            "torch": {str(w): v for w, v in torch.items()},
            "torch_best_w": best_w,
            "torch_mean": mean(torch[best_w]["images_per_s"]) if torch else None,
            "torch_bytes_per_sample": (torch[best_w]["bytes"] / torch[best_w]["n"]
                                       if torch else None)}
    loc_s, loc_t = rows["local"]["stoke_mean"], rows["local"]["torch_mean"]
    lines = []
    lines.append("stoke reads %s shards" % fmt)
    lines.append("%-18s %-22s %6s %-22s %4s %8s %8s %7s" % (
        "condition", "stoke images/s", "io", "torch images/s", "W",
        "stoke/loc", "torch/loc", "s/torch"))
    for cond in CONDS:
        r = rows[cond]
        s, t = r["stoke_mean"], r["torch_mean"]
        r["stoke_vs_local"] = s / loc_s if s and loc_s else None
        r["torch_vs_local"] = t / loc_t if t and loc_t else None
        r["stoke_vs_torch"] = s / t if s and t else None
        tw = r["torch"].get(str(r["torch_best_w"]), {}).get("images_per_s", [])
        lines.append("%-18s %-22s %6s %-22s %4s %8s %8s %7s" % (
            r["name"],
            "%.0f (%s)" % (s, " ".join("%.0f" % x for x in r["stoke_images_per_s"])) if s else "-",
            r["stoke_io_concurrency"] or "-",
            "%.0f (%s)" % (t, " ".join("%.0f" % x for x in tw)) if t else "-",
            r["torch_best_w"] or "-",
            "%.2fx" % r["stoke_vs_local"] if r["stoke_vs_local"] else "-",
            "%.2fx" % r["torch_vs_local"] if r["torch_vs_local"] else "-",
            "%.2fx" % r["stoke_vs_torch"] if r["stoke_vs_torch"] else "-"))
    cap = rows["cap"]
    cap_stoke_bps = cap["stoke_mean"] * packed_per_sample if cap["stoke_mean"] else None
    cap_torch_bps = (cap["torch_mean"] * cap["torch_bytes_per_sample"]
                     if cap["torch_mean"] else None)
    cap["stoke_bytes_per_s"] = cap_stoke_bps
    cap["torch_bytes_per_s"] = cap_torch_bps
    targets = {
        "ms20_stoke_vs_local_ge_0.9": (rows["ms20"]["stoke_vs_local"] or 0) >= 0.9,
        "cap_stoke_ge_0.9_of_B": (cap_stoke_bps or 0) >= 0.9 * cap_bps,
    }
    lines.append("")
    lines.append("cap B = %.1f MB/s (the fault server's one link): stoke %.2f MB/s "
                 "(%.0f%% of B, samples/s x %.1f KB a %s sample), torch W=%s "
                 "%.2f MB/s (%.0f%%)" % (
                     cap_bps / 1e6, (cap_stoke_bps or 0) / 1e6,
                     100 * (cap_stoke_bps or 0) / cap_bps, packed_per_sample / 1e3,
                     fmt, cap["torch_best_w"], (cap_torch_bps or 0) / 1e6,
                     100 * (cap_torch_bps or 0) / cap_bps))
    opens = dict((l.split()[0], float(l.split()[1])) for l in
                 text(os.path.join(raw, "open_s.txt")).splitlines())
    if opens:
        lines.append("open of the whole set (%s shards, stoke.Loader): %s" % (
            fmt, "; ".join("%s %.2f s" % (NAMES[c], v) for c, v in opens.items())))
    lines.append("sweep (images/s by io_concurrency): " + "; ".join(
        "%s %s" % (c, " ".join("%d:%.0f" % (io, v) for io, v in sorted(sweep[c].items())))
        for c in sorted(sweep)))
    knee = knee_check(raw)
    if knee:
        targets["io_knee_within_one_step"] = knee["within_one_step"]
        lines.append(
            "io knee at 100 ms (%s): stoke tune's ladder %s -> knee %d; every "
            "io_concurrency by stoke bench %s -> knee %d (the fewest within "
            "%.0f%% of the best): %s" % (
                knee["set"],
                " ".join("%d:%.0f" % p for p in knee["ladder"]), knee["tune_knee"],
                " ".join("%d:%.0f" % p for p in knee["every"]), knee["every_knee"],
                100 * knee["tolerance"],
                "within one doubling" if knee["within_one_step"] else "MORE than one doubling apart"))
    lines.append("targets: 20 ms >= 0.9x local: %s; cap >= 90%% of B: %s%s" % (
        "met" if targets["ms20_stoke_vs_local_ge_0.9"] else "MISSED",
        "met" if targets["cap_stoke_ge_0.9_of_B"] else "MISSED",
        "; io knee within one doubling: %s" % ("met" if knee["within_one_step"] else "MISSED")
        if knee else ""))
    lines.append("load: start %s, end %s" % (text(os.path.join(raw, "loadavg_start.txt")),
                                               text(os.path.join(raw, "loadavg_end.txt"))))
    print("\n".join(lines))
    out = {"benchmark": "remote", "format": fmt, "open_s": opens,
           "machine": machine, "io_knee": knee,
           "corpus": {"images": n_images, "bytes": du,
                      "packed_bytes_per_sample": packed_per_sample},
           "cap_bytes_per_s": cap_bps, "rows": rows, "sweep": sweep,
           "targets": targets, "table": lines,
           "loadavg_start": text(os.path.join(raw, "loadavg_start.txt")),
           "loadavg_end": text(os.path.join(raw, "loadavg_end.txt")),
           "commands": text(os.path.join(raw, "commands.txt")).splitlines()}
    benchlib.write_json(out_path, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
