#!/bin/bash
# stoke top on a terminal, in tmux (80x24): it redraws a running bench's
# figures until q, lists the publishers live, and leaves the terminal as it
# found it.  Skipped (77) without tmux (Debian's tmux: scripts/deps.sh).
# The loops are hang guards, not timings.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

command -v tmux >/dev/null || { echo "no tmux: skipped"; exit 77; }

export XDG_RUNTIME_DIR=$TMP/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
SOCK=$TMP/tmux.sock
tm() { tmux -S "$SOCK" "$@"; }
bp=
cleanup() {
  tm kill-server 2>/dev/null || true
  [ -n "$bp" ] && kill -KILL "$bp" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT

STOKE_PUBLISH=1 "$STOKE" bench --synthetic sleep:1ms --samples 256 -b 8 -j 2 \
  --compute sleep:2ms --epochs 100000 >"$TMP/bench.out" 2>&1 &
bp=$!

# One session lives through the test, so that the server does not exit (and
# restart) between the sessions that run stoke top.
tm -f /dev/null new-session -d -s keep -x 80 -y 24 "sleep 600"

# until_pane NEEDLE: the pane shows NEEDLE (its text in $TMP/pane).
until_pane() {
  for _ in $(seq 600); do
    tm capture-pane -p -t top >"$TMP/pane" 2>/dev/null || true
    grep -qF -- "$1" "$TMP/pane" && return 0
    sleep 0.1
  done
  fail "the pane never showed '$1': $(cat "$TMP/pane")"
}

# until_gone: the session's command ended (q was read).
until_gone() {
  for _ in $(seq 300); do
    tm has-session -t top 2>/dev/null || return 0
    sleep 0.1
  done
  fail "stoke top did not quit on q: $(cat "$TMP/pane")"
}

say "stoke top (the list) on an 80x24 terminal"
tm new-session -d -s top -x 80 -y 24 \
  "env XDG_RUNTIME_DIR='$XDG_RUNTIME_DIR' '$STOKE' top --interval 0.2"
until_pane "$bp   0 loader"
grep -q "PID  *ID KIND" "$TMP/pane" || fail "no header: $(cat "$TMP/pane")"
tm send-keys -t top q
until_gone

say "stoke top PID follows the bench, redrawing, until q"
tm new-session -d -s top -x 80 -y 24 \
  "env XDG_RUNTIME_DIR='$XDG_RUNTIME_DIR' '$STOKE' top $bp --interval 0.2; \
   echo top-exit=\$?; sleep 30"
# The first frames may come before the bench's warm-up has ended, or before
# top has two snapshots to make a window of: they say so and show no wait
# figures.  Wait for a frame with measured steps.
until_pane "wait p50"
for want in "stoke top: pid $bp, loader 0  (q quits)" "waiting" "wait p50" \
  "queue: mean depth" "workers 2: busy"; do
  grep -qF "$want" "$TMP/pane" || fail "no '$want': $(cat "$TMP/pane")"
done
# Redrawn in place: one frame on the screen, and its step count moves on.
[ "$(grep -c '^stoke top: pid' "$TMP/pane")" -eq 1 ] ||
  fail "frames scroll: $(cat "$TMP/pane")"
first=$(grep -o '[0-9]* steps' "$TMP/pane" | head -1)
for _ in $(seq 300); do
  tm capture-pane -p -t top >"$TMP/pane"
  now=$(grep -o '[0-9]* steps' "$TMP/pane" | head -1)
  [ -n "$now" ] && [ "$now" != "$first" ] && break
  sleep 0.1
done
[ "$now" != "$first" ] || fail "not redrawn: $(cat "$TMP/pane")"
tm send-keys -t top q
until_pane "top-exit=0"
tm kill-session -t top

say "the followed process ends: top says so and exits"
tm new-session -d -s top -x 80 -y 24 \
  "env XDG_RUNTIME_DIR='$XDG_RUNTIME_DIR' '$STOKE' top $bp --interval 0.2; \
   echo top-exit=\$?; sleep 30"
until_pane "verdict: "
kill -TERM "$bp"
wait "$bp" 2>/dev/null || true
"$STOKE" top --once >/dev/null 2>&1 || true # removes the killed one's file
until_pane "process $bp: its loader is gone"
until_pane "top-exit=0"
bp=
say "ok"
