package load

import (
	"context"
	"fmt"
	"math"

	"github.com/lfmq/lfmq/format/dtype"
	"github.com/lfmq/lfmq/format/hf"
)

// NonFiniteError is a Hugging Face checkpoint's weight that holds a NaN
// or an infinity: a damaged or mis-converted file, whose model would
// answer with whatever the NaNs make of its logits.
type NonFiniteError struct {
	Dir, Tensor string
	Index       int
	Value       float64
}

// Error implements error.
func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("model: %s: tensor %s: element %d is %v; a weight must be finite (the checkpoint is damaged or was converted wrongly)", e.Dir, e.Tensor, e.Index, e.Value)
}

// scanInBackground checks every floating-point tensor of c for NaN and
// infinity while the model works, as an lfmq-1 checkpoint's files are
// hashed (integrity's policy): a weight found non-finite fails every later
// Forward, and the command's Verified before success.
func scanInBackground(dir string, c *hf.Checkpoint) *integrity {
	ctx, cancel := context.WithCancel(context.Background())
	v := &integrity{done: make(chan struct{}), cancel: cancel}
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		v.err = scanFinite(ctx, dir, c)
		close(v.done)
	}()
	return v
}

// scanChunk is the elements scanned between checks of the context.
const scanChunk = 1 << 20

// scanFinite returns the first non-finite element of c's BF16, F16 and
// F32 tensors, in the checkpoint's name order, or nil. A value is
// non-finite when its exponent bits are all ones.
func scanFinite(ctx context.Context, dir string, c *hf.Checkpoint) error {
	for _, name := range c.Names() {
		info, _ := c.Info(name)
		if info.DType != dtype.BF16 && info.DType != dtype.F16 && info.DType != dtype.F32 {
			continue
		}
		data, err := c.Bytes(name)
		if err != nil {
			return fmt.Errorf("model: %w", err)
		}
		for lo := 0; lo < len(data); lo += scanChunk {
			if ctx.Err() != nil {
				return nil
			}
			chunk := data[lo:min(lo+scanChunk, len(data))]
			var i int
			switch info.DType {
			case dtype.BF16:
				i = firstExpAllOnes16(asUint16(chunk), 0x7f80)
			case dtype.F16:
				i = firstExpAllOnes16(asUint16(chunk), 0x7c00)
			case dtype.F32:
				i = firstExpAllOnes32(asFloat32(chunk))
			}
			if i < 0 {
				continue
			}
			size := info.DType.Size()
			var v [1]float32
			_ = dtype.ToFloat32(info.DType, chunk[i*size:(i+1)*size], v[:])
			return &NonFiniteError{Dir: dir, Tensor: name, Index: lo/size + i, Value: float64(v[0])}
		}
	}
	return nil
}

// firstExpAllOnes16 is the index of the first 16-bit value whose exponent
// (mask) is all ones, or −1.
func firstExpAllOnes16(x []uint16, mask uint16) int {
	for i, u := range x {
		if u&mask == mask {
			return i
		}
	}
	return -1
}

// firstExpAllOnes32 is the index of the first float32 that is NaN or
// infinite, or −1.
func firstExpAllOnes32(x []float32) int {
	for i, f := range x {
		if math.Float32bits(f)&0x7f800000 == 0x7f800000 {
			return i
		}
	}
	return -1
}
