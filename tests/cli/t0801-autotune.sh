#!/bin/bash
# -j auto is the online autotuner (and -j cores what 'auto' used to mean):
# samples that sleep and a consumer that computes nothing wait at every
# step, so it grows by construction; whatever it does, the batches and
# their order are those of a fixed -j run.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

say "bench -j auto: decisions in the table, the JSON and the trace"
run_stoke bench --synthetic sleep:1ms --samples 256 -b 8 -j auto \
  --compute none --epochs 3 --shuffle --json "$TMP/a.json" \
  --trace "$TMP/trace.json" --indices "$TMP/auto.idx"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/a.json" "$BENCH_SCHEMA"
json_check "$TMP/a.json" '
c, a = d["config"], d["autotune"]
assert c["autotune"] is True, c
assert a["max_workers"] >= 8 and a["max_prefetch"] >= 2, a
assert a["changes"] >= 1 and len(a["decisions"]) >= 1, a
first = a["decisions"][0]
assert first["kind"] == "grow" and first["from_workers"] == 1, first
assert first["to_workers"] > 1 and first["wait_before"] > 0.05, first
assert "1 -> %d workers" % first["to_workers"] in first["text"], first
assert c["workers"] == a["workers"], (c, a)
assert all(e["batches"] == 32 and e["samples"] == 256 for e in d["epochs"])
'
grep -q '^autotune: ' "$TMP/out" || fail "no autotune line: $(cat "$TMP/out")"
grep -q 'autotuned (up to' "$TMP/out" || fail "no autotuned header"
grep -q '"name":"autotune: grow"' "$TMP/trace.json" ||
  fail "no autotune instant in the trace"

say "stoke report lists the decisions"
run_stoke report "$TMP/a.json" -o "$TMP/r.html"
[ "$rc" -eq 0 ] || fail "report exit $rc: $(cat "$TMP/err")"
grep -q "Online autotuning" "$TMP/r.html" || fail "report: no autotuning"
grep -q "1 -&gt; \|1 -> " "$TMP/r.html" || fail "report: no decision text"

say "the same batches, in the same order, as a fixed -j 2 run"
run_stoke bench --synthetic sleep:1ms --samples 256 -b 8 -j 2 \
  --compute none --epochs 3 --shuffle -q --indices "$TMP/fixed.idx"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
cmp -s "$TMP/auto.idx" "$TMP/fixed.idx" || fail "-j auto changed the order"

say "--autotune -j 3: at most 3 workers"
run_stoke bench --synthetic sleep:1ms --samples 128 -b 8 --autotune -j 3 \
  --compute none --epochs 2 -q --json "$TMP/b.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/b.json" '
a = d["autotune"]
assert a["max_workers"] == 3 and 1 <= a["workers"] <= 3, a
assert all(1 <= x["to_workers"] <= 3 for x in a["decisions"]), a
'

say "-j cores: one worker per online CPU, no autotuner"
run_stoke bench --synthetic sleep:1ms --samples 64 -b 8 -j cores \
  --compute none -q --json "$TMP/c.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/c.json" '
c = d["config"]
assert c["workers"] == d["machine"]["cores"] and c["autotune"] is False, c
assert d["autotune"] is None, d["autotune"]
'

expect_usage "--autotune" bench --synthetic sleep:1ms --autotune -j 0

say "stoke help bench names -j auto and -j cores"
run_stoke help bench
grep -q "'auto' = the online" "$TMP/out" || fail "help: no -j auto"
grep -q "'cores'" "$TMP/out" || fail "help: no -j cores"
echo ok
