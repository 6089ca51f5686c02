#!/usr/bin/env bash
# overhead - the pipeline's own cost: an empty sample (--synthetic spin:0,
# shape 1), batch 256, 1,000,000 samples per epoch, W in {1,2}: nanoseconds
# per sample and microseconds per batch hand-off.  torch for scale (its
# epoch is smaller, 65,536 samples, or it would take minutes).
#
#   OVERHEAD_WORKERS="1 2"
#   OVERHEAD_SECONDS=1.0     measured seconds per configuration (about)
#   OVERHEAD_TORCH=1         0: skip the torch side
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_init overhead

workers=${OVERHEAD_WORKERS:-1 2}
secs=${OVERHEAD_SECONDS:-1.0}

for w in $workers; do
  echo "overhead: W=$w" >&2
  stoke_calibrated "$RAW/stoke_w$w.json" "$secs" 3 --synthetic spin:0 \
    --samples 1000000 --shape 1 -b 256 -j "$w" --compute none
  if [ "${OVERHEAD_TORCH:-1}" = 1 ]; then
    torch_run torch_overhead.py --workers "$w" --samples 65536 --batch 256 \
      --warmup 1 --min-seconds "$secs" --min-epochs 1 \
      --json "$RAW/torch_w$w.json"
  fi
done
bench_combine
