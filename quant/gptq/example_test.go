package gptq_test

import (
	"fmt"
	"math"

	"github.com/lfmq/lfmq/format/bfp"
	"github.com/lfmq/lfmq/quant/gptq"
)

// Example quantizes a weight [32, 16] (16 inputs, 32 outputs) whose inputs
// are strongly correlated (H_ij = 0.9^|i−j|): feeding each step's error to
// the correlated inputs not yet quantized lowers the output error under H
// well below round-to-nearest's.
func Example() {
	const in, out = 16, 32
	h := make([]float64, in*in)
	for i := range in {
		for j := range in {
			h[i*in+j] = math.Pow(0.9, math.Abs(float64(i-j)))
		}
	}
	w := make([]float32, out*in)
	for i := range w {
		w[i] = float32(math.Sin(float64(i)*1.7) / 10)
	}
	f, err := gptq.NewFactor(h, in, gptq.DefaultOptions(0.01))
	if err != nil {
		panic(err)
	}
	res, err := f.Quantize(bfp.BFP4, w, out)
	if err != nil {
		panic(err)
	}
	packed, _ := bfp.PackMatrix(bfp.BFP4, w, out, in)
	rtn, _ := bfp.UnpackMatrix(bfp.BFP4, packed, out, in)
	lg, _ := gptq.Loss(h, w, res.Q, out, in)
	lr, _ := gptq.Loss(h, w, rtn, out, in)
	fmt.Printf("%d bytes (one BFP4 tile), GPTQ loss / RTN loss = %.2f\n", len(res.Packed), lg/lr)
	// Output: 576 bytes (one BFP4 tile), GPTQ loss / RTN loss = 0.27
}
