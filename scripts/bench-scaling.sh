#!/usr/bin/env bash
# bench-scaling.sh: how decode, prefill and GPTQ scale with cores.
#
# Builds the engine's benchmark binary (go test -c ./engine/model) and the
# lfmq CLI, then, on the synthetic checkpoint with the real LFM2-8B-A1B
# layer shapes (engine/model/synth, 6 layers by default, written once and
# kept), runs at each thread count the decode benchmarks of lfmq-1 (RTN:
# BFP4 experts, BFP8 rest) and BF16 and the lfmq-1 prefill benchmark, then
# one GPTQ quantization of the same checkpoint at the most threads, timed,
# with its peak resident memory; and prints one table.
#
# Machines without a Go toolchain: build the binaries elsewhere with
#   scripts/bench-scaling.sh --build-only DIR
# (static, CGO_ENABLED=0; add GOAMD64 or GOARCH as needed), copy DIR over,
# and run scripts/bench-scaling.sh --prebuilt DIR there.
#
# Options (defaults in brackets):
#   --prebuilt DIR      use DIR/model.test and DIR/lfmq instead of building
#   --build-only DIR    build both binaries into DIR and exit
#   --threads "LIST"    thread counts ["1 2 4 8 16"], those above nproc
#                       dropped unless --force-threads
#   --force-threads     keep thread counts above nproc
#   --layers N          layers of the synthetic checkpoint [6]
#   --synth-dir DIR     where the synthetic checkpoints are kept
#                       [${TMPDIR:-/tmp}/lfmq-bench-scaling]
#   --steps N           decode steps per measurement [40]
#   --prefills N        128-token prefills per measurement [5]
#   --no-gptq           skip the GPTQ run
#   --gptq-seqs N       calibration windows [32]
#   --gptq-len N        tokens per window [512]
#   --gptq-threads N    GPTQ workers [the largest thread count]
#   --gptq-model DIR    BF16 checkpoint GPTQ quantizes [the synthetic one]
#   --out DIR           keep the raw logs there [a temporary directory]
#
# Columns: decode tokens/s of one sequence, the weight bytes a token reads
# times tokens/s (GB/s), bw_frac (that over the read bandwidth measured in
# the same benchmark, interleaved), the read probe's GB/s during the
# lfmq-1 run, lfmq-1 over BF16 decode, and lfmq-1 prefill tokens/s (128
# tokens in one chunk). Figures on a shared machine drift with its load.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

prebuilt="" build_only="" threads="1 2 4 8 16" force=0 layers=6
synth_dir="${TMPDIR:-/tmp}/lfmq-bench-scaling" steps=40 prefills=5
gptq=1 gptq_seqs=32 gptq_len=512 gptq_threads="" gptq_model="" out=""
while [ $# -gt 0 ]; do
	case "$1" in
	--prebuilt) prebuilt=$2; shift ;;
	--build-only) build_only=$2; shift ;;
	--threads) threads=$2; shift ;;
	--force-threads) force=1 ;;
	--layers) layers=$2; shift ;;
	--synth-dir) synth_dir=$2; shift ;;
	--steps) steps=$2; shift ;;
	--prefills) prefills=$2; shift ;;
	--no-gptq) gptq=0 ;;
	--gptq-seqs) gptq_seqs=$2; shift ;;
	--gptq-len) gptq_len=$2; shift ;;
	--gptq-threads) gptq_threads=$2; shift ;;
	--gptq-model) gptq_model=$2; shift ;;
	--out) out=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "bench-scaling.sh: unknown option $1 (--help lists them)" >&2; exit 2 ;;
	esac
	shift
done

root=$(cd "$(dirname "$0")/.." && pwd)

build() { # build DIR
	mkdir -p "$1"
	(cd "$root" && CGO_ENABLED=0 go test -c -o "$1/model.test" ./engine/model &&
		CGO_ENABLED=0 go build -trimpath -o "$1/lfmq" ./cmd/lfmq)
}

if [ -n "$build_only" ]; then
	build "$build_only"
	echo "built $build_only/model.test and $build_only/lfmq"
	exit 0
fi

if [ -z "$out" ]; then
	out=$(mktemp -d "${TMPDIR:-/tmp}/lfmq-bench-scaling-logs.XXXXXX")
fi
mkdir -p "$out" "$synth_dir"
if [ -n "$prebuilt" ]; then
	bin=$prebuilt
else
	command -v go >/dev/null || { echo "bench-scaling.sh: no go toolchain: use --prebuilt DIR" >&2; exit 1; }
	bin=$out/bin
	echo "building the benchmark binaries into $bin" >&2
	build "$bin"
fi
for f in model.test lfmq; do
	[ -x "$bin/$f" ] || { echo "bench-scaling.sh: $bin/$f is missing or not executable" >&2; exit 1; }
done
bin=$(cd "$bin" && pwd)

ncpu=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)
list=""
for t in $threads; do
	if [ "$t" -gt "$ncpu" ] && [ "$force" = 0 ]; then
		echo "skipping $t threads: this machine has $ncpu CPUs (--force-threads keeps them)" >&2
		continue
	fi
	list="$list $t"
done
[ -n "$list" ] || { echo "bench-scaling.sh: no thread count left" >&2; exit 1; }
last=${list##* }

export LFMQ_BENCH_SYNTH_DIR=$synth_dir LFMQ_BENCH_SYNTH_LAYERS=$layers
name=synth
[ "$layers" = 4 ] || name=synth$layers
bf16_dir=${gptq_model:-$synth_dir/$name-bf16}

# bench LOG THREADS PATTERN BENCHTIME: one run of the benchmark binary (in
# the log directory: the binary needs no source tree).
bench() {
	(cd "$out" && LFMQ_BENCH_THREADS=$2 "$bin/model.test" -test.run '^$' -test.bench "$3" \
		-test.benchtime "$4" -test.timeout 60m) >"$1" 2>&1 || {
		cat "$1" >&2
		echo "bench-scaling.sh: benchmark failed, log in $1" >&2
		exit 1
	}
}

# metric LOG NAME UNIT: the value reported before UNIT on the benchmark line
# whose name contains NAME.
metric() {
	awk -v name="$2" -v unit="$3" 'index($1, name) == 1 {
		for (i = 2; i <= NF; i++) if ($i == unit) { printf "%s", $(i-1); exit }
	}' "$1"
}

if [ ! -f "$synth_dir/$name-rtn/manifest.json" ]; then
	echo "writing the $layers-layer synthetic checkpoint and its RTN lfmq-1 quantization into $synth_dir" >&2
	t0=$(date +%s)
	bench "$out/prepare.log" 1 "^BenchmarkDecode\$/^synth\$/^lfmq1\$/^threads=1\$" 1x
	echo "  done in $(($(date +%s) - t0)) s" >&2
fi

rows=()
for t in $list; do
	echo "decode and prefill at $t threads" >&2
	dlog=$out/decode-$t.log plog=$out/prefill-$t.log
	bench "$dlog" "$t" "^BenchmarkDecode\$/^synth\$/^(lfmq1|bf16)\$/^threads=$t\$" "${steps}x"
	bench "$plog" "$t" "^BenchmarkPrefill\$/^synth\$/^lfmq1\$/^threads=$t\$" "${prefills}x"
	q=BenchmarkDecode/synth/lfmq1/threads=$t/ b=BenchmarkDecode/synth/bf16/threads=$t/
	qt=$(metric "$dlog" "$q" tokens/s) bt=$(metric "$dlog" "$b" tokens/s)
	ratio=$(awk -v a="$qt" -v b="$bt" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
	rows+=("$(printf '%7s | %11.1f | %10.1f | %13.2f | %10.1f | %9.1f | %12.2f | %9.1f | %10s | %14.0f' "$t" \
		"$qt" "$(metric "$dlog" "$q" weightGB/s)" "$(metric "$dlog" "$q" bw_frac)" \
		"$bt" "$(metric "$dlog" "$b" weightGB/s)" "$(metric "$dlog" "$b" bw_frac)" \
		"$(metric "$dlog" "$q" readGB/s)" "$ratio" \
		"$(metric "$plog" BenchmarkPrefill/synth/lfmq1/threads=$t/ tokens/s)")")
done

gptq_line="GPTQ: skipped (--no-gptq)"
if [ "$gptq" = 1 ]; then
	gt=${gptq_threads:-$last}
	calib=$out/calib.jsonl gout=$out/gptq-out glog=$out/gptq.log
	# Seeded random token ids below the model's vocabulary size: the time
	# and memory of GPTQ depend on the shapes and the token count, not on
	# what the tokens say.
	vocab=$(sed -n 's/.*"vocab_size": *\([0-9][0-9]*\).*/\1/p' "$bf16_dir/config.json" | head -1)
	[ -n "$vocab" ] || { echo "bench-scaling.sh: no vocab_size in $bf16_dir/config.json" >&2; exit 1; }
	awk -v n="$gptq_seqs" -v len="$gptq_len" -v vocab="$vocab" 'BEGIN {
		srand(12)
		for (i = 0; i < n; i++) {
			printf "{\"input_ids\": ["
			for (j = 0; j < len; j++) printf "%s%d", (j ? "," : ""), 3 + int(rand() * (vocab - 3))
			print "]}"
		}
	}' >"$calib"
	# An interrupted run leaves its finished layers in a hidden directory
	# beside the output (lfmq quantize --resume): remove both, always.
	trap 'rm -rf "$gout" "$out/.gptq-out.partial"' EXIT
	rm -rf "$gout" "$out/.gptq-out.partial"
	echo "GPTQ of $bf16_dir: $gptq_seqs windows of $gptq_len tokens, $gt workers" >&2
	cmd=("$bin/lfmq" quantize --model "$bf16_dir" --out "$gout" --calib "$calib"
		--calib-seqs "$gptq_seqs" --calib-len "$gptq_len" --workers "$gt")
	t0=$(date +%s.%N)
	if [ -x /usr/bin/time ]; then
		/usr/bin/time -v "${cmd[@]}" >"$glog" 2>&1 || { cat "$glog" >&2; exit 1; }
		rss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): *//p' "$glog")
	else
		# No GNU time: poll the high-water mark of the process's memory.
		"${cmd[@]}" >"$glog" 2>&1 &
		pid=$! rss_kb=0
		while kill -0 "$pid" 2>/dev/null; do
			v=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
			[ -n "$v" ] && rss_kb=$v
			sleep 0.2
		done
		wait "$pid" || { cat "$glog" >&2; exit 1; }
	fi
	wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	gptq_line=$(printf 'GPTQ of %s (%d×%d calibration tokens, %s workers): %s s wall, %.2f GB peak RSS' \
		"$(basename "$bf16_dir")" "$gptq_seqs" "$gptq_len" "$gt" "$wall" "$(awk -v k="${rss_kb:-0}" 'BEGIN { print k * 1024 / 1e9 }')")
fi

echo
echo "lfmq scaling: synthetic LFM2-8B-A1B shapes, $layers layers; $ncpu CPUs ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo 2>/dev/null | head -1))"
echo "decode: $steps steps of one sequence; prefill: 128 tokens; logs in $out"
echo
echo "threads | lfmq1 tok/s | lfmq1 GB/s | lfmq1 bw_frac | bf16 tok/s | bf16 GB/s | bf16 bw_frac | read GB/s | lfmq1/bf16 | prefill tok/s"
echo "--------|-------------|------------|---------------|------------|-----------|--------------|-----------|------------|---------------"
printf '%s\n' "${rows[@]}"
echo
echo "$gptq_line"
