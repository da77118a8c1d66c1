#!/usr/bin/env bash
# bench-long-context.sh: lfmq's engine next to llama.cpp on long contexts.
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
#  2. converts the BF16 original to GGUF Q8_0 with llama.cpp's own
#     converter (convert_hf_to_gguf.py from the source tree the build was
#     configured from), after putting a tokenizer beside the weights;
#  3. runs llama-bench on it: decode of 32 tokens after contexts of each
#     --depths (-n 32 -d N -fa 1), and prefill of each --prompts (-p N),
#     on --threads threads;
#  4. runs lfmq's engine benchmarks on the lfmq-1 checkpoint in the same
#     run: BenchmarkDecode (64 steps) and BenchmarkPrefill (3 prompts) of
#     ./engine/model on the synthetic model and --threads threads;
#  and prints both, with the load average before and after.
#
# Hook for the context-depth benchmarks (issue 29 item 5): the script sets
# LFMQ_BENCH_DEPTHS to --depths. Today's BenchmarkDecode ignores it and
# decodes after a 32-token prompt, and BenchmarkPrefill runs 128 tokens;
# once the engine's benchmarks read it, their rows gain /depth=N and the
# same command measures lfmq at the depths llama-bench uses.
#
# The converter needs Python packages (torch, numpy, transformers, ...):
#   python3 -m venv ~/llama-venv
#   ~/llama-venv/bin/pip install -r SRC/requirements/requirements-convert_hf_to_gguf.txt
# and --python ~/llama-venv/bin/python. It recognises a BPE tokenizer by a
# hash of how it splits a test text, so it needs LFM2's own tokenizer
# (tokenizer.json and tokenizer_config.json of LiquidAI/LFM2-8B-A1B, e.g.
# from a Hugging Face snapshot): give its directory with --tokenizer. The
# test fixture's tokenizer (8,192 tokens), which lfmq's serving benchmarks
# use, is not one of those it knows.
#
# Options (defaults in brackets):
#   --tokenizer DIR   directory with LFM2's tokenizer files [required
#                     unless the GGUF already exists]
#   --python PY       Python with the converter's packages [python3]
#   --llama-src DIR   llama.cpp source tree [read from the build's
#                     CMakeCache.txt]
#   --synth-dir DIR   where the checkpoints and the GGUF are kept
#                     [$LFMQ_BENCH_SYNTH_DIR, else ${TMPDIR:-/tmp}/lfmq-long-context]
#   --depths "LIST"   decode context depths ["0 4096 16384"]
#   --prompts "LIST"  prefill prompt lengths ["4096 16384"]
#   --threads N       threads for both [2]
#   --count N         repetitions of each lfmq benchmark [1]
#   --skip-llama      only lfmq's benchmarks
#   --skip-lfmq       only llama.cpp's
#   --out DIR         keep the raw outputs there [a temporary directory]
#
# Both run on the same machine one after the other; on a shared machine
# compare them only within one run, next to the load average it prints.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() {
	echo "bench-long-context: $*" >&2
	exit 1
}

tokenizer="" python=python3 llama_src="" depths="0 4096 16384" prompts="4096 16384"
threads=2 count=1 skip_llama=0 skip_lfmq=0 out=""
synth_dir="${LFMQ_BENCH_SYNTH_DIR:-${TMPDIR:-/tmp}/lfmq-long-context}"
build=""
while [ $# -gt 0 ]; do
	case "$1" in
	--tokenizer) tokenizer=$2; shift ;;
	--python) python=$2; shift ;;
	--llama-src) llama_src=$2; shift ;;
	--synth-dir) synth_dir=$2; shift ;;
	--depths) depths=$2; shift ;;
	--prompts) prompts=$2; shift ;;
	--threads) threads=$2; shift ;;
	--count) count=$2; shift ;;
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
case "$threads$count" in *[!0-9]*) die "--threads and --count take numbers" ;; esac
for n in $depths $prompts; do
	case "$n" in '' | *[!0-9]*) die "depths and prompt lengths are token counts, not '$n'" ;; esac
done

repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$synth_dir"
synth_dir=$(cd "$synth_dir" && pwd)
if [ -z "$out" ]; then
	out=$(mktemp -d "${TMPDIR:-/tmp}/lfmq-long-context-out.XXXXXX")
fi
mkdir -p "$out"
comma() { echo "$*" | tr -s ' ' ',' | sed 's/^,//; s/,$//'; }

echo "# load average at the start: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime)"
echo "# raw outputs: $out"

# 1. The synthetic checkpoints, written by the engine's benchmark binary
# (it keeps synth-bf16 and synth-rtn under LFMQ_BENCH_SYNTH_DIR).
echo "# building the engine's benchmark binary"
(cd "$repo" && go test -c -o "$out/model.test" ./engine/model)
run_model_test() {
	(cd "$repo/engine/model" && LFMQ_BENCH_SYNTH_DIR="$synth_dir" LFMQ_BENCH_SYNTH_LAYERS="" LFMQ_BENCH_THREADS="$threads" \
		LFMQ_BENCH_DEPTHS="$(comma "$depths")" "$out/model.test" -test.run '^$' "$@")
}
if [ ! -f "$synth_dir/synth-rtn/manifest.json" ] || [ ! -f "$synth_dir/synth-bf16/config.json" ]; then
	echo "# writing the synthetic checkpoint to $synth_dir (2.6 GB of BF16 and its lfmq-1 quantization)"
	run_model_test -test.bench "^BenchmarkPrefill\$/^synth\$/^lfmq1\$/^threads=$threads\$" -test.benchtime 1x >"$out/synth-write.txt"
fi
[ -f "$synth_dir/synth-rtn/manifest.json" ] || die "no synthetic checkpoint in $synth_dir (see $out/synth-write.txt)"

# 2. GGUF Q8_0 of the BF16 original, with llama.cpp's converter.
gguf="$synth_dir/synth-q8_0.gguf"
if [ "$skip_llama" = 0 ]; then
	bench_bin="$build/bin/llama-bench"
	[ -x "$bench_bin" ] || die "$build/bin/llama-bench: not found; build llama.cpp's llama-bench target in $build"
	if [ ! -f "$gguf" ]; then
		if [ -z "$llama_src" ]; then
			llama_src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
		fi
		[ -f "$llama_src/convert_hf_to_gguf.py" ] || die "no convert_hf_to_gguf.py in '$llama_src': give --llama-src"
		[ -n "$tokenizer" ] || die "give --tokenizer DIR with LFM2's tokenizer.json and tokenizer_config.json (see --help)"
		[ -f "$tokenizer/tokenizer.json" ] || die "$tokenizer/tokenizer.json: not found"
		"$python" -c 'import torch, numpy, transformers' 2>/dev/null ||
			die "$python lacks the converter's packages: pip install -r $llama_src/requirements/requirements-convert_hf_to_gguf.txt into a venv and give --python"
		# The converter reads one directory: the BF16 weights (linked, not
		# copied) with the tokenizer beside them.
		hf="$synth_dir/synth-bf16-tokenized"
		rm -rf "$hf"
		mkdir -p "$hf"
		for f in "$synth_dir"/synth-bf16/*; do ln -s "$f" "$hf/"; done
		for f in tokenizer.json tokenizer_config.json special_tokens_map.json chat_template.jinja; do
			if [ -f "$tokenizer/$f" ]; then cp "$tokenizer/$f" "$hf/$f"; fi
		done
		echo "# converting to $gguf"
		"$python" "$llama_src/convert_hf_to_gguf.py" "$hf" --outtype q8_0 --outfile "$gguf.tmp" >"$out/convert.txt" 2>&1 ||
			die "the converter failed; its output is in $out/convert.txt"
		mv "$gguf.tmp" "$gguf"
	fi

	# 3. llama-bench: decode after each depth, prefill of each prompt.
	echo
	echo "## llama.cpp Q8_0 (llama-bench -t $threads -fa 1)"
	"$bench_bin" -m "$gguf" -t "$threads" -fa 1 -p 0 -n 32 -d "$(comma "$depths")" -o md | tee "$out/llama-decode.md"
	"$bench_bin" -m "$gguf" -t "$threads" -fa 1 -p "$(comma "$prompts")" -n 0 -o md | tee "$out/llama-prefill.md"
fi

# 4. lfmq's engine benchmarks on the lfmq-1 checkpoint.
if [ "$skip_lfmq" = 0 ]; then
	echo
	echo "## lfmq lfmq-1 (engine benchmarks, $threads threads)"
	run_model_test -test.bench "^BenchmarkDecode\$/^synth\$/^lfmq1\$/^threads=$threads\$" \
		-test.benchtime 64x -test.count "$count" | tee "$out/lfmq-decode.txt" | grep -E '^Benchmark' || true
	run_model_test -test.bench "^BenchmarkPrefill\$/^synth\$/^lfmq1\$/^threads=$threads\$" \
		-test.benchtime 3x -test.count "$count" | tee "$out/lfmq-prefill.txt" | grep -E '^Benchmark' || true
fi
echo
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime)"
