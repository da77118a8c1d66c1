#!/usr/bin/env bash
# check-gguf-llama.sh: does llama.cpp, given the GGUF that
# internal/cmd/lfm2gguf writes, compute the test fixture's reference
# logits? An end-to-end check of the converter against an independent
# implementation.
#
# Usage: scripts/check-gguf-llama.sh [--type f32|f16|bf16|q8_0] LLAMA_BUILD_DIR
#
# LLAMA_BUILD_DIR is a CMake build of llama.cpp (libllama and its headers'
# source tree, found through CMakeCache.txt). The script converts
# testdata/tiny-lfm2-moe/model to GGUF (--type, default f32), compiles a
# small C program against libllama that reads token ids and prints every
# position's logits, runs it on the fixture's six reference prompts and
# compares with reference/logits.safetensors (float32 reference from the
# same BF16 weights): per prompt, the largest absolute difference and the
# positions whose top token agrees. It fails when a top token differs with
# --type f32 (with the other types it only reports: their rounding moves
# logits). Needs cc and python3 (standard library only).
set -euo pipefail
typ=f32 build=""
while [ $# -gt 0 ]; do
	case "$1" in
	--type) typ=$2; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "check-gguf-llama: unknown option $1" >&2; exit 2 ;;
	*) build=$1 ;;
	esac
	shift
done
[ -n "$build" ] || { echo "usage: $0 [--type T] LLAMA_BUILD_DIR" >&2; exit 2; }
build=$(cd "$build" && pwd)
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
[ -f "$src/include/llama.h" ] || { echo "check-gguf-llama: no llama.h under '$src' (from $build/CMakeCache.txt)" >&2; exit 1; }
lib=$(dirname "$(find "$build" -name 'libllama.so*' -print -quit)")
[ -n "$lib" ] && [ "$lib" != . ] || { echo "check-gguf-llama: no libllama.so in $build" >&2; exit 1; }
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-gguf-llama.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

(cd "$repo" && go run ./internal/cmd/lfm2gguf --model testdata/tiny-lfm2-moe/model --type "$typ" --out "$tmp/tiny.gguf")

cat >"$tmp/logits.c" <<'C'
/* Reads token ids from stdin; writes n_tokens x n_vocab float32 logits. */
#include <stdio.h>
#include <stdlib.h>
#include "llama.h"
int main(int argc, char **argv) {
    static int ids[4096];
    int n = 0;
    while (n < 4096 && scanf("%d", &ids[n]) == 1) n++;
    llama_backend_init();
    struct llama_model *m = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!m) return 1;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 4096;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    struct llama_context *ctx = llama_init_from_model(m, cp);
    if (!ctx) return 1;
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = ids[i]; b.pos[i] = i; b.n_seq_id[i] = 1; b.seq_id[i][0] = 0; b.logits[i] = 1;
    }
    b.n_tokens = n;
    if (llama_decode(ctx, b) != 0) return 1;
    int nv = llama_vocab_n_tokens(llama_model_get_vocab(m));
    for (int i = 0; i < n; i++) fwrite(llama_get_logits_ith(ctx, i), sizeof(float), nv, stdout);
    return 0;
}
C
cc -O2 -o "$tmp/logits" "$tmp/logits.c" -I"$src/include" -I"$src/ggml/include" \
	-L"$lib" -lllama -lggml -lggml-base -Wl,-rpath,"$lib"

python3 - "$tmp/logits" "$tmp/tiny.gguf" "$repo/testdata/tiny-lfm2-moe/reference/logits.safetensors" "$typ" <<'PY'
import array, json, struct, subprocess, sys
prog, gguf, ref, typ = sys.argv[1:]
failed = False
with open(ref, 'rb') as f:
    n = struct.unpack('<Q', f.read(8))[0]
    hdr = json.loads(f.read(n))
    def read(name, code):
        b, e = hdr[name]['data_offsets']
        f.seek(8 + n + b)
        a = array.array(code)
        a.frombytes(f.read(e - b))
        return a
    for p in sorted(k[:-len('.input_ids')] for k in hdr if k.endswith('.input_ids')):
        ids, want = read(p + '.input_ids', 'i'), read(p + '.logits', 'f')
        out = subprocess.run([prog, gguf], input=' '.join(map(str, ids)).encode(), capture_output=True, check=True).stdout
        got = array.array('f')
        got.frombytes(out)
        v = len(want) // len(ids)
        if len(got) != len(want):
            sys.exit(f'{p}: {len(got)} logits from llama.cpp, want {len(want)}')
        top = lambda a, t: max(range(v), key=lambda j: a[t * v + j])
        agree = sum(top(got, t) == top(want, t) for t in range(len(ids)))
        diff = max(abs(x - y) for x, y in zip(got, want))
        print(f'{p}: {len(ids)} positions, max |llama.cpp - reference| {diff:.4g}, top token agrees at {agree}/{len(ids)}')
        failed |= typ == 'f32' and agree != len(ids)
sys.exit(1 if failed else 0)
PY
