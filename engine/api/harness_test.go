package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/choice"
	"github.com/lfmq/lfmq/engine/generate"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/sched"
)

const tinyModel = "../../testdata/tiny-lfm2-moe/model"

// sharedSession is a fixture model opened once for the whole test binary
// (load.Options' default: the float32 KV cache the references were
// computed in); every test server on it shares it (Forward is safe on
// distinct sequences).
type sharedSession struct {
	model string
	once  sync.Once
	sess  *generate.Session
	err   error
}

func (s *sharedSession) get(t testing.TB) *generate.Session {
	t.Helper()
	s.once.Do(func() { s.sess, s.err = generate.Open(s.model, load.Options{}) })
	if s.err != nil {
		t.Fatal(s.err)
	}
	return s.sess
}

// tinySession loads the fixture model once for the whole test binary.
var tinySession = (&sharedSession{model: tinyModel}).get

// testServer is a running API server on the fixture model.
type testServer struct {
	*Server
	URL   string
	sched *sched.Scheduler
}

// newTestServer starts a server with the given options (served name
// "tiny" unless set; the "none" preset unless defaults are given) and
// scheduler config.
func newTestServer(t testing.TB, opts Options, sc sched.Config) *testServer {
	t.Helper()
	return newTestServerOn(t, tinySession(t), opts, sc)
}

// newTestServerOn is newTestServer on the model of sess.
func newTestServerOn(t testing.TB, sess *generate.Session, opts Options, sc sched.Config) *testServer {
	t.Helper()
	if opts.ServedModelName == "" {
		opts.ServedModelName = "tiny"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := New(opts)
	sch, err := sched.New(sess.Model, sc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sch.Run(ctx); close(done) }()
	s.SetReady(&Engine{Session: sess, Sched: sch})
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		cancel()
		<-done
	})
	return &testServer{Server: s, URL: hs.URL, sched: sch}
}

// post sends a JSON body and returns the status and the body.
func post(t testing.TB, url string, body any, header ...string) (int, []byte) {
	t.Helper()
	var data []byte
	switch b := body.(type) {
	case string:
		data = []byte(b)
	case []byte:
		data = b
	default:
		var err error
		if data, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// fixturePrompt is one prompt of reference/prompts.json.
type fixturePrompt struct {
	Name      string          `json:"name"`
	Kind      string          `json:"kind"`
	Rendered  string          `json:"rendered_text"`
	InputIDs  []int           `json:"input_ids"`
	GreedyIDs []int           `json:"greedy_ids"`
	Messages  json.RawMessage `json:"messages"`
	Tools     json.RawMessage `json:"tools"`
}

func fixturePrompts(t testing.TB) []fixturePrompt {
	t.Helper()
	return readPrompts[fixturePrompt](t, "../../testdata/tiny-lfm2-moe/reference/prompts.json")
}

// readPrompts reads the prompts of the reference prompts.json at path.
func readPrompts[P any](t testing.TB, path string) []P {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Prompts []P }
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f.Prompts
}

func greedyParams() sample.Params {
	p := sample.Neutral()
	p.Temperature = 0
	return p
}

// TestHarnessLoglikelihood sends the request lm-evaluation-harness's
// local-completions model sends for a log-likelihood (its
// _create_payload with generate=False: the prompt as a batch of one
// token-id list, temperature 0, max_tokens 1, logprobs 1, seed 1234, echo)
// and reads the answer as its parse_logprobs does: the sum of
// token_logprobs[ctxlen:-1] (the last entry is the generated token's) and
// whether each of those equals the largest value of its top_logprobs. The
// numbers must equal the engine's own scoring of the continuation from a
// forked state (engine/choice), bit for bit, also when the one generated
// token is a stop id.
func TestHarnessLoglikelihood(t *testing.T) {
	sess := tinySession(t)
	ts := newTestServer(t, Options{}, sched.Config{})
	cases := []struct{ context, continuation string }{
		{"The sea is wide and", " deep"},
		{"Question: what is two plus two?\nAnswer:", " four"},
		{"Once upon a time", " there was a small village by the river"},
	}
	for _, tc := range cases {
		for _, stop := range []bool{false, true} {
			ctxIDs := sess.EncodeText(tc.context)
			cont := sess.Tokenizer.EncodeOrdinary(tc.continuation)
			ids := append(append([]int{}, ctxIDs...), cont...)
			idsJSON, _ := json.Marshal([][]int{ids})
			body := `{"model": "tiny", "prompt": ` + string(idsJSON) + `, "temperature": 0, "max_tokens": 1, "logprobs": 1, "seed": 1234, "echo": true`
			if stop {
				// Not the harness's field: it forces the generated token
				// to be a stop id, whose entry must still be there.
				body += fmt.Sprintf(`, "logit_bias": {"%d": 100}`, sess.StopIDs[0])
			}
			body += "}"
			status, data := post(t, ts.URL+"/v1/completions", body)
			if status != 200 {
				t.Fatalf("%d %s", status, data)
			}
			var resp struct {
				Choices []struct {
					Index        int    `json:"index"`
					Text         string `json:"text"`
					FinishReason string `json:"finish_reason"`
					Logprobs     struct {
						Tokens        []string             `json:"tokens"`
						TokenLogprobs []*float64           `json:"token_logprobs"`
						TopLogprobs   []map[string]float64 `json:"top_logprobs"`
					} `json:"logprobs"`
				} `json:"choices"`
				Usage struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(data, &resp); err != nil {
				t.Fatal(err)
			}
			ch := resp.Choices[0]
			lp := ch.Logprobs
			if len(lp.TokenLogprobs) != len(ids)+1 || len(lp.TopLogprobs) != len(ids)+1 || resp.Usage.CompletionTokens != 1 {
				t.Fatalf("%q stop %v: %d token_logprobs, %d top_logprobs for %d prompt tokens and %d generated",
					tc.context, stop, len(lp.TokenLogprobs), len(lp.TopLogprobs), len(ids), resp.Usage.CompletionTokens)
			}
			if stop && (ch.FinishReason != "stop" || strings.Contains(ch.Text, lp.Tokens[len(ids)]) && lp.Tokens[len(ids)] != "") {
				t.Errorf("stop: finish %q, text %q, last token %q", ch.FinishReason, ch.Text, lp.Tokens[len(ids)])
			}
			// parse_logprobs, as the harness computes it.
			ctxlen := len(ctxIDs)
			sum, greedy := 0.0, true
			for k := ctxlen; k < len(lp.TokenLogprobs)-1; k++ {
				sum += *lp.TokenLogprobs[k]
				best := math.Inf(-1)
				for _, v := range lp.TopLogprobs[k] {
					best = max(best, v)
				}
				if *lp.TokenLogprobs[k] != best {
					greedy = false
				}
			}
			// The engine's own: the context prefilled, the continuation
			// scored on a fork; greedy from the full sequence's rows.
			m := sess.Model
			shared := m.NewSequence()
			out, err := m.Forward(context.Background(), []*model.Sequence{shared}, [][]int{ctxIDs}, model.ForwardOptions{})
			if err != nil {
				t.Fatal(err)
			}
			scores, err := choice.Continuations(context.Background(), m, shared, out[0], [][]int{cont})
			if err != nil {
				t.Fatal(err)
			}
			rows, err := m.Forward(context.Background(), []*model.Sequence{m.NewSequence()}, [][]int{ids}, model.ForwardOptions{Logits: model.AllLogits})
			if err != nil {
				t.Fatal(err)
			}
			V := m.Config.VocabSize
			wantGreedy := true
			for k := ctxlen; k < len(ids); k++ {
				row := rows[0][(k-1)*V : k*V]
				arg := 0
				for v := range row {
					if row[v] > row[arg] {
						arg = v
					}
				}
				if arg != ids[k] {
					wantGreedy = false
				}
			}
			if sum != scores[0] || greedy != wantGreedy {
				t.Errorf("%q + %q (stop %v): harness reads %v (greedy %v), the engine scores %v (greedy %v)",
					tc.context, tc.continuation, stop, sum, greedy, scores[0], wantGreedy)
			}
		}
	}
}
