#!/usr/bin/env bash
# bench-long-context.sh: lfmq's engine next to llama.cpp on long contexts,
# on the same synthetic weights.
#
# Usage: scripts/bench-long-context.sh [options] LLAMA_BUILD_DIR
#
# LLAMA_BUILD_DIR is a CMake build of llama.cpp (one you built yourself;
# llama.cpp stays out of this repository) holding bin/llama-bench. The
# script:
#
#  1. writes the synthetic checkpoint with LFM2-8B-A1B's layer shapes that
#     the engine's benchmarks use (engine/model/synth, 4 layers, seeded; the
#     BF16 original and its RTN lfmq-1 quantization), kept in --synth-dir;
#  2. converts the BF16 original to a GGUF with Q8_0 matrices that
#     llama.cpp loads as its lfm2moe architecture, with this repository's
#     converter (internal/cmd/lfm2gguf; the vocabulary is the test
#     fixture's tokenizer, padded to the model's 65,536 ids): llama.cpp's
#     own converter needs torch, and the weights are random, so only speed
#     is compared;
#  3. runs --rounds rounds, alternating which side goes first, each with
#     the load average beside it:
#       llama.cpp: llama-bench -n 32 -d N -fa 1 (decode of 32 tokens after
#       each --depths context) and -p N -n 0 -fa 1 --no-warmup (each
#       --prompts prompt),
#       on --threads threads, -r --llama-reps;
#       lfmq: BenchmarkDecode (64 steps after each depth, for each --kv
#       format) and BenchmarkPrefillPrompt (each --prompts prompt from an
#       empty sequence in 512-token chunks) of ./engine/model on the lfmq-1
#       checkpoint and --threads threads.
#
# A real LFM2-8B-A1B has 24 layers, 6 of them attention, where the
# synthetic model has 4 and 1; for it, convert the published checkpoint
# with llama.cpp's convert_hf_to_gguf.py --outtype q8_0 and quantize it
# with `lfmq quantize`.
#
# Options (defaults in brackets):
#   --synth-dir DIR   where the checkpoints and the GGUF are kept
#                     [$LFMQ_BENCH_SYNTH_DIR, else ${TMPDIR:-/tmp}/lfmq-long-context]
#   --depths "LIST"   decode context depths ["0 4096 16384"]
#   --prompts "LIST"  prefill prompt lengths ["4096 16384"]
#   --kv "LIST"       lfmq KV cache formats for decode ["f32 bf16"]
#   --threads N       threads for both [2]
#   --rounds N        rounds of both [2]
#   --llama-reps N    llama-bench repetitions per round (-r) [1]
#   --skip-llama      only lfmq's benchmarks
#   --skip-lfmq       only llama.cpp's
#   --out DIR         keep the raw outputs there [a temporary directory]
#
# Both run on the same machine one after the other; on a shared machine
# compare them only within one run, next to the load average it prints.
# llama.cpp built with OpenMP (its default) spins its waiting threads: on a
# machine with more runnable threads than cores its multi-threaded decode
# collapses (docs/bench-long-context.md); set OMP_WAIT_POLICY=passive in
# the environment there, which the script passes on to llama-bench.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() {
	echo "bench-long-context: $*" >&2
	exit 1
}

depths="0 4096 16384" prompts="4096 16384" kvs="f32 bf16"
threads=2 rounds=2 reps=1 skip_llama=0 skip_lfmq=0 out=""
synth_dir="${LFMQ_BENCH_SYNTH_DIR:-${TMPDIR:-/tmp}/lfmq-long-context}"
build=""
while [ $# -gt 0 ]; do
	case "$1" in
	--synth-dir) synth_dir=$2; shift ;;
	--depths) depths=$2; shift ;;
	--prompts) prompts=$2; shift ;;
	--kv) kvs=$2; shift ;;
	--threads) threads=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--llama-reps) reps=$2; shift ;;
	--skip-llama) skip_llama=1 ;;
	--skip-lfmq) skip_lfmq=1 ;;
	--out) out=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	-*) die "unknown option $1 (see --help)" ;;
	*) [ -z "$build" ] || die "one build directory, not $build and $1"; build=$1 ;;
	esac
	shift
done
[ "$skip_llama" = 1 ] || [ -n "$build" ] || { usage >&2; exit 2; }
case "$threads$rounds$reps" in *[!0-9]*) die "--threads, --rounds and --llama-reps take numbers" ;; esac
for n in $depths $prompts; do
	case "$n" in '' | *[!0-9]*) die "depths and prompt lengths are token counts, not '$n'" ;; esac
done
for k in $kvs; do
	case "$k" in f32 | bf16 | bfp8) ;; *) die "--kv: '$k' is not f32, bf16 or bfp8" ;; esac
done

repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$synth_dir"
synth_dir=$(cd "$synth_dir" && pwd)
if [ -z "$out" ]; then
	out=$(mktemp -d "${TMPDIR:-/tmp}/lfmq-long-context-out.XXXXXX")
fi
mkdir -p "$out"
comma() { echo "$*" | tr -s ' ' ',' | sed 's/^,//; s/,$//'; }
load() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime; }

echo "# load average at the start: $(load)"
echo "# raw outputs: $out"

# 1. The synthetic checkpoints, written by the engine's benchmark binary
# (it keeps synth-bf16 and synth-rtn under LFMQ_BENCH_SYNTH_DIR).
echo "# building the engine's benchmark binary"
(cd "$repo" && go test -c -o "$out/model.test" ./engine/model)
run_model_test() {
	local kv=$1
	shift
	(cd "$repo/engine/model" && LFMQ_BENCH_SYNTH_DIR="$synth_dir" LFMQ_BENCH_SYNTH_LAYERS="" LFMQ_BENCH_THREADS="$threads" \
		LFMQ_BENCH_DEPTHS="$(comma "$depths")" LFMQ_BENCH_PROMPTS="$(comma "$prompts")" LFMQ_BENCH_KV_DTYPE="$kv" \
		"$out/model.test" -test.run '^$' "$@")
}
if [ ! -f "$synth_dir/synth-rtn/manifest.json" ] || [ ! -f "$synth_dir/synth-bf16/config.json" ]; then
	echo "# writing the synthetic checkpoint to $synth_dir (2.6 GB of BF16 and its lfmq-1 quantization)"
	LFMQ_BENCH_DEPTHS_SAVE=$depths
	depths=0
	run_model_test f32 -test.bench "^BenchmarkPrefill\$/^synth\$/^lfmq1\$/^threads=$threads\$" -test.benchtime 1x >"$out/synth-write.txt"
	depths=$LFMQ_BENCH_DEPTHS_SAVE
fi
[ -f "$synth_dir/synth-rtn/manifest.json" ] || die "no synthetic checkpoint in $synth_dir (see $out/synth-write.txt)"

# 2. GGUF Q8_0 of the BF16 original, with this repository's converter.
gguf="$synth_dir/synth-q8_0.gguf"
if [ "$skip_llama" = 0 ]; then
	bench_bin="$build/bin/llama-bench"
	[ -x "$bench_bin" ] || die "$build/bin/llama-bench: not found; build llama.cpp's llama-bench target in $build"
	if [ ! -f "$gguf" ]; then
		echo "# converting $synth_dir/synth-bf16 to $gguf"
		(cd "$repo" && go run ./internal/cmd/lfm2gguf --model "$synth_dir/synth-bf16" \
			--tokenizer testdata/tiny-lfm2-moe/model --type q8_0 --out "$gguf")
	fi
fi

llama() {
	local r=$1
	echo
	echo "## round $r: llama.cpp Q8_0, F16 KV cache (llama-bench -t $threads -fa 1 -r $reps), load $(load)"
	"$bench_bin" -m "$gguf" -t "$threads" -fa 1 -r "$reps" -p 0 -n 32 -d "$(comma "$depths")" -o md 2>"$out/llama-decode-$r.err" |
		tee "$out/llama-decode-$r.md"
	echo "# load $(load)"
	# --no-warmup: llama-bench's warmup would prefill each whole prompt once
	# more, untimed; the decode run just before has mapped the weights in.
	"$bench_bin" -m "$gguf" -t "$threads" -fa 1 -r "$reps" --no-warmup -p "$(comma "$prompts")" -n 0 -o md 2>"$out/llama-prefill-$r.err" |
		tee "$out/llama-prefill-$r.md"
	echo "# load $(load)"
}
lfmq() {
	local r=$1 kv
	echo
	echo "## round $r: lfmq lfmq-1 (engine benchmarks, $threads threads), load $(load)"
	for kv in $kvs; do
		run_model_test "$kv" -test.bench "^BenchmarkDecode\$/^synth\$/^lfmq1\$/^threads=$threads\$" \
			-test.benchtime 64x | tee "$out/lfmq-decode-$kv-$r.txt" | grep -E '^Benchmark' || true
		echo "# load $(load)"
	done
	run_model_test f32 -test.bench "^BenchmarkPrefillPrompt\$/^synth\$/^lfmq1\$/^threads=$threads\$" \
		-test.benchtime 1x | tee "$out/lfmq-prefill-$r.txt" | grep -E '^Benchmark' || true
	echo "# load $(load)"
}

# 3. The rounds, alternating which goes first.
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) = 1 ]; then
		[ "$skip_llama" = 1 ] || llama "$r"
		[ "$skip_lfmq" = 1 ] || lfmq "$r"
	else
		[ "$skip_lfmq" = 1 ] || lfmq "$r"
		[ "$skip_llama" = 1 ] || llama "$r"
	fi
done
echo
echo "# load average at the end: $(load)"
