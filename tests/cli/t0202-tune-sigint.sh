#!/bin/bash
# Ctrl-C mid-sweep: the point in progress finishes, the sweep stops, and the
# table and the JSON still report every point measured (exit 130).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

say "tune, SIGINT after the first point"
# Each point runs at least 0.5 s, so the sweep (12 points) is far from done
# when the signal arrives right after the first progress line.
"$STOKE" tune --synthetic sleep:2ms --samples 32 -b 4 --compute sleep:1ms \
  -j 0,1,2,4 --min-time 500ms --json "$TMP/t.json" --svg "$TMP/t.svg" \
  >"$TMP/out" 2>"$TMP/err" &
pid=$!
for _ in $(seq 1 300); do
  grep -q '^tune \[1/12\]' "$TMP/err" 2>/dev/null && break
  sleep 0.05
done
grep -q '^tune \[1/12\]' "$TMP/err" || { kill "$pid"; fail "no first point"; }
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 130 ] || fail "exit $rc, expected 130: $(cat "$TMP/err")"
check_messages
grep -q '^stoke: tune: interrupted after' "$TMP/err" ||
  fail "no interruption message: $(cat "$TMP/err")"
grep -q '<- knee' "$TMP/out" || fail "no table with a knee: $(cat "$TMP/out")"
grep -q 'not run' "$TMP/out" || fail "the table does not say what was not run"
json_check "$TMP/t.json" '
assert d["interrupted"] is True
n = d["points_done"]
assert 1 <= n < d["points_planned"] == 12, (n, d["points_planned"])
assert len(d["points"]) == n
assert all(p["status"] == "measured" and p["samples"] > 0
           for p in d["points"]), d["points"]
assert d["knee"] is not None and d["knee"]["index"] < n
'
"$PY" -c 'import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])' \
  "$TMP/t.svg" || fail "SVG is not well-formed XML"
echo ok
