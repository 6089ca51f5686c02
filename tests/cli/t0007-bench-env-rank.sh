#!/bin/bash
# --rank and --world default to torchrun's RANK and WORLD_SIZE; the options
# win over the environment.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

say "RANK=1 WORLD_SIZE=4: rank 1 of 4 gets 16 of 64 samples"
rc=0
RANK=1 WORLD_SIZE=4 "$STOKE" bench --synthetic tensor --samples 64 -b 4 -q \
  --json "$TMP/e.json" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/e.json" '
c = d["config"]
assert c["rank"] == 1 and c["world"] == 4, c
assert all(e["samples"] == 16 and e["batches"] == 4 for e in d["epochs"])
'

say "--rank 0 --world 2 override the environment"
rc=0
RANK=3 WORLD_SIZE=4 "$STOKE" bench --synthetic tensor --samples 64 -b 4 -q \
  --rank 0 --world 2 --json "$TMP/o.json" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/o.json" '
c = d["config"]
assert c["rank"] == 0 and c["world"] == 2, c
assert all(e["samples"] == 32 for e in d["epochs"])
'

say "without the environment: rank 0 of 1"
rc=0
env -u RANK -u WORLD_SIZE "$STOKE" bench --synthetic tensor --samples 64 \
  -b 4 -q --json "$TMP/z.json" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
json_check "$TMP/z.json" '
c = d["config"]
assert c["rank"] == 0 and c["world"] == 1, c
assert all(e["samples"] == 64 for e in d["epochs"])
'
echo ok
