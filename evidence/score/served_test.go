package score

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lfmq/lfmq/engine/model"
	"github.com/lfmq/lfmq/engine/model/load"
	"github.com/lfmq/lfmq/engine/sample"
	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/format/identity"
)

const fakeBinary = "b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1"

// modelServer implements the server side of the wire
// (docs/serving.md §5) from an in-process model: /v1/models describes
// the checkpoint with format/identity, /v1/completions runs each prompt
// from an empty state and returns sample.LogProbs rows. Answers are
// delayed by a few milliseconds depending on the prompt, so that they
// arrive out of order.
type modelServer struct {
	t     testing.TB
	m     *model.Model
	id    *identity.Checkpoint
	name  string
	key   string // required when set
	mu    sync.Mutex
	auth  []string // Authorization headers seen
	calls int      // completion requests answered

	// Hooks that change the answers; nil answers as lfmq serve does.
	before      func(w http.ResponseWriter, r *http.Request) bool // true: answered
	models      func(m map[string]any)
	completions func(w http.ResponseWriter, call int, entries []any) bool // true: answered
}

func newModelServer(t testing.TB, dir, name string) *modelServer {
	t.Helper()
	m, err := load.Load(dir, load.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	id, err := identity.Of(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &modelServer{t: t, m: m, id: id, name: name}
}

func (s *modelServer) modelsAnswer() map[string]any {
	x := map[string]any{
		"checkpoint_format": s.id.Format, "checkpoint_identity": s.id.Identity, "config_sha256": s.id.ConfigSHA256,
		"tokenizer_sha256": s.id.TokenizerSHA256, "vocab_size": s.m.Config.VocabSize, "lfmq_version": "test",
		"source_digest": "", "binary_sha256": fakeBinary,
	}
	if s.id.ManifestSHA256 != "" {
		x["manifest_sha256"] = s.id.ManifestSHA256
	}
	d := map[string]any{"id": s.name, "object": "model", "created": 1, "owned_by": "lfmq", "max_model_len": 4096, "lfmq": x}
	s.mu.Lock()
	hook := s.models
	s.mu.Unlock()
	if hook != nil {
		hook(d)
	}
	return map[string]any{"object": "list", "data": []any{d}}
}

func apiError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
}

func (s *modelServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	before := s.before
	s.mu.Unlock()
	if before != nil && before(w, r) {
		return
	}
	if s.key != "" && r.Header.Get("Authorization") != "Bearer "+s.key {
		apiError(w, 401, "authentication_error", "invalid_api_key", "bad key")
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		json.NewEncoder(w).Encode(s.modelsAnswer())
	case r.Method == http.MethodPost && r.URL.Path == "/v1/completions":
		s.complete(w, r)
	default:
		apiError(w, 404, "invalid_request_error", "", "no route "+r.URL.Path)
	}
}

func (s *modelServer) complete(w http.ResponseWriter, r *http.Request) {
	var req map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		apiError(w, 400, "invalid_request_error", "", err.Error())
		return
	}
	// The client sends exactly these values, none omitted.
	for k, want := range map[string]string{"model": `"` + s.name + `"`, "max_tokens": "0", "echo": "true", "prompt_logprobs": "-1", "temperature": "0"} {
		if string(req[k]) != want {
			apiError(w, 400, "invalid_request_error", "", fmt.Sprintf("%s is %s, want %s", k, req[k], want))
			return
		}
	}
	var prompt []int
	if err := json.Unmarshal(req["prompt"], &prompt); err != nil || len(prompt) == 0 {
		apiError(w, 400, "invalid_request_error", "", "prompt: want token ids")
		return
	}
	s.mu.Lock()
	call := s.calls
	s.calls++
	s.mu.Unlock()
	// Out of order on purpose: later windows often answer first.
	time.Sleep(time.Duration((prompt[len(prompt)/2]*7+len(prompt))%5) * 3 * time.Millisecond)

	V := s.m.Config.VocabSize
	s.mu.Lock() // one forward pass at a time, as the engine's scheduler runs them
	logits, err := s.m.Forward(r.Context(), []*model.Sequence{s.m.NewSequence()}, [][]int{prompt}, model.ForwardOptions{Logits: model.AllLogits})
	s.mu.Unlock()
	if err != nil {
		apiError(w, 400, "invalid_request_error", "", err.Error())
		return
	}
	entries := make([]any, len(prompt))
	var row []float32
	buf := make([]byte, 4*V)
	for j := 1; j < len(prompt); j++ {
		row = sample.LogProbs(row, logits[0][(j-1)*V:j*V])
		for k, x := range row {
			binary.LittleEndian.PutUint32(buf[4*k:], math.Float32bits(x))
		}
		entries[j] = base64.StdEncoding.EncodeToString(buf)
	}
	s.mu.Lock()
	hook := s.completions
	s.mu.Unlock()
	if hook != nil && hook(w, call, entries) {
		return
	}
	writeCompletion(w, s.name, entries)
}

func writeCompletion(w http.ResponseWriter, name string, entries []any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": "cmpl-1", "object": "text_completion", "created": 1, "model": name,
		"choices": []any{map[string]any{"index": 0, "text": "a \"quoted\" echo", "logprobs": nil, "finish_reason": "length", "prompt_logprobs": nil, "prompt_logprobs_f32": entries}},
		"usage":   map[string]any{"prompt_tokens": len(entries), "completion_tokens": 0, "total_tokens": len(entries)},
	})
}

// set changes the hooks under the lock: requests of a run that ended with
// an error may still be in the handlers.
func (s *modelServer) set(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// seen returns the Authorization headers and the number of completions
// since the last call, and forgets them.
func (s *modelServer) seen() (auth []string, calls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	auth, calls = s.auth, s.calls
	s.auth, s.calls = nil, 0
	return auth, calls
}

func (s *modelServer) start(t testing.TB) *httptest.Server {
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

// TestServedEqualsInProcess scores the RTN checkpoint twice in one run,
// in process and through a server built on the same checkpoint, and
// requires identical figures on every row.
func TestServedEqualsInProcess(t *testing.T) {
	_, rtn := candidates(t)
	ms := newModelServer(t, rtn, "tiny-rtn")
	ms.key = "s3cret"
	srv := ms.start(t)
	out, err := Run(context.Background(), Options{
		Reference:  tinyDir,
		Candidates: []Candidate{{Name: "rtn", Dir: rtn}, {Name: "rtn-served", URL: srv.URL + "/"}},
		Corpora:    corpora("chat", "code"),
		Ctx:        128, MaxRecords: 1, Threads: 2, APIKey: "s3cret",
	})
	if err != nil {
		t.Fatal(err)
	}
	f := out.File
	local, remote := results(f, "rtn"), results(f, "rtn-served")
	if len(local) != 3 || len(remote) != 3 {
		t.Fatalf("rows %v / %v", local, remote)
	}
	for corpus, a := range local {
		b := remote[corpus]
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: served %+v\nin process %+v", corpus, b, a)
		}
		if a.Tokens == 0 || a.KLMean == 0 || a.LnRatioSE == nil {
			t.Errorf("%s: %+v: the comparison must be over a real difference from the reference", corpus, a)
		}
	}
	half := len(out.Series) / 2
	for i := range half {
		a, b := out.Series[i], out.Series[half+i]
		if a.Variant != "rtn" || b.Variant != "rtn-served" || a.Corpus != b.Corpus || !slices.Equal(a.KL, b.KL) {
			t.Errorf("series %s/%s on %s: KL differs", a.Variant, b.Variant, a.Corpus)
		}
	}
	for _, c := range f.Comparisons {
		if c.KLDiff != 0 || c.NLLDiff != 0 || *c.KLDiffSE != 0 {
			t.Errorf("%s: served − in process: KL %g, NLL %g", c.Corpus, c.KLDiff, c.NLLDiff)
		}
	}
	// Several windows per record were asked for, one request each, with
	// the key.
	windows := 0
	for _, c := range f.Receipts.Corpora {
		windows += c.Windows
	}
	auth, calls := ms.seen()
	t.Logf("%d windows of %d records", windows, f.Receipts.Corpora[0].Records+f.Receipts.Corpora[1].Records)
	if calls != windows || windows <= f.Receipts.Corpora[0].Records+f.Receipts.Corpora[1].Records {
		t.Errorf("%d completion requests for %d windows", calls, windows)
	}
	for _, a := range auth {
		if a != "Bearer s3cret" {
			t.Fatalf("Authorization %q", a)
		}
	}

	// Receipts: the URL, the served model and the identity it reported,
	// which is the directory's.
	dir, served := f.Receipts.Candidates[0], f.Receipts.Candidates[1]
	want := evidence.Checkpoint{
		Name: "rtn-served", URL: srv.URL, ServedModel: "tiny-rtn", BinarySHA256: fakeBinary, LfmqVersion: "test",
		Format: "lfmq-1", Identity: dir.Identity, ManifestSHA256: dir.ManifestSHA256, ConfigSHA256: dir.ConfigSHA256,
	}
	if !reflect.DeepEqual(served, want) || dir.Format != "lfmq-1" {
		t.Errorf("served receipt %+v\nwant %+v", served, want)
	}
	if len(f.Notes) != 0 {
		t.Errorf("notes %q", f.Notes)
	}
	data, err := evidence.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	back, err := evidence.Parse("e.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := evidence.Marshal(back); !bytes.Equal(again, data) || !bytes.Contains(data, []byte(`"url": "`+srv.URL+`"`)) || bytes.Contains(data, []byte("s3cret")) {
		t.Error("the evidence file does not round-trip, lacks the URL or holds the key")
	}
}

// fakeRows returns a completion's entries for n prompt tokens: null, then
// rows of v zeros.
func fakeRows(n, v int) []any {
	e := make([]any, n)
	for j := 1; j < n; j++ {
		e[j] = base64.StdEncoding.EncodeToString(make([]byte, 4*v))
	}
	return e
}

// TestServedRefusals: a server that cannot be scored, or answers wrongly,
// stops the run with an error naming what is wrong.
func TestServedRefusals(t *testing.T) {
	_, rtn := candidates(t)
	ms := newModelServer(t, rtn, "tiny-rtn")
	srv := ms.start(t)
	run := func(key string) error {
		ms.seen()
		_, err := Run(context.Background(), Options{
			Reference: tinyDir, Candidates: []Candidate{{Name: "served", URL: srv.URL}},
			Corpora: corpora("instruct"), Ctx: 64, MaxRecords: 1, Threads: 1, APIKey: key,
		})
		return err
	}
	modelErr := func(name, want string) {
		t.Helper()
		err := run("")
		var me *ModelError
		if !errors.As(err, &me) || me.URL != srv.URL || me.Name != "served" || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want a ModelError naming %q", name, err, want)
		}
	}
	responseErr := func(name, field, msg string) {
		t.Helper()
		err := run("")
		var re *ResponseError
		if !errors.As(err, &re) || re.URL != srv.URL+"/v1/completions" || !strings.Contains(re.Window, "corpus instruct window 0") || re.Field != field || !strings.Contains(re.Msg, msg) {
			t.Errorf("%s: %v, want a ResponseError of %s with %q", name, err, field, msg)
		}
	}

	models := func(f func(m map[string]any)) { ms.set(func() { ms.models = f }) }
	models(func(m map[string]any) { m["lfmq"].(map[string]any)["vocab_size"] = 8000 })
	modelErr("vocab", "vocab_size 8000, the reference has 8192")
	models(func(m map[string]any) { m["lfmq"].(map[string]any)["tokenizer_sha256"] = strings.Repeat("0", 64) })
	modelErr("tokenizer", "tokenizer.json (sha256 0000")
	models(func(m map[string]any) { m["max_model_len"] = 63 })
	modelErr("context", "max_model_len 63 is shorter than the window length 64")
	models(func(m map[string]any) { delete(m, "lfmq") })
	var re *ResponseError
	if err := run(""); !errors.As(err, &re) || re.Field != "data[0].lfmq" || re.URL != srv.URL+"/v1/models" {
		t.Errorf("no lfmq object: %v", err)
	}
	models(nil)

	ms.set(func() {
		ms.completions = func(w http.ResponseWriter, call int, e []any) bool {
			s := e[1].(string)
			e[1] = s[:len(s)-4]
			writeCompletion(w, "tiny-rtn", e)
			return true
		}
	})
	responseErr("truncated row", "choices[0].prompt_logprobs_f32[1]", "43688 base64 characters, want 43692")
	ms.set(func() {
		ms.completions = func(w http.ResponseWriter, call int, e []any) bool {
			e[0] = e[1]
			writeCompletion(w, "tiny-rtn", e)
			return true
		}
	})
	responseErr("entry 0", "choices[0].prompt_logprobs_f32[0]", "must be null")
	ms.set(func() {
		ms.completions = func(w http.ResponseWriter, call int, e []any) bool {
			writeCompletion(w, "tiny-rtn", e[:len(e)-1])
			return true
		}
	})
	responseErr("short", "choices[0].prompt_logprobs_f32", "entries, want")
	ms.set(func() {
		ms.completions = func(w http.ResponseWriter, call int, e []any) bool {
			apiError(w, 500, "server_error", "", "kernel on fire")
			return true
		}
	})
	err := run("")
	var se *ServerError
	if !errors.As(err, &se) || se.Status != 500 || se.Type != "server_error" || se.Message != "kernel on fire" || se.URL != srv.URL+"/v1/completions" || se.Window == "" ||
		!strings.Contains(err.Error(), "HTTP 500 (server_error): kernel on fire") {
		t.Errorf("500: %v", err)
	}
	// No key: no Authorization header.
	auth, _ := ms.seen()
	for _, a := range auth {
		if a != "" {
			t.Errorf("Authorization %q sent without a key", a)
		}
	}

	// 429 (queue full) and 503 (not ready): retried after Retry-After.
	ms.set(func() {
		ms.completions = func(w http.ResponseWriter, call int, e []any) bool {
			if call < 2 {
				w.Header().Set("Retry-After", "0")
				apiError(w, 429, "rate_limit_error", "queue_full", "queue full")
				return true
			}
			return false
		}
	})
	notReady := 0
	ms.set(func() {
		ms.before = func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path == "/v1/models" && notReady == 0 {
				notReady++ // one /v1/models request at a time
				w.Header().Set("Retry-After", "0")
				apiError(w, 503, "unavailable_error", "model_not_ready", "loading")
				return true
			}
			return false
		}
	})
	err = run("k")
	auth, calls := ms.seen()
	if err != nil || len(auth) < 2+calls || calls < 3 {
		t.Errorf("after 429 and 503: %v (%d requests, %d completions)", err, len(auth), calls)
	}
	for _, a := range auth {
		if a != "Bearer k" {
			t.Errorf("Authorization %q, want Bearer k", a)
		}
	}

	// Nobody listening.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	_, err = Run(context.Background(), Options{
		Reference: tinyDir, Candidates: []Candidate{{Name: "served", URL: gone.URL}},
		Corpora: corpora("instruct"), Ctx: 64, MaxRecords: 1,
	})
	if !errors.As(err, &se) || se.Status != 0 || !strings.Contains(err.Error(), "no server answering at "+gone.URL+"/v1/models; is lfmq serve running?") {
		t.Errorf("unreachable: %v", err)
	}
}

// TestClientRetries: 429 is retried for a bounded time only, a
// shutting-down server is not retried, and an error body that is not
// JSON still names the status.
func TestClientRetries(t *testing.T) {
	var calls int
	code := "queue_full"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		switch code {
		case "text":
			http.Error(w, "proxy says no", http.StatusBadGateway)
		case "shutting_down":
			apiError(w, 503, "unavailable_error", code, "bye")
		default:
			w.Header().Set("Retry-After", "0")
			apiError(w, 429, "rate_limit_error", code, "busy")
		}
	}))
	defer srv.Close()
	c := newClient(srv.URL, "", nil)
	c.retryFor = 200 * time.Millisecond
	start := time.Now()
	_, err := c.models(context.Background())
	var se *ServerError
	if !errors.As(err, &se) || se.Status != 429 || se.Retries < 2 || calls != se.Retries+1 || time.Since(start) > 5*time.Second || !strings.Contains(err.Error(), "retries") {
		t.Errorf("429 forever: %v after %d calls", err, calls)
	}
	calls, code = 0, "shutting_down"
	if _, err := c.models(context.Background()); !errors.As(err, &se) || se.Status != 503 || se.Code != "shutting_down" || calls != 1 {
		t.Errorf("shutting down: %v after %d calls", err, calls)
	}
	calls, code = 0, "text"
	if _, err := c.models(context.Background()); !errors.As(err, &se) || se.Status != 502 || se.Message != "proxy says no" || calls != 1 {
		t.Errorf("text error: %v after %d calls", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.models(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}

	// An answer over the size bound, and a redirect (not followed).
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			http.Redirect(w, r, "https://elsewhere.example/v1/models", http.StatusMovedPermanently)
			return
		}
		w.Write(bytes.Repeat([]byte(" "), int(responseLimit(2, 1))+1))
	}))
	defer big.Close()
	c = newClient(big.URL, "", nil)
	var re *ResponseError
	if _, err := c.window(context.Background(), "m", []int{1, 2}, 1, "w"); !errors.As(err, &re) || re.Field != "body" || !strings.Contains(re.Msg, "limit") {
		t.Errorf("oversized answer: %v", err)
	}
	if _, err := c.models(context.Background()); !errors.As(err, &se) || se.Status != 301 || !strings.Contains(err.Error(), "redirected to https://elsewhere.example/v1/models") {
		t.Errorf("redirect: %v", err)
	}
}

func TestParseServerURL(t *testing.T) {
	for raw, want := range map[string]string{
		"http://localhost:8080": "http://localhost:8080", "http://localhost:8080/": "http://localhost:8080",
		"https://h.example": "https://h.example", "http://[::1]:9": "http://[::1]:9", "HTTP://h": "http://h",
	} {
		if got, err := ParseServerURL(raw); err != nil || got != want {
			t.Errorf("%q: %q, %v, want %q", raw, got, err, want)
		}
	}
	for raw, want := range map[string]string{
		"ftp://h": "http://", "http://h/v1": "no path", "http://h?x=1": "no query", "http://h/?": "no query",
		"http://u:p@h": "credentials", "http://h#f": "fragment", "http://": "HOST:PORT", "http:h": "HOST:PORT", "h:80": "http://",
	} {
		got, err := ParseServerURL(raw)
		var oe *OptionsError
		if !errors.As(err, &oe) || oe.Field != "candidate" || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %q, %v, want an OptionsError with %q", raw, got, err, want)
		}
	}
	o := Options{Reference: "r", Corpora: []CorpusSpec{{"c", "f"}}, Candidates: []Candidate{{Name: "a", Dir: "d", URL: "http://h"}}}
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "NAME=URL") {
		t.Errorf("dir and URL: %v", err)
	}
	o.Candidates = []Candidate{{Name: "a", URL: "http://h"}}
	o.APIKey = "k\n"
	if err := o.validate(); err == nil || strings.Contains(err.Error(), "k\n") || !strings.Contains(err.Error(), "api-key") {
		t.Errorf("key with a line break: %v", err)
	}
}

// completionBody is a completion answer with the given entries.
func completionBody(entries ...any) []byte {
	b, _ := json.Marshal(map[string]any{"object": "text_completion", "choices": []any{map[string]any{"index": 0, "text": "x", "prompt_logprobs_f32": entries}}})
	return b
}

func rowB64(xs ...float32) string {
	b := make([]byte, 4*len(xs))
	for k, x := range xs {
		binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func TestDecodePromptLogprobs(t *testing.T) {
	r1, r2 := rowB64(-0.5, -1, float32(math.Inf(-1))), rowB64(0, -2.25, -7)
	good := completionBody(nil, r1, r2)
	dst := make([]float32, 2*3)
	if err := decodePromptLogprobs(good, 3, 3, dst); err != nil {
		t.Fatal(err)
	}
	if want := []float32{-0.5, -1, float32(math.Inf(-1)), 0, -2.25, -7}; !slices.Equal(dst, want) {
		t.Errorf("rows %v, want %v", dst, want)
	}
	// JSON may escape any character and put whitespace anywhere.
	x := math.Float32frombits(0x3fffffff) // base64 "////Pw"
	e1 := strings.ReplaceAll(rowB64(x, 2, 3), "/", `\/`)
	e2 := strings.ReplaceAll(rowB64(1, 2, 3), "A", `\u0041`)
	escaped := []byte(`{"choices" : [ {"prompt_logprobs_f32" : [ null ,` + "\n" + `"` + e1 + `" , "` + e2 + `" ] , "index":0} ] }`)
	if !strings.Contains(e1, `\/`) || !strings.Contains(e2, `\u`) {
		t.Fatal("the escaped case has no escape")
	}
	if err := decodePromptLogprobs(escaped, 3, 3, dst); err != nil || !slices.Equal(dst, []float32{x, 2, 3, 1, 2, 3}) {
		t.Errorf("escaped: %v %v", err, dst)
	}

	for _, tt := range []struct {
		name, body, field, msg string
	}{
		{"not json", `{"choices": [`, "body", ""},
		{"no choices", `{"choices": []}`, "choices[0].prompt_logprobs_f32", "missing"},
		{"null rows", `{"choices": [{"index": 0, "prompt_logprobs_f32": null}]}`, "choices[0].prompt_logprobs_f32", "missing"},
		{"two choices", `{"choices": [{"index": 0, "prompt_logprobs_f32": [null, "` + r1 + `", "` + r2 + `"]}, {"index": 1}]}`, "choices", "more than one"},
		{"index", `{"choices": [{"index": 2, "prompt_logprobs_f32": [null, "` + r1 + `", "` + r2 + `"]}]}`, "choices[0].index", "2, want 0"},
		{"not an array", `{"choices": [{"prompt_logprobs_f32": "x"}]}`, "choices[0].prompt_logprobs_f32", "not an array"},
		{"row first", string(completionBody(r1, r1, r2)), "choices[0].prompt_logprobs_f32[0]", "must be null"},
		{"null later", string(completionBody(nil, nil, r2)), "choices[0].prompt_logprobs_f32[1]", "null"},
		{"number", string(completionBody(nil, 1, r2)), "choices[0].prompt_logprobs_f32[1]", "want null or a base64 string"},
		{"short row", string(completionBody(nil, rowB64(1, 2), r2)), "choices[0].prompt_logprobs_f32[1]", "12 base64 characters, want 16"},
		{"bad base64", string(completionBody(nil, r1, "!!!!"+r2[4:])), "choices[0].prompt_logprobs_f32[2]", "not standard base64"},
		{"too few", string(completionBody(nil, r1)), "choices[0].prompt_logprobs_f32", "2 entries, want 3"},
		{"too many", string(completionBody(nil, r1, r2, r2)), "choices[0].prompt_logprobs_f32", "more than 3 entries"},
		{"empty", `{"choices": [{"prompt_logprobs_f32": [ ]}]}`, "choices[0].prompt_logprobs_f32", "0 entries, want 3"},
	} {
		err := decodePromptLogprobs([]byte(tt.body), 3, 3, dst)
		var fe *fieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(fe.Msg, tt.msg) {
			t.Errorf("%s: %v, want %s: %q", tt.name, err, tt.field, tt.msg)
		}
	}
}

// FuzzDecodePromptLogprobs: arbitrary answers give rows or a fieldError,
// never a panic; rows that decode encode back to an answer that decodes
// to the same bits.
func FuzzDecodePromptLogprobs(f *testing.F) {
	const n, v = 3, 2
	r1, r2 := rowB64(-0.5, -1), rowB64(float32(math.NaN()), -2)
	f.Add(completionBody(nil, r1, r2))
	f.Add(completionBody(r1, r1, r2))
	f.Add(completionBody(nil, r1[:len(r1)-1], r2))
	f.Add([]byte(`{"choices":[{"index":0,"prompt_logprobs_f32":[null,"` + strings.ReplaceAll(r1, "A", `\u0041`) + `","` + r2 + `"]},{"index":1}]}`))
	f.Add([]byte(`{"choices":[{"prompt_logprobs_f32":[null , "` + r1 + `" ,"` + r2 + `"  ]}], "usage": {"prompt_tokens": 3}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dst := make([]float32, (n-1)*v)
		err := decodePromptLogprobs(data, n, v, dst)
		if err != nil {
			var fe *fieldError
			if !errors.As(err, &fe) || fe.Field == "" {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		again := make([]float32, len(dst))
		if err := decodePromptLogprobs(completionBody(nil, rowB64(dst[:v]...), rowB64(dst[v:]...)), n, v, again); err != nil {
			t.Fatal(err)
		}
		for i := range dst {
			if math.Float32bits(dst[i]) != math.Float32bits(again[i]) {
				t.Fatalf("value %d: %x, again %x", i, math.Float32bits(dst[i]), math.Float32bits(again[i]))
			}
		}
	})
}

func TestParseModels(t *testing.T) {
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	base := func() map[string]any {
		return map[string]any{"object": "list", "data": []any{map[string]any{"id": "m", "max_model_len": 128, "lfmq": map[string]any{
			"checkpoint_format": "lfmq-1", "checkpoint_identity": sum("m"), "manifest_sha256": sum("m"), "config_sha256": sum("c"),
			"tokenizer_sha256": sum("t"), "vocab_size": 10, "lfmq_version": "v", "binary_sha256": sum("b"),
		}}}}
	}
	enc := func(m map[string]any) []byte { b, _ := json.Marshal(m); return b }
	got, err := parseModels("u", enc(base()))
	if err != nil || got.ID != "m" || got.VocabSize != 10 || got.MaxModelLen != 128 || got.Checkpoint.Identity != sum("m") || got.Checkpoint.TokenizerSHA256 != sum("t") || got.BinarySHA256 != sum("b") {
		t.Fatalf("%+v, %v", got, err)
	}
	for field, change := range map[string]func(d, x map[string]any){
		"data[0].id":                          func(d, x map[string]any) { d["id"] = "" },
		"data[0].max_model_len":               func(d, x map[string]any) { d["max_model_len"] = 0 },
		"data[0].lfmq.checkpoint_format":      func(d, x map[string]any) { x["checkpoint_format"] = "gguf" },
		"data[0].lfmq.checkpoint_identity":    func(d, x map[string]any) { x["checkpoint_identity"] = "ABC" },
		"data[0].lfmq.manifest_sha256":        func(d, x map[string]any) { x["manifest_sha256"] = sum("other") },
		"data[0].lfmq.config_sha256":          func(d, x map[string]any) { delete(x, "config_sha256") },
		"data[0].lfmq.vocab_size":             func(d, x map[string]any) { x["vocab_size"] = -1 },
		"data[0].lfmq.tokenizer_sha256":       func(d, x map[string]any) { x["tokenizer_sha256"] = "zz" },
		"data[0].lfmq.binary_sha256":          func(d, x map[string]any) { x["binary_sha256"] = "zz" },
		"data[0].lfmq.manifest_sha256 for hf": func(d, x map[string]any) { x["checkpoint_format"] = "hf" },
	} {
		m := base()
		d := m["data"].([]any)[0].(map[string]any)
		change(d, d["lfmq"].(map[string]any))
		_, err := parseModels("u", enc(m))
		var re *ResponseError
		if !errors.As(err, &re) || re.Field != strings.TrimSuffix(field, " for hf") || re.URL != "u" {
			t.Errorf("%s: %v", field, err)
		}
	}
	m := base()
	m["data"] = append(m["data"].([]any), m["data"].([]any)[0])
	if _, err := parseModels("u", enc(m)); err == nil || !strings.Contains(err.Error(), "2 models") {
		t.Errorf("two models: %v", err)
	}
}

// TestServerErrorUnauthorized: a 401 says how score is given the key,
// not only the server's advice to API clients.
func TestServerErrorUnauthorized(t *testing.T) {
	e := &ServerError{Method: "GET", URL: "http://127.0.0.1:8000/v1/models", Status: 401, Type: "authentication_error", Code: "invalid_api_key",
		Message: "missing or wrong API key: send it as Authorization: Bearer KEY"}
	if msg := e.Error(); !strings.Contains(msg, "HTTP 401") || !strings.Contains(msg, "--api-key-file, --api-key or LFMQ_API_KEY") {
		t.Errorf("401: %s", msg)
	}
	e.Status, e.Type, e.Code, e.Message = 500, "server_error", "", "boom"
	if msg := e.Error(); strings.Contains(msg, "--api-key") {
		t.Errorf("500 mentions the key: %s", msg)
	}
}
