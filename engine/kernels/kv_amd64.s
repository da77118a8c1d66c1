//go:build amd64 && !purego

#include "textflag.h"

// func widenBF16RowsAVX(dst []float32, src []uint16, d, srcStride, rows int)
//
// Row r of src (d values from element r·srcStride) widened into dst[r·d:]:
// each bfloat16 zero-extended and shifted into a float32's high half, 16
// per iteration. d is a multiple of 16 and rows ≥ 1.
TEXT ·widenBF16RowsAVX(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ d+48(FP), CX
	MOVQ srcStride+56(FP), R9
	MOVQ rows+64(FP), DX
	SHLQ $1, R9            // source stride in bytes
	SHRQ $4, CX            // chunks of 16 per row

row:
	MOVQ SI, R10
	MOVQ CX, R11

chunk:
	VPMOVZXWD (R10), Y0
	VPMOVZXWD 16(R10), Y1
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	ADDQ      $32, R10
	ADDQ      $64, DI
	DECQ      R11
	JNE       chunk
	ADDQ      R9, SI
	DECQ      DX
	JNE       row
	VZEROUPPER
	RET

// func decodeBFP8RowsAVX(dst []float32, src []byte, groups, srcStride, rows int, scale *[256]float32) int
//
// Each 17-byte group (exponent e, 16 codes) of each row becomes 16 floats:
// float(c & 0x7f) · scale[e], exact, with the code's sign bit set on the
// result's bits. groups ≥ 1 and rows ≥ 1. Returns 1 if some e was 255 (whose
// large magnitudes the caller decodes again), else 0.
TEXT ·decodeBFP8RowsAVX(SB), NOSPLIT, $0-88
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ groups+48(FP), CX
	MOVQ srcStride+56(FP), R9
	MOVQ rows+64(FP), DX
	MOVQ scale+72(FP), R8
	XORQ BX, BX
	MOVL $0x7f, AX
	VMOVD AX, X6
	VPBROADCASTD X6, Y6    // magnitude mask
	MOVL $0x80000000, AX
	VMOVD AX, X7
	VPBROADCASTD X7, Y7    // float sign bit

row8:
	MOVQ SI, R10
	MOVQ CX, R11

group8:
	MOVBLZX      (R10), AX
	CMPL         AX, $255
	JNE          finite
	MOVQ         $1, BX

finite:
	VBROADCASTSS (R8)(AX*4), Y5
	VPMOVZXBD    1(R10), Y0
	VPMOVZXBD    9(R10), Y1
	VPAND        Y6, Y0, Y2
	VPAND        Y6, Y1, Y3
	VCVTDQ2PS    Y2, Y2
	VCVTDQ2PS    Y3, Y3
	VMULPS       Y5, Y2, Y2
	VMULPS       Y5, Y3, Y3
	VPSLLD       $24, Y0, Y0
	VPSLLD       $24, Y1, Y1
	VPAND        Y7, Y0, Y0
	VPAND        Y7, Y1, Y1
	VPOR         Y0, Y2, Y2
	VPOR         Y1, Y3, Y3
	VMOVUPS      Y2, (DI)
	VMOVUPS      Y3, 32(DI)
	ADDQ         $17, R10
	ADDQ         $64, DI
	DECQ         R11
	JNE          group8
	ADDQ         R9, SI
	DECQ         DX
	JNE          row8
	VZEROUPPER
	MOVQ         BX, ret+80(FP)
	RET
