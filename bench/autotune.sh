#!/usr/bin/env bash
# Online autotuning against the exhaustive knee (bench/autotune.c).
#
# A ground-truth grid of scenarios: samples that sleep (waiting I/O, so
# knees above this machine's 2 cores can be shown), spin (a CPU-bound
# decode) or both, at fixed or lognormal cost, against consumer steps of
# 2 to 50 ms.  For each: the exhaustive sweep (fixed W = 1..max, prefetch
# 2, a warm-up epoch then 2 measured epochs, as the autotuner is measured) and its knee (stoke_tune_knee_find: the fewest workers within 5% of
# the best that remove the stall), then one autotuning loader for 6 epochs
# of 64 steps.  Targets (issue 13): after min(3 epochs, 200 steps) the
# throughput is >= 95% of the knee's, the workers at most one more than the
# knee's (every W is a rung of this grid), and at most one change per
# epoch.  One more scenario changes the step at run time (8 -> 2 -> 16 ms):
# the autotuner must add workers, then give them back.
#   AUTOTUNE_QUICK=1  fewer scenarios (a check that it runs)
. "$(dirname "$0")/lib.sh"
BENCH_NO_TORCH=1 bench_init autotune
lib=$STOKE_BUILD_DIR/libstoke.a
[ -f "$lib" ] || bench_die "no $lib (build first)"
cc -O2 -I"$ROOT/include" -I"$STOKE_BUILD_DIR/include" -o "$RAW/autotune" "$BENCH_DIR/autotune.c" "$lib" \
  $(stoke_static_libs)
# name | scenario options | max workers of the sweep
scenarios=(
  "sleep-1ms-b16-step2|--sleep-us 1000 -b 16 --step-ms 2|12"
  "sleep-2ms-b16-step8|--sleep-us 2000 -b 16 --step-ms 8|8"
  "lognormal-1ms-b16-step4|--sleep-us 1000 --sigma 1 -b 16 --step-ms 4|10"
  "sleep-5ms-b32-step50|--sleep-us 5000 -b 32 --step-ms 50|6"
  "spin-200us-b16-step8|--spin-us 200 -b 16 --step-ms 8|4"
  "spin-300us-b16-step2|--spin-us 300 -b 16 --step-ms 2|4"
  "mixed-100us+1ms-b16-step4|--spin-us 100 --sleep-us 1000 -b 16 --step-ms 4|8"
)
[ "${AUTOTUNE_QUICK:-0}" = 1 ] && scenarios=("${scenarios[@]:0:2}")
run() {
  local out=$1
  shift
  echo "$RAW/autotune $*" >>"$RAW/commands.txt"
  "$RAW/autotune" "$@" >"$out" || bench_die "failed: $RAW/autotune $*"
}
for s in "${scenarios[@]}"; do
  IFS='|' read -r name args maxw <<<"$s"
  # shellcheck disable=SC2086 # the options split into words
  run "$RAW/$name.sweep.jsonl" --mode sweep $args --max-workers "$maxw" \
    --batches 64
  # shellcheck disable=SC2086
  run "$RAW/$name.auto.jsonl" --mode auto $args --batches 64 --epochs 6
  echo "$name" >>"$RAW/scenarios.txt"
done
if [ "${AUTOTUNE_QUICK:-0}" != 1 ]; then
  for ms in 8 2 16; do
    run "$RAW/change.sweep$ms.jsonl" --mode sweep --sleep-us 1000 -b 16 \
      --step-ms "$ms" --max-workers 12 --batches 64
  done
  # 256 KiB samples (4 MiB slots), written whole: the resident set shows
  # the slots a shallower prefetch gives back.
  run "$RAW/change.auto.jsonl" --mode auto --sleep-us 1000 -b 16 \
    --step-ms 8 --change 192:2,384:16 --batches 64 --epochs 9 --sample-kib 256
fi
cat /proc/loadavg >"$RAW/loadavg_end.txt" 2>/dev/null || true
"$PY" "$BENCH_DIR/autotune.py" "$RAW"
