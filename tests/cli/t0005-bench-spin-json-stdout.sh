#!/bin/bash
# A CPU-bound source and a CPU-bound step (spin), with the report on stdout:
# stdout is then nothing but JSON and the table goes to stderr.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

say "bench --synthetic spin:1ms -j 1 --compute spin:1ms --json -"
run_stoke bench --synthetic spin:1ms --samples 32 -b 4 -j 1 \
  --compute spin:1ms --cost-dist exp --json -
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
cp "$TMP/out" "$TMP/r.json"
json_check "$TMP/r.json" "$BENCH_SCHEMA"
json_check "$TMP/r.json" '
c = d["config"]
assert c["synthetic"] == "spin:1ms" and c["compute"] == "spin:1ms", c
assert c["cost_dist"] == "exp" and c["workers"] == 1, c
assert all(e["batches"] == 8 and e["samples"] == 32 for e in d["epochs"])
'
grep -q '^epoch  warm-up' "$TMP/err" || fail "no table on stderr"
grep -q '^verdict: ' "$TMP/err" || fail "no verdict on stderr"

say "lognormal cost and out-of-order delivery"
run_stoke bench --synthetic sleep:1ms --cost-dist lognormal:0.5 --samples 32 \
  -b 4 -j 2 --out-of-order --shuffle --seed 7 --prefetch 3 -q --json -
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
cp "$TMP/out" "$TMP/r2.json"
json_check "$TMP/r2.json" "$BENCH_SCHEMA"
json_check "$TMP/r2.json" '
c = d["config"]
assert c["cost_dist"] == "lognormal:0.5", c
assert c["out_of_order"] is True and c["shuffle"] is True, c
assert c["seed"] == 7 and c["prefetch"] == 3, c
assert all(e["samples"] == 32 for e in d["epochs"])
'
echo ok
