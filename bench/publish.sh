#!/usr/bin/env bash
# publish - what the live view costs a loader: the in-memory tensor case
# (`stoke bench --synthetic tensor --samples 4096 --shape 32 -b 256 -j 0
# --epochs 200`, the fastest loop stoke has, where a cost per step shows
# most) with STOKE_PUBLISH=1 and without, alternating, PUBLISH_RUNS runs
# each; samples/s of each run, the on/off ratio of each pair and their
# median.  Publishing is on by default only where the ratios show no cost
# beyond the spread of the runs themselves.
#
#   PUBLISH_RUNS=3       pairs of runs
#   PUBLISH_EPOCHS=200   epochs per run (200 runs take about 20 ms each:
#                        the publisher's start weighs; 20000 for ~2 s)
#   PUBLISH_ALL=1        the "on" runs also write the metrics file and the
#                        JSON lines at their defaults (issue 20's "all
#                        three": at most 2%)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
BENCH_NO_TORCH=1 bench_init publish

runs=${PUBLISH_RUNS:-3}
epochs=${PUBLISH_EPOCHS:-200}
# The snapshots of these runs go to a folder of their own.
live=$(mktemp -d "${TMPDIR:-/tmp}/stoke-publish.XXXXXX")
trap 'rm -rf "$live"' EXIT
export XDG_RUNTIME_DIR=$live
args=(--synthetic tensor --samples 4096 --shape 32 -b 256 -j 0
      --epochs "$epochs")
for i in $(seq 1 "$runs"); do
  for mode in off on; do
    flag=0
    [ "$mode" = on ] && flag=1
    echo "publish: run $i, publishing $mode" >&2
    export STOKE_PUBLISH=$flag
    extra=()
    [ "$mode" = on ] && [ "${PUBLISH_ALL:-0}" = 1 ] &&
      extra=(--metrics-file "$live/m.prom" --log-jsonl "$live/log.jsonl")
    stoke_run "$RAW/${mode}_$i.json" "${args[@]}" "${extra[@]}"
  done
done
"$PY" - "$RAW" "$runs" <<'PYEOF' | tee "$RAW/summary.txt"
import json, statistics, sys
raw, runs = sys.argv[1], int(sys.argv[2])
def rate(mode, i):
    with open(f"{raw}/{mode}_{i}.json") as f:
        return json.load(f)["summary"]["samples_per_s"]
ratios = []
print(f"{'run':>4} {'off samples/s':>15} {'on samples/s':>15} {'on/off':>8}")
for i in range(1, runs + 1):
    off, on = rate("off", i), rate("on", i)
    ratios.append(on / off)
    print(f"{i:>4} {off:>15,.0f} {on:>15,.0f} {on / off:>8.3f}")
offs = [rate("off", i) for i in range(1, runs + 1)]
spread = (max(offs) - min(offs)) / statistics.median(offs)
print(f"median on/off {statistics.median(ratios):.3f}; "
      f"spread of the off runs {100 * spread:.1f}%")
PYEOF
