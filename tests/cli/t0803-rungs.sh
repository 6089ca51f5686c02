#!/usr/bin/env bash
# The storage and sample-cost rungs through the CLI: pack --max-side and
# inspect's view of it, --cache on a folder (filled, then read), --echo,
# --shuffle block, --ram-cache, and the cost (--gpu-price) in the report
# and the JSON; their usage errors.
. "$(dirname "$0")/lib.sh"

"$PY" -c 'import PIL' 2>/dev/null || { echo "python3-pil missing"; exit 77; }
say "an ImageFolder: JPEGs 60 to 300 px a side"
make_jpeg_folder "$TMP/train" 6 ant bee

say "pack --max-side 100: the larger images resized, the header says so"
run_stoke pack "$TMP/train" -o "$TMP/r/small" --max-side 100 --quality 85 \
  --shard-size 20KB --json "$TMP/pack.json"
[ "$rc" -eq 0 ] || fail "pack exit $rc: $(cat "$TMP/err")"
json_check "$TMP/pack.json" '
assert d["samples"] == 12 and d["max_side"] == 100 and d["quality"] == 85, d
assert 0 < d["resized"] <= 12, d
assert d["bytes"] < d["bytes_in"], d
'
grep -q "resized .* images to a longer side of 100 px" "$TMP/out" ||
  fail "pack does not say it resized: $(cat "$TMP/out")"
run_stoke inspect "$TMP/r/small-*.stoke" --json "$TMP/inspect.json"
[ "$rc" -eq 0 ] || fail "inspect exit $rc: $(cat "$TMP/err")"
grep -q "resized at pack time to a longer side of at most 100 px, JPEG quality 85" \
  "$TMP/out" || fail "inspect does not show the resize: $(cat "$TMP/out")"
json_check "$TMP/inspect.json" '
p = d["packed"]
assert p["max_side"] == 100 and p["quality"] == 85 and not p["mixed"], p
assert p["resized_shards"] == p["shards"] >= 2, p
assert d["probed"]["restart_cuts"] == d["probed"]["jpeg"], d["probed"]
'
run_stoke pack "$TMP/train" -o "$TMP/l/train" --json "$TMP/lossless.json"
run_stoke inspect "$TMP/l/train-*.stoke"
grep -q "sizes as stored (no --max-side)" "$TMP/out" ||
  fail "inspect of a lossless pack: $(cat "$TMP/out")"

say "bench --cache: the first epoch fills it, later epochs read it"
T="random-resized-crop=32,flip,chw,u8"
run_stoke bench "$TMP/train" --transform "$T" -b 4 -j 2 --epochs 3 \
  --no-warmup --shuffle --cache "$TMP/cache" --json "$TMP/c1.json"
[ "$rc" -eq 0 ] || fail "bench --cache exit $rc: $(cat "$TMP/err")"
grep -q ", cache $TMP/cache" "$TMP/out" || fail "headline: $(head -1 "$TMP/out")"
# The writer works in the background: what it wrote by the report, and
# (destroy waits for its queue) all of it on disk after the run.
json_check "$TMP/c1.json" '
c = d["summary"]["cache"]
assert d["config"]["cache"].endswith("/cache"), d["config"]
assert 0 < c["written"] <= 12, c
'
ls "$TMP"/cache/*/*.stoke >/dev/null 2>&1 || fail "no shard under the cache"
ls "$TMP"/cache/*/*.tmp >/dev/null 2>&1 && fail "a .tmp left behind"
run_stoke bench "$TMP/train" --transform "$T" -b 4 -j 2 --epochs 2 \
  --no-warmup --cache "$TMP/cache" --json "$TMP/c2.json"
[ "$rc" -eq 0 ] || fail "bench --cache again exit $rc: $(cat "$TMP/err")"
json_check "$TMP/c2.json" '
c = d["summary"]["cache"]
assert c["hits"] >= 24 and c["written"] == 0 and c["samples"] == 12, c
'
grep -q "reads from the packed cache" "$TMP/out" || fail "no cache line"

say "bench --echo 3: steps and fresh samples apart"
run_stoke bench --synthetic tensor --samples 48 -b 8 -j 1 --epochs 2 \
  --echo 3 --echo-mode example --json "$TMP/e.json"
[ "$rc" -eq 0 ] || fail "bench --echo exit $rc: $(cat "$TMP/err")"
grep -q "echo          x3 (example): .* steps/s, .* fresh samples/s" \
  "$TMP/out" || fail "no echo line: $(cat "$TMP/out")"
# The text's rates are the JSON's: 18 steps for 48 fresh samples.
"$PY" - "$TMP/out" "$TMP/e.json" <<'PYEOF' || fail "the echo line's rates"
import json, re, sys
line = [l for l in open(sys.argv[1]) if l.strip().startswith("echo ")][0]
steps, fresh, handed = map(float, re.findall(r"([0-9.]+) (?:steps|fresh samples|samples)/s", line))
s = json.load(open(sys.argv[2]))["summary"]
assert abs(steps - s["steps_per_s"]) <= 0.051 + 1e-3 * steps, (line, s)
assert abs(fresh - s["fresh_samples_per_s"]) <= 0.051 + 1e-3 * fresh, (line, s)
assert abs(fresh / steps - 48 / 18) < 0.01, line
assert abs(handed / fresh - 3) < 0.01, line
PYEOF
json_check "$TMP/e.json" '
s, c = d["summary"], d["config"]
assert c["echo"] == 3 and c["echo_mode"] == "example", c
assert c["batches_per_epoch"] == 18, c
assert s["steps"] == 18 and s["samples"] == 144 and s["fresh_samples"] == 48, s
assert s["fresh_samples_per_s"] > 0 and s["steps_per_s"] > 0, s
'

say "bench --shuffle block=1KB: every sample once per epoch, in blocks"
run_stoke bench --synthetic tensor --samples 64 --shape 4 -b 8 -j 2 \
  --epochs 2 --shuffle block=256 --shuffle-window 2 --indices "$TMP/ix" \
  --json "$TMP/b.json"
[ "$rc" -eq 0 ] || fail "bench --shuffle block exit $rc: $(cat "$TMP/err")"
"$PY" - "$TMP/ix" <<'PYEOF' || fail "the block order is not a permutation"
import sys
ep = {}
for line in open(sys.argv[1]):
    e, b, n, *ix = map(int, line.split())
    ep.setdefault(e, []).extend(ix)
# Samples of 24 bytes (4 f32 and a label), blocks of 256 bytes: 11
# samples (the last 9); windows of 2 blocks: the order runs window after
# window, each exactly 2 whole blocks (the last maybe 1).
size = {}
for i in range(64):
    size[i // 11] = size.get(i // 11, 0) + 1
for e, ix in ep.items():
    assert sorted(ix) == list(range(64)), (e, ix)
    p = 0
    while p < 64:
        blocks = {ix[p] // 11, }
        q = p + 1
        while sum(size[b] for b in blocks) != q - p or len(blocks) < 2:
            if q == 64:
                break
            blocks.add(ix[q] // 11)
            q += 1
        assert len(blocks) <= 2 and sum(size[b] for b in blocks) == q - p, (e, p, ix)
        p = q
assert ep[0] != ep[1]
PYEOF
json_check "$TMP/b.json" '
c = d["config"]
assert c["order"] == "block" and c["block_bytes"] == 256 and c["block_window"] == 2, c
'

say "bench --ram-cache all: an evaluation transform is copied from RAM after epoch 0"
run_stoke bench "$TMP/train" --transform "resize=40,center-crop=32,chw,f32" \
  -b 4 -j 2 --epochs 3 --ram-cache all --json "$TMP/ram.json"
[ "$rc" -eq 0 ] || fail "bench --ram-cache exit $rc: $(cat "$TMP/err")"
json_check "$TMP/ram.json" '
assert d["summary"]["cache"]["ram_hits"] >= 12, d["summary"]["cache"]
'
run_stoke bench "$TMP/train" --transform "$T" -b 4 --ram-cache all
[ "$rc" -eq 1 ] || fail "ram cache of a random transform: exit $rc"
grep -q "deterministic" "$TMP/err" || fail "no reason: $(cat "$TMP/err")"

say "the cost: per sample, per epoch, and with --gpu-price the money"
run_stoke bench --synthetic sleep:1ms --samples 32 -b 8 -j 1 --epochs 2 \
  --compute sleep:2ms --gpu-price 2.50/h --json "$TMP/cost.json"
[ "$rc" -eq 0 ] || fail "bench --gpu-price exit $rc: $(cat "$TMP/err")"
grep -q "  cost          .* ms per sample, .* s per epoch; the consumer waits" \
  "$TMP/out" || fail "no cost line: $(cat "$TMP/out")"
grep -q '  at \$2.50/h    \$[0-9.]* per epoch, .*; waiting: \$[0-9]' "$TMP/out" ||
  fail "no price line: $(cat "$TMP/out")"
json_check "$TMP/cost.json" '
c = d["summary"]["cost"]
assert c["gpu_price_per_hour"] == 2.5, c
assert abs(c["per_epoch"] - c["seconds_per_epoch"] * 2.5 / 3600) < 1e-12, c
assert abs(c["wait_per_epoch"] - c["per_epoch"] * c["wait_share"]) < 1e-12, c
assert 0 <= c["wait_share"] <= 1 and c["seconds_per_sample"] > 0, c
assert d["config"]["gpu_price_per_hour"] == 2.5
'
run_stoke bench --synthetic tensor --samples 16 -b 8 --epochs 2 --json "$TMP/nop.json"
json_check "$TMP/nop.json" '
c = d["summary"]["cost"]
assert c["gpu_price_per_hour"] is None and c["per_epoch"] is None, c
'
say "stoke report renders the cost"
run_stoke report "$TMP/cost.json" -o "$TMP/r.html"
[ "$rc" -eq 0 ] || fail "report exit $rc: $(cat "$TMP/err")"
grep -q "waiting costs" "$TMP/r.html" || fail "the HTML has no cost"

say "usage errors"
expect_usage "--gpu-price" bench --synthetic tensor --gpu-price 2.5/week
expect_usage "--shuffle" bench --synthetic tensor --shuffle=sideways
expect_usage "--shuffle-window" bench --synthetic tensor --shuffle-window 4
expect_usage "--echo-mode" bench --synthetic tensor --echo-mode example
expect_usage "--echo" bench --synthetic tensor --echo 0
expect_usage "--quality" pack "$TMP/train" -o "$TMP/x/y" --quality 50
expect_usage "--max-side" pack "$TMP/train" -o "$TMP/x/y" --max-side 64 --keep-bytes
echo "ok"
