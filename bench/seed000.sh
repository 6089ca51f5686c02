#!/usr/bin/env bash
# seed000 - the seed-000 experiment: 256 samples that each cost 5 ms of
# waiting (time.sleep / --synthetic sleep:5ms), 3x32x32 f32 + an int label,
# batch 32, W in {0,1,2,4,8,16,32}; a warm-up epoch, then measured epochs;
# the consumer does nothing.  Epoch seconds against the ideal 256*5ms/max(W,1).
#
#   SEED000_WORKERS="0 1 2 4 8 16 32"   the W sweep
#   SEED000_EPOCHS=3                    measured epochs (after 1 warm-up)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_init seed000

workers=${SEED000_WORKERS:-0 1 2 4 8 16 32}
measured=${SEED000_EPOCHS:-3}

for w in $workers; do
  echo "seed000: W=$w" >&2
  # Same W back to back, stoke then torch, so both see the same machine.
  stoke_run "$RAW/stoke_w$w.json" --synthetic sleep:5ms --samples 256 \
    --shape 3x32x32 -b 32 -j "$w" --epochs $((measured + 1)) --compute none
  torch_run torch_seed000.py --workers "$w" --samples 256 --cost-ms 5 \
    --batch 32 --warmup 1 --epochs "$measured" --json "$RAW/torch_w$w.json"
done
bench_combine
