#!/bin/bash
# Failures at run time exit 1 with "stoke: <message>"; an unwritable --json
# path fails before anything runs.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

say "--json into a missing directory: exit 1, names the path"
run_stoke bench --synthetic tensor --samples 8 --json "$TMP/no/such/dir.json"
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1: $(cat "$TMP/err")"
grep -q "^stoke: cannot write '$TMP/no/such/dir.json'" "$TMP/err" ||
  fail "message: $(cat "$TMP/err")"
check_messages

say "a memory budget of 1KiB is too small: exit 1, library message"
run_stoke bench --synthetic tensor --samples 64 -b 8 --mem-budget 1KiB \
  --json "$TMP/b.json"
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1: $(cat "$TMP/err")"
grep -q '^stoke: .' "$TMP/err" || fail "no message: $(cat "$TMP/err")"
[ ! -e "$TMP/b.json" ] || fail "a failed run left its --json file"
[ ! -s "$TMP/out" ] || fail "wrote to stdout: $(cat "$TMP/out")"
check_messages

say "a sample slower than --timeout: exit 1"
run_stoke bench --synthetic sleep:300ms --samples 4 -b 2 -j 1 --timeout 50 \
  --no-warmup --epochs 1
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1: $(cat "$TMP/err")"
grep -q '^stoke: .' "$TMP/err" || fail "no message: $(cat "$TMP/err")"
check_messages
echo ok
