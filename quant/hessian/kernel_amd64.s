//go:build amd64 && !purego

#include "textflag.h"

// STEP adds to the sums s0, s1 of one block row the chunk row's values
// y0, y1 times the row's weight at wa, broadcast into w; p0, p1 hold the
// rounded products (separate multiply and add: never FMA).
#define STEP(wa, y0, y1, w, p0, p1, s0, s1) \
	VBROADCASTSD wa, w; \
	VMULPD       y0, w, p0; \
	VMULPD       y1, w, p1; \
	VADDPD       p0, s0, s0; \
	VADDPD       p1, s1, s1

// ADDS adds the sums s0, s1 to the block row at sa (its two halves h
// bytes apart) and stores them there: S += acc, one rounded add each.
#define ADDS(sa, sb, s0, s1) \
	VADDPD  sa, s0, s0; \
	VMOVUPD s0, sa; \
	VADDPD  sb, s1, s1; \
	VMOVUPD s1, sb

// func block4x8SAVX(s *float64, ss int, w *float64, ws int, y *float64, chunks, n int)
//
// block4SGo with 8 columns on AVX2. For each chunk: the sums start at +0;
// for each of its n rows t, the row's 8 values y[t·8:][:8] in two
// registers, each of the four weights w[a·ws+t] broadcast, acc[a] += w·y
// as VMULPD then VADDPD; then s[a·ss:][:8] += acc[a]. Every lane is one
// of the Go kernel's sums, in its order: the same bits.
//
// Registers: DI &s, R8 ss bytes, R13 3·ss bytes, AX &w[t] (row 0), R9 ws
// bytes, R12 3·ws bytes, BX &y[t·8], R10 chunks left, R11 n, CX rows left
// in the chunk; Y0-Y7 acc[a] columns 0-3 and 4-7 in Y(2a), Y(2a+1);
// Y8/Y9 the row; Y10 the broadcast weight; Y11/Y12 products.
TEXT ·block4x8SAVX(SB), NOSPLIT, $0-56
	MOVQ s+0(FP), DI
	MOVQ ss+8(FP), R8
	SHLQ $3, R8
	LEAQ (R8)(R8*2), R13
	MOVQ w+16(FP), AX
	MOVQ ws+24(FP), R9
	SHLQ $3, R9
	LEAQ (R9)(R9*2), R12
	MOVQ y+32(FP), BX
	MOVQ chunks+40(FP), R10
	MOVQ n+48(FP), R11

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
	STEP((AX)(R9*1), Y8, Y9, Y10, Y11, Y12, Y2, Y3)
	STEP((AX)(R9*2), Y8, Y9, Y10, Y11, Y12, Y4, Y5)
	STEP((AX)(R12*1), Y8, Y9, Y10, Y11, Y12, Y6, Y7)
	ADDQ    $8, AX
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

// func block4x16SAVX512(s *float64, ss int, w *float64, ws int, y *float64, chunks, n int)
//
// block4x8SAVX with 16 columns in 512-bit registers: Z0-Z7 acc[a] columns
// 0-7 and 8-15 in Z(2a), Z(2a+1); the row of y is 16 values (128 bytes).
TEXT ·block4x16SAVX512(SB), NOSPLIT, $0-56
	MOVQ s+0(FP), DI
	MOVQ ss+8(FP), R8
	SHLQ $3, R8
	LEAQ (R8)(R8*2), R13
	MOVQ w+16(FP), AX
	MOVQ ws+24(FP), R9
	SHLQ $3, R9
	LEAQ (R9)(R9*2), R12
	MOVQ y+32(FP), BX
	MOVQ chunks+40(FP), R10
	MOVQ n+48(FP), R11

chunk16:
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPXORQ Z6, Z6, Z6
	VPXORQ Z7, Z7, Z7
	MOVQ   R11, CX

loop16:
	VMOVUPD (BX), Z8
	VMOVUPD 64(BX), Z9
	STEP((AX), Z8, Z9, Z10, Z11, Z12, Z0, Z1)
	STEP((AX)(R9*1), Z8, Z9, Z10, Z11, Z12, Z2, Z3)
	STEP((AX)(R9*2), Z8, Z9, Z10, Z11, Z12, Z4, Z5)
	STEP((AX)(R12*1), Z8, Z9, Z10, Z11, Z12, Z6, Z7)
	ADDQ    $8, AX
	ADDQ    $128, BX
	DECQ    CX
	JNZ     loop16

	ADDS((DI), 64(DI), Z0, Z1)
	ADDS((DI)(R8*1), 64(DI)(R8*1), Z2, Z3)
	ADDS((DI)(R8*2), 64(DI)(R8*2), Z4, Z5)
	ADDS((DI)(R13*1), 64(DI)(R13*1), Z6, Z7)
	DECQ R10
	JNZ  chunk16
	VZEROUPPER
	RET
