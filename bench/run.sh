#!/usr/bin/env bash
# run.sh [NAME...] - build stoke (Release) if needed, then run the named
# benchmarks (default: all) side by side with PyTorch.  Each prints a table
# and writes bench/out/<NAME>.json; raw per-run JSON is in bench/out/raw/.
#
#   bench/run.sh                 all: seed000 seed003 overhead images python dataloader
#   bench/run.sh seed000         one
#   STOKE_BUILD_DIR=build-bench bench/run.sh
#
# Environment: STOKE_BUILD_DIR (default build/), BENCH_PYTHON (default
# /usr/bin/python3, Debian's python3-torch), BENCH_NO_TORCH=1, and the
# per-benchmark knobs listed at the top of each bench/<NAME>.sh.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$BENCH_DIR")
ALL="seed000 seed003 overhead images python dataloader"

case "${1:-}" in
-h | --help)
  sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"
  exit 0
  ;;
esac

names=("$@")
[ ${#names[@]} -eq 0 ] && read -r -a names <<<"$ALL"
for n in "${names[@]}"; do
  if [ ! -f "$BENCH_DIR/$n.sh" ] || [[ " $ALL " != *" $n "* ]]; then
    echo "bench: unknown benchmark '$n' (have: $ALL)" >&2
    exit 2
  fi
done

export STOKE_BUILD_DIR=${STOKE_BUILD_DIR:-$ROOT/build}
case "$STOKE_BUILD_DIR" in /*) ;; *) STOKE_BUILD_DIR=$ROOT/$STOKE_BUILD_DIR ;; esac
export STOKE=$STOKE_BUILD_DIR/stoke
export BENCH_PYTHON=${BENCH_PYTHON:-/usr/bin/python3}
export BENCH_OUT=${BENCH_OUT:-$BENCH_DIR/out}

# ---- build (incremental: a no-op when up to date) ---------------------------
if [ "${BENCH_NO_STOKE:-0}" != 1 ]; then
  if [ ! -f "$STOKE_BUILD_DIR/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$STOKE_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >&2
  fi
  bt=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$STOKE_BUILD_DIR/CMakeCache.txt")
  san=$(sed -n 's/^STOKE_SANITIZE:[A-Z]*=//p' "$STOKE_BUILD_DIR/CMakeCache.txt")
  if [ "$bt" != Release ] || [ -n "$san" ]; then
    extra=""
    [ -n "$san" ] && extra=" with sanitizers '$san'"
    echo "bench: warning: $STOKE_BUILD_DIR is build type '$bt'$extra -" \
      "numbers are not Release numbers;" \
      "use STOKE_BUILD_DIR=build-release for a separate Release build" >&2
  fi
  cmake --build "$STOKE_BUILD_DIR" -j2 --target stoke-cli >&2
fi

# ---- run --------------------------------------------------------------------
mkdir -p "$BENCH_OUT"
failed=()
for n in "${names[@]}"; do
  echo "==== $n" >&2
  if ! bash "$BENCH_DIR/$n.sh"; then
    failed+=("$n")
  fi
  echo
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "bench: failed: ${failed[*]}" >&2
  exit 1
fi
