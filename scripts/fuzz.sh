#!/usr/bin/env bash
# Run every libFuzzer harness (tests/fuzz/fuzz_*.c) for a bounded time,
# under ASan+UBSan, starting from its checked-in corpus.
#
#   scripts/fuzz.sh [SECONDS_EACH] [--merge] [--jobs N] [HARNESS...]
#
# Prints per harness the executions, the coverage (libFuzzer's cov: edges
# and ft: features) and the corpus size from libFuzzer's last line.  Exits 1
# when any harness crashed or broke a property; the input is kept under
# build-fuzz/artifacts/ (add it to tests/fuzz/corpus/<harness>/, then fix).
# --merge replaces each tests/fuzz/corpus/<harness>/ by the minimal subset
# (libFuzzer -merge=1) of it and of what the run found that keeps the
# coverage.  --merge-only merges what an earlier run left in build-fuzz/work/
# without fuzzing again.  --jobs N runs N harnesses at once.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=15 merge=0 jobs=1 fuzz=1 names=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --merge) merge=1 ;;
    --merge-only) merge=1 fuzz=0 ;;
    --jobs) jobs=$2; shift ;;
    [0-9]*) secs=$1 ;;
    *) names+=("$1") ;;
  esac
  shift
done
dir=build-fuzz
CC=${FUZZ_CC:-clang-14} cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSTOKE_BUILD_FUZZ=ON -DSTOKE_SANITIZE=address,undefined >/dev/null
if [[ ${#names[@]} -eq 0 ]]; then
  for f in tests/fuzz/fuzz_*.c; do n=${f##*/fuzz_}; names+=("${n%.c}"); done
fi
cmake --build "$dir" -j2 --target "${names[@]/#/fuzz_}" >/dev/null
mkdir -p "$dir/artifacts" "$dir/work" "$dir/logs"

run_one() {
  local h=$1 work="$dir/work/$1"
  rm -rf "$work" && mkdir -p "$work"
  # New inputs go to the work folder; the checked-in corpus is read only.
  "$dir/tests/fuzz/fuzz_$h" -max_total_time="$secs" -timeout=10 \
    -rss_limit_mb=2048 -close_fd_mask=3 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/$h-" "$work" "tests/fuzz/corpus/$h" \
    >"$dir/logs/$h.log" 2>&1
}

fail=0 pids=() running=()
for h in "${names[@]}"; do
  [[ $fuzz -eq 1 ]] || break
  run_one "$h" & pids+=($!) running+=("$h")
  if [[ ${#pids[@]} -ge $jobs ]]; then
    wait "${pids[0]}" || fail=1
    pids=("${pids[@]:1}") running=("${running[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || fail=1; done

printf '%-10s %12s %8s %8s %8s\n' harness execs cov ft corpus
for h in "${names[@]}"; do
  [[ $fuzz -eq 1 ]] || break
  log="$dir/logs/$h.log"
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo '?')
  ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo '?')
  corp=$(grep -o 'corp: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo '?')
  printf '%-10s %12s %8s %8s %8s\n' "$h" "$execs" "$cov" "$ft" "$corp"
  if grep -qE 'ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|property failed|runtime error' "$log"; then
    echo "fuzz: $h failed; see $log and $dir/artifacts/" >&2
    fail=1
  fi
done

if [[ $merge -eq 1 && $fail -eq 0 ]]; then
  for h in "${names[@]}"; do
    new="$dir/work/$h.merged" && rm -rf "$new" && mkdir -p "$new"
    "$dir/tests/fuzz/fuzz_$h" -merge=1 -close_fd_mask=3 -rss_limit_mb=2048 \
      "$new" "tests/fuzz/corpus/$h" "$dir/work/$h" >"$dir/logs/$h.merge.log" 2>&1
    # Crashers found earlier are kept whatever their coverage.
    cp tests/fuzz/corpus/"$h"/crash-* "$new"/ 2>/dev/null || true
    rm -rf "tests/fuzz/corpus/$h" && mv "$new" "tests/fuzz/corpus/$h"
    echo "fuzz: corpus/$h: $(ls "tests/fuzz/corpus/$h" | wc -l) files"
  done
fi
exit $fail
