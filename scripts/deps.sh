#!/usr/bin/env bash
# Install the Debian packages stoke needs, only those missing.
#   scripts/deps.sh          build and test dependencies
#   scripts/deps.sh --bench  plus the references the benchmarks compare with
set -euo pipefail

# The Python tests compare stoke with torchvision: they need Debian's
# python3-torchvision (and torch, numpy, PIL, pytest) for /usr/bin/python3.
# The Python module (python/) is built against python3-dev's headers and
# Debian's DLPack header (libdlpack-dev), the ABI torch 1.13 speaks.
pkgs=(build-essential cmake pkg-config libcmocka-dev libcjson-dev
      libjpeg62-turbo-dev libspng-dev python3 python3-dev libdlpack-dev
      libcurl4-openssl-dev  # remote shards over HTTP(S) (src/storage/http.c)
      nginx-light           # the remote tests' HTTP(S) server (tests/remote)
      python3-pytest python3-numpy python3-pil python3-torch
      python3-torchvision
      python3-venv python3-pip python3-setuptools python3-wheel python3-build # pip install ., the wheel
      chromium   # the report's rendering test
      tmux       # stoke top's terminal test (tests/cli/t0902-top-tmux.sh)
      clang-14 libclang-rt-14-dev  # the fuzzers (scripts/fuzz.sh, .ci/run)
      prometheus)  # promtool checks the --metrics-file text (t0060)
if [[ "${1:-}" == "--bench" ]]; then
  # Real photographs for the image benchmark's corpus.
  pkgs+=(plasma-workspace-wallpapers)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "stoke: installing ${missing[*]}" >&2
SUDO=""
[[ $(id -u) -eq 0 ]] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
