package progress

import "testing"

// TestStageLine: a decoder layer's stage names the layer; the LM head's
// (a negative layer) is the head's.
func TestStageLine(t *testing.T) {
	for _, c := range []struct {
		layer int
		stage string
		want  string
	}{
		{0, "forward 1/3", "layer 0: forward 1/3"},
		{7, "solve w2", "layer 7: solve w2"},
		{-1, "solve dense", "head: solve dense"},
	} {
		if got := stageLine(c.layer, c.stage); got != c.want {
			t.Errorf("stageLine(%d, %q) = %q, want %q", c.layer, c.stage, got, c.want)
		}
	}
}
