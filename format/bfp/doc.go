// Package bfp is lfmq's codec for Tenstorrent block floating point,
// BFP8_b and BFP4_b, bit-exact with the tt-metal host packer as the
// project's page docs/bfp.md states it: the bytes it produces are the
// bytes ttnn.from_torch(w, dtype=bfloat8_b|bfloat4_b, layout=TILE) produces.
//
// # Layers
//
//   - Values and groups: SharedExponent, EncodeValue, DecodeValue,
//     QuantizeGroup, DequantizeGroup and Step work on one 16-element group
//     that shares an 8-bit exponent (docs/bfp.md, "Encoding", "Decoding" and "Special inputs").
//   - Tiles: EncodeTile, EncodeTileBits and DecodeTile convert one 32×32
//     row-major tile to and from its 1088-byte (BFP8) or 576-byte (BFP4)
//     encoding: 64 exponent bytes, then the codes of four 16×16 faces
//     (docs/lfmq-1.md, "The bytes of one tile"). GroupLane and GroupOrigin give the layout.
//   - Matrices: PackMatrix, PackMatrixBF16 and UnpackMatrix store a Hugging
//     Face weight [out, in] in the lfmq-1 convention, ttnn's matmul operand
//     Wᵀ [in, out] zero-padded to multiples of 32 in row-major tile order
//     (docs/lfmq-1.md, "How a BFP tensor is stored"). TileOf and Element
//     map weight indices to tile positions and back; NumTiles and
//     PackedSize give sizes; Canonical checks that stored bytes are
//     exactly the plain packer's output.
//   - Rows, for GPTQ (docs/gptq.md §1): EncodeRow and DecodeRow quantize one row
//     of Wᵀ (one input index) into per-group exponents and codes; a Builder
//     assembles rows, in any order, into the packed tile stream.
//   - Exponent rules: RuleMax is the plain packer; RuleSearch is tt-metal's
//     optional exponent search (E_max − 1 when it lowers the group's
//     squared error). SearchGroupExponent, EncodeGroupAt, GroupSqError,
//     EncodeTileRule, PackMatrixRule and EncodeRowRule apply them.
//
// # Exactness
//
// Encoding uses integer arithmetic on fp32 bit patterns only, including
// the truncating shift of
// docs/bfp.md, "When the truncating shift matters" that makes the rule
// differ from exact round-half-even for some fp32 inputs; BF16 inputs
// are widened exactly first. Decoding is exact: every finite BFP value
// is a float32 (a subnormal one when the exponent is below 7 for BFP8 or
// 3 for BFP4). Zero and subnormal inputs flush to code 0 and never raise
// an exponent; ±Inf and NaN get the codes and exponent 255 that tt-metal
// gives them (docs/bfp.md, "Special inputs").
//
// # What it is not
//
// The package does not read or write files (safetensors and the lfmq-1
// layout live elsewhere in format), does not refuse NaN or Inf (that
// is lfmq quantize's policy, docs/bfp.md, "Special inputs"), does not
// implement GPTQ or its Hessian-weighted exponent choice (package
// quant/gptq), does not parallelise, and has no fast matmul kernels
// (package engine decodes groups itself, with Step). Only 32×32 tiles
// and the "_b" (8-bit exponent) formats are supported.
package bfp
