#!/usr/bin/env bash
# python - the Python consumer of stoke (stoke.Loader into torch tensors)
# beside the C consumer (`stoke bench`) and torch's DataLoader, on the same
# workloads, in one run: seed 003 in memory (4096x32 f32 + i64, batch 256),
# the per-batch overhead (empty samples, batch 256), and the image corpus
# (u8 and f32; folder and packed shards).  Target: the Python path at least
# 0.9x the C figure on every workload.  Then TwoClock's cost per step.
# Both sides run the same loader: a Python for-loop holds the previous batch
# while it asks for the next, so stoke.Loader has one more slot than
# prefetch + 1 (consumer_slots 2), and the C side is given the same
# (--consumer-slots 2).
#
#   PYTHON_SEED003_WORKERS="0 2"   PYTHON_OVERHEAD_WORKERS="1 2"
#   PYTHON_IMAGE_WORKERS="2"       PYTHON_SECONDS=1.0   PYTHON_REPEATS=5
#   PYTHON_IMAGE_REPEATS=3
#   PYTHON_TORCH_IMAGES=1          0: skip torch on the images (slow)
#   IMAGES_CORPUS=bench/out/corpus (made by bench/images.sh on first use)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_init python

export PYTHONPATH=$STOKE_BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}
"$PY" -c "import stoke" 2>/dev/null ||
  bench_die "cannot import stoke from $STOKE_BUILD_DIR/python (build it)"
secs=${PYTHON_SECONDS:-1.0}
epochs=${IMAGES_EPOCHS:-3}
corpus=${IMAGES_CORPUS:-$OUT/corpus}

py_run() { # py_run OUT_JSON ARGS...
  local json=$1
  shift
  echo "$PY bench/stoke_py.py $* --json $json" >>"$RAW/commands.txt"
  "$PY" "$BENCH_DIR/stoke_py.py" "$@" --json "$json" 2>>"$RAW/python.log" ||
    { tail -20 "$RAW/python.log" >&2; bench_die "stoke_py failed: $*"; }
}

# In-memory batches cost microseconds: machine noise between two runs is as
# large as the difference sought, so the C and Python runs alternate,
# PYTHON_REPEATS pairs of each, and the table takes medians.
reps=${PYTHON_REPEATS:-5}
for w in ${PYTHON_SEED003_WORKERS:-0 2}; do
  for r in $(seq 1 "$reps"); do
    echo "python: seed003 W=$w, pair $r of $reps" >&2
    stoke_calibrated "$RAW/c_seed003_w${w}_r$r.json" "$secs" 20 \
      --synthetic tensor --samples 4096 --shape 32 -b 256 -j "$w" \
      --compute none --consumer-slots 2
    py_run "$RAW/py_seed003_w${w}_r$r.json" --synthetic tensor --samples 4096 \
      --shape 32 -b 256 -j "$w" --min-seconds "$secs" --min-epochs 20
    py_run "$RAW/pyarrays_seed003_w${w}_r$r.json" --arrays 4096x32 -b 256 \
      -j "$w" --min-seconds "$secs" --min-epochs 20
  done
  torch_run torch_seed003.py --workers "$w" --samples 4096 --features 32 \
    --batch 256 --warmup 1 --min-seconds "$secs" --min-epochs 3 \
    --json "$RAW/torch_seed003_w$w.json"
done

for w in ${PYTHON_OVERHEAD_WORKERS:-1 2}; do
  for r in $(seq 1 "$reps"); do
    echo "python: overhead W=$w, pair $r of $reps" >&2
    stoke_calibrated "$RAW/c_overhead_w${w}_r$r.json" "$secs" 3 \
      --synthetic spin:0 --samples 1000000 --shape 1 -b 256 -j "$w" \
      --compute none --consumer-slots 2
    py_run "$RAW/py_overhead_w${w}_r$r.json" --synthetic spin:0 \
      --samples 1000000 --shape 1 -b 256 -j "$w" --min-seconds "$secs" \
      --min-epochs 3
  done
done

. "$BENCH_DIR/corpus.sh"
corpus_ready "$corpus"
n_packed=$(ls "$corpus"/packed-*.stoke | wc -l)
packed_spec="$corpus/packed-{00000..$(printf %05d $((n_packed - 1)))}.stoke"
# The images alternate too (a second's load moves a run by 10%), fewer pairs.
img_reps=${PYTHON_IMAGE_REPEATS:-3}
for dtype in u8 f32; do
  if [ "$dtype" = u8 ]; then
    spec="random-resized-crop=224,flip,chw,u8"
  else
    spec="random-resized-crop=224,flip,normalize=imagenet,chw,f32"
  fi
  for w in ${PYTHON_IMAGE_WORKERS:-2}; do
    for kind in folder packed; do
      data=$corpus/train
      [ "$kind" = packed ] && data=$packed_spec
      for r in $(seq 1 "$img_reps"); do
        echo "python: images $kind $dtype W=$w, pair $r of $img_reps" >&2
        stoke_run "$RAW/c_${kind}-${dtype}_w${w}_r$r.json" "$data" \
          --transform "$spec" -b 256 -j "$w" --shuffle --epochs "$epochs" -q \
          --consumer-slots 2
        py_run "$RAW/py_${kind}-${dtype}_w${w}_r$r.json" --images "$data" \
          --transform "$spec" -b 256 -j "$w" --shuffle --epochs "$epochs"
      done
    done
    if [ "${PYTHON_TORCH_IMAGES:-1}" = 1 ]; then
      for tw in ${PYTHON_TORCH_IMAGE_WORKERS:-1 2 3}; do
        echo "python: images torch $dtype W=$tw" >&2
        torch_run torch_images.py "$corpus/train" --workers "$tw" \
          --dtype "$dtype" --measured $((epochs - 1)) \
          --json "$RAW/torch_images-${dtype}_w$tw.json"
      done
    fi
  done
done

echo "python: TwoClock overhead" >&2
echo "$PY bench/twoclock_overhead.py --json $RAW/twoclock.json" >>"$RAW/commands.txt"
"$PY" "$BENCH_DIR/twoclock_overhead.py" --json "$RAW/twoclock.json" >&2
cat /proc/loadavg >"$RAW/loadavg_end.txt" 2>/dev/null || true
"$PY" "$BENCH_DIR/python_table.py" "$RAW" "$OUT/python.json"
