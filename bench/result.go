package bench

import "encoding/json"

// Result is a Run's measurements: the server, the settings and one Cell
// per concurrency × prompt length, in the order they ran.
type Result struct {
	Server   Server   `json:"server"`
	Settings Settings `json:"settings"`
	Cells    []Cell   `json:"cells"`
	// Interrupted is set when the run was stopped before its last cell
	// ended; the last cell is then partial (Complete false).
	Interrupted bool `json:"interrupted"`
}

// Server is what the bench learned of the server.
type Server struct {
	URL   string `json:"url"`
	Model string `json:"model"`
	// Kind is "lfmq", "llama.cpp", "vllm" or "unknown", read from the
	// shape of the /v1/models answer.
	Kind string `json:"kind"`
	// Models is the /v1/models answer as the server sent it (compacted):
	// the identity of what was measured (lfmq serve's names the
	// checkpoint's manifest sha256 and its own binary).
	Models json.RawMessage `json:"models"`
	// Vocab is the number of token ids random prompts were drawn from,
	// and VocabFrom where it came from ("--vocab", "lfmq.vocab_size",
	// "meta.n_vocab"); 0 and "" with a dataset.
	Vocab     int    `json:"vocab"`
	VocabFrom string `json:"vocab_from"`
	// MaxModelLen is the longest prompt plus output the server accepts,
	// as its /v1/models says (max_model_len; 0 when it does not).
	MaxModelLen int `json:"max_model_len,omitempty"`
	// Metrics says whether GET /metrics answered with the server's own
	// counters; MetricsNote why not, when it did not.
	Metrics     bool   `json:"metrics"`
	MetricsNote string `json:"metrics_note,omitempty"`
}

// Settings are the options that shape the measurements.
type Settings struct {
	Concurrency     []int   `json:"concurrency"`
	PromptTokens    []int   `json:"prompt_tokens"`
	Dataset         int     `json:"dataset_records"`
	OutputTokens    int     `json:"output_tokens"`
	WarmupSeconds   float64 `json:"warmup_s"`
	DurationSeconds float64 `json:"duration_s"`
	MaxRequests     int     `json:"max_requests"`
	Seed            uint64  `json:"seed"`
	// Turns and TurnTokens shape the conversations of a multi-turn run
	// (Options.Turns); 0 for single requests.
	Turns      int `json:"turns"`
	TurnTokens int `json:"turn_tokens"`
	// TurnBaseline: each turn from the second on was followed by a fresh
	// prompt of TurnTokens ids alone (Options.TurnBaseline).
	TurnBaseline bool  `json:"turn_baseline,omitempty"`
	Exact        Exact `json:"exact"`
	Logprobs     bool  `json:"logprobs"`
	// TopLogprobs is the alternatives asked for with each token's
	// log-prob (files written before the field existed asked for 1).
	TopLogprobs int     `json:"top_logprobs"`
	Temperature float64 `json:"temperature"`
	// ExtraBody holds the extra request fields, as sent.
	ExtraBody map[string]json.RawMessage `json:"extra_body,omitempty"`
	// Route is the route prompts went to: /v1/completions, or
	// /v1/chat/completions for a dataset of chats (a dataset may use both).
	Routes []string `json:"routes"`
}

// Cell is one concurrency × prompt length.
type Cell struct {
	Concurrency int `json:"concurrency"`
	// PromptTokens is the prompt length asked for; 0 for a dataset,
	// whose lengths PromptTokensMean gives (from usage).
	PromptTokens     int     `json:"prompt_tokens"`
	PromptTokensMean float64 `json:"prompt_tokens_mean"`
	// Complete is false for a cell an interrupt cut short.
	Complete bool `json:"complete"`
	// WindowSeconds is the measured window: from the end of the warm-up
	// to the time no new request was started.
	WindowSeconds float64 `json:"window_s"`
	// ElapsedSeconds is the whole cell: warm-up, window and drain.
	ElapsedSeconds float64 `json:"elapsed_s"`

	// Requests are the measured requests (started in the window) that
	// generated exactly the tokens asked for; Failures the measured ones
	// that did not, by kind (http_NNN, connect, disconnect, timeout,
	// stream_error, bad_stream, not_streamed, short, long), with one
	// message of each kind in FailureSamples.
	Requests       int               `json:"requests"`
	Failures       map[string]int    `json:"failures"`
	FailureSamples map[string]string `json:"failure_samples,omitempty"`
	// Retries counts answers 429 or 503 that were retried after their
	// Retry-After (measured requests), RetryWaitSeconds the time waited.
	Retries          int     `json:"retries"`
	RetryWaitSeconds float64 `json:"retry_wait_s"`
	// Resent counts the times measured requests were sent again because
	// the kept-alive connection they went out on had been closed by the
	// server before any byte of an answer (Sent.Resent counts them all).
	Resent int `json:"resent"`

	// OutputTokensPerSecond is the aggregate: tokens of successful
	// requests that arrived in the window, over its length.
	OutputTokensPerSecond float64 `json:"output_tok_per_s"`
	// StreamTokensPerSecond is each successful request's decode speed as
	// its user sees it: (tokens − 1) over the time from its first token to
	// its last.
	StreamTokensPerSecond Dist `json:"stream_tok_per_s"`
	// TTFT, ITL and Latency are in seconds: time to the first token,
	// between consecutive tokens (a chunk of k tokens counts its gap k
	// times, divided by k), and from sending to the end of the stream;
	// for successful measured requests, from the attempt that was answered.
	TTFT    Dist `json:"ttft_s"`
	ITL     Dist `json:"itl_s"`
	Latency Dist `json:"latency_s"`

	// Turns breaks a multi-turn cell's successful measured requests down
	// by their turn in the conversation; nil for single requests.
	Turns []Turn `json:"turns,omitempty"`

	// Sent counts every request of the cell, warm-up and drain included,
	// as the server saw them: what its own counters should agree with.
	Sent Sent `json:"sent"`
	// ServerMetrics holds how the server's own counters (/metrics) grew
	// over the cell; ServerCounts picks those that count what Sent does.
	ServerMetrics map[string]float64 `json:"server_metrics,omitempty"`
	ServerCounts  *ServerCounts      `json:"server_counts,omitempty"`
}

// Turn is one turn of a multi-turn cell's conversations.
type Turn struct {
	// Turn is 1 for a conversation's first request.
	Turn int `json:"turn"`
	// Requests are the successful measured requests of this turn.
	Requests int `json:"requests"`
	// PromptTokensMean is their mean prompt length (the context re-sent),
	// CachedTokensMean the mean of it the server's prefix cache
	// supplied, from each answer's usage.prompt_tokens_details.
	PromptTokensMean float64 `json:"prompt_tokens_mean"`
	CachedTokensMean float64 `json:"cached_tokens_mean"`
	// StandIn counts requests of this turn whose previous answer was
	// re-sent as stand-in ids: the server did not return the answer's
	// token ids (return_token_ids), so the conversation goes on with
	// seeded random ids of the answer's length, which a prefix cache
	// cannot match.
	StandIn int `json:"stand_in"`
	// TTFT is the time to first token of this turn's requests, seconds.
	TTFT Dist `json:"ttft_s"`
	// FreshRequests and FreshTTFT, with Settings.TurnBaseline, are the
	// successful measured fresh prompts sent after this turn's requests
	// (TurnTokens new ids alone) and their time to first token.
	FreshRequests int   `json:"fresh_requests,omitempty"`
	FreshTTFT     *Dist `json:"fresh_ttft_s,omitempty"`
}

// Sent counts a cell's requests from the client's side.
type Sent struct {
	// Attempts counts HTTP requests sent, retries included, and
	// ByStatus the answers by status code ("none" for no answer).
	Attempts int            `json:"attempts"`
	ByStatus map[string]int `json:"by_status"`
	// PromptTokens and CompletionTokens sum the usage of every answer
	// that reported one; TokenEvents the tokens counted in the streams.
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TokenEvents      int64 `json:"token_events"`
	// CachedPromptTokens sums the answers' usage.prompt_tokens_details
	// .cached_tokens: prompt tokens the server's prefix cache supplied.
	CachedPromptTokens int64 `json:"cached_prompt_tokens"`
	// NoUsage counts streams that ended without a usage object; their
	// lengths were checked against the token events alone.
	NoUsage int `json:"no_usage"`
	// Resent counts requests sent again on another connection because
	// the kept-alive one they went out on was closed before any byte of
	// an answer came back; they are not in Attempts, which counts what
	// the server answered or failed to answer on a live connection.
	Resent int `json:"resent"`
}

// ServerCounts are the server's own counts of a cell, from /metrics: HTTP
// requests answered on the completions and chat routes, any status (lfmq;
// vLLM counts finished requests only), prompt tokens admitted, tokens
// generated and the prefix cache's look-ups and hits. Nil when the server
// does not expose the count.
type ServerCounts struct {
	Requests         *int64 `json:"requests"`
	PromptTokens     *int64 `json:"prompt_tokens"`
	GenerationTokens *int64 `json:"generation_tokens"`
	// PrefixQueryTokens and PrefixHitTokens are the prompt tokens the
	// server looked up in its prefix cache and those it found (lfmq:
	// lfmq_prefix_cache_query/hit_tokens_total; vLLM:
	// vllm:prefix_cache_queries/hits_total).
	PrefixQueryTokens *int64 `json:"prefix_cache_query_tokens"`
	PrefixHitTokens   *int64 `json:"prefix_cache_hit_tokens"`
	// DraftSteps, DraftTokens and DraftAccepted are a drafter's verify
	// steps (one per sequence that carried drafts), the drafts they
	// verified and those kept (lfmq: lfmq_drafter_*; vLLM:
	// vllm:spec_decode_num_drafts/draft_tokens/accepted_tokens_total).
	DraftSteps    *int64 `json:"draft_steps,omitempty"`
	DraftTokens   *int64 `json:"draft_tokens,omitempty"`
	DraftAccepted *int64 `json:"draft_accepted_tokens,omitempty"`
	// DraftSeconds is the time the drafter's own work took on the server:
	// its passes and its context (lfmq: lfmq_drafter_pass_seconds_total
	// and lfmq_drafter_context_seconds_total; other servers do not say).
	DraftSeconds *float64 `json:"draft_seconds,omitempty"`
}

// DraftAcceptance is the share of the drafts verified that were kept, and
// the tokens per verify step (the kept drafts plus the target's own token
// each step); ok is false when the server reported no drafting.
func (sc *ServerCounts) DraftAcceptance() (acceptance, tokensPerStep float64, ok bool) {
	if sc == nil || sc.DraftSteps == nil || sc.DraftTokens == nil || sc.DraftAccepted == nil || *sc.DraftSteps == 0 || *sc.DraftTokens == 0 {
		return 0, 0, false
	}
	return float64(*sc.DraftAccepted) / float64(*sc.DraftTokens), float64(*sc.DraftAccepted+*sc.DraftSteps) / float64(*sc.DraftSteps), true
}

// AllFailed reports whether the run measured requests and every one of
// them failed (no cell has a successful one).
func (r *Result) AllFailed() bool {
	failed := 0
	for _, c := range r.Cells {
		if c.Requests > 0 {
			return false
		}
		for _, n := range c.Failures {
			failed += n
		}
	}
	return failed > 0
}
