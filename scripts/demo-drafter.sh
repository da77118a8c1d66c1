#!/usr/bin/env bash
# demo-drafter.sh BIN CHECKPOINT DRAFTER WORD_PROBLEMS OUT_DIR
#
# The drafted-decoding part of `make demo`: run the word problems in
# process on CHECKPOINT plainly and with the DSpark DRAFTER (every step
# verifying its whole block, and scheduled by cost as lfmq serve does),
# greedy and with the agentic preset's seeded sampling, at concurrency 1
# and 16; `lfmq eval compare` must find every text identical. Then one
# drafted generation with its statistics. On the tiny model a verify of
# many rows costs more than the tokens it keeps (2 cores, a model bound by
# arithmetic), so the scheduled runs draft little: the texts are what the
# demo shows; docs/drafting.md has the speed on real shapes.
set -euo pipefail
bin=$1 ckpt=$2 drafter=$3 problems=$4 out=$5

mkdir -p "$out"
common=(--model "$ckpt" --dataset "$problems" --limit 8 --max-tokens 40)
for preset in greedy agentic; do
	sampling=(--sampling-preset "$preset")
	if [ "$preset" = agentic ]; then
		sampling+=(--seed 7)
	fi
	"$bin" eval "${common[@]}" "${sampling[@]}" --concurrency 16 --label "$preset-plain-c16" --out "$out/$preset-plain-c16.json"
	"$bin" eval "${common[@]}" "${sampling[@]}" --concurrency 1 --drafter "$drafter" --draft-depth 5 --label "$preset-drafter-c1" --out "$out/$preset-drafter-c1.json"
	"$bin" eval "${common[@]}" "${sampling[@]}" --concurrency 16 --drafter "$drafter" --draft-depth 5 --label "$preset-drafter-c16" --out "$out/$preset-drafter-c16.json"
	"$bin" eval "${common[@]}" "${sampling[@]}" --concurrency 16 --drafter "$drafter" --label "$preset-scheduled-c16" --out "$out/$preset-scheduled-c16.json"
	echo "-- $preset: the same texts with the drafter on and off, at concurrency 1 and 16"
	"$bin" eval compare "$out/$preset-plain-c16.json" "$out/$preset-drafter-c1.json" "$out/$preset-drafter-c16.json" "$out/$preset-scheduled-c16.json" \
		--out "$out/gate-$preset.json"
done
echo "-- one drafted generation, every step verifying the whole block"
"$bin" generate --model "$ckpt" --drafter "$drafter" --draft-depth 5 --prompt "def fib(n):" --max-tokens 40 --stats
