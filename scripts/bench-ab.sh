#!/usr/bin/env bash
# bench-ab.sh: decode and prefill of an earlier commit against the working
# tree, measured in one run, alternating, so the machine's drift falls on
# both sides alike.
#
#   scripts/bench-ab.sh BASE_REV [ROUNDS]
#
# Builds the engine's benchmark binary (go test -c ./engine/model) at
# BASE_REV (from a temporary git worktree) and at the working tree, then
# runs ROUNDS [2] times each, alternating base and new: the 2-thread decode
# benchmarks of lfmq-1 and BF16 on the synthetic LFM2-8B-A1B-shape
# checkpoint (BENCH_AB_STEPS steps [40]), each followed by that revision's
# 2-thread read probe (BenchmarkMemRead: the probe its bw_frac divides
# by), and the 2-thread 128-token lfmq-1 prefill (3 prefills). Each
# benchmark line is printed with "base" or "new" in front.
# LFMQ_BENCH_SYNTH_DIR keeps the synthetic checkpoint between runs
# [${TMPDIR:-/tmp}/lfmq-bench-synth]; the first run writes it (2.6 GB,
# minutes).
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
	sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
	[ $# -ge 1 ] && { [ "$1" = -h ] || [ "$1" = --help ]; } && exit 0
	exit 2
fi
base=$1
rounds=${2:-2}
case $rounds in '' | *[!0-9]* | 0)
	echo "bench-ab.sh: ROUNDS must be a positive integer, got '$rounds'" >&2
	exit 2
	;;
esac
cd "$(dirname "$0")/.."
git rev-parse --verify --quiet "$base^{commit}" >/dev/null ||
	{ echo "bench-ab.sh: $base is not a commit of this repository" >&2; exit 2; }
export LFMQ_BENCH_SYNTH_DIR=${LFMQ_BENCH_SYNTH_DIR:-${TMPDIR:-/tmp}/lfmq-bench-synth}
mkdir -p "$LFMQ_BENCH_SYNTH_DIR"
work=$(mktemp -d)
cleanup() {
	git worktree remove --force "$work/base-tree" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
git worktree add --quiet --detach "$work/base-tree" "$base"
(cd "$work/base-tree" && CGO_ENABLED=0 go test -c -o "$work/base.test" ./engine/model)
CGO_ENABLED=0 go test -c -o "$work/new.test" ./engine/model
echo "base $(git rev-parse --short "$base"), new $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' + uncommitted changes'), synthetic checkpoint in $LFMQ_BENCH_SYNTH_DIR"
cd engine/model
run() {
	"$work/$1.test" -test.run '^$' -test.bench "$2" -test.benchtime "$3" | grep '^Benchmark' | sed "s/^/$1 /"
}
steps=${BENCH_AB_STEPS:-40}
case $steps in '' | *[!0-9]* | 0)
	echo "bench-ab.sh: BENCH_AB_STEPS must be a positive integer, got '$steps'" >&2
	exit 2
	;;
esac
for _ in $(seq "$rounds"); do
	for v in base new; do
		run $v 'Decode/synth/(lfmq1|bf16)/threads=2$' "${steps}x"
		run $v 'MemRead/threads=2$' 10x
	done
done
for _ in $(seq "$rounds"); do
	for v in base new; do
		run $v 'Prefill/synth/lfmq1/threads=2/' 3x
	done
done
