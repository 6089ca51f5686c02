#!/usr/bin/python3
"""What stoke.TwoClock adds per step: a bare Python loop over a list of
batch-like tuples, against the same loop over TwoClock(list), in the same
process, alternating, best of --repeats.  Prints and writes JSON.

The exports (publishing for `stoke top`, the metrics file and JSON lines at
their defaults, every 10 s and every 100 steps) are measured beside it: a
TwoClock with all three, against the plain one (target: 20 ns per step).

  PYTHONPATH=build/python /usr/bin/python3 bench/twoclock_overhead.py --json o.json
"""
import argparse
import json
import os
import tempfile
import time

import stoke


def loop(iterable):
    t0 = time.perf_counter_ns()
    for _ in iterable:
        pass
    return time.perf_counter_ns() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args()
    import torch
    batch = (torch.zeros(256, 32), torch.zeros(256, dtype=torch.int64))
    items = [batch] * args.steps
    clock = stoke.TwoClock(items, warmup=0)
    # The C type without the samples count (len() of the first tensor).
    uncounted_c = stoke._stoke.TwoClock(items, warmup=0, count_samples=False)
    bare, wrapped, nocount, exports = [], [], [], []
    # The caller's environment is put back as it was: the two variables
    # are set only around the exporting clock's life.
    saved = {k: os.environ.get(k) for k in ("XDG_RUNTIME_DIR", "STOKE_PUBLISH")}
    with tempfile.TemporaryDirectory(prefix="stoke-overhead-") as tmp:
        os.environ["XDG_RUNTIME_DIR"] = tmp  # the live file goes there
        os.environ["STOKE_PUBLISH"] = "1"
        try:
            exported = stoke.TwoClock(items, warmup=0,
                                      metrics_file=os.path.join(tmp, "o.prom"),
                                      log_jsonl=os.path.join(tmp, "o.jsonl"))
            loop(items)
            loop(clock)  # warm caches and the histogram's pages
            loop(exported)
            for _ in range(args.repeats):
                bare.append(loop(items))
                wrapped.append(loop(clock))
                nocount.append(loop(uncounted_c))
                exports.append(loop(exported))
            del exported  # its live file goes before the folder does
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    res = {
        "steps": args.steps,
        "bare_ns_per_step": min(bare) / args.steps,
        "twoclock_ns_per_step": min(wrapped) / args.steps,
        "twoclock_nocount_ns_per_step": min(nocount) / args.steps,
    }
    res["overhead_ns_per_step"] = (res["twoclock_ns_per_step"] -
                                   res["bare_ns_per_step"])
    res["overhead_nocount_ns_per_step"] = (
        res["twoclock_nocount_ns_per_step"] - res["bare_ns_per_step"])
    res["exports_ns_per_step"] = min(exports) / args.steps
    res["exports_overhead_ns_per_step"] = (res["exports_ns_per_step"] -
                                           res["twoclock_ns_per_step"])
    res["exports_target_ns"] = 20
    res["load_average"] = os.getloadavg()[0]
    res["target_ns"] = 1000
    res["met"] = res["overhead_ns_per_step"] < res["target_ns"]
    print("twoclock: bare loop %.1f ns/step, TwoClock %.1f ns/step "
          "(%.1f without counting samples): +%.1f ns per step (target < "
          "1000 ns: %s)" % (res["bare_ns_per_step"],
                            res["twoclock_ns_per_step"],
                            res["twoclock_nocount_ns_per_step"],
                            res["overhead_ns_per_step"],
                            "MET" if res["met"] else "MISSED"))
    print("exports (publish + metrics + JSON lines): %.1f ns/step, +%.1f "
          "ns per step over TwoClock (target 20 ns; load average %.1f)" %
          (res["exports_ns_per_step"], res["exports_overhead_ns_per_step"],
           res["load_average"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
