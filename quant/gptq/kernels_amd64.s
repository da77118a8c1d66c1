//go:build amd64 && !purego

#include "textflag.h"

// AVX2 float64 kernels of the GPTQ solver (kernels.go). Products are
// VMULPD and sums VADDPD/VSUBPD, never a fused multiply-add, and every
// vector lane is one of the scalar sums of the Go kernels, in its order:
// the results are those of the Go kernels, bit for bit.

// func dotLanes4AVX(acc *[16]float64, a []float64, ao *[4]int, b []float64, bo *[4]int, quads int)
TEXT ·dotLanes4AVX(SB), NOSPLIT, $0-80
	MOVQ   a_base+8(FP), SI
	MOVQ   ao+32(FP), DI
	MOVQ   0(DI), R8
	LEAQ   (SI)(R8*8), R8
	MOVQ   8(DI), R9
	LEAQ   (SI)(R9*8), R9
	MOVQ   16(DI), R10
	LEAQ   (SI)(R10*8), R10
	MOVQ   24(DI), R11
	LEAQ   (SI)(R11*8), R11
	MOVQ   b_base+40(FP), SI
	MOVQ   bo+64(FP), DI
	MOVQ   0(DI), R12
	LEAQ   (SI)(R12*8), R12
	MOVQ   8(DI), R13
	LEAQ   (SI)(R13*8), R13
	MOVQ   16(DI), BX
	LEAQ   (SI)(BX*8), BX
	MOVQ   24(DI), DX
	LEAQ   (SI)(DX*8), DX
	MOVQ   quads+72(FP), CX
	SHLQ   $2, CX
	XORQ   AX, AX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3

dl4loop:
	VMOVUPD (R8)(AX*8), Y4
	VMULPD  (R12)(AX*8), Y4, Y4
	VADDPD  Y4, Y0, Y0
	VMOVUPD (R9)(AX*8), Y5
	VMULPD  (R13)(AX*8), Y5, Y5
	VADDPD  Y5, Y1, Y1
	VMOVUPD (R10)(AX*8), Y6
	VMULPD  (BX)(AX*8), Y6, Y6
	VADDPD  Y6, Y2, Y2
	VMOVUPD (R11)(AX*8), Y7
	VMULPD  (DX)(AX*8), Y7, Y7
	VADDPD  Y7, Y3, Y3
	ADDQ    $4, AX
	CMPQ    AX, CX
	JLT     dl4loop

	MOVQ    acc+0(FP), DI
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VZEROUPPER
	RET

// GRAMSTEP multiplies the broadcast of mem by Y8 (four interleaved values
// of g) into acc.
#define GRAMSTEP(mem, tmp, acc) \
	VBROADCASTSD mem, tmp; \
	VMULPD       Y8, tmp, tmp; \
	VADDPD       tmp, acc, acc

// func gram8AVX(x *[32]float64, g, p []float64, n int)
TEXT ·gram8AVX(SB), NOSPLIT, $0-64
	MOVQ   g_base+8(FP), SI
	MOVQ   p_base+32(FP), R8
	MOVQ   n+56(FP), CX
	MOVQ   CX, R9
	SHLQ   $5, R9
	ADDQ   R8, R9          // the second group of p
	MOVQ    x+0(FP), DI    // the sums so far
	VMOVUPD 0(DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
	VMOVUPD 128(DI), Y4
	VMOVUPD 160(DI), Y5
	VMOVUPD 192(DI), Y6
	VMOVUPD 224(DI), Y7

g8loop:
	VMOVUPD (SI), Y8
	GRAMSTEP(0(R8), Y9, Y0)
	GRAMSTEP(8(R8), Y10, Y1)
	GRAMSTEP(16(R8), Y11, Y2)
	GRAMSTEP(24(R8), Y12, Y3)
	GRAMSTEP(0(R9), Y13, Y4)
	GRAMSTEP(8(R9), Y14, Y5)
	GRAMSTEP(16(R9), Y15, Y6)
	GRAMSTEP(24(R9), Y9, Y7)
	ADDQ    $32, SI
	ADDQ    $32, R8
	ADDQ    $32, R9
	DECQ    CX
	JNZ     g8loop

	MOVQ    x+0(FP), DI
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VMOVUPD Y4, 128(DI)
	VMOVUPD Y5, 160(DI)
	VMOVUPD Y6, 192(DI)
	VMOVUPD Y7, 224(DI)
	VZEROUPPER
	RET

// UPDSTEP subtracts the broadcast of mem times Y8:Y9 (eight values of e)
// from accumulators lo:hi.
#define UPDSTEP(mem, lo, hi) \
	VBROADCASTSD mem, Y10; \
	VMULPD       Y8, Y10, Y11; \
	VSUBPD       Y11, lo, lo; \
	VMULPD       Y9, Y10, Y12; \
	VSUBPD       Y12, hi, hi

// func updateAVX(c []float64, cs int, up, ep []float64, bs, cols int)
TEXT ·updateAVX(SB), NOSPLIT, $0-96
	MOVQ c_base+0(FP), DI
	MOVQ cs+24(FP), R8
	SHLQ $3, R8            // row stride of c in bytes
	MOVQ ep_base+56(FP), DX // tiles follow each other
	MOVQ cols+88(FP), R11
	SHRQ $3, R11           // column tiles of eight
	LEAQ (R8)(R8*2), R13   // three rows of c

tile:
	// Rows 0-3 of c at this tile: Y0:Y1, Y2:Y3, Y4:Y5, Y6:Y7.
	VMOVUPD 0(DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 0(DI)(R8*1), Y2
	VMOVUPD 32(DI)(R8*1), Y3
	VMOVUPD 0(DI)(R8*2), Y4
	VMOVUPD 32(DI)(R8*2), Y5
	VMOVUPD 0(DI)(R13*1), Y6
	VMOVUPD 32(DI)(R13*1), Y7
	MOVQ    up_base+32(FP), SI
	MOVQ    bs+80(FP), CX

updloop:
	VMOVUPD 0(DX), Y8
	VMOVUPD 32(DX), Y9
	UPDSTEP(0(SI), Y0, Y1)
	UPDSTEP(8(SI), Y2, Y3)
	UPDSTEP(16(SI), Y4, Y5)
	UPDSTEP(24(SI), Y6, Y7)
	ADDQ    $64, DX
	ADDQ    $32, SI
	DECQ    CX
	JNZ     updloop

	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 0(DI)(R8*1)
	VMOVUPD Y3, 32(DI)(R8*1)
	VMOVUPD Y4, 0(DI)(R8*2)
	VMOVUPD Y5, 32(DI)(R8*2)
	VMOVUPD Y6, 0(DI)(R13*1)
	VMOVUPD Y7, 32(DI)(R13*1)
	ADDQ    $64, DI
	DECQ    R11
	JNZ     tile
	VZEROUPPER
	RET

// func subScaledAVX(dst []float64, a float64, x []float64)
TEXT ·subScaledAVX(SB), NOSPLIT, $0-56
	MOVQ         dst_base+0(FP), DI
	MOVQ         dst_len+8(FP), CX
	VBROADCASTSD a+24(FP), Y8
	MOVQ         x_base+32(FP), SI
	XORQ         AX, AX

ssloop:
	VMULPD  0(SI)(AX*8), Y8, Y0
	VMULPD  32(SI)(AX*8), Y8, Y1
	VMULPD  64(SI)(AX*8), Y8, Y2
	VMULPD  96(SI)(AX*8), Y8, Y3
	VMOVUPD 0(DI)(AX*8), Y4
	VMOVUPD 32(DI)(AX*8), Y5
	VMOVUPD 64(DI)(AX*8), Y6
	VMOVUPD 96(DI)(AX*8), Y7
	VSUBPD  Y0, Y4, Y4
	VSUBPD  Y1, Y5, Y5
	VSUBPD  Y2, Y6, Y6
	VSUBPD  Y3, Y7, Y7
	VMOVUPD Y4, 0(DI)(AX*8)
	VMOVUPD Y5, 32(DI)(AX*8)
	VMOVUPD Y6, 64(DI)(AX*8)
	VMOVUPD Y7, 96(DI)(AX*8)
	ADDQ    $16, AX
	CMPQ    AX, CX
	JLT     ssloop
	VZEROUPPER
	RET

// The AVX-512 Gram kernels below hold one output per lane as well, but
// with the eight columns of p across the lanes of a register (the four of
// the first group, then the four of the second) and one register per row
// of g, whose value at t is a broadcast (VMULPD.BCST): each register is
// eight of the Go kernel's running sums, and the caller transposes them.
// The p register at t is built from the two groups' four values with
// VINSERTF64X4 (from Y15, so that AVX-512 F is all they need).

// G512STEP multiplies the broadcast of mem by Z16 (eight values of p) into
// acc.
#define G512STEP(mem, tmp, acc) \
	VMULPD.BCST mem, Z16, tmp; \
	VADDPD      tmp, acc, acc

// func gram8AVX512(x *[32]float64, g, p []float64, n int)
//
// gram8Go with x[8a+b] for x[4b+a].
TEXT ·gram8AVX512(SB), NOSPLIT, $0-64
	MOVQ   g_base+8(FP), SI
	MOVQ   p_base+32(FP), R8
	MOVQ   n+56(FP), CX
	MOVQ   CX, R9
	SHLQ   $5, R9
	ADDQ   R8, R9          // the second group of p
	MOVQ    x+0(FP), DI    // the sums so far
	VMOVUPD 0(DI), Z0
	VMOVUPD 64(DI), Z1
	VMOVUPD 128(DI), Z2
	VMOVUPD 192(DI), Z3

g512loop:
	VMOVUPD      (R8), Y15
	VINSERTF64X4 $1, (R9), Z15, Z16
	G512STEP(0(SI), Z17, Z0)
	G512STEP(8(SI), Z18, Z1)
	G512STEP(16(SI), Z19, Z2)
	G512STEP(24(SI), Z20, Z3)
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $32, R9
	DECQ CX
	JNZ  g512loop

	MOVQ    x+0(FP), DI
	VMOVUPD Z0, 0(DI)
	VMOVUPD Z1, 64(DI)
	VMOVUPD Z2, 128(DI)
	VMOVUPD Z3, 192(DI)
	VZEROUPPER
	RET

// func gram16AVX512(x *[64]float64, g, p []float64, n int)
//
// gram16Go with x[8a+b] for x[32(a/4) + 4b + a%4]: the two groups of g
// (rows a = 0-3, then 4-7) against the same eight columns of p.
TEXT ·gram16AVX512(SB), NOSPLIT, $0-64
	MOVQ   g_base+8(FP), SI
	MOVQ   p_base+32(FP), R8
	MOVQ   n+56(FP), CX
	MOVQ   CX, R9
	SHLQ   $5, R9
	LEAQ   (SI)(R9*1), R10 // the second group of g
	ADDQ   R8, R9          // the second group of p
	MOVQ    x+0(FP), DI    // the sums so far
	VMOVUPD 0(DI), Z0
	VMOVUPD 64(DI), Z1
	VMOVUPD 128(DI), Z2
	VMOVUPD 192(DI), Z3
	VMOVUPD 256(DI), Z4
	VMOVUPD 320(DI), Z5
	VMOVUPD 384(DI), Z6
	VMOVUPD 448(DI), Z7

g16loop:
	VMOVUPD      (R8), Y15
	VINSERTF64X4 $1, (R9), Z15, Z16
	G512STEP(0(SI), Z17, Z0)
	G512STEP(8(SI), Z18, Z1)
	G512STEP(16(SI), Z19, Z2)
	G512STEP(24(SI), Z20, Z3)
	G512STEP(0(R10), Z21, Z4)
	G512STEP(8(R10), Z22, Z5)
	G512STEP(16(R10), Z23, Z6)
	G512STEP(24(R10), Z24, Z7)
	ADDQ $32, SI
	ADDQ $32, R10
	ADDQ $32, R8
	ADDQ $32, R9
	DECQ CX
	JNZ  g16loop

	MOVQ    x+0(FP), DI
	VMOVUPD Z0, 0(DI)
	VMOVUPD Z1, 64(DI)
	VMOVUPD Z2, 128(DI)
	VMOVUPD Z3, 192(DI)
	VMOVUPD Z4, 256(DI)
	VMOVUPD Z5, 320(DI)
	VMOVUPD Z6, 384(DI)
	VMOVUPD Z7, 448(DI)
	VZEROUPPER
	RET

// updateAVX512 is updateAVX with a register per row and tile of eight
// columns where updateAVX has two: each lane is still one element of c,
// taking one rounded product and one rounded subtraction per row of e, in
// order.

// U512STEP subtracts bcast times Z8 and Z9 (a row of e in two tiles) from
// accumulators lo and hi.
#define U512STEP(bcast, lo, hi, t0, t1) \
	VMULPD Z8, bcast, t0; \
	VSUBPD t0, lo, lo;    \
	VMULPD Z9, bcast, t1; \
	VSUBPD t1, hi, hi

// func updateAVX512(c []float64, cs int, up, ep []float64, bs, cols int)
//
// Two tiles of eight columns at a time: eight independent accumulators,
// so that the subtractions' latency hides behind the other seven and each
// broadcast of up serves two tiles; then a last single tile where cols/8
// is odd.
TEXT ·updateAVX512(SB), NOSPLIT, $0-96
	MOVQ c_base+0(FP), DI
	MOVQ cs+24(FP), R8
	SHLQ $3, R8             // row stride of c in bytes
	LEAQ (R8)(R8*2), R13    // three rows of c
	MOVQ ep_base+56(FP), DX // tiles follow each other
	MOVQ bs+80(FP), R12
	SHLQ $6, R12            // one tile of ep in bytes
	MOVQ cols+88(FP), R11
	SHRQ $3, R11            // column tiles of eight

u512pair:
	CMPQ    R11, $2
	JLT     u512single
	VMOVUPD 0(DI), Z0
	VMOVUPD 64(DI), Z1
	VMOVUPD 0(DI)(R8*1), Z2
	VMOVUPD 64(DI)(R8*1), Z3
	VMOVUPD 0(DI)(R8*2), Z4
	VMOVUPD 64(DI)(R8*2), Z5
	VMOVUPD 0(DI)(R13*1), Z6
	VMOVUPD 64(DI)(R13*1), Z7
	MOVQ    up_base+32(FP), SI
	MOVQ    bs+80(FP), CX
	LEAQ    (DX)(R12*1), R9 // the second tile of e

u512loop2:
	VMOVUPD      0(DX), Z8
	VMOVUPD      0(R9), Z9
	VBROADCASTSD 0(SI), Z10
	VBROADCASTSD 8(SI), Z11
	VBROADCASTSD 16(SI), Z12
	VBROADCASTSD 24(SI), Z13
	U512STEP(Z10, Z0, Z1, Z14, Z15)
	U512STEP(Z11, Z2, Z3, Z16, Z17)
	U512STEP(Z12, Z4, Z5, Z18, Z19)
	U512STEP(Z13, Z6, Z7, Z20, Z21)
	ADDQ         $64, DX
	ADDQ         $64, R9
	ADDQ         $32, SI
	DECQ         CX
	JNZ          u512loop2

	VMOVUPD Z0, 0(DI)
	VMOVUPD Z1, 64(DI)
	VMOVUPD Z2, 0(DI)(R8*1)
	VMOVUPD Z3, 64(DI)(R8*1)
	VMOVUPD Z4, 0(DI)(R8*2)
	VMOVUPD Z5, 64(DI)(R8*2)
	VMOVUPD Z6, 0(DI)(R13*1)
	VMOVUPD Z7, 64(DI)(R13*1)
	ADDQ    $128, DI
	MOVQ    R9, DX          // the tile after the second
	SUBQ    $2, R11
	JMP     u512pair

u512single:
	TESTQ   R11, R11
	JZ      u512done
	VMOVUPD 0(DI), Z0
	VMOVUPD 0(DI)(R8*1), Z2
	VMOVUPD 0(DI)(R8*2), Z4
	VMOVUPD 0(DI)(R13*1), Z6
	MOVQ    up_base+32(FP), SI
	MOVQ    bs+80(FP), CX

u512loop1:
	VMOVUPD      0(DX), Z8
	VBROADCASTSD 0(SI), Z10
	VBROADCASTSD 8(SI), Z11
	VBROADCASTSD 16(SI), Z12
	VBROADCASTSD 24(SI), Z13
	VMULPD       Z8, Z10, Z14
	VSUBPD       Z14, Z0, Z0
	VMULPD       Z8, Z11, Z15
	VSUBPD       Z15, Z2, Z2
	VMULPD       Z8, Z12, Z16
	VSUBPD       Z16, Z4, Z4
	VMULPD       Z8, Z13, Z17
	VSUBPD       Z17, Z6, Z6
	ADDQ         $64, DX
	ADDQ         $32, SI
	DECQ         CX
	JNZ          u512loop1

	VMOVUPD Z0, 0(DI)
	VMOVUPD Z2, 0(DI)(R8*1)
	VMOVUPD Z4, 0(DI)(R8*2)
	VMOVUPD Z6, 0(DI)(R13*1)

u512done:
	VZEROUPPER
	RET

// DL44STEP adds the product of a row of a (ra) and a row of b (rb) into acc.
#define DL44STEP(ra, rb, tmp, acc) \
	VMULPD rb, ra, tmp; \
	VADDPD tmp, acc, acc

// func dotLanes4x4AVX512(acc *[64]float64, a []float64, ao *[4]int, b []float64, bo *[4]int, quads int)
//
// dotLanes4x4Go with sixteen accumulators Y0-Y15 (pair i, j in Y(4i+j)),
// the quads of a in Y16-Y19 and of b in Y20-Y23 (AVX-512 VL registers).
TEXT ·dotLanes4x4AVX512(SB), NOSPLIT, $0-80
	MOVQ   a_base+8(FP), SI
	MOVQ   ao+32(FP), DI
	MOVQ   0(DI), R8
	LEAQ   (SI)(R8*8), R8
	MOVQ   8(DI), R9
	LEAQ   (SI)(R9*8), R9
	MOVQ   16(DI), R10
	LEAQ   (SI)(R10*8), R10
	MOVQ   24(DI), R11
	LEAQ   (SI)(R11*8), R11
	MOVQ   b_base+40(FP), SI
	MOVQ   bo+64(FP), DI
	MOVQ   0(DI), R12
	LEAQ   (SI)(R12*8), R12
	MOVQ   8(DI), R13
	LEAQ   (SI)(R13*8), R13
	MOVQ   16(DI), BX
	LEAQ   (SI)(BX*8), BX
	MOVQ   24(DI), DX
	LEAQ   (SI)(DX*8), DX
	MOVQ   quads+72(FP), CX
	SHLQ   $2, CX
	XORQ   AX, AX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
	VXORPD Y12, Y12, Y12
	VXORPD Y13, Y13, Y13
	VXORPD Y14, Y14, Y14
	VXORPD Y15, Y15, Y15

dl44loop:
	VMOVUPD (R8)(AX*8), Y16
	VMOVUPD (R9)(AX*8), Y17
	VMOVUPD (R10)(AX*8), Y18
	VMOVUPD (R11)(AX*8), Y19
	VMOVUPD (R12)(AX*8), Y20
	VMOVUPD (R13)(AX*8), Y21
	VMOVUPD (BX)(AX*8), Y22
	VMOVUPD (DX)(AX*8), Y23
	DL44STEP(Y16, Y20, Y24, Y0)
	DL44STEP(Y16, Y21, Y25, Y1)
	DL44STEP(Y16, Y22, Y26, Y2)
	DL44STEP(Y16, Y23, Y27, Y3)
	DL44STEP(Y17, Y20, Y28, Y4)
	DL44STEP(Y17, Y21, Y29, Y5)
	DL44STEP(Y17, Y22, Y30, Y6)
	DL44STEP(Y17, Y23, Y31, Y7)
	DL44STEP(Y18, Y20, Y24, Y8)
	DL44STEP(Y18, Y21, Y25, Y9)
	DL44STEP(Y18, Y22, Y26, Y10)
	DL44STEP(Y18, Y23, Y27, Y11)
	DL44STEP(Y19, Y20, Y28, Y12)
	DL44STEP(Y19, Y21, Y29, Y13)
	DL44STEP(Y19, Y22, Y30, Y14)
	DL44STEP(Y19, Y23, Y31, Y15)
	ADDQ    $4, AX
	CMPQ    AX, CX
	JLT     dl44loop

	MOVQ    acc+0(FP), DI
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VMOVUPD Y4, 128(DI)
	VMOVUPD Y5, 160(DI)
	VMOVUPD Y6, 192(DI)
	VMOVUPD Y7, 224(DI)
	VMOVUPD Y8, 256(DI)
	VMOVUPD Y9, 288(DI)
	VMOVUPD Y10, 320(DI)
	VMOVUPD Y11, 352(DI)
	VMOVUPD Y12, 384(DI)
	VMOVUPD Y13, 416(DI)
	VMOVUPD Y14, 448(DI)
	VMOVUPD Y15, 480(DI)
	VZEROUPPER
	RET

// G32STEP multiplies the broadcast of mem (one row of g) by Z16 and Z17
// (eight values of each of two pairs of p) into acc0 and acc1: the step of
// gram16AVX512 for two pairs at once, the broadcast loaded once for both.
#define G32STEP(mem, acc0, acc1) \
	VBROADCASTSD mem, Z20;   \
	VMULPD       Z20, Z16, Z22; \
	VADDPD       Z22, acc0, acc0; \
	VMULPD       Z20, Z17, Z23; \
	VADDPD       Z23, acc1, acc1

// func gram32AVX512(x *[128]float64, g, p []float64, n int)
//
// gram16AVX512 for two pairs of p (p[:8n], p[8n:16n]) against the same two
// groups of g: x[32k + 8a + b] for block k = 2·pair + group of g, row a of
// that group and column b of that pair. Each lane is one running sum, one
// rounded product and one rounded add per t, in t order, continued from x.
// Sixteen accumulators share each load of g and of p twice as often as in
// gram16AVX512.
TEXT ·gram32AVX512(SB), NOSPLIT, $0-64
	MOVQ g_base+8(FP), SI
	MOVQ p_base+32(FP), R8
	MOVQ n+56(FP), CX
	MOVQ CX, R13
	SHLQ $5, R13          // one group: 4n values, 32n bytes
	LEAQ (SI)(R13*1), R10 // the second group of g
	LEAQ (R8)(R13*1), R9  // pair 0, second group
	LEAQ (R9)(R13*1), R11 // pair 1, first group
	LEAQ (R11)(R13*1), R12 // pair 1, second group
	MOVQ    x+0(FP), DI
	VMOVUPD 0(DI), Z0
	VMOVUPD 64(DI), Z1
	VMOVUPD 128(DI), Z2
	VMOVUPD 192(DI), Z3
	VMOVUPD 256(DI), Z4
	VMOVUPD 320(DI), Z5
	VMOVUPD 384(DI), Z6
	VMOVUPD 448(DI), Z7
	VMOVUPD 512(DI), Z8
	VMOVUPD 576(DI), Z9
	VMOVUPD 640(DI), Z10
	VMOVUPD 704(DI), Z11
	VMOVUPD 768(DI), Z12
	VMOVUPD 832(DI), Z13
	VMOVUPD 896(DI), Z18
	VMOVUPD 960(DI), Z19

g32loop:
	VMOVUPD      (R8), Y15
	VINSERTF64X4 $1, (R9), Z15, Z16
	VMOVUPD      (R11), Y14
	VINSERTF64X4 $1, (R12), Z14, Z17
	G32STEP(0(SI), Z0, Z8)
	G32STEP(8(SI), Z1, Z9)
	G32STEP(16(SI), Z2, Z10)
	G32STEP(24(SI), Z3, Z11)
	G32STEP(0(R10), Z4, Z12)
	G32STEP(8(R10), Z5, Z13)
	G32STEP(16(R10), Z6, Z18)
	G32STEP(24(R10), Z7, Z19)
	ADDQ $32, SI
	ADDQ $32, R10
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R11
	ADDQ $32, R12
	DECQ CX
	JNZ  g32loop

	MOVQ    x+0(FP), DI
	VMOVUPD Z0, 0(DI)
	VMOVUPD Z1, 64(DI)
	VMOVUPD Z2, 128(DI)
	VMOVUPD Z3, 192(DI)
	VMOVUPD Z4, 256(DI)
	VMOVUPD Z5, 320(DI)
	VMOVUPD Z6, 384(DI)
	VMOVUPD Z7, 448(DI)
	VMOVUPD Z8, 512(DI)
	VMOVUPD Z9, 576(DI)
	VMOVUPD Z10, 640(DI)
	VMOVUPD Z11, 704(DI)
	VMOVUPD Z12, 768(DI)
	VMOVUPD Z13, 832(DI)
	VMOVUPD Z18, 896(DI)
	VMOVUPD Z19, 960(DI)
	VZEROUPPER
	RET
