#!/usr/bin/env bash
# The CLI and Python tests N times, each run beside a CPU hog (one busy
# process per online core), so that a test that passes only on a quiet
# machine shows itself.  Every run must pass: a failure stops the loop and
# exits 1, naming the run and the failing tests.  Builds first, as
# scripts/test.sh does.
#   scripts/stress-tests.sh [N]      (default 10; CI runs 2)
# BUILD_DIR (default build) and extra cmake arguments as for scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10}
[[ "$n" =~ ^[0-9]+$ && "$n" -ge 1 ]] || { echo "usage: $0 [N >= 1]" >&2; exit 2; }
shift || true
dir=${BUILD_DIR:-build}
scripts/deps.sh
BUILD_DIR=$dir scripts/build.sh -DSTOKE_WERROR=ON "$@"

hogs=()
stop_hogs() {
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop_hogs EXIT
cores=$(nproc)
for ((i = 0; i < cores; i++)); do
  # A busy loop in its own shell: the hog has no end of its own, the trap
  # ends it.
  bash -c 'while :; do :; done' &
  hogs+=($!)
done
echo "stress: $cores busy processes beside the tests (load $(cut -d' ' -f1-3 /proc/loadavg))"

passed=0
for ((run = 1; run <= n; run++)); do
  log=$(mktemp /tmp/stoke-stress.XXXXXX)
  start=$(date +%s)
  if (cd "$dir" && ctest -R '^(cli|python)/' -j2 --output-on-failure) >"$log" 2>&1; then
    passed=$((passed + 1))
    echo "stress: run $run/$n passed ($(( $(date +%s) - start )) s, $(grep -Eo '[0-9]+ tests passed|out of [0-9]+' "$log" | tail -1))"
    rm -f "$log"
  else
    echo "stress: run $run/$n FAILED ($(( $(date +%s) - start )) s); the failing tests:"
    sed -n '/The following tests FAILED/,$p' "$log"
    # CI keeps only what is printed here, not the log: each failing test's
    # own output (its last 150 lines), so that a flake can be diagnosed.
    awk '/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: .*\*\*\*/ { keep = 1; n = 0; print "---- " $0; next }
         /^ *[0-9]+\/[0-9]+ Test +#|^ +Start +[0-9]+:|tests passed, [0-9]+ tests failed/ { keep = 0 }
         keep && n++ < 150' "$log"
    echo "stress: full log in $log"
    echo "stress: $passed passed, 1 failed"
    exit 1
  fi
done
echo "stress: $passed passed, 0 failed"
