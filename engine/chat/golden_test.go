package chat

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/lfm25")

// lfm2Specials are the special tokens of the LFM2 tokenizers (and of the
// fixture), ids 0–13 plus the thinking markers.
var lfm2Specials = []string{
	"<|pad|>", "<|startoftext|>", "<|endoftext|>", "<|fim_pre|>", "<|fim_mid|>", "<|fim_suf|>",
	"<|im_start|>", "<|im_end|>", "<|tool_list_start|>", "<|tool_list_end|>",
	"<|tool_call_start|>", "<|tool_call_end|>", "<|tool_response_start|>", "<|tool_response_end|>",
	"<think>", "</think>",
}

// requestFromJSON reads an OpenAI-style chat request body.
func requestFromJSON(t *testing.T, data []byte) Request {
	t.Helper()
	var body struct {
		Messages            json.RawMessage `json:"messages"`
		Tools               json.RawMessage `json:"tools"`
		AddGenerationPrompt bool            `json:"add_generation_prompt"`
		Kwargs              *Object         `json:"chat_template_kwargs"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		t.Fatal(err)
	}
	msgs, err := ParseMessages(body.Messages)
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Messages: msgs, AddGenerationPrompt: body.AddGenerationPrompt, Now: pinnedNow}
	if body.Tools != nil {
		if req.Tools, err = ParseTools(body.Tools); err != nil {
			t.Fatal(err)
		}
	}
	if body.Kwargs != nil {
		req.Kwargs = map[string]any{}
		for _, k := range body.Kwargs.Keys() {
			req.Kwargs[k], _ = body.Kwargs.Get(k)
		}
	}
	return req
}

// formatSegments writes one line per segment: "special <tok>" or "text
// <Go-quoted text>".
func formatSegments(segs []Segment) string {
	var b strings.Builder
	for _, s := range segs {
		if s.Special {
			fmt.Fprintf(&b, "special %s\n", s.Text)
		} else {
			fmt.Fprintf(&b, "text    %q\n", s.Text)
		}
	}
	return b.String()
}

// TestLFM25Golden renders the requests in testdata/lfm25 with an
// LFM2.5-v2-style template (thinking, Pythonic tool calls, dated tool
// block, generation blocks) and compares the prompt and its segments with
// the golden files. Segments use TrustAssistant, as the template splits
// assistant content at "</think>". Run with -update to rewrite them, review
// the diff, and check the prompts against Python Jinja2 with
// testdata/check_lfm25_golden.py.
func TestLFM25Golden(t *testing.T) {
	src, err := os.ReadFile("testdata/lfm25_v2.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := Parse(string(src), WithName("lfm25_v2.jinja"), WithToken("bos_token", "<|startoftext|>"), WithToken("eos_token", "<|im_end|>"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("testdata/lfm25/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no requests: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			req := requestFromJSON(t, data)
			prompt, err := tmpl.Render(req)
			if err != nil {
				t.Fatal(err)
			}
			segs, err := tmpl.RenderSegments(req, lfm2Specials, TrustAssistant())
			if err != nil {
				t.Fatal(err)
			}
			if joined := joinSegments(segs); joined != prompt {
				t.Errorf("segments join to\n%q\nbut Render gave\n%q", joined, prompt)
			}
			checkGolden(t, "testdata/lfm25/"+name+".golden", prompt)
			checkGolden(t, "testdata/lfm25/"+name+".segments.golden", formatSegments(segs))
		})
	}
}

func joinSegments(segs []Segment) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteString(s.Text)
	}
	return b.String()
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs\n got: %q\nwant: %q", path, got, want)
	}
}
