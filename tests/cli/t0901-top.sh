#!/bin/bash
# stoke top: a `stoke bench` publishing in the background (STOKE_PUBLISH=1)
# is listed by `stoke top --once` and followed by `stoke top PID --once`,
# in 80x24; its file goes when it ends, and the file of a killed one is
# recognised as stale and removed.  Nothing here depends on speed: the
# loops are hang guards.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

export XDG_RUNTIME_DIR=$TMP/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
LIVE=$XDG_RUNTIME_DIR/stoke
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

say "usage errors name what is wrong"
expect_usage "'x' is not a PID" top x
expect_usage "'12:y' is not a PID" top 12:y
expect_usage "one PID at most" top 1 2
expect_usage "--interval" top --interval 0.01
expect_usage "--window" top --window -1
run_stoke help top
[ "$rc" -eq 0 ] && grep -q -- "--once" "$TMP/out" || fail "help top: $rc"

say "nothing publishing: it says so, exit 0"
run_stoke top --once
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
grep -q "no loader is publishing (run one with STOKE_PUBLISH=1)" "$TMP/out" ||
  fail "$(cat "$TMP/out")"
run_stoke top 2147483647 --once
[ "$rc" -eq 1 ] || fail "a pid that publishes nothing: exit $rc"
grep -q "process 2147483647 publishes no loader" "$TMP/err" ||
  fail "$(cat "$TMP/err")"
check_messages

# start_bench ARGS...: a publishing `stoke bench` in the background; its pid
# in $bp, once its snapshot is listed.
start_bench() {
  STOKE_PUBLISH=1 "$STOKE" bench "$@" >"$TMP/bench.out" 2>&1 &
  bp=$!
  pids+=("$bp")
  for _ in $(seq 600); do
    "$STOKE" top --once >"$TMP/list" 2>&1 || true
    grep -qE "^ *$bp +0 +loader " "$TMP/list" && return 0
    kill -0 "$bp" 2>/dev/null || fail "bench ended: $(cat "$TMP/bench.out")"
    sleep 0.1
  done
  fail "bench $bp never listed: $(cat "$TMP/list")"
}

# fits: every line of $TMP/out within 79 columns, at most 23 lines.
fits() {
  awk 'length($0) > 79 { print "long line: " $0; bad = 1 }
       END { if (NR > 23) { print NR " lines"; bad = 1 }; exit bad }' \
    "$TMP/out" || fail "not 80x24: $(cat "$TMP/out")"
}

say "a running bench is listed and followed"
start_bench --synthetic sleep:1ms --samples 256 -b 8 -j 2 --compute sleep:2ms \
  --epochs 100000
run_stoke top --once
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
grep -qE "^ *PID +ID +KIND +STEPS" "$TMP/out" || fail "no header: $(cat "$TMP/out")"
grep -qE "^ *$bp +0 +loader .*stoke bench --synth" "$TMP/out" ||
  fail "not listed: $(cat "$TMP/out")"
fits
ls "$LIVE" | grep -qx "$bp-0.live" || fail "no file $bp-0.live: $(ls -la "$LIVE")"
[ "$(stat -c %a "$LIVE")" = 700 ] || fail "folder mode $(stat -c %a "$LIVE")"
[ "$(stat -c %a "$LIVE/$bp-0.live")" = 600 ] || fail "file mode"

# A frame may come before the bench's warm-up has ended, or count no
# measured step in its window yet: it says so and shows no wait figures
# (stress CI met one), and "other load: not measured yet".  Follow until a frame has measured steps; the loop
# is a hang guard.  Every frame, warm-up or not, shows shares in 0..100%.
for _ in $(seq 300); do
  run_stoke top "$bp" --once --interval 0.3
  [ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
  grep -oE "(busy|slot|idle) -?[0-9]+%" "$TMP/out" | grep -oE -- "-?[0-9]+" |
    awk '$1 < 0 || $1 > 100 { bad = 1 } END { exit !bad }' &&
    fail "a share out of 0..100%: $(cat "$TMP/out")"
  # (the other load is measured in windows from the warm-up's end: the
  # first one closes 50 ms later)
  grep -q "wait p50" "$TMP/out" && grep -q "^other load: [0-9]" "$TMP/out" &&
    break
  sleep 0.1
done
for want in "stoke top: pid $bp, loader 0" "bench --synthetic sleep:1ms" \
  "over the last" "waiting" "computing" "wait p50" "p95" \
  "queue: mean depth" "of prefetch 2" "workers 2: busy" "waiting for a slot" \
  "per sample: read" "verdict: "; do
  grep -qF "$want" "$TMP/out" || fail "no '$want': $(cat "$TMP/out")"
done
# The machine's other load beside it, moved or not (its figures hold for
# the cores the loader had): the cores, the lightest and heaviest windows.
grep -qE "^other load: [0-9]+\.[0-9] of $(nproc) cores \([0-9]+\.[0-9]-[0-9]+\.[0-9]( over [0-9]+ windows\): steady|\): moved, figures off by up to [0-9]+%)$" \
  "$TMP/out" || fail "no other load line: $(cat "$TMP/out")"
grep -q "q quits" "$TMP/out" && fail "not a terminal, yet 'q quits'"
fits
# Two samples at 1 ms on 2 workers make 1 ms per sample, 8 per batch: the
# producer takes 4 ms a batch against a 2 ms step, starving by construction.
grep -qE "^verdict: starving" "$TMP/out" || fail "verdict: $(cat "$TMP/out")"

say "not a terminal: one frame even without --once; PID:ID picks one"
run_stoke top "$bp:0" --interval 0.2
[ "$rc" -eq 0 ] && grep -q "^verdict: " "$TMP/out" || fail "$(cat "$TMP/out")"
[ "$(grep -c '^stoke top: pid' "$TMP/out")" -eq 1 ] || fail "frames: $(cat "$TMP/out")"
run_stoke top "$bp:3" --once
[ "$rc" -eq 1 ] || fail "ID 3: exit $rc"

say "killed: its file is stale, skipped and removed"
{ kill -KILL "$bp" && wait "$bp"; } 2>/dev/null || true
[ -e "$LIVE/$bp-0.live" ] || fail "SIGKILL cannot remove the file, yet it went"
run_stoke top --once
grep -q "no loader is publishing" "$TMP/out" || fail "$(cat "$TMP/out")"
[ ! -e "$LIVE/$bp-0.live" ] || fail "the stale file stayed"

say "a run that ends removes its file; the autotuner's decisions are shown"
start_bench --synthetic sleep:1ms --samples 256 -b 8 -j auto --compute none \
  --epochs 100000
for _ in $(seq 600); do
  run_stoke top "$bp" --once --interval 0.2
  grep -q "^autotune: [1-9]" "$TMP/out" && break
  sleep 0.1
done
grep -q "^autotune: [1-9][0-9]* decision" "$TMP/out" ||
  fail "no autotune line: $(cat "$TMP/out")"
grep -qE "^  epoch [0-9]+, step [0-9]+: " "$TMP/out" ||
  fail "no decision: $(cat "$TMP/out")"
grep -q "(autotuned)" "$TMP/out" || fail "$(cat "$TMP/out")"
fits
{ kill -KILL "$bp" && wait "$bp"; } 2>/dev/null || true
run_stoke top --once # removes the killed one's file
STOKE_PUBLISH=1 "$STOKE" bench --synthetic tensor --samples 256 -b 32 -j 1 \
  --epochs 3 >"$TMP/bench.out" 2>&1 || fail "bench: $(cat "$TMP/bench.out")"
[ -z "$(ls "$LIVE")" ] || fail "left behind: $(ls "$LIVE")"

say "a folder open to others is refused"
chmod 755 "$LIVE"
run_stoke top --once
[ "$rc" -eq 1 ] && grep -q "open to others" "$TMP/err" ||
  fail "exit $rc: $(cat "$TMP/err")"
check_messages
chmod 700 "$LIVE"
say "ok"
