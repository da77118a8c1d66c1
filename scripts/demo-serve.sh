#!/usr/bin/env bash
# demo-serve.sh BIN CHECKPOINT REFERENCE CORPUS OUT_DIR
#
# The serving part of `make demo`: start `lfmq serve` on the demo
# checkpoint (a free port), ask it a chat question and a tool-call
# question over the OpenAI API, score the running server against the BF16
# reference next to the same checkpoint scored in process (the two rows
# must be identical), then stop it with SIGTERM and check that it exits 0.
set -euo pipefail
bin=$1 ckpt=$2 ref=$3 corpus=$4 out=$5

mkdir -p "$out"
log="$out/serve.log"
"$bin" serve --model "$ckpt" --port 0 --served-model-name tiny-gptq 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT

url=""
for _ in $(seq 200); do
	url=$(sed -n 's/.*addr=\(http:[^ ]*\).*/\1/p' "$log" | head -1)
	if [ -n "$url" ] && curl -sf "$url/health" >/dev/null 2>&1; then
		break
	fi
	kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
	sleep 0.1
done
echo "serving at $url"
curl -s "$url/v1/models"
echo
echo "-- chat:"
curl -s "$url/v1/chat/completions" -H 'Content-Type: application/json' \
	-d '{"messages":[{"role":"user","content":"What does the ls command do?"}],"max_tokens":32}'
echo
echo "-- streamed tool call:"
curl -sN "$url/v1/chat/completions" -H 'Content-Type: application/json' \
	-d '{"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Please compute 128 + 256."}],
	     "tools":[{"type":"function","function":{"name":"calculate","parameters":{"type":"object","properties":{"expression":{"type":"string"}}}}}],
	     "temperature":0,"max_tokens":32,"stream":true}'
echo "-- scoring the running server and the same checkpoint in process (rows must be equal):"
"$bin" score --reference "$ref" --candidate "served=$url" --candidate "in-process=$ckpt" \
	--corpus "chat=$corpus" --max-records 8 --ctx 256 --out "$out/score-served.json" | tee "$out/score-served.md"
a=$(grep '^| served | chat |' "$out/score-served.md" | cut -d'|' -f4-)
b=$(grep '^| in-process | chat |' "$out/score-served.md" | cut -d'|' -f4-)
if [ -z "$a" ] || [ "$a" != "$b" ]; then
	echo "served and in-process rows differ" >&2
	exit 1
fi
echo "served = in-process, every digit"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
trap - EXIT
if [ "$rc" -ne 0 ]; then
	cat "$log" >&2
	echo "serve exited $rc after SIGTERM, want 0" >&2
	exit 1
fi
echo "server stopped (SIGTERM, exit 0)"
