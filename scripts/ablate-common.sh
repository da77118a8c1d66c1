# ablate-common.sh: what the ablation scripts share; sourced, not run.
#
# Expects BIN (the lfmq binary), OUT (the output directory, created
# here), TINY (the fixture) and REUSE (1 keeps variants already in OUT).
# Sets EVAL (the fixture's four corpora as quantize's --eval-corpus flags)
# and CORPORA (the same as score's --corpus flags), starts OUT/times.tsv
# (kept with REUSE=1) and defines quantize.

EVAL=()
CORPORA=()
for c in chat instruct code book; do
	EVAL+=(--eval-corpus "$c=$TINY/corpora/$c.jsonl")
	CORPORA+=(--corpus "$c=$TINY/corpora/$c.jsonl")
done

mkdir -p "$OUT"
TIMES="$OUT/times.tsv"
[ "$REUSE" = 1 ] && [ -f "$TIMES" ] || printf 'variant\twall_s\n' >"$TIMES"

# quantize NAME ARGS...: one variant quantized into OUT/NAME, its stdout
# kept in OUT/NAME.log and its wall time appended to OUT/times.tsv.
quantize() {
	local name=$1
	shift
	if [ "$REUSE" = 1 ] && [ -f "$OUT/$name/manifest.json" ]; then
		return
	fi
	rm -rf "${OUT:?}/$name"
	local t0 t1
	t0=$(date +%s.%N)
	"$BIN" quantize --model "$TINY/model" --out "$OUT/$name" "$@" >"$OUT/$name.log"
	t1=$(date +%s.%N)
	printf '%s\t%.1f\n' "$name" "$(echo "$t1 - $t0" | bc)" >>"$TIMES"
}
