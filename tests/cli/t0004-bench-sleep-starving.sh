#!/bin/bash
# Samples that cost 2 ms of sleep, made in the consumer's thread (0 workers),
# and a consumer that does nothing: every step is spent waiting, so the
# verdict is starving by construction.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

say "bench --synthetic sleep:2ms -j 0 --compute none -> starving"
run_stoke bench --synthetic sleep:2ms --samples 64 -b 8 -j 0 \
  --compute none --json "$TMP/r.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/r.json" "$BENCH_SCHEMA"
json_check "$TMP/r.json" '
c = d["config"]
assert c["synthetic"] == "sleep:2ms" and c["workers"] == 0, c
assert c["compute"] == "none", c
s = d["summary"]
assert s["verdict"] == "starving", s
assert s["wait_ratio"] > 0.5, s
assert all(e["batches"] == 8 and e["samples"] == 64 for e in d["epochs"])
read = [x for x in d["stages"] if x["name"] == "read"][0]
assert read["count"] >= 64, read   # every measured sample is read
'
grep -q '^verdict: starving' "$TMP/out" || fail "no starving verdict line"

say "--quiet prints no table"
run_stoke bench --synthetic sleep:1ms --samples 16 -b 8 -q
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
[ ! -s "$TMP/out" ] || fail "--quiet printed: $(cat "$TMP/out")"

say "durations in ns, us and s are accepted, spin:0 too"
for spec in sleep:500us sleep:200000ns sleep:0.001s spin:0; do
  run_stoke bench --synthetic "$spec" --samples 8 -b 4 -q \
    --json "$TMP/d.json"
  [ "$rc" -eq 0 ] || fail "$spec: exit $rc: $(cat "$TMP/err")"
done
json_check "$TMP/d.json" \
  'assert d["config"]["synthetic"] == "spin:0", d["config"]'
echo ok
