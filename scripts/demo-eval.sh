#!/usr/bin/env bash
# demo-eval.sh BIN CHECKPOINT WORD_PROBLEMS CHOICE_ITEMS EVIDENCE_DIR OUT_DIR
#
# The task-evidence part of `make demo`: serve the demo checkpoint twice,
# with speculation on and off, and run the project's word problems
# (GSM8K's format) with seed 1 and the reasoning preset at concurrency 1
# and 4 against them; `lfmq eval compare` must find every text identical
# (the release gate). Then score the multiple-choice items by likelihood in
# process. The results and the gate go to EVIDENCE_DIR, which the release
# built next shows on its card. The tiny model's accuracy is whatever it
# is: the machinery is what the demo shows.
set -euo pipefail
bin=$1 ckpt=$2 problems=$3 choices=$4 evidence=$5 out=$6

mkdir -p "$out" "$evidence"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT

# serve NAME SPECULATE: start lfmq serve on a free port; sets url.
url=""
serve() {
	local log="$out/serve-$1.log"
	"$bin" serve --model "$ckpt" --port 0 --speculate "$2" --max-num-seqs 4 >"$log" 2>&1 &
	pids+=($!)
	url=""
	for _ in $(seq 300); do
		url=$(sed -n 's/.*addr=\(http:[^ ]*\).*/\1/p' "$log" | head -1)
		if [ -n "$url" ] && curl -sf "$url/health" >/dev/null 2>&1; then
			return
		fi
		sleep 0.1
	done
	cat "$log" >&2
	exit 1
}
serve spec on
spec=$url
serve plain off
plain=$url

common=(--dataset "$problems" --limit 12 --seed 1 --sampling-preset reasoning --max-tokens 48)
"$bin" eval --url "$spec" "${common[@]}" --concurrency 1 --label "spec-on-c1" --out "$evidence/eval-spec-c1.json" --items "$out/eval-spec-c1.jsonl"
"$bin" eval --url "$spec" "${common[@]}" --concurrency 4 --label "spec-on-c4" --out "$evidence/eval-spec-c4.json"
"$bin" eval --url "$plain" "${common[@]}" --concurrency 4 --label "spec-off-c4" --out "$evidence/eval-nospec-c4.json"
echo "-- the gate: same texts at concurrency 1 and 4, speculation on and off"
"$bin" eval compare "$evidence/eval-spec-c1.json" "$evidence/eval-spec-c4.json" "$evidence/eval-nospec-c4.json" \
	--out "$evidence/gate-texts.json"
echo "-- multiple choice by likelihood, in process"
"$bin" eval --model "$ckpt" --task choice --dataset "$choices" --label "choice" --out "$evidence/eval-choice.json"
