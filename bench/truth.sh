#!/bin/bash
# truth.sh — build stoke and run the diagnosis truth grid (bench/truth.py).
#   bench/truth.sh [--quick] [--out FILE.json]
# About 1.5-2 minutes for the whole grid on 2 cores (25 s with --quick).
# The truth reads the realised sample costs from libstoke.so (ctypes).
# Other work on the machine adds noise: the load average is printed.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${STOKE_BUILD:-$ROOT/build-diag}
cmake -S "$ROOT" -B "$BUILD" >/dev/null
cmake --build "$BUILD" -j2 --target stoke-cli stoke >/dev/null
exec /usr/bin/python3 "$ROOT/bench/truth.py" --stoke "$BUILD/stoke" \
  --lib "$BUILD/libstoke.so" "$@"
