package choice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/lfmq/lfmq/engine/chat"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/tokenizer"
)

const tinyModel = "../../testdata/tiny-lfm2-moe/model"

const routing = `{"type":"object","additionalProperties":false,"required":["queue","urgent","tier"],
 "properties":{
  "queue":{"type":"string","enum":["billing","shipping","tech"],"description":"where to route"},
  "urgent":{"type":"boolean"},
  "tier":{"type":"string","enum":["express","express plus","standard"]}}}`

func TestParse(t *testing.T) {
	s, err := Parse([]byte(routing))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Fields) != 3 || s.Fields[0].Name != "queue" || s.Fields[1].Name != "urgent" || s.Fields[2].Name != "tier" {
		t.Fatalf("fields %+v", s.Fields)
	}
	if !slices.Equal(s.Fields[1].Candidates, []string{"true", "false"}) || !slices.Equal(s.Fields[2].Candidates, []string{`"express"`, `"express plus"`, `"standard"`}) {
		t.Errorf("candidates %+v", s.Fields)
	}
	if got, want := s.Render([]int{2, 0, 1}), "{\n  \"queue\": \"tech\",\n  \"urgent\": true,\n  \"tier\": \"express plus\"\n}"; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
	// Candidates that share a prefix are different texts: the delimiter
	// ends each value.
	if a, b := s.Branch(2, 0), s.Branch(2, 1); a != "  \"tier\": \"express\"\n}" || b != "  \"tier\": \"express plus\"\n}" {
		t.Errorf("branches %q %q", a, b)
	}
	if got := s.Branch(0, 1); got != "  \"queue\": \"shipping\",\n" {
		t.Errorf("first field's branch %q", got)
	}
	bad := []struct{ schema, path string }{
		{`[1]`, "(root)"},
		{`{"type":"array"}`, "type"},
		{`{"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"]}`, "additionalProperties"},
		{`{"type":"object","additionalProperties":true,"properties":{"a":{"type":"boolean"}},"required":["a"]}`, "additionalProperties"},
		{`{"type":"object","additionalProperties":false,"properties":{},"required":[]}`, "properties"},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"boolean"}},"required":[]}`, "properties.a"},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"integer"}},"required":["a"]}`, "properties.a.type"},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}},"required":["a"]}`, "properties.a"},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"object","properties":{}}},"required":["a"]}`, "properties.a.properties"},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string","enum":["x",1]}},"required":["a"]}`, "properties.a.enum[1]"},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string","enum":["x","x"]}},"required":["a"]}`, "properties.a.enum[1]"},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string","enum":["x"],"minLength":1}},"required":["a"]}`, "properties.a.minLength"},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"boolean"}},"required":["a","b"]}`, "required"},
		{`{"type":"object","additionalProperties":false,"$defs":{},"properties":{"a":{"type":"boolean"}},"required":["a"]}`, "$defs"},
	}
	for _, b := range bad {
		_, err := Parse([]byte(b.schema))
		var ue *UnsupportedError
		if !errors.As(err, &ue) || ue.Path != b.path {
			t.Errorf("%s: %v, want an UnsupportedError at %s", b.schema, err, b.path)
		}
	}
}

func TestPick(t *testing.T) {
	for _, tc := range []struct {
		scores []float64
		want   int
	}{{[]float64{-3, -1, -2}, 1}, {[]float64{-1, -1, -2}, 0}, {[]float64{-5, -2, -2}, 1}} {
		if got := pick(tc.scores); got != tc.want {
			t.Errorf("pick(%v) = %d, want %d", tc.scores, got, tc.want)
		}
	}
}

func state(t *testing.T, s *model.Sequence) []byte {
	t.Helper()
	conv, ok := s.ConvAt(s.Len())
	if !ok {
		t.Fatal("no conv state")
	}
	sp, err := s.CopySpan(0, s.Len(), conv)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := sp.MarshalBinary()
	return b
}

// TestScoreFrom: every branch's score equals the score of the same tokens
// computed by one plain forward over prompt + branch (candidates sharing
// a prefix included), and the shared state is unchanged by the scoring.
func TestScoreFrom(t *testing.T) {
	m, err := load.Load(tinyModel, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.Load(tinyModel)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := Parse([]byte(routing))
	prompt := append(tok.Encode("Route this ticket: my parcel never arrived and I need it tomorrow.", tokenizer.EncodeOptions{AddBOS: true}), tok.EncodeOrdinary(Open)...)
	branches := s.Encode(tok)
	shared := m.NewSequence()
	out, err := m.Forward(context.Background(), []*model.Sequence{shared}, [][]int{prompt}, model.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := state(t, shared)
	a, err := s.ScoreFrom(context.Background(), m, shared, out[0], branches)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, state(t, shared)) || shared.Len() != len(prompt) {
		t.Error("scoring changed the shared state")
	}
	V := m.Config.VocabSize
	var lp []float32
	for i := range s.Fields {
		for j, b := range branches[i] {
			full := slices.Concat(prompt, b)
			seq := m.NewSequence()
			rows, err := m.Forward(context.Background(), []*model.Sequence{seq}, [][]int{full}, model.ForwardOptions{Logits: model.AllLogits})
			if err != nil {
				t.Fatal(err)
			}
			var want float64
			for k, id := range b {
				pos := len(prompt) - 1 + k
				lp = sample.LogProbs(lp, rows[0][pos*V:(pos+1)*V])
				want += float64(lp[id])
			}
			if got := a.Scores[i][j]; math.Abs(got-want) > 1e-4 {
				t.Errorf("%s = %s: forked %v, plain %v", s.Fields[i].Name, s.Fields[i].Candidates[j], got, want)
			}
		}
		if a.Chosen[i] != pick(a.Scores[i]) {
			t.Errorf("field %d: chose %d of %v", i, a.Chosen[i], a.Scores[i])
		}
	}
	if a.Text != s.Render(a.Chosen) || a.BranchTokens == 0 {
		t.Errorf("answer %+v", a)
	}
	// The one-call form gives the same answer.
	b, err := s.Score(context.Background(), m, prompt, branches)
	if err != nil || !slices.Equal(b.Chosen, a.Chosen) || b.PromptTokens != len(prompt) {
		t.Errorf("Score: %+v, %v", b, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(routing))
	f.Add([]byte(`{"type":"object"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		if len(s.Fields) == 0 {
			t.Fatal("accepted a schema without fields")
		}
		chosen := make([]int, len(s.Fields))
		if !jsonValid(s.Render(chosen)) {
			t.Fatalf("rendered invalid JSON %q", s.Render(chosen))
		}
	})
}

// jsonValid reports whether text is one JSON value.
func jsonValid(text string) bool { return json.Valid([]byte(text)) }

func TestWithInstruction(t *testing.T) {
	s, _ := Parse([]byte(routing))
	user := []chat.Message{{Role: "user", Content: "hi"}}
	got := s.WithInstruction(user)
	if len(got) != 2 || got[0].Role != "system" || got[0].Content != s.Instruction() || len(user) != 1 {
		t.Errorf("%+v", got)
	}
	sys := []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "hi"}}
	got = s.WithInstruction(sys)
	if len(got) != 2 || got[0].Content != "Be brief.\n\n"+s.Instruction() || sys[0].Content != "Be brief." {
		t.Errorf("%+v", got)
	}
}
