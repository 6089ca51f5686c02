#!/bin/bash
# truth.sh — build stoke and run the diagnosis truth grid (bench/truth.py).
#   bench/truth.sh [--quick] [--out FILE.json]
# About 3-4 minutes for the whole grid on 2 cores.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${STOKE_BUILD:-$ROOT/build-diag}
cmake -S "$ROOT" -B "$BUILD" >/dev/null
cmake --build "$BUILD" -j2 --target stoke-cli >/dev/null
exec /usr/bin/python3 "$ROOT/bench/truth.py" --stoke "$BUILD/stoke" "$@"
