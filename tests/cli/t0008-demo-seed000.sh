#!/bin/bash
# stoke demo --seed000: 0 workers starve, and the last worker count tried is
# busy.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

say "stoke demo --seed000 --json FILE"
run_stoke demo --seed000 --json "$TMP/demo.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
check_messages
json_check "$TMP/demo.json" '
for k in ("config", "machine", "runs", "speedup", "final_workers",
          "final_verdict"):
    assert k in d, k
c = d["config"]
assert c["synthetic"] == "sleep:5ms" and c["samples"] == 256, c
assert c["batch_size"] == 32 and c["compute"] == "sleep:12ms", c
runs = d["runs"]
assert 2 <= len(runs) <= 7, runs
assert runs[0]["workers"] == 0, runs[0]
assert runs[0]["verdict"] == "starving", runs[0]
ws = [r["workers"] for r in runs]
assert ws == [0, 1, 2, 4, 8, 16, 32][:len(ws)], ws
for r in runs:
    for k in ("epoch_s", "wait_s", "compute_s", "wait_ratio", "verdict"):
        assert k in r, k
# only the last run may be busy: the demo stops at the first busy one, and
# runs the whole ladder only when none was
assert all(r["verdict"] != "busy" for r in runs[:-1]), runs
assert len(runs) == 7 or runs[-1]["verdict"] == "busy", runs
assert d["final_verdict"] == runs[-1]["verdict"]
assert d["final_workers"] == ws[-1]
assert d["speedup"] > 0
'

# That a worker count reaches busy is a claim about the build's speed.
# Under TSan every worker's atomics and locks cost 5-20x, unevenly: CI saw
# the 32-worker run wait 14.6% of its measured epoch on one 15.8 ms step
# (p50 0.03 ms), which the doctor rightly calls variance.  So the sanitizer
# suites check the ladder's logic above, and plain builds the outcome.
if [ -n "${STOKE_TEST_SANITIZE:-}" ]; then
  echo "note: reaching busy is not checked under $STOKE_TEST_SANITIZE"
else
  json_check "$TMP/demo.json" '
assert d["final_verdict"] == "busy", d["runs"][-1]
'
  grep -q '^  verdict: busy' "$TMP/out" || fail "no busy verdict"
fi

say "the text: the W = 0 verdict, the table and the speed-up"
grep -q "^workers 0 (PyTorch's default)" "$TMP/out" || fail "no W=0 line"
grep -q '^  verdict: starving' "$TMP/out" || fail "no starving verdict"
grep -q '^    W   epoch s  waiting s  computing s  verdict$' "$TMP/out" ||
  fail "no before/after table"
grep -Eq '^ +0 +[0-9.]+ +[0-9.]+ +[0-9.]+  starving$' "$TMP/out" ||
  fail "no W=0 row"
grep -q '^speed-up: ' "$TMP/out" || fail "no speed-up"
echo ok
