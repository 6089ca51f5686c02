#!/usr/bin/env bash
# The main job: install what is missing, build, and run `stoke demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
exec build/stoke demo "$@"
