package load

import (
	"fmt"
	"strings"

	"github.com/lfmq/lfmq/engine/config"
)

// The values of TensorError.Problem.
const (
	// ProblemMissing: the config implies the tensor, the checkpoint lacks it.
	ProblemMissing = "missing"
	// ProblemShape: the tensor's shape differs from the one the config implies.
	ProblemShape = "shape"
	// ProblemDType: the tensor's dtype or storage format cannot be used for it.
	ProblemDType = "dtype"
	// ProblemUnexpected: the checkpoint holds a tensor that is not part of an
	// LFM2-MoE model with this config.
	ProblemUnexpected = "unexpected"
)

// TensorError reports a checkpoint tensor that does not fit the model's
// config: missing, misshapen, of an unusable dtype, or unexpected. Load joins
// one TensorError per finding (errors.As finds the first).
type TensorError struct {
	Dir     string       // checkpoint directory
	Tensor  string       // the tensor's Hugging Face name
	Problem string       // one of the Problem constants
	Want    config.Shape // the shape the config implies (nil for unexpected tensors)
	Got     config.Shape // the shape found (nil when missing)
	Detail  string       // what else is wrong, such as the dtype found
}

// Error implements error.
func (e *TensorError) Error() string {
	head := fmt.Sprintf("model: %s: tensor %q", e.Dir, e.Tensor)
	switch e.Problem {
	case ProblemMissing:
		return fmt.Sprintf("%s: missing (expected shape %v)", head, e.Want)
	case ProblemShape:
		return fmt.Sprintf("%s: shape %v, the config implies %v", head, e.Got, e.Want)
	case ProblemUnexpected:
		return fmt.Sprintf("%s: not an LFM2-MoE tensor for this config (shape %v)", head, e.Got)
	}
	return fmt.Sprintf("%s: %s: %s", head, e.Problem, e.Detail)
}

// FindingsError is every *TensorError one load found. Its message shows
// the first few and counts the rest, because a wrong dimension in
// config.json misfits hundreds of tensors; errors.As reaches each one.
type FindingsError struct {
	Findings []error
	// Note, when set, comes first: what the findings likely have in common.
	Note string
}

// findingsShown is how many findings the message lists.
const findingsShown = 8

// Error implements error.
func (e *FindingsError) Error() string {
	var b strings.Builder
	if e.Note != "" {
		b.WriteString(e.Note)
		b.WriteString("\n")
	}
	for i, f := range e.Findings {
		if i == findingsShown {
			fmt.Fprintf(&b, "\n... and %d more tensors that do not fit", len(e.Findings)-findingsShown)
			break
		}
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(f.Error())
	}
	return b.String()
}

// Unwrap returns every finding.
func (e *FindingsError) Unwrap() []error { return e.Findings }
