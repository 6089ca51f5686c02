#!/usr/bin/env bash
# The bandwidth-bound verdict against the latency-bound one, end to end:
# the same loader over nginx with a bandwidth cap (limit_rate) spends its
# requests' time receiving bodies and is bandwidth-bound, with the remote
# cache as advice; over the fault server, which waits 100 ms before each
# answer of a small body, it spends that time waiting for the first byte
# and is latency-bound.  Both verdicts hold by construction (the server's
# pacing and its wait are floors), not by a measured speed.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../remote/servers.sh"

"$PY" -c 'import PIL' 2>/dev/null || { echo "python3-pil missing"; exit 77; }

# Large bodies for the cap: 4 noise images of 320x320 (about 90 KB each
# as JPEG).  nginx sends the first second's worth of an answer at once
# (its limit is rate x (seconds + 1)), so the cap is 32 KB/s: each sample
# is then more than a second of body against well under a millisecond to
# its first byte on loopback.
"$PY" - "$TMP/big" <<'PYEOF'
import os, random, sys
from PIL import Image
rng = random.Random(5)
for c in ("ant", "bee"):
    os.makedirs(os.path.join(sys.argv[1], c))
    for i in range(2):
        img = Image.new("RGB", (320, 320))
        img.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256))
                     for _ in range(320 * 320)])
        img.save(os.path.join(sys.argv[1], c, "%d.jpg" % i), quality=90)
PYEOF
run_stoke pack "$TMP/big" -o "$TMP/www/big/train" --json "$TMP/bigpack.json"
[ "$rc" -eq 0 ] || fail "pack big exit $rc: $(cat "$TMP/err")"
min_body=$("$PY" -c 'import os,sys; print(min(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(sys.argv[1]) for f in fs))' "$TMP/big")
[ "$min_body" -gt 65536 ] || fail "the big images are too small to be paced: $min_body bytes"
# Small bodies for the latency: t1003's folder (60 to 300 px).
make_jpeg_folder "$TMP/small" 4 ant bee cow
run_stoke pack "$TMP/small" -o "$TMP/www/small/train" --json "$TMP/smallpack.json"
[ "$rc" -eq 0 ] || fail "pack small exit $rc: $(cat "$TMP/err")"
shards() { "$PY" -c 'import json,sys; n=json.load(open(sys.argv[1]))["shards"]; print("train-{00000..%05d}.stoke" % (n - 1))' "$1"; }
BIG=$(shards "$TMP/bigpack.json")
SMALL=$(shards "$TMP/smallpack.json")

NGINX_SLOW_RATE=32k
start_nginx "$TMP/www"
start_faults "$TMP/www"

say "a capped link (nginx limit_rate 32k, 100 KB bodies): bandwidth-bound, the cache as advice"
run_stoke profile -b 2 -j 2 --epochs 2 --seed 7 --compute sleep:1ms --io-concurrency 2 \
  "http://127.0.0.1:$NGINX_SLOW/big/$BIG" --json "$TMP/bw.json"
[ "$rc" -eq 0 ] || fail "capped profile exit $rc: $(cat "$TMP/err")"
grep -q "^  fetch  .*% receiving bodies" "$TMP/out" || fail "no body share in the fetch line: $(cat "$TMP/out")"
grep -q "fetch verdict bandwidth-bound" "$TMP/out" || fail "no bandwidth-bound verdict: $(cat "$TMP/out")"
grep -q "bandwidth-bound: the requests spend .*% of their time receiving bodies, .* MB/s for .* KB a sample.*--cache DIR keeps the shards on this node after the first epoch: predicted step" "$TMP/out" \
  || fail "no cache advice: $(cat "$TMP/out")"
grep -q "latency-bound" "$TMP/out" && fail "a capped link called latency-bound: $(cat "$TMP/out")"
json_check "$TMP/bw.json" '
f = d["summary"]["fetch"]
assert f["verdict"] == "bandwidth-bound", f
assert f["body_frac"] >= 0.5, f
kinds = [a["kind"] for a in d["diagnosis"]["advice"]]
assert "remote_cache" in kinds and "io_concurrency" not in kinds, kinds
'

say "latency on the server (100 ms before each small body): latency-bound, not bandwidth"
run_stoke profile -b 4 -j 2 --epochs 2 --seed 7 --compute sleep:5ms --io-concurrency 2 \
  "http://127.0.0.1:$FAULTS/slow100/small/$SMALL" --json "$TMP/lat.json"
[ "$rc" -eq 0 ] || fail "slow profile exit $rc: $(cat "$TMP/err")"
grep -q "fetch verdict latency-bound" "$TMP/out" || fail "no latency-bound verdict: $(cat "$TMP/out")"
grep -q "bandwidth-bound" "$TMP/out" && fail "a waiting server called bandwidth-bound: $(cat "$TMP/out")"
json_check "$TMP/lat.json" '
f = d["summary"]["fetch"]
assert f["verdict"] == "latency-bound", f
assert f["body_frac"] < 0.5, f
kinds = [a["kind"] for a in d["diagnosis"]["advice"]]
assert "io_concurrency" in kinds and "remote_cache" not in kinds, kinds
'

say "the fault server's shared cap (/cap50/, bench/remote.sh): two connections share one 50 kB/s link"
# A floor, by construction: the server sleeps each chunk's share of the
# link before sending it, so two ranges of 50 kB at once cannot both
# arrive before 100 kB / 50 kB/s; a cap per connection would let them
# arrive in 1 s.
"$PY" - "$FAULTS" <<'PYEOF' || fail "the shared cap let two connections through faster than its rate"
import sys, threading, time, urllib.request
port, n = sys.argv[1], 50000
got = {}
def get(i):
    req = urllib.request.Request("http://127.0.0.1:%s/cap50/big/train-00000.stoke" % port,
                                 headers={"Range": "bytes=%d-%d" % (i * n, i * n + n - 1)})
    with urllib.request.urlopen(req) as r:
        got[i] = len(r.read())
t0 = time.monotonic()
ts = [threading.Thread(target=get, args=(i,)) for i in range(2)]
for t in ts: t.start()
for t in ts: t.join()
dt = time.monotonic() - t0
assert got == {0: n, 1: n}, got
# Shared: at least 2 n / 50 kB/s = 2 s (less a chunk each, 1.34 s); per
# connection it would be 1 s.
floor = (2 * n - 2 * 16384) / 50000.0
assert dt >= floor, (dt, floor)
PYEOF

say "the HTML report shows the body share and the verdict"
run_stoke report "$TMP/bw.json" -o "$TMP/bw.html"
[ "$rc" -eq 0 ] || fail "report exit $rc: $(cat "$TMP/err")"
grep -q "<b>Fetch</b> .*% receiving bodies; bandwidth-bound" "$TMP/bw.html" || fail "no fetch paragraph in the HTML report"
say "ok"
