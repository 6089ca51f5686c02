#!/usr/bin/env python3
"""hog.py [PERIOD_S] - an outside load that comes and goes: a busy loop on
one core, switched on and off (SIGCONT / SIGSTOP) every PERIOD_S seconds
(default 0.37, as bench/outside_marks.py), until it is sent SIGTERM or
SIGINT.  For issue 20's runs beside a moving load:

    /usr/bin/python3 bench/hog.py & hog=$!
    bench/truth.sh --out truth-hog.json      # or bench/autotune.sh
    kill $hog

The loop is stopped and reaped on the way out; the flips are counted on
standard error."""
import os
import signal
import subprocess
import sys
import time


def main():
    period = float(sys.argv[1]) if len(sys.argv) > 1 else 0.37
    loop = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    done = []
    signal.signal(signal.SIGTERM, lambda *_: done.append(1))
    signal.signal(signal.SIGINT, lambda *_: done.append(1))
    on, flips = True, 0
    try:
        while not done:
            time.sleep(period)
            os.kill(loop.pid, signal.SIGSTOP if on else signal.SIGCONT)
            on = not on
            flips += 1
    finally:
        os.kill(loop.pid, signal.SIGCONT)
        loop.kill()
        loop.wait()
        print("hog.py: %d flips of %.2f s" % (flips, period), file=sys.stderr)


if __name__ == "__main__":
    main()
