#!/usr/bin/env bash
# hotpath - the loader's hot path against an older commit, side by side.
#
# Builds the old commit (default b09aa3a) in a temporary git worktree and
# the current tree (or --new COMMIT, or --new-tree DIR) out of tree, both
# Release with the same flags, then runs the in-memory tensor case
#
#   stoke bench --synthetic tensor --samples 4096 --shape 32 -b 256 -j W \
#               --epochs 200
#
# at W=0 and W=2: one warm-up pair, then N alternating pairs (old, new; new,
# old; ...), each run a fresh process.  Prints samples/s of every run, the
# medians, the ratio new/old with the target beside W=0's (>= 0.97x, every
# feature off), the machine and the load average before and after.
#
# --case overhead runs bench/overhead.sh's case instead, the pipeline's own
# cost per empty sample with workers (W=1 and W=2 by default):
#
#   stoke bench --synthetic spin:0 --samples 262144 --shape 1 -b 256 -j W \
#               --compute none --epochs 20
#
# (a quarter of overhead.sh's epoch, so that --callgrind fits in minutes).
#
# Two cases run the Python module instead (both sides build it, and both
# run the current tree's scripts, so only the module differs):
#   --case pyarrays   bench/run.sh's Python arrays row: stoke.Loader over
#                     (features, targets) tensors, 4096x32, batch 256, W=0
#                     (bench/stoke_py.py --arrays 4096x32 --min-seconds 1)
#   --case pytrivial  bench/dataloader.sh's per-sample overhead:
#                     stoke.DataLoader over a dataset returning its index,
#                     W=1 and 2 (bench/dataloader_bench.py --workload trivial)
# In-memory Python runs are bimodal on some VMs (the same tree gives 20 or
# 28 M samples/s), so give them --runs 11 or more: the median of the pairs'
# ratios, printed beside the ratio of the medians, is the figure.
#
# --callgrind instead counts instructions per sample under valgrind, which
# the load cannot change: two runs per side, 5 and 25 epochs, and their
# difference, so that start-up and the report are left out.  It prints the
# top functions by inclusive cost, the functions whose own cost changed and
# the hottest source lines of each side (the builds carry -g, which changes
# no generated code, so inlined code is still charged to its line).  The
# profiled process sees its monotonic and CPU clocks divided by
# HOTPATH_CLOCK_DIV (default 1000, bench/hotpath_clock.c) so that the
# loader's time-based choices come out as natively in spite of valgrind's
# slow-down; HOTPATH_CLOCK_DIV=1 profiles the path of samples dearer than
# 2 us instead (each sample timed on its own).
#
# Usage: bench/hotpath.sh [--old COMMIT] [--new COMMIT | --new-tree DIR]
#                         [--runs N] [--epochs N] [--callgrind] [--keep]
#                         [--case tensor|overhead|pyarrays|pytrivial]
#   --old COMMIT     the reference (default b09aa3a)
#   --new COMMIT     measure a commit instead of the working tree
#   --new-tree DIR   measure another checkout as it is (built out of it)
#   --runs N         alternating runs per side and W (default 3)
#   --epochs N       epochs per timed run (default 200)
#   --callgrind      instructions per sample instead of samples/s
#   --keep           keep the worktrees and builds (reused by the next run)
#   --case NAME      tensor (default), overhead (the empty sample),
#                    pyarrays or pytrivial (the Python module; no --callgrind:
#                    valgrind stops in a library constructor torch loads)
#
# Environment: BENCH_OUT (default bench/out), HOTPATH_WORK (where the
# builds go, default $BENCH_OUT/hotpath), HOTPATH_WORKERS (default "0 2"),
# HOTPATH_TARGET (default 0.97), HOTPATH_TOP (rows per table, default 15),
# BENCH_STRICT=1 (exit status 3 when W=0 misses the target).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$BENCH_DIR")
OUT=${BENCH_OUT:-$BENCH_DIR/out}
PY=${BENCH_PYTHON_STDLIB:-/usr/bin/python3}

old_rev=b09aa3a new_rev="" new_tree="" runs=3 epochs="" callgrind=0 keep=0
case_name=tensor
while [ $# -gt 0 ]; do
  case $1 in
    --old) old_rev=$2; shift 2 ;;
    --new) new_rev=$2; shift 2 ;;
    --new-tree) new_tree=$(cd "$2" && pwd); shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --callgrind) callgrind=1; shift ;;
    --keep) keep=1; shift ;;
    --case) case_name=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "hotpath: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$new_rev" ] && [ -n "$new_tree" ] &&
  { echo "hotpath: --new and --new-tree exclude each other" >&2; exit 2; }

die() { echo "hotpath: $*" >&2; exit 1; }
py=0
case $case_name in
  tensor|overhead) ;;
  pyarrays|pytrivial) py=1 ;;
  *) die "unknown --case $case_name (tensor, overhead, pyarrays or pytrivial)" ;;
esac
[ "$py" = 1 ] && [ "$callgrind" = 1 ] &&
  die "--callgrind counts the CLI's cases only (tensor, overhead)"
say() { echo "hotpath: $*" >&2; }

old_sha=$(git -C "$ROOT" rev-parse --verify "$old_rev^{commit}") ||
  die "no commit $old_rev"
WORK=${HOTPATH_WORK:-$OUT/hotpath}
# The two modes keep their results apart: hotpath, hotpath-callgrind.
name=hotpath
[ "$case_name" = tensor ] || name=$name-$case_name
[ "$callgrind" = 1 ] && name=$name-callgrind
RAW=$OUT/raw/$name
mkdir -p "$WORK"
rm -rf "$RAW"
mkdir -p "$RAW"

# The worktrees this run used, removed at exit unless --keep (kept ones
# from an earlier run too: without --keep nothing stays behind).
used=()
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  [ "$keep" = 1 ] && return 0
  local wt
  for wt in "${used[@]+"${used[@]}"}"; do
    git -C "$ROOT" worktree remove --force "$wt" >/dev/null 2>&1 ||
      rm -rf "$wt"
  done
  git -C "$ROOT" worktree prune
  [ -n "${new_dir:-}" ] && [ -z "$new_rev" ] && rm -rf "$new_dir"
  return 0
}
trap cleanup EXIT

# checkout SHA DIR: a detached worktree of SHA at DIR (reused when kept).
checkout() {
  local sha=$1 dir=$2
  used+=("$dir")
  if [ -d "$dir" ] &&
     [ "$(git -C "$dir" rev-parse HEAD 2>/dev/null)" = "$sha" ]; then
    return 0
  fi
  git -C "$ROOT" worktree remove --force "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
  git -C "$ROOT" worktree add --detach "$dir" "$sha" >/dev/null 2>&1 ||
    die "git worktree add $dir $sha failed"
}

# build SRC BUILD: the CLI alone (the Python module for the Python cases),
# Release, the same flags for both sides.
build() {
  local src=$1 dir=$2 python=OFF target=stoke-cli
  [ "$py" = 1 ] && python=ON target=stoke_python
  say "building $src into $dir"
  cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-g \
    -DSTOKE_BUILD_TESTS=OFF -DSTOKE_BUILD_PYTHON=$python -DSTOKE_WERROR=OFF \
    >"$RAW/$(basename "$src").configure.log" 2>&1 ||
    die "configure failed: $RAW/$(basename "$src").configure.log"
  # The case's target, or everything for a commit that names it otherwise.
  local log
  log=$RAW/$(basename "$src").build.log
  { cmake --build "$dir" -j"$(nproc)" --target "$target" &&
    { [ "$py" = 0 ] ||
      cmake --build "$dir" -j"$(nproc)" --target stoke_python_files; }; } \
    >"$log" 2>&1 ||
    cmake --build "$dir" -j"$(nproc)" >>"$log" 2>&1 ||
    die "build failed: $log"
  if [ "$py" = 1 ]; then
    [ -f "$dir/python/stoke/__init__.py" ] || die "no Python module in $dir"
  else
    [ -x "$dir/stoke" ] || die "no stoke CLI in $dir"
  fi
}

old_src=$WORK/old-${old_sha:0:12}
checkout "$old_sha" "$old_src"
build_name=build-hotpath
[ "$py" = 1 ] && build_name=build-hotpath-py
build "$old_src" "$old_src/$build_name"
OLD=$old_src/$build_name/stoke

if [ -n "$new_rev" ]; then
  new_sha=$(git -C "$ROOT" rev-parse --verify "$new_rev^{commit}") ||
    die "no commit $new_rev"
  new_src=$WORK/new-${new_sha:0:12}
  checkout "$new_sha" "$new_src"
  new_dir=$new_src/$build_name
  new_desc="$new_rev (${new_sha:0:12})"
else
  # The working tree as it is, or another checkout: built out of it.
  new_src=${new_tree:-$ROOT}
  new_dir=$WORK/$build_name-$(basename "$new_src")
  new_desc="$(git -C "$new_src" rev-parse --short=12 HEAD)"
  [ -n "$(git -C "$new_src" status --porcelain --untracked-files=no)" ] &&
    new_desc="$new_desc + uncommitted changes"
  new_desc="$new_desc in $new_src"
fi
build "$new_src" "$new_dir"
NEW=$new_dir/stoke

case $case_name in
  tensor)
    epoch_samples=4096
    CASE=(--synthetic tensor --samples "$epoch_samples" --shape 32 -b 256)
    workers=${HOTPATH_WORKERS:-0 2} epochs=${epochs:-200} ;;
  overhead)
    epoch_samples=262144
    CASE=(--synthetic spin:0 --samples "$epoch_samples" --shape 1 -b 256
          --compute none)
    workers=${HOTPATH_WORKERS:-1 2} epochs=${epochs:-20} ;;
  pyarrays)
    CASE=("$BENCH_DIR/stoke_py.py" --arrays 4096x32 -b 256 --min-seconds 1
          --min-epochs 20)
    workers=${HOTPATH_WORKERS:-0} ;;
  pytrivial)
    CASE=("$BENCH_DIR/dataloader_bench.py" --loader stoke --workload trivial
          --measured 3)
    workers=${HOTPATH_WORKERS:-1 2} ;;
esac
top=${HOTPATH_TOP:-15}
summary=$OUT/$name.json
rm -f "$summary"

machine() {
  local cpu
  cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
  echo "machine: ${cpu:-unknown CPU}, $(nproc) cores online," \
    "$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)," \
    "$(uname -sr)"
}

echo "hot path: old ${old_sha:0:12} ($old_rev), new $new_desc"
machine
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
cut -d' ' -f1-3 /proc/loadavg >"$RAW/loadavg_before.txt"

if [ "$callgrind" = 1 ]; then
  command -v valgrind >/dev/null || die "valgrind is not installed"
  # The divided clock (hotpath_clock.c) keeps the loader's time-based
  # choices (per-chunk timing of cheap samples, chunk sizes) native.
  shim=$RAW/hotpath_clock.so
  cc -O2 -shared -fPIC -o "$shim" "$BENCH_DIR/hotpath_clock.c" -ldl ||
    die "cannot build $BENCH_DIR/hotpath_clock.c"
  export HOTPATH_CLOCK_DIV=${HOTPATH_CLOCK_DIV:-1000}
  short=5 long=25
  [ "$case_name" = overhead ] && short=2 long=6
  dsamples=$(((long - short) * epoch_samples))
  for w in $workers; do
    echo
    echo "callgrind, W=$w: ${CASE[*]} -j $w, $long - $short epochs" \
      "($dsamples samples)"
    for side in old new; do
      bin=$OLD; [ "$side" = new ] && bin=$NEW
      for e in $short $long; do
        f=$RAW/cg.w$w.$side.e$e.out
        echo "HOTPATH_CLOCK_DIV=$HOTPATH_CLOCK_DIV LD_PRELOAD=$shim" \
          "valgrind --tool=callgrind $bin bench ${CASE[*]} -j $w" \
          "--epochs $e -q" >>"$RAW/commands.txt"
        LD_PRELOAD=$shim valgrind --tool=callgrind --callgrind-out-file="$f" \
          "$bin" bench "${CASE[@]}" -j "$w" --epochs "$e" -q \
          >"$RAW/cg.w$w.$side.e$e.log" 2>&1 ||
          die "callgrind run failed: $RAW/cg.w$w.$side.e$e.log"
      done
      callgrind_annotate --inclusive=yes "$RAW/cg.w$w.$side.e$long.out" \
        >"$RAW/cg.w$w.$side.annotate.txt" 2>/dev/null || true
    done
    "$PY" "$BENCH_DIR/hotpath.py" callgrind "$RAW/hotpath.w$w.json" \
      "$dsamples" "$old_src" "$new_src" "$top" \
      "$RAW/cg.w$w.old.e$short.out" "$RAW/cg.w$w.old.e$long.out" \
      "$RAW/cg.w$w.new.e$short.out" "$RAW/cg.w$w.new.e$long.out"
  done
  parts=()
  for w in $workers; do parts+=("w$w" "$RAW/hotpath.w$w.json"); done
  "$PY" -c 'import json,sys; json.dump({w: json.load(open(f)) for w, f in
    zip(sys.argv[2::2], sys.argv[3::2])}, open(sys.argv[1], "w"), indent=2)' \
    "$summary" "${parts[@]}"
  status=0
else
  # run SIDE W N: one fresh `stoke bench` of the case; its JSON is kept.
  run() {
    local side=$1 w=$2 n=$3 bin=$OLD
    [ "$side" = new ] && bin=$NEW
    local json=$RAW/w$w.$n.$side.json
    if [ "$py" = 1 ]; then
      # Each side's module, the current tree's script.
      local pp
      pp=$(dirname "$bin")/python
      echo "PYTHONPATH=$pp $PY ${CASE[*]} --workers $w --json $json" \
        >>"$RAW/commands.txt"
      PYTHONPATH=$pp "$PY" "${CASE[@]}" --workers "$w" --json "$json" \
        >"${json%.json}.log" 2>&1 ||
        die "the Python case failed: ${json%.json}.log"
      return
    fi
    echo "$bin bench ${CASE[*]} -j $w --epochs $epochs -q --json $json" \
      >>"$RAW/commands.txt"
    "$bin" bench "${CASE[@]}" -j "$w" --epochs "$epochs" -q --json "$json" \
      >"${json%.json}.log" 2>&1 ||
      die "stoke bench failed: ${json%.json}.log"
  }
  specs=()
  for w in $workers; do
    say "W=$w: warm-up, then $runs alternating runs per side"
    run old "$w" warmup
    run new "$w" warmup
    for i in $(seq 1 "$runs"); do
      # Which side goes first alternates, so that neither always follows
      # the other (a run can leave the caches or the clock to the next).
      if [ $((i % 2)) = 1 ]; then
        run old "$w" "$i"
        run new "$w" "$i"
      else
        run new "$w" "$i"
        run old "$w" "$i"
      fi
      specs+=("$w:old:$RAW/w$w.$i.old.json" "$w:new:$RAW/w$w.$i.new.json")
    done
  done
  echo
  status=0
  "$PY" "$BENCH_DIR/hotpath.py" runs "$summary" "${HOTPATH_TARGET:-0.97}" \
    "${specs[@]}" || status=$?
  [ "$status" = 3 ] || [ "$status" = 0 ] || die "hotpath.py failed"
fi

echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
cut -d' ' -f1-3 /proc/loadavg >"$RAW/loadavg_after.txt"
"$PY" "$BENCH_DIR/hotpath.py" meta "$summary" old="$old_sha" new="$new_desc" \
  machine="$(machine | sed "s/^machine: //")" load_before="$(cat "$RAW/loadavg_before.txt")" \
  load_after="$(cat "$RAW/loadavg_after.txt")" \
  command="$([ "$py" = 1 ] && echo "$PY ${CASE[*]} --workers W" ||
    echo "stoke bench ${CASE[*]} -j W --epochs $epochs")"
echo "raw runs and commands: $RAW; summary: $summary"
if [ "$status" = 3 ] && [ "${BENCH_STRICT:-0}" = 1 ]; then
  exit 3
fi
exit 0
