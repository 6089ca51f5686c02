#!/usr/bin/env bash
# stoke demo, the main job: the built-in image dataset, 0 workers starving,
# tune, the knee's run, report.html and trace.json.  Checks what holds by
# construction: 0 workers starve (every batch is made inside next()), the
# knee uses workers, waits less and is busy (the story's claim), and every
# file is written and valid.
. "$(dirname "$0")/lib.sh"

say "stoke demo --cache --out --json"
run_stoke demo --cache "$TMP/cache" --out "$TMP/d1" --json "$TMP/demo.json"
[ "$rc" -eq 0 ] || fail "demo exit $rc: $(tail -20 "$TMP/err")"
grep -q "== 1. PyTorch's defaults" "$TMP/out" || fail "no step 1 in the story"
grep -q "wrote .*report.html" "$TMP/out" || fail "does not say where the report is"
grep -q "== 4. online, no sweep: -j auto" "$TMP/out" || fail "no -j auto step"
for f in report.html trace.json tune.svg before.json after.json tune.json \
  autotune.json; do
  [ -s "$TMP/d1/$f" ] || fail "no $f"
done
[ -f "$TMP/cache/.complete" ] || fail "dataset not marked complete"
json_check "$TMP/demo.json" '
b, a = d["before"], d["after"]
assert b["workers"] == 0 and b["verdict"] == "starving", b
assert a["workers"] >= 1, a
assert d["step_ms"] >= 2
# -j auto on samples that sleep 2 ms, 32 a batch, against a 16 ms step: one
# worker makes a batch in 64 ms, so it starts starving and must grow (by
# construction: sleeping needs no core, whatever the load).
u = d["autotune"]
assert u["workers"] >= 2 and u["first_epoch_wait_ratio"] > 0.2, u
'
json_check "$TMP/d1/autotune.json" '
a = d["autotune"]
first = a["decisions"][0]
assert first["kind"] == "grow" and first["from_workers"] == 1, first
assert first["to_workers"] >= 2 and first["wait_before"] > 0.5, first
'
# The knee's rerun is busy, as the story says, unless the machine kept its
# workers off the cores: the step is sized from this machine's cost per
# image, and a core taken by another process (ctest -j2 beside other jobs)
# can make the knee's rerun wait.  Then its workers were runnable longer
# than they ran (schedstat), which the test states instead.
# The same holds for the knee waiting less than 0 workers did (CI saw it
# wait 44% against 39% with its one worker kept off the cores).
# Under a sanitizer every stage runs 5-20x slower, unevenly (TSan: the
# workers' atomics and locks most), so the knee found by tune's short runs
# need not hold for the rerun: a TSan run waited 26% at 1 worker, 48% at 0,
# its workers not queued for a core.  There the claims are about a build's
# speed, not its correctness: the sanitizer suites check the files only.
if [ -n "${STOKE_TEST_SANITIZE:-}" ]; then
  echo "note: the knee's timing claims are not checked under $STOKE_TEST_SANITIZE"
else
json_check "$TMP/d1/after.json" '
v, m = d["summary"]["verdict"], d["diagnosis"]["model"]
with open(sys.argv[1].replace("d1/after.json", "demo.json")) as f:
    demo = json.load(f)
b, a = demo["before"], demo["after"]
# The knee was busy in tune because its workers made a batch faster than
# the step.  The rerun may meet slower workers with no run delay either: a
# neighbour on the other vCPU (its SMT sibling, or the cache) slows a
# thread that is never queued (CI saw the knee of 1 worker wait 16%,
# schedstat 0.15).  Then the own clocks of the rerun say its workers needed at
# least 0.8 of the step a batch, which the test states; a loader that left
# fast workers idle shows neither and fails.
batch_ns = m["t_d_ns"] * m["batch_size"] / max(1, m["workers"])
if v != "busy" or a["wait_ratio"] >= b["wait_ratio"]:
    queued = m["run_delay_frac"] > 1.0
    slow = batch_ns >= 0.8 * m["t_c_ns"]
    with open(sys.argv[1].replace("after.json", "tune.json")) as f:
        tune = json.load(f)
    k = tune["points"][tune["knee"]["index"]]
    tune_ns = 1e9 * k.get("worker_cpu_s", 0) / max(1, k.get("samples", 1))
    assert queued or slow, ("not busy or waiting no less than 0 workers, "
                            "with workers neither queued for a core nor "
                            "slower than the step", v, a, b, m, k)
    print("note: the knee read %s (waiting %.2f against %.2f): its workers "
          "were queued for a core %.2f ns per ns run, and needed %.1f ms a "
          "batch against a %.1f ms step (%.2f ms a sample against %.2f ms "
          "of CPU in tune)"
          % (v, a["wait_ratio"], b["wait_ratio"], m["run_delay_frac"],
             batch_ns / 1e6, m["t_c_ns"] / 1e6, m["t_d_ns"] / 1e6,
             tune_ns / 1e6))
'
fi
json_check "$TMP/d1/trace.json" '
names = {e["args"]["name"] for e in d["traceEvents"] if e["ph"] == "M"}
assert "consumer" in names and "stoke-w0" in names, names
spans = {e["name"] for e in d["traceEvents"] if e["ph"] == "X"}
assert {"read", "decode", "transform", "wait", "compute"} <= spans, spans
'
grep -q "starving" "$TMP/d1/report.html" || fail "report lacks the verdict"

say "a second run reuses the dataset"
run_stoke demo --cache "$TMP/cache" --out "$TMP/d2"
grep -q "making the demo dataset" "$TMP/out" && fail "the dataset was made again"
[ "$rc" -eq 0 ] || fail "second demo exit $rc"
echo ok
