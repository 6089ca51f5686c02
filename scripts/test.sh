#!/usr/bin/env bash
# Every test: install what is missing, build with warnings as errors, run
# CTest (unit and CLI tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
BUILD_DIR=${BUILD_DIR:-build} scripts/build.sh -DSTOKE_WERROR=ON "$@"
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j2
