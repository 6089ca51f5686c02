#!/usr/bin/env bash
# mutants.sh [PATCH...] — check that the tests catch known plausible bugs.
#
# Each tests/mutants/*.patch (or each PATCH given) is a one-bug diff against
# the current tree, with a header naming what it breaks and the tests that
# must catch it ("Caught-by: unit/test_x cli/t0901-y", ctest names).  The
# tree (tracked and untracked, not ignored files) is copied to a scratch
# folder, built once, then each patch is applied, the tests it names are
# built and run, and the patch is reverted.  Never touches the caller's
# tree.  Prints caught/survived per patch; exit 1 if any survived or did not
# apply.  About 5 minutes on 2 cores (one build of the tool and the tests
# named, then incremental builds).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -eq 0 ]; then set -- "$here"/tests/mutants/*.patch; fi
patches=()
for p in "$@"; do patches+=("$(cd "$(dirname "$p")" && pwd)/$(basename "$p")"); done

scratch=$(mktemp -d "${TMPDIR:-/tmp}/stoke-mutants.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
(cd "$here" && git ls-files -z --cached --others --exclude-standard |
  tar --null -T - -cf -) | (cd "$scratch" && tar -xf -)
cd "$scratch"
echo "mutants: building a scratch copy in $scratch"
# Only what the patches' tests need (the tool and those tests), unmutated
# first: a tree that fails its own build is not a mutant's fault.
all_targets=(stoke-cli)
for p in "${patches[@]}"; do
  for t in $(sed -n 's/^Caught-by: //p' "$p"); do
    case $t in
    unit/*|fault/*) all_targets+=("${t#*/}") ;;
    python/*) all_targets+=(stoke_python) ;;
    esac
  done
done
{ cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
  cmake --build build -j"$(nproc)" --target "${all_targets[@]}"; } >build.log 2>&1 ||
  { tail -20 build.log; echo "mutants: the unmutated tree does not build"; exit 1; }

survived=0
for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  tests=$(sed -n 's/^Caught-by: //p' "$p")
  if ! patch -p1 --quiet <"$p"; then
    echo "mutant $name: DOES NOT APPLY"; survived=1; continue
  fi
  targets=()
  regex=
  for t in $tests; do
    case $t in
    unit/*|fault/*) targets+=("${t#*/}") ;;
    python/*) targets+=(stoke_python) ;;
    esac
    regex="${regex:+$regex|}^${t}\$"
  done
  targets+=(stoke-cli)
  verdict=caught
  if ! cmake --build build -j2 --target "${targets[@]}" >"$name.build.log" 2>&1; then
    verdict="caught (does not build)"
  elif (cd build && ctest -R "$regex" --timeout 300 >"../$name.test.log" 2>&1); then
    verdict=SURVIVED
    survived=1
  fi
  echo "mutant $name: $verdict by $tests"
  patch -p1 -R --quiet <"$p"
done
exit $survived
