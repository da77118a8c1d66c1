//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 lanes of the batched BF16 product: four rows of W against
// four inputs at once, so that each widened row and each loaded input
// serves four fused multiply-adds instead of one. A zmm accumulator holds
// the 16 lanes of one (row, input) dot, lanes 0-7 and 8-15 being what the
// AVX2 kernels keep in their two ymm accumulators: element i of the
// 16-aligned part is fused into lane i%16, in increasing i, so every lane
// takes the roundings of dotBF16Go. The caller reduces the lanes (reduce16)
// and adds the tail.

// R4B4STEP fuses the widened row wr times inputs x0-x3 into the four
// accumulators of that row.
#define R4B4STEP(wr, a0, a1, a2, a3) \
	VFMADD231PS Z20, wr, a0; \
	VFMADD231PS Z21, wr, a1; \
	VFMADD231PS Z22, wr, a2; \
	VFMADD231PS Z23, wr, a3

// func dotBF16r4b4AVX512(acc *[16][16]float32, w []uint16, ws int, x []float32, xs int, n int)
//
// acc[4r+b] = the 16 lane sums of row r (w[r·ws:]) against input b
// (x[b·xs:]) over the first n elements, n a multiple of 16.
TEXT ·dotBF16r4b4AVX512(SB), NOSPLIT, $0-80
	MOVQ w_base+8(FP), SI
	MOVQ ws+32(FP), BX
	SHLQ $1, BX             // row stride in bytes
	LEAQ (SI)(BX*1), R11    // row 1
	LEAQ (SI)(BX*2), R12    // row 2
	LEAQ (R11)(BX*2), R13   // row 3
	MOVQ x_base+40(FP), DX
	MOVQ xs+64(FP), BX
	SHLQ $2, BX             // input stride in bytes
	LEAQ (DX)(BX*1), R8     // input 1
	LEAQ (DX)(BX*2), R9     // input 2
	LEAQ (R8)(BX*2), R10    // input 3
	MOVQ n+72(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	XORQ   AX, AX
	TESTQ  CX, CX
	JZ     done

loop:
	VPMOVZXWD (SI)(AX*2), Z16
	VPMOVZXWD (R11)(AX*2), Z17
	VPMOVZXWD (R12)(AX*2), Z18
	VPMOVZXWD (R13)(AX*2), Z19
	VPSLLD    $16, Z16, Z16
	VPSLLD    $16, Z17, Z17
	VPSLLD    $16, Z18, Z18
	VPSLLD    $16, Z19, Z19
	VMOVUPS   (DX)(AX*4), Z20
	VMOVUPS   (R8)(AX*4), Z21
	VMOVUPS   (R9)(AX*4), Z22
	VMOVUPS   (R10)(AX*4), Z23
	R4B4STEP(Z16, Z0, Z1, Z2, Z3)
	R4B4STEP(Z17, Z4, Z5, Z6, Z7)
	R4B4STEP(Z18, Z8, Z9, Z10, Z11)
	R4B4STEP(Z19, Z12, Z13, Z14, Z15)
	ADDQ      $16, AX
	CMPQ      AX, CX
	JB        loop

done:
	MOVQ    acc+0(FP), DI
	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, 256(DI)
	VMOVUPS Z5, 320(DI)
	VMOVUPS Z6, 384(DI)
	VMOVUPS Z7, 448(DI)
	VMOVUPS Z8, 512(DI)
	VMOVUPS Z9, 576(DI)
	VMOVUPS Z10, 640(DI)
	VMOVUPS Z11, 704(DI)
	VMOVUPS Z12, 768(DI)
	VMOVUPS Z13, 832(DI)
	VMOVUPS Z14, 896(DI)
	VMOVUPS Z15, 960(DI)
	VZEROUPPER
	RET
