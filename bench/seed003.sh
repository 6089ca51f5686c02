#!/usr/bin/env bash
# seed003 - the seed-003 experiment: in-memory 4096x32 f32 features with i64
# labels, batch 256, W in {0,2}.  Samples per second, stoke against torch's
# TensorDataset + DataLoader (pin_memory False: no GPU).  A warm-up epoch,
# then enough measured epochs for about SEED003_SECONDS of measured time.
#
#   SEED003_WORKERS="0 2"
#   SEED003_SECONDS=1.0    measured seconds per configuration (>= 0.5)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_init seed003

workers=${SEED003_WORKERS:-0 2}
secs=${SEED003_SECONDS:-1.0}

for w in $workers; do
  echo "seed003: W=$w" >&2
  # stoke is expected to be >20x faster, so it needs many more epochs:
  # calibrate with 20, then scale to $secs.
  stoke_calibrated "$RAW/stoke_w$w.json" "$secs" 20 --synthetic tensor \
    --samples 4096 --shape 32 -b 256 -j "$w" --compute none
  torch_run torch_seed003.py --workers "$w" --samples 4096 --features 32 \
    --batch 256 --warmup 1 --min-seconds "$secs" --min-epochs 3 \
    --json "$RAW/torch_w$w.json"
done
bench_combine
