#!/usr/bin/env bash
# The live autotuner over io_concurrency (docs/autotune.md,
# "io_concurrency"): a remote run with --autotune starts at the requests in
# flight it was given and moves them as its own dimension beside the
# workers.  Behind the fault server's 40 ms before each answer, one request
# in flight starves the consumer while the limit binds: the tuner doubles
# it (io-more), recorded with from/to io_concurrency; a server that answers
# 429 to every other request halves it (io-fewer, naming the 429/503
# share) and never asks for more; a
# local run has no io decisions.  Nothing compares a time: 40 ms a request
# at one in flight is several times slower than at two, far past any
# load's noise, and the throttled share is the server's by construction.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../remote/servers.sh"

"$PY" -c 'import PIL' 2>/dev/null || { echo "python3-pil missing"; exit 77; }

make_jpeg_folder "$TMP/train" 8 ant bee cow
run_stoke pack "$TMP/train" -o "$TMP/www/train" --shard-size 256KB
[ "$rc" -eq 0 ] || fail "pack exit $rc: $(cat "$TMP/err")"
start_faults "$TMP/www"
F="http://127.0.0.1:$FAULTS"
n=$(find "$TMP/www" -name 'train-*.stoke' | wc -l)
SHARDS="train-{00000..$(printf '%05d' $((n - 1)))}.stoke"
# Blocks of about one sample: each a request of its own; a step of no
# compute, so the consumer waits for what the requests bring.
RUN=(bench -b 4 -j 2 --seed 3 --shuffle=block=2KB --autotune -q)

say "40 ms before each answer, one request in flight: the tuner asks for more"
run_stoke "${RUN[@]}" "$F/slow40/$SHARDS" --io-concurrency 1 --epochs 12 \
  --json "$TMP/slow.json"
[ "$rc" -eq 0 ] || fail "bench exit $rc: $(cat "$TMP/err")"
"$PY" - "$TMP/slow.json" <<'PY' || fail "slow: see above"
import json, sys
d = json.load(open(sys.argv[1]))
ds = d["autotune"]["decisions"]
for e in ds:
    print("  %6.2f s %s" % (e["time_s"], e["text"]), file=sys.stderr)
io = [e for e in ds if "to_io_concurrency" in e]
assert io, ("no io decision", ds)
first = io[0]
assert first["kind"] == "io-more", first
assert (first["from_io_concurrency"], first["to_io_concurrency"]) == (1, 2), first
assert "latency-bound" in first["text"] and "io_concurrency 1 -> 2" in first["text"], first
# Each io decision starts where the one before it left the limit, within
# 1..64, and a rollback goes back to a limit tried before.
at = 1
for e in io:
    assert e["from_io_concurrency"] == at, (at, e)
    assert 1 <= e["to_io_concurrency"] <= 64, e
    assert e["kind"] in ("io-more", "io-fewer", "rollback"), e
    at = e["to_io_concurrency"]
assert at >= 2, io
# The workers' own decisions carry no io numbers.
for e in ds:
    if e["kind"] in ("grow", "shrink", "deeper", "shallower"):
        assert "to_io_concurrency" not in e, e
PY

say "a server that answers 429 to every other request: the tuner asks for fewer"
run_stoke "${RUN[@]}" "$F/throttle/$SHARDS" --io-concurrency 8 --epochs 60 \
  --retry-backoff 1ms --http-attempts 6 --retry-budget 100000 \
  --json "$TMP/throttled.json"
[ "$rc" -eq 0 ] || fail "bench exit $rc: $(cat "$TMP/err")"
"$PY" - "$TMP/throttled.json" <<'PY' || fail "throttled: see above"
import json, sys
d = json.load(open(sys.argv[1]))
ds = d["autotune"]["decisions"]
for e in ds:
    print("  %6.2f s %s" % (e["time_s"], e["text"]), file=sys.stderr)
fewer = [e for e in ds if e["kind"] == "io-fewer"]
assert fewer, ("no io-fewer", ds)
e = fewer[0]
assert (e["from_io_concurrency"], e["to_io_concurrency"]) == (8, 4), e
assert "429/503" in e["text"], e
assert not [x for x in ds if x["kind"] == "io-more"], ds
PY

say "a local run: no io decisions"
run_stoke "${RUN[@]}" "$TMP/www/$SHARDS" --epochs 3 --json "$TMP/local.json"
[ "$rc" -eq 0 ] || fail "bench exit $rc: $(cat "$TMP/err")"
"$PY" - "$TMP/local.json" <<'PY' || fail "local: see above"
import json, sys
d = json.load(open(sys.argv[1]))
ds = (d.get("autotune") or {}).get("decisions", [])
assert not [e for e in ds if "io" in e["kind"] or "to_io_concurrency" in e], ds
PY
say "ok"
