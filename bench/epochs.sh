#!/usr/bin/env bash
# epochs - the Python path at epoch boundaries: `for x, y in stoke.Loader`
# against `stoke bench` (the C consumer) on the same packed shards and
# settings, over 2 and over 6 epochs of a 500-image set (RRC224 + flip,
# chw, u8; batch 64; W=2; no warm-up, so every epoch and every boundary
# counts).  Fresh processes, the two sides alternating, EPOCHS_RUNS pairs
# per epoch count; medians.  Target: Python/C >= 0.95 over 2 epochs.
#
# Both sides are timed by the loader's own epoch clocks (an epoch from its
# first next() to its end, so a boundary's wait for the next epoch's first
# batch is inside the next epoch); the Python side's loop is also timed
# from the outside (first iter() to last batch), which adds the time
# between epochs that no epoch clock sees.  Both hold the previous batch
# while asking for the next (consumer slots 2).
#
#   EPOCHS_RUNS=5   EPOCHS_IMAGES=500   EPOCHS_WORKERS=2   EPOCHS_LIST="2 6"
#   IMAGES_CORPUS=bench/out/corpus (made by bench/images.sh on first use)
#   EPOCHS_FOLDER=DIR   an ImageFolder of at least EPOCHS_IMAGES photos to
#                       take them from instead of the corpus
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$BENCH_DIR/corpus.sh"
BENCH_NO_TORCH=1 bench_init epochs

export PYTHONPATH=$STOKE_BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}
"$PY" -c "import stoke" 2>/dev/null ||
  bench_die "cannot import stoke from $STOKE_BUILD_DIR/python (build it)"
runs=${EPOCHS_RUNS:-5}
images=${EPOCHS_IMAGES:-500}
workers=${EPOCHS_WORKERS:-2}
corpus=${IMAGES_CORPUS:-$OUT/corpus}
tf=random-resized-crop=224,flip,chw,u8
if [ -n "${EPOCHS_FOLDER:-}" ]; then
  photos=$EPOCHS_FOLDER
else
  corpus_ready "$corpus"
  photos=$corpus/train
fi

# The first $images photos of the corpus (sorted paths; their classes as
# they are), packed once as one shard.
set500=$OUT/epochs-set
if [ ! -f "$set500/n$images-00000.stoke" ] ||
   [ "$(cat "$set500/from" 2>/dev/null)" != "$photos" ]; then
  rm -rf "$set500"
  mkdir -p "$set500/train"
  "$PY" - "$photos" "$set500/train" "$images" <<'PY'
import glob, os, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = sorted(glob.glob(os.path.join(src, "*", "*.jpg")))[:n]
if len(files) < n:
    sys.exit(f"the corpus has {len(files)} photos, fewer than {n}")
for f in files:
    d = os.path.join(dst, os.path.basename(os.path.dirname(f)))
    os.makedirs(d, exist_ok=True)
    os.symlink(os.path.abspath(f), os.path.join(d, os.path.basename(f)))
PY
  "$STOKE" pack "$set500/train" -o "$set500/n$images" --shard-size 1GB -q
  echo "$photos" >"$set500/from"
fi
data=$set500/n$images-00000.stoke

for e in ${EPOCHS_LIST:-2 6}; do
  for ((r = 1; r <= runs; r++)); do
    stoke_run "$RAW/c-e$e-r$r.json" "$data" -b 64 -j "$workers" \
      --transform "$tf" --shuffle --seed "$r" --epochs "$e" --no-warmup \
      --consumer-slots 2 -q
    echo "$PY bench/epoch_boundary.py $data -j $workers --epochs $e --seed $r" \
      >>"$RAW/commands.txt"
    "$PY" "$BENCH_DIR/epoch_boundary.py" "$data" -b 64 -j "$workers" \
      --epochs "$e" --seed "$r" --transform "$tf" \
      --json "$RAW/py-e$e-r$r.json" 2>>"$RAW/python.log" ||
      { tail -20 "$RAW/python.log" >&2; bench_die "epoch_boundary.py failed"; }
  done
done
cat /proc/loadavg >"$RAW/loadavg_end.txt"
"$PY" "$BENCH_DIR/epochs_table.py" "$RAW" "$OUT/epochs.json"
