#!/usr/bin/env bash
# `stoke tune` over io_concurrency: for remote packed shards behind the
# fault server's added latency (40 ms before each answer), the sweep finds
# the worker knee, then sweeps io_concurrency at it (1, 2, 4, ... each
# point a source of its own), prints the ready-to-paste --io-concurrency N
# and writes it in tune's JSON; --io-sweep LIST sweeps those values,
# --io-sweep off none; a local run and a cached one sweep nothing.
# Nothing here compares a time: the latency makes one request in flight
# several times slower than eight, far past any load's noise, and the knee
# is checked against the rule on the points as measured.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../remote/servers.sh"

"$PY" -c 'import PIL' 2>/dev/null || { echo "python3-pil missing"; exit 77; }

make_jpeg_folder "$TMP/train" 8 ant bee cow
# A few large shards: each point's source opens them (3 requests each, 40
# ms apiece), so few shards keep the sweep short.
run_stoke pack "$TMP/train" -o "$TMP/www/train" --shard-size 256KB
[ "$rc" -eq 0 ] || fail "pack exit $rc: $(cat "$TMP/err")"
start_faults "$TMP/www"
F="http://127.0.0.1:$FAULTS"
n=$(ls "$TMP/www"/train-*.stoke | wc -l)
SHARDS="train-{00000..$(printf '%05d' $((n - 1)))}.stoke"
# Block order, blocks of about one sample: the read-ahead asks for many
# small runs, io_concurrency of them in flight.  A step of 40 ms a batch
# of 4 (100 samples/s) that a few requests in flight can feed.
TUNE=(tune -b 4 -j 2 --prefetch 2 --seed 7 --shuffle=block=2KB --compute sleep:40ms --retry-backoff 5ms)

say "remote packed shards, 40 ms before each answer: io_concurrency swept at the worker knee"
run_stoke "${TUNE[@]}" "$F/slow40/$SHARDS" --json "$TMP/slow.json" --svg "$TMP/slow.svg"
[ "$rc" -eq 0 ] || fail "tune exit $rc: $(cat "$TMP/err")"
grep -q "^io_concurrency at the knee (2 workers, prefetch 2, batch 4)" "$TMP/out" ||
  fail "no io_concurrency table: $(cat "$TMP/out")"
json_check "$TMP/slow.json" '
s = d["io_sweep"]
pts = s["points"]
assert (s["workers"], s["prefetch"], s["batch_size"]) == (2, 2, 4), s
io = [p["io_concurrency"] for p in pts]
# the ladder, each point at the value asked (the client reports its own)
assert io == [1 << i for i in range(len(io))], io
assert len(io) >= 2 and all(p["status"] == "measured" for p in pts), pts
assert all(p["note"] == "ladder" for p in pts), pts
# the ladder ends at 64 or at the first doubling that gained under tolerance / 2
tol = d["config"]["tolerance"]
tp = [p["samples_per_s"] for p in pts]
for i in range(1, len(tp) - 1):
    assert tp[i] >= max(tp[:i]) * (1 + tol / 2), ("went on past a rung that gained nothing", tp)
assert io[-1] == 64 or tp[-1] < max(tp[:-1]) * (1 + tol / 2), ("stopped while gaining", tp)
# the knee by the rule: the fewest requests within tolerance of the best,
# busy ones first when any is
best = max(tp)
ok = [p for p in pts if p["samples_per_s"] >= (1 - tol) * best]
busy = [p for p in ok if p["verdict"] == "busy"]
want = min(p["io_concurrency"] for p in (busy or ok))
k = s["knee"]
assert k["io_concurrency"] == want, (k, pts)
assert pts[k["index"]]["io_concurrency"] == want, k
# one request in flight, 40 ms each, cannot feed the step
assert want > 1, pts
# the knee to paste: the worker knee at those requests in flight
assert d["knee"]["io_concurrency"] == want, d["knee"]
assert d["knee"]["flags"] == "-j 2 --prefetch 2 --io-concurrency %d" % want, d["knee"]
assert k["flags"] == d["knee"]["flags"], k
# the worker sweep ran at the default io_concurrency
assert [p["io_concurrency"] for p in d["points"]] == [8], d["points"]
open("'"$TMP/knee"'", "w").write(str(want))
'
grep -q "^  stoke flags  -j 2 --prefetch 2 --io-concurrency $(cat "$TMP/knee")$" "$TMP/out" ||
  fail "no ready-to-paste --io-concurrency: $(cat "$TMP/out")"
grep -q "^io knee: .*io_concurrency $(cat "$TMP/knee") (2 workers, prefetch 2)" "$TMP/out" ||
  fail "no io knee line: $(cat "$TMP/out")"
grep -q ">knee: -j 2 --prefetch 2 --io-concurrency $(cat "$TMP/knee")<" "$TMP/slow.svg" ||
  fail "the SVG does not mark the knee with its io_concurrency: $(grep -o "knee: [^<]*" "$TMP/slow.svg")"

say "--io-sweep LIST: those values, in order; --io-concurrency sets the worker sweep's"
run_stoke "${TUNE[@]}" "$F/slow40/$SHARDS" --io-concurrency 3 --io-sweep 2,6 --json "$TMP/list.json"
[ "$rc" -eq 0 ] || fail "tune --io-sweep 2,6 exit $rc: $(cat "$TMP/err")"
json_check "$TMP/list.json" '
pts = d["io_sweep"]["points"]
assert [p["io_concurrency"] for p in pts] == [2, 6], pts
assert all(p["note"] == "list" for p in pts), pts
assert [p["io_concurrency"] for p in d["points"]] == [3], d["points"]
assert d["config"]["io_concurrency"] == 3, d["config"]
assert d["knee"]["io_concurrency"] in (2, 6), d["knee"]
'

say "--io-sweep off: the worker knee at the io_concurrency it ran with"
run_stoke "${TUNE[@]}" "$F/ok/$SHARDS" --io-sweep off --json "$TMP/off.json"
[ "$rc" -eq 0 ] || fail "tune --io-sweep off exit $rc: $(cat "$TMP/err")"
json_check "$TMP/off.json" '
assert "io_sweep" not in d, d.keys()
assert d["knee"]["flags"] == "-j 2 --prefetch 2 --io-concurrency 8", d["knee"]
'
grep -q "^io_concurrency at the knee" "$TMP/out" && fail "--io-sweep off swept: $(cat "$TMP/out")"

say "local shards: no io_concurrency anywhere"
run_stoke "${TUNE[@]}" "$TMP/www/$SHARDS" --json "$TMP/local.json"
[ "$rc" -eq 0 ] || fail "local tune exit $rc: $(cat "$TMP/err")"
json_check "$TMP/local.json" '
assert "io_sweep" not in d and "io_concurrency" not in d["knee"], d["knee"]
assert d["knee"]["flags"] == "-j 2 --prefetch 2", d["knee"]
assert all("io_concurrency" not in p for p in d["points"]), d["points"]
'
grep -q "io-concurrency\|io_concurrency" "$TMP/out" && fail "a local tune spoke of io_concurrency: $(cat "$TMP/out")"

say "cached remote shards are local while the loader runs: not swept, and said why"
run_stoke "${TUNE[@]}" "$F/etag/$SHARDS" --cache "$TMP/cache" --json "$TMP/cached.json"
[ "$rc" -eq 0 ] || fail "cached tune exit $rc: $(cat "$TMP/err")"
grep -q "^io_concurrency not swept: the run read no remote shard while it ran" "$TMP/out" ||
  fail "no reason for not sweeping: $(cat "$TMP/out")"
json_check "$TMP/cached.json" 'assert "io_sweep" not in d and d["knee"]["flags"] == "-j 2 --prefetch 2", d["knee"]'

say "bad --io-sweep values are usage errors"
run_stoke tune --synthetic sleep:1ms --io-sweep 0
[ "$rc" -eq 2 ] || fail "--io-sweep 0: exit $rc"
run_stoke tune --synthetic sleep:1ms --io-sweep 65
[ "$rc" -eq 2 ] || fail "--io-sweep 65: exit $rc"
say "ok"
