#!/bin/bash
# stoke --version, stoke help, stoke help <cmd>, stoke <cmd> --help.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

say "--version prints 'stoke X.Y.Z' and exits 0"
run_stoke --version
[ "$rc" -eq 0 ] || fail "--version: exit $rc"
grep -Eq '^stoke [0-9]+\.[0-9]+\.[0-9]+$' "$TMP/out" ||
  fail "--version printed: $(cat "$TMP/out")"
[ ! -s "$TMP/err" ] || fail "--version wrote to stderr"

say "help lists the commands on stdout"
run_stoke help
[ "$rc" -eq 0 ] || fail "help: exit $rc"
grep -q '^  bench ' "$TMP/out" || fail "help does not list bench"
grep -q '^  demo ' "$TMP/out" || fail "help does not list demo"

say "help bench and bench --help print the same options"
run_stoke help bench
[ "$rc" -eq 0 ] || fail "help bench: exit $rc"
cp "$TMP/out" "$TMP/help-bench"
for opt in --synthetic --samples --shape --cost-dist --classes --batch-size \
           --workers --prefetch --shuffle --seed --drop-last --rank --world \
           --out-of-order --timeout --mem-budget --epochs --no-warmup \
           --compute --json --quiet; do
  grep -q -e "$opt" "$TMP/help-bench" || fail "help bench lacks $opt"
done
run_stoke bench --help
[ "$rc" -eq 0 ] || fail "bench --help: exit $rc"
cmp -s "$TMP/out" "$TMP/help-bench" ||
  fail "bench --help differs from help bench"

say "help demo"
run_stoke help demo
[ "$rc" -eq 0 ] || fail "help demo: exit $rc"
grep -q -e '--json' "$TMP/out" || fail "help demo lacks --json"

say "no command: usage on stderr, exit 2"
run_stoke
[ "$rc" -eq 2 ] || fail "no command: exit $rc"
grep -q '^usage: stoke' "$TMP/err" || fail "no command: no usage on stderr"
[ ! -s "$TMP/out" ] || fail "no command: wrote to stdout"

expect_usage "'frobnicate' is not a stoke command" frobnicate
expect_usage "'--frobnicate'" --frobnicate
expect_usage "'nope' is not a stoke command" help nope
echo ok
