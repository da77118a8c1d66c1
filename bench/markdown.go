package bench

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/lfmq/lfmq/evidence/report"
)

// Markdown renders a Result as one table, a row per cell: streams, prompt
// length, measured requests and failures, aggregate and per-stream
// tokens/s, time to first token (mean, p50, p90, p99), inter-token
// latency (mean, p50, p99) and request latency (mean, p50, p99). A
// partial cell is marked, and failures are listed by kind under the
// table with one message of each. It depends only on r.
func Markdown(r *Result) string {
	var b strings.Builder
	head := []string{"streams", "prompt", "requests", "failed", "tok/s", "tok/s per stream", "TTFT mean ms", "TTFT p50", "p90", "p99", "ITL mean ms", "ITL p50", "p99", "latency mean s", "p50", "p99"}
	report.Row(&b, head)
	b.WriteString(strings.Repeat("|---", len(head)) + "|\n")
	for _, c := range r.Cells {
		prompt := strconv.Itoa(c.PromptTokens)
		if c.PromptTokens == 0 {
			prompt = fmt.Sprintf("dataset (%.0f)", c.PromptTokensMean)
		}
		streams := strconv.Itoa(c.Concurrency)
		if !c.Complete {
			streams += " (partial)"
		}
		failed := failedOf(c)
		ms := func(x float64) string { return fixed(x*1000, 1) }
		s := func(x float64) string { return fixed(x, 2) }
		report.Row(&b, []string{streams, prompt, strconv.Itoa(c.Requests), strconv.Itoa(failed),
			fixed(c.OutputTokensPerSecond, 1), fixed(c.StreamTokensPerSecond.Mean, 1),
			ms(c.TTFT.Mean), ms(c.TTFT.P50), ms(c.TTFT.P90), ms(c.TTFT.P99),
			ms(c.ITL.Mean), ms(c.ITL.P50), ms(c.ITL.P99),
			s(c.Latency.Mean), s(c.Latency.P50), s(c.Latency.P99)})
	}
	turnTable(&b, r)
	var notes []string
	for _, c := range r.Cells {
		for _, kind := range slices.Sorted(maps.Keys(c.Failures)) {
			notes = append(notes, fmt.Sprintf("- %d streams, prompt %d: %d × %s: %s", c.Concurrency, c.PromptTokens, c.Failures[kind], kind, c.FailureSamples[kind]))
		}
		if c.Retries > 0 {
			notes = append(notes, fmt.Sprintf("- %d streams, prompt %d: %d answers 429/503 retried after their Retry-After (%.1f s waited)", c.Concurrency, c.PromptTokens, c.Retries, c.RetryWaitSeconds))
		}
		if c.Sent.Resent > 0 {
			notes = append(notes, fmt.Sprintf("- %d streams, prompt %d: %d requests (%d measured) sent again on a new connection: the server had closed the kept-alive one before answering; not counted as attempts or failures", c.Concurrency, c.PromptTokens, c.Sent.Resent, c.Resent))
		}
		if started := c.Requests + failedOf(c); c.Complete && (started < c.Concurrency || c.Latency.P50 > c.WindowSeconds/2) {
			notes = append(notes, fmt.Sprintf("- %d streams, prompt %d: %d requests started in the %.0f s window, taking %.2f s each (p50): the figures describe the start of the cell more than a steady state; give a longer --duration",
				c.Concurrency, c.PromptTokens, started, c.WindowSeconds, c.Latency.P50))
		}
		if sc := c.ServerCounts; sc != nil && sc.PrefixQueryTokens != nil && sc.PrefixHitTokens != nil && *sc.PrefixQueryTokens > 0 {
			notes = append(notes, fmt.Sprintf("- %d streams, prompt %d: the server's prefix cache found %d of the %d prompt tokens it looked up (%.1f %%)",
				c.Concurrency, c.PromptTokens, *sc.PrefixHitTokens, *sc.PrefixQueryTokens, 100*float64(*sc.PrefixHitTokens)/float64(*sc.PrefixQueryTokens)))
		}
		if acc, tps, ok := c.ServerCounts.DraftAcceptance(); ok {
			notes = append(notes, fmt.Sprintf("- %d streams, prompt %d: the server's drafter kept %d of %d drafts (acceptance %.1f %%), %.2f tokens per verify step",
				c.Concurrency, c.PromptTokens, *c.ServerCounts.DraftAccepted, *c.ServerCounts.DraftTokens, 100*acc, tps))
		}
		if sc := c.ServerCounts; sc != nil && sc.DraftSeconds != nil {
			notes = append(notes, fmt.Sprintf("- %d streams, prompt %d: the drafter's passes and its context took %.3f s of the server's time",
				c.Concurrency, c.PromptTokens, *sc.DraftSeconds))
		}
		standIn := 0
		for _, t := range c.Turns {
			standIn += t.StandIn
		}
		if standIn > 0 {
			notes = append(notes, fmt.Sprintf("- %d streams, prompt %d: %d turns re-sent a stand-in for the answer before them (the server returned no token_ids), which no prefix cache can match", c.Concurrency, c.PromptTokens, standIn))
		}
		if c.Sent.NoUsage > 0 {
			notes = append(notes, fmt.Sprintf("- %d streams, prompt %d: %d answers without usage: lengths checked by the stream's token events", c.Concurrency, c.PromptTokens, c.Sent.NoUsage))
		}
	}
	if r.Interrupted {
		notes = append(notes, "- interrupted: the last cell is partial")
	}
	if len(notes) > 0 {
		b.WriteString("\n" + strings.Join(notes, "\n") + "\n")
	}
	return b.String()
}

// turnTable writes, for a multi-turn run, a second table: a row per
// cell and turn with the turn's requests, mean context re-sent, the share
// of it the server's prefix cache supplied (from usage) and its time to
// first token; with a baseline, the mean time to first token of the fresh
// prompts of the turn's new tokens alone and the turn's ratio to it.
func turnTable(b *strings.Builder, r *Result) {
	if r.Settings.Turns < 2 {
		return
	}
	head := []string{"streams", "prompt", "turn", "requests", "context tokens", "cached tokens", "cached %", "TTFT mean ms", "TTFT p50", "p90", "p99"}
	if r.Settings.TurnBaseline {
		head = append(head, "fresh TTFT mean ms", "turn ÷ fresh")
	}
	b.WriteString("\n")
	report.Row(b, head)
	b.WriteString(strings.Repeat("|---", len(head)) + "|\n")
	ms := func(x float64) string { return fixed(x*1000, 1) }
	for _, c := range r.Cells {
		for _, t := range c.Turns {
			if t.Requests == 0 && t.FreshRequests == 0 {
				continue // a turn the window was too short to reach
			}
			pct := "–"
			if t.PromptTokensMean > 0 {
				pct = strconv.FormatFloat(100*t.CachedTokensMean/t.PromptTokensMean, 'f', 1, 64)
			}
			row := []string{strconv.Itoa(c.Concurrency), strconv.Itoa(c.PromptTokens), strconv.Itoa(t.Turn), strconv.Itoa(t.Requests),
				fixed(t.PromptTokensMean, 0), cachedOf(t), pct, ms(t.TTFT.Mean), ms(t.TTFT.P50), ms(t.TTFT.P90), ms(t.TTFT.P99)}
			if r.Settings.TurnBaseline {
				fresh, ratio := "–", "–"
				if f := t.FreshTTFT; f != nil && f.N > 0 {
					fresh = ms(f.Mean)
					if t.TTFT.N > 0 {
						ratio = fixed(t.TTFT.Mean/f.Mean, 2) + "×"
					}
				}
				row = append(row, fresh, ratio)
			}
			report.Row(b, row)
		}
	}
}

// cachedOf is a turn's mean cached tokens: 0 is a figure when the turn
// has requests.
func cachedOf(t Turn) string {
	if t.Requests == 0 {
		return "–"
	}
	return strconv.FormatFloat(t.CachedTokensMean, 'f', 0, 64)
}

// failedOf counts a cell's measured failures.
func failedOf(c Cell) int {
	n := 0
	for _, k := range c.Failures {
		n += k
	}
	return n
}

// fixed formats x with d decimals; an empty sample's zero is "–".
func fixed(x float64, d int) string {
	if x == 0 {
		return "–"
	}
	return strconv.FormatFloat(x, 'f', d, 64)
}
