//go:build amd64 && !purego

#include "textflag.h"

// STEP adds to the sums s0, s1 of one block row a the row's values y0, y1
// times a's weight, which lies at off(SI) (a·ChunkRows·8 bytes on) and is
// broadcast into w; p0, p1 hold the rounded products.
#define STEP(off, y0, y1, w, p0, p1, s0, s1) \
	VBROADCASTSD off(SI), w; \
	VMULPD       y0, w, p0; \
	VMULPD       y1, w, p1; \
	VADDPD       p0, s0, s0; \
	VADDPD       p1, s1, s1

// func block4x8AVX(acc *[4][16]float64, w, y *float64, ys, n int)
//
// block4Go with 8 columns on AVX2: for each t, the row's 8 values y[t·ys:][:8] in two
// registers, each of the four weights w[a·ChunkRows+t] broadcast, and
// acc[a] += w·y as VMULPD then VADDPD. Every lane is one of the Go
// kernel's sums, in its order: the same bits. Eight independent sums per
// t keep both FP ports busy past the adds' latency.
//
// Registers: SI &w[t], DX &y[t·ys], BX ys in bytes, CX t left; Y0-Y7
// acc[a] columns 0-3 and 4-7 in Y(2a), Y(2a+1); Y8/Y9 the row; Y10 the
// broadcast weight; Y11/Y12 products.
TEXT ·block4x8AVX(SB), NOSPLIT, $0-40
	MOVQ   w+8(FP), SI
	MOVQ   y+16(FP), DX
	MOVQ   ys+24(FP), BX
	SHLQ   $3, BX
	MOVQ   n+32(FP), CX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7

loop:
	VMOVUPD      (DX), Y8
	VMOVUPD      32(DX), Y9
	STEP(0, Y8, Y9, Y10, Y11, Y12, Y0, Y1)
	STEP(512, Y8, Y9, Y10, Y11, Y12, Y2, Y3)
	STEP(1024, Y8, Y9, Y10, Y11, Y12, Y4, Y5)
	STEP(1536, Y8, Y9, Y10, Y11, Y12, Y6, Y7)
	ADDQ         $8, SI
	ADDQ         BX, DX
	DECQ         CX
	JNZ          loop

	MOVQ    acc+0(FP), DI
	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 128(DI)
	VMOVUPD Y3, 160(DI)
	VMOVUPD Y4, 256(DI)
	VMOVUPD Y5, 288(DI)
	VMOVUPD Y6, 384(DI)
	VMOVUPD Y7, 416(DI)
	VZEROUPPER
	RET

// func block4x16AVX512(acc *[4][16]float64, w, y *float64, ys, n int)
//
// block4Go with 16 columns on AVX-512: block4x8AVX with 512-bit registers,
// Z0-Z7 acc[a] columns 0-7 and 8-15 in Z(2a), Z(2a+1).
TEXT ·block4x16AVX512(SB), NOSPLIT, $0-40
	MOVQ   w+8(FP), SI
	MOVQ   y+16(FP), DX
	MOVQ   ys+24(FP), BX
	SHLQ   $3, BX
	MOVQ   n+32(FP), CX
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPXORQ Z6, Z6, Z6
	VPXORQ Z7, Z7, Z7

loop:
	VMOVUPD      (DX), Z8
	VMOVUPD      64(DX), Z9
	STEP(0, Z8, Z9, Z10, Z11, Z12, Z0, Z1)
	STEP(512, Z8, Z9, Z10, Z11, Z12, Z2, Z3)
	STEP(1024, Z8, Z9, Z10, Z11, Z12, Z4, Z5)
	STEP(1536, Z8, Z9, Z10, Z11, Z12, Z6, Z7)
	ADDQ         $8, SI
	ADDQ         BX, DX
	DECQ         CX
	JNZ          loop

	MOVQ    acc+0(FP), DI
	VMOVUPD Z0, (DI)
	VMOVUPD Z1, 64(DI)
	VMOVUPD Z2, 128(DI)
	VMOVUPD Z3, 192(DI)
	VMOVUPD Z4, 256(DI)
	VMOVUPD Z5, 320(DI)
	VMOVUPD Z6, 384(DI)
	VMOVUPD Z7, 448(DI)
	VZEROUPPER
	RET
