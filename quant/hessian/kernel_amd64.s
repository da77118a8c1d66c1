//go:build amd64 && !purego

#include "textflag.h"

// STEP adds to the sums s0, s1 of one block row the chunk row's values
// y0, y1 times the row's weighted value at wa, broadcast into w; p0, p1
// hold the rounded products (separate multiply and add: never FMA).
#define STEP(wa, y0, y1, w, p0, p1, s0, s1) \
	VBROADCASTSD wa, w; \
	VMULPD       y0, w, p0; \
	VMULPD       y1, w, p1; \
	VADDPD       p0, s0, s0; \
	VADDPD       p1, s1, s1

// ADDS adds the sums s0, s1 to the block row at sa, sb (its two halves)
// and stores them there: S += acc, one rounded add each.
#define ADDS(sa, sb, s0, s1) \
	VADDPD  sa, s0, s0; \
	VMOVUPD s0, sa; \
	VADDPD  sb, s1, s1; \
	VMOVUPD s1, sb

// func block4x8SAVX(s *float64, ss int, a *float64, y *float64, chunks, n int)
//
// blockSumGo with 8 columns on AVX2, for the four rows whose values are
// a[t·8+r], r < 4. For each chunk: the sums start at +0; for each of its
// n rows t, the row's 8 values y[t·8:][:8] in two registers, each of the
// four values a[t·8+r] broadcast, acc[r] += a·y as VMULPD then VADDPD;
// then s[r·ss:][:8] += acc[r]. Every lane is one of the Go kernel's sums,
// in its order: the same bits.
//
// Registers: DI &s, R8 ss bytes, R13 3·ss bytes, AX &a[t·8], BX &y[t·8],
// R10 chunks left, R11 n, CX rows left in the chunk; Y0-Y7 acc[r]
// columns 0-3 and 4-7 in Y(2r), Y(2r+1); Y8/Y9 the row; Y10 the
// broadcast value; Y11/Y12 products.
TEXT ·block4x8SAVX(SB), NOSPLIT, $0-48
	MOVQ s+0(FP), DI
	MOVQ ss+8(FP), R8
	SHLQ $3, R8
	LEAQ (R8)(R8*2), R13
	MOVQ a+16(FP), AX
	MOVQ y+24(FP), BX
	MOVQ chunks+32(FP), R10
	MOVQ n+40(FP), R11

chunk8:
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7
	MOVQ   R11, CX

loop8:
	VMOVUPD (BX), Y8
	VMOVUPD 32(BX), Y9
	STEP((AX), Y8, Y9, Y10, Y11, Y12, Y0, Y1)
	STEP(8(AX), Y8, Y9, Y10, Y11, Y12, Y2, Y3)
	STEP(16(AX), Y8, Y9, Y10, Y11, Y12, Y4, Y5)
	STEP(24(AX), Y8, Y9, Y10, Y11, Y12, Y6, Y7)
	ADDQ    $64, AX
	ADDQ    $64, BX
	DECQ    CX
	JNZ     loop8

	ADDS((DI), 32(DI), Y0, Y1)
	ADDS((DI)(R8*1), 32(DI)(R8*1), Y2, Y3)
	ADDS((DI)(R8*2), 32(DI)(R8*2), Y4, Y5)
	ADDS((DI)(R13*1), 32(DI)(R13*1), Y6, Y7)
	DECQ R10
	JNZ  chunk8
	VZEROUPPER
	RET

// func block8x16SAVX512(s *float64, ss int, a *float64, y *float64, chunks, n int)
//
// block4x8SAVX with 8 rows and 16 columns in 512-bit registers: the row of
// y is 16 values (128 bytes), the eight values a[t·8:][:8] one cache line.
// Each row's sums are updated once per 8 rows' worth of multiplies, well
// past the add's latency, and two multiplies and two adds issue per cycle
// on cores with two 512-bit pipes of each.
//
// Registers: DI &s (rows 0-3), SI &s + 4·ss (rows 4-7), R8 ss bytes, R13
// 3·ss bytes, AX &a[t·8], BX &y[t·16], R10 chunks left, R11 n, CX rows
// left in the chunk; Z0-Z15 acc[r] columns 0-7 and 8-15 in Z(2r),
// Z(2r+1); Z16/Z17 the row; Z18/Z19 broadcast values; Z20-Z23 products.
TEXT ·block8x16SAVX512(SB), NOSPLIT, $0-48
	MOVQ s+0(FP), DI
	MOVQ ss+8(FP), R8
	SHLQ $3, R8
	LEAQ (R8)(R8*2), R13
	LEAQ (DI)(R8*4), SI
	MOVQ a+16(FP), AX
	MOVQ y+24(FP), BX
	MOVQ chunks+32(FP), R10
	MOVQ n+40(FP), R11

chunk16:
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPXORQ Z6, Z6, Z6
	VPXORQ Z7, Z7, Z7
	VPXORQ Z8, Z8, Z8
	VPXORQ Z9, Z9, Z9
	VPXORQ Z10, Z10, Z10
	VPXORQ Z11, Z11, Z11
	VPXORQ Z12, Z12, Z12
	VPXORQ Z13, Z13, Z13
	VPXORQ Z14, Z14, Z14
	VPXORQ Z15, Z15, Z15
	MOVQ   R11, CX

loop16:
	VMOVUPD (BX), Z16
	VMOVUPD 64(BX), Z17
	STEP((AX), Z16, Z17, Z18, Z20, Z21, Z0, Z1)
	STEP(8(AX), Z16, Z17, Z19, Z22, Z23, Z2, Z3)
	STEP(16(AX), Z16, Z17, Z18, Z20, Z21, Z4, Z5)
	STEP(24(AX), Z16, Z17, Z19, Z22, Z23, Z6, Z7)
	STEP(32(AX), Z16, Z17, Z18, Z20, Z21, Z8, Z9)
	STEP(40(AX), Z16, Z17, Z19, Z22, Z23, Z10, Z11)
	STEP(48(AX), Z16, Z17, Z18, Z20, Z21, Z12, Z13)
	STEP(56(AX), Z16, Z17, Z19, Z22, Z23, Z14, Z15)
	ADDQ    $64, AX
	ADDQ    $128, BX
	DECQ    CX
	JNZ     loop16

	ADDS((DI), 64(DI), Z0, Z1)
	ADDS((DI)(R8*1), 64(DI)(R8*1), Z2, Z3)
	ADDS((DI)(R8*2), 64(DI)(R8*2), Z4, Z5)
	ADDS((DI)(R13*1), 64(DI)(R13*1), Z6, Z7)
	ADDS((SI), 64(SI), Z8, Z9)
	ADDS((SI)(R8*1), 64(SI)(R8*1), Z10, Z11)
	ADDS((SI)(R8*2), 64(SI)(R8*2), Z12, Z13)
	ADDS((SI)(R13*1), 64(SI)(R13*1), Z14, Z15)
	DECQ R10
	JNZ  chunk16
	VZEROUPPER
	RET

// func widenPanelsAVX(b *float64, x *float32, xs, n, panels, cols int)
//
// widenPanelsGo on AVX2 for cols a multiple of 8: panel by panel, row by
// row, eight float32 values at a time widened exactly (VCVTPS2PD) and
// stored in order, so that b is written front to back.
//
// Registers: DI &b (advancing), SI &x[p·cols], BX &x[t·xs + p·cols], AX
// the eight values' address, R8 xs bytes, R9 n, R10 panels left, R11
// cols/8, R12 cols·4 (a panel's bytes in x), CX rows left, DX steps left.
TEXT ·widenPanelsAVX(SB), NOSPLIT, $0-48
	MOVQ b+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ xs+16(FP), R8
	SHLQ $2, R8
	MOVQ n+24(FP), R9
	MOVQ panels+32(FP), R10
	MOVQ cols+40(FP), R11
	MOVQ R11, R12
	SHLQ $2, R12
	SHRQ $3, R11

wpanel:
	MOVQ SI, BX
	MOVQ R9, CX

wrow:
	MOVQ BX, AX
	MOVQ R11, DX

wstep:
	VCVTPS2PD (AX), Y0
	VCVTPS2PD 16(AX), Y1
	VMOVUPD   Y0, (DI)
	VMOVUPD   Y1, 32(DI)
	ADDQ      $32, AX
	ADDQ      $64, DI
	DECQ      DX
	JNZ       wstep
	ADDQ      R8, BX
	DECQ      CX
	JNZ       wrow
	ADDQ      R12, SI
	DECQ      R10
	JNZ       wpanel
	VZEROUPPER
	RET

// func weightRowsAVX(a *float64, x *float32, xs int, w *float64, n int)
//
// weightRowsGo on AVX2: for t < n, the eight values x[t·xs:][:8] widened
// exactly and multiplied by the weight w[t] broadcast, a[t·8:][:8] = w·x,
// one rounded multiply each.
TEXT ·weightRowsAVX(SB), NOSPLIT, $0-40
	MOVQ a+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ xs+16(FP), R8
	SHLQ $2, R8
	MOVQ w+24(FP), DX
	MOVQ n+32(FP), CX

weight:
	VBROADCASTSD (DX), Y2
	VCVTPS2PD    (SI), Y0
	VCVTPS2PD    16(SI), Y1
	VMULPD       Y0, Y2, Y0
	VMULPD       Y1, Y2, Y1
	VMOVUPD      Y0, (DI)
	VMOVUPD      Y1, 32(DI)
	ADDQ         $8, DX
	ADDQ         R8, SI
	ADDQ         $64, DI
	DECQ         CX
	JNZ          weight
	VZEROUPPER
	RET
