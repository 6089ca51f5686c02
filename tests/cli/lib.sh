# lib.sh — helpers for the CLI tests (sourced, not run).
#
# Each tNNNN-<name>.sh gets the path of the built stoke binary as $1, sources
# this file, says what it checks with `say`, and fails with `fail`.  Nothing
# here asserts a speed: only structure, counts and verdicts that hold by
# construction.

set -eu

STOKE=${1:?usage: $0 path/to/stoke}
PY=/usr/bin/python3
TMP=$(mktemp -d "${TMPDIR:-/tmp}/stoke-cli-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

say() { printf '* %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

# run_stoke ARGS...: run stoke, keep stdout/stderr in $TMP/out, $TMP/err and
# the exit status in $rc (never aborts the script).
run_stoke() {
  # shellcheck disable=SC2034  # read by the scripts
  rc=0
  "$STOKE" "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
}

# check_messages: every stderr line that starts with "stoke: " is git style:
# not capitalised after the prefix (an all-caps name such as RANK is fine),
# no final full stop.
check_messages() {
  if grep -E '^stoke: [A-Z][a-z]' "$TMP/err" >/dev/null; then
    fail "capitalised message: $(cat "$TMP/err")"
  fi
  if grep -E '^stoke: .*\.$' "$TMP/err" >/dev/null; then
    fail "message ends with a full stop: $(cat "$TMP/err")"
  fi
}

# expect_usage NEEDLE ARGS...: exit 2, nothing on stdout, and a message on
# stderr that contains NEEDLE (usually the option's name).
expect_usage() {
  needle=$1; shift
  say "usage error: stoke $* -> exit 2, names '$needle'"
  run_stoke "$@"
  [ "$rc" -eq 2 ] ||
    fail "stoke $*: exit $rc, expected 2; stderr: $(cat "$TMP/err")"
  [ ! -s "$TMP/out" ] || fail "stoke $*: wrote to stdout: $(cat "$TMP/out")"
  grep -F -e "$needle" "$TMP/err" >/dev/null ||
    fail "stoke $*: stderr does not name '$needle': $(cat "$TMP/err")"
  grep -E '^stoke: ' "$TMP/err" >/dev/null ||
    fail "stoke $*: no 'stoke: ' message: $(cat "$TMP/err")"
  check_messages
}

# make_jpeg_folder DIR N CLASS...: an ImageFolder of N JPEGs per class, each
# 60 to 300 pixels a side with a pattern and noise (python3-pil; the caller
# skips with 77 when it is missing).  The same files for the same arguments.
make_jpeg_folder() {
  "$PY" - "$@" <<'PYEOF'
import os, random, sys
from PIL import Image
root, n, classes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
rng = random.Random(1)
for c in classes:
    os.makedirs(os.path.join(root, c))
    for i in range(n):
        w, h = rng.randint(60, 300), rng.randint(60, 300)
        img = Image.new("RGB", (w, h))
        img.putdata([(x % 256, (x * 7) % 256, rng.randrange(256))
                     for x in range(w * h)])
        img.save(os.path.join(root, c, "%d.jpg" % i), quality=90)
PYEOF
}

# json_check FILE PYTHON: run PYTHON with `d` bound to the parsed FILE; it
# fails the test by raising (assert).
json_check() {
  "$PY" - "$1" "$2" <<'PYEOF' || fail "json check failed on $1"
import json, sys
with open(sys.argv[1]) as f:
    d = json.load(f)
exec(sys.argv[2])
PYEOF
}

# Checks every bench report must pass: the documented keys, one record per
# epoch, warm-up flags, the three stage fields and a known verdict.
# shellcheck disable=SC2034  # used by the scripts
BENCH_SCHEMA='
for k in ("config", "machine", "epochs", "summary", "stages"):
    assert k in d, k
for k in ("cpu", "cores", "memory_bytes", "kernel", "compiler",
          "stoke_version"):
    assert k in d["machine"], k
assert d["machine"]["cores"] >= 1
for k in ("synthetic", "samples", "shape", "cost_dist", "classes",
          "batch_size", "workers", "prefetch", "shuffle", "seed",
          "drop_last", "rank", "world", "out_of_order", "timeout_ms",
          "mem_budget_bytes", "epochs", "warmup_epochs", "compute"):
    assert k in d["config"], k
c = d["config"]
assert len(d["epochs"]) == c["epochs"], (len(d["epochs"]), c["epochs"])
for i, e in enumerate(d["epochs"]):
    for k in ("index", "warmup", "seconds", "wait_s", "compute_s",
              "batches", "samples"):
        assert k in e, k
    assert e["warmup"] == (i < c["warmup_epochs"]), e
    assert e["seconds"] >= 0 and e["wait_s"] >= 0 and e["compute_s"] >= 0
s = d["summary"]
for k in ("epoch_s", "samples_per_s", "wait_s", "compute_s", "wait_ratio",
          "wait_p50_ms", "wait_p95_ms", "wait_p99_ms", "wait_max_ms",
          "queue_empty_frac", "peak_rss_bytes", "verdict"):
    assert k in s, k
assert s["verdict"] in ("starving", "variance", "busy"), s["verdict"]
assert 0 <= s["wait_ratio"] <= 1 and 0 <= s["queue_empty_frac"] <= 1
# log-bucket percentiles may overshoot the exact max by their 1.6% error
assert (s["wait_p50_ms"] <= s["wait_p95_ms"] <= s["wait_p99_ms"]
        <= s["wait_max_ms"] * 1.02 + 1e-9), s
assert s["peak_rss_bytes"] > 0
names = [st["name"] for st in d["stages"]]
assert names == ["read", "decode", "transform", "slot_wait", "copy", "python", "gil_wait", "collate"], names
for st in d["stages"]:
    for k in ("total_s", "count", "mean_us", "p95_us"):
        assert k in st, k
measured = [e for e in d["epochs"] if not e["warmup"]]
assert s["samples"] == sum(e["samples"] for e in measured), s
'
