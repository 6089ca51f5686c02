#!/usr/bin/env bash
# photos - pre-resizing at pack time (stoke pack --max-side), on large
# photographs: RandomResizedCrop(224) + flip, u8, from the originals (an
# ImageFolder of 6 and 12 MP JPEGs, bench/make_photos.py: upscaled from the
# wallpaper package's 2560x1600 photos) against the same corpus packed with
# --max-side 512 and --max-side 256, with torchvision's figure on the
# originals beside them, at equal cores.  Also `stoke profile` on the
# originals: the doctor's pre-resize advice and the gain it predicts.
#
#   PHOTOS_CORPUS=bench/out/photos   made on first use
#   PHOTOS_IMAGES=96                 images per size
#   PHOTOS_SIZES="12 6"              megapixels
#   PHOTOS_WORKERS=2                 stoke's workers and torchvision's
#   PHOTOS_EPOCHS=3                  1 warm-up + 2 measured
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_init photos

corpus=${PHOTOS_CORPUS:-$OUT/photos}
images=${PHOTOS_IMAGES:-96}
sizes=${PHOTOS_SIZES:-12 6}
workers=${PHOTOS_WORKERS:-2}
epochs=${PHOTOS_EPOCHS:-3}
spec="random-resized-crop=224,flip,chw,u8"

for mp in $sizes; do
  dir=$corpus/${mp}mp
  if [ ! -d "$dir/train" ]; then
    "$PY" "$BENCH_DIR/make_photos.py" "$dir/train" --images "$images" \
      --megapixels "$mp" >&2
  fi
  for side in 512 256; do
    if [ ! -f "$dir/pack$side.json" ]; then
      echo "$STOKE pack $dir/train -o $dir/s$side/p --max-side $side" >>"$RAW/commands.txt"
      "$STOKE" pack "$dir/train" -o "$dir/s$side/p" --max-side "$side" \
        --shard-size 64MB -q --json "$dir/pack$side.json"
    fi
  done
  echo "photos: ${mp} MP, stoke on the originals" >&2
  stoke_run "$RAW/stoke_${mp}mp_orig.json" "$dir/train" --transform "$spec" \
    -b 32 -j "$workers" --shuffle --epochs "$epochs"
  for side in 512 256; do
    echo "photos: ${mp} MP, stoke --max-side $side" >&2
    stoke_run "$RAW/stoke_${mp}mp_s$side.json" "$dir/s$side/p-*.stoke" \
      --transform "$spec" -b 32 -j "$workers" --shuffle --epochs "$epochs"
  done
  echo "photos: ${mp} MP, torchvision on the originals" >&2
  torch_run torch_images.py "$dir/train" --workers "$workers" --dtype u8 \
    --batch 32 --measured $((epochs - 1)) --json "$RAW/torch_${mp}mp.json"
  # The doctor on the originals, against a step the producer cannot meet.
  echo "$STOKE profile $dir/train --transform $spec -b 32 -j $workers --epochs 2 --compute sleep:20ms --json $RAW/profile_${mp}mp.json" >>"$RAW/commands.txt"
  [ "${BENCH_NO_STOKE:-0}" = 1 ] ||
    "$STOKE" profile "$dir/train" --transform "$spec" -b 32 -j "$workers" \
      --epochs 2 --compute sleep:20ms --json "$RAW/profile_${mp}mp.json" \
      >"$RAW/profile_${mp}mp.log" 2>&1
done
cat /proc/loadavg >"$RAW/loadavg_end.txt" 2>/dev/null || true
"$PY" "$BENCH_DIR/photos_table.py" "$RAW" "$corpus" "$OUT/photos.json"
