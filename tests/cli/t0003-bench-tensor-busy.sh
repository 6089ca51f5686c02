#!/bin/bash
# A free source (tensor) and a 20 ms GPU-like step: the step never waits for
# long, so the verdict is busy by construction.  Checks the JSON report.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

say "bench --synthetic tensor --compute sleep:20ms -> busy"
run_stoke bench --synthetic tensor --samples 64 --shape 3x8x8 -b 8 -j 2 \
  --compute sleep:20ms --json "$TMP/r.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
check_messages

say "the report has every documented key"
json_check "$TMP/r.json" "$BENCH_SCHEMA"

say "effective config: defaults resolved, the options given"
json_check "$TMP/r.json" '
c = d["config"]
assert c["synthetic"] == "tensor", c["synthetic"]
assert c["samples"] == 64 and c["shape"] == "3x8x8", c
assert c["batch_size"] == 8 and c["workers"] == 2 and c["prefetch"] == 2, c
assert c["epochs"] == 2 and c["warmup_epochs"] == 1, c
assert c["compute"] == "sleep:20ms" and c["cost_dist"] == "fixed", c
assert c["shuffle"] is False and c["drop_last"] is False, c
assert c["rank"] == 0 and c["world"] == 1 and c["out_of_order"] is False, c
'

say "two epochs of 8 batches and 64 samples, the first a warm-up"
json_check "$TMP/r.json" '
e = d["epochs"]
assert [x["warmup"] for x in e] == [True, False], e
assert all(x["batches"] == 8 and x["samples"] == 64 for x in e), e
assert d["summary"]["samples"] == 64, d["summary"]
'

say "verdict busy"
json_check "$TMP/r.json" \
  'assert d["summary"]["verdict"] == "busy", d["summary"]'

say "the table: header, one row per epoch, steady state, verdict"
grep -qE '^epoch  warm-up +seconds +waiting s +computing s +batches +samples$' \
  "$TMP/out" || fail "no epoch table header: $(cat "$TMP/out")"
grep -Eq '^ +0  yes +[0-9.]+ +[0-9.]+ +[0-9.]+ +8 +64$' "$TMP/out" ||
  fail "no warm-up row"
grep -Eq '^ +1  +[0-9.]+ +[0-9.]+ +[0-9.]+ +8 +64$' "$TMP/out" ||
  fail "no measured row"
grep -q '^steady state over 1 epoch' "$TMP/out" || fail "no steady state"
grep -q '^  samples/s ' "$TMP/out" || fail "no samples/s"
grep -q '^  wait ms  .*p50.*p95.*p99.*max' "$TMP/out" || fail "no percentiles"
grep -q '^  peak RSS ' "$TMP/out" || fail "no peak RSS"
grep -q '^verdict: busy' "$TMP/out" || fail "no busy verdict line"
echo ok
