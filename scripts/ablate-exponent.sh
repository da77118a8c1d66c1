#!/usr/bin/env bash
# ablate-exponent.sh: the exponent-rule ablation on the tiny fixture.
#
# Quantizes the fixture with RTN-max, RTN-search, GPTQ-max, GPTQ-search and
# GPTQ-hessian (the demo's GPTQ settings: the fixture calibration set, 128
# windows, the four eval corpora for the disjointness check), plus
# GPTQ-hessian with the lookahead cost, which only the Go API reaches (a
# long-tagged test writes it), and GPTQ-search with the search for the BFP8
# dense tensors too. Then it scores all six against the BF16
# source on the four fixture corpora in one `lfmq score` run, which prints
# every candidate's KL and top-1 agreement and the paired differences
# between every two candidates, and prints:
#   - per variant: quantize wall time, GPTQ solve time, mean GPTQ/RTN loss
#     ratio over the 288 expert matrices (same Hessian, plain-packer RTN as
#     the baseline), and which variants wrote identical tensor bytes (those
#     are scored once, under the first name);
#   - the per-layer loss-ratio table of each GPTQ variant (from quantize);
#   - the score table and the paired comparisons.
#
# Usage: scripts/ablate-exponent.sh [OUT_DIR]
#   LFMQ=bin/lfmq      the binary (built by `make build`)
#   MAX_RECORDS=0      records scored per corpus (0 = all)
#   LOOKAHEAD=1        0 skips the lookahead variant (needs the Go toolchain)
#   REUSE=0            1 keeps checkpoints already in OUT_DIR (and their logs)
set -euo pipefail

BIN=${LFMQ:-bin/lfmq}
OUT=${1:-ablate-out}
MAX_RECORDS=${MAX_RECORDS:-0}
LOOKAHEAD=${LOOKAHEAD:-1}
REUSE=${REUSE:-0}
TINY=testdata/tiny-lfm2-moe
# The BFP8 tensors are rounded to nearest (--dense-method rtn), as they were
# by default when docs/cli.md's figures were measured, so that only the
# exponent rules differ between the variants and the figures reproduce.
CALIB=(--calib "$TINY/calibration/calibration.jsonl" --calib-seqs 128 --dense-method rtn)
. "$(dirname "$0")/ablate-common.sh"
ABS_OUT=$(cd "$OUT" && pwd)

quantize rtn-max --method rtn
quantize rtn-search --method rtn --exponent-rule search
quantize gptq-max "${CALIB[@]}" "${EVAL[@]}" --exponent-rule max
quantize gptq-search "${CALIB[@]}" "${EVAL[@]}" --exponent-rule search
quantize gptq-hessian "${CALIB[@]}" "${EVAL[@]}" --exponent-rule hessian
quantize gptq-search-dense "${CALIB[@]}" "${EVAL[@]}" --exponent-rule search --dense-exponent-rule search
VARIANTS=(rtn-max rtn-search gptq-max gptq-search gptq-hessian gptq-search-dense)
if [ "$LOOKAHEAD" = 1 ] && ! { [ "$REUSE" = 1 ] && [ -f "$OUT/gptq-hessian-lookahead/manifest.json" ]; }; then
	rm -rf "${OUT:?}/gptq-hessian-lookahead"
	t0=$(date +%s.%N)
	go test -count=1 -tags long -run '^TestAblateHessianLookahead$' -v ./quant/ \
		-args -ablate.out="$ABS_OUT/gptq-hessian-lookahead" >"$OUT/gptq-hessian-lookahead.log"
	t1=$(date +%s.%N)
	printf '%s\t%.1f\n' gptq-hessian-lookahead "$(echo "$t1 - $t0" | bc)" >>"$TIMES"
fi
[ "$LOOKAHEAD" = 1 ] && VARIANTS+=(gptq-hessian-lookahead)

# Variants whose tensor files are byte-identical are one candidate: scoring
# the same bytes twice would only repeat the figures.
declare -A FIRST
SCORE_ARGS=()
SAME=()
for c in "${VARIANTS[@]}"; do
	sum=$(cat "$OUT/$c"/*.safetensors | sha256sum | cut -c1-64)
	if [ -n "${FIRST[$sum]:-}" ]; then
		SAME+=("$c has the tensor bytes of ${FIRST[$sum]}")
		continue
	fi
	FIRST[$sum]=$c
	SCORE_ARGS+=(--candidate "$c=$OUT/$c")
done
"$BIN" score --reference "$TINY/model" "${SCORE_ARGS[@]}" "${CORPORA[@]}" \
	--max-records "$MAX_RECORDS" --out "$OUT/score.json" >"$OUT/score.md"

echo "== cost and loss ratio per variant (quantize wall time includes the calibration forward; solves are GPTQ's, with its loss metrics)"
printf '%-24s %10s %10s %12s %16s\n' variant wall_s solve_s mean_ratio sum_loss_gptq
tail -n +2 "$TIMES" | while IFS=$'\t' read -r name wall; do
	solve=- ratio=- loss=-
	case $name in
	gptq-hessian-lookahead)
		solve=$(grep -o 'solves [0-9.]*s' "$OUT/$name.log" | awk '{print $2}' | tr -d s)
		;;
	gptq-*)
		solve=$(grep -o 'solves [0-9.]*s' "$OUT/$name.log" | awk '{print $2}' | tr -d s)
		;;
	esac
	case $name in
	gptq-*)
		# Mean of the 288 per-matrix ratios and the summed GPTQ loss, from
		# the manifest's metrics (more digits than the printed table).
		ratio=$(grep -o '"ratio": *[0-9.e+-]*' "$OUT/$name/manifest.json" | awk -F: '{s += $2; n++} END {printf "%.5f", s / n}')
		loss=$(grep -o '"loss_gptq": *[0-9.e+-]*' "$OUT/$name/manifest.json" | awk -F: '{s += $2} END {printf "%.6g", s}')
		;;
	esac
	printf '%-24s %10s %10s %12s %16s\n' "$name" "$wall" "$solve" "$ratio" "$loss"
done
for s in "${SAME[@]}"; do
	echo "$s"
done
echo
for c in gptq-max gptq-search gptq-hessian gptq-search-dense; do
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
