#!/usr/bin/python3
"""What stoke.TwoClock adds per step: a bare Python loop over a list of
batch-like tuples, against the same loop over TwoClock(list), in the same
process, alternating, best of --repeats.  Prints and writes JSON.

  PYTHONPATH=build/python /usr/bin/python3 bench/twoclock_overhead.py --json o.json
"""
import argparse
import json
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
    bare, wrapped, nocount = [], [], []
    loop(items)
    loop(clock)  # warm caches and the histogram's pages
    for _ in range(args.repeats):
        bare.append(loop(items))
        wrapped.append(loop(clock))
        nocount.append(loop(uncounted_c))
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
    res["target_ns"] = 1000
    res["met"] = res["overhead_ns_per_step"] < res["target_ns"]
    print("twoclock: bare loop %.1f ns/step, TwoClock %.1f ns/step "
          "(%.1f without counting samples): +%.1f ns per step (target < "
          "1000 ns: %s)" % (res["bare_ns_per_step"],
                            res["twoclock_ns_per_step"],
                            res["twoclock_nocount_ns_per_step"],
                            res["overhead_ns_per_step"],
                            "MET" if res["met"] else "MISSED"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
