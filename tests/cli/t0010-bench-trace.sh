#!/usr/bin/env bash
# stoke bench --trace: a Chrome trace with a track per worker, the consumer's
# wait and compute spans per step, and the ready-queue counter.
. "$(dirname "$0")/lib.sh"

say "bench --trace writes Trace Event JSON with every sample and step"
run_stoke bench --synthetic sleep:1ms --samples 48 -b 8 -j 3 --epochs 2 \
  --compute sleep:1ms --no-epoch-prefetch --trace "$TMP/trace.json" -q
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/trace.json" '
ev = d["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M"}
assert names == {0: "consumer", 1: "stoke-w0", 2: "stoke-w1", 3: "stoke-w2"}, names
spans = [e for e in ev if e["ph"] == "X"]
reads = [e for e in spans if e["name"] == "read"]
# 2 epochs x 48 samples, each sampled once, on worker tracks only
assert len(reads) == 96, len(reads)
assert all(e["tid"] in (1, 2, 3) for e in reads)
assert sorted(e["args"]["sample"] for e in reads) == sorted(list(range(48)) * 2)
waits = [e for e in spans if e["name"] == "wait"]
computes = [e for e in spans if e["name"] == "compute"]
assert len(waits) == 12 and len(computes) == 12, (len(waits), len(computes))
assert all(e["tid"] == 0 for e in waits + computes)
# a step computes after it waited: each compute span starts at a wait end
ends = sorted(round(w["ts"] + w["dur"], 3) for w in waits)
for c in computes:
    assert min(abs(c["ts"] - t) for t in ends) < 0.01, c
assert all(e["dur"] >= 0 for e in spans)
counters = [e for e in ev if e["ph"] == "C"]
assert len(counters) == 12 and all("depth" in e["args"] for e in counters)
assert d["otherData"]["dropped_events"] == 0
'

say "an unwritable trace path is a runtime error naming it"
run_stoke bench --synthetic tensor --samples 16 -b 8 -j 1 \
  --trace /nonexistent-dir/t.json -q
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
grep -q "/nonexistent-dir/t.json" "$TMP/err" || fail "no path: $(cat "$TMP/err")"
check_messages
echo "ok"
