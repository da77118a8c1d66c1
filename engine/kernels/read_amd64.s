//go:build amd64 && !purego

#include "textflag.h"

// func readXorAVX(p *byte, n int) uint64
// XOR of the n bytes at p as little-endian 64-bit words; n is a multiple
// of 128. Four independent 32-byte streams per iteration keep enough loads
// in flight that the loop runs at the memory's read rate.
TEXT ·readXorAVX(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	SHRQ $7, CX
	JZ   fold

loop:
	VPXOR (SI), Y0, Y0
	VPXOR 32(SI), Y1, Y1
	VPXOR 64(SI), Y2, Y2
	VPXOR 96(SI), Y3, Y3
	ADDQ  $128, SI
	DECQ  CX
	JNZ   loop

fold:
	VPXOR        Y1, Y0, Y0
	VPXOR        Y3, Y2, Y2
	VPXOR        Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPXOR        X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPXOR        X1, X0, X0
	MOVQ         X0, AX
	MOVQ         AX, ret+16(FP)
	VZEROUPPER
	RET
