#!/usr/bin/env bash
# bench/gpu_carry.sh — a Release build for bench/gpu_check.sh to carry to a
# GPU machine that lacks libjpeg, libspng and cJSON's development files:
# .gpu-carry/bin/{stoke,stoke_gpu_check} (with the kernels' PTX, so nvcc
# must be here) and .gpu-carry/lib/ with the shared libraries they load
# that are not the C library's.  Carry `.gpu-carry` with the working tree.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
out=.gpu-carry
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cmake -S . -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DSTOKE_BUILD_TESTS=OFF \
  -DSTOKE_WITH_CUDA_KERNELS=ON >/dev/null
cmake --build "$out/build" -j2 --target stoke-cli stoke_gpu_check >/dev/null
cp "$out/build/stoke" "$out/build/stoke_gpu_check" "$out/bin/"
for f in "$out"/bin/*; do
  ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so' |
  xargs -r cp -L -t "$out/lib/"
rm -rf "$out/build"
echo "stoke $(git rev-parse --short HEAD), $(. /etc/os-release; echo "$PRETTY_NAME"), $(ldd --version | head -1)" >"$out/BUILD_INFO"
du -sh "$out"
ls "$out/bin" "$out/lib"
