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
      zlib1g-dev            # CRC-32 of checked streams (src/core/crc.c)
      libcurl4-openssl-dev  # remote shards over HTTP(S) (src/storage/http.c)
      nginx-light           # the remote tests' HTTP(S) server (tests/remote)
      curl                  # the S3 tests' uploads (tests/remote/servers.sh)
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

# s3rver: the S3 tests' server (tests/remote/s3_server.js).  Debian has no
# S3 server package (radosgw needs a Ceph cluster) and minio is in neither
# Debian nor npm; s3rver is a small Node server, pinned, installed into a
# fixed folder outside the repo, only when it is missing.
S3RVER_DIR=/usr/local/lib/stoke-test-s3rver
S3RVER_VERSION=3.7.1
install_s3rver() {
  [[ -f "$S3RVER_DIR/node_modules/s3rver/package.json" ]] &&
    grep -q "\"version\": \"$S3RVER_VERSION\"" "$S3RVER_DIR/node_modules/s3rver/package.json" &&
    return 0
  echo "stoke: installing s3rver@$S3RVER_VERSION into $S3RVER_DIR" >&2
  $SUDO mkdir -p "$S3RVER_DIR"
  # The registry is the one download here: when it cannot be reached, say
  # so loudly and go on, so the build and every other test still run (the
  # S3 tests then report themselves skipped, exit 77), instead of failing
  # the whole command on the network.
  $SUDO npm install --prefix "$S3RVER_DIR" --no-audit --no-fund \
    "s3rver@$S3RVER_VERSION" ||
    echo "stoke: WARNING: npm could not install s3rver; the S3 tests" \
      "(cli/t1002-s3, python/test_stoke_s3) will be skipped" >&2
}

SUDO=""
[[ $(id -u) -eq 0 ]] || SUDO="sudo"

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
# Node and npm for s3rver: by command, not by package, so that a machine
# with another Node (NodeSource's bundles npm) keeps it.
{ command -v node && command -v npm; } >/dev/null 2>&1 || missing+=(nodejs npm)
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "stoke: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
install_s3rver
