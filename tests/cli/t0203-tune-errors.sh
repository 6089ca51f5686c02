#!/bin/bash
# tune: usage errors, the memory budget skipping points, and a bad path.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

expect_usage "--synthetic" tune
expect_usage "give a dataset or --synthetic, not both" tune /data/imagenet \
  --synthetic tensor
expect_usage "one dataset only" tune /data/a /data/b
# The source options are bench's (one parser): the same checks, same words.
expect_usage "--transform: only for an image dataset" tune --synthetic tensor \
  --transform resize=8
expect_usage "--cost-dist" tune --synthetic sleep:1ms --cost-dist zipf
expect_usage "--tolerance" tune --synthetic tensor --tolerance 120%
expect_usage "--tolerance" tune --synthetic tensor --tolerance x
expect_usage "-j" tune --synthetic tensor -j 1,,2
expect_usage "--prefetch" tune --synthetic tensor --prefetch 0
expect_usage "--batch-sizes" tune --synthetic tensor --batch-sizes 0,4
expect_usage "--max-workers" tune --synthetic tensor --max-workers 8 \
  --cpu-budget 2
expect_usage "--cpu-budget" tune --synthetic tensor -j 4,8 --cpu-budget 2
expect_usage "--svg" tune --synthetic tensor --svg -
expect_usage "--mem-budget" tune --synthetic tensor --mem-budget 0

say "a bad --json path fails before the sweep"
run_stoke tune --synthetic tensor --json /nonexistent/dir/t.json
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
grep -q "cannot write '/nonexistent/dir/t.json'" "$TMP/err" ||
  fail "$(cat "$TMP/err")"

say "--cpu-budget caps the ladder"
run_stoke tune --synthetic tensor --samples 16 --cpu-budget 2 --prefetch 1 \
  --json "$TMP/c.json" -q
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/c.json" '
assert [p["workers"] for p in d["points"]] == [0, 1, 2], d["points"]
'

say "--mem-budget skips points over budget without running them"
# 3x32x32 f32 + i64 label = 12296 bytes a sample; batch 64: 787 KiB a slot.
# 2 MiB holds 2 slots (prefetch 1) but not 3 or 5.
run_stoke tune --synthetic tensor --samples 64 -b 64 -j 0,1 \
  --mem-budget 2MiB --json "$TMP/b.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
check_messages
grep -q 'skipped, needs' "$TMP/err" || fail "no skip in progress: $(cat "$TMP/err")"
grep -q 'over budget' "$TMP/out" || fail "no skip in table: $(cat "$TMP/out")"
json_check "$TMP/b.json" '
st = [(p["workers"], p["prefetch"], p["status"]) for p in d["points"]]
assert st == [(0, 1, "measured"), (0, 2, "over_budget"), (0, 4, "over_budget"),
              (1, 1, "measured"), (1, 2, "over_budget"),
              (1, 4, "over_budget")], st
assert d["points_skipped"] == 4
for p in d["points"]:
    assert (p["host_bytes"] > 2 * 1024 * 1024) == (p["status"] == "over_budget")
    assert ("samples_per_s" in p) == (p["status"] == "measured")
assert d["knee"]["prefetch"] == 1
'

say "every point over budget: no knee, still exit 0 with the table"
run_stoke tune --synthetic tensor --samples 64 -b 64 -j 0 --mem-budget 100KiB \
  --json "$TMP/n.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
grep -q 'no point was measured' "$TMP/out" || fail "$(cat "$TMP/out")"
json_check "$TMP/n.json" 'assert d["knee"] is None'

say "a dataset that does not exist is a runtime error naming it"
run_stoke tune /nonexistent/imagenet --compute sleep:1ms
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
grep -q "/nonexistent/imagenet" "$TMP/err" || fail "path not named: $(cat "$TMP/err")"
echo ok
