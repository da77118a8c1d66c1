#!/usr/bin/env bash
# bench-quantize.sh: the time and memory of `lfmq quantize` (the default
# GPTQ method) at real widths.
#
# Writes synthetic BF16 checkpoints with the layer shapes of LFM2-8B-A1B
# and LFM2-24B-A2B (engine/model/synth; a few layers, the fixture's
# tokenizer beside them; written once and kept), then runs
#   lfmq quantize --model CKPT --out OUT --calib CALIB
# under /usr/bin/time -v on each and prints the wall time, the CPU time
# (user + system, which the load of a shared machine disturbs less than the
# wall time), the peak resident memory and the summary's phase times.
# It also prints how the progress line's estimate of the time left compared
# with the time that actually remained, and, from the run's work trace
# (LFMQ_WORK_TRACE, kept beside the log), the time each kind of work took
# per unit against the w1/w3 solves', on the wall clock and in CPU time
# (the CPU figures are what quant.WorkKind.Cost is calibrated from); and,
# from a trace of /proc/PID/status every 2 s (kept beside the log as .rss),
# the peaks of the anonymous memory (the heap) and of the mapped files'
# resident pages, each with the stage it was seen in; per layer, its wall
# time, CPU time and memory peaks, and its CPU time by kind of work
# (scripts/work-trace-layers.awk).
# With --baseline BIN the same runs are made with another lfmq binary too,
# alternating with this one, and the CPU time and memory are given as
# ratios to it (an A/B in one run: both see the same load).
#
# Options (defaults in brackets):
#   --shapes "LIST"   checkpoint shapes, of 8b-a1b and 24b-a2b ["8b-a1b 24b-a2b"]
#   --layers N        layers per checkpoint (layer 0 dense, then MoE) [2]
#   --calib FILE      calibration file [the fixture's, 128 × 256 tokens]
#   --calib-seqs N    calibration windows [all of the file's]
#   --workers N       lfmq quantize --workers [the CPUs]
#   --rounds N        runs of each binary on each shape [1]
#   --baseline BIN    an lfmq binary to compare with (e.g. one built at an
#                     older commit)
#   --prebuilt DIR    use DIR/lfmq and DIR/synthckpt instead of building
#   --synth-dir DIR   where the checkpoints are kept
#                     [${TMPDIR:-/tmp}/lfmq-bench-quantize]
#   --out DIR         keep the logs (and each output's sha256 sums) there
#                     [a temporary directory]
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

root=$(cd "$(dirname "$0")/.." && pwd)
shapes="8b-a1b 24b-a2b" layers=2 calib=$root/testdata/tiny-lfm2-moe/calibration/calibration.jsonl
seqs="" workers="" rounds=1 baseline="" prebuilt="" synth_dir="${TMPDIR:-/tmp}/lfmq-bench-quantize" out=""
while [ $# -gt 0 ]; do
	case "$1" in
	--shapes) shapes=$2; shift ;;
	--layers) layers=$2; shift ;;
	--calib) calib=$2; shift ;;
	--calib-seqs) seqs=$2; shift ;;
	--workers) workers=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--baseline) baseline=$2; shift ;;
	--prebuilt) prebuilt=$2; shift ;;
	--synth-dir) synth_dir=$2; shift ;;
	--out) out=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "bench-quantize.sh: unknown option $1 (--help lists them)" >&2; exit 2 ;;
	esac
	shift
done
[ -x /usr/bin/time ] || { echo "bench-quantize.sh: needs GNU time at /usr/bin/time (Debian: apt-get install time)" >&2; exit 1; }
[ -f "$calib" ] || { echo "bench-quantize.sh: no calibration file $calib" >&2; exit 1; }
if [ -n "$baseline" ] && [ ! -x "$baseline" ]; then
	echo "bench-quantize.sh: --baseline $baseline is not an executable" >&2
	exit 1
fi

if [ -z "$out" ]; then
	out=$(mktemp -d "${TMPDIR:-/tmp}/lfmq-bench-quantize-logs.XXXXXX")
fi
mkdir -p "$out" "$synth_dir"
if [ -n "$prebuilt" ]; then
	bin=$prebuilt
else
	command -v go >/dev/null || { echo "bench-quantize.sh: no go toolchain: use --prebuilt DIR" >&2; exit 1; }
	bin=$out/bin
	mkdir -p "$bin"
	echo "building lfmq and synthckpt into $bin" >&2
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$bin/lfmq" ./cmd/lfmq &&
		CGO_ENABLED=0 go build -trimpath -o "$bin/synthckpt" ./internal/cmd/synthckpt)
fi
for f in lfmq synthckpt; do
	[ -x "$bin/$f" ] || { echo "bench-quantize.sh: $bin/$f is missing or not executable" >&2; exit 1; }
done

# run LABEL BINARY CKPT LOG: one quantization, its output removed after.
run() {
	local label=$1 exe=$2 ckpt=$3 log=$4 q=$out/q-$1
	rm -rf "$q" "$out/.q-$1.partial"
	local args=(quantize --model "$ckpt" --out "$q" --calib "$calib")
	[ -n "$seqs" ] && args+=(--calib-seqs "$seqs")
	[ -n "$workers" ] && args+=(--workers "$workers")
	local load0 t0
	load0=$(cut -d' ' -f1 /proc/loadavg)
	t0=$(date +%s.%N)
	LFMQ_WORK_TRACE=${log%.log}.trace /usr/bin/time -v "$exe" "${args[@]}" >"$log" 2>&1 &
	local tpid=$!
	rss_trace "$tpid" "$log" "${log%.log}.rss" &
	local spid=$!
	wait "$tpid" || { kill "$spid" 2>/dev/null; tail -30 "$log" >&2; echo "bench-quantize.sh: $label failed, log in $log" >&2; exit 1; }
	wait "$spid" || true
	local wall
	wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	# The output's checksums, kept beside the log, so that the bytes of two
	# binaries' outputs can be compared after the outputs are gone.
	(cd "$q" && find . -type f | LC_ALL=C sort | xargs sha256sum) >"${log%.log}.sha256"
	rm -rf "$q"
	local user sys rss
	user=$(sed -n 's/.*User time (seconds): *//p' "$log")
	sys=$(sed -n 's/.*System time (seconds): *//p' "$log")
	rss=$(sed -n 's/.*Maximum resident set size (kbytes): *//p' "$log")
	printf '%s\t%s\t%.1f\t%.2f\t%s\t%s\n' "$label" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" \
		"$(awk -v k="$rss" 'BEGIN { print k * 1024 / 1e9 }')" "$load0" "$(cut -d' ' -f1 /proc/loadavg)"
}

# rss_trace TIME_PID LOG OUT: every 2 s while the quantize run under
# /usr/bin/time (pid TIME_PID) lasts, one line in OUT: seconds, the run's
# resident anonymous and file-backed memory in MB (/proc/PID/status: the
# heap, and the mapped checkpoint pages), the stage of its last progress
# line, so that a peak can be placed in a stage, and its CPU time so far
# (user + system, /proc/PID/stat), so that each layer's can be told.
rss_trace() {
	local tpid=$1 log=$2 trace=$3 pid="" t=0 hz
	hz=$(getconf CLK_TCK)
	: >"$trace"
	while [ -z "$pid" ] && kill -0 "$tpid" 2>/dev/null; do
		pid=$(pgrep -P "$tpid" | head -1 || true)
		sleep 0.2
	done
	[ -n "$pid" ] || return 0
	while [ -r "/proc/$pid/status" ]; do
		printf '%s\t%s\t%s\t%s\n' "$t" "$(awk '/^RssAnon/ { a = $2 } /^RssFile/ { f = $2 } END { printf "%d\t%d", a / 1024, f / 1024 }' "/proc/$pid/status" 2>/dev/null)" \
			"$(tr '\r' '\n' <"$log" | grep -a 'quantizing:' | tail -1 | sed 's/.*(\(layer [^)]*\)).*/\1/')" \
			"$(awk -v hz="$hz" '{ sub(/.*\) /, ""); printf "%.2f", ($12 + $13) / hz }' "/proc/$pid/stat" 2>/dev/null)" >>"$trace"
		sleep 2
		t=$((t + 2))
	done
}

# rss_peaks TRACE: the largest anonymous and file-backed resident memory
# rss_trace saw, and the stage each was seen in.
rss_peaks() {
	[ -s "$1" ] || return 0
	awk -F'\t' '$2 > a { a = $2; as = $4 } $3 > f { f = $3; fs = $4 }
		END { printf "  resident, sampled every 2 s: anonymous peak %.2f GB (%s), mapped files peak %.2f GB (%s)\n", a / 1000, as, f / 1000, fs }' "$1"
}

# layer_costs TRACE: from the 2-second samples of rss_trace, each layer's
# share of the run (the stage the progress line named: the dense files'
# and the head's work shows under the layer it belongs to, the head under
# the layer after the last), its wall time, its CPU time (user + system)
# and its peaks of anonymous and mapped-file resident memory.
layer_costs() {
	[ -s "$1" ] || return 0
	awk -F'\t' '
		{
			l = $4; sub(/:.*/, "", l)
			if (l !~ /^layer /) l = "(start)"
			if (!(l in n)) order[k++] = l
			n[l]++
			if (NF >= 5 && $5 != "") { if (hascpu) cpu[l] += $5 - last; last = $5; hascpu = 1 }
			if ($2 > a[l]) a[l] = $2
			if ($3 > f[l]) f[l] = $3
		}
		END {
			printf "  %-9s %8s %8s %14s %14s\n", "stage of", "wall s", "CPU s", "peak anon GB", "peak file GB"
			for (i = 0; i < k; i++) {
				l = order[i]
				printf "  %-9s %8d %8.1f %14.2f %14.2f\n", l, 2 * n[l], cpu[l], a[l] / 1000, f[l] / 1000
			}
		}' "$1"
}

# estimate_error LOG: how the progress lines' "about T left (E elapsed)"
# compare with the time that actually remained (the run's wall time from
# /usr/bin/time less E): the ratio estimated/actual over the whole run and
# over its middle (10–90 % of the wall time).
estimate_error() {
	local log=$1 total
	total=$(sed -n 's/.*Elapsed (wall clock) time[^:]*: *//p' "$log" |
		awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
	awk -v total="$total" '
		function secs(d,   n, v, c, u) {
			v = 0; n = ""
			while (length(d) > 0) {
				c = substr(d, 1, 1); d = substr(d, 2)
				if (c ~ /[0-9.]/) { n = n c; continue }
				u = (c == "h") ? 3600 : (c == "m") ? 60 : 1
				v += n * u; n = ""
			}
			return v
		}
		match($0, /about [0-9hms.]+ left \([0-9hms.]+ elapsed\)/) {
			split(substr($0, RSTART, RLENGTH), f, " ")
			est = secs(f[2]); el = secs(substr(f[4], 2))
			if (total - el < 30) next # the last half-minute: too short to judge
			r = est / (total - el)
			n++; lo = (n == 1 || r < lo) ? r : lo; hi = (n == 1 || r > hi) ? r : hi
			if (el >= 0.1 * total && el <= 0.9 * total) {
				m++; mlo = (m == 1 || r < mlo) ? r : mlo; mhi = (m == 1 || r > mhi) ? r : mhi
			}
		}
		END {
			if (n) printf "  time-left estimate / actual: %.2f–%.2f× (%d lines); %.2f–%.2f× from 10 %% to 90 %% of the run\n", lo, hi, n, mlo, mhi
		}' "$log"
}

# kind_costs TRACE: each kind of work's time (the time from the report
# before each of its reports), work, time per unit and that against the
# w1/w3 solves', on the wall clock and, where the trace has it, in the
# process's CPU time (quant.WorkKind.Cost's measure).
kind_costs() {
	[ -f "$1" ] || return 0
	awk -F'\t' '
		$1 == "kind" { name[$2] = $3; total[$2] = $4; n++ }
		$1 == "work" {
			spent[$3] += $2 - last; last = $2; done[$3] += $4
			if (NF >= 5) { cpu[$3] += $5 - lastcpu; lastcpu = $5; hascpu = 1 }
		}
		END {
			ref = (done[3] > 0) ? spent[3] / done[3] : 0
			cref = (done[3] > 0) ? cpu[3] / done[3] : 0
			printf "  %-18s %10s %10s %12s %8s", "work kind", "seconds", "work", "ns per unit", "cost"
			if (hascpu) printf " %10s %12s %8s", "CPU s", "CPU ns/unit", "CPU cost"
			printf "\n"
			for (k = 0; k < n; k++) {
				if (total[k] == 0) continue
				r = (done[k] > 0) ? spent[k] / done[k] : 0
				printf "  %-18s %10.1f %10.3g %12.4f %8.2f", name[k], spent[k], done[k], r * 1e9, ref ? r / ref : 0
				if (hascpu) {
					c = (done[k] > 0) ? cpu[k] / done[k] : 0
					printf " %10.1f %12.4f %8.2f", cpu[k], c * 1e9, cref ? c / cref : 0
				}
				printf "\n"
			}
		}' "$1"
}

echo "lfmq quantize at real widths: $layers layers per shape, calibration $(basename "$calib")${seqs:+ (first $seqs windows)}; $(nproc) CPUs; logs in $out"
for shape in $shapes; do
	ckpt=$synth_dir/$shape-$layers
	if [ ! -f "$ckpt/config.json" ] || [ ! -f "$ckpt/tokenizer.json" ]; then
		echo "writing the $layers-layer $shape checkpoint into $ckpt" >&2
		rm -rf "$ckpt"
		"$bin/synthckpt" --shape "$shape" --layers "$layers" --tokenizer-from "$root/testdata/tiny-lfm2-moe/model" --out "$ckpt"
	fi
	echo
	echo "== $shape, $layers layers ($(du -shL "$ckpt" | cut -f1) of BF16)"
	printf 'binary\twall_s\tcpu_s\tpeak_rss_GB\tload_start\tload_end\n'
	: >"$out/$shape.rows"
	for r in $(seq 1 "$rounds"); do
		if [ -n "$baseline" ]; then
			run "baseline" "$baseline" "$ckpt" "$out/$shape-baseline-$r.log" | tee -a "$out/$shape.rows"
		fi
		run "this" "$bin/lfmq" "$ckpt" "$out/$shape-this-$r.log" | tee -a "$out/$shape.rows"
	done
	echo "phases (this binary, last round):"
	grep -E '^(time:|dense GPTQ|throughput:)' "$out/$shape-this-$rounds.log" | sed 's/^/  /'
	estimate_error "$out/$shape-this-$rounds.log"
	rss_peaks "$out/$shape-this-$rounds.rss"
	layer_costs "$out/$shape-this-$rounds.rss"
	kind_costs "$out/$shape-this-$rounds.trace"
	[ -f "$out/$shape-this-$rounds.trace" ] && awk -F'\t' -f "$root/scripts/work-trace-layers.awk" "$out/$shape-this-$rounds.trace"
	if [ -n "$baseline" ]; then
		echo "phases (baseline, last round):"
		grep -E '^(time:|dense GPTQ|throughput:)' "$out/$shape-baseline-$rounds.log" | sed 's/^/  /'
		estimate_error "$out/$shape-baseline-$rounds.log"
		rss_peaks "$out/$shape-baseline-$rounds.rss"
		awk -F'\t' '$1 == "baseline" { bc += $3; br += $4; nb++ } $1 == "this" { tc += $3; tr += $4; nt++ }
			END { if (nb && nt) printf "this/baseline: CPU time %.2f×, peak RSS %.2f× (means of %d rounds)\n", (tc/nt)/(bc/nb), (tr/nt)/(br/nb), nt }' "$out/$shape.rows"
	fi
done
