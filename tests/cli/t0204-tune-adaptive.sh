#!/bin/bash
# The adaptive sweep follows a waiting stage past the core count: 16 samples
# of 1 ms of sleep against a 2 ms step need about 8 workers on any machine
# (16 / 2), more than this machine's 2 cores and more than the old fixed
# ladder's reach on them is not asserted; the knee must remove the stall,
# sit within one rung of 16 / 2, and the points the queue model skipped
# must be said, with why.  No speed is asserted: the counts come from the
# sleeps, which a loaded machine stretches only upwards.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

say "tune --synthetic sleep:1ms -b 16 --compute sleep:2ms (adaptive)"
run_stoke tune --synthetic sleep:1ms --samples 128 -b 16 --compute sleep:2ms \
  --min-time 200ms --json "$TMP/t.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
check_messages
grep -q 'adaptive sweep' "$TMP/out" || fail "not adaptive: $(cat "$TMP/out")"
grep -q '<- knee' "$TMP/out" || fail "knee not marked in the table"
grep -q 'not run: the queue model' "$TMP/out" ||
  fail "the skipped points are not said: $(cat "$TMP/out")"
json_check "$TMP/t.json" '
assert d["adaptive"] is True
pts = d["points"]
assert d["points_done"] == len(pts) <= d["points_planned"]
measured = [p for p in pts if p["status"] == "measured"]
skipped = [p for p in pts if p["status"] == "skipped"]
assert skipped and d["points_skipped_by_model"] == len(skipped)
for p in skipped:
    assert p["note"].startswith("model:"), p
    assert p["predicted_samples_per_s"] > 0, p
for p in pts:
    assert p["note"], p
ws = sorted({p["workers"] for p in measured})
# the ladder doubled past 2 x the cores here (2 cores) up to a busy rung
assert ws[:4] == [0, 1, 2, 4], ws
assert max(ws) >= 8, ws
k = d["knee"]
# Quiet, the knee removes the stall.  On a loaded machine, preemptions by
# other jobs can leave every rung a few waits (the "variance" verdict at
# 8 workers, 10% waiting, seen with a load of 28 on 2 cores): the knee is
# then the cheapest of the fastest, and it must say so.
if k["stall_removed"]:
    assert k["verdict"] == "busy", k
else:
    assert k["reason"].startswith("no configuration as fast as the best "
                                  "removes the stall"), k
# Sleeps scale with threads only while the threads get a core when they
# wake: beside busy processes (load 20 on 2 cores) the 8-worker rung was no
# faster than the 4-worker one and the knee was, rightly, 4.  So the knee
# is held to 16 / 2 only where the rungs scaled as the sleeps say; else
# the test says why it does not check it.
rate = {}
for p in measured:
    rate[p["workers"]] = max(rate.get(p["workers"], 0), p["samples_per_s"])
if rate.get(8, 0) >= 1.2 * rate.get(4, 0):
    assert k["workers"] >= 5, k
else:
    print("note: 8 workers (%.0f samples/s) were not 1.2x 4 workers (%.0f): "
          "the machine kept the sleeping workers off its cores; the knee "
          "(%d workers) is not held to 16 / 2" %
          (rate.get(8, 0), rate.get(4, 0), k["workers"]))
# Within one rung of 16 / 2 = 8 workers, or past it only because the rungs
# up to 16 were not good enough: on a machine with 2 busy processes beside
# the test (scripts/stress-tests.sh) the 8 and 16 worker points waited and
# the knee was 32 workers, busy.
if k["workers"] > 16:
    for p in measured:
        if 8 <= p["workers"] <= 16:
            assert (p["verdict"] != "busy" or p["samples_per_s"] <
                    0.95 * k["best_samples_per_s"]), (p, k)
# the knee to one worker: the count below it was measured or skipped
below = [p for p in pts if p["workers"] == k["workers"] - 1]
assert below, (k, ws)
'
echo ok
