//go:build amd64 && !purego

#include "textflag.h"

// BFP8_b / BFP4_b kernels, AVX2 + FMA, on the lfmq-1 tile layout
// (docs/bfp.md §1, §8). Row r of a tile holds one input index k and 32
// output channels; its columns 0-15 are group g0 = r + (r & 16) (face
// (r/16)·2, face row r%16) and columns 16-31 are group g0+16. A group's
// shared exponent is byte g, its codes start at byte 64+16g (BFP8) or
// 64+8g (BFP4). The weight of a lane is decoded exactly to float32 as
// ±q · scale[E] (scale tables built in matrix.go), then fused into the
// accumulator as fma(x[k], w, acc) — the order of bfpColGo and tileFMAGo.

// bfp4lut maps a BFP4 code (sign bit 3, magnitude bits 0-2) to the signed
// byte ±q; code 8 (never emitted: "negative zero") maps to 0.
DATA bfp4lut<>+0(SB)/8, $0x0706050403020100
DATA bfp4lut<>+8(SB)/8, $0xf9fafbfcfdfeff00
GLOBL bfp4lut<>(SB), RODATA|NOPTR, $16

DATA nibmask<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibmask<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nibmask<>(SB), RODATA|NOPTR, $16

// DEC8 decodes the 8 BFP8 codes at mem into exact float32 weights in y:
// sign-extend the bytes, keep the 7-bit magnitude, give it the code's sign
// (VPSIGND also zeroes lanes whose code is 0), convert, scale. Y15 holds
// 0x7f in every dword; Y14 is clobbered.
#define DEC8(mem, scale, y) \
	VPMOVSXBD mem, Y14; \
	VPAND     Y15, Y14, y; \
	VPSIGND   Y14, y, y; \
	VCVTDQ2PS y, y; \
	VMULPS    scale, y, y

// DEC4 decodes the 16 BFP4 codes of the 8 bytes at mem into exact float32
// weights: lanes 0-7 in ylo, 8-15 in yhi. Low nibbles are the even lanes,
// so the masked low and high nibbles are interleaved byte by byte, mapped
// to signed bytes through the table in X13, then sign-extended. X15 holds
// 0x0f in every byte; X14 is clobbered.
#define DEC4(mem, scale, ylo, yhi, xlo, xhi) \
	VMOVQ      mem, X14; \
	VPSRLW     $4, X14, xhi; \
	VPAND      X15, X14, X14; \
	VPAND      X15, xhi, xhi; \
	VPUNPCKLBW xhi, X14, X14; \
	VPSHUFB    X14, X13, X14; \
	VPMOVSXBD  X14, ylo; \
	VPSRLDQ    $8, X14, X14; \
	VPMOVSXBD  X14, yhi; \
	VCVTDQ2PS  ylo, ylo; \
	VCVTDQ2PS  yhi, yhi; \
	VMULPS     scale, ylo, ylo; \
	VMULPS     scale, yhi, yhi

// func bfpCol8AVX(dst *[32]float32, t []byte, rowStride int, x []float32, scale *[256]float32)
//
// Register use: SI tile (kt, nt), BX bytes from one tile row to the next,
// DX &x[k], CX inputs left, R9 rows of this tile, R10 r, R14 scale table,
// Y0-Y3 accumulators of columns 0-7, 8-15, 16-23, 24-31, Y12 x[k],
// Y8/Y9 group scales.
TEXT ·bfpCol8AVX(SB), NOSPLIT, $0-72
	MOVQ      dst+0(FP), DI
	MOVQ      t_base+8(FP), SI
	MOVQ      rowStride+32(FP), BX
	MOVQ      x_base+40(FP), DX
	MOVQ      x_len+48(FP), CX
	MOVQ      scale+64(FP), R14
	VXORPS    Y0, Y0, Y0
	VXORPS    Y1, Y1, Y1
	VXORPS    Y2, Y2, Y2
	VXORPS    Y3, Y3, Y3
	VPCMPEQD  Y15, Y15, Y15
	VPSRLD    $25, Y15, Y15

tile:
	CMPQ    CX, $0
	JLE     done
	MOVQ    $32, R9
	CMPQ    CX, R9
	CMOVQLT CX, R9
	XORQ    R10, R10

row:
	MOVQ         R10, R11
	ANDQ         $16, R11
	ADDQ         R10, R11                  // g0
	VBROADCASTSS (DX), Y12
	MOVBQZX      (SI)(R11*1), R12
	VBROADCASTSS (R14)(R12*4), Y8
	MOVBQZX      16(SI)(R11*1), R13
	VBROADCASTSS (R14)(R13*4), Y9
	SHLQ         $4, R11
	LEAQ         64(SI)(R11*1), R12        // codes of g0; g0+16 is 256 bytes on
	DEC8((R12), Y8, Y4)
	DEC8(8(R12), Y8, Y5)
	DEC8(256(R12), Y9, Y6)
	DEC8(264(R12), Y9, Y7)
	VFMADD231PS  Y12, Y4, Y0
	VFMADD231PS  Y12, Y5, Y1
	VFMADD231PS  Y12, Y6, Y2
	VFMADD231PS  Y12, Y7, Y3
	ADDQ         $4, DX
	INCQ         R10
	CMPQ         R10, R9
	JB           row
	ADDQ         BX, SI
	SUBQ         R9, CX
	JMP          tile

done:
	VMOVUPS    Y0, (DI)
	VMOVUPS    Y1, 32(DI)
	VMOVUPS    Y2, 64(DI)
	VMOVUPS    Y3, 96(DI)
	VZEROUPPER
	RET

// func bfpCol4AVX(dst *[32]float32, t []byte, rowStride int, x []float32, scale *[256]float32)
TEXT ·bfpCol4AVX(SB), NOSPLIT, $0-72
	MOVQ      dst+0(FP), DI
	MOVQ      t_base+8(FP), SI
	MOVQ      rowStride+32(FP), BX
	MOVQ      x_base+40(FP), DX
	MOVQ      x_len+48(FP), CX
	MOVQ      scale+64(FP), R14
	VXORPS    Y0, Y0, Y0
	VXORPS    Y1, Y1, Y1
	VXORPS    Y2, Y2, Y2
	VXORPS    Y3, Y3, Y3
	VMOVDQU   nibmask<>(SB), X15
	VMOVDQU   bfp4lut<>(SB), X13

tile:
	CMPQ    CX, $0
	JLE     done
	MOVQ    $32, R9
	CMPQ    CX, R9
	CMOVQLT CX, R9
	XORQ    R10, R10

row:
	MOVQ         R10, R11
	ANDQ         $16, R11
	ADDQ         R10, R11                  // g0
	VBROADCASTSS (DX), Y12
	MOVBQZX      (SI)(R11*1), R12
	VBROADCASTSS (R14)(R12*4), Y8
	MOVBQZX      16(SI)(R11*1), R13
	VBROADCASTSS (R14)(R13*4), Y9
	SHLQ         $3, R11
	LEAQ         64(SI)(R11*1), R12        // codes of g0; g0+16 is 128 bytes on
	DEC4((R12), Y8, Y4, Y5, X4, X5)
	DEC4(128(R12), Y9, Y6, Y7, X6, X7)
	VFMADD231PS  Y12, Y4, Y0
	VFMADD231PS  Y12, Y5, Y1
	VFMADD231PS  Y12, Y6, Y2
	VFMADD231PS  Y12, Y7, Y3
	ADDQ         $4, DX
	INCQ         R10
	CMPQ         R10, R9
	JB           row
	ADDQ         BX, SI
	SUBQ         R9, CX
	JMP          tile

done:
	VMOVUPS    Y0, (DI)
	VMOVUPS    Y1, 32(DI)
	VMOVUPS    Y2, 64(DI)
	VMOVUPS    Y3, 96(DI)
	VZEROUPPER
	RET

// func decodeTile8AVX(dst *[1024]float32, t []byte, scale *[256]float32)
TEXT ·decodeTile8AVX(SB), NOSPLIT, $0-40
	MOVQ     dst+0(FP), DI
	MOVQ     t_base+8(FP), SI
	MOVQ     scale+32(FP), R14
	VPCMPEQD Y15, Y15, Y15
	VPSRLD   $25, Y15, Y15
	XORQ     R10, R10

row:
	MOVQ         R10, R11
	ANDQ         $16, R11
	ADDQ         R10, R11
	MOVBQZX      (SI)(R11*1), R12
	VBROADCASTSS (R14)(R12*4), Y8
	MOVBQZX      16(SI)(R11*1), R13
	VBROADCASTSS (R14)(R13*4), Y9
	SHLQ         $4, R11
	LEAQ         64(SI)(R11*1), R12
	DEC8((R12), Y8, Y4)
	DEC8(8(R12), Y8, Y5)
	DEC8(256(R12), Y9, Y6)
	DEC8(264(R12), Y9, Y7)
	VMOVUPS      Y4, (DI)
	VMOVUPS      Y5, 32(DI)
	VMOVUPS      Y6, 64(DI)
	VMOVUPS      Y7, 96(DI)
	ADDQ         $128, DI
	INCQ         R10
	CMPQ         R10, $32
	JB           row
	VZEROUPPER
	RET

// func decodeTile4AVX(dst *[1024]float32, t []byte, scale *[256]float32)
TEXT ·decodeTile4AVX(SB), NOSPLIT, $0-40
	MOVQ    dst+0(FP), DI
	MOVQ    t_base+8(FP), SI
	MOVQ    scale+32(FP), R14
	VMOVDQU nibmask<>(SB), X15
	VMOVDQU bfp4lut<>(SB), X13
	XORQ    R10, R10

row:
	MOVQ         R10, R11
	ANDQ         $16, R11
	ADDQ         R10, R11
	MOVBQZX      (SI)(R11*1), R12
	VBROADCASTSS (R14)(R12*4), Y8
	MOVBQZX      16(SI)(R11*1), R13
	VBROADCASTSS (R14)(R13*4), Y9
	SHLQ         $3, R11
	LEAQ         64(SI)(R11*1), R12
	DEC4((R12), Y8, Y4, Y5, X4, X5)
	DEC4(128(R12), Y9, Y6, Y7, X6, X7)
	VMOVUPS      Y4, (DI)
	VMOVUPS      Y5, 32(DI)
	VMOVUPS      Y6, 64(DI)
	VMOVUPS      Y7, 96(DI)
	ADDQ         $128, DI
	INCQ         R10
	CMPQ         R10, $32
	JB           row
	VZEROUPPER
	RET

// func tileFMAAVX(acc []float32, accStride int, w *[1024]float32, x []float32, xStride, rows, nb int)
//
// Applies rows rows of a decoded tile to nb (1, 2 or 3) batch rows. The
// accumulators stay in registers for the whole tile, four ymm per batch row
// (Y0-Y3, Y4-Y7, Y8-Y11); the tile rows are read from memory by the FMAs.
// Three batch rows give twelve independent FMA chains, enough to cover the
// FMA latency at two FMAs per cycle.
TEXT ·tileFMAAVX(SB), NOSPLIT, $0-88
	MOVQ acc_base+0(FP), DI
	MOVQ accStride+24(FP), BX
	MOVQ w+32(FP), SI
	MOVQ x_base+40(FP), DX
	MOVQ xStride+64(FP), R8
	MOVQ rows+72(FP), CX
	MOVQ nb+80(FP), AX
	SHLQ $2, BX
	SHLQ $2, R8
	LEAQ (DX)(R8*1), R11        // x of batch row 1
	LEAQ (R11)(R8*1), R12       // x of batch row 2
	LEAQ (DI)(BX*1), R9         // acc of batch row 1
	LEAQ (R9)(BX*1), R13        // acc of batch row 2
	XORQ R10, R10
	CMPQ AX, $2
	JLT  one
	JEQ  two

	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS (R9), Y4
	VMOVUPS 32(R9), Y5
	VMOVUPS 64(R9), Y6
	VMOVUPS 96(R9), Y7
	VMOVUPS (R13), Y8
	VMOVUPS 32(R13), Y9
	VMOVUPS 64(R13), Y10
	VMOVUPS 96(R13), Y11
	JMP     check3

loop3:
	VBROADCASTSS (DX)(R10*4), Y12
	VBROADCASTSS (R11)(R10*4), Y13
	VBROADCASTSS (R12)(R10*4), Y14
	VFMADD231PS  (SI), Y12, Y0
	VFMADD231PS  32(SI), Y12, Y1
	VFMADD231PS  64(SI), Y12, Y2
	VFMADD231PS  96(SI), Y12, Y3
	VFMADD231PS  (SI), Y13, Y4
	VFMADD231PS  32(SI), Y13, Y5
	VFMADD231PS  64(SI), Y13, Y6
	VFMADD231PS  96(SI), Y13, Y7
	VFMADD231PS  (SI), Y14, Y8
	VFMADD231PS  32(SI), Y14, Y9
	VFMADD231PS  64(SI), Y14, Y10
	VFMADD231PS  96(SI), Y14, Y11
	ADDQ         $128, SI
	INCQ         R10

check3:
	CMPQ R10, CX
	JB   loop3
	VMOVUPS    Y0, (DI)
	VMOVUPS    Y1, 32(DI)
	VMOVUPS    Y2, 64(DI)
	VMOVUPS    Y3, 96(DI)
	VMOVUPS    Y4, (R9)
	VMOVUPS    Y5, 32(R9)
	VMOVUPS    Y6, 64(R9)
	VMOVUPS    Y7, 96(R9)
	VMOVUPS    Y8, (R13)
	VMOVUPS    Y9, 32(R13)
	VMOVUPS    Y10, 64(R13)
	VMOVUPS    Y11, 96(R13)
	VZEROUPPER
	RET

two:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS (R9), Y4
	VMOVUPS 32(R9), Y5
	VMOVUPS 64(R9), Y6
	VMOVUPS 96(R9), Y7
	JMP     check2

loop2:
	VBROADCASTSS (DX)(R10*4), Y12
	VBROADCASTSS (R11)(R10*4), Y13
	VFMADD231PS  (SI), Y12, Y0
	VFMADD231PS  32(SI), Y12, Y1
	VFMADD231PS  64(SI), Y12, Y2
	VFMADD231PS  96(SI), Y12, Y3
	VFMADD231PS  (SI), Y13, Y4
	VFMADD231PS  32(SI), Y13, Y5
	VFMADD231PS  64(SI), Y13, Y6
	VFMADD231PS  96(SI), Y13, Y7
	ADDQ         $128, SI
	INCQ         R10

check2:
	CMPQ R10, CX
	JB   loop2
	VMOVUPS    Y0, (DI)
	VMOVUPS    Y1, 32(DI)
	VMOVUPS    Y2, 64(DI)
	VMOVUPS    Y3, 96(DI)
	VMOVUPS    Y4, (R9)
	VMOVUPS    Y5, 32(R9)
	VMOVUPS    Y6, 64(R9)
	VMOVUPS    Y7, 96(R9)
	VZEROUPPER
	RET

one:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	JMP     check1

loop1:
	VBROADCASTSS (DX)(R10*4), Y12
	VFMADD231PS  (SI), Y12, Y0
	VFMADD231PS  32(SI), Y12, Y1
	VFMADD231PS  64(SI), Y12, Y2
	VFMADD231PS  96(SI), Y12, Y3
	ADDQ         $128, SI
	INCQ         R10

check1:
	CMPQ R10, CX
	JB   loop1
	VMOVUPS    Y0, (DI)
	VMOVUPS    Y1, 32(DI)
	VMOVUPS    Y2, 64(DI)
	VMOVUPS    Y3, 96(DI)
	VZEROUPPER
	RET
