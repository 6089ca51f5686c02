#!/usr/bin/env bash
# bench/gpu_check.sh without a GPU: on a machine with none it says so and
# exits 0 having measured nothing; pointed at the test CUDA driver
# (GPU_CHECK_SHIM) it runs its Python checks (bench/gpu_check_torch.py
# --shim: output="stoke" read on a side stream, cuda_stream=2, device 1 of
# two) bit for bit against the host path, and prints its summary.  Both on
# this build tree (GPU_CHECK_BUILD), so nothing is built here.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "$(dirname "$STOKE")" && pwd)
mkdir -p "$TMP/bin"
printf '#!/bin/sh\nexit 9\n' > "$TMP/bin/nvidia-smi"   # lists no GPU
chmod +x "$TMP/bin/nvidia-smi"

say "a budget that is not a number of seconds is a usage error"
bash "$ROOT/bench/gpu_check.sh" soon > "$TMP/out" 2> "$TMP/err" && rc=0 || rc=$?
[ "$rc" -eq 2 ] || fail "exit $rc, expected 2"
grep -q "usage: .*gpu_check.sh \[SECONDS\]" "$TMP/err" || fail "$(cat "$TMP/err")"

say "no GPU: a clear message, exit 0, nothing measured"
PATH="$TMP/bin:$PATH" GPU_CHECK_BUILD=$BUILD bash "$ROOT/bench/gpu_check.sh" 60 \
  > "$TMP/out" 2>&1 && rc=0 || rc=$?
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/out")"
grep -q "^no GPU here (nvidia-smi lists none): nothing to measure" "$TMP/out" ||
  fail "no message: $(cat "$TMP/out")"
grep -q "^== summary (.* s of 60, status 0)" "$TMP/out" || fail "$(cat "$TMP/out")"
grep -q "^  no GPU: nothing measured (GPU figures unmeasured)" "$TMP/out" ||
  fail "summary: $(cat "$TMP/out")"
! grep -q "== stoke_gpu_check\|== Python" "$TMP/out" || fail "it ran checks"

# The Python module is not built under TSan, and under ASan the interpreter
# would need the sanitizer preloaded: the Python half runs in plain builds.
if [ -n "${STOKE_TEST_SANITIZE:-}" ] || [ ! -d "$BUILD/python/stoke" ]; then
  say "the Python checks on the test driver: skipped (no plain Python module)"
  exit 0
fi
say "on the test driver: the Python checks, bit for bit, and the summary"
PATH="$TMP/bin:$PATH" GPU_CHECK_SHIM=$STOKE_TEST_SHIM STOKE_SHIM_DEVICES=2 \
  GPU_CHECK_BUILD=$BUILD bash "$ROOT/bench/gpu_check.sh" 120 > "$TMP/out" 2>&1 && rc=0 || rc=$?
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/out")"
for want in "output='stoke' read on a side stream: ok" \
            "cuda_stream=2 (the per-thread default stream): ok" \
            "device='cuda:1': ok"; do
  grep -q "^  python (test driver):  $want" "$TMP/out" ||
    fail "summary lacks \"$want\": $(cat "$TMP/out")"
done
grep -q "^== summary (.* s of 120, status 0)" "$TMP/out" || fail "$(cat "$TMP/out")"
exit 0
