#!/usr/bin/env bash
# ablate-dense.sh: the dense-method ablation on the tiny fixture.
#
# Quantizes the fixture six ways with the demo's GPTQ settings (the
# fixture calibration set, 128 windows, the four eval corpora for the
# disjointness check):
#   rtn             --method rtn (every tensor rounded to nearest)
#   gptq-experts    GPTQ experts, RTN dense tensors (--dense-method rtn)
#   gptq            GPTQ experts and GPTQ dense tensors (the default; w2
#                   damped by 0.01, the value scripts/ablate-damp-heldout.sh
#                   picks on held-out calibration records)
#   dense-only      BF16 experts, GPTQ dense tensors (--experts keep --dense-method gptq)
#   bf16-experts    BF16 experts, RTN dense tensors (--experts keep)
#   gptq-ref-w2     the default with the reference release's w2 damping
#                   (--damp-w2 1, the default until issue 31)
# then scores all six against the BF16 source on the four fixture corpora
# in one `lfmq score` run, which prints each candidate's KL and top-1
# agreement and the paired differences between every two candidates (the
# pairs gptq − gptq-experts and dense-only − bf16-experts isolate the dense
# method), and prints each variant's quantize wall time and, for the dense
# GPTQ variants, the mean GPTQ/RTN loss ratio of the BFP8 tensors.
#
# Usage: scripts/ablate-dense.sh [OUT_DIR]
#   LFMQ=bin/lfmq      the binary (built by `make build`)
#   MAX_RECORDS=16     records scored per corpus (0 = all; the demo's 16)
#   REUSE=0            1 keeps checkpoints already in OUT_DIR (and their logs)
set -euo pipefail

BIN=${LFMQ:-bin/lfmq}
OUT=${1:-ablate-dense-out}
MAX_RECORDS=${MAX_RECORDS:-16}
REUSE=${REUSE:-0}
TINY=testdata/tiny-lfm2-moe
CALIB=(--calib "$TINY/calibration/calibration.jsonl" --calib-seqs 128)
. "$(dirname "$0")/ablate-common.sh"

quantize rtn --method rtn
quantize gptq-experts "${CALIB[@]}" "${EVAL[@]}" --dense-method rtn
quantize gptq "${CALIB[@]}" "${EVAL[@]}"
quantize dense-only "${CALIB[@]}" "${EVAL[@]}" --experts keep --dense-method gptq
quantize bf16-experts --method rtn --experts keep
quantize gptq-ref-w2 "${CALIB[@]}" "${EVAL[@]}" --damp-w2 1
VARIANTS=(rtn gptq-experts gptq dense-only bf16-experts gptq-ref-w2)
SCORE_ARGS=()
for c in "${VARIANTS[@]}"; do
	SCORE_ARGS+=(--candidate "$c=$OUT/$c")
done
"$BIN" score --reference "$TINY/model" "${SCORE_ARGS[@]}" "${CORPORA[@]}" \
	--max-records "$MAX_RECORDS" --out "$OUT/score.json" >"$OUT/score.md"

echo "== cost per variant (quantize wall time, calibration forward included) and the dense tensors' mean GPTQ/RTN loss ratio"
printf '%-16s %10s %16s\n' variant wall_s dense_mean_ratio
tail -n +2 "$TIMES" | while IFS=$'\t' read -r name wall; do
	ratio=$(python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))["metrics"].get("dense")
print("-" if not d else "%.4f" % (sum(m["ratio"] for m in d.values() if m["ratio"] is not None) / len(d)))' "$OUT/$name/manifest.json")
	printf '%-16s %10s %16s\n' "$name" "$wall" "$ratio"
done
echo
echo "== lfmq score ($([ "$MAX_RECORDS" = 0 ] && echo "all records" || echo "first $MAX_RECORDS records per corpus"))"
cat "$OUT/score.md"
