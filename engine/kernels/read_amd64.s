//go:build amd64 && !purego

#include "textflag.h"

// func readXorAVX(p *byte, n int) uint64
// XOR of the n bytes at p as little-endian 64-bit words; n is a multiple
// of 256. The buffer is read as four streams, one per quarter, 64 bytes of
// each per iteration: a core keeps more lines in flight over several
// streams than over one (the hardware prefetchers track each), so the loop
// runs at the memory's read rate rather than at one stream's.
TEXT ·readXorAVX(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	SHRQ  $2, CX               // a quarter
	LEAQ  (SI)(CX*1), DI
	LEAQ  (DI)(CX*1), R8
	LEAQ  (R8)(CX*1), R9
	SHRQ  $6, CX
	JZ    fold

loop:
	VPXOR (SI), Y0, Y0
	VPXOR 32(SI), Y1, Y1
	VPXOR (DI), Y2, Y2
	VPXOR 32(DI), Y3, Y3
	VPXOR (R8), Y0, Y0
	VPXOR 32(R8), Y1, Y1
	VPXOR (R9), Y2, Y2
	VPXOR 32(R9), Y3, Y3
	ADDQ  $64, SI
	ADDQ  $64, DI
	ADDQ  $64, R8
	ADDQ  $64, R9
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
