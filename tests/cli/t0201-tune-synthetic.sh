#!/bin/bash
# stoke tune on a tiny synthetic case: 1 ms samples, batches of 4 and a 2 ms
# step.  0 workers cannot keep up by construction (4 ms of samples per 2 ms
# step), so the knee has workers and is busy; the JSON lists every point
# and the SVG is well-formed XML.  No speed is asserted.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

say "tune --synthetic sleep:1ms --compute sleep:2ms -j 0,1,2,4 (the fixed grid)"
run_stoke tune --synthetic sleep:1ms --samples 64 -b 4 --compute sleep:2ms \
  -j 0,1,2,4 --json "$TMP/t.json" --svg "$TMP/t.svg"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
check_messages
grep -q '^workers  prefetch  batch' "$TMP/out" || fail "no table: $(cat "$TMP/out")"
grep -q '<- knee' "$TMP/out" || fail "knee not marked in the table"
grep -Eq '^  stoke flags  -j [1-9][0-9]* --prefetch [0-9]+$' "$TMP/out" ||
  fail "no ready-to-paste flags: $(cat "$TMP/out")"
grep -Eq 'DataLoader\(dataset, batch_size=4, num_workers=[1-9][0-9]*, prefetch_factor=[0-9]+, persistent_workers=True, pin_memory=True\)' "$TMP/out" ||
  fail "no PyTorch arguments: $(cat "$TMP/out")"
# stderr is not a terminal here: one plain progress line per point.
[ "$(grep -c '^tune \[[0-9]*/12\]' "$TMP/err")" -eq 12 ] ||
  fail "expected 12 progress lines: $(cat "$TMP/err")"

json_check "$TMP/t.json" '
for k in ("config", "machine", "points", "knee", "points_planned",
          "points_done", "interrupted"):
    assert k in d, k
assert d["interrupted"] is False
assert d["points_planned"] == d["points_done"] == 12, d["points_done"]
assert d["config"]["compute"] == "sleep:2ms", d["config"]
assert d["config"]["prefetch_next_epoch"] is True, d["config"]
assert d["machine"]["cores"] >= 1
pts = d["points"]
assert [(p["workers"], p["prefetch"]) for p in pts] == [
    (w, k) for w in (0, 1, 2, 4) for k in (1, 2, 4)], pts
for p in pts:
    assert p["status"] == "measured", p
    for k in ("samples_per_s", "wait_ratio", "verdict", "host_bytes",
              "epoch_s", "batch_size", "steps", "samples"):
        assert k in p, k
    assert p["samples_per_s"] > 0 and 0 <= p["wait_ratio"] <= 1
    assert p["steps"] == 16 and p["samples"] == 64, p
    assert p["verdict"] in ("busy", "starving", "variance"), p
# host memory grows with prefetch at a fixed worker count
for w in (0, 1, 2, 4):
    hb = [p["host_bytes"] for p in pts if p["workers"] == w]
    assert hb == sorted(hb) and len(set(hb)) == 3, hb
k = d["knee"]
assert k["workers"] > 0, k
# Quiet, the knee removes the stall; loaded, preemptions by other jobs can
# leave every point a few waits, and the knee must then say so (as in
# t0204-tune-adaptive).
if k["stall_removed"]:
    assert k["verdict"] == "busy", k
else:
    assert k["reason"].startswith("no configuration as fast as the best "
                                  "removes the stall"), k
assert pts[k["index"]]["workers"] == k["workers"]
assert k["samples_per_s"] >= 0.95 * k["best_samples_per_s"] - 1e-9, k
assert k["flags"] == "-j %d --prefetch %d" % (k["workers"], k["prefetch"])
py = k["pytorch"]
assert py["num_workers"] == k["workers"] and py["persistent_workers"] is True
assert py["prefetch_factor"] == -(-k["prefetch"] // k["workers"]), py
# 0 workers: every step waits for its whole batch, never busy
assert all(p["verdict"] != "busy" for p in pts if p["workers"] == 0)
'

say "the SVG is well-formed XML with axes, series and the knee"
"$PY" -c 'import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])' \
  "$TMP/t.svg" || fail "SVG is not well-formed XML"
grep -q 'worker threads' "$TMP/t.svg" || fail "no x axis label"
grep -q 'samples per second' "$TMP/t.svg" || fail "no y axis label"
grep -q '>knee: -j ' "$TMP/t.svg" || fail "knee not marked in the SVG"
[ "$(grep -c '<polyline' "$TMP/t.svg")" -eq 6 ] || fail "expected 6 series"

say "--json - puts the table on stderr and only JSON on stdout"
run_stoke tune --synthetic tensor --samples 32 -b 8 -j 0,2 --prefetch 1 \
  --batch-sizes 4,8 --json -
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
cp "$TMP/out" "$TMP/t2.json"
json_check "$TMP/t2.json" '
pts = d["points"]
assert [(p["batch_size"], p["workers"]) for p in pts] == [
    (4, 0), (4, 2), (8, 0), (8, 2)], pts
assert d["knee"]["stall_removed"] is None  # no consumer given
assert d["knee"]["flags"].endswith(" -b %d" % d["knee"]["batch_size"])
'
grep -q '^workers  prefetch' "$TMP/err" || fail "no table on stderr"

say "-q: no table, no progress"
run_stoke tune --synthetic tensor --samples 16 -j 0,1 --prefetch 1 -q
[ "$rc" -eq 0 ] && [ ! -s "$TMP/out" ] && [ ! -s "$TMP/err" ] ||
  fail "-q printed: $(cat "$TMP/out" "$TMP/err")"
say "tune --no-epoch-prefetch: each epoch starts at its first next(), as bench's option"
run_stoke tune --synthetic sleep:1ms --samples 32 -b 4 -j 1 --prefetch 1 \
  --no-epoch-prefetch --json "$TMP/n.json" -q
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/n.json" 'assert d["config"]["prefetch_next_epoch"] is False, d["config"]'
echo ok
