package api

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/lfmq/lfmq/engine/sched"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// normalizeSSE replaces what differs between runs (ids and timestamps).
var (
	reID      = regexp.MustCompile(`"id":"(chatcmpl|cmpl|chatcmpl-tool)-[0-9a-f]{32}"`)
	reCreated = regexp.MustCompile(`"created":[0-9]+`)
)

func normalizeSSE(b []byte) []byte {
	b = reID.ReplaceAll(b, []byte(`"id":"$1-ID"`))
	return reCreated.ReplaceAll(b, []byte(`"created":0`))
}

// TestSSEGolden: whole event streams, byte for byte (ids and timestamps
// normalised): the role chunk, content, both reasoning fields, a tool
// call, the finish reasons, the usage chunk and [DONE].
func TestSSEGolden(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	ps := fixturePrompts(t)
	tests := []struct {
		name string
		path string
		body map[string]any
	}{
		{"chat_content_usage", "/v1/chat/completions", map[string]any{"messages": ps[2].Messages, "temperature": 0, "max_tokens": 8, "stream": true, "stream_options": map[string]any{"include_usage": true}}},
		{"chat_reasoning", "/v1/chat/completions", map[string]any{"messages": ps[4].Messages, "temperature": 0, "max_tokens": 12, "stream": true}},
		{"chat_tool_call", "/v1/chat/completions", map[string]any{"messages": ps[3].Messages, "tools": ps[3].Tools, "temperature": 0, "max_tokens": 32, "stream": true, "stream_options": map[string]any{"include_usage": true}}},
		{"chat_logprobs", "/v1/chat/completions", map[string]any{"messages": ps[2].Messages, "temperature": 0, "max_tokens": 3, "stream": true, "logprobs": true, "top_logprobs": 2}},
		{"completion_stop", "/v1/completions", map[string]any{"prompt": ps[0].InputIDs, "temperature": 0, "max_tokens": 32, "stop": "crown", "stream": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(t, ts.URL+tt.path, tt.body)
			if status != 200 {
				t.Fatalf("%d %s", status, body)
			}
			checkGolden(t, tt.name, normalizeSSE(body))
		})
	}
}

// TestSSEErrorFrame: a request cut off by shutdown after its stream
// started ends with an error frame and [DONE].
func TestSSEErrorFrame(t *testing.T) {
	ts := newTestServer(t, Options{}, sched.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	// A scheduler of its own, stopped mid-stream.
	sch, err := sched.New(tinySession(t).Model, sched.Config{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { sch.Run(ctx); close(done) }()
	ts.SetReady(&Engine{Session: tinySession(t), Sched: sch})
	resp := startStream(t, context.Background(), ts.URL, map[string]any{"prompt": "The sea", "max_tokens": 3000, "min_tokens": 3000, "temperature": 0, "stream": true})
	defer resp.Body.Close()
	buf := make([]byte, 1)
	resp.Body.Read(buf) // the stream has started
	cancel()
	<-done
	rest, _ := io.ReadAll(resp.Body)
	body := append(buf, rest...)
	// Drop the content events; keep the end.
	end := regexp.MustCompile(`(?s)^.*?(data: \{"error".*)$`).FindSubmatch(body)
	if end == nil {
		t.Fatalf("no error frame in %s", body)
	}
	checkGolden(t, "error_frame", end[1])
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from %s:\n got %s\nwant %s", name, path, got, want)
	}
}
