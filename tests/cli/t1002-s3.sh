#!/usr/bin/env bash
# Shards in S3 (s3://bucket/key, s3://bucket/prefix) from a real S3 server
# on 127.0.0.1 (s3rver behind tests/remote/s3_server.js's SigV4 check):
# the same batches as the local shards, packed and tar, by prefix (listed
# page after page) and by brace list, at 1 and 3 workers and io_concurrency
# 1 and 8; a wrong secret, a missing key and no credentials fail naming the
# s3:// URL, the status and S3's Code; the secret and the token in no output.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../remote/servers.sh"

"$PY" -c 'import PIL' 2>/dev/null || { echo "python3-pil missing"; exit 77; }
command -v curl >/dev/null || { echo "curl missing"; exit 77; }

say "a dataset: packed shards and tar shards, local, then uploaded"
make_jpeg_folder "$TMP/train" 4 ant bee cow
make_shards "$TMP/local" 3
[ "$n_shards" -ge 3 ] || fail "expected at least 3 shards (pagination by 2), got $n_shards"

start_s3 "$TMP/s3data"
for f in "$TMP"/local/train-*.stoke; do s3_put "$f" "packed/$(basename "$f")"; done
for f in "$TMP"/local/shard-*.tar; do s3_put "$f" "tars/$(basename "$f")"; done
# Not shards: skipped by a listing of packed/ (a README, an index).
echo "not a shard" >"$TMP/README"
s3_put "$TMP/README" "packed/README"
s3_put "$TMP/local/shard-0.tar" "mixed/a.tar"
s3_put "$TMP/local/train-00000.stoke" "mixed/b.stoke"

# Never the AWS files or profile of whoever runs the test.
unset AWS_PROFILE AWS_DEFAULT_PROFILE AWS_ENDPOINT_URL_S3
export AWS_SHARED_CREDENTIALS_FILE="$TMP/none/credentials" AWS_CONFIG_FILE="$TMP/none/config"
export AWS_ENDPOINT_URL="$S3_ENDPOINT" AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID="$S3_KEY_ID" AWS_SECRET_ACCESS_KEY="$S3_SECRET" AWS_SESSION_TOKEN="$S3_TOKEN"
# A listing's page size of 2 keys (a test knob): pages follow each other
# by NextContinuationToken.
export STOKE_TEST_S3_MAX_KEYS=2
B="s3://$S3_BUCKET"
BENCH=(bench -b 4 --epochs 2 --shuffle --seed 7)
same_indices() { cmp -s "$1" "$2" || fail "different batches: $(diff "$1" "$2" | head -5)"; }
# outputs_clean FILE...: neither the secret nor the token in stdout,
# stderr or the files, nor a signature or an Authorization header.
outputs_clean() {
  ! cat "$TMP/out" "$TMP/err" "$@" 2>/dev/null |
    grep -q -e "$S3_SECRET" -e "$S3_TOKEN" -e "Signature=" -e "AWS4-HMAC-SHA256" -e "Credential=" ||
    fail "the secret, the token or a signature shows in an output: $*"
}

say "packed shards: local batches first"
run_stoke "${BENCH[@]}" -j 1 "$TMP/local/train-{00000..$last}.stoke" --indices "$TMP/local.idx"
[ "$rc" -eq 0 ] || fail "local bench exit $rc: $(cat "$TMP/err")"

for spec in "$B/packed/" "$B/packed/train" "$B/packed/train-{00000..$last}.stoke"; do
  for j in 1 3; do
    for io in 1 8; do
      say "packed over S3, $spec, -j $j, --io-concurrency $io: the same batches"
      run_stoke "${BENCH[@]}" -j $j --io-concurrency $io "$spec" --indices "$TMP/s3.idx" \
        --json "$TMP/s3.json" --trace "$TMP/s3.trace"
      [ "$rc" -eq 0 ] || fail "s3 bench $spec -j $j exit $rc: $(cat "$TMP/err")"
      same_indices "$TMP/local.idx" "$TMP/s3.idx"
      outputs_clean "$TMP/s3.json" "$TMP/s3.trace"
    done
  done
done
json_check "$TMP/s3.json" '
c = d["config"]
assert c["data_kind"] == "packed" and c["samples"] == 12, c
assert c["data"].startswith("s3://stoke-test/packed/"), c
'

say "--cache: S3 shards fetched whole once, then only their headers asked for"
C="$TMP/cache"
for pass in 1 2; do
  mark=$(wc -l <"$TMP/s3.log")
  run_stoke "${BENCH[@]}" -j 2 "$B/packed/train-{00000..$last}.stoke" --cache "$C" --indices "$TMP/c$pass.idx"
  [ "$rc" -eq 0 ] || fail "cached s3 bench pass $pass exit $rc: $(cat "$TMP/err")"
  same_indices "$TMP/local.idx" "$TMP/c$pass.idx"
  whole=$(tail -n +"$((mark + 1))" "$TMP/s3.log" | awk '$3 == 200' | wc -l)
  want=$((pass == 1 ? n_shards : 0))
  [ "$whole" -eq "$want" ] || fail "pass $pass: $whole whole GETs, expected $want"
done
[ "$(find "$C/remote" -name 'r-*.stoke' | wc -l)" -eq "$n_shards" ] || fail "not $n_shards entries: $(ls "$C/remote")"
ls -a "$C/remote" | grep -q -e "$S3_SECRET" -e stoke-test && fail "a bucket or secret in a file name"

say "the listing went page after page (2 keys a page), signed"
pages=$(grep -c "^GET /$S3_BUCKET/?continuation-token=.*&list-type=2&max-keys=2&prefix=packed%2F 200$" "$TMP/s3.log" || true)
[ "$pages" -ge 1 ] || fail "no continued listing: $(grep list-type "$TMP/s3.log" | head -5)"
grep -q "^GET /$S3_BUCKET/?list-type=2&max-keys=2&prefix=packed%2F 200$" "$TMP/s3.log" ||
  fail "no first listing page: $(grep list-type "$TMP/s3.log" | head -5)"
grep -q "^GET /$S3_BUCKET/packed/train-00000.stoke 206$" "$TMP/s3.log" || fail "no Range GET: $(head -5 "$TMP/s3.log")"
grep -v " 20[06]$" "$TMP/s3.log" && fail "a refused request among the good runs"

say "tar shards over S3 (prefix, brace list): the same batches as local"
run_stoke "${BENCH[@]}" -j 2 "$TMP/local/shard-{0..2}.tar" --indices "$TMP/tar-local.idx"
[ "$rc" -eq 0 ] || fail "local tar exit $rc: $(cat "$TMP/err")"
for spec in "$B/tars/" "$B/tars/shard-{0..2}.tar"; do
  for j in 1 3; do
    for io in 1 8; do
      run_stoke "${BENCH[@]}" -j $j --io-concurrency $io "$spec" --indices "$TMP/tar-s3.idx"
      [ "$rc" -eq 0 ] || fail "s3 tar $spec -j $j exit $rc: $(cat "$TMP/err")"
      same_indices "$TMP/tar-local.idx" "$TMP/tar-s3.idx"
      outputs_clean
    done
  done
done

say "inspect and pack read s3:// prefixes too"
run_stoke inspect --verify "$B/packed/" --json "$TMP/i.json"
[ "$rc" -eq 0 ] || fail "inspect exit $rc: $(cat "$TMP/err")"
grep -q "^verified 12 samples .*0 bad, every CRC-32 checked" "$TMP/out" || fail "inspect: $(cat "$TMP/out")"
outputs_clean "$TMP/i.json"
run_stoke pack "$B/tars/" -o "$TMP/repacked/r" --json "$TMP/pk.json"
[ "$rc" -eq 0 ] || fail "pack exit $rc: $(cat "$TMP/err")"
outputs_clean "$TMP/pk.json"
run_stoke "${BENCH[@]}" -j 1 "$TMP/repacked/r-*.stoke" --indices "$TMP/repacked.idx"
[ "$rc" -eq 0 ] || fail "bench of the repacked shards exit $rc: $(cat "$TMP/err")"
json_check "$TMP/pk.json" 'assert d["samples"] == 12, d'

say "listed keys holding braces are names, not patterns"
# The keys train-{a}.stoke and train-{1..2}.stoke hold shards 0 and 1; a
# listing must read them as they are (before, the listing's keys were
# expanded again: "{a}" was an error and "{1..2}" two keys that are not).
s3_put "$TMP/local/train-00000.stoke" "braces/train-%7Ba%7D.stoke"
s3_put "$TMP/local/train-00001.stoke" "braces/train-%7B1..2%7D.stoke"
run_stoke "${BENCH[@]}" -j 1 "$TMP/local/train-0000{1,0}.stoke" --indices "$TMP/braces-local.idx"
[ "$rc" -eq 0 ] || fail "local pair: $(cat "$TMP/err")"
run_stoke "${BENCH[@]}" -j 2 "$B/braces/" --indices "$TMP/braces.idx" --json "$TMP/braces.json"
[ "$rc" -eq 0 ] || fail "listed keys with braces: $(cat "$TMP/err")"
same_indices "$TMP/braces-local.idx" "$TMP/braces.idx"
json_check "$TMP/braces.json" 'assert d["config"]["samples"] > 0, d["config"]'
run_stoke inspect "$B/braces/" --verify
[ "$rc" -eq 0 ] || fail "inspect --verify of listed keys with braces: $(cat "$TMP/err")"

# Three ways S3 names the bucket's region (tests/remote/s3_server.js): the
# x-amz-bucket-region header on a 400; a 400 AuthorizationHeaderMalformed
# naming it only in its XML body (<Region>); a 301 PermanentRedirect
# naming it only in its body.  Each bucket in a region of its own, so that
# a run served at all was signed for the region that answer named.
for far in "far eu-west-3 400" "far-body ap-south-1 400" "far-moved sa-east-1 301"; do
  set -- $far
  say "a bucket in another region ($1, answered $3): followed where S3 says, then asked there first"
  for f in "$TMP"/local/train-*.stoke; do s3_put "$f" "packed/$(basename "$f")" "$S3_BUCKET-$1" "$2"; done
  start_line=$(($(wc -l <"$TMP/s3.log") + 1))
  run_stoke "${BENCH[@]}" -j 3 --io-concurrency 4 "s3://$S3_BUCKET-$1/packed/" --indices "$TMP/far.idx"
  [ "$rc" -eq 0 ] || fail "a bucket in another region ($1): $(cat "$TMP/err")"
  same_indices "$TMP/local.idx" "$TMP/far.idx"
  tail -n "+$start_line" "$TMP/s3.log" >"$TMP/far.log"
  moved=$(grep -c " $3$" "$TMP/far.log" || true)
  good=$(grep -c " 20[06]$" "$TMP/far.log" || true)
  # Each of the run's two clients pays: the listing's once (its pages come
  # one after another), the source's at most once per request in flight at
  # open (4: they start before the first answer is known); none later.
  [ "$moved" -ge 2 ] || fail "$1: no wrong-region answer: $(head -3 "$TMP/far.log")"
  [ "$moved" -le 5 ] && [ "$good" -ge $((3 * moved)) ] ||
    fail "$1: later requests went to the wrong region again: $moved answers $3, $good good"
  grep -v " 20[06]$\| $3$" "$TMP/far.log" && fail "$1: other answers from the far bucket"
  say "  $moved wrong-region answers, then $good requests served"
done

say "a prefix holding both kinds is an error naming it"
run_stoke "${BENCH[@]}" -j 1 "$B/mixed/"
[ "$rc" -ne 0 ] || fail "a mixed prefix was accepted"
grep -q "s3://stoke-test/mixed/ holds both packed (.stoke) and tar (.tar) shards" "$TMP/err" ||
  fail "mixed: $(cat "$TMP/err")"
run_stoke "${BENCH[@]}" -j 1 "$B/nothing-here/"
[ "$rc" -ne 0 ] && grep -q "s3://stoke-test/nothing-here/: no .stoke or .tar object" "$TMP/err" ||
  fail "empty prefix: $(cat "$TMP/err")"

say "a wrong secret: 403 SignatureDoesNotMatch, not retried, the secret in no output"
wrong=Wr0ngS3cretNeverShown
for spec in "$B/packed/train-00000.stoke" "$B/packed/" "$B/tars/shard-0.tar"; do
  AWS_SECRET_ACCESS_KEY=$wrong run_stoke "${BENCH[@]}" -j 1 "$spec" --json "$TMP/w.json" --trace "$TMP/w.trace"
  [ "$rc" -ne 0 ] || fail "a wrong secret was accepted for $spec"
  ! cat "$TMP/out" "$TMP/err" "$TMP/w.json" "$TMP/w.trace" 2>/dev/null | grep -q -e "$wrong" -e "$S3_TOKEN" ||
    fail "the wrong secret or the token shows in an output of $spec"
  grep -q "GET s3://stoke-test/.*: HTTP 403: SignatureDoesNotMatch after 1 attempt$" "$TMP/err" ||
    fail "wrong secret, $spec: $(cat "$TMP/err")"
  grep -q "127.0.0.1" "$TMP/err" && fail "the endpoint shows instead of the s3:// URL: $(cat "$TMP/err")"
done
AWS_SECRET_ACCESS_KEY=$wrong run_stoke profile -b 4 -j 1 "$B/packed/" --json "$TMP/p.json"
[ "$rc" -ne 0 ] || fail "profile with a wrong secret succeeded"
! cat "$TMP/out" "$TMP/err" "$TMP/p.json" 2>/dev/null | grep -q -e "$wrong" -e "$S3_TOKEN" ||
  fail "the secret shows in profile's output"

say "a missing key: 404 NoSuchKey, not retried"
run_stoke "${BENCH[@]}" -j 1 "$B/packed/train-99999.stoke"
[ "$rc" -ne 0 ] || fail "a missing key was found"
grep -q "GET s3://stoke-test/packed/train-99999.stoke bytes 0-63: HTTP 404: NoSuchKey after 1 attempt$" "$TMP/err" ||
  fail "missing key: $(cat "$TMP/err")"

say "no credentials: unsigned requests, which this private bucket refuses"
env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN \
  "$STOKE" "${BENCH[@]}" -j 1 "$B/packed/train-00000.stoke" >"$TMP/out" 2>"$TMP/err" && fail "unsigned read succeeded"
grep -q "HTTP 403: AccessDenied after 1 attempt$" "$TMP/err" || fail "unsigned: $(cat "$TMP/err")"
AWS_SESSION_TOKEN=WrongToken run_stoke "${BENCH[@]}" -j 1 "$B/packed/train-00000.stoke"
[ "$rc" -ne 0 ] && grep -q "HTTP 403: InvalidToken" "$TMP/err" || fail "token not sent as given: $(cat "$TMP/err")"

say "the keys, region and endpoint from a profile of the shared files, as the AWS CLI reads them"
mkdir -p "$TMP/aws"
printf '[default]\naws_access_key_id = NOTTHIS\naws_secret_access_key = NotThis\n[ci]\naws_access_key_id = %s\naws_secret_access_key = %s\naws_session_token = %s\n' \
  "$S3_KEY_ID" "$S3_SECRET" "$S3_TOKEN" >"$TMP/aws/credentials"
printf '[profile ci]\nregion = us-east-1\nendpoint_url = %s\n[profile assumed]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = ci\n' \
  "$S3_ENDPOINT" >"$TMP/aws/config"
profile_env=(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_ENDPOINT_URL -u AWS_REGION
  AWS_SHARED_CREDENTIALS_FILE="$TMP/aws/credentials" AWS_CONFIG_FILE="$TMP/aws/config")
"${profile_env[@]}" AWS_PROFILE=ci "$STOKE" "${BENCH[@]}" -j 2 "$B/packed/" --indices "$TMP/profile.idx" \
  --json "$TMP/profile.json" >"$TMP/out" 2>"$TMP/err" || fail "profile ci: $(cat "$TMP/err")"
same_indices "$TMP/local.idx" "$TMP/profile.idx"
outputs_clean "$TMP/profile.json"
# The default profile holds other keys: refused by the server, so the
# profile named in AWS_PROFILE was the one read.
"${profile_env[@]}" AWS_ENDPOINT_URL="$S3_ENDPOINT" "$STOKE" "${BENCH[@]}" -j 1 "$B/packed/train-00000.stoke" \
  >"$TMP/out" 2>"$TMP/err" && fail "the default profile's keys were accepted"
grep -q "HTTP 403: InvalidAccessKeyId" "$TMP/err" ||
  fail "default profile: $(cat "$TMP/err")"
"${profile_env[@]}" AWS_PROFILE=nosuch "$STOKE" "${BENCH[@]}" -j 1 "$B/packed/" >"$TMP/out" 2>"$TMP/err" &&
  fail "a missing profile was accepted"
grep -q 's3: the profile "nosuch" (AWS_PROFILE) is in neither' "$TMP/err" || fail "nosuch: $(cat "$TMP/err")"
"${profile_env[@]}" AWS_PROFILE=assumed "$STOKE" "${BENCH[@]}" -j 1 "$B/packed/" >"$TMP/out" 2>"$TMP/err" &&
  fail "a role profile was read unsigned"
grep -q "takes its credentials from role_arn, which stoke does not follow" "$TMP/err" || fail "role: $(cat "$TMP/err")"
outputs_clean

say "a key id without its secret is refused before any request"
env -u AWS_SECRET_ACCESS_KEY "$STOKE" "${BENCH[@]}" -j 1 "$B/packed/" >"$TMP/out" 2>"$TMP/err" && fail "half credentials accepted"
grep -q "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY come together" "$TMP/err" || fail "half: $(cat "$TMP/err")"

say "the secret and the token were in no output of the whole test"
outputs_clean "$TMP"/*.json "$TMP"/*.trace
say "ok"
