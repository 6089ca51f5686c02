#!/usr/bin/env bash
# bench/gpu_check.sh [SECONDS] — the device stage on a machine with a GPU,
# within a time budget (default 300 s): a probe first, then a build of only
# what it runs, bench/gpu_check.c (bandwidth from stoke's pinned and
# pageable slots against a plain copy loop, the GPU's idle share between
# gpu-sleep steps with and without prefetch to the device, checksums of
# device batches, the device's normalisation against the host path), two
# `stoke profile --device cuda` runs, and, where this machine's Python has
# torch with CUDA, bench/gpu_check_torch.py: stoke.Loader(device="cuda")
# under torch.cuda.stream(s), output="stoke" with from_dlpack on a side
# stream, cuda_stream=2 and device 1 when there are two GPUs, each checked
# bit for bit against the host path.  It ends with a one-screen summary.
#
# The build: a carried one when .gpu-carry/ is there (bench/gpu_carry.sh
# makes it on a Debian machine: the binaries and the libjpeg, libspng and
# cJSON they need, run with LD_LIBRARY_PATH), else build-gpu/ made here:
# the CLI and stoke_gpu_check only, no tests; the Python module only when
# Python's headers and dlpack.h are there; -DSTOKE_WITH_CUDA_KERNELS=ON
# when nvcc is, so that a broken nvcc fails the build loudly rather than
# leaving the kernels out.
#
# Without a GPU it builds, says so and exits 0, having measured nothing.  With
# GPU_CHECK_SHIM=/path/libstoke_cuda_shim.so (the test driver of
# tests/shim/) it runs its Python checks against that driver instead (no
# torch CUDA needed), which is how the tests exercise this script.
# GPU_CHECK_BUILD=<build tree> uses that tree's binaries and module instead
# of building.  Output goes to stdout and, when $OUT is set, to $OUT/gpu_check.log.
set -uo pipefail
cd "$(dirname "$0")/.."
budget=${1:-300}
case $budget in ''|*[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2;; esac
start=$(date +%s)
summary=()
note() { summary+=("$*"); }
# Seconds left of the budget, at most $1 (a phase's own cap).
left() {
  local l=$(( budget - ($(date +%s) - start) ))
  [ "$l" -gt "$1" ] && l=$1
  echo $(( l > 0 ? l : 0 ))
}
# Run a phase under the budget: `phase CAP NAME CMD...`.  Call it in this
# shell (its output redirected to a file, not piped nor in $(...)): a
# subshell would lose its note and `skipped`.  skipped=1: it did not run
# (noted; returns 1).
phase() {
  local cap=$1 name=$2 t rc; shift 2
  t=$(left "$cap"); skipped=0
  if [ "$t" -lt 5 ]; then
    note "$name: not run (time budget spent)"; skipped=1; return 1
  fi
  timeout "$t" "$@"; rc=$?
  [ $rc -eq 124 ] && echo "($name: stopped at its $t s share of the budget)"
  return $rc
}

main() {
echo "== probe (budget ${budget} s)"
uname -srm
shim=${GPU_CHECK_SHIM:-}
gpus=0
if [ -n "$shim" ]; then
  echo "GPU_CHECK_SHIM: $shim (the test driver, not a GPU)"
  export STOKE_CUDA_LIBRARY=$shim
else
  smi=$(nvidia-smi --query-gpu=name,driver_version,memory.total \
        --format=csv,noheader 2>/dev/null)
  if [ -n "$smi" ]; then echo "$smi" | head -4; gpus=$(echo "$smi" | wc -l)
  else echo "nvidia-smi: no GPU listed"; fi
  ldconfig -p 2>/dev/null | grep -m1 'libcuda.so.1' || echo "libcuda.so.1: not in ldconfig"
fi
command -v nvcc >/dev/null && nvcc --version | tail -1 || echo "nvcc: not found"
cmake --version 2>/dev/null | head -1 || echo "cmake: not found"
py=/usr/bin/python3; [ -x $py ] || py=$(command -v python3 || true)
pyinc=$($py -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
havepy=0
if [ -n "$pyinc" ] && [ -f "$pyinc/Python.h" ] && [ -f /usr/include/dlpack/dlpack.h ] &&
   $py -c 'import numpy' 2>/dev/null; then havepy=1; fi
torch=$($py -c 'import torch; print(torch.__version__, torch.cuda.is_available(), torch.cuda.device_count())' 2>/dev/null)
echo "python: ${py:-none}; module buildable: $havepy; torch: ${torch:-none}"
missing=()
for p in libjpeg spng libcjson; do
  pkg-config --exists "$p" 2>/dev/null || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] && echo "no development files: ${missing[*]}"
echo "cores $(nproc), $(free -g | awk '/Mem:/ {print $2}') GiB"

echo "== build"
if [ -n "${GPU_CHECK_BUILD:-}" ]; then
  # A build tree made elsewhere (the tests' own): nothing is built.
  bin=$GPU_CHECK_BUILD; pydir=$GPU_CHECK_BUILD/python
  echo "the build in $bin (GPU_CHECK_BUILD)"
  note "build: $bin (GPU_CHECK_BUILD), not built here"
elif [ -x .gpu-carry/bin/stoke_gpu_check ]; then
  bin=.gpu-carry/bin
  export LD_LIBRARY_PATH=$PWD/.gpu-carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "carried build: $(cat .gpu-carry/BUILD_INFO 2>/dev/null)"
  if ! "$bin/stoke" --version >/dev/null 2>&1; then
    echo "the carried binaries do not run here:"; "$bin/stoke" --version
    note "build: the carried binaries do not run"; return 1
  fi
  pydir=.gpu-carry/python
elif [ ${#missing[@]} -eq 0 ]; then
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  kernels=AUTO; command -v nvcc >/dev/null && kernels=ON
  targets=(stoke-cli stoke_gpu_check); pyopt=OFF
  if [ $havepy -eq 1 ]; then pyopt=ON; targets+=(stoke_python); fi
  if ! phase "$budget" build cmake -S . -B build-gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
         -DSTOKE_BUILD_TESTS=OFF -DSTOKE_BUILD_PYTHON=$pyopt \
         -DSTOKE_WITH_CUDA_KERNELS=$kernels > build-gpu.log 2>&1 ||
     ! phase "$budget" build cmake --build build-gpu -j"$(nproc)" --target "${targets[@]}" \
         >> build-gpu.log 2>&1; then
    tail -20 build-gpu.log; note "build: FAILED (build-gpu.log)"; return 1
  fi
  echo "built ${targets[*]} (kernels $kernels, python $pyopt) in build-gpu/"
  note "build: ${targets[*]}, kernels $kernels, python $pyopt"
  bin=build-gpu; pydir=build-gpu/python
else
  echo "cannot build: no development files for ${missing[*]} here, and no"
  echo "carried build (.gpu-carry/, made by bench/gpu_carry.sh and carried)"
  note "build: not possible (${missing[*]} missing)"; return 1
fi
"$bin/stoke" --version
status=0
# Built either way, so that a machine without a GPU still checks the build.
if [ -z "$shim" ] && [ "$gpus" -eq 0 ]; then
  echo "no GPU here (nvidia-smi lists none): nothing to measure; run this on a GPU machine, or with GPU_CHECK_SHIM=<libstoke_cuda_shim.so> to check the script"
  note "no GPU: nothing measured (GPU figures unmeasured)"
  return 0
fi

if [ -z "$shim" ]; then
  echo "== stoke_gpu_check"
  phase 150 stoke_gpu_check "$bin/stoke_gpu_check" > gpu-check-c.log
  rc=$?; cat gpu-check-c.log; [ $rc -ne 0 ] && status=1
  [ $skipped -eq 1 ] ||
    note "stoke_gpu_check: $([ $rc -eq 0 ] && echo 'all checks held' || echo "FAILED ($rc)")"
  while IFS= read -r l; do note "$l"; done < <(grep -E ' -> |GB/s|batches equal' \
    gpu-check-c.log | head -8 | sed 's/^ */  /')
  rm -f gpu-check-c.log

  echo "== stoke profile --device cuda: prefetch to the device, then none"
  for kd in 1 0; do
    phase 30 "profile kd $kd" "$bin/stoke" profile --synthetic tensor \
      --shape 3x224x224 --samples 1536 -b 64 -j 8 --prefetch 4 --device cuda \
      --device-prefetch $kd --compute gpu-sleep:10ms --epochs 3 \
      --trace "${OUT:-/tmp}/trace-kd$kd.json" > gpu-check-prof.log 2>&1
    line=$(grep -E '^(backend|device|clock)|samples/s|wait ratio|copy |gpu idle|verdict|^  1\.' \
      gpu-check-prof.log)
    rm -f gpu-check-prof.log
    [ -n "$line" ] || status=1
    echo "$line"
    [ $skipped -eq 1 ] ||
      note "profile device_prefetch $kd: $(echo "$line" | grep -m1 -E 'gpu idle|verdict' | tr -s ' ')"
  done
fi

echo "== Python: stoke.Loader(device=\"cuda\")"
if [ ! -d "$pydir/stoke" ]; then
  echo "no Python module built (headers, dlpack.h or numpy missing)"
  note "python: not built"
elif [ -n "$shim" ]; then
  PYTHONPATH=$pydir phase 60 python $py bench/gpu_check_torch.py --shim > gpu-check-py.log
  rc=$?; cat gpu-check-py.log; [ $rc -ne 0 ] && status=1
  while IFS= read -r l; do note "python (test driver):$l"; done < <(grep -E ': (ok|FAIL)|skipped' gpu-check-py.log)
  rm -f gpu-check-py.log
elif [[ "${torch:-}" == *" True "* ]]; then
  PYTHONPATH=$pydir phase 90 python $py bench/gpu_check_torch.py > gpu-check-py.log
  rc=$?; cat gpu-check-py.log; [ $rc -ne 0 ] && status=1
  while IFS= read -r l; do note "python:$l"; done < <(grep -E ': (ok|FAIL)|skipped' gpu-check-py.log)
  rm -f gpu-check-py.log
else
  echo "torch with CUDA is not in $py: the Python checks need it"
  note "python: not run (no torch with CUDA)"
fi
return $status
}

finish() {
  local rc=$1
  echo "== summary ($(( $(date +%s) - start )) s of $budget, status $rc)"
  for l in "${summary[@]}"; do echo "  $l"; done
}

if [ -n "${OUT:-}" ]; then
  { main; rc=$?; finish $rc; exit $rc; } 2>&1 | tee "$OUT/gpu_check.log"
  exit "${PIPESTATUS[0]}"
fi
main; rc=$?; finish $rc; exit $rc
