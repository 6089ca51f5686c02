#!/bin/bash
# stoke budget: the device ledger of seed 003 (54), the host ledger, errors.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

say "budget --fixed 3.2GB --per-sample 0.34GB --device 24GB --reserve 10%"
run_stoke budget --fixed 3.2GB --per-sample 0.34GB --device 24GB --reserve 10%
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
grep -q 'largest microbatch: 54 ' "$TMP/out" || fail "$(cat "$TMP/out")"
grep -q '(GB = 1e9 bytes)' "$TMP/out" || fail "units not stated"
rows=$(awk '/^microbatch/{t=1; next} t && NF {print $1 ":" $NF}' "$TMP/out" |
  tr '\n' ' ')
[ "$rows" = "1:yes 2:yes 4:yes 8:yes 16:yes 32:yes 54:yes 55:no " ] ||
  fail "table rows: $rows"
grep -Eq '^ +54 +18\.36 GB +21\.56 GB' "$TMP/out" || fail "row 54"
grep -Eq '^ +55 +18\.70 GB +21\.90 GB .* no$' "$TMP/out" || fail "row 55"

say "binary units give the same microbatch; the reserve defaults to 10%"
run_stoke budget --fixed 3.2GiB --per-sample 0.34GiB --device 24GiB \
  --json "$TMP/d.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
grep -q '(GiB = 2^30 bytes)' "$TMP/out" || fail "units not stated"
json_check "$TMP/d.json" '
v = d["device"]
assert v["max_microbatch"] == 54 and v["reserve_frac"] == 0.1, v
assert [r["microbatch"] for r in v["table"]] == [1, 2, 4, 8, 16, 32, 54, 55]
assert [r["fits"] for r in v["table"]] == [True] * 7 + [False]
assert v["usable_bytes"] == v["device_bytes"] - v["reserve_bytes"]
for r in v["table"]:
    assert r["resident_bytes"] == v["fixed_bytes"] + r["microbatch"] * v["per_sample_bytes"]
assert "host" not in d
'

say "with loader options: the host ledger too"
run_stoke budget --fixed 3.2GB --per-sample 0.34GB --device 24GB \
  --synthetic sleep:5ms -b 256 -j 4 --prefetch 2 --mem-budget 8GiB --json -
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
cp "$TMP/out" "$TMP/h.json"
grep -q '^host ledger: synthetic sleep:5ms' "$TMP/err" || fail "$(cat "$TMP/err")"
grep -q 'batch slots *3 x 3.0 MiB' "$TMP/err" || fail "$(cat "$TMP/err")"
json_check "$TMP/h.json" '
h = d["host"]
assert h["slots"] == 3 and h["workers"] == 4 and h["prefetch"] == 2, h
assert h["sample_bytes"] == 3 * 32 * 32 * 4 + 8, h
assert h["batch_bytes"] == 256 * h["sample_bytes"]
assert h["total_bytes"] == (h["slots_bytes"] + h["order_bytes"] +
                            h["workers_bytes"] + h["consumer_bytes"] +
                            h["failures_bytes"])
assert h["fits"] is True and h["budget_bytes"] == 8 * 2**30
assert d["device"]["max_microbatch"] == 54
'

say "over the host budget: the table, then an error naming the biggest term"
run_stoke budget --synthetic sleep:5ms -b 256 -j 4 --prefetch 2 \
  --mem-budget 8MiB
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
check_messages
grep -q 'over budget' "$TMP/out" || fail "$(cat "$TMP/out")"
grep -q '^stoke: memory budget 8.0 MiB is too small.*batch slots' "$TMP/err" ||
  fail "$(cat "$TMP/err")"

say "nothing fits on the device"
run_stoke budget --fixed 23GB --per-sample 0.34GB --device 24GB
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
check_messages
grep -q 'largest microbatch: none' "$TMP/out" || fail "$(cat "$TMP/out")"
grep -q '^stoke: budget: not even one sample fits' "$TMP/err" ||
  fail "$(cat "$TMP/err")"

expect_usage "nothing to compute" budget
expect_usage "--device" budget --fixed 3.2GB --per-sample 0.34GB
expect_usage "--per-sample" budget --fixed 3.2GB --device 24GB
expect_usage "--reserve" budget --fixed 1GB --per-sample 1GB --device 24GB \
  --reserve 100%
expect_usage "--reserve" budget --fixed 1GB --per-sample 1GB --device 24GB \
  --reserve 10
expect_usage "--per-sample" budget --fixed 1GB --per-sample 0 --device 24GB
expect_usage "--device" budget --fixed 1GB --per-sample 1GB --device 24XB
expect_usage "--synthetic" budget -b 64
expect_usage "one dataset only" budget data/a data/b
expect_usage "give a dataset or --synthetic, not both" budget data/a \
  --synthetic tensor
expect_usage "--transform: only for an image dataset" budget \
  --synthetic tensor --transform resize=8
expect_usage "--synthetic" budget --cost-dist exp
expect_usage "--cost-dist" budget --synthetic sleep:1ms --cost-dist zipf

say "the source options are bench's: --cost-dist is taken"
run_stoke budget --synthetic sleep:1ms --cost-dist lognormal:0.5 \
  --samples 64 -b 8 -j 1
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
check_messages
echo ok
