#!/usr/bin/env bash
# Configure and build into BUILD_DIR (default build/).  Extra arguments go
# to cmake's configure step, e.g. -DSTOKE_SANITIZE=thread.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
