#!/usr/bin/env python3
"""hotpath.py - the tables of bench/hotpath.sh (standard library only).

  hotpath.py runs SUMMARY.json TARGET W:SIDE:RUN.json ...
      samples/s of each `stoke bench --json` run, the medians per W and
      side, the ratio new/old, the target beside W=0's ratio; writes
      SUMMARY.json.  Exit status 3 when W=0 misses the target.

  hotpath.py callgrind SUMMARY.json DSAMPLES OLD_SRC NEW_SRC TOP \
                       OLD_SHORT OLD_LONG NEW_SHORT NEW_LONG
      instructions per sample of each side from two callgrind profiles of
      the same run, one shorter than the other by DSAMPLES samples: the
      difference leaves out everything a run pays once (start-up, the
      synthetic data set, the report) and keeps what each sample costs.
      Prints the top functions by inclusive cost per side, the functions
      whose own cost changed most, and the hottest source lines per side
      (inlined code is charged to the line it came from).

  hotpath.py meta SUMMARY.json KEY=VALUE ...
      adds the machine, the load and the commits to SUMMARY.json.
"""
import json
import os
import re
import statistics
import sys


# ---- runs -------------------------------------------------------------------

def cmd_runs(argv):
    summary_path, target = argv[0], float(argv[1])
    runs = {}  # (w, side) -> [samples/s, ...] in run order
    for spec in argv[2:]:
        w, side, path = spec.split(":", 2)
        with open(path) as f:
            sps = json.load(f)["summary"]["samples_per_s"]
        runs.setdefault((int(w), side), []).append(sps)

    result = {"target_w0": target, "workers": {}}
    missed = False
    for w in sorted({w for w, _ in runs}):
        old, new = runs.get((w, "old"), []), runs.get((w, "new"), [])
        print(f"W={w}")
        for side, vals in (("old", old), ("new", new)):
            cells = "  ".join(f"{v / 1e6:8.2f}" for v in vals)
            print(f"  {side}  M samples/s  {cells}   median "
                  f"{statistics.median(vals) / 1e6:8.2f}")
        ratio = statistics.median(new) / statistics.median(old)
        # The pairs ran side by side: the median of their ratios, and how
        # many went the new side's way, tell a shift from a bimodal spread.
        pairs = [n / o for o, n in zip(old, new) if o]
        pair_ratio = statistics.median(pairs) if pairs else None
        faster = sum(r > 1 for r in pairs)
        line = f"  ratio new/old  {ratio:.3f}x"
        if pairs:
            line += (f"   pairs: median {pair_ratio:.3f}x, new faster in "
                     f"{faster} of {len(pairs)}")
        if w == 0:
            ok = ratio >= target
            missed = not ok
            line += f"   (target >= {target:.2f}x: {'met' if ok else 'MISSED'})"
        print(line)
        result["workers"][str(w)] = {
            "old_samples_per_s": old, "new_samples_per_s": new,
            "old_median": statistics.median(old),
            "new_median": statistics.median(new), "ratio": ratio,
            "pair_ratio_median": pair_ratio, "pairs_new_faster": faster}
    result["target_met"] = not missed
    merge_summary(summary_path, {"runs": result})
    return 3 if missed else 0


# ---- callgrind --------------------------------------------------------------

class Profile:
    """Self cost per function and per source line, and call costs, read
    from a callgrind output file (format of valgrind 3.x, Ir only)."""

    def __init__(self, path):
        self.total = 0
        self.self_fn = {}      # fn -> Ir spent in its own code
        self.incl_fn = {}      # fn -> self + the calls it makes
        self.self_line = {}    # (file, line) -> Ir
        self.fn_file = {}      # fn -> the file its name was first seen in
        self._read(path)

    def _read(self, path):
        names = {"fl": {}, "fn": {}, "ob": {}}
        space = {"fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl", "cfl": "fl",
                 "fn": "fn", "cfn": "fn", "ob": "ob", "cob": "ob"}
        fl = fi = fn = None
        line = 0
        in_call = False
        pos_re = re.compile(r"^([+-]\d+|\*|\d+|0x[0-9a-fA-F]+)\s+(.*)$")
        with open(path, errors="replace") as f:
            for raw in f:
                raw = raw.rstrip("\n")
                if not raw or raw.startswith("#"):
                    continue
                m = pos_re.match(raw)
                if m:
                    p, rest = m.groups()
                    if p == "*":
                        pass
                    elif p[0] in "+-":
                        line += int(p)
                    else:
                        line = int(p, 0)
                    cost = int(rest.split()[0]) if rest.split() else 0
                    if in_call:
                        # the callee's inclusive cost, charged to the caller
                        self.incl_fn[fn] = self.incl_fn.get(fn, 0) + cost
                        in_call = False
                        continue
                    self.self_fn[fn] = self.self_fn.get(fn, 0) + cost
                    self.incl_fn[fn] = self.incl_fn.get(fn, 0) + cost
                    key = (fi or fl, line)
                    self.self_line[key] = self.self_line.get(key, 0) + cost
                    continue
                key, _, val = raw.partition("=")
                if key in space:
                    name = _name(names[space[key]], val)
                    if key == "fl":
                        fl, fi = name, None
                    elif key in ("fi", "fe"):
                        fi = name
                    elif key == "fn":
                        fn, fi = name, None
                        self.fn_file.setdefault(fn, fl)
                elif key == "calls":
                    in_call = True
                elif raw.startswith("totals:") or raw.startswith("summary:"):
                    self.total = int(raw.split()[1])


def _name(table, val):
    """callgrind's name compression: '(7) name' defines 7, '(7)' uses it."""
    m = re.match(r"^\((\d+)\)\s*(.*)$", val)
    if not m:
        return val
    if m.group(2):
        table[m.group(1)] = m.group(2)
        return m.group(2)
    return table.get(m.group(1), val)


# Frames every sample runs under (the process's and threads' entry points):
# their inclusive cost is the total, which the first line already says.
WRAPPER = re.compile(r"^(\(below main\)|0x[0-9a-f]+|main|__libc_start_main.*|"
                     r"__libc_start_call_main|clone3?|start_thread|_start)$")


def per_sample(short, long_, attr, dsamples):
    a, b = getattr(short, attr), getattr(long_, attr)
    out = {}
    for k in set(a) | set(b):
        d = (b.get(k, 0) - a.get(k, 0)) / dsamples
        if abs(d) >= 0.05:
            out[k] = d
    return out


def source_text(src_root, path, line):
    """The source line, from the tree the profile was built from."""
    if not path or path == "???":
        return ""
    for cand in (path, os.path.join(src_root, path)):
        try:
            with open(cand, errors="replace") as f:
                for i, text in enumerate(f, 1):
                    if i == line:
                        return text.strip()[:70]
        except OSError:
            continue
    return ""


def short_path(path, roots):
    for r in roots:
        if path and path.startswith(r.rstrip("/") + "/"):
            return path[len(r.rstrip("/")) + 1:]
    return path


def cmd_callgrind(argv):
    summary_path, dsamples = argv[0], float(argv[1])
    roots = {"old": argv[2], "new": argv[3]}
    top = int(argv[4])
    prof = {"old": (Profile(argv[5]), Profile(argv[6])),
            "new": (Profile(argv[7]), Profile(argv[8]))}
    total, incl, selfc, lines = {}, {}, {}, {}
    for side, (s, l) in prof.items():
        total[side] = (l.total - s.total) / dsamples
        incl[side] = per_sample(s, l, "incl_fn", dsamples)
        selfc[side] = per_sample(s, l, "self_fn", dsamples)
        lines[side] = per_sample(s, l, "self_line", dsamples)

    print(f"instructions per sample   old {total['old']:8.1f}   "
          f"new {total['new']:8.1f}   new/old {total['new'] / total['old']:.3f}"
          f"   (delta {total['new'] - total['old']:+.1f})")

    for side in ("old", "new"):
        print(f"\n{side}: top functions by inclusive instructions per sample")
        print(f"  {'inclusive':>9} {'self':>8}  function")
        rows = [kv for kv in incl[side].items() if not WRAPPER.match(kv[0])]
        for fn, v in sorted(rows, key=lambda kv: -kv[1])[:top]:
            print(f"  {v:9.1f} {selfc[side].get(fn, 0):8.1f}  {fn}")

    print("\nself instructions per sample that changed, new - old "
          "(a renamed or newly inlined function shows as one gone and one new)")
    print(f"  {'old':>8} {'new':>8} {'delta':>8}  function")
    fns = set(selfc["old"]) | set(selfc["new"])
    deltas = sorted(((selfc["new"].get(f, 0) - selfc["old"].get(f, 0), f)
                     for f in fns), key=lambda t: -abs(t[0]))
    shown = []
    for d, f in deltas:
        if abs(d) < 0.5 or len(shown) >= top:
            break
        o, n = selfc["old"].get(f, 0), selfc["new"].get(f, 0)
        print(f"  {o:8.1f} {n:8.1f} {d:+8.1f}  {f}")
        shown.append({"function": f, "old": o, "new": n, "delta": d})

    for side in ("old", "new"):
        print(f"\n{side}: hottest source lines (self instructions per sample;"
              " inlined code counted where it was written)")
        items = sorted(lines[side].items(), key=lambda kv: -kv[1])[:top]
        for (path, ln), v in items:
            where = f"{short_path(path, roots.values())}:{ln}"
            print(f"  {v:7.1f}  {where:34} "
                  f"{source_text(roots[side], path, ln)}")

    merge_summary(summary_path, {"callgrind": {
        "instructions_per_sample": total, "self_deltas": shown,
        "top_inclusive": {s: sorted(incl[s].items(),
                                    key=lambda kv: -kv[1])[:top]
                          for s in incl}}})
    return 0


def cmd_meta(argv):
    merge_summary(argv[0], dict(kv.split("=", 1) for kv in argv[1:]))
    return 0


def merge_summary(path, part):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        doc = {}
    doc.update(part)
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    cmds = {"runs": cmd_runs, "callgrind": cmd_callgrind, "meta": cmd_meta}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    sys.exit(cmds[sys.argv[1]](sys.argv[2:]))
