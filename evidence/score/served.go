package score

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/sourcegraph/conc"
	"github.com/sourcegraph/conc/pool"

	apiclient "github.com/lfmq/lfmq/engine/api/client"
	"github.com/lfmq/lfmq/format/identity"
	"github.com/lfmq/lfmq/format/lfmq1"
)

// A served candidate is a running lfmq serve scored through its
// OpenAI-compatible API (docs/scoring.md, "Scoring a running server";
// docs/serving.md §5): GET /v1/models names the model and the checkpoint
// it serves, and one POST /v1/completions per window, with the window's
// token ids as the prompt, max_tokens 0, echo and prompt_logprobs −1,
// returns the full-vocabulary float32 log-prob row (sample.LogProbs) of
// every prompt position, base64 little-endian in
// choices[0].prompt_logprobs_f32. Those are exactly the rows in-process
// scoring computes from the same checkpoint's logits, so the figures are
// bit-identical.
const (
	// maxInFlight bounds the completion requests in flight per served
	// candidate, and the windows fetched ahead of the statistics: each
	// holds a window's rows (len(Tokens)·vocab_size float32, 128 MiB for
	// 512 tokens of a 65,536-id vocabulary) and its response body.
	maxInFlight = 4
	// retryFor bounds how long a request is retried while the server
	// answers 429 (queue full) or 503 (model not ready yet).
	retryFor = 5 * time.Minute
	// requestTimeout bounds one attempt: a window's prefill on a busy CPU
	// server takes seconds, not minutes.
	requestTimeout = 10 * time.Minute
)

// ParseServerURL checks the base URL of a served candidate and returns it
// in the form requests are built from, scheme://host[:port] without a
// trailing slash. Only http and https are accepted, with no path other
// than "/", no query, fragment or credentials (a key goes in
// Options.APIKey, never in a URL that the receipts record).
func ParseServerURL(raw string) (string, error) {
	bad := func(msg string) error {
		return &OptionsError{"candidate", fmt.Sprintf("%q: %s", raw, msg)}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", bad("not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", bad("a served candidate's URL must start with http:// or https://")
	case u.Opaque != "" || u.Host == "":
		return "", bad("want http://HOST:PORT")
	case u.User != nil:
		return "", bad("credentials in the URL would be recorded in the receipts; give the key with --api-key-file")
	case u.Path != "" && u.Path != "/":
		return "", bad("want the server's base URL (the API lives under /v1); no path")
	case u.RawQuery != "" || u.ForceQuery:
		return "", bad("a server's base URL has no query")
	case u.Fragment != "":
		return "", bad("a server's base URL has no fragment")
	}
	return u.Scheme + "://" + u.Host, nil
}

// ServerError reports a request to a served candidate that failed: no
// answer (Status 0, Err the cause), or an HTTP error status with the
// server's error object.
type ServerError struct {
	Method string
	URL    string // the request URL
	Window string // the window a completion was for; empty for /v1/models
	Status int    // HTTP status; 0 when no answer came
	// Type, Code and Message are the server's error object, when it sent
	// one (Message is the start of the body otherwise).
	Type, Code, Message string
	// Retries counts the attempts repeated after 429 or 503 answers.
	Retries int
	Err     error
}

func (e *ServerError) Error() string {
	where := e.Method + " " + e.URL
	if e.Window != "" {
		where += " (" + e.Window + ")"
	}
	if e.Status == 0 {
		if errors.Is(e.Err, syscall.ECONNREFUSED) {
			return fmt.Sprintf("score: no server answering at %s; is lfmq serve running? (%s)", e.URL, where)
		}
		return fmt.Sprintf("score: %s: %v", where, e.Err)
	}
	msg := fmt.Sprintf("score: %s: HTTP %d", where, e.Status)
	if e.Type != "" || e.Code != "" {
		msg += " (" + strings.Trim(e.Type+" "+e.Code, " ") + ")"
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Status == http.StatusUnauthorized {
		// The server's advice (send Authorization: Bearer KEY) is for API
		// clients; the person running score gives the key another way.
		msg += "; lfmq score sends the key of --api-key-file, --api-key or LFMQ_API_KEY"
	}
	if e.Retries > 0 {
		msg += fmt.Sprintf(" (after %d retries)", e.Retries)
	}
	return msg
}

func (e *ServerError) Unwrap() error { return e.Err }

// ResponseError reports an answer of a served candidate that is not what
// the API promises: the URL, the window (empty for /v1/models), the
// offending field and what was wrong.
type ResponseError struct {
	URL    string
	Window string
	Field  string
	Msg    string
}

func (e *ResponseError) Error() string {
	where := e.URL
	if e.Window != "" {
		where += " (" + e.Window + ")"
	}
	return fmt.Sprintf("score: %s: %s: %s", where, e.Field, e.Msg)
}

// client talks to one served candidate.
type client struct {
	api      *apiclient.Client
	base     string // scheme://host, from ParseServerURL
	retryFor time.Duration
}

func newClient(base, key string, hc *http.Client) *client {
	if hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = maxInFlight
		hc = &http.Client{
			Transport: t,
			// A redirect is answered, not followed: the key is not sent on
			// and the receipts name the server that computed the rows.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return &client{api: &apiclient.Client{URL: base, APIKey: key, HTTP: hc}, base: base, retryFor: retryFor}
}

// do sends one request, retrying while the server answers 429 or 503
// (not shutting_down) for at most retryFor, and returns the body of a 2xx
// answer, which must not exceed limit bytes; hint is its expected size.
func (c *client) do(ctx context.Context, method, path string, body []byte, hint, limit int64, window string) ([]byte, error) {
	r := apiclient.Request{Method: method, Path: path, Body: body, Accept: "application/json"}
	data, err := c.api.Do(ctx, r, limit, hint, apiclient.Retry{For: c.retryFor, Timeout: requestTimeout})
	var ce *apiclient.Error
	var be *apiclient.BodyError
	switch {
	case err == nil:
		return data, nil
	case errors.As(err, &ce) && ce.Status != 0:
		return nil, serverError(ce, window)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.As(err, &ce):
		return nil, &ServerError{Method: method, URL: ce.URL, Window: window, Err: ce.Err}
	case errors.As(err, &be) && be.TooLarge():
		return nil, &ResponseError{URL: be.URL, Window: window, Field: "body", Msg: fmt.Sprintf("over the %d-byte limit", limit)}
	case errors.As(err, &be):
		return nil, &ServerError{Method: method, URL: be.URL, Window: window, Err: fmt.Errorf("reading the answer: %w", be.Err)}
	}
	return nil, err
}

// serverError is the ServerError of an error answer: the server's error
// object, or the start of the body when it sent none.
func serverError(ce *apiclient.Error, window string) *ServerError {
	e := &ServerError{Method: ce.Method, URL: ce.URL, Window: window, Status: ce.Status, Retries: ce.Retries}
	if len(ce.Object) > 0 && ce.Object[0] == '{' {
		e.Type, e.Code, e.Message = ce.Type, ce.Code, ce.Message
	} else {
		e.Message = strings.TrimSpace(strings.ToValidUTF8(string(ce.Body[:min(len(ce.Body), 200)]), "?"))
	}
	if ce.Status/100 == 3 && ce.Location != "" {
		e.Message = strings.TrimSpace(e.Message + " redirected to " + ce.Location + "; give that URL")
	}
	return e
}

// servedModel is what /v1/models reports of the one model a server serves.
type servedModel struct {
	ID          string
	MaxModelLen int
	VocabSize   int
	Checkpoint  identity.Checkpoint // Format, Identity, ManifestSHA256, ConfigSHA256, TokenizerSHA256
	LfmqVersion string
	// SourceDigest and BinarySHA256 describe the server's executable.
	SourceDigest, BinarySHA256 string
	// KVCacheDType is the server's KV cache format ("" from a server that
	// predates the field: float32).
	KVCacheDType string
}

// models asks the server which model it serves and what checkpoint that is.
func (c *client) models(ctx context.Context) (*servedModel, error) {
	data, err := c.do(ctx, http.MethodGet, "/v1/models", nil, 4<<10, apiclient.ModelsLimit, "")
	if err != nil {
		return nil, err
	}
	return parseModels(c.base+"/v1/models", data)
}

// parseModels reads and checks a /v1/models answer: exactly one model,
// with lfmq's checkpoint description.
func parseModels(u string, data []byte) (*servedModel, error) {
	bad := func(field, format string, args ...any) error {
		return &ResponseError{URL: u, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	// Lfmq is what lfmq serve reports, in the server's own type, so that
	// the two sides cannot drift apart.
	var list apiclient.Models
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, bad("body", "not a model list: %v", err)
	}
	if len(list.Data) != 1 {
		return nil, bad("data", "%d models; lfmq score needs a server that serves exactly one", len(list.Data))
	}
	d := list.Data[0]
	x := d.Lfmq
	switch {
	case d.ID == "":
		return nil, bad("data[0].id", "empty")
	case d.MaxModelLen <= 0:
		return nil, bad("data[0].max_model_len", "%d, want a positive length", d.MaxModelLen)
	case x == nil:
		return nil, bad("data[0].lfmq", "missing: the server does not describe its checkpoint (only lfmq serve does, and scoring needs it)")
	case x.CheckpointFormat != identity.FormatHF && x.CheckpointFormat != identity.FormatLfmq1:
		return nil, bad("data[0].lfmq.checkpoint_format", "%q, want %q or %q", x.CheckpointFormat, identity.FormatHF, identity.FormatLfmq1)
	case !lfmq1.ValidSHA256(x.CheckpointIdentity):
		return nil, bad("data[0].lfmq.checkpoint_identity", "%q is not 64 lower-case hex digits", x.CheckpointIdentity)
	case x.CheckpointFormat == identity.FormatLfmq1 && x.ManifestSHA256 != x.CheckpointIdentity:
		return nil, bad("data[0].lfmq.manifest_sha256", "%q, want the checkpoint identity of an lfmq-1 checkpoint", x.ManifestSHA256)
	case x.CheckpointFormat == identity.FormatHF && x.ManifestSHA256 != "":
		return nil, bad("data[0].lfmq.manifest_sha256", "set for a Hugging Face checkpoint")
	case !lfmq1.ValidSHA256(x.ConfigSHA256):
		return nil, bad("data[0].lfmq.config_sha256", "%q is not 64 lower-case hex digits", x.ConfigSHA256)
	case x.TokenizerSHA256 != "" && !lfmq1.ValidSHA256(x.TokenizerSHA256):
		return nil, bad("data[0].lfmq.tokenizer_sha256", "%q is not 64 lower-case hex digits", x.TokenizerSHA256)
	case x.VocabSize <= 0:
		return nil, bad("data[0].lfmq.vocab_size", "%d, want a positive size", x.VocabSize)
	case x.BinarySHA256 != "" && !lfmq1.ValidSHA256(x.BinarySHA256):
		return nil, bad("data[0].lfmq.binary_sha256", "%q is not 64 lower-case hex digits", x.BinarySHA256)
	}
	return &servedModel{
		ID: d.ID, MaxModelLen: d.MaxModelLen, VocabSize: x.VocabSize,
		Checkpoint: identity.Checkpoint{
			Format: x.CheckpointFormat, Identity: x.CheckpointIdentity, ManifestSHA256: x.ManifestSHA256,
			ConfigSHA256: x.ConfigSHA256, TokenizerSHA256: x.TokenizerSHA256,
		},
		LfmqVersion: x.LfmqVersion, SourceDigest: x.SourceDigest, BinarySHA256: x.BinarySHA256,
		KVCacheDType: x.KVCacheDType,
	}, nil
}

// completionRequest is the body of a window's /v1/completions request.
// No field is omitted when zero: max_tokens 0 and temperature 0 are meant.
type completionRequest struct {
	Model          string `json:"model"`
	Prompt         []int  `json:"prompt"`
	MaxTokens      int    `json:"max_tokens"`
	Echo           bool   `json:"echo"`
	PromptLogprobs int    `json:"prompt_logprobs"`
	Temperature    int    `json:"temperature"`
}

// responseLimit bounds a completion answer for n prompt tokens and a
// vocabulary of v ids: n base64 rows of 4v bytes with room for the JSON
// around each, plus 1 MiB for the echoed text and the rest.
func responseLimit(n, v int) int64 {
	return int64(n)*int64(base64.StdEncoding.EncodedLen(4*v)+64) + 1<<20
}

// window fetches the log-prob rows of one window of tokens from the model
// the server serves (one request, the server runs it from an empty
// state). The rows are laid out as in-process logits are: row p−1
// (dst[(p−1)·v : p·v]) predicts tokens[p].
func (c *client) window(ctx context.Context, model string, tokens []int, v int, window string) ([]float32, error) {
	body, err := json.Marshal(completionRequest{Model: model, Prompt: tokens, Echo: true, PromptLogprobs: -1})
	if err != nil {
		return nil, err
	}
	n := len(tokens)
	hint := int64(n)*int64(base64.StdEncoding.EncodedLen(4*v)+8) + 4<<10
	data, err := c.do(ctx, http.MethodPost, "/v1/completions", body, hint, responseLimit(n, v), window)
	if err != nil {
		return nil, err
	}
	dst := make([]float32, max(n-1, 0)*v)
	if err := decodePromptLogprobs(data, n, v, dst); err != nil {
		re := &ResponseError{URL: c.base + "/v1/completions", Window: window, Field: "body", Msg: err.Error()}
		if fe, ok := err.(*fieldError); ok {
			re.Field, re.Msg = fe.Field, fe.Msg
		}
		return nil, re
	}
	return dst, nil
}

// fieldError is a malformed completion answer: the field and what is wrong.
type fieldError struct{ Field, Msg string }

func (e *fieldError) Error() string { return e.Field + ": " + e.Msg }

// decodePromptLogprobs reads a /v1/completions answer for a prompt of n
// tokens with a vocabulary of v ids: exactly one choice, index 0, whose
// prompt_logprobs_f32 has n entries, entry 0 null and entry j ≥ 1 the
// standard base64 of v little-endian float32, decoded into dst[(j−1)·v :
// j·v] (len(dst) must be (n−1)·v). Any other shape is a *fieldError.
func decodePromptLogprobs(data []byte, n, v int, dst []float32) error {
	rows := &f32Rows{n: n, v: v, dst: dst}
	// An array, not a slice: json decodes a Go array's elements in place,
	// so choice 0 decodes into rows as set here. A second choice lands in
	// the second element and is refused.
	var resp struct {
		Choices [2]struct {
			Index int      `json:"index"`
			Rows  *f32Rows `json:"prompt_logprobs_f32"`
		} `json:"choices"`
	}
	resp.Choices[0].Rows = rows
	if err := json.Unmarshal(data, &resp); err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			return fe
		}
		return &fieldError{"body", err.Error()}
	}
	switch c := resp.Choices; {
	case c[1].Rows != nil || c[1].Index != 0:
		return &fieldError{"choices", "more than one choice, want one"}
	case c[0].Index != 0:
		return &fieldError{"choices[0].index", fmt.Sprintf("%d, want 0", c[0].Index)}
	case c[0].Rows != rows || !rows.seen:
		return &fieldError{"choices[0].prompt_logprobs_f32", "missing or null (no choice, or the server ignored prompt_logprobs)"}
	}
	return nil
}

// f32Rows decodes a prompt_logprobs_f32 array straight into float32 rows,
// without holding the base64 text of more than one row.
type f32Rows struct {
	n, v int
	dst  []float32
	seen bool
	buf  []byte
}

// UnmarshalJSON implements json.Unmarshaler. json has checked the syntax
// of the whole document before; this still checks every byte it reads.
func (r *f32Rows) UnmarshalJSON(b []byte) error {
	r.seen = true
	if r.dst == nil && r.n == 0 && r.v == 0 {
		return nil // a choice that was not asked for; refused by the caller
	}
	const field = "choices[0].prompt_logprobs_f32"
	bad := func(j int, format string, args ...any) error {
		f := field
		if j >= 0 {
			f = fmt.Sprintf("%s[%d]", field, j)
		}
		return &fieldError{f, fmt.Sprintf(format, args...)}
	}
	if r.n < 1 || r.v < 1 || len(r.dst) != (r.n-1)*r.v {
		return bad(-1, "internal: %d prompt tokens, vocabulary %d, %d destination values", r.n, r.v, len(r.dst))
	}
	want := base64.StdEncoding.EncodedLen(4 * r.v)
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return bad(-1, "not an array")
	}
	i = skipSpace(b, i+1)
	j := 0
	if i < len(b) && b[i] == ']' {
		i++
	} else {
		for {
			if j >= r.n {
				return bad(-1, "more than %d entries (one per prompt token)", r.n)
			}
			switch {
			case bytes.HasPrefix(b[i:], []byte("null")):
				if j != 0 {
					return bad(j, "null; every entry after the first is a log-prob row")
				}
				i += 4
			case i < len(b) && b[i] == '"':
				if j == 0 {
					return bad(j, "a row; the first entry must be null (no distribution predicts the first token)")
				}
				end, escaped := scanString(b, i)
				if end < 0 {
					return bad(j, "unterminated string")
				}
				s := b[i+1 : end-1]
				if escaped {
					var str string
					if err := json.Unmarshal(b[i:end], &str); err != nil {
						return bad(j, "bad string: %v", err)
					}
					s = []byte(str)
				}
				if len(s) != want {
					return bad(j, "%d base64 characters, want %d (%d float32, vocab_size)", len(s), want, r.v)
				}
				if need := base64.StdEncoding.DecodedLen(len(s)); len(r.buf) < need {
					r.buf = make([]byte, need)
				}
				got, err := base64.StdEncoding.Decode(r.buf, s)
				if err != nil {
					return bad(j, "not standard base64: %v", err)
				}
				if got != 4*r.v {
					return bad(j, "%d bytes, want %d (%d float32, vocab_size)", got, 4*r.v, r.v)
				}
				row := r.dst[(j-1)*r.v : j*r.v]
				for k := range row {
					row[k] = math.Float32frombits(binary.LittleEndian.Uint32(r.buf[4*k:]))
				}
				i = end
			default:
				return bad(j, "want null or a base64 string")
			}
			j++
			i = skipSpace(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
				continue
			}
			if i < len(b) && b[i] == ']' {
				i++
				break
			}
			return bad(-1, "malformed array after entry %d", j-1)
		}
	}
	if skipSpace(b, i) != len(b) {
		return bad(-1, "data after the array")
	}
	if j != r.n {
		return bad(-1, "%d entries, want %d (one per prompt token)", j, r.n)
	}
	return nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index just past the JSON string starting at
// b[i] == '"' (−1 if it does not end) and whether it holds an escape.
func scanString(b []byte, i int) (end int, escaped bool) {
	for k := i + 1; k < len(b); k++ {
		switch b[k] {
		case '\\':
			escaped = true
			k++
		case '"':
			return k + 1, escaped
		}
	}
	return -1, escaped
}

// job is one window a served candidate is asked for.
type job struct {
	tokens []int
	label  string // "corpus NAME window I (record ID)"
}

// slot holds one fetched window until the statistics take it.
type slot struct {
	rows []float32
	err  error
	done chan struct{}
}

// fetcher asks a server for every window of a run in order, at most
// maxInFlight at a time and at most maxInFlight ahead of the windows
// taken. Results land in pre-indexed slots, so what the statistics see
// never depends on which answer came first.
type fetcher struct {
	slots  []slot
	next   int
	ahead  chan struct{} // one token per window dispatched and not yet taken
	cancel context.CancelFunc
	disp   conc.WaitGroup
	reqs   *pool.Pool
}

// startFetcher starts fetching jobs from c's model (vocabulary v).
func startFetcher(ctx context.Context, c *client, model string, v int, jobs []job) *fetcher {
	fctx, cancel := context.WithCancel(ctx)
	f := &fetcher{
		slots: make([]slot, len(jobs)), ahead: make(chan struct{}, maxInFlight), cancel: cancel,
		reqs: pool.New().WithMaxGoroutines(maxInFlight),
	}
	for i := range f.slots {
		f.slots[i].done = make(chan struct{})
	}
	f.disp.Go(func() {
		for i, jb := range jobs {
			select {
			case f.ahead <- struct{}{}:
			case <-fctx.Done():
				return
			}
			s := &f.slots[i]
			f.reqs.Go(func() {
				defer close(s.done)
				s.rows, s.err = c.window(fctx, model, jb.tokens, v, jb.label)
			})
		}
	})
	return f
}

// take returns the next window's rows, in job order.
func (f *fetcher) take(ctx context.Context) ([]float32, error) {
	if f.next >= len(f.slots) {
		return nil, errors.New("score: internal: more windows taken than fetched")
	}
	s := &f.slots[f.next]
	f.next++
	select {
	case <-s.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	<-f.ahead
	rows, err := s.rows, s.err
	s.rows = nil
	if err == nil && rows == nil {
		return nil, errors.New("score: internal: a window's request ended without an answer")
	}
	return rows, err
}

// close stops fetching and waits for every request to end.
func (f *fetcher) close() {
	f.cancel()
	f.disp.Wait()
	f.reqs.Wait()
}
