package api

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/lfmq/lfmq/engine/sched"
)

// metrics are the server's Prometheus collectors (docs/serving.md §8),
// on a registry of their own so that tests can run several servers.
type metrics struct {
	reg              *prometheus.Registry
	requests         *prometheus.CounterVec // by route and status
	promptTokens     prometheus.Counter
	generationTokens prometheus.Counter
	queueRejections  prometheus.Counter
	cancellations    prometheus.Counter
	ttft             prometheus.Histogram
	itl              prometheus.Histogram
	duration         *prometheus.HistogramVec // by route
}

// latencyBuckets span a tiny model's sub-millisecond steps to a large
// model's long prompts.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120}

// stats reads the scheduler's load for the gauges; nil until the model is
// loaded.
type stats func() (sched.Stats, bool)

func newMetrics(st stats) *metrics {
	const ns = "lfmq"
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "requests_total",
			Help: "HTTP requests by route and status code."}, []string{"route", "status"}),
		promptTokens: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "prompt_tokens_total",
			Help: "Prompt tokens of admitted requests."}),
		generationTokens: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "generation_tokens_total",
			Help: "Tokens generated (stop tokens included)."}),
		queueRejections: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "queue_rejections_total",
			Help: "Requests refused with 429 because the wait queue was full."}),
		cancellations: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "request_cancellations_total",
			Help: "Requests cancelled before they finished (client disconnect or shutdown)."}),
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "time_to_first_token_seconds",
			Help: "Time from a request's arrival to its first generated token.", Buckets: latencyBuckets}),
		itl: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "inter_token_latency_seconds",
			Help: "Time between consecutive generated tokens of a request.", Buckets: latencyBuckets}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "request_duration_seconds",
			Help: "Time from a request's arrival to its last byte.", Buckets: latencyBuckets}, []string{"route"}),
	}
	gauge := func(name, help string, f func(s sched.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: name, Help: help}, func() float64 {
			s, ok := st()
			if !ok {
				return 0
			}
			return f(s)
		})
	}
	floatCounter := func(name, help string, f func(s sched.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, func() float64 {
			s, ok := st()
			if !ok {
				return 0
			}
			return f(s)
		})
	}
	counter := func(name, help string, f func(s sched.Stats) int64) prometheus.Collector {
		return floatCounter(name, help, func(s sched.Stats) float64 { return float64(f(s)) })
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.promptTokens, m.generationTokens, m.queueRejections, m.cancellations, m.ttft, m.itl, m.duration,
		gauge("num_requests_running", "Sequences admitted (prefilling or decoding).", func(s sched.Stats) float64 { return float64(s.Running) }),
		gauge("num_requests_waiting", "Requests waiting for admission.", func(s sched.Stats) float64 { return float64(s.Waiting) }),
		gauge("kv_pool_tokens", "Size of the KV pool in tokens (--kv-pool-tokens).", func(s sched.Stats) float64 { return float64(s.KVPoolTokens) }),
		gauge("kv_pool_reserved_tokens", "KV pool tokens reserved by admitted requests (prompt + max tokens; with n, the prompt once + n × max tokens).", func(s sched.Stats) float64 { return float64(s.KVReservedTokens) }),
		gauge("kv_pool_used_tokens", "Tokens of KV and conv state held by admitted requests now (a prefix they share counts once per request).", func(s sched.Stats) float64 { return float64(s.KVUsedTokens) }),
		gauge("kv_pool_pages", "Size of the KV pool in pages of 64 tokens (--kv-pool-tokens rounded up).", func(s sched.Stats) float64 { return float64(s.KVPages) }),
		gauge("kv_pool_pages_used", "KV pages held by running sequences or the prefix cache (a shared page counts once).", func(s sched.Stats) float64 { return float64(s.KVPagesUsed) }),
		gauge("kv_pool_pages_free", "KV pages free to take: kv_pool_pages minus kv_pool_pages_used.", func(s sched.Stats) float64 { return float64(s.KVPagesFree) }),
		gauge("kv_pool_pages_shared", "KV pages held by more than one sequence or cached block, each held once.", func(s sched.Stats) float64 { return float64(s.KVPagesShared) }),
		gauge("kv_pool_page_bytes", "Memory of one KV page in the KV cache format (the keys and values of 64 tokens of every attention layer that does not slide).", func(s sched.Stats) float64 { return float64(s.KVPageBytes) }),
		gauge("kv_pool_window_pages_used", "Window pages (a sliding-window layer's keys and values, 64 tokens each; a constant number per sequence) held by running sequences or the prefix cache; 0 for a model without sliding layers.", func(s sched.Stats) float64 { return float64(s.KVWindowPagesUsed) }),
		gauge("kv_pool_window_pages_shared", "Window pages held by more than one sequence or cached block, each held once.", func(s sched.Stats) float64 { return float64(s.KVWindowPagesShared) }),
		gauge("kv_pool_window_page_bytes", "Memory of one window page in the KV cache format (every sliding layer's keys and values of 64 tokens); 0 for a model without sliding layers.", func(s sched.Stats) float64 { return float64(s.KVWindowPageBytes) }),
		counter("engine_steps_total", "Engine steps run by the scheduler.", func(s sched.Stats) int64 { return s.Steps }),
		counter("spec_verify_steps_total", "Speculative verify steps (a draft checked in one multi-token step).", func(s sched.Stats) int64 { return s.SpecSteps }),
		counter("spec_draft_tokens_total", "Draft tokens carried by verify steps.", func(s sched.Stats) int64 { return s.SpecDraftTokens }),
		counter("spec_accepted_tokens_total", "Draft tokens accepted.", func(s sched.Stats) int64 { return s.SpecAcceptedTokens }),
		counter("spec_emitted_tokens_total", "Tokens emitted by verify steps (accepted drafts plus one sampled token each); over spec_verify_steps_total, the tokens per step.", func(s sched.Stats) int64 { return s.SpecEmittedTokens }),
		counter("drafter_passes_total", "DSpark drafter passes (one drafts a block for every decoding sequence it is asked for).", func(s sched.Stats) int64 { return s.DraftPasses }),
		counter("drafter_verify_steps_total", "Verify steps of a sequence that carried the drafter's drafts.", func(s sched.Stats) int64 { return s.DraftSteps }),
		counter("drafter_draft_tokens_total", "Drafter tokens verified.", func(s sched.Stats) int64 { return s.DraftTokens }),
		counter("drafter_accepted_tokens_total", "Drafter tokens kept by verification; over drafter_draft_tokens_total, the acceptance.", func(s sched.Stats) int64 { return s.DraftAccepted }),
		counter("drafter_emitted_tokens_total", "Tokens emitted by the drafter's verify steps; over drafter_verify_steps_total, the tokens per step.", func(s sched.Stats) int64 { return s.DraftEmitted }),
		counter("drafter_hopeless_steps_total", "Steps at a batch width where, by the verify cost table, not even drafts that all survive would pay for the drafter's pass; their rows' drafter context is given up, and a sequence that gave it up drafts no more.", func(s sched.Stats) int64 { return s.DraftHopelessSteps }),
		floatCounter("drafter_pass_seconds_total", "Time the drafter's passes took.", func(s sched.Stats) float64 { return s.DraftPassSeconds }),
		floatCounter("drafter_context_seconds_total", "Time spent computing the drafter's context of the target's rows (its keys and values of every row a pass may read). With drafter_pass_seconds_total, what the drafter itself cost, beside the verify rows its drafts added to steps.", func(s sched.Stats) float64 { return s.DraftContextSeconds }),
		gauge("drafter_guard_paused_widths", "Batch widths (decoding sequences per step) at which the guard holds drafting off because it did not pay.", func(s sched.Stats) float64 {
			n := 0
			for _, g := range s.DraftGuard {
				if !g.Drafting {
					n++
				}
			}
			return float64(n)
		}),
		counter("drafter_guard_pauses_total", "Times the guard found drafting did not pay at a width and paused it.", func(s sched.Stats) int64 {
			n := 0
			for _, g := range s.DraftGuard {
				n += g.Offs
			}
			return int64(n)
		}),
		counter("prefix_cache_query_tokens_total", "Prompt tokens looked up in the prefix cache.", func(s sched.Stats) int64 { return s.PrefixQueryTokens }),
		counter("prefix_cache_hit_tokens_total", "Prompt tokens resumed from the prefix cache.", func(s sched.Stats) int64 { return s.PrefixHitTokens }),
		gauge("prefix_cache_tokens", "Tokens of state the prefix cache holds.", func(s sched.Stats) float64 { return float64(s.PrefixCachedTokens) }),
	)
	return m
}
