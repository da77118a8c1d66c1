package task

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lfmq/lfmq/evidence"
)

func readWordProblems(t *testing.T) []Item {
	t.Helper()
	f, err := os.Open("../../testdata/eval/word-problems.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	items, err := ReadJSONL("word-problems.jsonl", f, GSM8K)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// scriptedServer answers each question by a script: right (the gold in
// one of several written forms), wrong, or cut off at the token limit
// with no number. It records the requests and the most in flight.
type scriptedServer struct {
	answers  map[string]string // question → content
	finish   map[string]string // question → finish_reason
	mu       sync.Mutex
	requests []map[string]any
	inFlight atomic.Int32
	maxSeen  atomic.Int32
}

func (s *scriptedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		w.Write([]byte(`{"object": "list", "data": [{"id": "scripted", "object": "model"}]}`))
	case "/v1/chat/completions":
		n := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for {
			m := s.maxSeen.Load()
			if n <= m || s.maxSeen.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond) // let requests overlap
		var req map[string]any
		json.NewDecoder(r.Body).Decode(&req)
		s.mu.Lock()
		s.requests = append(s.requests, req)
		s.mu.Unlock()
		q := req["messages"].([]any)[0].(map[string]any)["content"].(string)
		finish := s.finish[q]
		if finish == "" {
			finish = "stop"
		}
		json.NewEncoder(w).Encode(map[string]any{
			"choices": []any{map[string]any{"index": 0, "finish_reason": finish,
				"message": map[string]any{"role": "assistant", "content": s.answers[q], "reasoning_content": "thinking about " + q}}},
			"usage": map[string]any{"prompt_tokens": len(q), "completion_tokens": len(s.answers[q])},
		})
	default:
		http.NotFound(w, r)
	}
}

// TestScriptedServer: a server that answers chosen items right gives
// exactly that accuracy, its Wilson interval, the truncations and the
// per-item outcomes, in dataset order at any concurrency.
func TestScriptedServer(t *testing.T) {
	items := readWordProblems(t)
	srv := &scriptedServer{answers: map[string]string{}, finish: map[string]string{}}
	right := map[string]bool{}
	correct := 0
	for i, it := range items {
		switch {
		case i%5 == 4: // cut off while working: no number at all
			srv.answers[it.Question], srv.finish[it.Question] = "Let me see, first I add the", "length"
		case i%3 == 0: // wrong
			srv.answers[it.Question] = "#### 99999"
		case i%2 == 0: // right, as a boxed answer with thousands commas
			srv.answers[it.Question] = `The answer is \boxed{` + commas(it.Gold) + `}.`
			right[it.ID] = true
			correct++
		default: // right, GSM8K's way, with a later stray number
			srv.answers[it.Question] = "Working it out.\n#### " + it.Gold + "\nChecked 2 times."
			right[it.ID] = true
			correct++
		}
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	for _, conc := range []int{1, 4} {
		t.Run("concurrency "+string(rune('0'+conc)), func(t *testing.T) {
			c := &Client{URL: hs.URL}
			if _, err := c.Identify(context.Background()); err != nil || c.Model != "scripted" {
				t.Fatalf("Identify: %v, model %q", err, c.Model)
			}
			seed := uint64(3)
			temp := evidence.Float(0.6)
			srv.maxSeen.Store(0)
			run, err := Evaluate(context.Background(), Options{Kind: GSM8K, Items: items, Client: c, MaxTokens: 64,
				Sampling: Sampling{Temperature: &temp}, Seed: &seed, Concurrency: conc})
			if err != nil {
				t.Fatal(err)
			}
			s := run.Summary
			lo, hi := Wilson95(correct, len(items))
			if s.Items != 24 || s.Correct != correct || s.Accuracy != evidence.Float(float64(correct)/24) ||
				s.WilsonLow != evidence.Float(lo) || s.WilsonHigh != evidence.Float(hi) || s.Truncated != 4 || s.NoAnswer != 4 {
				t.Errorf("summary %+v; want %d/24 correct, interval [%v, %v], 4 truncated", s, correct, lo, hi)
			}
			for i, r := range run.Items {
				if r.ID != items[i].ID || r.Correct != right[r.ID] || r.Gold != items[i].Gold || r.Prompt != items[i].Question ||
					r.Reasoning != "thinking about "+items[i].Question || r.Truncated != (i%5 == 4) {
					t.Errorf("item %d: %+v", i, r)
				}
			}
			if got := srv.maxSeen.Load(); got > int32(conc) || (conc > 1 && got < 2) {
				t.Errorf("%d requests in flight at concurrency %d", got, conc)
			}
			srv.mu.Lock()
			req := srv.requests[len(srv.requests)-1]
			srv.mu.Unlock()
			if req["seed"] != 3.0 || req["temperature"] != 0.6 || req["max_tokens"] != 64.0 || req["model"] != "scripted" || req["stream"] != false {
				t.Errorf("request %v", req)
			}
		})
	}
}

// commas writes an integer with thousands commas ("1236" → "1,236").
func commas(n string) string {
	if strings.Contains(n, ".") || len(strings.TrimPrefix(n, "-")) <= 3 {
		return n
	}
	neg := strings.HasPrefix(n, "-")
	d := strings.TrimPrefix(n, "-")
	var b strings.Builder
	for i, r := range d {
		if i > 0 && (len(d)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// TestServerErrors: a failing item stops the run with an error naming it;
// 503 is retried.
func TestServerErrors(t *testing.T) {
	items := readWordProblems(t)[:3]
	var calls atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		var req map[string]any
		json.NewDecoder(r.Body).Decode(&req)
		q := req["messages"].([]any)[0].(map[string]any)["content"].(string)
		switch {
		case n == 1:
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
		case q == items[2].Question:
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error": {"message": "prompt too long"}}`))
		default:
			w.Write([]byte(`{"choices": [{"message": {"content": "#### 1"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}`))
		}
	}))
	defer hs.Close()
	_, err := Evaluate(context.Background(), Options{Kind: GSM8K, Items: items, Client: &Client{URL: hs.URL, Model: "m"}, Concurrency: 1})
	var ie *ItemError
	var se *ServerError
	if !errors.As(err, &ie) || ie.Item != "3" || !errors.As(err, &se) || se.Status != 400 || !strings.Contains(err.Error(), "prompt too long") {
		t.Fatalf("err = %v; want item 3's HTTP 400", err)
	}
}

// TestCompare: identical runs compare identical; one changed byte is
// found at its item, field and offset; files of other seeds or datasets
// are refused.
func TestCompare(t *testing.T) {
	seed := uint64(1)
	mk := func() *File {
		return &File{Format: Format, Task: GSM8K, Settings: Settings{Concurrency: 1}, Receipts: Receipts{Dataset: Dataset{SHA256: "abc"}},
			Runs: []Run{{Seed: &seed, Items: []ItemResult{
				{ID: "1", Reasoning: "think", Text: "#### 9"},
				{ID: "2", Reasoning: "think more", Text: "The answer is 34.\n#### 34"},
				{ID: "3", Text: "#### 5"},
			}}}}
	}
	a, b, c := mk(), mk(), mk()
	b.Settings.Concurrency = 4
	roundTrip := func(f *File) []byte {
		f.Runs[0].Summary = Summarize(f.Runs[0].Items, 1)
		data, err := Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse("x", data); err != nil {
			t.Fatal(err)
		}
		return data
	}
	g, err := Compare([]string{"a.json", "b.json", "c.json"}, []*File{a, b, c}, [][]byte{roundTrip(a), roundTrip(b), roundTrip(c)})
	if err != nil || !g.Identical || g.First != nil || g.Items != 3 || g.Runs[1].Concurrency != 4 {
		t.Fatalf("identical runs: %+v, %v", g, err)
	}
	c.Runs[0].Items[1].Text = "The answer is 35.\n#### 34"
	c.Runs[0].Items[2].Text = "#### 6"
	g, err = Compare([]string{"a.json", "b.json", "c.json"}, []*File{a, b, c}, [][]byte{roundTrip(a), roundTrip(b), roundTrip(c)})
	if err != nil {
		t.Fatal(err)
	}
	want := Difference{Path: "c.json", Seed: &seed, Item: "2", Field: "text", Offset: 15, Want: "4.\n#### 34", Got: "5.\n#### 34"}
	if g.Identical || g.Differing != 2 || g.First == nil || g.First.Item != want.Item || g.First.Field != want.Field ||
		g.First.Offset != want.Offset || g.First.Want != want.Want || g.First.Got != want.Got || g.First.Path != want.Path {
		t.Fatalf("gate %+v first %+v; want %+v", g, g.First, want)
	}
	if !strings.Contains(g.First.String(), "item 2") {
		t.Errorf("difference reads %q", g.First.String())
	}
	data, _ := MarshalGate(g)
	if back, err := ParseGate("gate.json", data); err != nil || back.First.Item != "2" {
		t.Errorf("gate round trip: %v", err)
	}
	if _, err := ParseGate("gate.json", append(data, "{}"...)); err == nil || !strings.Contains(err.Error(), "data after") {
		t.Errorf("gate with a second object after it: %v, want an error", err)
	}
	// A missing item is a difference too.
	c.Runs[0].Items = c.Runs[0].Items[:1]
	if g, _ = Compare([]string{"a", "c"}, []*File{a, c}, [][]byte{nil, nil}); g.Identical || g.First.Item != "2" || g.First.Field != "item" {
		t.Errorf("missing item: %+v", g.First)
	}
	other := uint64(2)
	c.Runs[0].Seed = &other
	var ce *CompareError
	if _, err := Compare([]string{"a", "c"}, []*File{a, c}, [][]byte{nil, nil}); !errors.As(err, &ce) || ce.Path != "c" {
		t.Errorf("other seeds: %v", err)
	}
	c.Runs[0].Seed = &seed
	c.Receipts.Dataset.SHA256 = "def"
	if _, err := Compare([]string{"a", "c"}, []*File{a, c}, [][]byte{nil, nil}); !errors.As(err, &ce) {
		t.Errorf("other dataset: %v", err)
	}
}

// TestCompareRefusesOtherModelOrSampling: files of another checkpoint,
// another served model, other sampling fields or another token limit
// cannot be compared (issue 45 item 3); the error names the file and
// what differs. Concurrency, the label and the preset's name may differ.
func TestCompareRefusesOtherModelOrSampling(t *testing.T) {
	seed := uint64(1)
	temp := evidence.Float(0.6)
	mk := func() *File {
		return &File{Format: Format, Task: GSM8K, Settings: Settings{Concurrency: 1, MaxTokens: 32, Sampling: Sampling{Temperature: &temp}},
			Receipts: Receipts{Dataset: Dataset{SHA256: "abc"}, Checkpoint: &evidence.Checkpoint{Identity: strings.Repeat("a", 64)}},
			Runs:     []Run{{Seed: &seed, Items: []ItemResult{{ID: "1", Text: "#### 9"}}}}}
	}
	paths := []string{"a.json", "b.json"}
	// Same checkpoint in process and served, another concurrency and preset name: comparable.
	a, b := mk(), mk()
	b.Receipts.Checkpoint = nil
	b.Receipts.Server = Server{URL: "http://h:1", Model: "tiny", Models: []byte(`{"data":[{"id":"tiny","lfmq":{"checkpoint_identity":"` + strings.Repeat("a", 64) + `"}}]}`)}
	b.Settings.Concurrency, b.Settings.SamplingPreset, b.Settings.Label = 4, "reasoning", "c4"
	if g, err := Compare(paths, []*File{a, b}, [][]byte{nil, nil}); err != nil || !g.Identical {
		t.Fatalf("same checkpoint in process and served: %+v, %v", g, err)
	}
	other := strings.Repeat("b", 64)
	temp2 := evidence.Float(0.7)
	topK := 50
	for _, tt := range []struct {
		name   string
		change func(f *File)
		want   string
	}{
		{"other checkpoint", func(f *File) { f.Receipts.Checkpoint.Identity = other }, "checkpoint bbbbbbbbbbbb, but a.json ran checkpoint aaaaaaaaaaaa"},
		{"other served checkpoint", func(f *File) {
			f.Receipts.Checkpoint = nil
			f.Receipts.Server = Server{URL: "http://h:1", Model: "tiny", Models: []byte(`{"data":[{"id":"tiny","lfmq":{"manifest_sha256":"` + other + `"}}]}`)}
		}, "checkpoint bbbbbbbbbbbb"},
		{"other served model", func(f *File) {
			f.Receipts.Checkpoint = nil
			f.Receipts.Server = Server{URL: "http://h:1", Model: "other-model", Models: []byte(`{"data":[{"id":"other-model"}]}`)}
		}, `model "other-model"`},
		{"other temperature", func(f *File) { f.Settings.Sampling.Temperature = &temp2 }, "sampling temperature 0.7, but a.json sent temperature 0.6"},
		{"server default temperature", func(f *File) { f.Settings.Sampling.Temperature = nil }, "sampling server defaults, but a.json sent temperature 0.6"},
		{"top-k added", func(f *File) { f.Settings.Sampling.TopK = &topK }, "temperature 0.6, top_k 50"},
		{"other max tokens", func(f *File) { f.Settings.MaxTokens = 48 }, "max_tokens 48, but a.json used 32"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, b := mk(), mk()
			tt.change(b)
			_, err := Compare(paths, []*File{a, b}, [][]byte{nil, nil})
			var ce *CompareError
			if !errors.As(err, &ce) || ce.Path != "b.json" || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a CompareError for b.json containing %q", err, tt.want)
			}
		})
	}
}
