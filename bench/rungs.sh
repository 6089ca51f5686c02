#!/usr/bin/env bash
# rungs - the cache that packs as it reads, data echoing and the cost of
# the wait, on the image corpus (bench/corpus.sh), RandomResizedCrop(224)
# + flip, u8, batch 256 (64 for echo), at equal cores:
#
#   cache  the folder with --cache: epoch 0 reads the folder (and fills
#          the cache in the background), epochs 1.. read the shards; beside
#          the folder without a cache and the packed shards;
#   echo   a consumer step shorter than the producer's batch: --echo 1, 2
#          (batch) and 2 (example): steps/s and fresh samples/s;
#   cost   the starving run with --gpu-price 2.50/h: the money the waiting
#          costs per epoch and per million samples.
#
#   RUNGS_WORKERS=2  RUNGS_EPOCHS=4
set -euo pipefail
. "$(dirname "$0")/lib.sh"
BENCH_NO_TORCH=1 bench_init rungs
corpus=${IMAGES_CORPUS:-$OUT/corpus}
. "$BENCH_DIR/corpus.sh"
corpus_ready "$corpus"
w=${RUNGS_WORKERS:-2}
epochs=${RUNGS_EPOCHS:-4}
spec="random-resized-crop=224,flip,chw,u8"
n_packed=$(ls "$corpus"/packed-*.stoke | wc -l)
packed="$corpus/packed-{00000..$(printf %05d $((n_packed - 1)))}.stoke"

cache=$RAW/cache
rm -rf "$cache"
echo "rungs: the folder with --cache (cold cache)" >&2
stoke_run "$RAW/cache.json" "$corpus/train" --transform "$spec" -b 256 \
  -j "$w" --shuffle --epochs "$epochs" --no-warmup --cache "$cache"
echo "rungs: the folder" >&2
stoke_run "$RAW/folder.json" "$corpus/train" --transform "$spec" -b 256 \
  -j "$w" --shuffle --epochs "$epochs"
echo "rungs: packed shards" >&2
stoke_run "$RAW/packed.json" "$packed" --transform "$spec" -b 256 -j "$w" \
  --shuffle --epochs "$epochs"

for e in 1 2 2x; do
  mode=batch
  [ "$e" = 2x ] && mode=example
  echo "rungs: echo $e" >&2
  stoke_run "$RAW/echo_$e.json" "$packed" --transform "$spec" -b 64 \
    -j "$w" --shuffle --epochs 3 --compute sleep:5ms --echo "${e%x}" \
    --echo-mode "$mode" --gpu-price 2.50/h
done
cat /proc/loadavg >"$RAW/loadavg_end.txt" 2>/dev/null || true
"$PY" - "$RAW" "$OUT/rungs.json" <<'PY'
import json, os, sys
raw, out = sys.argv[1:]
L = lambda n: json.load(open(os.path.join(raw, n + ".json")))
res = {}
c, f, p = L("cache"), L("folder"), L("packed")
rates = [e["samples"] / e["seconds"] for e in c["epochs"]]
res["cache"] = {"epochs": rates, "folder": f["summary"]["samples_per_s"],
                "packed": p["summary"]["samples_per_s"],
                "cache": c["summary"]["cache"]}
print("cache: epoch images/s with --cache: %s" %
      ", ".join("%.0f" % r for r in rates))
print("       the folder %.0f, packed shards %.0f; later epochs / folder "
      "%.2fx, / packed %.2fx" % (
          res["cache"]["folder"], res["cache"]["packed"],
          sum(rates[1:]) / len(rates[1:]) / res["cache"]["folder"],
          sum(rates[1:]) / len(rates[1:]) / res["cache"]["packed"]))
res["echo"] = {}
for e in ("1", "2", "2x"):
    d = L("echo_" + e)
    s = d["summary"]
    res["echo"][e] = {k: s[k] for k in ("steps_per_s", "fresh_samples_per_s",
                                        "samples_per_s", "wait_ratio")}
    res["echo"][e]["cost"] = s["cost"]
    print("echo %-3s %7.2f steps/s  %7.1f fresh samples/s  wait %4.1f%%  "
          "waiting costs $%.2f per million samples at $2.50/h" % (
              e.replace("x", " (example)"), s["steps_per_s"],
              s["fresh_samples_per_s"], 100 * s["wait_ratio"],
              s["cost"]["wait_per_million_samples"]))
json.dump(res, open(out, "w"), indent=2)
PY
