#!/bin/bash
# Bad options and values: exit 2, a git-style message naming the option,
# nothing on stdout, and no run started.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

S=(--synthetic tensor --samples 8)

expect_usage "unknown option '--frobnicate'" bench "${S[@]}" --frobnicate
expect_usage "unknown option '-Z'" bench "${S[@]}" -Z
expect_usage "--workers: expected a number, got 'x'" bench "${S[@]}" --workers x
expect_usage "-j: expected a number, got 'many'" bench "${S[@]}" -j many
expect_usage "--workers: expected a number, got '-1'" bench "${S[@]}" --workers=-1
expect_usage "--batch-size: must be at least 1" bench "${S[@]}" --batch-size 0
expect_usage "-b: expected a number, got '3.5'" bench "${S[@]}" -b 3.5
expect_usage "--samples: missing value" bench --synthetic tensor --samples
expect_usage "--samples: expected a number, got '1e3'" bench --synthetic tensor --samples 1e3
expect_usage "--prefetch: must be between 1" bench "${S[@]}" --prefetch 0
expect_usage "--epochs: expected a number" bench "${S[@]}" --epochs two
expect_usage "--epochs: 1 epoch is all warm-up" bench "${S[@]}" --epochs 1
expect_usage "--seed: expected a number" bench "${S[@]}" --seed abc
expect_usage "--classes: must be at least 1" bench "${S[@]}" --classes 0
expect_usage "--shape: expected a shape" bench "${S[@]}" --shape 3xx32
expect_usage "--shape: expected a shape" bench "${S[@]}" --shape 3x0x32
expect_usage "--shape: at most 8 dimensions" bench "${S[@]}" --shape 1x1x1x1x1x1x1x1x1

say "durations"
expect_usage "--synthetic: '5' needs a unit" bench --synthetic sleep:5
expect_usage "--synthetic: unknown unit in '5parsecs'" bench --synthetic sleep:5parsecs
expect_usage "--synthetic: expected a duration" bench --synthetic spin:fast
expect_usage "--synthetic: expected a duration" bench --synthetic spin:-1ms
expect_usage "--compute: unknown unit in '12m'" bench "${S[@]}" --compute sleep:12m
expect_usage "--compute: 'spin' needs a time" bench "${S[@]}" --compute spin
expect_usage "--timeout: unknown unit" bench "${S[@]}" --timeout 5parsecs
expect_usage "--timeout: the resolution is 1ms" bench "${S[@]}" --timeout 10us

say "kinds"
expect_usage "--synthetic: unknown synthetic kind 'jpeg'" bench --synthetic jpeg
expect_usage "--synthetic: unknown synthetic kind 'slep'" bench --synthetic slep:5ms
expect_usage "--synthetic: tensor takes no cost" bench --synthetic tensor:5ms
expect_usage "--compute: unknown step kind 'gpu'" bench "${S[@]}" --compute gpu:12ms
expect_usage "--cost-dist: unknown cost distribution 'normal'" bench "${S[@]}" --cost-dist normal
expect_usage "--cost-dist: must be greater than 0" bench "${S[@]}" --cost-dist lognormal:0
expect_usage "--mem-budget: unknown unit in '8Gb'" bench "${S[@]}" --mem-budget 8Gb
expect_usage "--mem-budget: expected a size" bench "${S[@]}" --mem-budget lots

say "shards"
expect_usage "--rank: must be below --world (2), got 2" bench "${S[@]}" --rank 2 --world 2
expect_usage "--world: must be at least 1" bench "${S[@]}" --world 0
RANK=zero expect_usage "RANK: expected a number, got 'zero'" bench "${S[@]}"
WORLD_SIZE=0 expect_usage "WORLD_SIZE: must be at least 1" bench "${S[@]}"
RANK=3 WORLD_SIZE=2 expect_usage "--rank: must be below --world (2), got 3" bench "${S[@]}"

say "missing source, stray argument, flag with a value"
expect_usage "no data source" bench
expect_usage "give a dataset or --synthetic, not both" bench "${S[@]}" data/
expect_usage "one dataset only, got 'a/' and 'b/'" bench a/ b/
expect_usage "--transform: only for an image dataset" bench "${S[@]}" \
  --transform center-crop=8
expect_usage "--shuffle: expected uniform, block[=SIZE] or none, got 'yes'" \
  bench "${S[@]}" --shuffle=yes
expect_usage "--drop-last: takes no value" bench "${S[@]}" --drop-last=yes
expect_usage "unknown option '--nope'" demo --nope
expect_usage "unexpected argument 'x'" demo x
echo ok
