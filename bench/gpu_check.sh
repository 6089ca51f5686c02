#!/usr/bin/env bash
# bench/gpu_check.sh — the device stage on a machine with a GPU, in under
# five minutes: what is there, a build, then bench/gpu_check.c (bandwidth
# from stoke's pinned and pageable slots against a plain copy loop, the
# GPU's idle share between gpu-sleep steps with and without prefetch to the
# device, checksums of device batches, the device's normalisation against
# the host path) and two `stoke profile --device cuda` runs.
#
# The build: a carried one when .gpu-carry/ is there (bench/gpu_carry.sh
# makes it on a Debian machine: the binaries and the libjpeg, libspng and
# cJSON they need, run with LD_LIBRARY_PATH), else one made here, which
# needs those libraries' development files (the script says which are
# missing).  Output goes to stdout and, when $OUT is set, to $OUT/gpu_check.log.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

main() {

echo "== probe"
uname -srm
(nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max \
  --format=csv,noheader 2>&1 || echo "nvidia-smi: not found") | head -3
ldconfig -p 2>/dev/null | grep -m1 'libcuda.so.1' || echo "libcuda.so.1: not in ldconfig"
command -v nvcc >/dev/null && nvcc --version | tail -1 || echo "nvcc: not found"
cmake --version 2>/dev/null | head -1 || echo "cmake: not found"
command -v ninja >/dev/null && echo "ninja $(ninja --version)" || echo "ninja: not found"
ldd --version 2>&1 | head -1
missing=()
for p in libjpeg spng libcjson; do
  pkg-config --exists "$p" 2>/dev/null && echo "$p: development files found" ||
    { echo "$p: no development files"; missing+=("$p"); }
done
echo "cores $(nproc), $(free -g | awk '/Mem:/ {print $2}') GiB"

echo "== build"
if [ -x .gpu-carry/bin/stoke_gpu_check ]; then
  bin=.gpu-carry/bin
  export LD_LIBRARY_PATH=$PWD/.gpu-carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "carried build: $(cat .gpu-carry/BUILD_INFO 2>/dev/null)"
  if ! "$bin/stoke" --version >/dev/null 2>&1; then
    echo "the carried binaries do not run here:"; "$bin/stoke" --version
    return 1
  fi
elif [ ${#missing[@]} -eq 0 ]; then
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S . -B build-gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DSTOKE_BUILD_TESTS=OFF >/dev/null && cmake --build build-gpu -j"$(nproc)" >/dev/null ||
    { echo "build failed"; return 1; }
  bin=build-gpu
else
  echo "cannot build: no development files for ${missing[*]} here, and no"
  echo "carried build (.gpu-carry/, made by bench/gpu_carry.sh and carried)"
  return 1
fi
"$bin/stoke" --version

echo "== stoke_gpu_check"
status=0
timeout 200 "$bin/stoke_gpu_check" || status=$?

echo "== stoke profile --device cuda: prefetch to the device, then none"
for kd in 1 0; do
  timeout 30 "$bin/stoke" profile --synthetic tensor --shape 3x224x224 \
    --samples 1536 -b 64 -j 8 --prefetch 4 --device cuda --device-prefetch $kd \
    --compute gpu-sleep:10ms --epochs 3 --trace "${OUT:-/tmp}/trace-kd$kd.json" 2>&1 |
    grep -E '^(backend|device|clock)|samples/s|wait ratio|copy |gpu idle|verdict|^  1\.' ||
    status=1
done
echo "== done in $(( $(date +%s) - start )) s, status $status"
return $status
}

if [ -n "${OUT:-}" ]; then
  main 2>&1 | tee "$OUT/gpu_check.log"
  exit "${PIPESTATUS[0]}"
fi
main
