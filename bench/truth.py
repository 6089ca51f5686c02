#!/usr/bin/env python3
"""truth.py — the diagnosis against ground truth on a grid of synthetic runs.

Every point is a `stoke profile` run whose producer and consumer costs are
known by construction: synthetic samples that sleep (waiting, I/O-like) or
spin (CPU-bound) for a known cost drawn from a known distribution, W workers,
K prefetch, and a consumer that sleeps a known step.  For each point the
right verdict is computed from those known quantities only (never from the
run), points too close to a boundary are left out, and the verdict of the
run is compared with it.  The queue model's epoch prediction is compared
with the measured epoch time, for the run itself (self) and, from one base
run per group (W=2, K=2), for every other W and K of the group (what-if).

Truth (docs/diagnosis.md, "The truth grid"):
  d = mean sample cost, c = its CPU part (spin: d, sleep: 0), P = cores,
  W_eff = min(W, (K+1)*B), T_p = B*max(d/W_eff, c/P) (W >= 1),
  rho = T_p / t_c.
  W = 0:   starving if B*d/(B*d+t_c) >= 0.2, busy if <= 0.05.
  W >= 1:  starving if rho >= 1.5;
           otherwise X = time to make one batch alone (B samples drawn from
           the known distribution, greedy on min(W, B) workers, CPU part
           stretched by W/P when W > P), by Monte Carlo:
           busy      if rho <= 0.5 and P99(X) <= 0.7*K*t_c (the K batches
                     of slack always cover a batch);
           variance  if rho <= 0.5, E[max(0, X - K*t_c)] >= 0.3*t_c and
                     P(X > K*t_c) <= 0.25 (rare but long waits);
           else excluded.
Usage: bench/truth.py [--stoke PATH] [--quick] [--out FILE.json]
"""
import argparse, json, math, os, random, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
B = 8
SAMPLES = 128
WS = [0, 1, 2, 4, 8, 16, 32]
KS = [1, 2, 4, 8]


def draw(dist, mean, rng):
    if dist == "fixed":
        return mean
    if dist == "exp":
        return rng.expovariate(1.0 / mean)
    sigma = float(dist.split(":")[1])
    return mean * math.exp(sigma * rng.gauss(0, 1) - 0.5 * sigma * sigma)


def batch_time(kind, dist, d, w, cores, rng):
    n = max(1, min(w, B))
    stretch = max(1.0, w / cores) if kind == "spin" else 1.0
    free = [0.0] * n
    for _ in range(B):
        i = free.index(min(free))
        free[i] += draw(dist, d, rng) * stretch
    return max(free)


def truth(kind, dist, d, tc, w, k, cores):
    c = d if kind == "spin" else 0.0
    if w == 0:
        share = B * d / (B * d + tc)
        return "starving" if share >= 0.2 else "busy" if share <= 0.05 else None
    w_eff = min(w, (k + 1) * B)
    tp = B * max(d / w_eff, c / cores)
    rho = tp / tc
    if rho >= 1.5:
        return "starving"
    if rho > 0.5:
        return None
    rng = random.Random(hash((kind, dist, d, w)) & 0xffffffff)
    xs = sorted(batch_time(kind, dist, d, w, cores, rng) for _ in range(4000))
    p99 = xs[int(0.99 * len(xs))]
    slack = k * tc
    if p99 <= 0.7 * slack:
        return "busy"
    excess = sum(max(0.0, x - slack) for x in xs) / len(xs)
    p_over = sum(1 for x in xs if x > slack) / len(xs)
    if excess >= 0.3 * tc and p_over <= 0.25:
        return "variance"
    return None


def ms(ns):
    return "%gms" % (ns / 1e6)


def run(stoke, kind, dist, d, tc, w, k, tmp):
    args = [stoke, "profile", "--synthetic", "%s:%s" % (kind, ms(d)),
            "--cost-dist", dist, "--samples", str(SAMPLES), "-b", str(B),
            "-j", str(w), "--prefetch", str(k), "--compute",
            "sleep:%s" % ms(tc), "--epochs", "3", "-q", "--json", tmp,
            "--what-if-workers", ",".join(map(str, WS)),
            "--what-if-prefetch", ",".join(map(str, KS))]
    subprocess.run(args, check=True)
    with open(tmp) as f:
        return json.load(f)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stoke", default=os.path.join(HERE, "..", "build-diag",
                                                    "stoke"))
    ap.add_argument("--quick", action="store_true",
                    help="a quarter of the grid (sleep, fixed and exp)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    kinds = ["sleep", "spin"]
    dists = ["fixed", "exp", "lognormal:1", "lognormal:2"]
    costs = [500000]
    tcs = [1000000, 4000000]
    if a.quick:
        kinds, dists = ["sleep"], ["fixed", "exp"]
    tmp = "/tmp/stoke-truth-%d.json" % os.getpid()
    rows, t0 = [], time.time()
    for kind in kinds:
        for dist in dists:
            for d in costs:
                for tc in tcs:
                    group = {}
                    for w in WS:
                        for k in KS:
                            r = run(a.stoke, kind, dist, d, tc, w, k, tmp)
                            group[(w, k)] = r
                    base = group[(2, 2)]["diagnosis"]["what_if"]
                    cross = {(e["workers"], e["prefetch"]): e["epoch_s"]
                             for e in base}
                    for (w, k), r in group.items():
                        dg = r["diagnosis"]
                        meas = r["summary"]["epoch_s"]
                        rows.append({
                            "kind": kind, "dist": dist, "cost_ns": d,
                            "t_c_ns": tc, "workers": w, "prefetch": k,
                            "truth": truth(kind, dist, d / 1e6, tc / 1e6, w,
                                           k, cores),
                            "verdict": dg["verdict"],
                            "wait_ratio": dg["wait_ratio"],
                            "queue_empty_frac": dg["queue_empty_frac"],
                            "measured_epoch_s": meas,
                            "self_epoch_s": dg["prediction"]["predicted_epoch_s"],
                            "cross_epoch_s": cross.get((w, k)),
                        })
    os.unlink(tmp)
    judged = [r for r in rows if r["truth"]]
    right = [r for r in judged if r["truth"] == r["verdict"]]
    self_err = [abs(r["self_epoch_s"] / r["measured_epoch_s"] - 1)
                for r in rows if r["measured_epoch_s"] > 0]
    cross_err = [abs(r["cross_epoch_s"] / r["measured_epoch_s"] - 1)
                 for r in rows if r["cross_epoch_s"] and r["measured_epoch_s"] > 0
                 and not (r["workers"] == 2 and r["prefetch"] == 2)]
    by_truth = {}
    for r in judged:
        t = by_truth.setdefault(r["truth"], [0, 0])
        t[0] += 1
        t[1] += r["truth"] == r["verdict"]
    print("truth grid: %d runs in %.0f s on %d cores (other work on the "
          "machine adds noise)" % (len(rows), time.time() - t0, cores))
    print("verdicts: %d/%d correct (%.1f%%; target >= 98%%), %d points "
          "excluded as too close to a boundary"
          % (len(right), len(judged), 100.0 * len(right) / max(1, len(judged)),
             len(rows) - len(judged)))
    for t, (n, ok) in sorted(by_truth.items()):
        print("  %-9s %d/%d" % (t, ok, n))
    for r in judged:
        if r["truth"] != r["verdict"]:
            print("  wrong: %s %s cost %.2fms t_c %.0fms W %d K %d: truth %s, "
                  "verdict %s (wait %.1f%%, empty %.0f%%)"
                  % (r["kind"], r["dist"], r["cost_ns"] / 1e6,
                     r["t_c_ns"] / 1e6, r["workers"], r["prefetch"],
                     r["truth"], r["verdict"], 100 * r["wait_ratio"],
                     100 * r["queue_empty_frac"]))
    print("epoch prediction, the run itself: median %.1f%%, p90 %.1f%% "
          "(targets 5%%, 15%%)" % (100 * statistics.median(self_err),
                                   100 * pct(self_err, 0.9)))
    print("epoch prediction, what-if from the W=2 K=2 run of each group: "
          "median %.1f%%, p90 %.1f%%" % (100 * statistics.median(cross_err),
                                        100 * pct(cross_err, 0.9)))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
