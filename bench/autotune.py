"""bench/autotune.sh's table: each scenario's exhaustive knee against the
online autotuner after min(3 epochs, 200 steps), and the step-change run.
Exit 1 when a target is missed (a miss whose run recorded an "outside"
decision is said as such and allowed: the load beside it moved).
Beside a hog: `bench/hog.py & bench/autotune.sh; kill $!`."""
import json
import os
import sys

LIMIT_STEPS, LIMIT_EPOCHS = 200, 3


def lines(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


def sweep(path):
    rows = lines(path)
    pts = [r["point"] for r in rows if "point" in r]
    knee = [r["knee"] for r in rows if "knee" in r][0]
    return pts, knee


def auto(path):
    rows = lines(path)
    return ([r["epoch"] for r in rows if "epoch" in r],
            [r["event"] for r in rows if "event" in r])


def main(raw):
    with open(os.path.join(raw, "scenarios.txt")) as f:
        names = f.read().split()
    ok = True
    print("%-27s %5s %9s | %5s %9s %6s %8s %7s  %s" % (
        "scenario", "knee", "samples/s", "auto", "samples/s", "ratio",
        "changes", "steady", "target"))
    for name in names:
        pts, knee = sweep(os.path.join(raw, name + ".sweep.jsonl"))
        epochs, events = auto(os.path.join(raw, name + ".auto.jsonl"))
        per_epoch = epochs[0]["steps_end"]
        limit = min(LIMIT_STEPS, LIMIT_EPOCHS * per_epoch)
        steady = [e for e in epochs if e["steps_end"] - per_epoch >= limit]
        if not steady:
            steady = epochs[-1:]
        tput = sum(e["samples_per_s"] for e in steady) / len(steady)
        w = max(e["workers"] for e in steady)
        changes = max(e["changes"] for e in steady)
        ratio = tput / knee["samples_per_s"] if knee["samples_per_s"] else 0
        hit = ratio >= 0.95 and w <= knee["workers"] + 1 and changes <= 1
        # Issue 20: beside a load that comes and goes, a miss is allowed
        # when the autotuner said the outside load held it (an "outside"
        # decision: it did not chase the change).
        named = any(e["kind"] == "outside" for e in events)
        ok &= hit or named
        print("%-27s %5d %9.1f | %5d %9.1f %5.0f%% %8d %7d  %s" % (
            name, knee["workers"], knee["samples_per_s"], w, tput,
            100 * ratio, len(events), changes,
            "met" if hit else "outside load named" if named else "MISSED"))
    change = os.path.join(raw, "change.auto.jsonl")
    if os.path.exists(change):
        epochs, events = auto(change)
        knees = {ms: sweep(os.path.join(raw, "change.sweep%d.jsonl" % ms))[1]
                 for ms in (8, 2, 16)}
        print("\nstep change (sleep:1ms, batch 16): 8 ms for epochs 0-2, "
              "2 ms for 3-5, 16 ms for 6-8")
        print("%5s %8s %8s %8s %9s %6s %8s %9s" % (
            "epoch", "step ms", "workers", "prefetch", "samples/s", "knee",
            "RSS MiB", "released"))
        for e in epochs:
            print("%5d %8.0f %8d %8d %9.1f %6d %8.1f %9.1f" % (
                e["epoch"], e["step_ms"], e["workers"], e["prefetch"],
                e["samples_per_s"], knees[int(e["step_ms"])]["workers"],
                e.get("rss_mib", -1), e.get("released_mib", 0)))
        # The workers at the end of each phase's last epoch.
        w = {ms: epochs[i]["workers"] for ms, i in ((8, 2), (2, 5), (16, 8))}
        both = w[2] > w[8] and w[16] < w[2]
        ok &= both
        print("adapts both ways: %s (%d -> %d -> %d workers)" % (
            "yes" if both else "NO", w[8], w[2], w[16]))
        for ev in events:
            print("  " + ev["text"])
    with open(os.path.join(raw, "loadavg_end.txt")) as f:
        print("\nload average at the end: " + f.read().strip())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
