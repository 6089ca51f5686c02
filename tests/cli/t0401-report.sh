#!/bin/bash
# stoke report: a small profile and a tune merged into one HTML page.  The
# page parses as HTML, each inline SVG parses as XML, it carries the verdict
# and the JSON's numbers, it references nothing on the network, and bad
# inputs fail with exit 1 (I/O, JSON) or 2 (usage) and leave no page.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

say "profile and tune runs for the report"
run_stoke profile --synthetic sleep:1ms --samples 256 -b 16 -j 2 \
  --compute sleep:2ms -q --json "$TMP/p.json"
[ "$rc" -eq 0 ] || fail "profile: exit $rc: $(cat "$TMP/err")"
run_stoke tune --synthetic sleep:1ms --samples 64 -b 4 --compute sleep:2ms \
  --max-workers 4 -q --json "$TMP/t.json"
[ "$rc" -eq 0 ] || fail "tune: exit $rc: $(cat "$TMP/err")"
run_stoke bench --synthetic sleep:1ms --samples 64 -b 8 -j 1 \
  --compute sleep:1ms -q --json "$TMP/b.json"
[ "$rc" -eq 0 ] || fail "bench: exit $rc: $(cat "$TMP/err")"

say "report p.json t.json -o r.html"
run_stoke report "$TMP/p.json" "$TMP/t.json" -o "$TMP/r.html"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
[ ! -s "$TMP/out" ] || fail "wrote to stdout: $(cat "$TMP/out")"
[ -s "$TMP/r.html" ] || fail "no page"

# Checks shared by every page: HTML parses with balanced tags, every <svg>
# parses as XML, no network reference, no script.
PAGE_CHECK='
import html.parser, re, sys, xml.dom.minidom
path = sys.argv[1]
with open(path, encoding="utf-8") as f:
    page = f.read()
VOID = {"meta", "br", "hr", "img", "input", "link", "col", "wbr"}
class P(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []
        self.text = []
        self.svg = 0
    def handle_starttag(self, tag, attrs):
        if tag in VOID: return
        self.stack.append(tag)
        if tag == "svg": self.svg += 1
    def handle_startendtag(self, tag, attrs):
        pass
    def handle_endtag(self, tag):
        if tag in VOID: return
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-6:])
        self.stack.pop()
    def handle_data(self, d):
        self.text.append(d)
p = P()
p.feed(page)
p.close()
assert not p.stack, p.stack
assert page.startswith("<!DOCTYPE html>")
svgs = re.findall(r"<svg\b.*?</svg>", page, re.S)
assert len(svgs) == p.svg and svgs, (len(svgs), p.svg)
for s in svgs:
    xml.dom.minidom.parseString(s)
urls = re.findall(r"https?://[^\"\x27 <>]*", page)
assert all(u == "http://www.w3.org/2000/svg" for u in urls), set(urls)
assert "<script" not in page.lower()
assert not re.search(r"\b(src|href)\s*=", page), "external reference"
text = " ".join(p.text)
'
page_check() { # FILE PYTHON
  "$PY" - "$1" "$PAGE_CHECK$2" <<'PYEOF' || fail "page check failed on $1"
import sys
exec(sys.argv[2])
PYEOF
}

say "the page parses, its SVGs parse, and it has the verdict and the numbers"
page_check "$TMP/r.html" '
import json
d = json.load(open(sys.argv[1].replace("r.html", "p.json")))
t = json.load(open(sys.argv[1].replace("r.html", "t.json")))
s = d["summary"]
assert "starving \u2014 waiting" in text, "no verdict headline"
assert s["verdict_reason"].split(": ", 1)[1] in text, "no verdict reason"
assert "%.2f ms" % s["wait_p95_ms"] in text, "no p95"
assert "p95 %.3f ms" % s["wait_p95_ms"] in text, "no p95 in the caption"
for a in d["diagnosis"]["advice"]:
    assert a["text"].split(": ", 1)[1] in text, a["text"]
pr = d["diagnosis"]["prediction"]
assert "predicted step %.3f ms" % (pr["predicted_step_ns"] / 1e6) in text
assert "%.3f ms" % (pr["measured_step_ns"] / 1e6) in text
for name in ("Wait and compute per epoch", "Wait per step",
             "Stage breakdown", "What if", "Tune: throughput"):
    assert name in text, name
assert "epoch 0 (warm-up)" in text
# profile's JSON carries the wait's buckets: a real histogram is drawn
assert d["summary"]["wait_histogram"], "no buckets in the JSON"
assert "wait per step: histogram" in text.lower()
assert t["knee"]["flags"] in text and t["knee"]["pytorch"]["call"] in text
assert "%.1f" % t["knee"]["samples_per_s"] in text
assert d["machine"]["cpu"] in text and d["machine"]["kernel"] in text
assert len(re.findall(r"<svg\b", page)) == 4, "expected 4 charts"
'

say "a bench JSON alone, and output to stdout"
run_stoke report "$TMP/b.json" -o -
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
cp "$TMP/out" "$TMP/b.html"
page_check "$TMP/b.html" '
assert "stoke profile" in text  # the hint that profile gives advice
assert "What if" not in text and "Tune:" not in text
assert len(re.findall(r"<svg\b", page)) == 3
'

say "older JSON without most keys, and hostile strings, are drawn safely"
"$PY" - "$TMP/p.json" "$TMP/old.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
del d["stages"], d["diagnosis"]
for k in ("wait_p99_ms", "queue_empty_frac", "samples_per_s"):
    del d["summary"][k]
d["summary"]["verdict_reason"] = "starving: <script>alert(1)</script> & \"x\""
d["machine"]["cpu"] = "</svg><b>cpu</b>"
d["config"]["compute"] = 42
d["epochs"][0]["wait_s"] = "oops"
json.dump(d, open(sys.argv[2], "w"))
PYEOF
run_stoke report "$TMP/old.json" -o "$TMP/old.html"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
page_check "$TMP/old.html" '
assert "<script>alert(1)</script>" in text, "reason not shown as text"
assert "</svg><b>cpu</b>" in text
'

say "a histogram in the JSON is drawn as one"
"$PY" - "$TMP/p.json" "$TMP/h.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["summary"]["wait_histogram"] = [
    {"lo_ms": 2 ** (i / 4), "hi_ms": 2 ** ((i + 1) / 4), "count": c}
    for i, c in enumerate([0, 1, 3, 7, 12, 20, 9, 4, 1, 0, 1])]
json.dump(d, open(sys.argv[2], "w"))
PYEOF
run_stoke report "$TMP/h.json" -o "$TMP/h.html"
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
page_check "$TMP/h.html" 'assert "from the JSON\x27s buckets" in text'

say "errors: exit 1 for unreadable, not JSON, wrong JSON; no page left"
printf 'not json {' >"$TMP/bad.json"
printf '[1, 2, 3]\n' >"$TMP/list.json"
printf '{"hello": "world"}\n' >"$TMP/other.json"
printf '{"summary": {}} trailing' >"$TMP/trail.json"
: >"$TMP/empty.json"
for bad in "$TMP/missing.json" "$TMP/bad.json" "$TMP/list.json" \
  "$TMP/other.json" "$TMP/trail.json" "$TMP/empty.json" "$TMP"; do
  rm -f "$TMP/x.html"
  run_stoke report "$TMP/p.json" "$bad" -o "$TMP/x.html"
  [ "$rc" -eq 1 ] || fail "$bad: exit $rc, expected 1: $(cat "$TMP/err")"
  grep -qF "'$bad'" "$TMP/err" || fail "$bad: not named: $(cat "$TMP/err")"
  [ ! -e "$TMP/x.html" ] || fail "$bad: left a page behind"
  check_messages
done
grep -q 'not JSON' <(run_stoke report "$TMP/bad.json" -o "$TMP/x.html"; cat "$TMP/err") ||
  fail "no 'not JSON' message"
run_stoke report "$TMP/p.json" -o "$TMP/no/such/dir/r.html"
[ "$rc" -eq 1 ] || fail "unwritable output: exit $rc"
grep -q 'cannot write' "$TMP/err" || fail "no 'cannot write': $(cat "$TMP/err")"
check_messages

expect_usage "-o" report "$TMP/p.json"
expect_usage "JSON file" report -o "$TMP/r.html"
expect_usage "--bogus" report --bogus "$TMP/p.json" -o "$TMP/r.html"
expect_usage "same file" report "$TMP/p.json" -o "$TMP/p.json"

say "help"
run_stoke help report
[ "$rc" -eq 0 ] && grep -q '^usage: stoke report' "$TMP/out" ||
  fail "help report: $(cat "$TMP/out" "$TMP/err")"
run_stoke help
grep -q '^  report ' "$TMP/out" || fail "report not in 'stoke help'"
say "ok"
