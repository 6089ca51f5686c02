#!/bin/bash
# stoke profile: bench's report plus the diagnosis (verdict numbers, queue
# model, what-if table, advice), as text and as JSON.  Only structure and
# verdicts that hold by construction (10x margins), never a speed.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

PROFILE_SCHEMA='
dg = d["diagnosis"]
for k in ("verdict", "reason", "wait_ratio", "queue_empty_frac", "tail_ratio",
          "model", "prediction", "what_if", "advice"):
    assert k in dg, k
assert dg["verdict"] == d["summary"]["verdict"], dg
for k in ("t_d_ns", "t_cpu_ns", "t_io_ns", "cpu_frac", "sigma", "t_c_ns",
          "copy_ns", "batch_size", "workers", "prefetch", "cores"):
    assert k in dg["model"], k
m = dg["model"]
assert m["t_cpu_ns"] <= m["t_d_ns"] + 1 and 0 <= m["cpu_frac"] <= 1, m
p = dg["prediction"]
for k in ("producer_batch_ns", "predicted_step_ns", "measured_step_ns",
          "step_error", "predicted_epoch_s", "measured_epoch_s",
          "epoch_error", "bound"):
    assert k in p, k
assert p["predicted_step_ns"] > 0 and p["measured_step_ns"] > 0, p
for e in dg["what_if"]:
    for k in ("workers", "prefetch", "step_ns", "epoch_s", "wait_ratio",
              "bound"):
        assert k in e, k
    assert e["step_ns"] > 0 and e["prefetch"] >= 1, e
for a in dg["advice"]:
    for k in ("kind", "text", "predicted_step_ns", "now_step_ns", "speedup"):
        assert k in a, k
'

say "profile: sleep:2ms samples, 1 worker, 0.2 ms step -> starving, advice -j"
run_stoke profile --synthetic sleep:2ms --samples 32 -b 4 -j 1 \
  --compute sleep:200us --json "$TMP/s.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/s.json" "$BENCH_SCHEMA"
json_check "$TMP/s.json" "$PROFILE_SCHEMA"
json_check "$TMP/s.json" '
dg = d["diagnosis"]
assert dg["verdict"] == "starving", dg["verdict"]
assert dg["prediction"]["bound"] == "workers", dg["prediction"]
assert dg["model"]["workers"] == 1 and dg["model"]["batch_size"] == 4
a = dg["advice"][0]
assert a["kind"] == "workers" and a["workers"] > 1 and a["speedup"] > 1, a
assert a["text"].startswith("-j "), a
ws = sorted({e["workers"] for e in dg["what_if"]})
ks = sorted({e["prefetch"] for e in dg["what_if"]})
assert ws == [0, 1, 2, 4, 8, 16, 32] and ks == [1, 2, 4, 8], (ws, ks)
'
for section in '^verdict: starving' '^the verdict.s numbers' \
  '^queue model' '^  step  *predicted' '^what if' '^advice' '^  1\. -j '; do
  grep -q "$section" "$TMP/out" || fail "no '$section' in: $(cat "$TMP/out")"
done

# The step is long next to a scheduling delay (as test_diagnose_model's busy
# run): with 3 ms steps a worker kept off the cores for a few ms under
# ctest -j2 made a wait that read as "variance" (1 run in 40).
say "profile: tensor source, 20 ms step -> busy, the model is the cost"
run_stoke profile --synthetic tensor --samples 32 -b 4 -j 2 \
  --compute sleep:20ms --json - --what-if-workers 0,2,4 \
  --what-if-prefetch 2,1
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
cp "$TMP/out" "$TMP/b.json"
json_check "$TMP/b.json" "$PROFILE_SCHEMA"
json_check "$TMP/b.json" '
dg = d["diagnosis"]
assert dg["verdict"] == "busy", dg["verdict"]
assert dg["prediction"]["bound"] == "consumer", dg["prediction"]
assert dg["advice"][0]["kind"] == "model", dg["advice"]
pairs = [(e["workers"], e["prefetch"]) for e in dg["what_if"]]
assert pairs == [(0, 1), (0, 2), (2, 1), (2, 2), (4, 1), (4, 2)], pairs
'
grep -q '^verdict: busy' "$TMP/err" || fail "report not on stderr with --json -"

say "profile: spin samples on 0 workers -> inline, with the cpu share"
run_stoke profile --synthetic spin:1ms --samples 16 -b 4 -j 0 -q \
  --json "$TMP/i.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
[ ! -s "$TMP/out" ] || fail "-q printed: $(cat "$TMP/out")"
json_check "$TMP/i.json" '
dg = d["diagnosis"]
assert dg["verdict"] == "starving", dg
assert dg["prediction"]["bound"] == "inline", dg["prediction"]
assert dg["model"]["cpu_frac"] > 0, dg["model"]   # a busy machine lowers it
'

say "profile --trace: Trace Event JSON with a track per worker"
run_stoke profile --synthetic sleep:1ms --samples 32 -b 8 -j 2 \
  --compute sleep:1ms --no-epoch-prefetch -q --trace "$TMP/ptrace.json" \
  --json "$TMP/pt.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/pt.json" "$PROFILE_SCHEMA"
json_check "$TMP/ptrace.json" '
ev = d["traceEvents"]
assert isinstance(ev, list) and ev, "no events"
for e in ev:
    assert e["ph"] in ("M", "X", "C") and "pid" in e and "name" in e, e
    assert e["ph"] == "C" or isinstance(e["tid"], int), e
    assert e["ph"] == "M" or e["ts"] >= 0, e
names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M"}
assert names == {0: "consumer", 1: "stoke-w0", 2: "stoke-w1"}, names
spans = [e for e in ev if e["ph"] == "X"]
reads = [e for e in spans if e["name"] == "read"]
# Each read is on the track of a worker.  Which worker reads what is up
# to the scheduler: beside busy processes one worker can take all 64
# samples while the other waits for a core, so both reading is not
# asserted.
assert len(reads) == 64 and all(e["tid"] in (1, 2) for e in reads), len(reads)
steps = [e for e in spans if e["name"] in ("wait", "compute")]
assert len(steps) == 16 and all(e["tid"] == 0 for e in steps), len(steps)
assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
assert d["otherData"]["dropped_events"] == 0
'
run_stoke profile --synthetic tensor --samples 16 -b 8 -j 1 -q \
  --trace /nonexistent-dir/t.json
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
grep -q "/nonexistent-dir/t.json" "$TMP/err" || fail "no path: $(cat "$TMP/err")"

say "profile usage errors"
expect_usage "profile: no data source" profile --samples 8
expect_usage "--what-if-workers: expected a number" profile \
  --synthetic tensor --what-if-workers 1,x
expect_usage "--what-if-prefetch: must be between 1" profile \
  --synthetic tensor --what-if-prefetch 0
expect_usage "--cores: must be between 1" profile --synthetic tensor --cores 0
expect_usage "--epochs: 1 epoch is all warm-up" profile --synthetic tensor \
  --epochs 1
expect_usage "unknown option '--frobnicate'" profile --synthetic tensor \
  --frobnicate

say "help lists profile"
run_stoke help
grep -q '^  profile' "$TMP/out" || fail "help: $(cat "$TMP/out")"
run_stoke help profile
grep -q 'what-if-workers' "$TMP/out" || fail "help profile: $(cat "$TMP/out")"
grep -q -- '--trace FILE' "$TMP/out" || fail "help profile: $(cat "$TMP/out")"
echo ok
