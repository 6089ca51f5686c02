#!/bin/bash
# --worker-policy: the workers run under SCHED_BATCH by default (a worker
# woken to refill a slot never takes the training thread's core), 'normal'
# keeps the OS default; the JSON says which, and how many workers the OS
# put under it.  A bad value is refused naming the flag.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

for policy in default batch normal; do
  say "bench --worker-policy $policy"
  flag=()
  [ "$policy" = default ] || flag=(--worker-policy "$policy")
  run_stoke bench --synthetic sleep:200us --samples 128 -b 8 -j 3 \
    --compute none --epochs 2 -q --json "$TMP/$policy.json" "${flag[@]}"
  [ "$rc" -eq 0 ] || fail "exit $rc: $(cat "$TMP/err")"
  json_check "$TMP/$policy.json" "$BENCH_SCHEMA"
  want=$policy
  [ "$policy" = default ] && want=batch
  json_check "$TMP/$policy.json" "
c, s = d['config'], d['summary']
assert c['worker_policy'] == '$want', c
assert s['worker_policy'] == '$want', s
assert 1 <= s['workers_policy_applied'] <= 3, s
"
done

say "a bad policy is refused"
run_stoke bench --synthetic sleep:1ms --samples 16 -b 8 -j 2 \
  --worker-policy fifo
[ "$rc" -eq 2 ] || fail "exit $rc, want 2"
grep -q -- "--worker-policy: expected batch or normal, got 'fifo'" "$TMP/err" ||
  fail "message: $(cat "$TMP/err")"

say "stoke help bench names it"
run_stoke help bench
grep -q -- "--worker-policy P" "$TMP/out" || fail "help: no --worker-policy"
echo ok
