package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// serverPrefixes are the metric name prefixes of the servers whose own
// counters a cell records: lfmq serve's, vLLM's and llama.cpp's (with
// --metrics). Process and Go runtime metrics are left out.
var serverPrefixes = []string{"lfmq_", "vllm:", "llamacpp:"}

// maxSeries bounds the series read from one /metrics answer.
const maxSeries = 100000

// Sample is one series of a Prometheus text exposition: the metric name
// with its labels as written ("lfmq_requests_total{route=\"/v1/completions\",status=\"200\"}").
type samples map[string]float64

// parseMetrics reads the Prometheus text format (version 0.0.4): one
// "name{labels} value [timestamp]" per line, # lines are comments. Only
// series of the servers' own metrics (serverPrefixes) that are counters
// by name (_total, and histograms' _sum and _count) are kept: a cell
// records how they grew, and a gauge's difference means nothing.
func parseMetrics(data []byte) (samples, error) {
	out := samples{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		series, value, err := splitSample(line)
		if err != nil {
			return nil, fmt.Errorf("bench: /metrics line %d: %w", n, err)
		}
		name, _, _ := strings.Cut(series, "{")
		if !hasServerPrefix(name) || !(strings.HasSuffix(name, "_total") || strings.HasSuffix(name, "_sum") || strings.HasSuffix(name, "_count")) {
			continue
		}
		if len(out) >= maxSeries {
			return nil, fmt.Errorf("bench: /metrics holds over %d series", maxSeries)
		}
		out[series] = value
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: /metrics: %w", err)
	}
	return out, nil
}

func hasServerPrefix(name string) bool {
	for _, p := range serverPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// splitSample splits a sample line into its series (name and labels) and
// value; a label value may hold spaces and escaped quotes.
func splitSample(line string) (string, float64, error) {
	end := strings.IndexAny(line, " \t{")
	if end <= 0 {
		return "", 0, fmt.Errorf("no value in %q", clip(line))
	}
	if line[end] == '{' {
		inQuote, esc := false, false
		i := end + 1
		for ; i < len(line); i++ {
			c := line[i]
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inQuote = !inQuote
			case c == '}' && !inQuote:
				end = i + 1
				i = len(line) + 1
			}
		}
		if i == len(line) {
			return "", 0, fmt.Errorf("unclosed labels in %q", clip(line))
		}
	}
	fields := strings.Fields(line[end:])
	if len(fields) == 0 || len(fields) > 2 {
		return "", 0, fmt.Errorf("want a value (and a timestamp) after the series in %q", clip(line))
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", 0, fmt.Errorf("value %q: %w", clip(fields[0]), err)
	}
	return line[:end], v, nil
}

// delta returns after − before for every series that changed; a series
// that appeared counts from 0. A counter that went down (the server
// restarted) is left out: its difference is not what the cell did.
func delta(before, after samples) map[string]float64 {
	out := map[string]float64{}
	for k, a := range after {
		d := a - before[k]
		if d > 0 && !math.IsInf(d, 0) {
			out[k] = d
		}
	}
	return out
}

// serverView picks, from a cell's metric deltas, the server's own counts
// of what the bench also counts, whatever the server: requests answered,
// prompt tokens and generated tokens. A count the server does not expose
// is left nil.
func serverView(d map[string]float64) *ServerCounts {
	if len(d) == 0 {
		return nil
	}
	// total adds up, in the keys' order, the series of the named metrics
	// whose labels keep accepts (nil: all); ok is false when there is
	// none.
	total := func(keep func(labels string) bool, names ...string) (sum float64, ok bool) {
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			n, labels, _ := strings.Cut(k, "{")
			if !slices.Contains(names, n) || (keep != nil && !keep(labels)) {
				continue
			}
			sum += d[k]
			ok = true
		}
		return sum, ok
	}
	sum := func(name string, keep func(labels string) bool) *int64 {
		t, ok := total(keep, name)
		if !ok {
			return nil
		}
		v := int64(math.Round(t))
		return &v
	}
	// seconds adds up counters of seconds, kept to the microsecond.
	seconds := func(names ...string) *float64 {
		t, ok := total(nil, names...)
		if !ok {
			return nil
		}
		t = math.Round(t*1e6) / 1e6
		return &t
	}
	first := func(vals ...*int64) *int64 {
		for _, v := range vals {
			if v != nil {
				return v
			}
		}
		return nil
	}
	generating := func(labels string) bool {
		return strings.Contains(labels, `route="/v1/completions"`) || strings.Contains(labels, `route="/v1/chat/completions"`)
	}
	return &ServerCounts{
		Requests:          first(sum("lfmq_requests_total", generating), sum("vllm:request_success_total", nil)),
		PromptTokens:      first(sum("lfmq_prompt_tokens_total", nil), sum("vllm:prompt_tokens_total", nil), sum("llamacpp:prompt_tokens_total", nil)),
		GenerationTokens:  first(sum("lfmq_generation_tokens_total", nil), sum("vllm:generation_tokens_total", nil), sum("llamacpp:tokens_predicted_total", nil)),
		PrefixQueryTokens: first(sum("lfmq_prefix_cache_query_tokens_total", nil), sum("vllm:prefix_cache_queries_total", nil)),
		PrefixHitTokens:   first(sum("lfmq_prefix_cache_hit_tokens_total", nil), sum("vllm:prefix_cache_hits_total", nil)),
		DraftSteps:        first(sum("lfmq_drafter_verify_steps_total", nil), sum("vllm:spec_decode_num_drafts_total", nil)),
		DraftTokens:       first(sum("lfmq_drafter_draft_tokens_total", nil), sum("vllm:spec_decode_num_draft_tokens_total", nil)),
		DraftAccepted:     first(sum("lfmq_drafter_accepted_tokens_total", nil), sum("vllm:spec_decode_num_accepted_tokens_total", nil)),
		DraftSeconds:      seconds("lfmq_drafter_pass_seconds_total", "lfmq_drafter_context_seconds_total"),
	}
}
