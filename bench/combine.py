#!/usr/bin/python3
"""Combine the stoke and torch JSON of one benchmark into a ratio table.

  combine.py NAME RAW_DIR OUT_JSON

RAW_DIR holds stoke_w<W>.json (written by `stoke bench --json`) and
torch_w<W>.json (written by bench/torch_<NAME>.py, same field names), plus
commands.txt and a few *.txt notes left by lib.sh.  Prints the table and
writes OUT_JSON.  Standard library only.  With BENCH_STRICT=1 the exit status
is 3 when a target is missed.
"""

import datetime
import glob
import os
import re
import sys

import benchlib

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH_DIR)


# ---- loading -------------------------------------------------------------

def load_side(raw, impl):
    """{W: json} for stoke_w<W>.json or torch_w<W>.json (calibration runs
    excluded)."""
    out = {}
    for path in glob.glob(os.path.join(raw, "%s_w*.json" % impl)):
        m = re.match(r"%s_w(\d+)\.json$" % impl, os.path.basename(path))
        if m:
            out[int(m.group(1))] = benchlib.read_json(path)
    return out


def read_text(raw, name):
    try:
        with open(os.path.join(raw, name)) as f:
            return f.read().strip()
    except OSError:
        return None


def describe_machine(stoke, torch, raw):
    """One machine description from both sides' JSON, stoke's first."""
    m = {}
    tm = next(iter(torch.values()), {}).get("machine", {}) if torch else {}
    sm = next(iter(stoke.values()), {}).get("machine", {}) if stoke else {}
    local = benchlib.machine_info()
    for k in ("cpu_model", "cores", "memory_bytes", "kernel"):
        m[k] = local.get(k)
    m["stoke"] = sm or None
    m["torch"] = tm.get("torch")
    m["python"] = tm.get("python")
    m["python_executable"] = tm.get("python_executable")
    m["torch_num_threads"] = tm.get("torch_num_threads")
    m["torch_start_method"] = tm.get("start_method")
    m["loadavg_start"] = read_text(raw, "loadavg_start.txt")
    m["loadavg_end"] = read_text(raw, "loadavg_end.txt")
    return m


def machine_line(m):
    gib = (m.get("memory_bytes") or 0) / 2**30
    s = m.get("stoke") or {}
    parts = ["%s" % m.get("cpu_model"), "%s cores" % m.get("cores"),
             "%.1f GiB" % gib, "kernel %s" % m.get("kernel")]
    if m.get("torch"):
        parts.append("torch %s (python %s)" % (m["torch"], m.get("python")))
    if s:
        ver = s.get("stoke_version") or s.get("version")
        comp = s.get("compiler")
        parts.append("stoke %s%s" % (ver, " / %s" % comp if comp else ""))
    load = m.get("loadavg_start")
    if load:
        parts.append("load %s" % " ".join(load.split()[:3]))
    return ", ".join(parts)


def check_stoke(w, doc, checks, expect_samples=None):
    """Cross-check one stoke JSON against itself; append problems."""
    tag = "stoke W=%d" % w
    for key in ("config", "machine", "epochs", "summary", "stages"):
        if key not in doc:
            checks.append("%s: JSON has no '%s'" % (tag, key))
    eps = doc.get("epochs") or []
    warm = [e for e in eps if e.get("warmup")]
    meas = [e for e in eps if not e.get("warmup")]
    if len(warm) != 1:
        checks.append("%s: %d warm-up epochs, expected 1" % (tag, len(warm)))
    if not meas:
        checks.append("%s: no measured epochs" % tag)
        return
    s = doc.get("summary") or {}
    mean = sum(e.get("seconds", 0) for e in meas) / len(meas)
    if s.get("epoch_s") and abs(s["epoch_s"] - mean) > 0.01 * mean + 1e-6:
        checks.append("%s: summary.epoch_s %.6f != mean of measured "
                      "epochs[].seconds %.6f" % (tag, s["epoch_s"], mean))
    tot_s = sum(e.get("seconds", 0) for e in meas)
    tot_n = sum(e.get("samples", 0) for e in meas)
    if s.get("samples_per_s") and tot_s > 0:
        sps = tot_n / tot_s
        if abs(s["samples_per_s"] - sps) > 0.01 * sps:
            checks.append("%s: summary.samples_per_s %.1f != measured "
                          "samples/seconds %.1f" % (tag, s["samples_per_s"], sps))
    if expect_samples is not None:
        bad = [e.get("samples") for e in eps if e.get("samples") != expect_samples]
        if bad:
            checks.append("%s: epochs with %s samples, expected %d"
                          % (tag, bad[:3], expect_samples))
    cw = benchlib.get(doc, "config.workers",
                      benchlib.get(doc, "config.n_workers"))
    if cw is not None and cw != w:
        checks.append("%s: config says %s workers" % (tag, cw))


def check_torch(w, doc, checks, expect_samples=None):
    eps = doc.get("epochs") or []
    if expect_samples is not None:
        bad = [e["samples"] for e in eps if e["samples"] != expect_samples]
        if bad:
            checks.append("torch W=%d: epochs with %s samples, expected %d"
                          % (w, bad[:3], expect_samples))


def measured_seconds(doc):
    return sum(e.get("seconds", 0) for e in (doc.get("epochs") or [])
               if not e.get("warmup"))


def n_measured(doc):
    return sum(1 for e in (doc.get("epochs") or []) if not e.get("warmup"))


def median_epoch(doc):
    """Median seconds of the measured epochs (robust to one hiccup)."""
    xs = sorted(e.get("seconds", 0) for e in ((doc or {}).get("epochs") or [])
                if not e.get("warmup"))
    if not xs:
        return None
    h = len(xs) // 2
    return xs[h] if len(xs) % 2 else (xs[h - 1] + xs[h]) / 2


def fmt(v, f="%.4f", none="-"):
    return none if v is None else f % v


def ratio(a, b):
    return a / b if a is not None and b else None


def table(header, rows, aligns=None):
    cols = len(header)
    width = [max(len(str(r[i])) for r in [header] + rows) for i in range(cols)]
    aligns = aligns or ["r"] * cols
    lines = []
    for r in [header] + rows:
        cells = [str(c).ljust(width[i]) if aligns[i] == "l"
                 else str(c).rjust(width[i]) for i, c in enumerate(r)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


# ---- the benchmarks ------------------------------------------------------

def seed000(stoke, torch, checks):
    n, cost = 256, 0.005
    rows, table_rows = [], []
    for w in sorted(set(stoke) | set(torch)):
        ideal = n * cost / max(w, 1)
        s = benchlib.get(stoke.get(w, {}), "summary.epoch_s")
        t = benchlib.get(torch.get(w, {}), "summary.epoch_s")
        if w in stoke:
            check_stoke(w, stoke[w], checks, expect_samples=n)
        if w in torch:
            check_torch(w, torch[w], checks, expect_samples=n)
        row = {"workers": w, "ideal_s": ideal, "stoke_epoch_s": s,
               "torch_epoch_s": t,
               "stoke_over_ideal": ratio(s, ideal),
               "torch_over_ideal": ratio(t, ideal),
               "torch_over_stoke": ratio(t, s),
               "stoke_epoch_median_s": median_epoch(stoke.get(w)),
               "torch_epoch_median_s": median_epoch(torch.get(w)),
               "stoke_wait_p99_ms": benchlib.get(stoke.get(w, {}),
                                                 "summary.wait_p99_ms"),
               "stoke_verdict": benchlib.get(stoke.get(w, {}),
                                             "summary.verdict"),
               "stoke_prefetch_next_epoch": benchlib.get(
                   stoke.get(w, {}), "config.prefetch_next_epoch"),
               "torch_pss_bytes": benchlib.get(torch.get(w, {}),
                                               "summary.pss_total_bytes"),
               "measured_epochs": n_measured(stoke.get(w) or torch.get(w))}
        if row["stoke_over_ideal"] is not None and \
                row["stoke_over_ideal"] < 0.995:
            checks.append("stoke W=%d: %.4f of ideal, faster than possible "
                          "unless work ran before the epoch's first next()"
                          % (w, row["stoke_over_ideal"]))
        rows.append(row)
        table_rows.append([w, fmt(ideal), fmt(s), fmt(t),
                           fmt(row["stoke_over_ideal"], "%.3f"),
                           fmt(row["torch_over_ideal"], "%.3f"),
                           fmt(row["torch_over_stoke"], "%.2f")])
    text = table(["W", "ideal s", "stoke s", "torch s", "stoke/ideal",
                  "torch/ideal", "torch/stoke"], table_rows)
    got = [r["stoke_over_ideal"] for r in rows if r["workers"] <= 32
           and r["stoke_over_ideal"] is not None]
    target = {"text": "stoke/ideal <= 1.03 for every W up to 32",
              "limit": 1.03}
    if got:
        worst = max(rows, key=lambda r: r["stoke_over_ideal"] or 0)
        target["worst"] = worst["stoke_over_ideal"]
        target["worst_workers"] = worst["workers"]
        target["met"] = all(g <= 1.03 for g in got)
    else:
        target["met"] = None
    title = ("seed000: 256 samples x 5 ms (sleep), 3x32x32 f32 + label, "
             "batch 32; epoch seconds (mean of the measured epochs after 1 "
             "warm-up); ideal = 256 x 5 ms / max(W,1)")
    pf = {r["stoke_prefetch_next_epoch"] for r in rows
          if r["stoke_epoch_s"] is not None}
    notes = ["Ratios above 1 are slower than ideal; torch/stoke above 1 means "
             "stoke is faster.",
             "stoke epoch prefetch: %s (on: workers start epoch e+1 once every "
             "batch of epoch e is claimed; torch starts each epoch at "
             "iter(); STOKE_EXTRA_ARGS=--no-epoch-prefetch measures stoke the "
             "torch way)" % ("/".join(sorted({str(p).lower() for p in pf}))
                             or "n/a"),
             "The JSON rows also hold the median epoch of each side, which "
             "one scheduling hiccup on a loaded machine does not move.",
             "torch hands whole batches to workers (8 batches here), so it "
             "cannot use more than 8 workers; stoke spreads the samples of a "
             "batch over all W."]
    return title, rows, text, target, notes


def throughput_rows(stoke, torch, checks, expect_samples_stoke,
                    expect_samples_torch):
    rows = []
    for impl, side, exp in (("stoke", stoke, expect_samples_stoke),
                            ("torch", torch, expect_samples_torch)):
        for w in sorted(side):
            doc = side[w]
            if impl == "stoke":
                check_stoke(w, doc, checks, expect_samples=exp)
            else:
                check_torch(w, doc, checks, expect_samples=exp)
            eps = [e for e in doc.get("epochs", []) if not e.get("warmup")]
            rows.append({
                "impl": impl, "workers": w,
                "samples_per_epoch": eps[0]["samples"] if eps else None,
                "measured_epochs": len(eps),
                "measured_s": measured_seconds(doc),
                "samples_per_s": benchlib.get(doc, "summary.samples_per_s"),
                "wait_ratio": benchlib.get(doc, "summary.wait_ratio"),
                "peak_rss_bytes": benchlib.get(doc, "summary.peak_rss_bytes"),
            })
    return rows


def seed003(stoke, torch, checks):
    rows = throughput_rows(stoke, torch, checks, 4096, 4096)
    best = {impl: max((r["samples_per_s"] or 0 for r in rows
                       if r["impl"] == impl), default=0) or None
            for impl in ("stoke", "torch")}
    table_rows = []
    for r in rows:
        r["over_torch_best"] = ratio(r["samples_per_s"], best["torch"])
        if r["measured_s"] < 0.5:
            checks.append("%s W=%d: only %.3f s measured (< 0.5 s)"
                          % (r["impl"], r["workers"], r["measured_s"]))
        table_rows.append([r["impl"], r["workers"], r["measured_epochs"],
                           fmt(r["measured_s"], "%.3f"),
                           fmt(r["samples_per_s"], "%.0f"),
                           fmt(r["over_torch_best"], "%.2fx")])
    text = table(["impl", "W", "epochs", "measured s", "samples/s",
                  "vs torch best"], table_rows, ["l"] + ["r"] * 5)
    r = ratio(best["stoke"], best["torch"])
    target = {"text": "stoke's best samples/s >= 20x torch's best",
              "limit": 20.0, "stoke_over_torch_best": r,
              "met": None if r is None else r >= 20.0}
    title = ("seed003: in-memory 4096x32 f32 + i64 label, batch 256, "
             "samples/s over the measured epochs after 1 warm-up")
    notes = ["torch's numbers include its Python loop (the consumer is an "
             "empty Python for-loop over the DataLoader); stoke's are the "
             "CLI's C consumer (--compute none).",
             "torch: TensorDataset + DataLoader, pin_memory=False (no GPU), "
             "persistent_workers=True when W > 0."]
    return title, rows, text, target, notes


def overhead(stoke, torch, checks):
    rows = throughput_rows(stoke, torch, checks, 1000000, None)
    table_rows = []
    for r in rows:
        sps = r["samples_per_s"]
        r["ns_per_sample"] = 1e9 / sps if sps else None
        r["us_per_batch"] = 1e6 / (sps / 256.0) if sps else None
        table_rows.append([r["impl"], r["workers"], r["samples_per_epoch"],
                           r["measured_epochs"], fmt(r["measured_s"], "%.3f"),
                           fmt(sps, "%.0f"), fmt(r["ns_per_sample"], "%.1f"),
                           fmt(r["us_per_batch"], "%.2f")])
    text = table(["impl", "W", "samples/epoch", "epochs", "measured s",
                  "samples/s", "ns/sample", "us/batch"], table_rows,
                 ["l"] + ["r"] * 7)
    target = {"text": "none: the figures are the result", "met": None}
    title = ("overhead: empty samples (stoke --synthetic spin:0 --shape 1; "
             "torch: torch.rand(1) + int label), batch 256")
    notes = ["ns/sample = 1e9 / samples_per_s; us/batch = 1e6 / "
             "(samples_per_s / 256): the whole pipeline's cost per batch of "
             "256 empty samples (claim, fill, hand-off, release).",
             "torch is shown for scale only: its epoch is 65,536 samples "
             "(1,000,000 would take minutes) and includes its Python loop."]
    return title, rows, text, target, notes


BENCHES = {"seed000": seed000, "seed003": seed003, "overhead": overhead}


def main(argv):
    if len(argv) != 4 or argv[1] not in BENCHES:
        sys.stderr.write(__doc__)
        return 2
    name, raw, out_path = argv[1], argv[2], argv[3]
    stoke = load_side(raw, "stoke")
    torch = load_side(raw, "torch")
    if not stoke and not torch:
        sys.stderr.write("combine: no stoke_w*.json or torch_w*.json in %s\n"
                         % raw)
        return 1
    checks = []
    title, rows, text, target, notes = BENCHES[name](stoke, torch, checks)
    machine = describe_machine(stoke, torch, raw)
    build = {"build_type": read_text(raw, "build_type.txt"),
             "sanitize": read_text(raw, "sanitize.txt") or None,
             "git": benchlib.git_describe(ROOT)}
    if stoke and build["build_type"] not in (None, "Release"):
        checks.append("stoke was built as '%s', not Release"
                      % build["build_type"])
    if build["sanitize"]:
        checks.append("stoke was built with sanitizers: %s" % build["sanitize"])
    if not stoke:
        notes.append("stoke side not run (BENCH_NO_STOKE=1 or missing)")
    if not torch:
        notes.append("torch side not run")
    commands = (read_text(raw, "commands.txt") or "").splitlines()
    doc = {"benchmark": name, "title": title,
           "generated_utc": datetime.datetime.now(datetime.timezone.utc)
           .strftime("%Y-%m-%dT%H:%M:%SZ"),
           "machine": machine, "build": build, "target": target,
           "rows": rows, "notes": notes, "checks": checks,
           "commands": commands}
    benchlib.write_json(out_path, doc)

    print(title)
    print("machine: " + machine_line(machine))
    print()
    print(text)
    print()
    met = target.get("met")
    line = "target: %s: %s" % (target["text"],
                               {True: "MET", False: "MISSED",
                                None: "n/a"}[met])
    if "worst" in target:
        line += " (worst %.4f at W=%d)" % (target["worst"],
                                           target["worst_workers"])
    if target.get("stoke_over_torch_best") is not None:
        line += " (%.1fx)" % target["stoke_over_torch_best"]
    print(line)
    for n in notes:
        print("note: " + n)
    for c in checks:
        print("check: " + c)
    rel = os.path.relpath(out_path)
    print("wrote " + (out_path if rel.startswith("..") else rel))
    if os.environ.get("BENCH_STRICT") == "1" and met is False:
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
