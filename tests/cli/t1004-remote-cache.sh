#!/usr/bin/env bash
# --cache DIR for remote packed shards (docs/remote.md, "The cache"): the
# first run fetches each shard whole into DIR/remote/, the next reads it
# there (only the 64-byte header request that asks for the ETag goes to
# the server), a changed object (a new ETag) is fetched again, --cache-max
# evicts the least recently used entries, and two processes started
# together fetch each shard once.  Counts come from nginx's access log:
# a whole shard is a 200 answer, a header probe a 206 of 64 bytes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../remote/servers.sh"

"$PY" -c 'import PIL' 2>/dev/null || { echo "python3-pil missing"; exit 77; }

make_jpeg_folder "$TMP/train" 4 ant bee cow
make_shards "$TMP/www" 2
[ "$n_shards" -ge 2 ] || fail "expected several shards, got $n_shards"
start_nginx "$TMP/www"
H="http://127.0.0.1:$NGINX_HTTP"
URLS="$H/train-{00000..$last}.stoke"
BENCH=(bench -b 4 -j 2 --epochs 2 --shuffle --seed 7)
LOG="$TMP/nginx/logs/access.log"

# since MARK STATUS: requests answered STATUS after line MARK of the log.
since() { tail -n +"$(($1 + 1))" "$LOG" | awk -v s="$2" '$9 == s' | wc -l; }
# entries DIR: the cache's entries.
entries() { find "$1/remote" -name 'r-*.stoke' | wc -l; }
same_indices() { cmp -s "$1" "$2" || fail "different batches: $(diff "$1" "$2" | head -5)"; }

run_stoke "${BENCH[@]}" "$TMP/www/train-{00000..$last}.stoke" --indices "$TMP/local.idx"
[ "$rc" -eq 0 ] || fail "local bench exit $rc: $(cat "$TMP/err")"

say "the first run fetches every shard whole, once"
C="$TMP/cache"
mark=$(nginx_requests)
run_stoke "${BENCH[@]}" "$URLS" --cache "$C" --indices "$TMP/c1.idx"
[ "$rc" -eq 0 ] || fail "cached bench exit $rc: $(cat "$TMP/err")"
same_indices "$TMP/local.idx" "$TMP/c1.idx"
whole=$(since "$mark" 200)
[ "$whole" -eq "$n_shards" ] || fail "$whole whole-shard GETs for $n_shards shards"
[ "$(entries "$C")" -eq "$n_shards" ] || fail "$(entries "$C") entries for $n_shards shards"
# Each entry is byte for byte one of the shards: reading it is a local read.
for f in "$C"/remote/r-*.stoke; do
  ok=0
  for s in "$TMP"/www/train-*.stoke; do cmp -s "$f" "$s" && ok=1; done
  [ "$ok" -eq 1 ] || fail "entry $f is none of the shards"
done
[ "$(stat -c %a "$C/remote")" = 700 ] || fail "the cache folder is not private"
ls "$C/remote" | grep -q 127.0.0.1 && fail "a URL in a file name: $(ls "$C/remote")"
ls "$C/remote" | grep -q '\.tmp$' && fail "a .tmp left: $(ls "$C/remote")"

say "the second run reads the cache: no data request, the same batches"
mark=$(nginx_requests)
run_stoke "${BENCH[@]}" "$URLS" --cache "$C" --indices "$TMP/c2.idx"
[ "$rc" -eq 0 ] || fail "second cached bench exit $rc: $(cat "$TMP/err")"
same_indices "$TMP/local.idx" "$TMP/c2.idx"
total=$(( $(nginx_requests) - mark ))
probes=$(tail -n +"$((mark + 1))" "$LOG" | awk '$9 == 206 && $10 == 64' | wc -l)
[ "$total" -eq "$n_shards" ] && [ "$probes" -eq "$n_shards" ] ||
  fail "$total requests ($probes header probes) for $n_shards cached shards"

say "a changed object (a new ETag) is fetched again, as a new entry"
touch -d '2001-01-01' "$TMP/www/train-00000.stoke" # nginx's ETag is mtime-size
mark=$(nginx_requests)
run_stoke "${BENCH[@]}" "$URLS" --cache "$C" --indices "$TMP/c3.idx"
[ "$rc" -eq 0 ] || fail "changed-shard bench exit $rc: $(cat "$TMP/err")"
same_indices "$TMP/local.idx" "$TMP/c3.idx"
[ "$(since "$mark" 200)" -eq 1 ] || fail "$(since "$mark" 200) whole GETs after one shard changed"
[ "$(entries "$C")" -eq $((n_shards + 1)) ] || fail "$(entries "$C") entries after a change"

say "--cache-max smaller than the shards: the least recently used go at the end"
size=$(stat -c %s "$TMP/www/train-00000.stoke")
budget=$((size * 3 / 2))
B="$TMP/small"
run_stoke "${BENCH[@]}" "$URLS" --cache "$B" --cache-max "$budget" --io-concurrency 1 --indices "$TMP/b1.idx"
[ "$rc" -eq 0 ] || fail "budget bench exit $rc: $(cat "$TMP/err")"
same_indices "$TMP/local.idx" "$TMP/b1.idx"
kept=$(entries "$B")
bytes=$(find "$B/remote" -name 'r-*.stoke' -printf '%s\n' | awk '{t += $1} END {print t + 0}')
[ "$bytes" -le "$budget" ] || fail "$bytes bytes kept over a budget of $budget"
[ "$kept" -ge 1 ] || fail "nothing kept under a budget of one shard and a half"
# A new shard needs room: the least recently used entry not open goes.
D="$TMP/lru"
one=(bench -b 2 -j 1 --epochs 2 --cache "$D" --cache-max "$budget")
run_stoke "${one[@]}" "$H/train-00000.stoke"
[ "$rc" -eq 0 ] || fail "lru bench 0 exit $rc: $(cat "$TMP/err")"
run_stoke "${one[@]}" "$H/train-00001.stoke"
[ "$rc" -eq 0 ] || fail "lru bench 1 exit $rc: $(cat "$TMP/err")"
[ "$(entries "$D")" -eq 1 ] || fail "$(entries "$D") entries under a budget of one shard"
cmp -s "$(find "$D/remote" -name 'r-*.stoke')" "$TMP/www/train-00001.stoke" ||
  fail "the entry kept is not the one used last"
mark=$(nginx_requests)
run_stoke "${one[@]}" "$H/train-00001.stoke"
[ "$rc" -eq 0 ] || fail "lru bench 1 again exit $rc: $(cat "$TMP/err")"
[ "$(since "$mark" 200)" -eq 0 ] || fail "the entry used last was fetched again"

say "two processes started together fetch each shard once"
T="$TMP/two"
mark=$(nginx_requests)
"$STOKE" "${BENCH[@]}" "$URLS" --cache "$T" --indices "$TMP/p1.idx" >"$TMP/p1.out" 2>"$TMP/p1.err" &
p1=$!
"$STOKE" "${BENCH[@]}" "$URLS" --cache "$T" --indices "$TMP/p2.idx" >"$TMP/p2.out" 2>"$TMP/p2.err" &
p2=$!
wait "$p1" || fail "process 1: $(cat "$TMP/p1.err")"
wait "$p2" || fail "process 2: $(cat "$TMP/p2.err")"
same_indices "$TMP/local.idx" "$TMP/p1.idx"
same_indices "$TMP/local.idx" "$TMP/p2.idx"
[ "$(since "$mark" 200)" -eq "$n_shards" ] || fail "$(since "$mark" 200) whole GETs by two processes for $n_shards shards"

say "threads of one process opening one shard at once fetch it once"
W="$TMP/threads"
mark=$(nginx_requests)
run_stoke bench -b 4 -j 2 --epochs 2 "$H/train-{00000,00000,00000,00001}.stoke" --cache "$W" --io-concurrency 4
[ "$rc" -eq 0 ] || fail "threads bench exit $rc: $(cat "$TMP/err")"
[ "$(since "$mark" 200)" -eq 2 ] || fail "$(since "$mark" 200) whole GETs for 2 distinct shards"

say "a crashed writer's .tmp is removed"
name=$(basename "$(find "$C/remote" -name 'r-*.stoke' | head -1)" .stoke)
echo partial >"$C/remote/$name.tmp"
run_stoke "${BENCH[@]}" "$URLS" --cache "$C" --cache-max 1GB
[ "$rc" -eq 0 ] || fail "bench exit $rc: $(cat "$TMP/err")"
[ ! -e "$C/remote/$name.tmp" ] || fail "the stale .tmp stayed"

say "tar shards: fetched whole into the cache once, then read there"
run_stoke "${BENCH[@]}" "$TMP/www/shard-{0..1}.tar" --indices "$TMP/tar-local.idx"
[ "$rc" -eq 0 ] || fail "local tar exit $rc: $(cat "$TMP/err")"
R="$TMP/tarcache"
for pass in 1 2; do
  mark=$(nginx_requests)
  run_stoke "${BENCH[@]}" "$H/shard-{0..1}.tar" --cache "$R" --indices "$TMP/tar$pass.idx"
  [ "$rc" -eq 0 ] || fail "cached tar exit $rc: $(cat "$TMP/err")"
  same_indices "$TMP/tar-local.idx" "$TMP/tar$pass.idx"
  want=$((pass == 1 ? 2 : 0))
  [ "$(since "$mark" 200)" -eq "$want" ] || fail "pass $pass: $(since "$mark" 200) whole tar GETs, expected $want"
done
[ "$(find "$R/remote" -name 'r-*.tar' | wc -l)" -eq 2 ] || fail "not two tar entries: $(ls "$R/remote")"
cmp -s "$(find "$R/remote" -name 'r-*.tar' | head -1)" "$TMP/www/shard-0.tar" ||
  cmp -s "$(find "$R/remote" -name 'r-*.tar' | head -1)" "$TMP/www/shard-1.tar" ||
  fail "a tar entry is none of the shards"

say "no secret of a URL in the cache's names or the output"
SECRET=Sekr1tPassw0rd
X="$TMP/secret"
run_stoke "${BENCH[@]}" "http://user:$SECRET@127.0.0.1:$NGINX_HTTP/train-{00000..$last}.stoke?X-Amz-Signature=$SECRET" \
  --cache "$X" --indices "$TMP/s.idx" --json "$TMP/s.json"
[ "$rc" -eq 0 ] || fail "secret bench exit $rc: $(cat "$TMP/err")"
same_indices "$TMP/local.idx" "$TMP/s.idx"
[ "$(entries "$X")" -eq "$n_shards" ] || fail "$(entries "$X") entries for $n_shards shards"
ls -a "$X/remote" | grep -q "$SECRET" && fail "a secret in a file name"
grep -q "$SECRET" "$TMP/out" "$TMP/err" "$TMP/s.json" && fail "a secret in the output"

say "a local packed set with --cache is still refused"
run_stoke "${BENCH[@]}" "$TMP/www/train-00000.stoke" --cache "$C"
[ "$rc" -ne 0 ] || fail "a local packed set was cached"
echo ok
