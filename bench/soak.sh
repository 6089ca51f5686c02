#!/usr/bin/env bash
# Soak: memory must stay flat over long runs (bench/soak.c).
#   1. a million small synthetic batches (4 samples of 16 floats, W = 2);
#   2. a long image run: IMAGE_EPOCHS epochs over 512 JPEGs, from the
#      folder and from its packed shards (decode, crop, resize, f32).
# Each prints its RSS curve and FLAT / NOT FLAT against a tolerance (soak.c
# says how it is judged); the script fails when any run is not flat.
#   SOAK_BATCHES (1000000)  SOAK_IMAGE_EPOCHS (200)  SOAK_TOL_MIB (4)
. "$(dirname "$0")/lib.sh"
BENCH_NO_TORCH=1 bench_init soak
lib=$STOKE_BUILD_DIR/libstoke.a
[ -f "$lib" ] || bench_die "no $lib (build first)"
cc -O2 -I"$ROOT/include" -I"$STOKE_BUILD_DIR/include" -o "$RAW/soak" "$BENCH_DIR/soak.c" "$lib" \
  $(stoke_static_libs)
batches=${SOAK_BATCHES:-1000000}
epochs=${SOAK_IMAGE_EPOCHS:-200}
tol=${SOAK_TOL_MIB:-4}
"$PY" - "$RAW/train" <<'PYEOF'
import os, random, sys
from PIL import Image
root, rng = sys.argv[1], random.Random(7)
for c in range(8):
    d = os.path.join(root, "c%d" % c)
    os.makedirs(d)
    for i in range(64):
        w, h = rng.randint(120, 400), rng.randint(120, 400)
        img = Image.effect_noise((w, h), 40).convert("RGB")
        img.save(os.path.join(d, "%03d.jpg" % i), quality=85)
PYEOF
"$STOKE" pack "$RAW/train" -o "$RAW/pk/train" --shard-size 4MB -q \
  >/dev/null 2>&1 || "$STOKE" pack "$RAW/train" -o "$RAW/pk/train" \
  --shard-size 4MB >/dev/null
status=0
run() {
  local name=$1
  shift
  echo "$RAW/soak $*" >>"$RAW/commands.txt"
  "$RAW/soak" "$@" >"$RAW/$name.txt" || status=1
  grep -v '^json: ' "$RAW/$name.txt"
  grep '^json: ' "$RAW/$name.txt" | sed 's/^json: //' >"$RAW/$name.json"
}
run synthetic synthetic "$batches" "$tol"
run folder images "$RAW/train" "$epochs" "$tol" folder
run packed images "$RAW/pk/train-*.stoke" "$epochs" "$tol" packed
cat /proc/loadavg >"$RAW/loadavg_end.txt" 2>/dev/null || true
[ $status -eq 0 ] && echo "soak: every run flat" || echo "soak: NOT FLAT" >&2
exit $status
