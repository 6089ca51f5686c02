#!/bin/bash
# The machine's other load while a run measures: bench's JSON has
# summary.outside_load (windows, mean/min/max cores, moved, shift_frac), and
# the text says so, with by how much the figures may be off, exactly when it
# moved.  On a quiet machine, a busy loop switched on half way through is
# seen and said; on a busy one that part is skipped (the hog's CPU would
# come out of the other jobs', not show as a move).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

check() { # check JSON OUT: the key's shape, and the note exactly when moved
  python3 - "$1" "$2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
o = s["outside_load"]
assert set(o) == {"windows", "window_s", "mean_cores", "min_cores",
                  "max_cores", "moved", "shift_frac", "other_moved",
                  "delay_moved", "delay_windows", "delay_min_cores",
                  "delay_max_cores", "taken_cores"}, sorted(o)
assert o["windows"] >= 2, o
assert 0 <= o["min_cores"] <= o["mean_cores"] + 1e-9, o
assert o["mean_cores"] <= o["max_cores"] + 1e-9, o
assert isinstance(o["moved"], bool) and 0 <= o["shift_frac"] <= 1, o
# The run delay's sign beside it (no windows without schedstat): moved is
# either's.
assert o["moved"] == (o["other_moved"] or o["delay_moved"]), o
assert 0 <= o["delay_windows"] <= o["windows"], o
assert 0 <= o["delay_min_cores"] <= o["delay_max_cores"] + 1e-9, o
assert 0 <= o["taken_cores"] <= \
    o["delay_max_cores"] - o["delay_min_cores"] + 1e-9, o
text = open(sys.argv[2]).read()
note = "the machine's other load moved from" in text
assert note == o["moved"], (o, text[-400:])
if o["moved"]:
    assert "may be off by up to" in text
print("moved" if o["moved"] else "steady", o["max_cores"], o["min_cores"])
PY
}

args=(bench --synthetic sleep:1ms --samples 240 -b 8 -j 2 --epochs 5
      --compute sleep:20ms)
say "bench: outside_load in the JSON, the note only when it moved"
run_stoke "${args[@]}" --json "$TMP/a.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
cat "$TMP/out" "$TMP/err" >"$TMP/text"
first=$(check "$TMP/a.json" "$TMP/text") || fail "outside_load: $first"

say "a busy loop switched on half way through is said"
read -r state max _ <<<"$first"
cores=$(nproc)
# (python exits 0, which the shell reads as true, when the machine is busy)
if [ "$state" != steady ] || python3 -c "import sys; sys.exit($max < 0.2)" ||
   [ "$cores" -lt 2 ]; then
  echo "the machine is busy ($state, $max other cores): skipped" >&2
  echo ok
  exit 0
fi
( sleep 1.5; exec timeout 2 sh -c 'while :; do :; done' ) &
hog=$!
run_stoke "${args[@]}" --json "$TMP/b.json"
wait "$hog" 2>/dev/null || true  # timeout ends it: 124
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
cat "$TMP/out" "$TMP/err" >"$TMP/text"
second=$(check "$TMP/b.json" "$TMP/text") || fail "outside_load: $second"
read -r state max min <<<"$second"
# Other jobs that came before the busy loop did: not this test's case.
if [ "$state" != moved ] && python3 -c "import sys; sys.exit($min < 0.2)"; then
  echo "the machine got busy before the busy loop ($second): skipped" >&2
  echo ok
  exit 0
fi
[ "$state" = moved ] || fail "the busy loop was not seen: $second"
echo ok
