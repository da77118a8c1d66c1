#!/usr/bin/env bash
# demo-launch.sh BIN RELEASE_DIR REFERENCE CORPUS OUT_DIR
#
# The last part of `make demo`: launch the demo release as a user would
# (`lfmq launch`: verify every byte, pin the bundled runtime, exec its
# serve) with the agentic preset on a free port; ask it a chat question and
# a tool-call question over the OpenAI API and print the answers and the
# speed; score the running server against the BF16 reference next to the
# release's checkpoint scored in process (the two rows must be identical);
# then stop it with SIGTERM and check that it exits 0.
set -euo pipefail
bin=$1 release=$2 ref=$3 corpus=$4 out=$5

mkdir -p "$out"
log="$out/launch.log"
"$bin" launch --release-dir "$release" --sampling-preset agentic --port 0 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT

url=""
for _ in $(seq 300); do
	url=$(sed -n 's/.*addr=\(http:[^ ]*\).*/\1/p' "$log" | head -1)
	if [ -n "$url" ] && curl -sf "$url/health" >/dev/null 2>&1; then
		break
	fi
	kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
	sleep 0.1
done
grep -E '^(verified|exec) ' "$log"
echo "serving at $url"
model=$(curl -s "$url/v1/models" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
echo "model: $model"
echo "-- chat (agentic preset: temperature 0.6, top_p 0.95):"
curl -s -o "$out/chat.json" -w '%{time_total}\n' "$url/v1/chat/completions" -H 'Content-Type: application/json' \
	-d '{"messages":[{"role":"user","content":"What does the ls command do?"}],"max_tokens":48,"seed":1}' >"$out/chat.time"
sed -n 's/.*"content":"\(\([^"\\]\|\\.\)*\)".*/answer: \1/p' "$out/chat.json"
tokens=$(sed -n 's/.*"completion_tokens":\([0-9]*\).*/\1/p' "$out/chat.json")
awk -v n="$tokens" -v t="$(cat "$out/chat.time")" 'BEGIN { printf "%d tokens in %.3f s: %.0f tokens/s end to end\n", n, t, n / t }'
echo "-- streamed tool call:"
curl -sN "$url/v1/chat/completions" -H 'Content-Type: application/json' \
	-d '{"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Please compute 128 + 256."}],
	     "tools":[{"type":"function","function":{"name":"calculate","parameters":{"type":"object","properties":{"expression":{"type":"string"}}}}}],
	     "temperature":0,"max_tokens":32,"stream":true}' | grep -E 'tool_calls|finish_reason":"' | cut -c1-240
echo "-- scoring the launched server and the release's checkpoint in process (rows must be equal):"
"$bin" score --reference "$ref" --candidate "launched=$url" --candidate "in-process=$release/checkpoint" \
	--corpus "chat=$corpus" --max-records 8 --ctx 256 --out "$out/score-launched.json" | tee "$out/score-launched.md"
a=$(grep '^| launched | chat |' "$out/score-launched.md" | cut -d'|' -f4-)
b=$(grep '^| in-process | chat |' "$out/score-launched.md" | cut -d'|' -f4-)
if [ -z "$a" ] || [ "$a" != "$b" ]; then
	echo "launched and in-process rows differ" >&2
	exit 1
fi
echo "launched = in-process, every digit"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
trap - EXIT
if [ "$rc" -ne 0 ]; then
	cat "$log" >&2
	echo "the launched server exited $rc after SIGTERM, want 0" >&2
	exit 1
fi
echo "server stopped (SIGTERM, exit 0)"
