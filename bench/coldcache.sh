#!/usr/bin/env bash
# coldcache - the block order for datasets larger than RAM: every epoch
# starts with the shards dropped from the page cache (posix_fadvise
# DONTNEED), so each reads its samples from storage; the uniform shuffle
# against --shuffle block, with the per-batch statistic that shows the
# randomness the block order gives up (bench/coldcache.c).
#
# The dataset: the image corpus's packed shards (bench/corpus.sh), packed
# again COLD_COPIES times under other names (the same images, other
# files and so other pages), so that the shards are several times larger
# than what an epoch of decoding hides.
#
# Larger than RAM: the runs go into a memory cgroup (v1 or v2, when this
# user may make one) whose limit, COLD_MEM_LIMIT, is a fraction of the
# shards, so the page cache cannot keep an epoch's reads; without one the
# shards fit in this machine's page cache within an epoch and the two
# orders read the same.
#
#   COLD_COPIES=4  COLD_EPOCHS=3  COLD_WORKERS=2  COLD_BATCH=64
#   COLD_TRANSFORM=resize=64,center-crop=64,chw,u8  (cheap: storage shows)
#   COLD_BLOCK=16777216  COLD_MEM_LIMIT=160M (0: no cgroup)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
BENCH_NO_TORCH=1 bench_init coldcache
lib=$STOKE_BUILD_DIR/libstoke.a
[ -f "$lib" ] || bench_die "no $lib (build first)"
cc -O2 -I"$ROOT/include" -I"$STOKE_BUILD_DIR/include" -o "$RAW/coldcache" "$BENCH_DIR/coldcache.c" \
  "$lib" $(stoke_static_libs)
corpus=${IMAGES_CORPUS:-$OUT/corpus}
. "$BENCH_DIR/corpus.sh"
corpus_ready "$corpus"
copies=${COLD_COPIES:-4}
for k in $(seq 1 "$copies"); do
  [ -f "$corpus/cold/c$k-00000.stoke" ] ||
    "$STOKE" pack "$corpus/packed-*.stoke" -o "$corpus/cold/c$k" \
      --shard-size 64MB -q
done
epochs=${COLD_EPOCHS:-3}
workers=${COLD_WORKERS:-2}
batch=${COLD_BATCH:-64}
tf=${COLD_TRANSFORM:-resize=64,center-crop=64,chw,u8}
block=${COLD_BLOCK:-16777216}
shards=("$corpus"/cold/c*-*.stoke)
du -cb "${shards[@]}" | tail -1 >"$RAW/dataset_bytes.txt"
limit=${COLD_MEM_LIMIT:-160M}
cg=
if [ "$limit" != 0 ]; then
  for base in /sys/fs/cgroup/memory /sys/fs/cgroup/unified /sys/fs/cgroup; do
    d=$base/stoke-coldcache-$$
    if mkdir "$d" 2>/dev/null; then
      if echo "$limit" >"$d/memory.limit_in_bytes" 2>/dev/null ||
         echo "$limit" >"$d/memory.max" 2>/dev/null; then
        cg=$d
        break
      fi
      rmdir "$d"
    fi
  done
  [ -n "$cg" ] || echo "coldcache: no memory cgroup: the page cache is" \
    "this machine's" >&2
fi
echo "${cg:+memory limit $limit ($cg)}" >"$RAW/memory_limit.txt"
for order in uniform "block=$block"; do
  echo "coldcache: $order" >&2
  echo "$RAW/coldcache $order $epochs $workers $batch $tf <shards> (memory ${cg:+limit $limit}${cg:-unlimited})" >>"$RAW/commands.txt"
  # shellcheck disable=SC2016 # $$ is the child's
  sh -c '[ -z "$1" ] || echo $$ >"$1/$2"; shift 2; exec "$@"' sh "$cg" \
    "$([ -f "$cg/tasks" ] && echo tasks || echo cgroup.procs)" \
    "$RAW/coldcache" "$order" "$epochs" "$workers" "$batch" "$tf" \
    "${shards[@]}" >"$RAW/${order%%=*}.json"
  cat "$RAW/${order%%=*}.json"
done
[ -z "$cg" ] || rmdir "$cg" 2>/dev/null || true
cat /proc/loadavg >"$RAW/loadavg_end.txt" 2>/dev/null || true
"$PY" - "$RAW" "$OUT/coldcache.json" <<'PY'
import json, os, sys
raw, out = sys.argv[1:]
u = json.load(open(os.path.join(raw, "uniform.json")))
b = json.load(open(os.path.join(raw, "block.json")))
size = int(open(os.path.join(raw, "dataset_bytes.txt")).read().split()[0])
limit = open(os.path.join(raw, "memory_limit.txt")).read().strip()
res = {"dataset_bytes": size, "memory": limit or "unlimited",
       "uniform": u, "block": b,
       "speedup": b["samples_per_s"] / u["samples_per_s"]}
print("cold cache, %.0f MB of shards, %d samples, batch %d, %d workers, %s"
      % (size / 1e6, u["samples"], u["batch"], u["workers"],
         limit or "no memory limit"))
for name, d in (("uniform", u), ("block", b)):
    print("  %-8s %8.1f samples/s  batch-mean spread %.2fx uniform's  "
          "%.1f of %d classes a batch  disk: %.0f reads of %.0f KB an epoch"
          % (name, d["samples_per_s"], d["spread_ratio"],
             d["classes_per_batch"], d["classes"], d["disk_reads_per_epoch"],
             d["disk_kb_per_read"]))
print("  block / uniform: %.2fx" % res["speedup"])
json.dump(res, open(out, "w"), indent=2)
PY
