#!/usr/bin/env bash
# Shards over HTTP(S): packed shards and tar shards by Range requests (tar
# shards fetched whole only from a server that ignores Range), from nginx (HTTP, HTTPS with a certificate made here, a
# bandwidth cap) and from the tests' own fault server; the same batches as
# local reads, retries that pass, errors that name the URL, the status and
# the attempts, and no secret of a URL in any output.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../remote/servers.sh"

"$PY" -c 'import PIL' 2>/dev/null || { echo "python3-pil missing"; exit 77; }

say "a dataset: packed shards and tar shards under one web root"
make_jpeg_folder "$TMP/train" 4 ant bee cow
make_shards "$TMP/www" 2
[ "$n_shards" -ge 2 ] || fail "expected several shards, got $n_shards"

start_nginx "$TMP/www"
start_faults "$TMP/www"
H="http://127.0.0.1:$NGINX_HTTP"
S="https://127.0.0.1:$NGINX_HTTPS"
BENCH=(bench -b 4 -j 2 --epochs 2 --shuffle --seed 7)

# same_indices LOCAL REMOTE: the batches' sample indices, line for line.
same_indices() { cmp -s "$1" "$2" || fail "different batches: $(diff "$1" "$2" | head -5)"; }

say "packed over http (brace pattern) reads the same batches as the local shards"
run_stoke "${BENCH[@]}" "$TMP/www/train-{00000..$last}.stoke" --indices "$TMP/local.idx" --json "$TMP/local.json"
[ "$rc" -eq 0 ] || fail "local bench exit $rc: $(cat "$TMP/err")"
for j in 1 3; do
  run_stoke bench -b 4 -j $j --epochs 2 --shuffle --seed 7 "$H/train-{00000..$last}.stoke" \
    --indices "$TMP/http$j.idx" --json "$TMP/http$j.json" --io-concurrency 3
  [ "$rc" -eq 0 ] || fail "http bench -j $j exit $rc: $(cat "$TMP/err")"
  same_indices "$TMP/local.idx" "$TMP/http$j.idx"
done
json_check "$TMP/http1.json" '
c = d["config"]
assert c["data_kind"] == "packed" and c["samples"] == 12, c
assert c["data"].startswith("http://127.0.0.1:"), c
assert c["io_concurrency"] == 3, c
'
json_check "$TMP/local.json" '
assert "io_concurrency" not in d["config"], d["config"]
'

say "--shuffle block: windows read ahead as coalesced Range requests, the same batches"
run_stoke pack "$TMP/train" -o "$TMP/www/big" --shard-size 1MB
[ "$rc" -eq 0 ] || fail "pack exit $rc: $(cat "$TMP/err")"
# One worker: it asks for the window ahead before it reads a sample of it,
# so the count below does not depend on timing.
BLOCK=(bench -b 4 -j 1 --epochs 2 --shuffle block=64KB --seed 7)
run_stoke "${BLOCK[@]}" "$TMP/www/big-00000.stoke" --indices "$TMP/block-local.idx"
[ "$rc" -eq 0 ] || fail "local block bench exit $rc: $(cat "$TMP/err")"
before=$(nginx_requests)
run_stoke "${BLOCK[@]}" "$H/big-00000.stoke" --indices "$TMP/block-http.idx" --io-concurrency 2
[ "$rc" -eq 0 ] || fail "http block bench exit $rc: $(cat "$TMP/err")"
same_indices "$TMP/block-local.idx" "$TMP/block-http.idx"
# The header, the class table and the index at open, then one request per
# block of 64KB (four of them, a few samples each) in each of the three
# epochs (the warm-up one included), where one by one would make 36.
reqs=$(( $(nginx_requests) - before - 3 ))
[ "$reqs" -le 12 ] || fail "$reqs data requests for 36 sample reads: not coalesced"

say "https with the test's CA: verified; without it: refused, naming the URL"
run_stoke "${BENCH[@]}" "$S/train-{00000..$last}.stoke" --tls-ca "$TMP/tls/cert.pem" --indices "$TMP/https.idx"
[ "$rc" -eq 0 ] || fail "https bench exit $rc: $(cat "$TMP/err")"
same_indices "$TMP/local.idx" "$TMP/https.idx"
run_stoke "${BENCH[@]}" "$S/train-00000.stoke"
[ "$rc" -ne 0 ] || fail "an unknown certificate was accepted"
grep -q "127.0.0.1:$NGINX_HTTPS/train-00000.stoke" "$TMP/err" || fail "no URL in: $(cat "$TMP/err")"
grep -qi "certificate" "$TMP/err" || fail "no certificate reason in: $(cat "$TMP/err")"
run_stoke "${BENCH[@]}" "$S/train-{00000..$last}.stoke" --tls-insecure
[ "$rc" -eq 0 ] || fail "--tls-insecure exit $rc: $(cat "$TMP/err")"

say "tar shards over http: streamed by Range requests, never spooled, the same batches as local"
run_stoke "${BENCH[@]}" "$TMP/www/shard-{0..1}.tar" --indices "$TMP/tar-local.idx"
[ "$rc" -eq 0 ] || fail "local tar exit $rc: $(cat "$TMP/err")"
before=$(nginx_requests)
# No temporary folder to spool into: a streamed shard needs none.
TMPDIR=$TMP/no-such-dir run_stoke "${BENCH[@]}" "$H/shard-{0..1}.tar" --indices "$TMP/tar-http.idx" --json "$TMP/tar-http.json"
[ "$rc" -eq 0 ] || fail "http tar exit $rc: $(cat "$TMP/err")"
same_indices "$TMP/tar-local.idx" "$TMP/tar-http.idx"
# Every request for a tar shard was a Range request (206), none whole (200).
tail -n +$((before + 1)) "$TMP/nginx/logs/access.log" | awk '$7 ~ /shard-/ { n++; if ($9 != 206) bad++ }
  END { if (n < 4 || bad) { print n " requests, " bad " not 206"; exit 1 } }' ||
  fail "tar shards not read by Range requests"
json_check "$TMP/tar-http.json" '
f = d["summary"]["fetch"]
assert f["requests"] > 0 and f["bytes"] > 0, f
'
run_stoke "${BENCH[@]}" -j 3 --io-concurrency 1 "$H/shard-{0..1}.tar" --indices "$TMP/tar-http3.idx"
[ "$rc" -eq 0 ] || fail "http tar -j 3 exit $rc: $(cat "$TMP/err")"
same_indices "$TMP/tar-local.idx" "$TMP/tar-http3.idx"

say "a tar shard with a large member between samples: its data is skipped at open, not fetched"
"$PY" - "$TMP/train" "$TMP/www/mixed.tar" <<'PYEOF'
import io, os, sys, tarfile
root, out = sys.argv[1], sys.argv[2]
classes = sorted(os.listdir(root))
def add(t, name, data):
    i = tarfile.TarInfo(name)
    i.size = len(data)
    t.addfile(i, io.BytesIO(data))
with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as t:
    for ci, c in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(root, c)))[:2]:
            key = "%s_%s" % (c, f.split(".")[0])
            add(t, key + ".jpg", open(os.path.join(root, c, f), "rb").read())
            add(t, key + ".cls", str(ci).encode())
            add(t, key + ".npy", os.urandom(6 << 20))  # 6 MB a sample, unread
PYEOF
size=$(stat -c %s "$TMP/www/mixed.tar")
run_stoke "${BENCH[@]}" "$TMP/www/mixed.tar" --indices "$TMP/mixed-local.idx"
[ "$rc" -eq 0 ] || fail "local mixed tar exit $rc: $(cat "$TMP/err")"
before=$(nginx_requests)
run_stoke "${BENCH[@]}" "$H/mixed.tar" --indices "$TMP/mixed-http.idx"
[ "$rc" -eq 0 ] || fail "http mixed tar exit $rc: $(cat "$TMP/err")"
same_indices "$TMP/mixed-local.idx" "$TMP/mixed-http.idx"
sent=$(tail -n +$((before + 1)) "$TMP/nginx/logs/access.log" | awk '$7 ~ /mixed.tar/ { b += $10 } END { print b + 0 }')
say "  $sent bytes sent of the $size-byte shard (open and three epochs)"
# Open (a 256 KiB window after each skipped member) and three epochs of 6
# images: a few MB at most, of a shard of 36 MB.
[ "$sent" -gt 0 ] && [ "$sent" -lt $((size / 4)) ] || fail "$sent bytes sent of a $size-byte shard: the large members were fetched"

say "a bandwidth-capped server (nginx limit_rate) still delivers everything"
run_stoke "${BENCH[@]}" "http://127.0.0.1:$NGINX_SLOW/train-{00000..$last}.stoke" --indices "$TMP/slow.idx"
[ "$rc" -eq 0 ] || fail "capped bench exit $rc: $(cat "$TMP/err")"
same_indices "$TMP/local.idx" "$TMP/slow.idx"

F="http://127.0.0.1:$FAULTS"
FAST=(--retry-backoff 5ms --stall-timeout 1s --connect-timeout 2s)
for mode in 503x2 429x2 resetx2 shortx2 slow50 flipx1; do
  say "fault server, $mode: retried or waited out, the same batches"
  run_stoke "${BENCH[@]}" "${FAST[@]}" "$F/$mode/train-{00000..$last}.stoke" --indices "$TMP/$mode.idx"
  [ "$rc" -eq 0 ] || fail "$mode: exit $rc: $(cat "$TMP/err")"
  same_indices "$TMP/local.idx" "$TMP/$mode.idx"
done
grep -q "^/503x2/train-00000.stoke bytes=0-63 503" "$TMP/faults.log" || fail "no 503 was served"
for mode in 503x2 shortx2 resetx2; do
  say "fault server, tar shards, $mode: each Range request retried, the same batches"
  run_stoke "${BENCH[@]}" "${FAST[@]}" "$F/$mode/shard-{0..1}.tar" --indices "$TMP/tar-$mode.idx"
  [ "$rc" -eq 0 ] || fail "tar $mode: exit $rc: $(cat "$TMP/err")"
  same_indices "$TMP/tar-local.idx" "$TMP/tar-$mode.idx"
done

say "always 503: gives up naming the URL, the status and the attempts"
run_stoke "${BENCH[@]}" "${FAST[@]}" --http-attempts 3 "$F/always503/train-00000.stoke"
[ "$rc" -ne 0 ] || fail "always503 succeeded"
grep -q "GET $F/always503/train-00000.stoke bytes 0-63: HTTP 503: throttled after 3 attempts" "$TMP/err" ||
  fail "unclear error: $(cat "$TMP/err")"

say "the retry budget bounds the retries of the whole source"
run_stoke "${BENCH[@]}" "${FAST[@]}" --retry-budget 1 "$F/always503/train-00000.stoke"
grep -q "after 2 attempts (the retry budget is spent)" "$TMP/err" || fail "budget: $(cat "$TMP/err")"

say "a stall fails on the stall timeout, endless redirects stop, a huge body is refused"
run_stoke "${BENCH[@]}" "${FAST[@]}" --http-attempts 1 "$F/stall/train-00000.stoke"
[ "$rc" -ne 0 ] && grep -q "GET $F/stall/train-00000.stoke" "$TMP/err" || fail "stall: $(cat "$TMP/err")"
run_stoke "${BENCH[@]}" "${FAST[@]}" "$F/loop/0.stoke"
[ "$rc" -ne 0 ] && grep -qi "redirect" "$TMP/err" || fail "loop: $(cat "$TMP/err")"
run_stoke "${BENCH[@]}" "${FAST[@]}" "$F/huge/train-00000.stoke"
[ "$rc" -ne 0 ] && grep -q "larger than allowed\|more than asked\|ignored the Range" "$TMP/err" || fail "huge: $(cat "$TMP/err")"
say "a server that ignores Range: tar shards fetched whole into a spool, the same batches"
run_stoke "${BENCH[@]}" "${FAST[@]}" "$F/norange/shard-{0..1}.tar" --indices "$TMP/tar-norange.idx"
[ "$rc" -eq 0 ] || fail "tar norange: exit $rc: $(cat "$TMP/err")"
same_indices "$TMP/tar-local.idx" "$TMP/tar-norange.idx"
run_stoke "${BENCH[@]}" "${FAST[@]}" "$F/norange/train-00000.stoke"
[ "$rc" -ne 0 ] && grep -q "ignored the Range request\|more than asked" "$TMP/err" || fail "norange: $(cat "$TMP/err")"
run_stoke "${BENCH[@]}" "${FAST[@]}" "$H/missing-00000.stoke"
[ "$rc" -ne 0 ] && grep -q "HTTP 404.* after 1 attempt$" "$TMP/err" || fail "404: $(cat "$TMP/err")"

say "a URL's user-info and query never appear in any output"
secret=Sekr1tPassw0rd
for url in "http://stoke:$secret@127.0.0.1:$NGINX_HTTP/train-{00000..$last}.stoke" \
           "$H/train-{00000..$last}.stoke?X-Amz-Signature=$secret" \
           "http://stoke:$secret@127.0.0.1:$FAULTS/always503/train-00000.stoke?sig=$secret"; do
  run_stoke "${BENCH[@]}" "${FAST[@]}" --http-attempts 2 "$url" --json "$TMP/s.json" --trace "$TMP/s.trace"
  cat "$TMP/out" "$TMP/err" "$TMP/s.json" "$TMP/s.trace" 2>/dev/null | grep -q "$secret" &&
    fail "the secret shows in an output of $url"
  run_stoke profile -b 4 -j 2 "${FAST[@]}" "$url" --json "$TMP/p.json"
  cat "$TMP/out" "$TMP/err" "$TMP/p.json" 2>/dev/null | grep -q "$secret" &&
    fail "the secret shows in profile's output for $url"
done
rm -f "$TMP/s.json" "$TMP/p.json"
url="http://stoke:$secret@127.0.0.1:$NGINX_HTTP/big-00000.stoke?X-Amz-Signature=$secret"
outputs() { cat "$TMP/out" "$TMP/err" "$@" 2>/dev/null; }
run_stoke tune "$url" -b 4 -j 1,2 --json "$TMP/t.json" --svg "$TMP/t.svg"
[ "$rc" -eq 0 ] || fail "tune exit $rc: $(cat "$TMP/err")"
outputs "$TMP/t.json" "$TMP/t.svg" | grep -q "$secret" && fail "the secret shows in tune's outputs"
run_stoke inspect --verify "$url" --json "$TMP/i.json" --quarantine "$TMP/q.txt"
[ "$rc" -eq 0 ] || fail "inspect exit $rc: $(cat "$TMP/err")"
outputs "$TMP/i.json" "$TMP/q.txt" | grep -q "$secret" && fail "the secret shows in inspect's outputs"
run_stoke budget "$url" -b 4 --fixed 1GB --per-sample 1MB --device 24GB --json "$TMP/b.json"
[ "$rc" -eq 0 ] || fail "budget exit $rc: $(cat "$TMP/err")"
outputs "$TMP/b.json" | grep -q "$secret" && fail "the secret shows in budget's outputs"
# The read-ahead buffer of remote packed shards is in the host ledger, at
# its budget; local shards are mapped and hold none.
grep -q "read-ahead .*256.0 MiB" "$TMP/out" || fail "no read-ahead row: $(cat "$TMP/out")"
run_stoke budget "$TMP/www/big-00000.stoke" -b 4 --json "$TMP/bl.json"
[ "$rc" -eq 0 ] || fail "local budget exit $rc: $(cat "$TMP/err")"
json_check "$TMP/b.json" '
h = d["host"]
assert h["storage_bytes"] == 256 << 20, h
assert h["total_bytes"] >= h["slots_bytes"] + h["storage_bytes"], h
'
json_check "$TMP/bl.json" 'assert d["host"]["storage_bytes"] == 0, d["host"]'
run_stoke pack "$url" -o "$TMP/repacked/x" --json "$TMP/pk.json"
[ "$rc" -eq 0 ] || fail "pack exit $rc: $(cat "$TMP/err")"
outputs "$TMP/pk.json" | grep -q "$secret" && fail "the secret shows in pack's outputs"

say "bad remote options are usage errors"
expect_usage "--io-concurrency" bench "$H/train-00000.stoke" --io-concurrency 0
expect_usage "--stall-timeout" bench "$H/train-00000.stoke" --stall-timeout 0
expect_usage "--http-attempts" bench "$H/train-00000.stoke" --http-attempts 0
say "ok"
