#!/usr/bin/env bash
# Image datasets through the CLI: inspect, pack, and bench on the folder,
# packed shards and tar shards; bad files and bad specs get clear errors.
. "$(dirname "$0")/lib.sh"

"$PY" -c 'import PIL' 2>/dev/null || { echo "python3-pil missing"; exit 77; }
say "a small ImageFolder: 3 classes of JPEGs, one PNG, one text file"
make_jpeg_folder "$TMP/train" 6 ant bee cow
"$PY" - "$TMP/train" <<'PYEOF'
import os, sys
from PIL import Image
root = sys.argv[1]
Image.new("RGB", (40, 30), (9, 90, 200)).save(os.path.join(root, "cow", "p.png"))
open(os.path.join(root, "bee", "notes.txt"), "w").write("hello\n")
PYEOF

say "inspect: samples, classes, skipped files, one batch"
run_stoke inspect "$TMP/train" --json "$TMP/inspect.json"
[ "$rc" -eq 0 ] || fail "inspect exit $rc: $(cat "$TMP/err")"
json_check "$TMP/inspect.json" '
assert d["kind"] == "folder" and d["samples"] == 19, d
assert [c["name"] for c in d["classes"]] == ["ant", "bee", "cow"]
assert [c["count"] for c in d["classes"]] == [6, 6, 7]
assert d["probed"]["jpeg"] == 18 and d["probed"]["png"] == 1
assert d["probed"]["restart_cuts"] == 0, d["probed"]  # PIL writes none
assert len(d["skipped"]) == 1 and d["skipped"][0]["path"].endswith("notes.txt")
img = d["batch"][0]
assert img["shape"] == [8, 3, 224, 224] and img["dtype"] == "u8", img
assert img["bytes"] == 8 * 3 * 224 * 224 and img["pinned"] is False
'

say "pack into several shards; bench reads the folder, the shards and a tar"
run_stoke pack "$TMP/train" -o "$TMP/pk/train" --shard-size 40KB --json "$TMP/pack.json"
[ "$rc" -eq 0 ] || fail "pack exit $rc: $(cat "$TMP/err")"
json_check "$TMP/pack.json" '
assert d["samples"] == 19 and d["shards"] >= 2 and d["classes"] == 3, d
# JPEGs are rewritten for restart cuts unless --keep-bytes; PNGs never.
assert d["jpegs_rewritten"] > 0 and d["jpegs_kept"] == 0, d
assert d["bytes_in"] > 0 and d["bytes"] > 0, d
'
run_stoke pack "$TMP/train" -o "$TMP/pk-kept/train" --keep-bytes --json "$TMP/kept.json"
[ "$rc" -eq 0 ] || fail "pack --keep-bytes exit $rc: $(cat "$TMP/err")"
json_check "$TMP/kept.json" '
assert d["jpegs_rewritten"] == 0 and d["bytes"] == d["bytes_in"], d
'
say "packed shards pack again (re-sharded, JPEGs already cut-ready), not onto themselves"
run_stoke pack "$TMP/pk/train-*.stoke" -o "$TMP/pk2/one" --shard-size 0 -j 2 --json "$TMP/repack.json"
[ "$rc" -eq 0 ] || fail "re-pack exit $rc: $(cat "$TMP/err")"
json_check "$TMP/repack.json" '
assert d["shards"] == 1 and d["samples"] == 19 and d["classes"] == 3, d
assert d["jpegs_ready"] == 18 and d["jpegs_rewritten"] == 0, d
assert d["jpegs_kept"] == 0 and d["bytes"] == d["bytes_in"], d
'
run_stoke pack "$TMP/pk/train-*.stoke" -o "$TMP/pk/train"
[ "$rc" -eq 1 ] || fail "pack onto its source: exit $rc, expected 1"
grep -q "is one of the shards being read" "$TMP/err" ||
  fail "no reason given: $(cat "$TMP/err")"
# The same prefix spelled another way, with the shards under it not first
# in the source (pk-kept/ sorts before pk/): refused alike, nothing written.
sums=$(cat "$TMP"/pk/train-*.stoke | cksum)
run_stoke pack "$TMP/pk*/train-*.stoke" -o "$TMP/pk/../pk/train"
[ "$rc" -eq 1 ] || fail "pack onto later source shards: exit $rc, expected 1"
grep -q "is one of the shards being read" "$TMP/err" ||
  fail "no reason given: $(cat "$TMP/err")"
[ "$(cat "$TMP"/pk/train-*.stoke | cksum)" = "$sums" ] ||
  fail "the source shards changed"

say "packing again under a prefix that held more shards leaves only the new ones"
cp -r "$TMP/pk" "$TMP/pk3"
n_before=$(ls "$TMP"/pk3/train-*.stoke | wc -l)
run_stoke pack "$TMP/train" -o "$TMP/pk3/train" --shard-size 0 --json "$TMP/pk3.json"
[ "$rc" -eq 0 ] || fail "re-pack exit $rc: $(cat "$TMP/err")"
grep -q "removed $((n_before - 1)) shards an earlier pack left" "$TMP/out" ||
  fail "no word of the stale shards: $(cat "$TMP/out")"
json_check "$TMP/pk3.json" "
assert d['shards'] == 1 and d['stale_shards_removed'] == $n_before - 1, d
"
[ "$(ls "$TMP"/pk3/train-*.stoke)" = "$TMP/pk3/train-00000.stoke" ] ||
  fail "stale shards left: $(ls "$TMP"/pk3)"

say "inspect on packed shards: class names kept, every JPEG cut-ready"
run_stoke inspect "$TMP/pk/train-*.stoke" --json "$TMP/inspect-pk.json"
[ "$rc" -eq 0 ] || fail "inspect exit $rc: $(cat "$TMP/err")"
json_check "$TMP/inspect-pk.json" '
assert d["kind"] == "packed" and d["samples"] == 19, d
assert [c["name"] for c in d["classes"]] == ["ant", "bee", "cow"], d["classes"]
assert d["probed"]["jpeg"] == 18 and d["probed"]["restart_cuts"] == 18, d["probed"]
'
ls "$TMP"/pk/train-*.stoke >/dev/null || fail "no shard written"
ls "$TMP"/pk/*.tmp 2>/dev/null && fail "a .tmp file was left behind"
"$PY" - "$TMP" <<'PYEOF'
import glob, io, os, sys, tarfile
root = sys.argv[1]
files = sorted(glob.glob(os.path.join(root, "train", "*", "*.*")))
files = [f for f in files if not f.endswith(".txt")]
classes = sorted({os.path.basename(os.path.dirname(f)) for f in files})
with tarfile.open(os.path.join(root, "train-0000.tar"), "w") as t:
    for i, f in enumerate(files):
        ext = os.path.splitext(f)[1]
        t.add(f, arcname="%04d%s" % (i, ext))
        cls = str(classes.index(os.path.basename(os.path.dirname(f)))).encode()
        info = tarfile.TarInfo("%04d.cls" % i)
        info.size = len(cls)
        t.addfile(info, io.BytesIO(cls))
PYEOF
T=random-resized-crop=64,flip,normalize=imagenet,chw,f32
for data in "$TMP/train" "$TMP/pk/train-*.stoke" "$TMP/train-0000.tar"; do
  run_stoke bench "$data" --transform "$T" -b 4 -j 2 --epochs 2 --shuffle \
    --json "$TMP/b.json" -q
  [ "$rc" -eq 0 ] || fail "bench $data: exit $rc: $(cat "$TMP/err")"
  json_check "$TMP/b.json" '
c = d["config"]
assert c["source"] == "images" and c["transform"].startswith("random-resized"), c
assert all(e["samples"] == 19 and e["batches"] == 5 for e in d["epochs"]), d["epochs"]
names = [s["name"] for s in d["stages"]]
assert "decode" in names and "transform" in names, names
'
done

say "a shard whose last entry points 1 GiB away fails the bench cleanly"
cp "$TMP/pk2/one-00000.stoke" "$TMP/far.stoke"
"$PY" - "$TMP/far.stoke" <<'PYEOF'
import struct, sys, zlib
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n, index_off = struct.unpack_from("<Q", b, 16)[0], struct.unpack_from("<Q", b, 32)[0]
last = index_off + (n - 1) * 40
struct.pack_into("<Q", b, last, struct.unpack_from("<Q", b, last)[0] + (1 << 30))
struct.pack_into("<I", b, len(b) - 32 + 16, zlib.crc32(b[index_off:index_off + n * 40]))
open(p, "wb").write(b)
PYEOF
run_stoke bench "$TMP/far.stoke" -b 4 -j 2 -q
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1 (a signal is 128 + n): $(cat "$TMP/err")"
grep -q "far.stoke: entry 18: .* run past the data section" "$TMP/err" ||
  fail "not named: $(cat "$TMP/err")"

say "budget: the host ledger of an image loader"
run_stoke budget "$TMP/train" -b 4 -j 2 --transform center-crop=64,hwc,f32 \
  --json "$TMP/budget.json"
[ "$rc" -eq 0 ] || fail "budget exit $rc: $(cat "$TMP/err")"
json_check "$TMP/budget.json" '
h = d["host"]
assert h["batch_size"] == 4 and h["workers"] == 2, h
assert h["sample_bytes"] == 64 * 64 * 3 * 4 + 8, h  # image f32 + i64 label
assert h["total_bytes"] > 3 * 4 * h["sample_bytes"], h
'

say "a truncated JPEG fails its sample, naming the file"
head -c 300 "$TMP/train/ant/0.jpg" >"$TMP/t.jpg" && mv "$TMP/t.jpg" "$TMP/train/ant/0.jpg"
run_stoke bench "$TMP/train" -b 4 -j 2 --epochs 2 -q
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
grep -q "ant/0.jpg" "$TMP/err" || fail "file not named: $(cat "$TMP/err")"
grep -q "JPEG" "$TMP/err" || fail "cause not named: $(cat "$TMP/err")"

say "a broken header fails the pack, naming the file; nothing is left behind"
run_stoke pack "$TMP/train" -o "$TMP/pk-bad/t" -j 2
[ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
grep -q "ant/0.jpg" "$TMP/err" || fail "file not named: $(cat "$TMP/err")"
ls "$TMP"/pk-bad/* 2>/dev/null && fail "a failed pack left files behind"

say "pack keeps a JPEG whose data it cannot rewrite, naming it"
n=$(stat -c %s "$TMP/train/ant/2.jpg")
head -c $((n / 2)) "$TMP/train/ant/2.jpg" >"$TMP/train/ant/0.jpg"
run_stoke pack "$TMP/train" -o "$TMP/pk-trunc/t" -j 2 --json "$TMP/trunc.json"
[ "$rc" -eq 0 ] || fail "pack exit $rc: $(cat "$TMP/err")"
json_check "$TMP/trunc.json" '
assert d["jpegs_kept"] == 1 and "ant/0.jpg" in d["first_kept"], d
assert "premature end" in d["first_kept"], d
'
check_messages

say "a bad transform spec is a usage error pointing at the token"
run_stoke bench "$TMP/pk/train-*.stoke" --transform "center-crop=64,twirl"
[ "$rc" -ne 0 ] || fail "bad spec accepted"
grep -q "twirl" "$TMP/err" || fail "token not named: $(cat "$TMP/err")"
echo ok
