#!/usr/bin/env bash
# The C user's way in: `cpack -G DEB` in the build tree, `dpkg -i`, a program
# built against the installed package through pkg-config and run, the man
# page and completion in place, then `dpkg -r` leaving nothing behind.
# Needs root (dpkg); exits 77 (skipped) otherwise, or when the package
# "stoke" is already installed by someone else (never replaced here).
#   test_deb.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
[[ $(id -u) -eq 0 ]] || { echo "skip: dpkg -i needs root"; exit 77; }
if dpkg-query -W -f='${Status}' stoke 2>/dev/null | grep -q "install ok installed"; then
  # Left by an interrupted run of this test: ours, so remove it; another
  # package of that name is never touched.
  if [[ "$(dpkg-query -W -f='${Maintainer}' stoke)" == "stoke developers <stoke@localhost>" ]]; then
    dpkg -r stoke >/dev/null
  else
    echo "skip: another package named stoke is installed"; exit 77
  fi
fi
work=$(mktemp -d /tmp/stoke-deb.XXXXXX)
installed=0
cleanup() {
  [[ $installed -eq 1 ]] && dpkg -r stoke >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

want=$(sed -n 's/^project(stoke VERSION \([0-9.]*\).*/\1/p' "$here/../../CMakeLists.txt")
(cd "$build" && cpack -G DEB -B "$work/pkg" >/dev/null) || fail "cpack -G DEB"
deb=$(ls "$work/pkg"/stoke_"$want"_*.deb 2>/dev/null | head -1)
[[ -n "$deb" ]] || fail "no stoke_${want}_*.deb in $work/pkg"
[[ "$(dpkg-deb -f "$deb" Version)" == "$want" ]] || fail "the .deb's Version is not $want"
deps=$(dpkg-deb -f "$deb" Depends)
for d in libjpeg62-turbo libspng0 libcjson1; do
  [[ "$deps" == *"$d"* ]] || fail "Depends lacks $d: $deps"
done
dpkg-deb -c "$deb" | grep -q 'dist-packages' && fail "the .deb carries the Python module"

dpkg -i "$deb" >/dev/null || fail "dpkg -i $deb"
installed=1
for f in /usr/bin/stoke /usr/include/stoke.h /usr/include/stoke_version.h \
         /usr/lib/libstoke.so /usr/lib/libstoke.a /usr/lib/pkgconfig/stoke.pc \
         /usr/lib/cmake/stoke/stokeConfig.cmake /usr/share/man/man1/stoke.1 \
         /usr/share/bash-completion/completions/stoke; do
  [[ -e "$f" ]] || fail "dpkg -i did not install $f"
done
[[ "$(/usr/bin/stoke --version)" == "stoke $want" ]] || fail "/usr/bin/stoke --version"
[[ "$(pkg-config --modversion stoke)" == "$want" ]] || fail "pkg-config --modversion"
# shellcheck disable=SC2046
cc -o "$work/consumer" "$here/consumer.c" $(pkg-config --cflags --libs stoke) \
  || fail "cc against the package through pkg-config"
"$work/consumer" | grep -q "100 samples" || fail "the program built against the package"
cmp -s /usr/share/man/man1/stoke.1 <(/usr/bin/stoke help --man) \
  || fail "the installed man page is not what 'stoke help --man' prints"
bash -c '. /usr/share/bash-completion/completions/stoke && complete -p stoke' \
  | grep -q _stoke || fail "the completion does not load"

dpkg -r stoke >/dev/null || fail "dpkg -r stoke"
installed=0
for f in /usr/bin/stoke /usr/include/stoke.h /usr/lib/libstoke.so \
         /usr/lib/pkgconfig/stoke.pc /usr/share/man/man1/stoke.1; do
  [[ ! -e "$f" ]] || fail "dpkg -r left $f"
done
echo "deb: ok (stoke $want)"
