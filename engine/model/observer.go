package model

// Rows identifies the token rows of one Forward step: row r is the token at
// absolute position Pos[r] of sequence Seq[r] (an index into Forward's
// seqs). A Forward call runs in steps of at most ForwardOptions.ChunkSize
// rows; the rows of a step are the tokens of the call's sequences in
// sequence order, each sequence's in position order.
type Rows struct {
	Seq []int
	Pos []int
}

// Len returns the number of rows.
func (r Rows) Len() int { return len(r.Seq) }

// Routing is an MoE layer's decision for the rows of one step.
type Routing struct {
	// K is the number of experts per token.
	K int
	// Experts holds, for row r, its K selected expert ids at [r·K, r·K+K),
	// in selection order (descending biased score, ties to the lower id).
	Experts []int
	// Weights holds the router weight g of each selection: the unbiased
	// sigmoid score, renormalised (norm_topk_prob) and multiplied by
	// routed_scaling_factor (docs/model.md §4.7). Same layout as Experts.
	Weights []float32
	// Logits holds the router logits, [rows, num_experts].
	Logits []float32
}

// ExpertRows are the activations of one routed expert for one step.
type ExpertRows struct {
	// Rows are the step rows routed to the expert, ascending.
	Rows []int
	// Weights are their router weights g (as in Routing).
	Weights []float32
	// Up holds the inputs of w1 and w3: the ffn_norm output of each routed
	// row, [len(Rows), hidden_size].
	Up []float32
	// Down holds the inputs of w2: silu(w1·z) ⊙ (w3·z), [len(Rows),
	// moe_intermediate_size].
	Down []float32
}

// Observer receives activations during Forward, for calibration and tests.
// Every slice is only valid during the call and must not be modified; the
// calls of one Forward are made from the goroutine that called Forward, in
// order: per step, Hidden(0) (Hidden(StartLayer), the input, for a call
// with a positive ForwardOptions.StartLayer), then for each layer run its
// Linear calls, Routing and Expert calls (ascending expert id, only for
// experts that received rows), Hidden(layer+1) (a last layer stopped early
// by ForwardOptions.LastLayer makes only its reports up to the stop); finally Linear(-1, "lm_head.weight", …) for the
// rows whose logits are computed. Embed BaseObserver to implement only some
// methods.
type Observer interface {
	// Hidden receives the residual stream h, [rows, hidden_size]: index 0 is
	// the embedding output, index i the stream after decoder layer i−1, all
	// before the final norm (the fixture's hidden_states numbering; Hugging
	// Face's last entry is after the final norm instead).
	Hidden(index int, rows Rows, h []float32)
	// Linear receives the input x, [rows, in], of the non-expert linear
	// weight name (its Hugging Face name) of decoder layer layer. q, k and v
	// projections share one input and are reported once each. layer is −1
	// for the head, whose input is the final-normed rows.
	Linear(layer int, name string, rows Rows, x []float32)
	// Routing receives an MoE layer's router decision.
	Routing(layer int, rows Rows, r *Routing)
	// Expert receives the activations of one routed expert of an MoE layer.
	Expert(layer, expert int, rows Rows, e *ExpertRows)
}

// BaseObserver implements Observer with methods that do nothing, for
// embedding.
type BaseObserver struct{}

// Hidden does nothing.
func (BaseObserver) Hidden(int, Rows, []float32) {}

// Linear does nothing.
func (BaseObserver) Linear(int, string, Rows, []float32) {}

// Routing does nothing.
func (BaseObserver) Routing(int, Rows, *Routing) {}

// Expert does nothing.
func (BaseObserver) Expert(int, int, Rows, *ExpertRows) {}

// FinalNorm returns the weight of the final norm (model.embedding_norm),
// which forms the head's input from the last layer's residual stream; the
// slice is the model's own and must not be modified.
func (m *Model) FinalNorm() []float32 { return m.finalNorm }
