package corpus_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/chat"
	"github.com/lfmq/lfmq/engine/tokenizer"
	"github.com/lfmq/lfmq/evidence/corpus"
)

const (
	fixture = "../../testdata/tiny-lfm2-moe"
	model   = fixture + "/model"
	vocab   = 8192
)

func encoder(t testing.TB) *corpus.Encoder {
	t.Helper()
	tok, err := tokenizer.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	return corpus.NewEncoder(tok, vocab, func() (*chat.Template, error) { return chat.Load(model) })
}

// TestFixtureRecords checks the three record kinds against the fixture's
// input_ids, made independently with Hugging Face tokenizers: messages
// rendered with the chat template must give the same ids, and text records
// BOS + ordinary encoding (the fixture appends <|endoftext|> as training
// did; the scorer does not).
func TestFixtureRecords(t *testing.T) {
	enc := encoder(t)
	for _, name := range []string{"chat", "instruct", "code"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(fixture, "corpora", name+".jsonl")
			c, err := corpus.Load(name, path, enc, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Records) == 0 || c.Records[0].Source != "input_ids" || c.Records[0].Tokens[0] != 1 {
				t.Fatalf("records %d, first %+v", len(c.Records), c.Records[0].Source)
			}
			data, _ := os.ReadFile(path)
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			n := len(lines)
			if testing.Short() {
				n = min(n, 20)
			}
			for i, l := range lines[:n] {
				// Drop input_ids so the record is encoded by the scorer.
				j := strings.Index(l, `, "input_ids"`)
				if j < 0 {
					t.Fatalf("line %d: no input_ids", i+1)
				}
				stripped := l[:j] + "}"
				recs, err := corpus.Parse("x", []byte(stripped), enc, 0)
				if err != nil {
					t.Fatal(err)
				}
				want := c.Records[i].Tokens
				got := recs[0].Tokens
				if name == "code" {
					if recs[0].Source != "text" {
						t.Fatalf("source %s", recs[0].Source)
					}
					want = want[:len(want)-1] // the fixture's trailing <|endoftext|>
				} else if recs[0].Source != "messages" {
					t.Fatalf("source %s", recs[0].Source)
				}
				if !slices.Equal(got, want) {
					k := 0
					for k < min(len(got), len(want)) && got[k] == want[k] {
						k++
					}
					t.Fatalf("record %s: %d ids, want %d; first difference at %d", c.Records[i].ID, len(got), len(want), k)
				}
			}
		})
	}
}

func TestRecordErrors(t *testing.T) {
	enc := encoder(t)
	tests := []struct{ data, want string }{
		{`{"input_ids": [1, 8192]}`, "x:1: input_ids[1]: id 8192 outside the vocabulary"},
		{"\n{\"id\": \"r7\", \"input_ids\": [1, -1]}", "x:2 (record r7): input_ids[1]"},
		{`{"id": 3, "input_ids": "abc"}`, "x:1 (record 3): input_ids: not an array of integers"},
		{`{"input_ids": [1.5]}`, "input_ids: not an array"},
		{`{"messages": {"role": "user"}}`, "messages: invalid"},
		{`{"messages": [{"role": "user", "content": "hi"}], "tools": 3}`, "tools: invalid"},
		{`{"kind": "x"}`, "has none of input_ids, messages or text"},
		{`[1, 2]`, "not a JSON object"},
		{`{"text": 5}`, "not a JSON object"},
		{"\xEF\xBB\xBF{\"text\": \"a\"}", "x:1: starts with a UTF-8 byte-order mark"},
	}
	for _, tt := range tests {
		_, err := corpus.Parse("x", []byte(tt.data), enc, 0)
		var re *corpus.RecordError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want a RecordError with %q", tt.data, err, tt.want)
		}
	}
}

func TestTextAndLimit(t *testing.T) {
	enc := encoder(t)
	recs, err := corpus.Parse("x", []byte("{\"text\": \"hello <|im_end|> world\"}\n\n{\"text\": \"\"}\n{\"text\": \"z\"}\n"), enc, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Tokens[0] != 1 || slices.Contains(recs[0].Tokens, 7) || recs[1].Line != 3 || len(recs[1].Tokens) != 1 {
		t.Fatalf("%+v", recs)
	}
}

// FuzzParse feeds arbitrary corpus bytes to the parser: errors are fine,
// panics are not.
func FuzzParse(f *testing.F) {
	enc := encoder(f)
	f.Add([]byte(`{"input_ids": [1, 2, 3]}`))
	f.Add([]byte(`{"messages": [{"role": "user", "content": "hi <|im_end|>"}, {"role": "assistant", "content": "<think>x</think>y"}]}`))
	f.Add([]byte(`{"messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "f"}]}` + "\n" + `{"text": "a\u0000b"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := corpus.Parse("fuzz", data, enc, 0)
		if err != nil {
			return
		}
		for _, r := range recs {
			for _, id := range r.Tokens {
				if id < 0 || id >= vocab {
					t.Fatalf("id %d", id)
				}
			}
		}
	})
}
