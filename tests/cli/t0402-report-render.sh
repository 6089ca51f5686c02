#!/bin/bash
# stoke report rendered by headless Chromium: the screenshot exists, is a
# real PNG of the page's size and is mostly not blank.  Skipped (77) when
# chromium is not installed.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || { say "skip: no chromium"; exit 77; }

say "profile, tune and the report"
run_stoke profile --synthetic sleep:1ms --samples 256 -b 16 -j 2 \
  --compute sleep:2ms -q --json "$TMP/p.json"
[ "$rc" -eq 0 ] || fail "profile: exit $rc: $(cat "$TMP/err")"
run_stoke tune --synthetic sleep:1ms --samples 64 -b 4 --compute sleep:2ms \
  --max-workers 4 -q --json "$TMP/t.json"
[ "$rc" -eq 0 ] || fail "tune: exit $rc: $(cat "$TMP/err")"
run_stoke report "$TMP/p.json" "$TMP/t.json" -o "$TMP/report.html"
[ "$rc" -eq 0 ] || fail "report: exit $rc: $(cat "$TMP/err")"

say "headless chromium screenshot"
timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic \
  --no-first-run --disable-background-networking --disable-component-update \
  --disable-sync --user-data-dir="$TMP/chrome" \
  --screenshot="$TMP/report.png" --window-size=1280,2000 \
  "file://$TMP/report.html" >"$TMP/chrome.log" 2>&1 ||
  fail "chromium failed: $(tail -5 "$TMP/chrome.log")"
[ -s "$TMP/report.png" ] || fail "no screenshot"
[ "$(wc -c <"$TMP/report.png")" -gt 20000 ] ||
  fail "screenshot too small: $(wc -c <"$TMP/report.png") bytes"

say "the PNG is 1280x2000 and mostly not blank"
"$PY" - "$TMP/report.png" <<'PYEOF' || fail "screenshot check failed"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, ihdr = 8, b"", None
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        ihdr = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
w, h, depth, ctype, _, _, interlace = ihdr
assert (w, h) == (1280, 2000), (w, h)
assert depth == 8 and ctype in (2, 6) and interlace == 0, ihdr
bpp = 3 if ctype == 2 else 4
raw = zlib.decompress(idat)
stride = w * bpp
rows, prev, i = [], bytearray(stride), 0
for y in range(h):
    ft = raw[i]; line = bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b = prev[x]; c = prev[x - bpp] if x >= bpp else 0
        if ft == 1: line[x] = (line[x] + a) & 255
        elif ft == 2: line[x] = (line[x] + b) & 255
        elif ft == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif ft == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pr = a if pa <= pb and pa <= pc else b if pb <= pc else c
            line[x] = (line[x] + pr) & 255
    rows.append(line); prev = line
# Rows of the page column (x 200..1080) that are not one flat colour
# (text, bars, lines, borders): a blank or failed render has almost none.
busy = sum(1 for r in rows[::4]
           if len(set(r[j] for j in range(200 * bpp, 1080 * bpp, bpp))) > 1)
frac = busy / len(rows[::4])
# Dark pixels (text) in the central column band.
dark = sum(1 for r in rows[::8] for j in range(300 * bpp, 1000 * bpp, bpp * 4)
           if r[j] < 100 and r[j + 1] < 100 and r[j + 2] < 100)
print("rows with content %.0f%%, dark samples %d" % (100 * frac, dark))
assert frac > 0.3, "mostly blank: %.2f" % frac
assert dark > 500, dark
PYEOF
say "ok"
