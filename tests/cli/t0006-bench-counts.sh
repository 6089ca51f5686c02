#!/bin/bash
# Batches and samples per epoch follow from N, B, --drop-last and the shard,
# whatever the timing: 70 samples in batches of 8.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

# counts EPOCHS BATCHES SAMPLES ARGS...: run a tensor bench with ARGS and
# check each epoch's counts.
counts() {
  want_e=$1 want_b=$2 want_s=$3
  shift 3
  say "bench $* -> $want_e epochs of $want_b batches, $want_s samples"
  run_stoke bench --synthetic tensor --samples 70 -b 8 -q \
    --json "$TMP/c.json" "$@"
  [ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
  json_check "$TMP/c.json" "$BENCH_SCHEMA"
  json_check "$TMP/c.json" "
e = d['epochs']
assert len(e) == $want_e, e
assert all(x['batches'] == $want_b and x['samples'] == $want_s for x in e), e
assert d['config']['batches_per_epoch'] == $want_b, d['config']
assert d['config']['samples_per_epoch'] == $want_s, d['config']
"
}

counts 2 9 70
counts 2 8 64 --drop-last
counts 2 5 35 --world 2 --rank 1
counts 2 4 32 --world 2 --rank 1 --drop-last
counts 2 3 24 --world 3 --rank 2 -j 2
counts 3 9 70 --epochs 3 -j 1

say "--no-warmup measures every epoch"
run_stoke bench --synthetic tensor --samples 70 -b 8 -q --no-warmup \
  --epochs 1 --json "$TMP/n.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/n.json" "$BENCH_SCHEMA"
json_check "$TMP/n.json" '
assert d["config"]["warmup_epochs"] == 0
assert [e["warmup"] for e in d["epochs"]] == [False]
assert d["summary"]["samples"] == 70
'
say "--consumer-slots: the slots are prefetch + consumer slots"
run_stoke bench --synthetic tensor --samples 70 -b 8 -q --prefetch 3 \
  --consumer-slots 2 --json "$TMP/c.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/c.json" '
assert d["config"]["consumer_slots"] == 2 and d["config"]["prefetch"] == 3
'
run_stoke bench --synthetic tensor --samples 70 -b 8 -q --consumer-slots 0
[ "$rc" -eq 2 ] || fail "--consumer-slots 0: exit $rc, want 2"
echo ok
