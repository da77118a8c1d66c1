#!/usr/bin/env bash
# gpu-check.sh: the device check of lfmq's GPU engine (docs/gpu.md), for a
# machine with an NVIDIA GPU (or any OpenCL GPU with --device opencl).
#
# It runs the engine's TestGPUCheck on the device and prints its JSON
# lines: the device, its driver and the kernels' sha256 (PTX for CUDA);
# the float32 logits that differ from the CPU engine's (the claim is 0) on
# the fixture and the LFM3 fixture (BF16 and RTN; every LFM3 prompt, four
# past its sliding window) and on RTN checkpoints of synthetic models with
# LFM2-8B-A1B's and LFM2-24B-A2B's layer shapes, generated on the machine;
# decode tokens/s at batch 1, 4 and 16 with the share of HBM bandwidth at
# batch 1, the step time and the kernel launches and transfers one decode
# step queues (step_us / launches_per_step bounds the launch overhead a
# step can afford); a 2,048-token prefill; 16 users' aggregate through the
# scheduler. About 5-8 minutes on a 16-core H200 machine, most of it
# writing and quantizing the synthetic checkpoints.
#
# Build here (Go toolchain, CGO_ENABLED=0), run there from a copy of the
# repository (the fixture in testdata/ is read):
#   scripts/gpu-check.sh --build-only DIR
#   scripts/gpu-check.sh --prebuilt DIR [--device cuda] [--layers 4] [--hbm-gbps 4800]
#
# Options:
#   --prebuilt DIR     run DIR/model.test instead of building it
#   --build-only DIR   build DIR/model.test and exit
#   --device KIND      cuda (default) or opencl
#   --layers N         layers of each synthetic checkpoint [4]
#   --hbm-gbps G       the device's memory bandwidth in GB/s [4800, H200]
#   --synth-dir DIR    keep the synthetic checkpoints there [a temporary directory]
#   --out FILE         also write the JSON lines to FILE
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

prebuilt="" build_only="" kind=cuda layers=4 hbm=4800 synth_dir="" out=""
while [ $# -gt 0 ]; do
	case "$1" in
	--prebuilt) prebuilt=$2; shift ;;
	--build-only) build_only=$2; shift ;;
	--device) kind=$2; shift ;;
	--layers) layers=$2; shift ;;
	--hbm-gbps) hbm=$2; shift ;;
	--synth-dir) synth_dir=$2; shift ;;
	--out) out=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "gpu-check.sh: unknown option $1 (--help lists them)" >&2; exit 2 ;;
	esac
	shift
done
case "$kind" in cuda | opencl) ;; *) echo "gpu-check.sh: --device $kind: want cuda or opencl" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
build() { mkdir -p "$1" && (cd "$root" && CGO_ENABLED=0 go test -c -o "$1/model.test" ./engine/model); }

if [ -n "$build_only" ]; then
	build "$build_only"
	echo "built $build_only/model.test; run: scripts/gpu-check.sh --prebuilt $build_only"
	exit 0
fi
bin_dir=$prebuilt
if [ -z "$bin_dir" ]; then
	bin_dir=$(mktemp -d)
	build "$bin_dir"
fi
bin=$(cd "$bin_dir" && pwd)/model.test
[ -x "$bin" ] || { echo "gpu-check.sh: no executable $bin (build it with --build-only DIR)" >&2; exit 1; }
[ -n "$synth_dir" ] && mkdir -p "$synth_dir"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >&2 || true

cd "$root/engine/model"
log=$(mktemp)
set +e
LFMQ_GPU_CHECK=$kind LFMQ_GPU_CHECK_LAYERS=$layers LFMQ_HBM_GBPS=$hbm LFMQ_GPU_CHECK_DIR=$synth_dir \
	"$bin" -test.run '^TestGPUCheck$' -test.v -test.timeout 20m >"$log" 2>&1
rc=$?
set -e
grep '^{"check"' "$log" | tee ${out:+"$out"}
if [ $rc -ne 0 ]; then
	echo "gpu-check.sh: the check failed (exit $rc):" >&2
	grep -v '^{"check"' "$log" | tail -30 >&2
	exit $rc
fi
# The claim: not one logit differs from the CPU engine's.
if grep '^{"check":"bits"' "$log" | grep -qv '"mismatches":0,'; then
	echo "gpu-check.sh: some logits differ from the CPU engine's" >&2
	exit 1
fi
