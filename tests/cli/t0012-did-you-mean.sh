#!/bin/bash
# A mistyped command or option gets git's "did you mean": the closest known
# name under the error, and none when nothing is close.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
S=(--synthetic tensor --samples 8 --shape 2 -b 4)

suggests() { # WANT ARGS...: a usage error whose suggestion is WANT
  want=$1; shift
  say "stoke $* suggests '$want'"
  run_stoke "$@"
  [ "$rc" -eq 2 ] || fail "stoke $*: exit $rc, expected 2"
  grep -q '^The most similar' "$TMP/err" || fail "stoke $*: no suggestion: $(cat "$TMP/err")"
  grep -qx "	$want" "$TMP/err" || fail "stoke $*: suggests $(grep '^	' "$TMP/err"), not '$want'"
  check_messages
}
suggests_nothing() {
  say "stoke $* suggests nothing"
  run_stoke "$@"
  [ "$rc" -eq 2 ] || fail "stoke $*: exit $rc, expected 2"
  grep -q '^The most similar' "$TMP/err" && fail "stoke $*: suggested $(cat "$TMP/err")"
  return 0
}

suggests bench benh
suggests bench bnech            # two letters swapped: one edit
suggests profile profil
suggests tune help tnue          # stoke help <mistyped>
suggests --workers bench "${S[@]}" --wokers 2
suggests --batch-size bench "${S[@]}" --batch-szie 4
suggests --json profile "${S[@]}" --jsno x.json
suggests --verify inspect --verfy x
suggests_nothing frobnicate
suggests_nothing bench "${S[@]}" --frobnicate
grep -q "unknown option '--frobnicate'" "$TMP/err" || fail "the error itself changed"

# (No two commands or options of today's tables are at the same distance
# from a one-edit typo, so the plural "are" form has no CLI case here.)
suggests --seed bench "${S[@]}" --seeds 1
echo "ok"
