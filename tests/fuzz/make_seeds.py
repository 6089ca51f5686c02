#!/usr/bin/python3
"""Seed inputs for the fuzz harnesses (tests/fuzz/fuzz_*.c), written into
OUT/<harness>/: the starting points of a campaign.  The checked-in corpus
(tests/fuzz/corpus/) is what a campaign kept of these and of what it found,
minimised with libFuzzer's -merge=1 (scripts/fuzz.sh).

    make_seeds.py STOKE_BINARY OUT

JPEG and PNG seeds end with 8 option bytes (the harnesses take the crop
from the last 8 bytes); packed seeds come from `stoke pack`, so their JPEGs
carry the restart markers the cut path reads."""
import io, os, struct, subprocess, sys, tarfile, tempfile
from PIL import Image

stoke, out = sys.argv[1], sys.argv[2]
OPTS = [bytes([0, 0, 255, 255, 0, 0, 0, 0]), bytes([40, 90, 60, 30, 1, 1, 0, 0]),
        bytes([200, 10, 20, 200, 3, 0, 0, 0])]


def put(harness, name, data):
    d = os.path.join(out, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def pattern(mode, w, h):
    img = Image.new("RGB", (w, h))
    img.putdata([((x * 7) % 256, (x // w * 5) % 256, (x * 13 % 97) * 2)
                 for x in range(w * h)])
    return img.convert(mode) if mode != "RGB" else img


def jpeg(img, **kw):
    b = io.BytesIO()
    img.save(b, "JPEG", **kw)
    return b.getvalue()


def png(img, **kw):
    b = io.BytesIO()
    img.save(b, "PNG", **kw)
    return b.getvalue()


jpegs = {
    "base420": jpeg(pattern("RGB", 64, 48), quality=80),
    "prog": jpeg(pattern("RGB", 40, 72), quality=70, progressive=True),
    "gray": jpeg(pattern("L", 33, 17), quality=90),
    "full444": jpeg(pattern("RGB", 48, 40), quality=85, subsampling=0),
    "h422": jpeg(pattern("RGB", 50, 30), quality=85, subsampling=1),
    "cmyk": jpeg(pattern("CMYK", 24, 24), quality=85),
    "tiny": jpeg(pattern("RGB", 1, 1)),
}
for k, (name, data) in enumerate(sorted(jpegs.items())):
    put("jpeg", name, data + OPTS[k % len(OPTS)])

rgba = pattern("RGB", 30, 20).convert("RGBA")
pal = pattern("RGB", 16, 16).convert("P")
pngs = {
    "rgb": png(pattern("RGB", 40, 30)),
    "rgba": png(rgba),
    "gray": png(pattern("L", 21, 13)),
    "pal_trns": png(pal, transparency=3),
    "gray16": png(pattern("L", 12, 9).convert("I;16")),
    "la": png(pattern("L", 10, 10).convert("LA")),
}
for k, (name, data) in enumerate(sorted(pngs.items())):
    put("png", name, data + OPTS[k % len(OPTS)])

# Packed shards, with a class table, of JPEGs (rewritten) and a PNG; their
# samples are also JPEG seeds with restart markers.
with tempfile.TemporaryDirectory() as tmp:
    for cls, items in (("ant", ["base420", "prog", "gray"]),
                       ("bee", ["full444", "h422"])):
        os.makedirs(os.path.join(tmp, "train", cls))
        for name in items:
            with open(os.path.join(tmp, "train", cls, name + ".jpg"), "wb") as f:
                f.write(jpegs[name])
    with open(os.path.join(tmp, "train", "bee", "p.png"), "wb") as f:
        f.write(pngs["rgb"])
    subprocess.run([stoke, "pack", os.path.join(tmp, "train"), "-o",
                    os.path.join(tmp, "pk"), "--shard-size", "16KB", "-j", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    shards = sorted(p for p in os.listdir(tmp) if p.endswith(".stoke"))
    for s in shards:
        data = open(os.path.join(tmp, s), "rb").read()
        put("packed", s, data)
        n, index_off = struct.unpack_from("<QQ", data, 16)[0], struct.unpack_from("<Q", data, 32)[0]
        for i in range(n):
            off, ln = struct.unpack_from("<QQ", data, index_off + 40 * i)
            fmt = struct.unpack_from("<I", data, index_off + 40 * i + 32)[0]
            if fmt == 1:
                put("jpeg", "rst-%s-%d" % (s, i), data[off:off + ln] + OPTS[i % 3])

# Tar shards: ustar, a GNU long name, pax records, a sample without a label.
def tar(fmt, members):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=fmt) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return b.getvalue()

small = jpegs["tiny"]
put("tar", "ustar", tar(tarfile.USTAR_FORMAT, [
    ("a/0001.jpg", small), ("a/0001.cls", b"3"), ("0002.png", pngs["gray"]),
    ("0002.cls", b" 7\n"), ("0003.txt", b"caption")]))
put("tar", "gnu_long", tar(tarfile.GNU_FORMAT, [
    ("d" * 120 + "/x.jpg", small), ("d" * 120 + "/x.cls", b"1")]))
put("tar", "pax", tar(tarfile.PAX_FORMAT, [
    ("p" * 130 + ".jpeg", small), ("p" * 130 + ".cls", b"-2"),
    ("q.webp", b"RIFF"), ("q.cls", b"0")]))

specs = ["random-resized-crop=224,flip,normalize=imagenet,chw,f32",
         "random-resized-crop=48x40,scale=0.5:1,ratio=0.75:1.333,hwc,f16",
         "resize=80,center-crop=64,chw,u8", "center-crop=16,flip=0.25",
         "random-resized-crop=7,normalize=0.5:0.5:0.5/0.2:0.2:0.2,f32"]
for k, s in enumerate(specs):
    put("transform", "spec%d" % k,
        s.encode() + b"\0" + bytes([k * 37 % 256, 1, k * 11, 0, k, 9]))

argvs = [["--synthetic", "sleep:5ms", "--samples", "256", "-b", "32", "-j", "8"],
         ["data/", "--transform", "center-crop=64,hwc", "--epochs", "3", "--json", "-"],
         ["--synthetic", "spin:1.5ms", "--cost-dist", "lognormal:0.5", "--shape",
          "3x32x32", "--compute", "sleep:80ms", "--prefetch=4", "-qj2"],
         ["--synthetic=tensor", "--mem-budget", "8GiB", "--rank", "1", "--world", "4",
          "--shuffle", "--drop-last", "--", "-x"],
         ["--workers", "auto", "--sample-timeout", "5s", "--no-warmup", "--help"]]
for k, a in enumerate(argvs):
    put("cli", "args%d" % k, b"\0".join(x.encode() for x in a))
