#!/usr/bin/env bash
# Resume through the CLI: a run stopped with --stop-after and --save-state,
# then --resume with other -j and --prefetch, hands out exactly the batches
# the uninterrupted run had left (compared by --indices); at the epoch's
# last batch too; elastic (another --world) from the next epoch, every
# sample once across the new ranks; another dataset and a damaged file are
# refused.
. "$(dirname "$0")/lib.sh"

RUN="--synthetic tensor --samples 100 -b 8 --shuffle --seed 3 --epochs 3 -q"

say "the uninterrupted run: 3 epochs of 13 batches"
run_stoke bench $RUN -j 2 --indices "$TMP/full.txt"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
[ "$(wc -l < "$TMP/full.txt")" -eq 39 ] || fail "$(wc -l < "$TMP/full.txt") batches"

for stop in 1 7 13 17 38; do
  say "stopped after $stop batches, resumed with -j 0 --prefetch 4 and -j 3"
  run_stoke bench $RUN -j 2 --stop-after "$stop" --save-state "$TMP/s.bin" \
    --indices "$TMP/a.txt" --json "$TMP/a.json"
  [ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
  [ "$(stat -c %s "$TMP/s.bin")" -eq 80 ] || fail "state is not 80 bytes"
  json_check "$TMP/a.json" "
r = d['resume']
assert r['stopped'] is True and r['batches'] == $stop, r
assert r['state']['epoch'] * 13 + r['state']['batches_done'] == $stop, r
"
  for side in "-j 0 --prefetch 4" "-j 3 --prefetch 1 --no-epoch-prefetch"; do
    # shellcheck disable=SC2086
    run_stoke bench $RUN $side --resume "$TMP/s.bin" --indices "$TMP/b.txt" \
      --json "$TMP/b.json"
    [ "$rc" -eq 0 ] || fail "resume ($side) exit $rc: $(cat "$TMP/err")"
    cat "$TMP/a.txt" "$TMP/b.txt" > "$TMP/ab.txt"
    cmp -s "$TMP/ab.txt" "$TMP/full.txt" ||
      fail "stop $stop, resumed with $side: not the uninterrupted run: $(diff "$TMP/ab.txt" "$TMP/full.txt" | head)"
  done
done

say "--save-state-every: the state follows the run; the last one is at the stop"
run_stoke bench $RUN -j 1 --save-state "$TMP/e.bin" --save-state-every 5 \
  --stop-after 12 --json "$TMP/e.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/e.json" '
s = d["resume"]["state"]
assert s["epoch"] == 0 and s["batches_done"] == 12, s
'
run_stoke bench --synthetic tensor --samples 100 -b 8 --shuffle --seed 3 \
  --epochs 3 -j 1 --save-state "$TMP/e.bin" --save-state-every 5 \
  --stop-after 12
grep -q '^stopped after 12 batches (--stop-after): the state is at batch 12 of epoch 0, in ' "$TMP/out" ||
  fail "no stop line: $(cat "$TMP/out")"
[ ! -e "$TMP/e.bin.tmp" ] || fail "a temporary state file was left"

say "elastic: a world-2 state resumes in world 3 at the next epoch"
run_stoke bench $RUN --world 2 --rank 0 -j 2 --stop-after 3 \
  --save-state "$TMP/w.bin"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
: > "$TMP/w3.txt"
for r in 0 1 2; do
  run_stoke bench --synthetic tensor --samples 100 -b 8 --shuffle --seed 3 \
    --epochs 2 -q --world 3 --rank $r -j 1 --resume "$TMP/w.bin" \
    --indices "$TMP/w3-$r.txt"
  [ "$rc" -eq 0 ] || fail "rank $r exit $rc: $(cat "$TMP/err")"
  grep -q '^stoke: --resume: state: taken with world 2, rank 0, .* so this loader starts at epoch 1$' "$TMP/err" ||
    fail "no elastic note: $(cat "$TMP/err")"
  cat "$TMP/w3-$r.txt" >> "$TMP/w3.txt"
done
"$PY" - "$TMP/w3.txt" <<'PYEOF' || fail "world 3 did not cover epoch 1 once"
import sys, collections
seen = collections.Counter()
for line in open(sys.argv[1]):
    f = line.split()
    assert f[0] == "1", line          # the next epoch, nothing of epoch 0
    seen.update(int(x) for x in f[3:])
# 100 samples over 3 ranks: 34 each, the first 2 repeated as padding
# (DistributedSampler); every sample at least once.
assert set(seen) == set(range(100)), sorted(set(range(100)) - set(seen))
assert sum(seen.values()) == 102 and max(seen.values()) == 2, seen
PYEOF

say "refused: another dataset, a damaged state, one past --epochs, not a state"
run_stoke bench --synthetic tensor --samples 99 -b 8 --shuffle --seed 3 \
  --epochs 3 -q --resume "$TMP/s.bin"
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
grep -q '^stoke: --resume: .*s.bin: state: made for another dataset (100 samples, fingerprint 0x[0-9a-f]*); this loader.s synthetic source has 99 samples' "$TMP/err" ||
  fail "99 samples accepted a 100-sample state: $(cat "$TMP/err")"
cp "$TMP/s.bin" "$TMP/bad.bin"
printf 'x' | dd of="$TMP/bad.bin" bs=1 seek=30 conv=notrunc 2>/dev/null
run_stoke bench $RUN --resume "$TMP/bad.bin"
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
grep -q '^stoke: --resume: .*bad.bin: state: CRC-32 mismatch' "$TMP/err" || fail "$(cat "$TMP/err")"
run_stoke bench $RUN --save-state "$TMP/end.bin"
run_stoke bench $RUN --resume "$TMP/end.bin"
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
grep -q 'is at epoch 3; --epochs 3 has ended there' "$TMP/err" || fail "$(cat "$TMP/err")"
run_stoke bench $RUN --resume "$TMP/full.txt"
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
grep -q 'a stoke state has 80' "$TMP/err" || fail "$(cat "$TMP/err")"
run_stoke bench $RUN --resume "$TMP/nonexistent.bin"
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
check_messages
expect_usage "--save-state-every: needs --save-state FILE" bench --synthetic tensor --save-state-every 3
expect_usage "--stop-after: must be at least 1" bench --synthetic tensor --stop-after 0
echo ok
