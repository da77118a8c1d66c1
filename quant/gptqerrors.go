package quant

import "fmt"

// FallbackError refuses (with GPTQOptions.Strict) a matrix that GPTQ could
// not solve. Expert is -1 for a dense LFM2's FFN.
type FallbackError struct {
	Layer, Expert int
	Matrix        string
	Reason        string
	Err           error
}

func (e *FallbackError) Error() string {
	return fmt.Sprintf("quant: %s %s: GPTQ failed (%s) and --strict forbids the RTN fallback: %v", where(e.Layer, e.Expert), e.Matrix, e.Reason, e.Err)
}

// where names a solved matrix's place: "layer 3 expert 5", or "layer 3
// FFN" for a dense LFM2's (expert −1).
func where(layer, expert int) string {
	if expert < 0 {
		return fmt.Sprintf("layer %d FFN", layer)
	}
	return fmt.Sprintf("layer %d expert %d", layer, expert)
}

func (e *FallbackError) Unwrap() error { return e.Err }

// StatsError reports non-finite calibration statistics, naming where
// (Expert −1: a dense LFM2's FFN).
type StatsError struct {
	Layer  int
	Expert int
	Matrix string
	Err    error
}

func (e *StatsError) Error() string {
	return fmt.Sprintf("quant: %s %s input statistics: %v", where(e.Layer, e.Expert), e.Matrix, e.Err)
}

func (e *StatsError) Unwrap() error { return e.Err }
