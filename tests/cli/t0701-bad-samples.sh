#!/usr/bin/env bash
# Bad samples through the CLI: --on-error fail (the default, unchanged),
# skip and replace; the failure budget; the report and the JSON name each
# bad sample (file, index, why, what was done); --quarantine records them
# and later runs do not read them; stoke inspect --verify finds them all.
. "$(dirname "$0")/lib.sh"

"$PY" -c 'import PIL' 2>/dev/null || { echo "python3-pil missing"; exit 77; }
say "an ImageFolder of 24 JPEGs, one cut short, one not an image"
make_jpeg_folder "$TMP/train" 12 ant bee
"$PY" - "$TMP/train" <<'PYEOF'
import os, sys
root = sys.argv[1]
p = os.path.join(root, "bee", "3.jpg")
data = open(p, "rb").read()
open(p, "wb").write(data[:len(data) // 3])
open(os.path.join(root, "ant", "7.jpg"), "wb").write(b"not a jpeg at all")
PYEOF

say "fail (the default): the first bad sample ends the run, naming it"
run_stoke bench "$TMP/train" -b 4 -j 2 --shuffle
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
grep -Eq '^stoke: sample (9|17) \(.*/(ant/7|bee/3)\.jpg\) \(epoch 0, batch [0-9]+\) failed: ' "$TMP/err" ||
  fail "message: $(cat "$TMP/err")"
check_messages

say "replace: every batch keeps its size; the report and the JSON name both"
run_stoke bench "$TMP/train" -b 4 -j 2 --shuffle --on-error replace \
  --max-failures 2 --json "$TMP/r.json"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
grep -q '^  bad samples   4: 4 failed to read or decode, 0 listed in the quarantine; skipped 0, replaced 4' "$TMP/out" ||
  fail "report: $(cat "$TMP/out")"
grep -q 'ant/7.jpg), epoch [01] batch [0-9]*: replaced by [0-9]*: not an image' "$TMP/out" ||
  fail "report: $(cat "$TMP/out")"
json_check "$TMP/r.json" '
c, b = d["config"], d["bad_samples"]
assert c["on_error"] == "replace" and c["max_failures"] == "2", c
assert b["policy"] == "replace" and b["budget"] == "2", b
assert b["failures"] == 4 and b["replaced"] == 4 and b["skipped"] == 0, b
assert b["quarantine"] is None and b["quarantined"] == 0, b
last = b["last"]
assert len(last) == 4, last
for e in last:
    assert e["index"] in (9, 17) and e["action"] == "replace", e
    assert e["where"].endswith(("ant/7.jpg", "bee/3.jpg")), e
    assert e["substitute"] is not None and e["substitute"] not in (9, 17), e
    assert e["reason"], e
# The same substitutes for the same epoch and index, whatever the timing.
subs = {(e["epoch"], e["index"]): e["substitute"] for e in last}
assert len(subs) == 4, subs
assert all(ep["samples"] == 24 for ep in d["epochs"]), d["epochs"]
'

say "replace with another worker count and prefetch: the same batches"
run_stoke bench "$TMP/train" -b 4 -j 2 --shuffle --on-error replace \
  --max-failures 2 --indices "$TMP/i2.txt" -q
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
run_stoke bench "$TMP/train" -b 4 -j 0 --prefetch 3 --shuffle \
  --on-error replace --max-failures 2 --indices "$TMP/i0.txt" -q
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
cmp -s "$TMP/i2.txt" "$TMP/i0.txt" || fail "replace depends on -j: $(diff "$TMP/i2.txt" "$TMP/i0.txt")"
[ "$(wc -l < "$TMP/i0.txt")" -eq 12 ] || fail "$(cat "$TMP/i0.txt")"

say "skip: the two batches holding them are one shorter"
run_stoke bench "$TMP/train" -b 4 -j 2 --on-error skip --max-failures 10% \
  --json "$TMP/s.json" -q
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/s.json" '
b = d["bad_samples"]
assert b["skipped"] == 4 and b["failures"] == 4 and b["budget"] == "10%", b
assert all(ep["samples"] == 22 for ep in d["epochs"]), d["epochs"]
'

say "the counters are of what was handed out: the same at -j 1 and -j 3, every run"
# The next epoch is prefetched while one is consumed; the bad samples the
# workers meet there count only once their batch is handed out, so the
# last epoch's prefetch (never consumed) used to add to the counts.
for j in 1 3 1 3 3 1; do
  run_stoke bench "$TMP/train" -b 4 -j $j --shuffle --epochs 3 --on-error replace \
    --max-failures 10% --json "$TMP/d$j.json" -q
  [ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
  "$PY" - "$TMP/d$j.json" "$TMP/d.first.json" <<'PYEOF' || fail "-j $j: counters differ"
import json, os, sys
d = json.load(open(sys.argv[1]))
b = d["bad_samples"]
got = {k: b[k] for k in ("failures", "quarantined", "skipped", "replaced")}
got["last"] = [(e["epoch"], e["batch"], e["index"], e["substitute"]) for e in b["last"]]
got["samples"] = [ep["samples"] for ep in d["epochs"]]
assert got["failures"] == 6 and got["replaced"] == 6, got
if not os.path.exists(sys.argv[2]):
    json.dump(got, open(sys.argv[2], "w"))
first = json.load(open(sys.argv[2]))
first["last"] = [tuple(x) for x in first["last"]]
assert got == first, (got, first)
PYEOF
done

say "the budget: the default 1% of 24 samples is 1, so the second is an error"
run_stoke bench "$TMP/train" -b 4 -j 2 --on-error skip
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
grep -q '^stoke: too many bad samples: 2 in epoch 0, over the failure budget of 1 (1% of 24 samples); the last: sample ' "$TMP/err" ||
  fail "message: $(cat "$TMP/err")"
[ ! -e "$TMP/none.json" ] || fail "a JSON was left"

say "quarantine: the first run lists them, the next ones never read them"
run_stoke bench "$TMP/train" -b 4 -j 2 --on-error skip --max-failures 2 \
  --quarantine "$TMP/q.txt" --json "$TMP/q1.json" -q
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
grep -q '^stoke-quarantine 1$' "$TMP/q.txt" || fail "$(cat "$TMP/q.txt")"
grep -q '^kind folder$' "$TMP/q.txt" || fail "$(cat "$TMP/q.txt")"
grep -q '^samples 24$' "$TMP/q.txt" || fail "$(cat "$TMP/q.txt")"
[ "$(grep -c '^[0-9]' "$TMP/q.txt")" -eq 2 ] || fail "$(cat "$TMP/q.txt")"
json_check "$TMP/q1.json" '
b = d["bad_samples"]
# Epoch 0 reads them (2 failures); epoch 1 does not (2 quarantined).
assert b["failures"] == 2 and b["quarantined"] == 2, b
assert b["quarantine"].endswith("q.txt"), b
'
run_stoke bench "$TMP/train" -b 4 -j 2 --on-error replace \
  --quarantine "$TMP/q.txt" --json "$TMP/q2.json" -q
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/q2.json" '
b = d["bad_samples"]
assert b["failures"] == 0 and b["quarantined"] == 4 and b["replaced"] == 4, b
'
say "a quarantine of another dataset is refused"
mkdir -p "$TMP/other/x"
cp "$TMP/train/ant/0.jpg" "$TMP/other/x/"
run_stoke bench "$TMP/other" -b 1 --on-error skip --quarantine "$TMP/q.txt"
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
grep -q "quarantine .*q.txt was made for another dataset (folder, 24 samples" "$TMP/err" ||
  fail "message: $(cat "$TMP/err")"

say "inspect --verify: both found, the quarantine written, exit 1"
run_stoke inspect --verify "$TMP/train" -j 2 --quarantine "$TMP/v.txt" \
  --json "$TMP/v.json"
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1: $(cat "$TMP/err")"
grep -q '^verified 24 samples .*: 2 bad$' "$TMP/out" || fail "$(cat "$TMP/out")"
grep -q 'bee/3.jpg): JPEG: premature end of data' "$TMP/out" || fail "$(cat "$TMP/out")"
grep -q '^stoke: .*train: 2 bad samples, listed in .*v.txt$' "$TMP/err" ||
  fail "$(cat "$TMP/err")"
json_check "$TMP/v.json" '
v = d["verify"]
assert v["samples"] == 24 and v["bad"] == 2 and not v["crc_checked"], v
assert [e["index"] for e in v["first_bad"]] == [9, 17], v
'
[ "$(grep -c '^[0-9]' "$TMP/v.txt")" -eq 2 ] || fail "$(cat "$TMP/v.txt")"
grep -q "^$(sed -n 's/^fingerprint //p' "$TMP/q.txt")\$" <(sed -n 's/^fingerprint //p' "$TMP/v.txt") ||
  fail "verify and the loader disagree on the dataset's fingerprint"

say "inspect --verify on packed shards checks every CRC: one changed byte"
mkdir -p "$TMP/clean"
cp -r "$TMP/train/ant" "$TMP/train/bee" "$TMP/clean/"
rm "$TMP/clean/ant/7.jpg" "$TMP/clean/bee/3.jpg"
run_stoke pack "$TMP/clean" -o "$TMP/pk/t" --keep-bytes -q
[ "$rc" -eq 0 ] || fail "pack exit $rc: $(cat "$TMP/err")"
run_stoke inspect --verify "$TMP/pk/t-00000.stoke"
[ "$rc" -eq 0 ] || fail "clean shard: exit $rc: $(cat "$TMP/out")"
# The fifth sample's JFIF density (no decoder reads it): only its CRC tells.
"$PY" - "$TMP/pk/t-00000.stoke" <<'PYEOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
at = -1
for _ in range(5):
    at = b.index(b"JFIF\0", at + 1)
b[at + 9] ^= 1
open(p, "wb").write(bytes(b))
PYEOF
run_stoke bench "$TMP/pk/t-00000.stoke" -b 4 -q
[ "$rc" -eq 0 ] || fail "the loader should not see it: $(cat "$TMP/err")"
run_stoke inspect --verify "$TMP/pk/t-00000.stoke" --json "$TMP/pv.json"
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
grep -q '1 bad, every CRC-32 checked$' "$TMP/out" || fail "$(cat "$TMP/out")"
grep -q 'sample 4 (.*): .*CRC-32 mismatch' "$TMP/out" || fail "$(cat "$TMP/out")"

say "usage errors"
expect_usage "--on-error: expected fail, skip or replace" bench --synthetic tensor --on-error ignore
expect_usage "--max-failures: 0 would allow none" bench --synthetic tensor --max-failures 0
expect_usage "--max-failures: a share is at most 100%" bench --synthetic tensor --max-failures 150%
expect_usage "--quarantine: only with --verify" inspect "$TMP/train" --quarantine "$TMP/x.txt"
run_stoke help bench
grep -q -- '--on-error POLICY' "$TMP/out" || fail "help bench: $(cat "$TMP/out")"
grep -q -- '--resume FILE' "$TMP/out" || fail "help bench: $(cat "$TMP/out")"
run_stoke help inspect
grep -q -- '--verify' "$TMP/out" || fail "help inspect: $(cat "$TMP/out")"
echo ok
