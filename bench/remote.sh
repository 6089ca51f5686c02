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
# own warm-up epoch.  Sized for 2 cores and about 10 minutes.
#
# The corpus is larger than what stoke reads ahead (2 x io_concurrency
# blocks, and the next epoch's first windows: about 40 MB at
# io_concurrency 16), so each epoch's bytes cross the network: a set that
# fits in the read-ahead keeps its blocks in memory from one epoch to the
# next, and nothing would be measured but RAM.  The cap reads the first
# REMOTE_CAP_SHARDS shards only, with --no-epoch-prefetch for that reason.
#
#   REMOTE_CORPUS=bench/out/remote-corpus-N  made on first use
#   REMOTE_IMAGES=4096                     photos' crops (make_corpus.py),
#                                          ~220 MB
#   REMOTE_CAP_SHARDS=2                    the cap's subset (8 MB shards)
#   REMOTE_KNEE_SHARDS=4                   the knee check's subset: at
#                                          100 ms, `stoke tune`'s io knee
#                                          (its ladder) against every
#                                          io_concurrency 1..64 measured by
#                                          `stoke bench`, the same rule on
#                                          both (--no-epoch-prefetch);
#                                          target: within one doubling
#   REMOTE_KNEE=1 (0: skip it)
#   REMOTE_CAP_KBPS=8000                   the cap B (8 MB/s)
#   REMOTE_IO="4 8 16 32"                  the io_concurrency sweep
#   REMOTE_TORCH_WORKERS="2 3"
#   REMOTE_STOKE_WORKERS=2
#   REMOTE_ROUNDS=2                        alternating rounds
#   REMOTE_TORCH_MEASURED=2                torch epochs measured per run
#   REMOTE_FORMAT=packed                   what stoke reads: packed, or tar
#                                          (the torch side's tar shards,
#                                          streamed: indexed at open by
#                                          Range windows, then read as
#                                          packed ones; the cap's subset is
#                                          as many samples as packed's).
#                                          The knee check reads packed
#                                          shards either way.
# The open of the whole set is timed per condition (bench/remote_open.py:
# stoke.Loader opens it as a run does): open_s.txt.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_init remote

n_images=${REMOTE_IMAGES:-4096}
cap_shards=${REMOTE_CAP_SHARDS:-2}
corpus=${REMOTE_CORPUS:-$OUT/remote-corpus-$n_images}
cap_kbps=${REMOTE_CAP_KBPS:-8000}
io_sweep=${REMOTE_IO:-4 8 16 32}
torch_workers=${REMOTE_TORCH_WORKERS:-2 3}
stoke_w=${REMOTE_STOKE_WORKERS:-2}
rounds=${REMOTE_ROUNDS:-2}
torch_measured=${REMOTE_TORCH_MEASURED:-2}
format=${REMOTE_FORMAT:-packed}
case $format in packed|tar) ;; *) bench_die "REMOTE_FORMAT: packed or tar, not $format" ;; esac
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
[ "$cap_shards" -le "$n_packed" ] || cap_shards=$n_packed
cap_set="train-{00000..$(printf %05d $((cap_shards - 1)))}.stoke"
# The torch side's cap subset: about as many samples as those shards hold.
cap_samples=$(( $(find "$corpus/train" -name '*.jpg' | wc -l) * cap_shards / n_packed ))
if [ "$format" = tar ]; then # 128 samples a tar shard (make_tars.py)
  n_tar=$(ls "$corpus"/www/tar/train-*.tar | wc -l)
  shards="train-{0000..$(printf %04d $((n_tar - 1)))}.tar"
  cap_tar=$(( (cap_samples + 127) / 128 ))
  cap_set="train-{0000..$(printf %04d $((cap_tar - 1)))}.tar"
fi
echo "$format" >"$RAW/format.txt"
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
# The torch side's fixed subsets: a 100 ms server answers 10 requests a
# second per worker, so its epoch is 64 samples, and a 20 ms one 512; the
# cap's, its shards' samples; the others read all.
torch_samples() {
  case $1 in ms100) echo 64 ;; ms20) echo 512 ;; cap) echo "$cap_samples" ;;
    *) echo 0 ;; esac
}
# stoke's set and options per condition (the cap: see the header).
set_of() { if [ "$1" = cap ]; then echo "$cap_set"; else echo "$shards"; fi; }
cond_args() { if [ "$1" = cap ]; then echo --no-epoch-prefetch; fi; }

stoke_side() { # JSON COND IO
  local json=$1 cond=$2 io=$3
  local args=("$(base_of "$cond")/$format/$(set_of "$cond")" --transform "$spec"
              -b "$batch" -j "$stoke_w" --shuffle block=1MB --epochs 3 -q)
  # shellcheck disable=SC2207 # one option or none
  args+=($(cond_args "$cond"))
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
    # shellcheck disable=SC2046 # one option or none
    stoke_run "$RAW/sweep_${cond}_io$io.json" \
      "$(base_of "$cond")/$format/$(set_of "$cond")" \
      --transform "$spec" -b "$batch" -j "$stoke_w" --shuffle block=1MB \
      --epochs 2 -q --io-concurrency "$io" $(cond_args "$cond")
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
# ---- the tuner's io knee against an exhaustive sweep (ms100) --------------
knee_shards=${REMOTE_KNEE_SHARDS:-4}
[ "$knee_shards" -le "$n_packed" ] || knee_shards=$n_packed
knee_set="train-{00000..$(printf %05d $((knee_shards - 1)))}.stoke"
if [ "${REMOTE_KNEE:-1}" = 1 ] && [ "${BENCH_NO_STOKE:-0}" != 1 ]; then
  knee_url="$(base_of ms100)/packed/$knee_set"
  knee_args=(--transform "$spec" -b "$batch" -j "$stoke_w" --shuffle block=1MB
             --no-epoch-prefetch)
  echo "the first $knee_shards shards, --no-epoch-prefetch" >"$RAW/knee_set.txt"
  echo "remote: knee: stoke tune at 100 ms" >&2
  echo "$STOKE tune $knee_url ${knee_args[*]} --json $RAW/knee_tune.json" \
    >>"$RAW/commands.txt"
  "$STOKE" tune "$knee_url" "${knee_args[@]}" --json "$RAW/knee_tune.json" \
    >"$RAW/knee_tune.txt" 2>&1 || bench_die "stoke tune failed: $(tail -5 "$RAW/knee_tune.txt")"
  for io in 1 2 4 8 16 32 64; do
    echo "remote: knee: every io_concurrency, $io" >&2
    stoke_run "$RAW/knee_io$io.json" "$knee_url" "${knee_args[@]}" --epochs 3 \
      -q --io-concurrency "$io"
  done
fi

declare -A io_of
for cond in ms0 ms20 ms100 cap; do io_of[$cond]=$(best_io "$cond"); done
io_of[local]=0
for cond in $conds; do echo "$cond ${io_of[$cond]}" ; done >"$RAW/io_chosen.txt"

# ---- the open: what a run waits for before its first batch, the shards'
# indices (packed) or their headers' windows (tar) and the memory ledger's
# probe of 64 samples (tar), at the chosen io_concurrency; stoke.Loader
# opens the set and reads nothing more (bench/remote_open.py).
for cond in local ms0 ms20 ms100; do
  io=${io_of[$cond]}; [ "$io" = 0 ] && io=8
  echo "$cond $(PYTHONPATH=$STOKE_BUILD_DIR/python "$PY" "$BENCH_DIR/remote_open.py" \
    "$(base_of "$cond")/$format/$shards" "$io")"
done >"$RAW/open_s.txt" || bench_die "remote_open.py failed"

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
