#!/bin/bash
# stoke help --man and --completion bash come from the help texts: every
# option that `stoke help <cmd>` lists is in that command's section of the
# man page and in its completion list, and nothing else is completed.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

say "help --man is a roff page with a section per command"
run_stoke help --man
[ "$rc" -eq 0 ] || fail "help --man: exit $rc: $(cat "$TMP/err")"
cp "$TMP/out" "$TMP/man"
grep -q '^\.TH STOKE 1 ' "$TMP/man" || fail "no .TH STOKE 1 header"
version=$("$STOKE" --version | sed 's/^stoke //')
grep -q "\"stoke $version\"" "$TMP/man" || fail "the man page does not carry version $version"

say "help --completion bash loads in bash and registers _stoke"
run_stoke help --completion bash
[ "$rc" -eq 0 ] || fail "help --completion bash: exit $rc"
cp "$TMP/out" "$TMP/completion"
bash -c ". '$TMP/completion' && complete -p stoke" | grep -q -- '-F _stoke stoke' \
  || fail "the completion does not register _stoke"
expect_usage "'zsh' is not a known shell" help --completion zsh

# The commands, from `stoke help`.
"$STOKE" help | sed -n 's/^  \([a-z]*\) .*/\1/p' > "$TMP/commands"
[ "$(wc -l < "$TMP/commands")" -ge 8 ] || fail "help lists $(wc -l < "$TMP/commands") commands"

# complete_words CMD WORD: what bash completes for `stoke CMD WORD`.
complete_words() {
  bash -c ". '$TMP/completion'; COMP_WORDS=(stoke $1 $2); COMP_CWORD=2; _stoke;
           printf '%s\n' \"\${COMPREPLY[@]}\""
}

while read -r cmd; do
  say "stoke $cmd: every option of its help in the man page and the completion"
  "$STOKE" help "$cmd" > "$TMP/help-$cmd"
  # The option lines' flags: "  -b, --batch-size N   ..." (and the lists of
  # another command's options, "(--a, --b, ...)").
  grep -oE '(^|[ (,])--?[a-zA-Z][a-zA-Z0-9-]*' "$TMP/help-$cmd" \
    | sed 's/^[ (,]//' | grep -E '^--[a-z]|^-[a-zA-Z]$' | sort -u > "$TMP/flags-$cmd"
  [ -s "$TMP/flags-$cmd" ] || fail "no options found in 'stoke help $cmd'"
  # The command's section of the man page: from .SH "STOKE CMD" to the next .SH.
  upper=$(echo "$cmd" | tr a-z A-Z)
  sed -n "/^\.SH \"STOKE $upper\"/,/^\.SH /p" "$TMP/man" | sed 's/\\-/-/g' > "$TMP/man-$cmd"
  [ -s "$TMP/man-$cmd" ] || fail "the man page has no section for $cmd"
  complete_words "$cmd" "-" > "$TMP/comp-$cmd"
  while read -r flag; do
    # Flags the prose names for another command are not this one's.
    grep -qE "^  +$flag[ ,=]|^  +-[a-zA-Z], $flag[ ,=]|^  +-[a-zA-Z], $flag\$|^  +$flag\$" \
      "$TMP/help-$cmd" || grep -qE "as 'stoke help" "$TMP/help-$cmd" || continue
    grep -qF -- "$flag" "$TMP/man-$cmd" || fail "man page, stoke $cmd: no $flag"
  done < "$TMP/flags-$cmd"
  # Every option line's long flag is completed.
  grep -oE '^ {2,4}(-[a-zA-Z], )?--[a-z][a-z0-9-]*' "$TMP/help-$cmd" \
    | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u > "$TMP/optlines-$cmd"
  while read -r flag; do
    grep -qx -- "$flag" "$TMP/comp-$cmd" || fail "completion, stoke $cmd: no $flag"
  done < "$TMP/optlines-$cmd"
  # And nothing is completed that the help does not name.
  while read -r word; do
    grep -qF -- "$word" "$TMP/help-$cmd" || [ "$word" = --help ] \
      || fail "completion, stoke $cmd: $word is not in its help"
  done < "$TMP/comp-$cmd"
done < "$TMP/commands"

say "the completion completes commands and a prefix"
bash -c ". '$TMP/completion'; COMP_WORDS=(stoke be); COMP_CWORD=1; _stoke;
         printf '%s\n' \"\${COMPREPLY[@]}\"" | grep -qx bench || fail "'stoke be' does not complete to bench"
complete_words bench --work | grep -qx -- --workers || fail "'stoke bench --work' does not complete"
echo "ok"
