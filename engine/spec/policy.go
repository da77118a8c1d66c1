package spec

import (
	"math"
	"slices"
)

// Policy chooses a verify step's draft length k (docs/serving.md §6):
// with a the moving acceptance rate of draft tokens and c(k) the measured
// cost of a (k+1)-token step relative to a one-token step, it maximises
// the expected tokens per step per unit cost, (1 − a^{k+1}) / (1 − a) /
// c(k). When no k beats plain decoding (1 token per unit cost) it stops
// drafting and probes again after ProbeAfter tokens.
//
// Acceptance is per request (a new Policy per request); step costs are the
// model's, shared through a Costs value. It is not safe for concurrent use.
type Policy struct {
	maxK     int
	accept   float64 // moving acceptance rate of tested draft tokens
	costs    *Costs
	pause    int  // tokens to decode plainly before drafting again
	probed   bool // a draft was verified since the request began or the last pause
	Drafts   int  // verify steps run
	Proposed int  // draft tokens verified
	Accepted int  // draft tokens accepted
}

// ProbeAfter is how many plainly decoded tokens follow a decision not to
// draft before the policy tries again.
const ProbeAfter = 64

// acceptAlpha is the weight of one tested draft token in the moving
// acceptance rate: about the last eight tested tokens count, so a run of
// copied text is recognised within a few verify steps.
const acceptAlpha = 1.0 / 8

// NewPolicy returns a policy drafting at most maxK tokens, starting from
// an acceptance rate of one half.
func NewPolicy(maxK int, costs *Costs) *Policy {
	return &Policy{maxK: max(1, min(maxK, MaxTokens)), accept: 0.5, costs: costs}
}

// Acceptance returns the moving acceptance rate.
func (p *Policy) Acceptance() float64 { return p.accept }

// K returns the draft length for the next step, 0 for a plain decode step
// (then call Plain). A request starts with a probe, and a pause ends with
// one: a draft of the best length whatever the expected value, because
// only a verified draft measures acceptance, and a rate left at its prior
// could otherwise keep drafting off for good once wide steps are known to
// be expensive.
func (p *Policy) K() int {
	if p.pause > 0 {
		return 0
	}
	a := p.accept
	best, bestK := 0.0, 1
	for k := 1; k <= p.maxK; k++ {
		e := float64(k + 1)
		if a < 1 {
			e = (1 - math.Pow(a, float64(k+1))) / (1 - a)
		}
		if v := e / p.costs.Rel(k+1); v > best*(1+1e-9) {
			best, bestK = v, k
		}
	}
	if p.probed && best <= 1 {
		p.pause, p.probed = ProbeAfter, false
		return 0
	}
	return bestK
}

// Plain records a step decoded without a draft (none found, or K was 0).
func (p *Policy) Plain() {
	if p.pause > 0 {
		p.pause--
	}
}

// Verified records a verify step of k draft tokens of which the first m
// were accepted: m accepted trials and, if m < k, one rejected (the
// tokens after the first rejection were not tested).
func (p *Policy) Verified(k, m int) {
	p.probed = true
	p.Drafts++
	p.Proposed += k
	p.Accepted += m
	for range m {
		p.accept += acceptAlpha * (1 - p.accept)
	}
	if m < k {
		p.accept -= acceptAlpha * p.accept
	}
}

// Costs holds the measured time of steps of 1 to MaxTokens+1 tokens of one
// sequence and answers their cost relative to a one-token step. Each width
// keeps its last costWindow times and uses their median (a Table's cells of
// one sequence): the first step of a new width also pays for growing
// buffers, and a shared machine adds outliers, neither of which should
// decide the policy. Before a width is measured its cost is taken to grow
// by a tenth per extra token (decode is bound by reading the weights,
// which a wider step reads once). The zero value is ready to use.
type Costs struct {
	t Table
}

// costWindow is how many recent times per width the median is taken over.
const costWindow = 9

// Observe records that a step of width tokens took sec seconds.
func (c *Costs) Observe(width int, sec float64) {
	if width < 1 || width > MaxTokens+1 {
		return
	}
	c.t.Observe(1, width, sec)
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// Rel returns the cost of a width-token step relative to a one-token step.
func (c *Costs) Rel(width int) float64 {
	guess := 1 + 0.1*float64(width-1)
	one, ok1 := c.t.cell(1, 1)
	w, ok := c.t.cell(1, width)
	if width <= 1 || width > MaxTokens+1 || !ok1 || !ok {
		return guess
	}
	return w / one
}
