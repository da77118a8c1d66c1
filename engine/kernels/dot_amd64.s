//go:build amd64 && !purego

#include "textflag.h"

// Dot-product kernels for F32 and BF16 rows, AVX2 + FMA. Each output keeps
// the canonical order of ref.go: 16 lanes in two ymm accumulators (lanes 0-7
// and 8-15), element i of the 16-aligned part fused into lane i%16, the tree
// REDUCE16, then the tail fused into the scalar in increasing i. Every
// instruction is VEX-encoded (no SSE/AVX transition penalty) and VZEROUPPER
// precedes each return.

// REDUCE16 sums lanes ya (0-7) and yb (8-15) into lane 0 of xa: j+8, j+4, j+2,
// then 0+1 — the order of reduce16 in ref.go.
#define REDUCE16(ya, yb, xa, xt) \
	VADDPS       yb, ya, ya; \
	VEXTRACTF128 $1, ya, xt; \
	VADDPS       xt, xa, xa; \
	VMOVHLPS     xa, xa, xt; \
	VADDPS       xt, xa, xa; \
	VMOVSHDUP    xa, xt; \
	VADDSS       xt, xa, xa

// WIDEN8 loads 8 bf16 values from mem and widens them exactly to float32.
#define WIDEN8(mem, y) \
	VPMOVZXWD mem, y; \
	VPSLLD    $16, y, y

// BF16SCALAR loads bf16 value (base)(idx*2) into lane 0 of x as a float32.
#define BF16SCALAR(base, idx, x) \
	MOVWLZX (base)(idx*2), R12; \
	SHLL    $16, R12; \
	VMOVD   R12, x

// func dotF32AVX(w, x []float32) float32
TEXT ·dotF32AVX(SB), NOSPLIT, $0-52
	MOVQ   w_base+0(FP), SI
	MOVQ   w_len+8(FP), CX
	MOVQ   x_base+24(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	MOVQ   CX, BX
	ANDQ   $-16, BX
	XORQ   AX, AX
	JMP    check

loop:
	VMOVUPS     (SI)(AX*4), Y2
	VMOVUPS     32(SI)(AX*4), Y3
	VFMADD231PS (DX)(AX*4), Y2, Y0
	VFMADD231PS 32(DX)(AX*4), Y3, Y1
	ADDQ        $16, AX

check:
	CMPQ AX, BX
	JB   loop
	REDUCE16(Y0, Y1, X0, X2)
	JMP  tcheck

tail:
	VMOVSS      (SI)(AX*4), X2
	VFMADD231SS (DX)(AX*4), X2, X0
	INCQ        AX

tcheck:
	CMPQ       AX, CX
	JB         tail
	VMOVSS     X0, ret+48(FP)
	VZEROUPPER
	RET

// func dotBF16AVX(w []uint16, x []float32) float32
TEXT ·dotBF16AVX(SB), NOSPLIT, $0-52
	MOVQ   w_base+0(FP), SI
	MOVQ   w_len+8(FP), CX
	MOVQ   x_base+24(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	MOVQ   CX, BX
	ANDQ   $-16, BX
	XORQ   AX, AX
	JMP    check

loop:
	WIDEN8((SI)(AX*2), Y2)
	WIDEN8(16(SI)(AX*2), Y3)
	VFMADD231PS (DX)(AX*4), Y2, Y0
	VFMADD231PS 32(DX)(AX*4), Y3, Y1
	ADDQ        $16, AX

check:
	CMPQ AX, BX
	JB   loop
	REDUCE16(Y0, Y1, X0, X2)
	JMP  tcheck

tail:
	BF16SCALAR(SI, AX, X2)
	VFMADD231SS (DX)(AX*4), X2, X0
	INCQ        AX

tcheck:
	CMPQ       AX, CX
	JB         tail
	VMOVSS     X0, ret+48(FP)
	VZEROUPPER
	RET

// func dotF32x4AVX(dst *[4]float32, w []float32, stride int, x []float32)
TEXT ·dotF32x4AVX(SB), NOSPLIT, $0-64
	MOVQ   dst+0(FP), DI
	MOVQ   w_base+8(FP), SI
	MOVQ   stride+32(FP), BX
	MOVQ   x_base+40(FP), DX
	MOVQ   x_len+48(FP), CX
	SHLQ   $2, BX
	LEAQ   (SI)(BX*1), R8
	LEAQ   (SI)(BX*2), R9
	LEAQ   (R8)(BX*2), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ   CX, R11
	ANDQ   $-16, R11
	XORQ   AX, AX
	JMP    check

loop:
	VMOVUPS     (DX)(AX*4), Y8
	VMOVUPS     32(DX)(AX*4), Y9
	VFMADD231PS (SI)(AX*4), Y8, Y0
	VFMADD231PS 32(SI)(AX*4), Y9, Y1
	VFMADD231PS (R8)(AX*4), Y8, Y2
	VFMADD231PS 32(R8)(AX*4), Y9, Y3
	VFMADD231PS (R9)(AX*4), Y8, Y4
	VFMADD231PS 32(R9)(AX*4), Y9, Y5
	VFMADD231PS (R10)(AX*4), Y8, Y6
	VFMADD231PS 32(R10)(AX*4), Y9, Y7
	ADDQ        $16, AX

check:
	CMPQ AX, R11
	JB   loop
	REDUCE16(Y0, Y1, X0, X8)
	REDUCE16(Y2, Y3, X2, X8)
	REDUCE16(Y4, Y5, X4, X8)
	REDUCE16(Y6, Y7, X6, X8)
	JMP  tcheck

tail:
	VMOVSS      (DX)(AX*4), X8
	VFMADD231SS (SI)(AX*4), X8, X0
	VFMADD231SS (R8)(AX*4), X8, X2
	VFMADD231SS (R9)(AX*4), X8, X4
	VFMADD231SS (R10)(AX*4), X8, X6
	INCQ        AX

tcheck:
	CMPQ       AX, CX
	JB         tail
	VMOVSS     X0, (DI)
	VMOVSS     X2, 4(DI)
	VMOVSS     X4, 8(DI)
	VMOVSS     X6, 12(DI)
	VZEROUPPER
	RET

// func dotBF16x4AVX(dst *[4]float32, w []uint16, stride int, x []float32)
//
// Rows 8 to 11 on (R12-R15), those of the call after next when the caller
// walks a matrix four rows at a time, are prefetched into L2 as the loop
// goes: the hardware prefetchers alone leave a quarter of the memory's read
// rate unused (BenchmarkMatVecCold/bf16, bw_frac 0.72-0.87 -> 0.93-1.0 on
// one thread). Prefetches never fault, so rows past the matrix's end are
// harmless.
TEXT ·dotBF16x4AVX(SB), NOSPLIT, $0-64
	MOVQ   dst+0(FP), DI
	MOVQ   w_base+8(FP), SI
	MOVQ   stride+32(FP), BX
	MOVQ   x_base+40(FP), DX
	MOVQ   x_len+48(FP), CX
	SHLQ   $1, BX
	LEAQ   (SI)(BX*1), R8
	LEAQ   (SI)(BX*2), R9
	LEAQ   (R8)(BX*2), R10
	LEAQ   (SI)(BX*8), R12
	LEAQ   (R12)(BX*1), R13
	LEAQ   (R12)(BX*2), R14
	LEAQ   (R13)(BX*2), R15
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ   CX, R11
	ANDQ   $-16, R11
	XORQ   AX, AX
	JMP    check

loop:
	VMOVUPS     (DX)(AX*4), Y8
	VMOVUPS     32(DX)(AX*4), Y9
	WIDEN8((SI)(AX*2), Y10)
	WIDEN8(16(SI)(AX*2), Y11)
	WIDEN8((R8)(AX*2), Y12)
	WIDEN8(16(R8)(AX*2), Y13)
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y11, Y1
	VFMADD231PS Y8, Y12, Y2
	VFMADD231PS Y9, Y13, Y3
	WIDEN8((R9)(AX*2), Y10)
	WIDEN8(16(R9)(AX*2), Y11)
	WIDEN8((R10)(AX*2), Y12)
	WIDEN8(16(R10)(AX*2), Y13)
	VFMADD231PS Y8, Y10, Y4
	VFMADD231PS Y9, Y11, Y5
	VFMADD231PS Y8, Y12, Y6
	VFMADD231PS Y9, Y13, Y7
	PREFETCHT1 (R12)(AX*2)
	PREFETCHT1 (R13)(AX*2)
	PREFETCHT1 (R14)(AX*2)
	PREFETCHT1 (R15)(AX*2)
	ADDQ        $16, AX

check:
	CMPQ AX, R11
	JB   loop
	REDUCE16(Y0, Y1, X0, X8)
	REDUCE16(Y2, Y3, X2, X8)
	REDUCE16(Y4, Y5, X4, X8)
	REDUCE16(Y6, Y7, X6, X8)
	JMP  tcheck

tail:
	VMOVSS (DX)(AX*4), X8
	BF16SCALAR(SI, AX, X9)
	VFMADD231SS X8, X9, X0
	BF16SCALAR(R8, AX, X9)
	VFMADD231SS X8, X9, X2
	BF16SCALAR(R9, AX, X9)
	VFMADD231SS X8, X9, X4
	BF16SCALAR(R10, AX, X9)
	VFMADD231SS X8, X9, X6
	INCQ   AX

tcheck:
	CMPQ       AX, CX
	JB         tail
	VMOVSS     X0, (DI)
	VMOVSS     X2, 4(DI)
	VMOVSS     X4, 8(DI)
	VMOVSS     X6, 12(DI)
	VZEROUPPER
	RET

// func dotF32b4AVX(dst *[4]float32, w []float32, x []float32, xStride int)
TEXT ·dotF32b4AVX(SB), NOSPLIT, $0-64
	MOVQ   dst+0(FP), DI
	MOVQ   w_base+8(FP), SI
	MOVQ   w_len+16(FP), CX
	MOVQ   x_base+32(FP), DX
	MOVQ   xStride+56(FP), BX
	SHLQ   $2, BX
	LEAQ   (DX)(BX*1), R8
	LEAQ   (DX)(BX*2), R9
	LEAQ   (R8)(BX*2), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ   CX, R11
	ANDQ   $-16, R11
	XORQ   AX, AX
	JMP    check

loop:
	VMOVUPS     (SI)(AX*4), Y8
	VMOVUPS     32(SI)(AX*4), Y9
	VFMADD231PS (DX)(AX*4), Y8, Y0
	VFMADD231PS 32(DX)(AX*4), Y9, Y1
	VFMADD231PS (R8)(AX*4), Y8, Y2
	VFMADD231PS 32(R8)(AX*4), Y9, Y3
	VFMADD231PS (R9)(AX*4), Y8, Y4
	VFMADD231PS 32(R9)(AX*4), Y9, Y5
	VFMADD231PS (R10)(AX*4), Y8, Y6
	VFMADD231PS 32(R10)(AX*4), Y9, Y7
	ADDQ        $16, AX

check:
	CMPQ AX, R11
	JB   loop
	REDUCE16(Y0, Y1, X0, X8)
	REDUCE16(Y2, Y3, X2, X8)
	REDUCE16(Y4, Y5, X4, X8)
	REDUCE16(Y6, Y7, X6, X8)
	JMP  tcheck

tail:
	VMOVSS      (SI)(AX*4), X8
	VFMADD231SS (DX)(AX*4), X8, X0
	VFMADD231SS (R8)(AX*4), X8, X2
	VFMADD231SS (R9)(AX*4), X8, X4
	VFMADD231SS (R10)(AX*4), X8, X6
	INCQ        AX

tcheck:
	CMPQ       AX, CX
	JB         tail
	VMOVSS     X0, (DI)
	VMOVSS     X2, 4(DI)
	VMOVSS     X4, 8(DI)
	VMOVSS     X6, 12(DI)
	VZEROUPPER
	RET

// func dotBF16b4AVX(dst *[4]float32, w []uint16, x []float32, xStride int)
TEXT ·dotBF16b4AVX(SB), NOSPLIT, $0-64
	MOVQ   dst+0(FP), DI
	MOVQ   w_base+8(FP), SI
	MOVQ   w_len+16(FP), CX
	MOVQ   x_base+32(FP), DX
	MOVQ   xStride+56(FP), BX
	SHLQ   $2, BX
	LEAQ   (DX)(BX*1), R8
	LEAQ   (DX)(BX*2), R9
	LEAQ   (R8)(BX*2), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ   CX, R11
	ANDQ   $-16, R11
	XORQ   AX, AX
	JMP    check

loop:
	WIDEN8((SI)(AX*2), Y8)
	WIDEN8(16(SI)(AX*2), Y9)
	VFMADD231PS (DX)(AX*4), Y8, Y0
	VFMADD231PS 32(DX)(AX*4), Y9, Y1
	VFMADD231PS (R8)(AX*4), Y8, Y2
	VFMADD231PS 32(R8)(AX*4), Y9, Y3
	VFMADD231PS (R9)(AX*4), Y8, Y4
	VFMADD231PS 32(R9)(AX*4), Y9, Y5
	VFMADD231PS (R10)(AX*4), Y8, Y6
	VFMADD231PS 32(R10)(AX*4), Y9, Y7
	ADDQ        $16, AX

check:
	CMPQ AX, R11
	JB   loop
	REDUCE16(Y0, Y1, X0, X8)
	REDUCE16(Y2, Y3, X2, X8)
	REDUCE16(Y4, Y5, X4, X8)
	REDUCE16(Y6, Y7, X6, X8)
	JMP  tcheck

tail:
	BF16SCALAR(SI, AX, X8)
	VFMADD231SS (DX)(AX*4), X8, X0
	VFMADD231SS (R8)(AX*4), X8, X2
	VFMADD231SS (R9)(AX*4), X8, X4
	VFMADD231SS (R10)(AX*4), X8, X6
	INCQ        AX

tcheck:
	CMPQ       AX, CX
	JB         tail
	VMOVSS     X0, (DI)
	VMOVSS     X2, 4(DI)
	VMOVSS     X4, 8(DI)
	VMOVSS     X6, 12(DI)
	VZEROUPPER
	RET

// func attnScores4AVX(sc []float32, scStride int, keys []float32, keyStride, cnt int, q []float32, scale float32)
//
// For each of cnt keys (rows keyStride floats apart) the body of dotF32b4AVX
// against the four query heads of q (len(q)/4 floats each, a multiple of
// 16), each sum rounded, then multiplied by scale and stored at
// sc[g·scStride + j].
TEXT ·attnScores4AVX(SB), NOSPLIT, $0-100
	MOVQ         sc_base+0(FP), DI
	MOVQ         scStride+24(FP), R12
	SHLQ         $2, R12
	MOVQ         keys_base+32(FP), SI
	MOVQ         keyStride+56(FP), R13
	SHLQ         $2, R13
	MOVQ         cnt+64(FP), CX
	MOVQ         q_base+72(FP), DX
	MOVQ         q_len+80(FP), R11
	SHRQ         $2, R11           // d
	LEAQ         (DX)(R11*4), R8
	LEAQ         (R8)(R11*4), R9
	LEAQ         (R9)(R11*4), R10
	VBROADCASTSS scale+96(FP), Y15

key:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ   AX, AX

lanes:
	VMOVUPS     (SI)(AX*4), Y8
	VMOVUPS     32(SI)(AX*4), Y9
	VFMADD231PS (DX)(AX*4), Y8, Y0
	VFMADD231PS 32(DX)(AX*4), Y9, Y1
	VFMADD231PS (R8)(AX*4), Y8, Y2
	VFMADD231PS 32(R8)(AX*4), Y9, Y3
	VFMADD231PS (R9)(AX*4), Y8, Y4
	VFMADD231PS 32(R9)(AX*4), Y9, Y5
	VFMADD231PS (R10)(AX*4), Y8, Y6
	VFMADD231PS 32(R10)(AX*4), Y9, Y7
	ADDQ        $16, AX
	CMPQ        AX, R11
	JB          lanes
	REDUCE16(Y0, Y1, X0, X8)
	REDUCE16(Y2, Y3, X2, X8)
	REDUCE16(Y4, Y5, X4, X8)
	REDUCE16(Y6, Y7, X6, X8)
	VMULSS      X15, X0, X0
	VMULSS      X15, X2, X2
	VMULSS      X15, X4, X4
	VMULSS      X15, X6, X6
	LEAQ        (DI)(R12*2), R14
	VMOVSS      X0, (DI)
	VMOVSS      X2, (DI)(R12*1)
	VMOVSS      X4, (R14)
	VMOVSS      X6, (R14)(R12*1)
	ADDQ        $4, DI
	ADDQ        R13, SI
	DECQ        CX
	JNE         key
	VZEROUPPER
	RET
