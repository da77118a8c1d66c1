#!/usr/bin/env bash
# demo-release.sh BIN CHECKPOINT EVIDENCE_DIR OUT_DIR
#
# The release part of `make demo`: build a release of the demo checkpoint
# (runtime for this platform only, to keep the demo short), verify it, then
# flip one bit of a checkpoint file in a copy and show that verification
# fails with exit code 3. --allow-dirty: the demo builds from the working
# tree as it is, edits included (the card then says so); a release to
# publish is built from a clean commit.
set -euo pipefail
bin=$1 ckpt=$2 evidence=$3 out=$4

rm -rf "$out"
mkdir -p "$out"
printf 'Demo licence: the tiny LFM2-MoE fixture is test data, not a released model.\n' > "$out/LICENSE"
"$bin" release build --checkpoint "$ckpt" --out "$out/release" --evidence "$evidence" \
	--license "$out/LICENSE" --license-id other --license-name lfmq-demo --license-link LICENSE \
	--base-model lfmq/tiny-lfm2-moe --hub-repo lfmq/tiny-lfm2-moe-lfmq1 --revision demo \
	--platforms "$(go env GOOS)/$(go env GOARCH)" --allow-dirty
echo
"$bin" verify --release-dir "$out/release"

cp -R "$out/release" "$out/tampered"
f="$out/tampered/checkpoint/global.safetensors"
b=$(od -An -tu1 -j4096 -N1 "$f" | tr -d ' ')
printf "$(printf '\\%03o' $((b ^ 1)))" | dd of="$f" bs=1 seek=4096 conv=notrunc 2>/dev/null
echo
echo "flipped one bit of byte 4096 of checkpoint/global.safetensors in a copy; verify must fail with exit 3:"
rc=0
"$bin" verify --release-dir "$out/tampered" || rc=$?
if [ "$rc" -ne 3 ]; then
	echo "verify exit $rc, want 3" >&2
	exit 1
fi
echo "tampering detected (exit 3)"
