#!/usr/bin/env bash
# The install, consumed as a user would: `cmake --install BUILD --prefix P`,
# then a C program built through pkg-config and through
# find_package(stoke CONFIG), and the Python package imported from P; then
# the whole prefix moved elsewhere and the same again (relocatable).
#   test_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/stoke-install.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$work/p1" >/dev/null

check_prefix() {
  local p=$1
  export PKG_CONFIG_PATH=$p/lib/pkgconfig
  local cflags libs
  cflags=$(pkg-config --cflags stoke)
  libs=$(pkg-config --libs stoke)
  case "$cflags" in *"$p/"*) ;; *) fail "pkg-config --cflags says '$cflags', not under $p" ;; esac
  case "$libs" in *"$p/"*) ;; *) fail "pkg-config --libs says '$libs', not under $p" ;; esac
  local want
  want=$(sed -n 's/^project(stoke VERSION \([0-9.]*\).*/\1/p' "$here/../../CMakeLists.txt")
  [[ "$(pkg-config --modversion stoke)" == "$want" ]] \
    || fail "pkg-config --modversion says $(pkg-config --modversion stoke), not $want"
  # shellcheck disable=SC2086
  cc -o "$work/pc_consumer" "$here/consumer.c" $cflags $libs
  LD_LIBRARY_PATH=$p/lib "$work/pc_consumer" | grep -q "100 samples" \
    || fail "the pkg-config build did not run"
  # Static: the archive and its private dependencies from --static.
  # shellcheck disable=SC2086
  cc -o "$work/pc_static" "$here/consumer.c" $cflags "$p/lib/libstoke.a" \
    $(pkg-config --libs-only-other --libs-only-l --static stoke | sed 's/-lstoke//')
  "$work/pc_static" | grep -q "100 samples" || fail "the static pkg-config build"

  rm -rf "$work/cm"
  mkdir -p "$work/cm"
  cp "$here/consumer.c" "$work/cm/"
  sed "s/@WANT@/$want/" "$here/CMakeLists.txt.in" > "$work/cm/CMakeLists.txt"
  cmake -S "$work/cm" -B "$work/cm/build" -DCMAKE_PREFIX_PATH="$p" >/dev/null \
    || fail "find_package(stoke CONFIG) with CMAKE_PREFIX_PATH=$p"
  cmake --build "$work/cm/build" >/dev/null || fail "the CMake consumer build"
  "$work/cm/build/consumer_static" | grep -q "100 samples" || fail "stoke::stoke_static"
  LD_LIBRARY_PATH=$p/lib "$work/cm/build/consumer_shared" | grep -q "100 samples" \
    || fail "stoke::stoke"

  local site
  site=$(echo "$p"/lib/python3*/dist-packages)
  [[ -d "$site/stoke" ]] || fail "no Python package under $p"
  PYTHONPATH=$site /usr/bin/python3 -c "
import stoke, sys
assert stoke.__file__.startswith('$site'), stoke.__file__
import numpy as np
n = sum(len(b) for b in stoke.Loader(np.zeros((10, 2), np.float32), 4, output='numpy'))
assert n == 10, n
print('python ok', stoke.__version__)" | grep -q "python ok" || fail "import stoke from $site"
}

check_prefix "$work/p1"
echo "installed to a prefix: ok"
mv "$work/p1" "$work/moved"
check_prefix "$work/moved"
echo "moved elsewhere: ok"
