#!/usr/bin/env bash
# Files in shared places: what stoke makes (the --cache folder and shards,
# the quarantine file, the --save-state file) is 0700/0600, and what it
# finds there is refused, naming path, owner and mode, when another user
# owns it or may write it.  Run as root with a second, unprivileged user
# made here (removed at the end, also on failure), who tries both attacks:
# reading the victim's cache, and planting a cache, a quarantine or a state
# under the names the victim then uses.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || { echo "not root: no second user"; exit 77; }
command -v useradd >/dev/null && command -v userdel >/dev/null &&
  command -v runuser >/dev/null || { echo "no useradd/runuser"; exit 77; }
"$PY" -c 'import PIL' 2>/dev/null || { echo "python3-pil missing"; exit 77; }

U="stoke-t0901-$$"
SHARED=$(mktemp -d /tmp/stoke-shared.XXXXXX)
cleanup() {
  userdel "$U" >/dev/null 2>&1 || true
  rm -rf "$SHARED" "$TMP"
}
trap cleanup EXIT
useradd --no-create-home --shell /usr/sbin/nologin "$U" ||
  { echo "useradd failed"; exit 77; }
UID2=$(id -u "$U")
chmod 1777 "$SHARED" # as /tmp: anyone may add entries
# The tool and a dataset both users can read.
cp "$STOKE" "$SHARED/stoke" && chmod 0755 "$SHARED/stoke"
mkdir -m 0755 "$SHARED/data"
make_jpeg_folder "$SHARED/data/train" 4 ant bee
chmod -R a+rX "$SHARED/data"
as_other() { runuser -u "$U" -- "$@"; }
mode() { stat -c %a "$1"; }
T="center-crop=32,chw,u8"
BENCH="bench $SHARED/data/train --transform $T -b 4 -j 1 --no-warmup -q"

say "the victim's cache is 0700 folders and 0600 shards"
run_stoke $BENCH --epochs 2 --cache "$SHARED/vcache"
[ "$rc" -eq 0 ] || fail "bench --cache exit $rc: $(cat "$TMP/err")"
[ "$(mode "$SHARED/vcache")" = 700 ] || fail "cache folder $(mode "$SHARED/vcache")"
for d in "$SHARED"/vcache/*; do
  [ "$(mode "$d")" = 700 ] || fail "key folder $d: $(mode "$d")"
done
n=0
for s in "$SHARED"/vcache/*/*.stoke; do
  [ "$(mode "$s")" = 600 ] || fail "shard $s: $(mode "$s")"
  n=$((n + 1))
done
[ "$n" -ge 1 ] || fail "no shard written"

say "attack 1: the other user cannot read the victim's cache"
as_other ls "$SHARED/vcache" >/dev/null 2>&1 && fail "$U lists the cache"
as_other cat "$SHARED"/vcache/*/*.stoke >/dev/null 2>&1 &&
  fail "$U reads a shard"
as_other "$SHARED/stoke" $BENCH --cache "$SHARED/vcache" \
  >"$TMP/o2" 2>"$TMP/e2" && fail "$U ran with the victim's cache"
true

say "attack 2: a cache the other user made (same key) is refused"
as_other "$SHARED/stoke" $BENCH --cache "$SHARED/planted" >"$TMP/o2" 2>"$TMP/e2" ||
  fail "$U's own bench --cache: $(cat "$TMP/e2")"
# Opened up, as a planter would, so that the victim could read it.
chmod -R go+rX "$SHARED/planted"
run_stoke $BENCH --cache "$SHARED/planted"
[ "$rc" -ne 0 ] || fail "the victim used a planted cache"
grep -q "$SHARED/planted: owned by uid $UID2, not by you (uid 0), mode 0755" "$TMP/err" ||
  fail "refusal does not name path, owner and mode: $(cat "$TMP/err")"
check_messages

say "a planted key folder inside the victim's own cache folder is refused"
mkdir -m 0700 "$SHARED/mixed"
key=$(basename "$(ls -d "$SHARED"/planted/*/ | head -1)")
cp -a "$SHARED/planted/$key" "$SHARED/mixed/$key"
run_stoke $BENCH --cache "$SHARED/mixed"
[ "$rc" -ne 0 ] || fail "the victim used a planted key folder"
grep -q "$SHARED/mixed/$key: owned by uid $UID2" "$TMP/err" ||
  fail "key folder refusal: $(cat "$TMP/err")"
# The victim's own key folder with another's shard in it.
rm -rf "$SHARED/mixed/$key"
mkdir -m 0700 "$SHARED/mixed/$key"
cp -a "$SHARED"/planted/"$key"/*.stoke "$SHARED/mixed/$key/"
run_stoke $BENCH --cache "$SHARED/mixed"
[ "$rc" -ne 0 ] || fail "the victim read a planted shard"
grep -q "owned by uid $UID2" "$TMP/err" || fail "shard refusal: $(cat "$TMP/err")"

say "a world-writable cache folder is refused (as ssh's StrictModes)"
run_stoke $BENCH --cache "$SHARED"
[ "$rc" -ne 0 ] || fail "a 1777 cache folder accepted"
grep -q "$SHARED: owner uid 0, mode 1777 lets group or others write it" "$TMP/err" ||
  fail "mode refusal: $(cat "$TMP/err")"

Q="--on-error replace --quarantine"
say "the victim's quarantine and state files are 0600"
run_stoke $BENCH $Q "$SHARED/vq.txt" --save-state "$SHARED/vs.bin"
[ "$rc" -eq 0 ] || fail "bench --quarantine --save-state: $(cat "$TMP/err")"
[ "$(mode "$SHARED/vq.txt")" = 600 ] || fail "quarantine $(mode "$SHARED/vq.txt")"
[ "$(mode "$SHARED/vs.bin")" = 600 ] || fail "state $(mode "$SHARED/vs.bin")"
as_other cat "$SHARED/vq.txt" >/dev/null 2>&1 && fail "$U reads the quarantine"
as_other cat "$SHARED/vs.bin" >/dev/null 2>&1 && fail "$U reads the state"

say "attack 2 again: a planted quarantine and a planted state are refused"
as_other "$SHARED/stoke" $BENCH $Q "$SHARED/pq.txt" --save-state "$SHARED/ps.bin" \
  >"$TMP/o2" 2>"$TMP/e2" || fail "$U's bench: $(cat "$TMP/e2")"
run_stoke $BENCH $Q "$SHARED/pq.txt"
[ "$rc" -ne 0 ] || fail "the victim used a planted quarantine"
grep -q "$SHARED/pq.txt: owned by uid $UID2" "$TMP/err" ||
  fail "quarantine refusal: $(cat "$TMP/err")"
run_stoke $BENCH --resume "$SHARED/ps.bin"
[ "$rc" -ne 0 ] || fail "the victim resumed from a planted state"
grep -q "$SHARED/ps.bin: owned by uid $UID2" "$TMP/err" ||
  fail "state refusal: $(cat "$TMP/err")"
check_messages

say "a link planted under the quarantine's name is refused, never followed"
echo precious >"$TMP/victim-file"
as_other ln -s "$TMP/victim-file" "$SHARED/lq.txt"
run_stoke $BENCH $Q "$SHARED/lq.txt"
[ "$rc" -ne 0 ] || fail "the victim followed a planted link"
[ "$(cat "$TMP/victim-file")" = precious ] || fail "the link's target was written"
echo ok
