package spec

import (
	"slices"
	"testing"
)

// TestLookup: the longest n-gram wins; among its occurrences the most
// recent one before the suffix; overlap is allowed; the draft is cut at
// the end of the context; no match gives nil.
func TestLookup(t *testing.T) {
	tests := []struct {
		name string
		ctx  []int
		k    int
		want []int
	}{
		{"no repeat", []int{1, 2, 3, 4, 5, 6}, 4, nil},
		{"trigram", []int{1, 2, 3, 9, 8, 7, 6, 1, 2, 3}, 4, []int{9, 8, 7, 6}},
		{"most recent occurrence", []int{1, 2, 3, 10, 1, 2, 3, 20, 21, 1, 2, 3}, 2, []int{20, 21}},
		{"longest n wins", []int{5, 1, 2, 3, 30, 31, 9, 2, 3, 40, 5, 1, 2, 3}, 2, []int{30, 31}},
		{"longer match beats a more recent shorter one", []int{7, 1, 2, 3, 50, 0, 1, 2, 3, 60, 7, 1, 2, 3}, 1, []int{50}},
		{"periodic past the end", []int{1, 2, 3, 4, 1, 2, 3}, 6, []int{4, 1, 2, 3, 4, 1}},
		{"overlap: a run continues", []int{4, 4, 4, 4}, 3, []int{4, 4, 4}},
		{"overlap: period 2", []int{9, 5, 6, 5, 6, 5, 6}, 5, []int{5, 6, 5, 6, 5}},
		{"k 0", []int{1, 2, 3, 1, 2, 3}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLookup(3, 5)
			if err != nil {
				t.Fatal(err)
			}
			// One token at a time and all at once give the same maps.
			for _, id := range tt.ctx {
				l.Append(id)
			}
			if got := l.Propose(tt.k); !slices.Equal(got, tt.want) {
				t.Errorf("Propose(%d) = %v, want %v", tt.k, got, tt.want)
			}
			l2, _ := NewLookup(3, 5)
			l2.Append(tt.ctx...)
			if got := l2.Propose(tt.k); !slices.Equal(got, tt.want) {
				t.Errorf("bulk Append: Propose(%d) = %v, want %v", tt.k, got, tt.want)
			}
		})
	}
	if _, err := NewLookup(0, 2); err == nil {
		t.Error("min 0 accepted")
	}
}

// TestPolicy: high acceptance and cheap wide steps draft the most tokens;
// low acceptance stops drafting, which resumes after ProbeAfter plain
// tokens; costs come from measurements.
func TestPolicy(t *testing.T) {
	var c Costs
	p := NewPolicy(4, &c)
	if k := p.K(); k == 0 {
		t.Error("a new request does not probe")
	}
	for range 200 {
		p.Verified(4, 4)
	}
	if k := p.K(); k != 4 || p.Acceptance() < 0.99 {
		t.Errorf("all accepted: K %d, acceptance %v", k, p.Acceptance())
	}
	for range 200 {
		p.Verified(4, 0)
	}
	if k := p.K(); k != 0 {
		t.Errorf("none accepted: K %d (acceptance %v)", k, p.Acceptance())
	}
	for i := 0; i < ProbeAfter-1; i++ {
		p.Plain()
		if k := p.K(); k != 0 {
			t.Fatalf("drafting again after %d plain tokens", i+1)
		}
	}
	p.Plain()
	if k := p.K(); k == 0 {
		t.Error("no probe after ProbeAfter plain tokens")
	}
	// A probe that finds no draft stays pending until one is verified.
	if k := p.K(); k == 0 {
		t.Error("the probe was dropped before a draft was verified")
	}
	p.Verified(1, 0)
	if k := p.K(); k != 0 {
		t.Errorf("after a failed probe at acceptance %v: K %d", p.Acceptance(), k)
	}
	// Expensive wide steps: acceptance 0.6 pays for no draft.
	c.Observe(1, 0.010)
	for w := 2; w <= MaxTokens+1; w++ {
		c.Observe(w, 0.010*float64(w))
	}
	p2 := NewPolicy(4, &c)
	p2.accept = 0.6
	p2.K() // the probe
	p2.Verified(1, 1)
	p2.accept = 0.6
	if k := p2.K(); k != 0 {
		t.Errorf("steps cost their width: K %d, want 0 (no draft pays)", k)
	}
	if r := c.Rel(3); r != 3 {
		t.Errorf("Rel(3) = %v", r)
	}
	var cheap Costs
	cheap.Observe(1, 0.010)
	for w := 2; w <= MaxTokens+1; w++ {
		cheap.Observe(w, 0.0105)
	}
	p3 := NewPolicy(7, &cheap)
	p3.accept = 0.6
	if k := p3.K(); k < 3 {
		t.Errorf("cheap steps, acceptance 0.6: K %d, want several", k)
	}
	if p.Drafts != 401 || p.Proposed != 1601 || p.Accepted != 800 {
		t.Errorf("counters %d %d %d", p.Drafts, p.Proposed, p.Accepted)
	}
}

// TestCostsMedian: one slow first step of a width (buffers growing) does
// not decide its cost.
func TestCostsMedian(t *testing.T) {
	var c Costs
	for range 5 {
		c.Observe(1, 0.010)
	}
	c.Observe(3, 0.100)
	for range 4 {
		c.Observe(3, 0.012)
	}
	if r := c.Rel(3); r < 1.19 || r > 1.21 {
		t.Errorf("Rel(3) = %v, want 1.2 (the outlier ignored)", r)
	}
	for range 20 {
		c.Observe(3, 0.020)
	}
	if r := c.Rel(3); r != 2 {
		t.Errorf("Rel(3) = %v after the cost changed, want 2", r)
	}
}
