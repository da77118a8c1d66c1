package gptq

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lfmq/lfmq/format/bfp"
)

// TestStop: a closed Options.Stop ends the factorization, the row loop and
// the losses with ErrStopped, on one goroutine and on several, while a
// Stop that stays open changes no bit of any result.
func TestStop(t *testing.T) {
	const k, out = 96, 64
	r := rand.New(rand.NewPCG(7, 8))
	h := randomHessian(r, k, 4*k, nil)
	w := randomWeight(r, out, k)
	closed := make(chan struct{})
	close(closed)
	for _, threads := range []int{1, 3} {
		base := DefaultOptions(0.01)
		base.Threads, base.BlockSize = threads, 32
		ref, err := NewFactor(h, k, base)
		if err != nil {
			t.Fatal(err)
		}
		refRes, err := ref.Quantize(bfp.BFP4, w, out)
		if err != nil {
			t.Fatal(err)
		}
		refLoss, err := LossesThreads(h, w, [][]float32{refRes.Q}, out, k, threads)
		if err != nil {
			t.Fatal(err)
		}

		open := base
		open.Stop = make(chan struct{})
		f, err := NewFactor(h, k, open)
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.Quantize(bfp.BFP4, w, out)
		if err != nil || !bytes.Equal(res.Packed, refRes.Packed) || res.Loss != refRes.Loss {
			t.Errorf("threads %d: an open Stop changed the result (%v)", threads, err)
		}
		loss, err := LossesStop(h, w, [][]float32{refRes.Q}, out, k, threads, open.Stop)
		if err != nil || !slices.Equal(loss, refLoss) {
			t.Errorf("threads %d: an open Stop changed the losses: %v, %v want %v", threads, err, loss, refLoss)
		}

		stop := base
		stop.Stop = closed
		if _, err := NewFactor(h, k, stop); !errors.Is(err, ErrStopped) {
			t.Errorf("threads %d: NewFactor with a closed Stop: %v", threads, err)
		}
		f.stop = closed
		if _, err := f.Quantize(bfp.BFP4, w, out); !errors.Is(err, ErrStopped) {
			t.Errorf("threads %d: Quantize with a closed Stop: %v", threads, err)
		}
		if _, err := LossesStop(h, w, [][]float32{refRes.Q}, out, k, threads, closed); !errors.Is(err, ErrStopped) {
			t.Errorf("threads %d: LossesStop with a closed Stop: %v", threads, err)
		}
	}
}

// TestFactorInverseStopsBetweenPanels: a Stop closed while the factor is
// formed ends it at the next panel, before the inverse.
func TestFactorInverseStopsBetweenPanels(t *testing.T) {
	const k = 4 * panelRows
	r := rand.New(rand.NewPCG(9, 10))
	h := randomHessian(r, k, 4*k, nil)
	for i := range k {
		h[i*k+i] += 1
	}
	u := make([]float64, k*k)
	stop := make(chan struct{})
	close(stop)
	if i, why := factorInverseStop(h, u, k, 1, stop); i != stoppedIndex || why != "stopped" {
		t.Errorf("factorInverseStop with a closed stop = %d, %q", i, why)
	}
	for _, v := range u {
		if v != 0 {
			t.Fatal("the stopped factorization wrote the inverse")
		}
	}
}
