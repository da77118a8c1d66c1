package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Defaults of Options fields left zero.
const (
	// DefaultMaxRequests bounds the requests of one cell when the
	// duration alone would allow more (a fake or very fast server).
	DefaultMaxRequests = 100000
	// DefaultRequestTimeout bounds one attempt, from sending it to the
	// end of its stream.
	DefaultRequestTimeout = 5 * time.Minute
	// DefaultMaxRetries bounds the attempts repeated after 429 or 503.
	DefaultMaxRetries = 10
	// maxModelsBytes and maxMetricsBytes bound what /v1/models and
	// /metrics may answer (an error body kept: client.ErrorLimit).
	maxModelsBytes  = 1 << 20
	maxMetricsBytes = 16 << 20
	// maxTurns bounds a conversation's requests.
	maxTurns = 4096
)

// Exact says how a request asks for exactly OutputTokens tokens, however
// early the model would stop: min_tokens (lfmq, vLLM), ignore_eos
// (llama.cpp's server, vLLM) or both. Servers ignore the field they do
// not know, so ExactBoth works with all three; a strict server may want
// one or none. Every answer's usage is checked whatever the setting.
type Exact string

// The ways to ask for exact output lengths.
const (
	ExactBoth      Exact = "both"
	ExactMinTokens Exact = "min_tokens"
	ExactIgnoreEOS Exact = "ignore_eos"
	ExactNone      Exact = "none"
)

// Options configure a Run.
type Options struct {
	// URL is the server's base URL, scheme://host[:port]; the routes are
	// under /v1. Nothing else is contacted.
	URL string
	// APIKey is sent as a bearer token when set; it is never recorded.
	APIKey string
	// Model is the model to ask for; empty takes the one /v1/models
	// lists (an error when it lists several).
	Model string
	// Concurrency lists the numbers of concurrent streams, one cell
	// each; PromptTokens the prompt lengths (random token ids), unless
	// Dataset is given.
	Concurrency  []int
	PromptTokens []int
	// Dataset holds prompts to send in turn instead of random ids.
	Dataset []Record
	// OutputTokens is what every request must generate, exactly.
	OutputTokens int
	// Turns makes each stream run conversations of that many requests
	// (an agent loop): a conversation's first request sends a random
	// prompt of PromptTokens ids, and each later one re-sends the whole
	// conversation so far (its last prompt and answer) plus TurnTokens
	// new random ids, so its context grows by OutputTokens + TurnTokens
	// a turn. 0 or 1: every request is a new prompt.
	Turns, TurnTokens int
	// TurnBaseline sends, after each turn from the second on, a fresh
	// prompt of TurnTokens new random ids alone (no conversation before
	// it): its time to first token is what the turn would cost if the
	// prefix cache made the re-sent context free, measured beside it.
	TurnBaseline bool
	// Warmup runs requests that are not measured before each cell's
	// Duration of measured ones.
	Warmup, Duration time.Duration
	// MaxRequests bounds a cell's requests (DefaultMaxRequests when 0).
	MaxRequests int
	// Seed seeds the random prompts: the same seed sends the same ids.
	Seed uint64
	// Vocab is the number of token ids prompts are drawn from; 0 takes
	// the size /v1/models reports (lfmq serve and llama.cpp's server
	// report it; vLLM does not).
	Vocab int
	// Exact is how requests ask for exact lengths (ExactBoth when "").
	Exact Exact
	// Logprobs asks for the log-prob of every generated token, so that
	// every token arrives as a stream event of its own, text or not;
	// without it a token whose text is held back (part of a character)
	// arrives with a later one and time to first token can read late.
	// TopLogprobs asks for that many most likely alternatives with each
	// (0: the sampled token's alone). The sampled token's log-prob is
	// one log-sum-exp over the vocabulary; alternatives make a server
	// rank the vocabulary at every token, which llama.cpp's server does
	// with a full sort (docs/bench.md measures what each costs).
	Logprobs    bool
	TopLogprobs int
	// Temperature is sent with every request.
	Temperature float64
	// ExtraBody fields are added to every request body (a logit_bias,
	// say); they may not replace the fields the bench sets.
	ExtraBody map[string]json.RawMessage
	// RequestTimeout bounds one attempt (DefaultRequestTimeout when 0);
	// MaxRetries the attempts repeated after 429 or 503 (−1: none;
	// DefaultMaxRetries when 0).
	RequestTimeout time.Duration
	MaxRetries     int
	// HTTPClient sends the requests; nil builds one that follows no
	// redirect and uses no proxy.
	HTTPClient *http.Client
	// Progress, when set, is called as a cell advances (from the Run's
	// goroutines, one call at a time).
	Progress func(Progress)
	// now is the clock (tests stub it); nil is time.Now.
	now func() time.Time
}

// Record is one prompt of a dataset: a completion prompt (text or token
// ids) or chat messages.
type Record struct {
	Prompt   json.RawMessage `json:"prompt,omitempty"`
	Messages json.RawMessage `json:"messages,omitempty"`
}

// Progress is where a Run is.
type Progress struct {
	Cell, Cells  int    // the cell running (1-based) and their number
	Concurrency  int    // its streams
	PromptTokens int    // its prompt length (0: the dataset)
	Phase        string // "warm-up", "measuring", "draining"
	Elapsed      time.Duration
	Requests     int // requests finished in the cell
	Failed       int // of which failed
	Tokens       int64
}

// OptionsError is a bad Options field: the command line's fault.
type OptionsError struct {
	Field, Msg string
}

func (e *OptionsError) Error() string { return fmt.Sprintf("bench: %s: %s", e.Field, e.Msg) }

// ParseURL checks a server's base URL and returns it as requests are
// built from it: scheme://host[:port], without a path or trailing slash.
func ParseURL(raw string) (string, error) {
	bad := func(msg string) error { return &OptionsError{"url", fmt.Sprintf("%q: %s", raw, msg)} }
	u, err := url.Parse(raw)
	switch {
	case err != nil, u.Scheme != "http" && u.Scheme != "https":
		return "", bad("want http://HOST:PORT or https://HOST:PORT")
	case u.Opaque != "" || u.Host == "":
		return "", bad("want http://HOST:PORT")
	case u.User != nil:
		return "", bad("credentials in the URL would be recorded; give the key with --api-key-file")
	case u.Path != "" && u.Path != "/" && u.Path != "/v1" && u.Path != "/v1/":
		return "", bad("want the server's base URL (the routes are under /v1)")
	case u.RawQuery != "" || u.Fragment != "":
		return "", bad("a base URL has no query or fragment")
	}
	return u.Scheme + "://" + u.Host, nil
}

// check validates o and fills in defaults.
func (o *Options) check() error {
	base, err := ParseURL(o.URL)
	if err != nil {
		return err
	}
	o.URL = base
	if len(o.Concurrency) == 0 {
		return &OptionsError{"concurrency", "give at least one"}
	}
	for _, c := range o.Concurrency {
		if c < 1 || c > 4096 {
			return &OptionsError{"concurrency", fmt.Sprintf("%d: want 1 to 4096 streams", c)}
		}
	}
	if len(o.Dataset) == 0 {
		if len(o.PromptTokens) == 0 {
			return &OptionsError{"prompt-tokens", "give at least one length, or a dataset"}
		}
		for _, p := range o.PromptTokens {
			if p < 1 || p > 1<<22 {
				return &OptionsError{"prompt-tokens", fmt.Sprintf("%d: want 1 to %d tokens", p, 1<<22)}
			}
		}
	}
	if o.Turns < 0 || o.Turns > maxTurns {
		return &OptionsError{"turns", fmt.Sprintf("%d: want 1 to %d", o.Turns, maxTurns)}
	}
	if o.Turns > 1 && len(o.Dataset) > 0 {
		return &OptionsError{"turns", "conversations are made of random prompts; drop --dataset"}
	}
	if o.TurnBaseline && o.Turns < 2 {
		return &OptionsError{"turn-baseline", "a baseline is measured beside the turns of a conversation; give --turns 2 or more"}
	}
	if o.Turns > 1 && (o.TurnTokens < 1 || o.TurnTokens > 1<<22) {
		return &OptionsError{"turn-tokens", fmt.Sprintf("%d: want 1 to %d new tokens a turn", o.TurnTokens, 1<<22)}
	}
	if o.OutputTokens < 1 {
		return &OptionsError{"output-tokens", fmt.Sprintf("%d: want at least 1", o.OutputTokens)}
	}
	if o.Duration <= 0 {
		return &OptionsError{"duration", "want a positive duration"}
	}
	if o.Warmup < 0 {
		return &OptionsError{"warmup", "must not be negative"}
	}
	if o.TopLogprobs < 0 || o.TopLogprobs > 20 {
		return &OptionsError{"top-logprobs", fmt.Sprintf("%d: want 0 to 20", o.TopLogprobs)}
	}
	if o.TopLogprobs > 0 && !o.Logprobs {
		return &OptionsError{"top-logprobs", "alternatives come with log-probs; drop --logprobs=false"}
	}
	if o.MaxRequests < 0 || o.Vocab < 0 || o.RequestTimeout < 0 {
		return &OptionsError{"max-requests", "counts and timeouts must not be negative"}
	}
	switch o.Exact {
	case "":
		o.Exact = ExactBoth
	case ExactBoth, ExactMinTokens, ExactIgnoreEOS, ExactNone:
	default:
		return &OptionsError{"exact", fmt.Sprintf("%q: want both, min_tokens, ignore_eos or none", o.Exact)}
	}
	for k := range o.ExtraBody {
		if reservedFields[k] {
			return &OptionsError{"extra-body", fmt.Sprintf("%q is a field the bench sets itself", k)}
		}
	}
	if o.MaxRequests == 0 {
		o.MaxRequests = DefaultMaxRequests
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	switch {
	case o.MaxRetries == 0:
		o.MaxRetries = DefaultMaxRetries
	case o.MaxRetries < 0:
		o.MaxRetries = 0
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Only the URL given is contacted: no proxy from the environment.
		t.Proxy = nil
		maxC := 0
		for _, c := range o.Concurrency {
			maxC = max(maxC, c)
		}
		t.MaxIdleConnsPerHost = maxC + 2
		t.MaxIdleConns = maxC + 2
		o.HTTPClient = &http.Client{Transport: t,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return nil
}

// reservedFields are the request fields the bench sets.
var reservedFields = map[string]bool{
	"model": true, "prompt": true, "messages": true, "max_tokens": true, "min_tokens": true,
	"ignore_eos": true, "stream": true, "stream_options": true, "logprobs": true, "top_logprobs": true, "temperature": true, "return_token_ids": true,
}
