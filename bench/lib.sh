# shellcheck shell=bash
# lib.sh - sourced by each benchmark script (bench/<name>.sh).
#
# Environment (all optional; run.sh sets the first three):
#   STOKE        the stoke CLI          (default: $STOKE_BUILD_DIR/stoke)
#   STOKE_BUILD_DIR                     (default: <repo>/build)
#   BENCH_PYTHON the python with torch  (default: /usr/bin/python3)
#   BENCH_OUT    results folder         (default: bench/out)
#   BENCH_NO_TORCH=1   skip the torch side
#   BENCH_NO_STOKE=1   skip the stoke side (to test the torch scripts alone)
#   STOKE_EXTRA_ARGS   more options for every `stoke bench`, e.g.
#                      --no-epoch-prefetch (start each epoch at its first
#                      next(), as PyTorch does)

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$BENCH_DIR")
STOKE_BUILD_DIR=${STOKE_BUILD_DIR:-$ROOT/build}
STOKE=${STOKE:-$STOKE_BUILD_DIR/stoke}
PY=${BENCH_PYTHON:-/usr/bin/python3}
OUT=${BENCH_OUT:-$BENCH_DIR/out}

bench_die() { echo "bench: $*" >&2; exit 1; }

# bench_init NAME: a fresh raw folder for NAME, checks of the two sides.
bench_init() {
  BENCH_NAME=$1
  RAW=$OUT/raw/$BENCH_NAME
  rm -rf "$RAW"
  mkdir -p "$RAW"
  : >"$RAW/commands.txt"
  if [ "${BENCH_NO_STOKE:-0}" != 1 ] && [ ! -x "$STOKE" ]; then
    bench_die "no stoke CLI at $STOKE (build it, or run bench/run.sh)"
  fi
  if [ "${BENCH_NO_TORCH:-0}" != 1 ] &&
     ! "$PY" -c 'import torch' 2>/dev/null; then
    bench_die "$PY cannot import torch (Debian: apt install python3-torch;" \
      "or BENCH_NO_TORCH=1 for the stoke side only)"
  fi
  if [ -f "$STOKE_BUILD_DIR/CMakeCache.txt" ]; then
    sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$STOKE_BUILD_DIR/CMakeCache.txt" \
      >"$RAW/build_type.txt"
    sed -n 's/^STOKE_SANITIZE:[A-Z]*=//p' "$STOKE_BUILD_DIR/CMakeCache.txt" \
      >"$RAW/sanitize.txt"
  fi
  cat /proc/loadavg >"$RAW/loadavg_start.txt" 2>/dev/null || true
}

# stoke_run OUT_JSON ARGS...: `stoke bench ARGS --json OUT_JSON`, the
# human report kept in OUT_JSON's .log.
stoke_run() {
  local json=$1
  shift
  [ "${BENCH_NO_STOKE:-0}" = 1 ] && return 0
  local log=${json%.json}.log
  # shellcheck disable=SC2206 # word splitting of the extra options is meant
  local extra=(${STOKE_EXTRA_ARGS:-})
  set -- "$@" "${extra[@]}"
  echo "$STOKE bench $* --json $json" >>"$RAW/commands.txt"
  if ! "$STOKE" bench "$@" --json "$json" >"$log" 2>&1; then
    cat "$log" >&2
    bench_die "stoke bench failed: $STOKE bench $* --json $json"
  fi
  [ -s "$json" ] || bench_die "stoke bench wrote no JSON to $json"
}

# stoke_calibrated OUT_JSON TARGET_S MIN_EPOCHS ARGS...: run `stoke bench`
# with 1 warm-up + as many measured epochs as make about TARGET_S seconds of
# measured time (at least MIN_EPOCHS), from a short calibration run.
# ARGS must not contain --epochs.
stoke_calibrated() {
  local json=$1 target=$2 min_epochs=$3
  shift 3
  [ "${BENCH_NO_STOKE:-0}" = 1 ] && return 0
  local calib=${json%.json}.calib.json
  # -q: thousands of epochs would make the per-epoch table long.
  stoke_run "$calib" "$@" --epochs $((min_epochs + 1)) -q
  local epoch_s n
  epoch_s=$("$PY" "$BENCH_DIR/benchlib.py" get "$calib" summary.epoch_s)
  n=$("$PY" -c "import math,sys; t,e,m=map(float,sys.argv[1:]); \
print(int(min(200000, max(m, math.ceil(t / max(e, 1e-9))))))" \
    "$target" "$epoch_s" "$min_epochs")
  stoke_run "$json" "$@" --epochs $((n + 1)) -q
}

# torch_run SCRIPT ARGS...: /usr/bin/python3 bench/SCRIPT ARGS.
torch_run() {
  local script=$1
  shift
  [ "${BENCH_NO_TORCH:-0}" = 1 ] && return 0
  echo "$PY bench/$script $*" >>"$RAW/commands.txt"
  "$PY" "$BENCH_DIR/$script" "$@" 2>>"$RAW/torch.log" ||
    { tail -20 "$RAW/torch.log" >&2; bench_die "torch side failed: $script $*"; }
}

# bench_combine: print the table and write $OUT/$BENCH_NAME.json.
bench_combine() {
  cat /proc/loadavg >"$RAW/loadavg_end.txt" 2>/dev/null || true
  "$PY" "$BENCH_DIR/combine.py" "$BENCH_NAME" "$RAW" "$OUT/$BENCH_NAME.json"
}

# What a program linked with libstoke.a needs beside it: the build's own
# pkg-config file says it (Libs.private, Requires.private), so a library
# the build gains (libcurl did, with the remote shards) is not missed here.
stoke_static_libs() {
  local pc=$STOKE_BUILD_DIR/stoke.pc
  [ -f "$pc" ] || bench_die "no $pc (build first)"
  pkg-config --static --libs-only-l "$pc" | sed 's/-lstoke //'
}
