#!/usr/bin/env bash
# dataloader - stoke.DataLoader (any Python dataset on stoke's threads)
# against torch's DataLoader (worker processes), side by side in one run,
# each configuration in a fresh process, a warm-up epoch first:
#   seed000   seed 000's SlowDataset (5 ms asleep per sample, batch 32) at
#             W in {0, 1, 2, 4, 8, 16}, as ratios to the ideal epoch
#             (256 x 5 ms / W).  Target: stoke within 1.05x of the ideal for
#             W <= 8 and 1.10x at W = 16 (torch measured 1.27x at 4,
#             1.96x at 8, 4.36x at 16 when the issue was filed)
#   images    torchvision's ImageFolder + RandomResizedCrop(224) +
#             RandomHorizontalFlip + PILToTensor at W in {1, 2, 3, 4},
#             with the share of a Python sample spent waiting for the GIL;
#             and the same images through stoke.Loader(path, transform=...)
#             (the C transforms the python-bound advice points to).
#             Target: stoke.DataLoader at least 1.0x torch's best
#   trivial   the per-sample overhead of the Python path (__getitem__
#             returns its index) at W in {0, 1, 2}
#   process   worker_type thread, process and auto against torch, at equal
#             W, each with its time to the first batch and the peak PSS of
#             the main process and its workers:
#             - a pure-Python sample of about 2 ms of bytecode at W in
#               {2, 3} (target: process >= 1.8x thread at W=2, >= 1.0x
#               torch);
#             - the PIL ImageFolder pipeline, batch 64, W in {2, 3}
#               (target: stoke's best mode >= 1.05x torch's best);
#             - seed 000 on processes, W in {1, 2, 4, 8, 16} (<= 1.05x the
#               ideal for W <= 8, 1.10x at 16);
#             - the per-sample overhead on processes, W in {1, 2}
#
#   DATALOADER_SEED000_WORKERS="0 1 2 4 8 16"   DATALOADER_EPOCHS=3
#   DATALOADER_IMAGE_WORKERS="1 2 3 4"          DATALOADER_TRIVIAL_WORKERS="0 1 2"
#   DATALOADER_PROCESS=1 (0: skip the process section)
#   DATALOADER_PROCESS_ONLY=0 (1: the process section alone)
#   DATALOADER_PURE_MS=2   DATALOADER_PROCESS_WORKERS="2 3"
#   DATALOADER_PROCESS_SEED000_WORKERS="1 2 4 8 16"
#   IMAGES_CORPUS=bench/out/corpus (made by bench/corpus.sh on first use)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_init dataloader

export PYTHONPATH=$STOKE_BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}
"$PY" -c "import stoke" 2>/dev/null ||
  bench_die "cannot import stoke from $STOKE_BUILD_DIR/python (build it)"
measured=${DATALOADER_EPOCHS:-3}
corpus=${IMAGES_CORPUS:-$OUT/corpus}

dl_run() { # dl_run OUT_JSON ARGS...
  local json=$1
  shift
  echo "$PY bench/dataloader_bench.py $* --json $json" >>"$RAW/commands.txt"
  "$PY" "$BENCH_DIR/dataloader_bench.py" "$@" --json "$json" \
    2>>"$RAW/dataloader.log" ||
    { tail -20 "$RAW/dataloader.log" >&2; bench_die "dataloader_bench failed: $*"; }
}

sides="stoke"
[ "${BENCH_NO_TORCH:-0}" = 1 ] || sides="torch stoke"

only=${DATALOADER_PROCESS_ONLY:-0}
[ "$only" = 1 ] && DATALOADER_IMAGES=0
for w in $([ "$only" = 1 ] || echo ${DATALOADER_SEED000_WORKERS:-0 1 2 4 8 16}); do
  for side in $sides; do
    echo "dataloader: seed000 $side W=$w" >&2
    dl_run "$RAW/${side}_seed000_w$w.json" --loader "$side" --workload seed000 \
      --workers "$w" --measured "$measured"
  done
done

for w in $([ "$only" = 1 ] || echo ${DATALOADER_TRIVIAL_WORKERS:-0 1 2}); do
  for side in $sides; do
    echo "dataloader: trivial $side W=$w" >&2
    dl_run "$RAW/${side}_trivial_w$w.json" --loader "$side" --workload trivial \
      --workers "$w" --measured "$measured"
  done
done

if [ "${DATALOADER_IMAGES:-1}" = 1 ]; then
  . "$BENCH_DIR/corpus.sh"
  corpus_ready "$corpus"
  img_epochs=${DATALOADER_IMAGE_EPOCHS:-2}
  for w in ${DATALOADER_IMAGE_WORKERS:-1 2 3 4}; do
    for side in $sides; do
      echo "dataloader: images $side W=$w" >&2
      dl_run "$RAW/${side}_images_w$w.json" --loader "$side" --workload images \
        --corpus "$corpus/train" --workers "$w" --measured "$img_epochs"
    done
    echo "dataloader: images stoke.Loader W=$w" >&2
    dl_run "$RAW/c_images_w$w.json" --loader stoke --workload c-images \
      --corpus "$corpus/train" --workers "$w" --measured "$img_epochs"
  done
fi
if [ "${DATALOADER_PROCESS:-1}" = 1 ]; then
  # Each mode in turn at each W, torch first, so that a drift in the
  # machine falls on every mode alike.
  modes="thread process auto"
  [ "${BENCH_NO_TORCH:-0}" = 1 ] || modes="torch $modes"
  pl_run() { # pl_run MODE WORKLOAD W ARGS...
    local mode=$1 wl=$2 w=$3
    shift 3
    local tag=$mode loader=stoke
    [ "$mode" = torch ] && loader=torch tag=ptorch
    echo "dataloader: process section $wl $mode W=$w" >&2
    dl_run "$RAW/${tag}_${wl}_w$w.json" --loader $loader --workload "${wl%64}" \
      --worker-type "${mode/torch/thread}" --workers "$w" "$@"
  }
  iters=$("$PY" "$BENCH_DIR/dataloader_bench.py" --calibrate-pure \
    "${DATALOADER_PURE_MS:-2}")
  echo "$iters" >"$RAW/pure_iters.txt"
  for w in ${DATALOADER_PROCESS_WORKERS:-2 3}; do
    for mode in $modes; do
      pl_run "$mode" pure "$w" --pure-iters "$iters" --measured "$measured"
    done
  done
  for w in ${DATALOADER_PROCESS_SEED000_WORKERS:-1 2 4 8 16}; do
    pl_run process seed000 "$w" --measured "$measured"
  done
  for w in 1 2; do
    pl_run process trivial "$w" --measured "$measured"
  done
  if [ "${DATALOADER_PROCESS_IMAGES:-1}" = 1 ]; then
    . "$BENCH_DIR/corpus.sh"
    corpus_ready "$corpus"
    for w in ${DATALOADER_PROCESS_WORKERS:-2 3}; do
      for mode in $modes; do
        pl_run "$mode" images64 "$w" --corpus "$corpus/train" --batch 64 \
          --measured "${DATALOADER_IMAGE_EPOCHS:-2}"
      done
    done
  fi
fi
cat /proc/loadavg >"$RAW/loadavg_end.txt" 2>/dev/null || true
"$PY" "$BENCH_DIR/dataloader_table.py" "$RAW" "$OUT/dataloader.json"
