#!/usr/bin/env bash
# ablate-damp-heldout.sh: w2's relative damping chosen on held-out
# calibration records, never on the eval corpora.
#
# Splits the fixture's calibration set into two halves by record (the first
# and the last half of the file). For each half, and each --damp-w2 value,
# quantizes the fixture with GPTQ (the default settings otherwise)
# calibrated on that half, then scores the candidates of that half against
# the BF16 source on the other half's records in one `lfmq score` run, which
# gives each candidate's KL and the paired differences between them. The
# two folds' KL means are averaged per value at the end.
#
# Usage: scripts/ablate-damp-heldout.sh [OUT_DIR]
#   LFMQ=bin/lfmq          the binary (built by `make build`)
#   DAMPS="1 0.1 0.01 0.001"  the --damp-w2 values tried
set -euo pipefail

BIN=${LFMQ:-bin/lfmq}
OUT=${1:-ablate-damp-out}
DAMPS=${DAMPS:-1 0.1 0.01 0.001}
TINY=testdata/tiny-lfm2-moe
CAL=$TINY/calibration/calibration.jsonl
EVAL=()
for c in chat instruct code book; do
	EVAL+=(--eval-corpus "$c=$TINY/corpora/$c.jsonl")
done

mkdir -p "$OUT"
n=$(wc -l <"$CAL")
half=$((n / 2))
head -n "$half" "$CAL" >"$OUT/fold-a.jsonl"
tail -n +"$((half + 1))" "$CAL" >"$OUT/fold-b.jsonl"

for fold in a b; do
	other=b
	[ "$fold" = b ] && other=a
	cands=()
	for d in $DAMPS; do
		dir="$OUT/$fold-damp-w2-$d"
		rm -rf "$dir"
		"$BIN" quantize --model "$TINY/model" --out "$dir" --calib "$OUT/fold-$fold.jsonl" \
			--calib-seqs "$half" "${EVAL[@]}" --damp-w2 "$d" >"$dir.log"
		cands+=(--candidate "damp-w2-$d=$dir")
	done
	"$BIN" score --reference "$TINY/model" "${cands[@]}" --corpus "heldout-$other=$OUT/fold-$other.jsonl" \
		--max-records 0 --out "$OUT/score-$fold.json" >"$OUT/score-$fold.md"
	echo "== calibrated on half $fold, scored on half $other"
	cat "$OUT/score-$fold.md"
	echo
done

echo "== KL mean on the held-out half, per --damp-w2, and the mean of the two folds"
python3 - "$OUT/score-a.json" "$OUT/score-b.json" <<'PY'
import json, sys
folds = []
for path in sys.argv[1:]:
    d = json.load(open(path))
    folds.append({r["candidate"]: r["kl_mean"] for r in d["results"] if r.get("kind") == "candidate" and r["corpus"].startswith("heldout")})
print("%-16s %12s %12s %12s" % ("candidate", "fold a", "fold b", "mean"))
for name in folds[0]:
    a, b = folds[0][name], folds[1].get(name)
    print("%-16s %12.6f %12.6f %12.6f" % (name, a, b, (a + b) / 2))
PY
