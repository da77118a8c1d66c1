package generate

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/chat"
	"github.com/lfmq/lfmq/engine/choice"
	"github.com/lfmq/lfmq/engine/model/load"
)

// schemaTasks are 30 routing and triage tasks: three closed schemas, ten
// requests each.
func schemaTasks() (schemas []string, msgs []string) {
	schemas = []string{
		`{"type":"object","additionalProperties":false,"required":["queue","urgent"],"properties":{"queue":{"type":"string","enum":["billing","shipping","tech","account"]},"urgent":{"type":"boolean"}}}`,
		`{"type":"object","additionalProperties":false,"required":["sentiment"],"properties":{"sentiment":{"type":"string","enum":["positive","negative","neutral"]}}}`,
		`{"type":"object","additionalProperties":false,"required":["department","needs_human","language"],"properties":{"department":{"type":"string","enum":["sales","support","legal"]},"needs_human":{"type":"boolean"},"language":{"type":"string","enum":["en","fr","de"]}}}`,
	}
	msgs = []string{
		"I was charged twice for my order last week.", "My parcel never arrived and I need it tomorrow.",
		"The app crashes when I open the settings page.", "Please close my account and delete my data.",
		"Can I get a quote for 200 licences?", "Bonjour, ma commande est arrivée cassée.",
		"Ich kann mich nicht mehr einloggen.", "Thanks, the new release works great!",
		"Your contract terms violate our agreement.", "Where can I download the invoice?",
	}
	return schemas, msgs
}

// schemaValid reports whether text is a JSON object with exactly the
// schema's fields, each holding one of its values.
func schemaValid(sch *choice.Schema, text string) bool {
	var obj map[string]any
	if json.Unmarshal([]byte(text), &obj) != nil || len(obj) != len(sch.Fields) {
		return false
	}
	for _, f := range sch.Fields {
		v, ok := obj[f.Name]
		if !ok || !slices.Contains(f.Values, v) {
			return false
		}
	}
	return true
}

// BenchmarkSchemaTasks answers 30 routing and triage tasks on the fixture
// model twice: by scoring (AnswerSchema) and by free greedy generation
// from the same prompt (opened with the same brace, up to 64 tokens), and
// reports for each the share of valid JSON, of schema-valid answers and
// the mean latency.
//
//	go test -run '^$' -bench SchemaTasks ./engine/generate
func BenchmarkSchemaTasks(b *testing.B) {
	s, err := Open(tinyModel, load.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	schemas, msgs := schemaTasks()
	var n, freeJSON, freeSchema, scoredSchema int
	var tFree, tScored time.Duration
	for range b.N {
		for _, raw := range schemas {
			sch, _ := choice.Parse([]byte(raw))
			for _, m := range msgs {
				conv, _ := json.Marshal([]map[string]string{{"role": "user", "content": m}})
				t0 := time.Now()
				_, a, err := s.AnswerSchema(context.Background(), conv, []byte(raw), time.Time{})
				if err != nil {
					b.Fatal(err)
				}
				tScored += time.Since(t0)
				if schemaValid(sch, a.Text) {
					scoredSchema++
				}
				parsed, _ := chat.ParseMessages(conv)
				rendered, err := s.EncodeChatRequest(chat.Request{Messages: sch.WithInstruction(parsed), AddGenerationPrompt: true}, chat.TrustAssistant())
				if err != nil {
					b.Fatal(err)
				}
				prompt := append(rendered, s.Tokenizer.EncodeOrdinary(choice.Open)...)
				t0 = time.Now()
				res, err := s.Run(context.Background(), prompt, Options{MaxTokens: 64, Params: greedy()})
				if err != nil {
					b.Fatal(err)
				}
				tFree += time.Since(t0)
				text, _ := s.Tokenizer.Decode(res.Tokens)
				text = choice.Open + text
				if json.Valid([]byte(text)) {
					freeJSON++
				}
				if schemaValid(sch, text) {
					freeSchema++
				}
				n++
			}
		}
	}
	b.ReportMetric(float64(scoredSchema)/float64(n), "scored_schema_valid")
	b.ReportMetric(float64(freeJSON)/float64(n), "free_json_valid")
	b.ReportMetric(float64(freeSchema)/float64(n), "free_schema_valid")
	b.ReportMetric(tScored.Seconds()*1000/float64(n), "scored_ms")
	b.ReportMetric(tFree.Seconds()*1000/float64(n), "free_ms")
}

// TestSchemaTasks: the scored answers of the 30 tasks are all schema-valid
// (by construction), and AnswerSchema refuses an unsupported schema.
func TestSchemaTasks(t *testing.T) {
	s := openTiny(t)
	schemas, msgs := schemaTasks()
	for _, raw := range schemas {
		sch, _ := choice.Parse([]byte(raw))
		for _, m := range msgs[:3] {
			conv, _ := json.Marshal([]map[string]string{{"role": "user", "content": m}})
			_, a, err := s.AnswerSchema(context.Background(), conv, []byte(raw), time.Time{})
			if err != nil || !schemaValid(sch, a.Text) {
				t.Errorf("%s / %s: %q %v", raw, m, a.Text, err)
			}
		}
	}
	if _, _, err := s.AnswerSchema(context.Background(), []byte(`[{"role":"user","content":"x"}]`), []byte(`{"type":"string"}`), time.Time{}); err == nil {
		t.Error("unsupported schema accepted")
	}
}
