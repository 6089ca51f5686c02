#!/usr/bin/env bash
# The Python user's way in, as a user meets it: a fresh venv over Debian's
# interpreter (--system-site-packages: Debian's numpy and torch), then
#   pip install --no-build-isolation --no-index SRC     (setup.py runs CMake)
#   python3 -m build --wheel --no-isolation; pip install the wheel
# each followed by `import stoke` and the `stoke` command from /, with no
# PYTHONPATH, the versions compared with CMakeLists.txt's, and
# `pip uninstall stoke` leaving nothing behind.
#   test_pip.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
work=$(mktemp -d /tmp/stoke-pip.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
unset PYTHONPATH

want=$(sed -n 's/^project(stoke VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[[ -n "$want" ]] || fail "no version in $src/CMakeLists.txt"

# A clean copy of the tree, as a clone would be: no build folders.
mkdir "$work/src"
tar -C "$src" --exclude='./build*' --exclude='./.git' --exclude='./dist' \
    --exclude='*.egg-info' --exclude='__pycache__' -cf - . | tar -C "$work/src" -xf -

check_venv() { # VENV WHAT: the installed package and command work from /
  local v=$1 what=$2
  (cd / && "$v/bin/python" - "$want" <<'PY') || fail "$what: import stoke"
import sys, os
import stoke, numpy as np
want = sys.argv[1]
assert "PYTHONPATH" not in os.environ
assert stoke.__file__.startswith(sys.prefix), (stoke.__file__, sys.prefix)
assert stoke.__version__ == want, (stoke.__version__, want)
n = sum(len(b) for b in stoke.Loader(np.zeros((10, 2), np.float32), 4,
                                     output="numpy"))
assert n == 10, n
from importlib.metadata import version
assert version("stoke") == want, version("stoke")
print("import ok")
PY
  [[ -x "$v/bin/stoke" ]] || fail "$what: no stoke command in $v/bin"
  local got
  got=$(cd / && "$v/bin/stoke" --version)
  [[ "$got" == "stoke $want" ]] || fail "$what: stoke --version says '$got', not 'stoke $want'"
  (cd / && "$v/bin/stoke" bench --synthetic tensor --samples 64 --shape 4 -b 16 -j 1 \
      --epochs 2 >/dev/null) || fail "$what: stoke bench from the venv"
}

check_uninstalled() { # VENV WHAT
  local v=$1 what=$2
  "$v/bin/pip" uninstall -y -q stoke || fail "$what: pip uninstall"
  [[ ! -e "$v/bin/stoke" ]] || fail "$what: pip uninstall left $v/bin/stoke"
  local left
  left=$(find "$v/lib" -iname '*stoke*' | head -5)
  [[ -z "$left" ]] || fail "$what: pip uninstall left $left"
  (cd / && "$v/bin/python" -c "import stoke" 2>/dev/null) \
    && fail "$what: stoke still imports after uninstall"
  return 0
}

# 1. pip install from the source tree.
/usr/bin/python3 -m venv --system-site-packages "$work/v1"
"$work/v1/bin/pip" install -q --no-build-isolation --no-index "$work/src" \
  || fail "pip install --no-build-isolation --no-index ."
check_venv "$work/v1" "pip install ."
check_uninstalled "$work/v1" "pip install ."

# 2. A wheel, installed into another fresh venv.
(cd "$work/src" && /usr/bin/python3 -m build --wheel --no-isolation \
   --outdir "$work/dist" >/dev/null) || fail "python3 -m build --wheel --no-isolation"
whl=$(ls "$work/dist"/stoke-"$want"-*.whl 2>/dev/null | head -1)
[[ -n "$whl" ]] || fail "no wheel stoke-$want-*.whl in $(ls "$work/dist")"
/usr/bin/python3 -c "import sys, zipfile
meta = zipfile.ZipFile(sys.argv[1]).read('stoke-%s.dist-info/METADATA' % sys.argv[2]).decode()
assert 'Version: %s' % sys.argv[2] in meta.splitlines(), meta[:300]" "$whl" "$want" \
  || fail "the wheel's METADATA does not say Version: $want"
/usr/bin/python3 -m venv --system-site-packages "$work/v2"
"$work/v2/bin/pip" install -q --no-index "$whl" || fail "pip install $whl"
check_venv "$work/v2" "the wheel"
check_uninstalled "$work/v2" "the wheel"
echo "pip and wheel: ok (stoke $want)"
