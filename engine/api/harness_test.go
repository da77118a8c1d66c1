package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"

	"github.com/lfmq/lfmq/engine/generate"
	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/engine/sched"
)

const tinyModel = "../../testdata/tiny-lfm2-moe/model"

var (
	tinyOnce sync.Once
	tinySess *generate.Session
	tinyErr  error
)

// tinySession loads the fixture model once for the whole test binary;
// every test server shares it (Forward is safe on distinct sequences).
func tinySession(t testing.TB) *generate.Session {
	t.Helper()
	tinyOnce.Do(func() { tinySess, tinyErr = generate.Open(tinyModel, model.LoadOptions{}) })
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinySess
}

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
	data, err := os.ReadFile("../../testdata/tiny-lfm2-moe/reference/prompts.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Prompts []fixturePrompt }
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
