#!/usr/bin/env bash
# ablate-exponent.sh: the exponent-rule ablation on the tiny fixture.
#
# Quantizes the fixture with RTN-max, RTN-search, GPTQ-max, GPTQ-search and
# GPTQ-hessian (the demo's GPTQ settings: the fixture calibration set, 128
# windows, the four eval corpora for the disjointness check), plus
# GPTQ-hessian with the lookahead cost, which only the Go API reaches (a
# long-tagged test writes it). Then it scores all six against the BF16
# source on the four fixture corpora in one `lfmq score` run, which prints
# every candidate's KL and top-1 agreement and the paired differences
# between every two candidates, and prints:
#   - per variant: quantize wall time, GPTQ solve time, mean GPTQ/RTN loss
#     ratio (same Hessian, plain-packer RTN as the baseline);
#   - the per-layer loss-ratio table of each GPTQ variant (from quantize);
#   - the score table and the paired comparisons.
#
# Usage: scripts/ablate-exponent.sh [OUT_DIR]
#   LFMQ=bin/lfmq      the binary (built by `make build`)
#   MAX_RECORDS=0      records scored per corpus (0 = all)
#   LOOKAHEAD=1        0 skips the lookahead variant (needs the Go toolchain)
set -euo pipefail

BIN=${LFMQ:-bin/lfmq}
OUT=${1:-ablate-out}
MAX_RECORDS=${MAX_RECORDS:-0}
LOOKAHEAD=${LOOKAHEAD:-1}
TINY=testdata/tiny-lfm2-moe
CALIB=(--calib "$TINY/calibration/calibration.jsonl" --calib-seqs 128)
EVAL=()
CORPORA=()
for c in chat instruct code book; do
	EVAL+=(--eval-corpus "$c=$TINY/corpora/$c.jsonl")
	CORPORA+=(--corpus "$c=$TINY/corpora/$c.jsonl")
done

mkdir -p "$OUT"
ABS_OUT=$(cd "$OUT" && pwd)
TIMES="$OUT/times.tsv"
printf 'variant\twall_s\n' >"$TIMES"

# quantize NAME ARGS...: one variant, its stdout kept in OUT/NAME.log.
quantize() {
	local name=$1
	shift
	rm -rf "${OUT:?}/$name"
	local t0 t1
	t0=$(date +%s.%N)
	"$BIN" quantize --model "$TINY/model" --out "$OUT/$name" "$@" >"$OUT/$name.log"
	t1=$(date +%s.%N)
	printf '%s\t%.1f\n' "$name" "$(echo "$t1 - $t0" | bc)" >>"$TIMES"
}

quantize rtn-max --method rtn
quantize rtn-search --method rtn --exponent-rule search
quantize gptq-max "${CALIB[@]}" "${EVAL[@]}" --exponent-rule max
quantize gptq-search "${CALIB[@]}" "${EVAL[@]}" --exponent-rule search
quantize gptq-hessian "${CALIB[@]}" "${EVAL[@]}" --exponent-rule hessian
CANDS=(rtn-max rtn-search gptq-max gptq-search gptq-hessian)
if [ "$LOOKAHEAD" = 1 ]; then
	rm -rf "${OUT:?}/gptq-hessian-lookahead"
	t0=$(date +%s.%N)
	go test -count=1 -tags long -run '^TestAblateHessianLookahead$' -v ./quant/ \
		-args -ablate.out="$ABS_OUT/gptq-hessian-lookahead" >"$OUT/gptq-hessian-lookahead.log"
	t1=$(date +%s.%N)
	printf '%s\t%.1f\n' gptq-hessian-lookahead "$(echo "$t1 - $t0" | bc)" >>"$TIMES"
	CANDS+=(gptq-hessian-lookahead)
fi

SCORE_ARGS=()
for c in "${CANDS[@]}"; do
	SCORE_ARGS+=(--candidate "$c=$OUT/$c")
done
"$BIN" score --reference "$TINY/model" "${SCORE_ARGS[@]}" "${CORPORA[@]}" \
	--max-records "$MAX_RECORDS" --out "$OUT/score.json" >"$OUT/score.md"

echo "== cost and loss ratio per variant (quantize wall time includes the calibration forward; solves are GPTQ's)"
printf '%-24s %10s %10s %12s\n' variant wall_s solve_s mean_ratio
tail -n +2 "$TIMES" | while IFS=$'\t' read -r name wall; do
	solve=- ratio=-
	case $name in
	gptq-hessian-lookahead)
		line=$(grep -o 'mean ratio [0-9.]*, solves [0-9.]*s' "$OUT/$name.log" || true)
		ratio=$(echo "$line" | awk '{print $3}' | tr -d ,)
		solve=$(echo "$line" | awk '{print $5}' | tr -d s)
		;;
	gptq-*)
		solve=$(grep -o 'solves [0-9.]*s' "$OUT/$name.log" | awk '{print $2}' | tr -d s)
		ratio=$(awk '$1 == "all" {print $2}' "$OUT/$name.log")
		;;
	esac
	printf '%-24s %10s %10s %12s\n' "$name" "$wall" "$solve" "$ratio"
done
echo
for c in gptq-max gptq-search gptq-hessian; do
	echo "== per-layer GPTQ/RTN loss ratio, $c"
	sed -n '/^GPTQ loss \/ RTN loss/,/^time:/p' "$OUT/$c.log"
	echo
done
if [ "$LOOKAHEAD" = 1 ]; then
	echo "== per-layer GPTQ/RTN loss ratio, gptq-hessian-lookahead"
	grep -o 'layer [0-9]*: mean ratio.*' "$OUT/gptq-hessian-lookahead.log" || true
	echo
fi
echo "== lfmq score ($([ "$MAX_RECORDS" = 0 ] && echo "all records" || echo "first $MAX_RECORDS records per corpus"))"
cat "$OUT/score.md"
