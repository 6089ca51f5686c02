#!/usr/bin/env python3
"""outside_marks.py — does the truth grid mark the points whose other load
moved?  A few points of bench/truth.py's grid (its stoke profile arguments:
8 points, REPS rounds of about 3 s) while a busy loop (one core) is switched
on and off every 0.37 s (SIGCONT / SIGSTOP).  Each run's measured part is
read from --log-jsonl (the warm-up epoch's end to the last epoch's end,
wall clock).  A run with a switch at least 40 ms after its start and 60 ms
before its end (the shortest window is 50 ms, src/stats/outside.h) should
be marked (summary.outside_load.moved); one with no switch within 10 ms of
it should not be, unless other jobs moved meanwhile (the load average is
printed).  Between the two ("edge") is not judged.
Usage: bench/outside_marks.py STOKE [REPS]"""
import json, os, signal, subprocess, sys, threading, time

STOKE = sys.argv[1]
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
JSON = "/tmp/stoke-marks-%d.json" % os.getpid()
LOG = "/tmp/stoke-marks-%d.jsonl" % os.getpid()
POINTS = [("sleep", 1, 1, 4), ("sleep", 2, 2, 4), ("sleep", 4, 2, 4),
          ("sleep", 8, 4, 4), ("spin", 2, 2, 4), ("spin", 4, 1, 4),
          ("sleep", 2, 2, 1), ("sleep", 0, 1, 4)]


def args(kind, w, k, tc):
    return [STOKE, "profile", "--synthetic", "%s:0.5ms" % kind,
            "--cost-dist", "fixed", "--samples", "128", "-b", "8",
            "-j", str(w), "--prefetch", str(k), "--compute", "sleep:%dms" % tc,
            "--epochs", "3", "-q", "--json", JSON, "--log-jsonl", LOG,
            "--what-if-workers", "0,1,2,4,8,16,32",
            "--what-if-prefetch", "1,2,4,8"]


def main():
    hog = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    flips, stop = [], threading.Event()

    def toggler():
        on = True
        while not stop.is_set():
            time.sleep(0.37)
            on = not on
            hog.send_signal(signal.SIGCONT if on else signal.SIGSTOP)
            flips.append(time.time())

    th = threading.Thread(target=toggler)
    th.start()
    load0 = os.getloadavg()
    res = {"moved": [0, 0], "steady": [0, 0], "edge": [0, 0]}
    try:
        for _ in range(REPS):
            for kind, w, k, tc in POINTS:
                if os.path.exists(LOG):
                    os.unlink(LOG)
                subprocess.run(args(kind, w, k, tc), check=True)
                ep = [json.loads(l) for l in open(LOG)]
                ep = [e for e in ep if e.get("kind") == "epoch"]
                t1 = ep[-1]["time"]
                t0 = t1 - sum(e["seconds"] for e in ep if not e["warmup"])
                o = json.load(open(JSON))["summary"]["outside_load"]
                inside = [f for f in flips if t0 + 0.04 <= f <= t1 - 0.06]
                near = [f for f in flips if t0 - 0.01 <= f <= t1 + 0.01]
                cls = "moved" if inside else "steady" if not near else "edge"
                res[cls][0] += 1
                res[cls][1] += bool(o["moved"])
                print("%-5s W%d K%d t_c %dms measured %.3fs: %-6s windows %d "
                      "%.2f-%.2f cores, marked %s"
                      % (kind, w, k, tc, t1 - t0, cls, o["windows"],
                         o["min_cores"], o["max_cores"], o["moved"]))
    finally:
        stop.set()
        th.join()
        hog.send_signal(signal.SIGCONT)
        hog.kill()
        for p in (JSON, LOG):
            if os.path.exists(p):
                os.unlink(p)
    for c, (n, m) in res.items():
        print("%s: %d runs, %d marked" % (c, n, m))
    print("load average (1, 5, 15 min): %.2f %.2f %.2f before, %.2f %.2f %.2f "
          "after" % (load0 + os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
