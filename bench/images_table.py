#!/usr/bin/python3
"""Table for bench/images.sh: stoke (three storages) against torchvision's
best worker count and against the full-decode ceiling, images/s and peak
memory, with the targets of the image issue.

  images_table.py RAW_DIR OUT_JSON"""
import glob
import json
import os
import sys

import benchlib


def load(path):
    with open(path) as f:
        return json.load(f)


def epoch_rates(d):
    """images/s of each measured epoch: the spread behind the mean."""
    return [e["samples"] / e["seconds"] for e in d["epochs"]
            if not e.get("warmup") and e["seconds"] > 0]


def spread(rates):
    return "%.0f-%.0f" % (min(rates), max(rates)) if rates else "-"


def main(raw, out_path):
    ceiling = load(os.path.join(raw, "ceiling.json"))
    ceiling1 = load(os.path.join(raw, "ceiling_1.json"))
    rows, result = [], {"ceiling": ceiling, "ceiling_1_thread": ceiling1,
                        "dtypes": {}}
    machine = None
    for dtype in ("u8", "f32"):
        torch = {}
        for p in sorted(glob.glob(os.path.join(raw, "torch_%s_w*.json" % dtype))):
            d = load(p)
            machine = machine or d.get("machine")
            s = d["summary"]
            torch[d["config"]["workers"]] = {
                "images_per_s": s["samples_per_s"],
                "epoch_images_per_s": epoch_rates(d),
                "peak_rss_bytes": s.get("pss_total_bytes") or s["peak_rss_bytes"]}
        stoke = {}
        for p in sorted(glob.glob(os.path.join(raw, "stoke_*_%s_w*.json" % dtype))):
            d = load(p)
            kind = os.path.basename(p).split("_")[1]
            w = d["config"]["workers"]
            s = d["summary"]
            stoke[(kind, w)] = {
                "images_per_s": s["samples_per_s"],
                "epoch_images_per_s": epoch_rates(d),
                "peak_rss_bytes": s["peak_rss_bytes"],
                "prefetch": d["config"]["prefetch"],
                "batch_bytes": s.get("bytes", 0) / max(1, s.get("steps", 1)),
                "stages": {st["name"]: st["mean_us"] for st in d["stages"]}}
        if not torch and not stoke:
            continue
        best_w = max(torch, key=lambda w: torch[w]["images_per_s"]) if torch else None
        best = torch[best_w]["images_per_s"] if torch else None
        result["dtypes"][dtype] = {"torch": torch, "torch_best_workers": best_w,
                                   "stoke": {"%s_w%d" % k: v for k, v in stoke.items()}}
        print("\n%s: torch's best is %s images/s (W=%s); the full-decode "
              "ceiling on %d threads is %.0f images/s (%.0f on 1)" % (
                  dtype, "%.0f" % best if best else "-", best_w,
                  ceiling["threads"], ceiling["images_per_s"],
                  ceiling1["images_per_s"]))
        print("  %-10s %2s %9s %11s %9s %10s %9s %9s  %s" % (
            "storage", "W", "images/s", "by epoch", "x torch", "x ceiling",
            "RSS MiB", "limit", "stage means (us)"))
        for w in sorted(torch):
            t = torch[w]
            print("  %-10s %2d %9.0f %11s %9s %10.2f %9.0f %9s" % (
                "torch", w, t["images_per_s"], spread(t["epoch_images_per_s"]),
                "", t["images_per_s"] / ceiling["images_per_s"],
                t["peak_rss_bytes"] / 2**20, ""))
        for (kind, w), s in sorted(stoke.items()):
            limit = (s["prefetch"] + 1) * s["batch_bytes"] + 64 * 2**20
            stages = " ".join("%s %.0f" % (k, v) for k, v in s["stages"].items()
                              if k in ("read", "decode", "transform"))
            print("  %-10s %2d %9.0f %11s %9s %10.2f %9.0f %9.0f  %s" % (
                kind, w, s["images_per_s"], spread(s["epoch_images_per_s"]),
                "%.2f" % (s["images_per_s"] / best) if best else "-",
                s["images_per_s"] / ceiling["images_per_s"],
                s["peak_rss_bytes"] / 2**20, limit / 2**20, stages))
            s["x_torch_best"] = s["images_per_s"] / best if best else None
            s["x_ceiling"] = s["images_per_s"] / ceiling["images_per_s"]
            s["rss_limit_bytes"] = limit
    print("\nimages/s: the mean over the measured epochs (the same number on "
          "both sides, after a warm-up); by epoch: the slowest and fastest "
          "of them")
    print("targets: u8 >= 4x torch's best and >= 1.0x the ceiling; f32 >= 6x "
          "torch's best; peak RSS <= (K + 1) batches + 64 MiB")
    if machine:
        print("machine: %s, %s cores, %.1f GiB, kernel %s, torch %s, load %s" % (
            machine.get("cpu_model"), machine.get("cores"),
            machine.get("memory_bytes", 0) / 2**30, machine.get("kernel"),
            machine.get("torch"), " ".join(open(os.path.join(raw, "loadavg_end.txt"))
                                         .read().split()[:3])
            if os.path.exists(os.path.join(raw, "loadavg_end.txt")) else "?"))
    result["machine"] = machine
    benchlib.write_json(out_path, result)


if __name__ == "__main__":
    main(*sys.argv[1:3])
