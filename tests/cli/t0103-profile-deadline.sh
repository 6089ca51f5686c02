#!/bin/bash
# --train-epochs N --deadline DUR: whether N epochs fit, at the run's
# configuration (its measured epochs) and at the model's knee (its
# prediction with the what-if error bar).  16 samples of 2 ms of sleep a
# batch against a 4 ms step at -j 2: an epoch of 16 batches takes about
# 16 x 16 ms = 0.26 s, at the knee (8 workers) about 16 x 4 ms = 0.07 s.
# 90 epochs: about 23 s now, 6 s at the knee; a 12 s window misses now and
# fits at the knee, with 2x margins either side (a loaded machine stretches
# both the measured epoch and the model's costs).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

say "profile --train-epochs 90 --deadline 12s"
run_stoke profile --synthetic sleep:2ms --samples 256 -b 16 -j 2 \
  --compute sleep:4ms --epochs 2 --train-epochs 90 --deadline 12s \
  --json "$TMP/p.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
check_messages
grep -q '^deadline: 90 epochs in 12.0 s' "$TMP/out" ||
  fail "no deadline section: $(cat "$TMP/out")"
grep -Eq '^  now  -j 2 --prefetch 2: .*: misses' "$TMP/out" ||
  fail "now should miss: $(cat "$TMP/out")"
grep -Eq '^  knee -j [0-9]+ --prefetch [0-9]+: .*: fits' "$TMP/out" ||
  fail "the knee should fit: $(cat "$TMP/out")"
json_check "$TMP/p.json" '
dl = d["diagnosis"]["deadline"]
assert dl["train_epochs"] == 90 and dl["deadline_s"] == 12, dl
now, knee = dl["now"], dl["knee"]
assert now["workers"] == 2 and now["verdict"] == "misses", now
assert knee["verdict"] == "fits" and knee["workers"] > 2, knee
assert abs(now["total_s"] - 90 * now["epoch_s"]) < 1e-6 * now["total_s"]
assert now["low_s"] <= now["total_s"] <= now["high_s"]
assert knee["error"] > 0 and knee["epochs_in_window"] > 90, knee
'

say "--deadline alone, a bad duration"
run_stoke profile --synthetic tensor --deadline 8h
[ "$rc" -eq 2 ] || fail "exit $rc, expected 2"
grep -q 'go together' "$TMP/err" || fail "$(cat "$TMP/err")"
run_stoke profile --synthetic tensor --train-epochs 3 --deadline 8 
[ "$rc" -eq 2 ] || fail "exit $rc, expected 2"
grep -q 'needs a unit (ns, us, ms, s, min or h)' "$TMP/err" ||
  fail "$(cat "$TMP/err")"
echo ok
