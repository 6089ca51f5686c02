#!/usr/bin/env bash
# remote - the image workload (packed shards, RandomResizedCrop(224) + flip,
# u8, batch 64) read locally against the same shards served over loopback
# by the test servers (tests/remote/servers.sh): nginx as it is (0 ms), the
# fault server with 20 and 100 ms before each answer, and the fault
# server's shared link of REMOTE_CAP_KBPS kB/s (a bandwidth cap every
# connection shares).  stoke reads in the block order (--shuffle
# block=1MB: one coalesced Range request per block) with an io_concurrency
# chosen per condition by a small sweep; the comparison is torch's
# DataLoader over a Dataset doing one urllib Range GET per sample into the
# same corpus's tar shards (bench/remote_torch.py), at its best W in
# REMOTE_TORCH_WORKERS.  After the sweep (which warms the page cache and
# the servers), the two sides alternate, round after round: each round is
# stoke's five conditions, then torch's (one process for all, torch's
# import being slower than the runs on a loaded machine); each run has its
# own warm-up epoch.  Sized for 2 cores and under 10 minutes.
#
#   REMOTE_CORPUS=bench/out/remote-corpus-N  made on first use
#   REMOTE_IMAGES=256                      photos' crops (make_corpus.py)
#   REMOTE_CAP_KBPS=8000                   the cap B (8 MB/s)
#   REMOTE_IO="4 8 16"                     the io_concurrency sweep
#   REMOTE_TORCH_WORKERS="2 3"
#   REMOTE_STOKE_WORKERS=2
#   REMOTE_ROUNDS=2                        alternating rounds
#   REMOTE_TORCH_MEASURED=2                torch epochs measured per run
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_init remote

n_images=${REMOTE_IMAGES:-256}
corpus=${REMOTE_CORPUS:-$OUT/remote-corpus-$n_images}
cap_kbps=${REMOTE_CAP_KBPS:-8000}
io_sweep=${REMOTE_IO:-4 8 16}
torch_workers=${REMOTE_TORCH_WORKERS:-2 3}
stoke_w=${REMOTE_STOKE_WORKERS:-2}
rounds=${REMOTE_ROUNDS:-2}
torch_measured=${REMOTE_TORCH_MEASURED:-2}
batch=64
spec="random-resized-crop=224,flip,chw,u8"

# ---- the corpus: crops of real photographs, packed and as tar shards ------
if [ ! -d "$corpus/train" ]; then
  "$PY" "$BENCH_DIR/make_corpus.py" "$corpus/train" --images "$n_images" >&2
fi
if [ ! -f "$corpus/pack.json" ]; then
  rm -rf "$corpus/www"
  mkdir -p "$corpus/www/packed" "$corpus/www/tar"
  "$STOKE" pack "$corpus/train" -o "$corpus/www/packed/train" --shard-size 8MB -q \
    --json "$corpus/pack.json.tmp"
  # WebDataset layout for the torch side: key.jpg + key.cls, 128 a shard.
  "$PY" "$BENCH_DIR/make_tars.py" "$corpus/train" "$corpus/www/tar" 128
  mv "$corpus/pack.json.tmp" "$corpus/pack.json"
fi
n_packed=$(ls "$corpus"/www/packed/train-*.stoke | wc -l)
shards="train-{00000..$(printf %05d $((n_packed - 1)))}.stoke"
du -sb "$corpus/train" "$corpus/www/packed" "$corpus/www/tar" >"$RAW/corpus_bytes.txt"
find "$corpus/train" -name '*.jpg' | wc -l >"$RAW/corpus_images.txt"

# ---- the servers (the tests' own, on 127.0.0.1) ----------------------------
TMP=$(mktemp -d "${TMPDIR:-/tmp}/stoke-bench-remote.XXXXXX")
fail() { bench_die "$*"; }
SERVER_LIFETIME=1200
# shellcheck source=../tests/remote/servers.sh
. "$ROOT/tests/remote/servers.sh"
start_nginx "$corpus/www"
start_faults "$corpus/www"
echo "cap_kbps $cap_kbps" >"$RAW/cap.txt"

conds="local ms0 ms20 ms100 cap"
base_of() {
  case $1 in
    local) echo "$corpus/www" ;;
    ms0) echo "http://127.0.0.1:$NGINX_HTTP" ;;
    ms20) echo "http://127.0.0.1:$FAULTS/slow20" ;;
    ms100) echo "http://127.0.0.1:$FAULTS/slow100" ;;
    cap) echo "http://127.0.0.1:$FAULTS/cap$cap_kbps" ;;
  esac
}
# The torch side's fixed subset: a 100 ms server answers 10 requests a
# second per worker, so its epoch is 64 samples; the others read all.
torch_samples() { if [ "$1" = ms100 ]; then echo 64; else echo 0; fi; }

stoke_side() { # JSON COND IO
  local json=$1 cond=$2 io=$3
  local args=("$(base_of "$cond")/packed/$shards" --transform "$spec" -b "$batch"
              -j "$stoke_w" --shuffle block=1MB --epochs 3 -q)
  [ "$cond" != local ] && args+=(--io-concurrency "$io")
  stoke_run "$json" "${args[@]}"
}
torch_round() { # ROUND: every condition at every W, one process
  local specs=() cond n
  for cond in $conds; do
    n=$(torch_samples "$cond")
    if [ "$n" -gt 0 ]; then specs+=("$cond=$(base_of "$cond")/tar:$n")
    else specs+=("$cond=$(base_of "$cond")/tar"); fi
  done
  # shellcheck disable=SC2086 # the W list is meant to split
  torch_run remote_torch.py "$corpus/www/tar" "$RAW" "r$1" "${specs[@]}" \
    --workers $torch_workers --batch "$batch" --warmup 1 --measured "$torch_measured"
}

# ---- the sweep: io_concurrency per remote condition, one short run each ---
for cond in ms0 ms20 ms100 cap; do
  for io in $io_sweep; do
    echo "remote: sweep $cond io_concurrency $io" >&2
    stoke_run "$RAW/sweep_${cond}_io$io.json" "$(base_of "$cond")/packed/$shards" \
      --transform "$spec" -b "$batch" -j "$stoke_w" --shuffle block=1MB \
      --epochs 2 -q --io-concurrency "$io"
  done
done
best_io() {
  "$PY" - "$RAW" "$1" <<'PY'
import glob, json, re, sys
best = max(glob.glob("%s/sweep_%s_io*.json" % (sys.argv[1], sys.argv[2])),
           key=lambda p: json.load(open(p))["summary"]["samples_per_s"])
print(re.search(r"_io(\d+)\.json$", best).group(1))
PY
}
declare -A io_of
for cond in ms0 ms20 ms100 cap; do io_of[$cond]=$(best_io "$cond"); done
io_of[local]=0
for cond in $conds; do echo "$cond ${io_of[$cond]}" ; done >"$RAW/io_chosen.txt"

# ---- side by side, alternating --------------------------------------------
for r in $(seq "$rounds"); do
  for cond in $conds; do
    echo "remote: round $r $cond stoke (io_concurrency ${io_of[$cond]})" >&2
    stoke_side "$RAW/stoke_${cond}_r$r.json" "$cond" "${io_of[$cond]}"
  done
  echo "remote: round $r torch, every condition, W in $torch_workers" >&2
  torch_round "$r"
done
cat /proc/loadavg >"$RAW/loadavg_end.txt" 2>/dev/null || true
"$PY" "$BENCH_DIR/remote_table.py" "$RAW" "$OUT/remote.json"
