//go:build amd64 && !purego

#include "textflag.h"

// BFP8_b / BFP4_b kernels, AVX2 + FMA, on the lfmq-1 tile layout
// (docs/bfp.md §1, §8). Row r of a tile holds one input index k and 32
// output channels; its columns 0-15 are group g0 = r + (r & 16) (face
// (r/16)·2, face row r%16) and columns 16-31 are group g0+16. A group's
// shared exponent is byte g, its codes start at byte 64+16g (BFP8) or
// 64+8g (BFP4). The weight of a lane is decoded exactly to float32 as
// ±q · scale[E] (scale tables built in matrix.go), then fused into the
// accumulator as fma(x[k], w, acc) — the order of bfpRowGo and tileFMAGo.

// bfp4lut maps a BFP4 code (sign bit 3, magnitude bits 0-2) to the signed
// byte ±q; code 8 (never emitted: "negative zero") maps to 0.
DATA bfp4lut<>+0(SB)/8, $0x0706050403020100
DATA bfp4lut<>+8(SB)/8, $0xf9fafbfcfdfeff00
GLOBL bfp4lut<>(SB), RODATA|NOPTR, $16

DATA nibmask<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibmask<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nibmask<>(SB), RODATA|NOPTR, $16

DATA mask7f<>+0(SB)/8, $0x7f7f7f7f7f7f7f7f
DATA mask7f<>+8(SB)/8, $0x7f7f7f7f7f7f7f7f
GLOBL mask7f<>(SB), RODATA|NOPTR, $16

DATA maskff<>+0(SB)/8, $0x000000ff000000ff
DATA maskff<>+8(SB)/8, $0x000000ff000000ff
GLOBL maskff<>(SB), RODATA|NOPTR, $16

// bias8 and bias4 turn a normal group exponent E into the float32 exponent
// field of its step 2^(E−133) (BFP8) or 2^(E−129) (BFP4).
DATA bias8<>+0(SB)/8, $0x0000000600000006
DATA bias8<>+8(SB)/8, $0x0000000600000006
DATA bias8<>+16(SB)/8, $0x0000000600000006
DATA bias8<>+24(SB)/8, $0x0000000600000006
GLOBL bias8<>(SB), RODATA|NOPTR, $32

DATA bias4<>+0(SB)/8, $0x0000000200000002
DATA bias4<>+8(SB)/8, $0x0000000200000002
DATA bias4<>+16(SB)/8, $0x0000000200000002
DATA bias4<>+24(SB)/8, $0x0000000200000002
GLOBL bias4<>(SB), RODATA|NOPTR, $32

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

// Full tiles take a faster route than DEC8/DEC4 when it gives the same
// bits. With w = ±q·s (s = 2^(E−133) or 2^(E−129), q an integer), the exact
// product x·w equals (x·s)·q, so fma(x·s, ±q, acc) = fma(x, w, acc)
// whenever x·s is itself exact and w is the exact ±q·s. That holds for
// every row x[r] and group E of a tile when 7 ≤ E ≤ 254 (BFP8; 3 ≤ E for
// BFP4), so that s is a normal float built by shifting E and no decoded
// weight overflows (E = 255 marks an Inf or NaN group, whose large codes
// decode to ±Inf), and when x·s lands in the normal range or x is 0:
// emin + E − 133 ≥ 1 and emax + E − 133 ≤ 254 over the rows' exponent
// fields (129 for BFP4); infinite and NaN x pass through either way. The
// kernels check this once per call for x and once per tile for its 64
// exponents, compute the 64 products x·s of the tile with eight vector
// multiplies, and then need per row only two broadcasts of x·s, the
// widening of the codes, the conversion and the FMAs. A tile that fails the
// check takes the DEC8/DEC4 row loop; either way each output sees the same
// chain of fused multiply-adds. TestBFPRowRoutes probes both bounds.
//
// Scratch (32-byte aligned, at R15): 0-63 the signed codes of two rows,
// 64-319 the tile's x·s by group (x·s of group g at 64+4g), 320-351 the
// lowest exponent allowed, in every byte, 352-383 the width of the allowed
// range.

// PAIR8 runs tile rows r and r+1 (r even, both in one face half) of a full
// BFP8 tile on the fast route. Rows r and r+1 of a face are consecutive
// groups, so their left codes are the 32 bytes at cl and their right codes
// the 32 bytes at cr. They become signed bytes ±q (VPSIGNB zeroes code 0x80
// too) for both rows at once, are parked in the scratch and widened from
// there; xa/xb are the scratch offsets of row r's left/right x·s, xc/xd
// those of row r+1. Y13 holds 0x7f in every byte.
#define PAIR8(xa, xb, xc, xd, cl, cr) \
	VMOVDQU      cl(SI), Y4; \
	VMOVDQU      cr(SI), Y5; \
	VPAND        Y13, Y4, Y6; \
	VPAND        Y13, Y5, Y7; \
	VPSIGNB      Y4, Y6, Y6; \
	VPSIGNB      Y5, Y7, Y7; \
	VMOVDQA      Y6, (R15); \
	VMOVDQA      Y7, 32(R15); \
	VBROADCASTSS xa(R15), Y8; \
	VBROADCASTSS xb(R15), Y9; \
	VPMOVSXBD    (R15), Y4; \
	VPMOVSXBD    8(R15), Y5; \
	VPMOVSXBD    32(R15), Y6; \
	VPMOVSXBD    40(R15), Y7; \
	VCVTDQ2PS    Y4, Y4; \
	VCVTDQ2PS    Y5, Y5; \
	VCVTDQ2PS    Y6, Y6; \
	VCVTDQ2PS    Y7, Y7; \
	VFMADD231PS  Y8, Y4, Y0; \
	VFMADD231PS  Y8, Y5, Y1; \
	VFMADD231PS  Y9, Y6, Y2; \
	VFMADD231PS  Y9, Y7, Y3; \
	VBROADCASTSS xc(R15), Y10; \
	VBROADCASTSS xd(R15), Y11; \
	VPMOVSXBD    16(R15), Y4; \
	VPMOVSXBD    24(R15), Y5; \
	VPMOVSXBD    48(R15), Y6; \
	VPMOVSXBD    56(R15), Y7; \
	VCVTDQ2PS    Y4, Y4; \
	VCVTDQ2PS    Y5, Y5; \
	VCVTDQ2PS    Y6, Y6; \
	VCVTDQ2PS    Y7, Y7; \
	VFMADD231PS  Y10, Y4, Y0; \
	VFMADD231PS  Y10, Y5, Y1; \
	VFMADD231PS  Y11, Y6, Y2; \
	VFMADD231PS  Y11, Y7, Y3

// PAIR4 is PAIR8 for BFP4: the 16 code bytes of rows r and r+1 at cl
// (left) and cr (right) are loaded into one register, split into nibbles,
// interleaved back into column order (row r in Y6, row r+1 in Y7, columns
// 0-31 each), mapped to signed bytes ±q by the table in Y13, parked in the
// scratch and widened from there. Y15 holds 0x0f in every byte.
#define PAIR4(xa, xb, xc, xd, cl, cr) \
	VMOVDQU      cl(SI), X4; \
	VINSERTI128  $1, cr(SI), Y4, Y4; \
	VPSRLW       $4, Y4, Y5; \
	VPAND        Y15, Y4, Y4; \
	VPAND        Y15, Y5, Y5; \
	VPUNPCKLBW   Y5, Y4, Y6; \
	VPUNPCKHBW   Y5, Y4, Y7; \
	VPSHUFB      Y6, Y13, Y6; \
	VPSHUFB      Y7, Y13, Y7; \
	VMOVDQA      Y6, (R15); \
	VMOVDQA      Y7, 32(R15); \
	VBROADCASTSS xa(R15), Y8; \
	VBROADCASTSS xb(R15), Y9; \
	VPMOVSXBD    (R15), Y4; \
	VPMOVSXBD    8(R15), Y5; \
	VPMOVSXBD    16(R15), Y6; \
	VPMOVSXBD    24(R15), Y7; \
	VCVTDQ2PS    Y4, Y4; \
	VCVTDQ2PS    Y5, Y5; \
	VCVTDQ2PS    Y6, Y6; \
	VCVTDQ2PS    Y7, Y7; \
	VFMADD231PS  Y8, Y4, Y0; \
	VFMADD231PS  Y8, Y5, Y1; \
	VFMADD231PS  Y9, Y6, Y2; \
	VFMADD231PS  Y9, Y7, Y3; \
	VBROADCASTSS xc(R15), Y10; \
	VBROADCASTSS xd(R15), Y11; \
	VPMOVSXBD    32(R15), Y4; \
	VPMOVSXBD    40(R15), Y5; \
	VPMOVSXBD    48(R15), Y6; \
	VPMOVSXBD    56(R15), Y7; \
	VCVTDQ2PS    Y4, Y4; \
	VCVTDQ2PS    Y5, Y5; \
	VCVTDQ2PS    Y6, Y6; \
	VCVTDQ2PS    Y7, Y7; \
	VFMADD231PS  Y10, Y4, Y0; \
	VFMADD231PS  Y10, Y5, Y1; \
	VFMADD231PS  Y11, Y6, Y2; \
	VFMADD231PS  Y11, Y7, Y3

// AHEAD sets reg to the address ahead bytes past the tile at SI or, when
// no more than tiles tiles are left (BX), to its place in the next run
// (gap-8(SP) the gap between the runs): where the row kernels prefetch. It
// uses R8.
#define AHEAD(ahead, tiles, reg) \
	LEAQ    ahead(SI), reg; \
	MOVQ    gap-8(SP), R8; \
	ADDQ    reg, R8; \
	CMPQ    BX, $tiles; \
	CMOVQLE R8, reg

// func bfpRow8AVX(acc []float32, t []byte, n int, x []float32, scale *[256]float32, next int)
//
// Applies rows r < len(x) (at most 32) of n consecutive tiles of one tile
// row to their columns' accumulators acc[32j:32j+32], in increasing r. The
// tiles are read in memory order, and the tile 4 ahead in processing order
// (at the start of the next call's run, next bytes on, once past this
// run's end) is prefetched into L1 and the tile 24 ahead into L2, so that
// loads stay ahead also across the 4 KiB pages of a memory-mapped
// checkpoint, where the hardware prefetchers stop. On the fast route the
// prefetches are spread over the tile, a line of each per pair of rows,
// not issued at once (see bfpRow4Quads).
// The accumulators live in registers for a tile and in acc (L1) between
// tiles.
//
// Register use: DI acc of tile j, SI tile j, BX tiles left, DX &x[0], R9
// rows, R14 scale table, R15 scratch, R10 and R11 the L1 and L2 prefetch
// addresses (fast route); the row loop: R11 exponent of g0
// (g0+16 is 16 bytes on), R12 codes of g0 (g0+16 is 256 bytes on), R13
// &x[r], CX rows left, R10 rows left in this face row half, Y12 x[r],
// Y8/Y9 group scales; Y0-Y3 accumulators of columns 0-7, 8-15, 16-23,
// 24-31.
TEXT ·bfpRow8AVX(SB), NOSPLIT, $448-96
	MOVQ     acc_base+0(FP), DI
	MOVQ     t_base+24(FP), SI
	MOVQ     n+48(FP), BX
	MOVQ     x_base+56(FP), DX
	MOVQ     x_len+64(FP), R9
	MOVQ     scale+80(FP), R14
	TESTQ    R9, R9
	JZ       done
	TESTQ    BX, BX
	JZ       done
	LEAQ     31(SP), R15
	ANDQ     $-32, R15
	VPCMPEQD Y15, Y15, Y15
	VPSRLD   $25, Y15, Y15
	VBROADCASTI128 mask7f<>(SB), Y13

	// Bytes from the prefetch address to the tile it must fetch once it
	// has passed the end of this run: the next run starts next bytes on.
	MOVQ     next+88(FP), AX
	MOVQ     BX, R8
	IMULQ    $1088, R8
	SUBQ     R8, AX
	MOVQ     AX, gap-8(SP)

	// The fast route's check of x: emin is the lowest exponent field of a
	// non-zero x[r] (zeros are made 0xffffffff, out of the way), emax the
	// highest; E must then lie in [max(7, 134−emin), min(254, 387−emax)].
	MOVQ     $0, fast-16(SP)
	CMPQ     R9, $32
	JNE      tile
	VPXOR    Y10, Y10, Y10
	VBROADCASTI128 maskff<>(SB), Y11
	VPCMPEQD Y8, Y8, Y8        // running minimum
	VPXOR    Y9, Y9, Y9        // running maximum
	VMOVDQU  0(DX), Y4
	VPSRLD   $23, Y4, Y5
	VPAND    Y11, Y5, Y5
	VPSLLD   $1, Y4, Y6
	VPCMPEQD Y10, Y6, Y6
	VPOR     Y6, Y5, Y7
	VPMINUD  Y7, Y8, Y8
	VPMAXUD  Y5, Y9, Y9
	VMOVDQU  32(DX), Y4
	VPSRLD   $23, Y4, Y5
	VPAND    Y11, Y5, Y5
	VPSLLD   $1, Y4, Y6
	VPCMPEQD Y10, Y6, Y6
	VPOR     Y6, Y5, Y7
	VPMINUD  Y7, Y8, Y8
	VPMAXUD  Y5, Y9, Y9
	VMOVDQU  64(DX), Y4
	VPSRLD   $23, Y4, Y5
	VPAND    Y11, Y5, Y5
	VPSLLD   $1, Y4, Y6
	VPCMPEQD Y10, Y6, Y6
	VPOR     Y6, Y5, Y7
	VPMINUD  Y7, Y8, Y8
	VPMAXUD  Y5, Y9, Y9
	VMOVDQU  96(DX), Y4
	VPSRLD   $23, Y4, Y5
	VPAND    Y11, Y5, Y5
	VPSLLD   $1, Y4, Y6
	VPCMPEQD Y10, Y6, Y6
	VPOR     Y6, Y5, Y7
	VPMINUD  Y7, Y8, Y8
	VPMAXUD  Y5, Y9, Y9
	VEXTRACTI128 $1, Y8, X4
	VPMINUD  X4, X8, X8
	VPSHUFD  $0x4e, X8, X4
	VPMINUD  X4, X8, X8
	VPSHUFD  $0xb1, X8, X4
	VPMINUD  X4, X8, X8
	VMOVD    X8, AX             // emin
	VEXTRACTI128 $1, Y9, X4
	VPMAXUD  X4, X9, X9
	VPSHUFD  $0x4e, X9, X4
	VPMAXUD  X4, X9, X9
	VPSHUFD  $0xb1, X9, X4
	VPMAXUD  X4, X9, X9
	VMOVD    X9, R8             // emax
	MOVQ     $134, R10
	SUBQ     AX, R10            // 134 − emin (AX ≤ 0xffffffff: no wrap)
	MOVQ     $7, AX
	CMPQ     R10, AX
	CMOVQLT  AX, R10            // lo
	MOVQ     $387, R11
	SUBQ     R8, R11            // 387 − emax
	MOVQ     $254, AX
	CMPQ     R11, AX
	CMOVQGT  AX, R11            // hi
	CMPQ     R10, R11
	JGT      tile               // no exponent qualifies
	SUBQ     R10, R11           // width hi − lo
	MOVQ     R10, X4
	VPBROADCASTB X4, Y4
	VMOVDQA  Y4, 320(R15)
	MOVQ     R11, X4
	VPBROADCASTB X4, Y4
	VMOVDQA  Y4, 352(R15)
	MOVQ     $1, fast-16(SP)

tile:
	TESTQ    BX, BX
	JZ       done
	AHEAD(4352, 4, R10) // L1: the tile 4 ahead
	AHEAD(26112, 24, R11) // L2: 24 ahead
	VMOVUPS  (DI), Y0
	VMOVUPS  32(DI), Y1
	VMOVUPS  64(DI), Y2
	VMOVUPS  96(DI), Y3
	CMPQ     fast-16(SP), $0
	JEQ      rows

	// Every exponent E in [lo, lo+width]: E−lo (mod 256) ≤ width.
	VMOVDQU  (SI), Y4
	VMOVDQU  32(SI), Y5
	VPSUBB   320(R15), Y4, Y4
	VPSUBB   320(R15), Y5, Y5
	VPMAXUB  352(R15), Y4, Y4
	VPMAXUB  352(R15), Y5, Y5
	VPCMPEQB 352(R15), Y4, Y4
	VPCMPEQB 352(R15), Y5, Y5
	VPAND    Y5, Y4, Y4
	VPMOVMSKB Y4, AX
	CMPL     AX, $-1
	JNE      rows

	// x·s for the 64 groups, eight at a time: exponent bytes 8b..8b+7 are
	// the left (b/2 even) or right groups of rows 8(b%%2)+16(b/4) onwards.
	VPMOVZXBD (SI), Y4
	VPSUBD   bias8<>(SB), Y4, Y4
	VPSLLD   $23, Y4, Y4
	VMULPS   (DX), Y4, Y4
	VMOVAPS  Y4, 64(R15)
	VPMOVZXBD 8(SI), Y4
	VPSUBD   bias8<>(SB), Y4, Y4
	VPSLLD   $23, Y4, Y4
	VMULPS   32(DX), Y4, Y4
	VMOVAPS  Y4, 96(R15)
	VPMOVZXBD 16(SI), Y4
	VPSUBD   bias8<>(SB), Y4, Y4
	VPSLLD   $23, Y4, Y4
	VMULPS   (DX), Y4, Y4
	VMOVAPS  Y4, 128(R15)
	VPMOVZXBD 24(SI), Y4
	VPSUBD   bias8<>(SB), Y4, Y4
	VPSLLD   $23, Y4, Y4
	VMULPS   32(DX), Y4, Y4
	VMOVAPS  Y4, 160(R15)
	VPMOVZXBD 32(SI), Y4
	VPSUBD   bias8<>(SB), Y4, Y4
	VPSLLD   $23, Y4, Y4
	VMULPS   64(DX), Y4, Y4
	VMOVAPS  Y4, 192(R15)
	VPMOVZXBD 40(SI), Y4
	VPSUBD   bias8<>(SB), Y4, Y4
	VPSLLD   $23, Y4, Y4
	VMULPS   96(DX), Y4, Y4
	VMOVAPS  Y4, 224(R15)
	VPMOVZXBD 48(SI), Y4
	VPSUBD   bias8<>(SB), Y4, Y4
	VPSLLD   $23, Y4, Y4
	VMULPS   64(DX), Y4, Y4
	VMOVAPS  Y4, 256(R15)
	VPMOVZXBD 56(SI), Y4
	VPSUBD   bias8<>(SB), Y4, Y4
	VPSLLD   $23, Y4, Y4
	VMULPS   96(DX), Y4, Y4
	VMOVAPS  Y4, 288(R15)
	PREFETCHT0 0(R10)
	PREFETCHT1 0(R11)
	PAIR8(64, 128, 68, 132, 64, 320)
	PREFETCHT0 64(R10)
	PREFETCHT1 64(R11)
	PAIR8(72, 136, 76, 140, 96, 352)
	PREFETCHT0 128(R10)
	PREFETCHT1 128(R11)
	PAIR8(80, 144, 84, 148, 128, 384)
	PREFETCHT0 192(R10)
	PREFETCHT1 192(R11)
	PAIR8(88, 152, 92, 156, 160, 416)
	PREFETCHT0 256(R10)
	PREFETCHT1 256(R11)
	PAIR8(96, 160, 100, 164, 192, 448)
	PREFETCHT0 320(R10)
	PREFETCHT1 320(R11)
	PAIR8(104, 168, 108, 172, 224, 480)
	PREFETCHT0 384(R10)
	PREFETCHT1 384(R11)
	PAIR8(112, 176, 116, 180, 256, 512)
	PREFETCHT0 448(R10)
	PREFETCHT1 448(R11)
	PAIR8(120, 184, 124, 188, 288, 544)
	PREFETCHT0 512(R10)
	PREFETCHT1 512(R11)
	PAIR8(192, 256, 196, 260, 576, 832)
	PREFETCHT0 576(R10)
	PREFETCHT1 576(R11)
	PAIR8(200, 264, 204, 268, 608, 864)
	PREFETCHT0 640(R10)
	PREFETCHT1 640(R11)
	PAIR8(208, 272, 212, 276, 640, 896)
	PREFETCHT0 704(R10)
	PREFETCHT1 704(R11)
	PAIR8(216, 280, 220, 284, 672, 928)
	PREFETCHT0 768(R10)
	PREFETCHT1 768(R11)
	PAIR8(224, 288, 228, 292, 704, 960)
	PREFETCHT0 832(R10)
	PREFETCHT1 832(R11)
	PAIR8(232, 296, 236, 300, 736, 992)
	PREFETCHT0 896(R10)
	PREFETCHT1 896(R11)
	PAIR8(240, 304, 244, 308, 768, 1024)
	PREFETCHT0 960(R10)
	PREFETCHT1 960(R11)
	PAIR8(248, 312, 252, 316, 800, 1056)
	PREFETCHT0 1024(R10)
	PREFETCHT1 1024(R11)
	JMP      tiledone

	// The general route, one row at a time.
rows:
	// The general route is slow enough for the tile's lines at once.
	PREFETCHT0 0(R10)
	PREFETCHT0 64(R10)
	PREFETCHT0 128(R10)
	PREFETCHT0 192(R10)
	PREFETCHT0 256(R10)
	PREFETCHT0 320(R10)
	PREFETCHT0 384(R10)
	PREFETCHT0 448(R10)
	PREFETCHT0 512(R10)
	PREFETCHT0 576(R10)
	PREFETCHT0 640(R10)
	PREFETCHT0 704(R10)
	PREFETCHT0 768(R10)
	PREFETCHT0 832(R10)
	PREFETCHT0 896(R10)
	PREFETCHT0 960(R10)
	PREFETCHT0 1024(R10)
	MOVQ     SI, R11
	LEAQ     64(SI), R12
	MOVQ     DX, R13
	MOVQ     R9, CX
	MOVQ     $16, R10

row:
	VBROADCASTSS (R13), Y12
	MOVBQZX      (R11), AX
	VBROADCASTSS (R14)(AX*4), Y8
	MOVBQZX      16(R11), R8
	VBROADCASTSS (R14)(R8*4), Y9
	DEC8((R12), Y8, Y4)
	DEC8(8(R12), Y8, Y5)
	DEC8(256(R12), Y9, Y6)
	DEC8(264(R12), Y9, Y7)
	VFMADD231PS  Y12, Y4, Y0
	VFMADD231PS  Y12, Y5, Y1
	VFMADD231PS  Y12, Y6, Y2
	VFMADD231PS  Y12, Y7, Y3
	ADDQ         $4, R13
	INCQ         R11
	ADDQ         $16, R12
	DECQ         CX
	JZ           tiledone
	DECQ         R10
	JNZ          row
	// Rows 16-31 are the bottom faces: groups 32-47 and 48-63.
	ADDQ         $16, R11
	ADDQ         $256, R12
	JMP          row

tiledone:
	VMOVUPS  Y0, (DI)
	VMOVUPS  Y1, 32(DI)
	VMOVUPS  Y2, 64(DI)
	VMOVUPS  Y3, 96(DI)
	ADDQ     $128, DI
	ADDQ     $1088, SI
	DECQ     BX
	JMP      tile

done:
	VZEROUPPER
	RET

// func bfpRow4AVX(acc []float32, t []byte, n int, x []float32, scale *[256]float32, next int)
//
// bfpRow8AVX for BFP4 tiles: in the row loop, codes of g0 at R12, of g0+16
// 128 bytes on.
TEXT ·bfpRow4AVX(SB), NOSPLIT, $448-96
	MOVQ     acc_base+0(FP), DI
	MOVQ     t_base+24(FP), SI
	MOVQ     n+48(FP), BX
	MOVQ     x_base+56(FP), DX
	MOVQ     x_len+64(FP), R9
	MOVQ     scale+80(FP), R14
	TESTQ    R9, R9
	JZ       done
	TESTQ    BX, BX
	JZ       done
	LEAQ     31(SP), R15
	ANDQ     $-32, R15
	VBROADCASTI128 nibmask<>(SB), Y15
	VBROADCASTI128 bfp4lut<>(SB), Y13

	// Bytes from the prefetch address to the tile it must fetch once it
	// has passed the end of this run: the next run starts next bytes on.
	MOVQ     next+88(FP), AX
	MOVQ     BX, R8
	IMULQ    $576, R8
	SUBQ     R8, AX
	MOVQ     AX, gap-8(SP)

	// The fast route's check of x: emin is the lowest exponent field of a
	// non-zero x[r] (zeros are made 0xffffffff, out of the way), emax the
	// highest; E must then lie in [max(3, 130−emin), min(254, 383−emax)].
	MOVQ     $0, fast-16(SP)
	CMPQ     R9, $32
	JNE      tile
	VPXOR    Y10, Y10, Y10
	VBROADCASTI128 maskff<>(SB), Y11
	VPCMPEQD Y8, Y8, Y8        // running minimum
	VPXOR    Y9, Y9, Y9        // running maximum
	VMOVDQU  0(DX), Y4
	VPSRLD   $23, Y4, Y5
	VPAND    Y11, Y5, Y5
	VPSLLD   $1, Y4, Y6
	VPCMPEQD Y10, Y6, Y6
	VPOR     Y6, Y5, Y7
	VPMINUD  Y7, Y8, Y8
	VPMAXUD  Y5, Y9, Y9
	VMOVDQU  32(DX), Y4
	VPSRLD   $23, Y4, Y5
	VPAND    Y11, Y5, Y5
	VPSLLD   $1, Y4, Y6
	VPCMPEQD Y10, Y6, Y6
	VPOR     Y6, Y5, Y7
	VPMINUD  Y7, Y8, Y8
	VPMAXUD  Y5, Y9, Y9
	VMOVDQU  64(DX), Y4
	VPSRLD   $23, Y4, Y5
	VPAND    Y11, Y5, Y5
	VPSLLD   $1, Y4, Y6
	VPCMPEQD Y10, Y6, Y6
	VPOR     Y6, Y5, Y7
	VPMINUD  Y7, Y8, Y8
	VPMAXUD  Y5, Y9, Y9
	VMOVDQU  96(DX), Y4
	VPSRLD   $23, Y4, Y5
	VPAND    Y11, Y5, Y5
	VPSLLD   $1, Y4, Y6
	VPCMPEQD Y10, Y6, Y6
	VPOR     Y6, Y5, Y7
	VPMINUD  Y7, Y8, Y8
	VPMAXUD  Y5, Y9, Y9
	VEXTRACTI128 $1, Y8, X4
	VPMINUD  X4, X8, X8
	VPSHUFD  $0x4e, X8, X4
	VPMINUD  X4, X8, X8
	VPSHUFD  $0xb1, X8, X4
	VPMINUD  X4, X8, X8
	VMOVD    X8, AX             // emin
	VEXTRACTI128 $1, Y9, X4
	VPMAXUD  X4, X9, X9
	VPSHUFD  $0x4e, X9, X4
	VPMAXUD  X4, X9, X9
	VPSHUFD  $0xb1, X9, X4
	VPMAXUD  X4, X9, X9
	VMOVD    X9, R8             // emax
	MOVQ     $130, R10
	SUBQ     AX, R10            // 130 − emin (AX ≤ 0xffffffff: no wrap)
	MOVQ     $3, AX
	CMPQ     R10, AX
	CMOVQLT  AX, R10            // lo
	MOVQ     $383, R11
	SUBQ     R8, R11            // 383 − emax
	MOVQ     $254, AX
	CMPQ     R11, AX
	CMOVQGT  AX, R11            // hi
	CMPQ     R10, R11
	JGT      tile               // no exponent qualifies
	SUBQ     R10, R11           // width hi − lo
	MOVQ     R10, X4
	VPBROADCASTB X4, Y4
	VMOVDQA  Y4, 320(R15)
	MOVQ     R11, X4
	VPBROADCASTB X4, Y4
	VMOVDQA  Y4, 352(R15)
	MOVQ     $1, fast-16(SP)

tile:
	TESTQ    BX, BX
	JZ       done
	AHEAD(2304, 4, R10) // L1: the tile 4 ahead
	AHEAD(13824, 24, R11) // L2: 24 ahead
	VMOVUPS  (DI), Y0
	VMOVUPS  32(DI), Y1
	VMOVUPS  64(DI), Y2
	VMOVUPS  96(DI), Y3
	CMPQ     fast-16(SP), $0
	JEQ      rows

	// Every exponent E in [lo, lo+width]: E−lo (mod 256) ≤ width.
	VMOVDQU  (SI), Y4
	VMOVDQU  32(SI), Y5
	VPSUBB   320(R15), Y4, Y4
	VPSUBB   320(R15), Y5, Y5
	VPMAXUB  352(R15), Y4, Y4
	VPMAXUB  352(R15), Y5, Y5
	VPCMPEQB 352(R15), Y4, Y4
	VPCMPEQB 352(R15), Y5, Y5
	VPAND    Y5, Y4, Y4
	VPMOVMSKB Y4, AX
	CMPL     AX, $-1
	JNE      rows

	// x·s for the 64 groups, eight at a time: exponent bytes 8b..8b+7 are
	// the left (b/2 even) or right groups of rows 8(b%%2)+16(b/4) onwards.
	VPMOVZXBD (SI), Y4
	VPSUBD   bias4<>(SB), Y4, Y4
	VPSLLD   $23, Y4, Y4
	VMULPS   (DX), Y4, Y4
	VMOVAPS  Y4, 64(R15)
	VPMOVZXBD 8(SI), Y4
	VPSUBD   bias4<>(SB), Y4, Y4
	VPSLLD   $23, Y4, Y4
	VMULPS   32(DX), Y4, Y4
	VMOVAPS  Y4, 96(R15)
	VPMOVZXBD 16(SI), Y4
	VPSUBD   bias4<>(SB), Y4, Y4
	VPSLLD   $23, Y4, Y4
	VMULPS   (DX), Y4, Y4
	VMOVAPS  Y4, 128(R15)
	VPMOVZXBD 24(SI), Y4
	VPSUBD   bias4<>(SB), Y4, Y4
	VPSLLD   $23, Y4, Y4
	VMULPS   32(DX), Y4, Y4
	VMOVAPS  Y4, 160(R15)
	VPMOVZXBD 32(SI), Y4
	VPSUBD   bias4<>(SB), Y4, Y4
	VPSLLD   $23, Y4, Y4
	VMULPS   64(DX), Y4, Y4
	VMOVAPS  Y4, 192(R15)
	VPMOVZXBD 40(SI), Y4
	VPSUBD   bias4<>(SB), Y4, Y4
	VPSLLD   $23, Y4, Y4
	VMULPS   96(DX), Y4, Y4
	VMOVAPS  Y4, 224(R15)
	VPMOVZXBD 48(SI), Y4
	VPSUBD   bias4<>(SB), Y4, Y4
	VPSLLD   $23, Y4, Y4
	VMULPS   64(DX), Y4, Y4
	VMOVAPS  Y4, 256(R15)
	VPMOVZXBD 56(SI), Y4
	VPSUBD   bias4<>(SB), Y4, Y4
	VPSLLD   $23, Y4, Y4
	VMULPS   96(DX), Y4, Y4
	VMOVAPS  Y4, 288(R15)
	PREFETCHT0 0(R10)
	PREFETCHT1 0(R11)
	PAIR4(64, 128, 68, 132, 64, 192)
	PAIR4(72, 136, 76, 140, 80, 208)
	PREFETCHT0 64(R10)
	PREFETCHT1 64(R11)
	PAIR4(80, 144, 84, 148, 96, 224)
	PAIR4(88, 152, 92, 156, 112, 240)
	PREFETCHT0 128(R10)
	PREFETCHT1 128(R11)
	PAIR4(96, 160, 100, 164, 128, 256)
	PAIR4(104, 168, 108, 172, 144, 272)
	PREFETCHT0 192(R10)
	PREFETCHT1 192(R11)
	PAIR4(112, 176, 116, 180, 160, 288)
	PAIR4(120, 184, 124, 188, 176, 304)
	PREFETCHT0 256(R10)
	PREFETCHT1 256(R11)
	PAIR4(192, 256, 196, 260, 320, 448)
	PAIR4(200, 264, 204, 268, 336, 464)
	PREFETCHT0 320(R10)
	PREFETCHT1 320(R11)
	PAIR4(208, 272, 212, 276, 352, 480)
	PAIR4(216, 280, 220, 284, 368, 496)
	PREFETCHT0 384(R10)
	PREFETCHT1 384(R11)
	PAIR4(224, 288, 228, 292, 384, 512)
	PAIR4(232, 296, 236, 300, 400, 528)
	PREFETCHT0 448(R10)
	PREFETCHT1 448(R11)
	PAIR4(240, 304, 244, 308, 416, 544)
	PAIR4(248, 312, 252, 316, 432, 560)
	PREFETCHT0 512(R10)
	PREFETCHT1 512(R11)
	JMP      tiledone

	// The general route, one row at a time.
rows:
	// The general route is slow enough for the tile's lines at once.
	PREFETCHT0 0(R10)
	PREFETCHT0 64(R10)
	PREFETCHT0 128(R10)
	PREFETCHT0 192(R10)
	PREFETCHT0 256(R10)
	PREFETCHT0 320(R10)
	PREFETCHT0 384(R10)
	PREFETCHT0 448(R10)
	PREFETCHT0 512(R10)
	MOVQ     SI, R11
	LEAQ     64(SI), R12
	MOVQ     DX, R13
	MOVQ     R9, CX
	MOVQ     $16, R10

row:
	VBROADCASTSS (R13), Y12
	MOVBQZX      (R11), AX
	VBROADCASTSS (R14)(AX*4), Y8
	MOVBQZX      16(R11), R8
	VBROADCASTSS (R14)(R8*4), Y9
	DEC4((R12), Y8, Y4, Y5, X4, X5)
	DEC4(128(R12), Y9, Y6, Y7, X6, X7)
	VFMADD231PS  Y12, Y4, Y0
	VFMADD231PS  Y12, Y5, Y1
	VFMADD231PS  Y12, Y6, Y2
	VFMADD231PS  Y12, Y7, Y3
	ADDQ         $4, R13
	INCQ         R11
	ADDQ         $8, R12
	DECQ         CX
	JZ           tiledone
	DECQ         R10
	JNZ          row
	// Rows 16-31 are the bottom faces: groups 32-47 and 48-63.
	ADDQ         $16, R11
	ADDQ         $128, R12
	JMP          row

tiledone:
	VMOVUPS  Y0, (DI)
	VMOVUPS  Y1, 32(DI)
	VMOVUPS  Y2, 64(DI)
	VMOVUPS  Y3, 96(DI)
	ADDQ     $128, DI
	ADDQ     $576, SI
	DECQ     BX
	JMP      tile

done:
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

// Accumulators of one batch row for one half (16 outputs) of a tile column:
// two ymm loaded from (or stored to) addr and addr32, 32 bytes on.
#define LOADACC(addr, addr32, lo, hi) VMOVUPS addr, lo; VMOVUPS addr32, hi
#define STOREACC(addr, addr32, lo, hi) VMOVUPS lo, addr; VMOVUPS hi, addr32

// One batch row's step of tileFMA6AVX: broadcast its x[r] and fold it, times
// the half tile row in Y12:Y13, into its two accumulators.
#define STEP6(xaddr, lo, hi) VBROADCASTSS xaddr, Y14; VFMADD231PS Y12, Y14, lo; VFMADD231PS Y13, Y14, hi

// func tileFMA6AVX(acc []float32, accStride int, w *[1024]float32, x []float32, xStride, rows, nblk int)
//
// Applies rows rows of a decoded tile to 6·nblk batch rows, six at a time
// and one half tile (16 outputs) at a time. Each tile row half is loaded
// into registers once (Y12:Y13) and used by all six rows, whose twelve
// accumulators (Y0-Y11) stay in registers over the rows: two weight loads
// and six broadcasts feed twelve FMAs, against fifteen loads in tileFMAAVX.
// Every accumulator still takes x[r]·w[r][c] for r = 0, 1, … in order.
// Batch row i of a block is addressed as base + i·stride with i = 0, 1, 2
// from one pointer and 3, 4, 5 from a second one three strides on.
TEXT ·tileFMA6AVX(SB), NOSPLIT, $0-88
	MOVQ acc_base+0(FP), DI
	MOVQ accStride+24(FP), BX
	MOVQ x_base+40(FP), DX
	MOVQ xStride+64(FP), R8
	MOVQ nblk+80(FP), AX
	SHLQ $2, BX
	SHLQ $2, R8
	XORQ R14, R14               // half: 0 or 64 bytes into acc and w rows

block:
	TESTQ AX, AX
	JEQ   done

half:
	LEAQ    (DI)(R14*1), R9     // acc of rows 0-2 of this half
	LEAQ    (BX)(BX*2), R13
	LEAQ    (R9)(R13*1), R12    // acc of rows 3-5
	LOADACC((R9), 32(R9), Y0, Y1)
	LOADACC((R9)(BX*1), 32(R9)(BX*1), Y2, Y3)
	LOADACC((R9)(BX*2), 32(R9)(BX*2), Y4, Y5)
	LOADACC((R12), 32(R12), Y6, Y7)
	LOADACC((R12)(BX*1), 32(R12)(BX*1), Y8, Y9)
	LOADACC((R12)(BX*2), 32(R12)(BX*2), Y10, Y11)
	MOVQ    w+32(FP), SI
	ADDQ    R14, SI
	MOVQ    DX, R10             // x[r] of rows 0-2
	LEAQ    (R8)(R8*2), R13
	LEAQ    (DX)(R13*1), R11    // x[r] of rows 3-5
	MOVQ    rows+72(FP), CX
	TESTQ   CX, CX
	JEQ     store

loop:
	VMOVUPS (SI), Y12
	VMOVUPS 32(SI), Y13
	STEP6((R10), Y0, Y1)
	STEP6((R10)(R8*1), Y2, Y3)
	STEP6((R10)(R8*2), Y4, Y5)
	STEP6((R11), Y6, Y7)
	STEP6((R11)(R8*1), Y8, Y9)
	STEP6((R11)(R8*2), Y10, Y11)
	ADDQ    $128, SI
	ADDQ    $4, R10
	ADDQ    $4, R11
	DECQ    CX
	JNE     loop

store:
	STOREACC((R9), 32(R9), Y0, Y1)
	STOREACC((R9)(BX*1), 32(R9)(BX*1), Y2, Y3)
	STOREACC((R9)(BX*2), 32(R9)(BX*2), Y4, Y5)
	STOREACC((R12), 32(R12), Y6, Y7)
	STOREACC((R12)(BX*1), 32(R12)(BX*1), Y8, Y9)
	STOREACC((R12)(BX*2), 32(R12)(BX*2), Y10, Y11)
	XORQ    $64, R14
	JNE     half

	// Both halves done (R14 back to 0): the next six batch rows.
	LEAQ (BX)(BX*2), R13
	LEAQ (DI)(R13*2), DI
	LEAQ (R8)(R8*2), R13
	LEAQ (DX)(R13*2), DX
	DECQ AX
	JMP  block

done:
	VZEROUPPER
	RET
