#!/bin/bash
# --metrics-file and --log-jsonl: Prometheus text that promtool accepts,
# written atomically (no temporary left beside it), and JSON lines that
# match docs/metrics.md's schema; bad paths are refused up front.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

say "bench --metrics-file --log-jsonl"
run_stoke bench --synthetic sleep:1ms --samples 64 -b 8 -j 2 --epochs 3 \
  --metrics-file "$TMP/stoke.prom" --metrics-every 1s \
  --log-jsonl "$TMP/run.jsonl" --log-every 4 -q
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
[ -s "$TMP/stoke.prom" ] || fail "no metrics file"
ls "$TMP" | grep -q 'stoke.prom.tmp' && fail "a temporary was left behind"

say "the metrics: names, labels, counts"
grep -q '^stoke_wait_seconds_total{rank="0",loader="stoke-cli"} ' \
  "$TMP/stoke.prom" || fail "no stoke_wait_seconds_total"
grep -q '^stoke_step_seconds{rank="0",loader="stoke-cli",quantile="0.95"} ' \
  "$TMP/stoke.prom" || fail "no step p95"
grep -q '^stoke_samples_total{rank="0",loader="stoke-cli"} 128$' \
  "$TMP/stoke.prom" || fail "samples: $(grep samples_total "$TMP/stoke.prom")"
grep -q '^stoke_epochs_total{rank="0",loader="stoke-cli"} 3$' \
  "$TMP/stoke.prom" || fail "epochs"

say "JSON lines: one per 4 steps and per epoch, each with the schema's keys"
python3 - "$TMP/run.jsonl" <<'PY' || fail "JSON lines do not match the schema"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
common = {"schema_version", "kind", "time", "rank", "loader", "epoch"}
steps_keys = common | {"step", "steps", "samples", "wait_s", "compute_s",
                       "wait_ratio", "queue_empty_frac", "wait_p50_ms",
                       "wait_p95_ms", "step_p50_ms", "step_p95_ms", "workers"}
epoch_keys = common | {"warmup", "warmup_ended", "seconds", "wait_s",
                       "compute_s", "batches", "samples"}
kinds = [l["kind"] for l in lines]
assert kinds.count("epoch") == 3, kinds
assert kinds.count("steps") == 24 // 4, kinds
for l in lines:
    assert l["schema_version"] == 1
    want = steps_keys if l["kind"] == "steps" else epoch_keys
    assert set(l) == want, sorted(set(l) ^ want)
    assert l["rank"] == 0 and l["loader"] == "stoke-cli"
ep = [l for l in lines if l["kind"] == "epoch"]
assert [e["epoch"] for e in ep] == [0, 1, 2]
assert ep[0]["warmup"] is True and ep[1]["warmup"] is False
assert all(e["batches"] == 8 and e["samples"] == 64 for e in ep)
st = [l for l in lines if l["kind"] == "steps"]
assert [s["step"] for s in st] == [4, 8, 12, 16, 20, 24]
assert st[-1]["steps"] == 16   # the warm-up epoch's 8 left out
PY

say "promtool accepts the metrics"
if command -v promtool >/dev/null; then
  promtool check metrics <"$TMP/stoke.prom" >"$TMP/promtool" 2>&1 ||
    fail "promtool: $(cat "$TMP/promtool")"
else
  echo "promtool missing (Debian's prometheus package): skipped" >&2
  exit 77
fi

say "bad paths fail before the run, naming the file"
run_stoke bench --synthetic tensor --samples 16 -b 8 --epochs 1 --no-warmup \
  --metrics-file "$TMP/no/such/dir/m.prom" -q
[ "$rc" -eq 1 ] || fail "exit $rc"
grep -q "no/such/dir/m.prom" "$TMP/err" || fail "$(cat "$TMP/err")"
run_stoke bench --synthetic tensor --samples 16 -b 8 --epochs 1 --no-warmup \
  --log-jsonl "$TMP/no/such/dir/l.jsonl" -q
[ "$rc" -eq 1 ] || fail "exit $rc"
grep -q "l.jsonl" "$TMP/err" || fail "$(cat "$TMP/err")"
run_stoke bench --synthetic tensor --samples 16 -b 8 --metrics-every 0s \
  --metrics-file "$TMP/m.prom" -q
[ "$rc" -eq 2 ] || fail "--metrics-every 0s: exit $rc"
echo ok
