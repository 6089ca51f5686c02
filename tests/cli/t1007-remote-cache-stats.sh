#!/usr/bin/env bash
# The remote shard cache's counts (stoke_stats.rcache_*): a first run with
# --cache fetches every shard into it (misses, their bytes), a second finds
# them all (hits, the bytes spared), a server without ETags leaves them
# uncached, a budget too small evicts the entries of another set; the text
# report's "remote cache" line, the JSON summary's remote_cache, the
# metrics file's stoke_remote_cache_* and the HTML report, against
# the fault server's log and the shards' sizes.  No cache, no section.
# `stoke tune` and `stoke budget` take --cache as bench does.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../remote/servers.sh"

"$PY" -c 'import PIL' 2>/dev/null || { echo "python3-pil missing"; exit 77; }

make_jpeg_folder "$TMP/train" 4 ant bee cow
make_shards "$TMP/www" 1
mkdir -p "$TMP/www/other"
cp "$TMP"/www/train-*.stoke "$TMP/www/other/"
start_faults "$TMP/www"
F="http://127.0.0.1:$FAULTS"
SHARDS="train-{00000..$last}.stoke"
BYTES=$(cat "$TMP"/www/train-*.stoke | wc -c)
BENCH=(bench -b 4 -j 2 --epochs 2 --seed 7 --retry-backoff 5ms)
log_lines() { if [ -f "$TMP/faults.log" ]; then wc -l <"$TMP/faults.log"; else echo 0; fi; }
# whole_gets N: GETs of a whole object (no Range) logged after line N.
whole_gets() { tail -n +"$(( $1 + 1 ))" "$TMP/faults.log" | awk '$2 == "-"' | wc -l; }

say "a first run fetches every shard into the cache: $n_shards misses, $BYTES bytes"
mark=$(log_lines)
run_stoke "${BENCH[@]}" "$F/etag/$SHARDS" --cache "$TMP/c" --json "$TMP/first.json"
[ "$rc" -eq 0 ] || fail "first run exit $rc: $(cat "$TMP/err")"
[ "$(whole_gets "$mark")" -eq "$n_shards" ] || fail "not $n_shards whole GETs: $(tail -n +"$((mark + 1))" "$TMP/faults.log")"
json_check "$TMP/first.json" '
c = d["summary"]["remote_cache"]
assert c == {"hits": 0, "misses": '"$n_shards"', "uncached": 0, "bytes_cached": 0,
             "bytes_fetched": '"$BYTES"', "evicted": 0, "bytes_evicted": 0}, c
# every shard local: nothing read remotely while it ran
assert "fetch" not in d["summary"], d["summary"]["fetch"]
'
grep -q "^  remote cache  0 shards from the cache (0.0 MB), $n_shards fetched into it" "$TMP/out" ||
  fail "no remote cache line: $(cat "$TMP/out")"

say "a second run finds them all: $n_shards hits, nothing fetched"
mark=$(log_lines)
run_stoke "${BENCH[@]}" "$F/etag/$SHARDS" --cache "$TMP/c" --json "$TMP/second.json" \
  --metrics-file "$TMP/second.prom"
[ "$rc" -eq 0 ] || fail "second run exit $rc: $(cat "$TMP/err")"
[ "$(whole_gets "$mark")" -eq 0 ] || fail "a shard was fetched again"
json_check "$TMP/second.json" '
c = d["summary"]["remote_cache"]
assert (c["hits"], c["misses"], c["bytes_cached"], c["bytes_fetched"]) == ('"$n_shards"', 0, '"$BYTES"', 0), c
'
grep -q "^  remote cache  $n_shards shards from the cache" "$TMP/out" || fail "second: $(cat "$TMP/out")"
# The same counts in the metrics file and the HTML report.
L='\{rank="0",loader="[^"]*"\}'
grep -qE "^stoke_remote_cache_hits_total$L $n_shards$" "$TMP/second.prom" ||
  fail "no hits in the metrics: $(cat "$TMP/second.prom")"
grep -qE "^stoke_remote_cache_hit_bytes_total$L $BYTES$" "$TMP/second.prom" ||
  fail "no hit bytes in the metrics: $(cat "$TMP/second.prom")"
grep -qE "^stoke_remote_cache_misses_total$L 0$" "$TMP/second.prom" ||
  fail "misses in the metrics: $(cat "$TMP/second.prom")"
if command -v promtool >/dev/null; then
  promtool check metrics <"$TMP/second.prom" >"$TMP/promtool.out" 2>&1 ||
    fail "promtool: $(cat "$TMP/promtool.out")"
fi
run_stoke report "$TMP/second.json" -o "$TMP/second.html"
[ "$rc" -eq 0 ] || fail "report exit $rc: $(cat "$TMP/err")"
grep -q "<b>Remote cache</b> $n_shards shards from the cache" "$TMP/second.html" ||
  fail "no remote cache paragraph in the HTML report"

say "a server without ETags: every shard read remotely, uncached"
run_stoke "${BENCH[@]}" "$F/ok/$SHARDS" --cache "$TMP/c" --json "$TMP/noetag.json"
[ "$rc" -eq 0 ] || fail "no-ETag run exit $rc: $(cat "$TMP/err")"
json_check "$TMP/noetag.json" '
c = d["summary"]["remote_cache"]
assert (c["hits"], c["misses"], c["uncached"]) == (0, 0, '"$n_shards"'), c
assert d["summary"]["fetch"]["requests"] > 0, d["summary"]["fetch"]
'
grep -q "^  remote cache  .*, $n_shards read remotely (no ETag)" "$TMP/out" || fail "uncached: $(cat "$TMP/out")"

say "a budget smaller than a shard: another set's entries are evicted, the shards in use are not"
# One request at a time at open: each trim sees the last one's result.
run_stoke "${BENCH[@]}" "$F/etag/other/$SHARDS" --io-concurrency 1 --cache "$TMP/c" --cache-max 1 --json "$TMP/evict.json"
[ "$rc" -eq 0 ] || fail "evicting run exit $rc: $(cat "$TMP/err")"
json_check "$TMP/evict.json" '
c = d["summary"]["remote_cache"]
assert (c["misses"], c["bytes_fetched"]) == ('"$n_shards"', '"$BYTES"'), c
assert (c["evicted"], c["bytes_evicted"]) == ('"$n_shards"', '"$BYTES"'), c
'
grep -q "^  remote cache  .*, $n_shards evicted" "$TMP/out" || fail "evicted: $(cat "$TMP/out")"

say "no cache, or local shards: no remote cache section"
run_stoke "${BENCH[@]}" "$F/etag/$SHARDS" --json "$TMP/nocache.json"
[ "$rc" -eq 0 ] || fail "no-cache run exit $rc: $(cat "$TMP/err")"
json_check "$TMP/nocache.json" 'assert "remote_cache" not in d["summary"] and "fetch" in d["summary"], d["summary"].keys()'
# A local tar shard with --cache: the packing cache, not the remote one.
run_stoke "${BENCH[@]}" "$TMP/www/shard-0.tar" --cache "$TMP/c" --json "$TMP/local.json"
[ "$rc" -eq 0 ] || fail "local run exit $rc: $(cat "$TMP/err")"
json_check "$TMP/local.json" 'assert "remote_cache" not in d["summary"], d["summary"]["remote_cache"]'
grep -q "remote cache" "$TMP/out" && fail "a local run printed a remote cache line"
run_stoke report "$TMP/local.json" -o "$TMP/local.html"
grep -q "<b>Remote cache</b>" "$TMP/local.html" && fail "a local run has a remote cache paragraph"

say "stoke budget --cache: a source all in the cache holds no read-ahead"
run_stoke budget "$F/etag/$SHARDS" -b 4 -j 2 --json "$TMP/b-remote.json"
[ "$rc" -eq 0 ] || fail "budget exit $rc: $(cat "$TMP/err")"
run_stoke budget "$F/etag/$SHARDS" -b 4 -j 2 --cache "$TMP/c" --json "$TMP/b-cached.json"
[ "$rc" -eq 0 ] || fail "budget --cache exit $rc: $(cat "$TMP/err")"
json_check "$TMP/b-remote.json" 'assert d["host"]["storage_bytes"] > 0, d["host"]'
json_check "$TMP/b-cached.json" 'assert d["host"]["storage_bytes"] == 0, d["host"]'

say "stoke tune --cache reads the cached shards (nothing fetched whole again)"
mark=$(log_lines)
run_stoke tune "$F/etag/$SHARDS" -b 4 -j 1 --prefetch 1 --cache "$TMP/c" --json "$TMP/tune.json"
[ "$rc" -eq 0 ] || fail "tune --cache exit $rc: $(cat "$TMP/err")"
[ "$(whole_gets "$mark")" -eq 0 ] || fail "tune --cache fetched a shard again"
json_check "$TMP/tune.json" 'assert d["knee"]["flags"] == "-j 1 --prefetch 1", d["knee"]'
say "ok"
