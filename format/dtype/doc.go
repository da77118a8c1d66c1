// Package dtype names the element types of safetensors files and converts
// tensor bytes between them and float32.
//
// It knows every dtype name that the safetensors format defines, so that a
// header can be validated against the full list, but converts only the five
// that lfmq reads or writes: BF16, F16, F32, I32 and U8. Decoding is exact for
// all five (BF16 and F16 widen exactly to float32; I32 values beyond ±2^24
// round to the nearest float32); encoding to BF16 and F16 rounds to nearest,
// ties to even, and keeps NaNs NaN. F16 arithmetic comes from
// github.com/x448/float16.
//
// All multi-byte encodings are little-endian, as safetensors stores them,
// whatever the host's byte order.
//
// Package dtype is not a tensor library: it holds no shapes, does no
// arithmetic beyond conversion, and knows nothing of the block-floating-point
// formats (BFP8/BFP4), which are stored as U8 bytes and belong to their own
// codec.
package dtype
