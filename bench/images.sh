#!/usr/bin/env bash
# images - the image workload side by side with torchvision, at equal cores:
# RandomResizedCrop(224) + RandomHorizontalFlip, batch 256, u8 (PILToTensor)
# and f32 (ToTensor + Normalize), on an ImageNet-like corpus made from real
# photographs (bench/make_corpus.py).  Also the raw ceiling: every file
# decoded at full scale with libjpeg-turbo on the same cores, nothing else.
# stoke reads the corpus four ways: the folder, tar shards, packed shards
# byte for byte (packed-raw) and packed shards as `stoke pack` writes them.
#
#   IMAGES_CORPUS=bench/out/corpus   made on first use (2000 images)
#   IMAGES_TORCH_WORKERS="0 1 2 3 4"
#   IMAGES_STOKE_WORKERS="2 3"
#   IMAGES_EPOCHS=3                  1 warm-up + 2 measured, for both sides
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_init images

corpus=${IMAGES_CORPUS:-$OUT/corpus}
torch_workers=${IMAGES_TORCH_WORKERS:-0 1 2 3 4}
stoke_workers=${IMAGES_STOKE_WORKERS:-2 3}
epochs=${IMAGES_EPOCHS:-3}
cores=$(nproc)

. "$BENCH_DIR/corpus.sh"
corpus_ready "$corpus"
n_tar=$(ls "$corpus"/tar/train-*.tar | wc -l)
n_packed=$(ls "$corpus"/packed-*.stoke | wc -l)
tar_spec="$corpus/tar/train-{0000..$(printf %04d $((n_tar - 1)))}.tar"
packed_spec="$corpus/packed-{00000..$(printf %05d $((n_packed - 1)))}.stoke"
n_raw=$(ls "$corpus"/raw/packed-*.stoke | wc -l)
raw_spec="$corpus/raw/packed-{00000..$(printf %05d $((n_raw - 1)))}.stoke"

echo "images: the decode ceiling" >&2
cc -O2 -o "$RAW/decode_ceiling" "$BENCH_DIR/decode_ceiling.c" -ljpeg -lpthread
echo "$RAW/decode_ceiling $corpus/train $cores 3" >>"$RAW/commands.txt"
"$RAW/decode_ceiling" "$corpus/train" "$cores" 3 >"$RAW/ceiling.json"
"$RAW/decode_ceiling" "$corpus/train" 1 3 >"$RAW/ceiling_1.json"

for dtype in u8 f32; do
  if [ "$dtype" = u8 ]; then
    spec="random-resized-crop=224,flip,chw,u8"
  else
    spec="random-resized-crop=224,flip,normalize=imagenet,chw,f32"
  fi
  for w in $torch_workers; do
    echo "images: torch $dtype W=$w" >&2
    torch_run torch_images.py "$corpus/train" --workers "$w" --dtype "$dtype" \
      --measured $((epochs - 1)) --json "$RAW/torch_${dtype}_w$w.json"
  done
  for w in $stoke_workers; do
    for kind in folder tar packed-raw packed; do
      case $kind in
        folder) data=$corpus/train ;;
        tar) data=$tar_spec ;;
        packed-raw) data=$raw_spec ;;
        packed) data=$packed_spec ;;
      esac
      echo "images: stoke $kind $dtype W=$w" >&2
      stoke_run "$RAW/stoke_${kind}_${dtype}_w$w.json" "$data" \
        --transform "$spec" -b 256 -j "$w" --shuffle --epochs "$epochs"
    done
  done
done
cat /proc/loadavg >"$RAW/loadavg_end.txt" 2>/dev/null || true
"$PY" "$BENCH_DIR/images_table.py" "$RAW" "$OUT/images.json"
