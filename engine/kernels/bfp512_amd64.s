//go:build amd64 && !purego

#include "textflag.h"

// The BFP4 row kernel for CPUs with AVX-512 (F and BW), fast route only:
// the tile's x·s are precomputed as in bfpRow4AVX (bfp_amd64.s says when
// that is exact), and a code becomes its weight ±q as a float32 by one
// table lookup instead of a widening and a conversion. One 512-bit
// register holds the 16 columns of one exponent group of one row, so one
// broadcast of x·s serves it, and four tiles run side by side: eight
// independent accumulator chains hide the latency of the fused
// multiply-add that a single tile's two chains would wait on.
//
// Decoding 16 codes (the 8 bytes of one group row, codes 2i and 2i+1 in
// the low and high nibble of byte i) to 16 floats: broadcast the 8 bytes
// to all eight quadwords, shift quadword L right by 4L bits, so that its
// low doubleword starts with nibble L and its high doubleword with nibble
// L+8, and look each doubleword's low 4 bits up in the 16-entry table of
// the values ±q (VPERMPS ignores the index bits above 3). Lane 2L thus
// holds column L and lane 2L+1 column L+8; the accumulators are kept in
// that order inside the kernel and permuted back to column order when
// they are stored, so the caller sees column order.

// bfp4val[c] is the value ±q of BFP4 code c; code 8 (never emitted) is +0,
// as decodeBFP decodes it.
DATA bfp4val<>+0(SB)/4, $0x00000000
DATA bfp4val<>+4(SB)/4, $0x3f800000
DATA bfp4val<>+8(SB)/4, $0x40000000
DATA bfp4val<>+12(SB)/4, $0x40400000
DATA bfp4val<>+16(SB)/4, $0x40800000
DATA bfp4val<>+20(SB)/4, $0x40a00000
DATA bfp4val<>+24(SB)/4, $0x40c00000
DATA bfp4val<>+28(SB)/4, $0x40e00000
DATA bfp4val<>+32(SB)/4, $0x00000000
DATA bfp4val<>+36(SB)/4, $0xbf800000
DATA bfp4val<>+40(SB)/4, $0xc0000000
DATA bfp4val<>+44(SB)/4, $0xc0400000
DATA bfp4val<>+48(SB)/4, $0xc0800000
DATA bfp4val<>+52(SB)/4, $0xc0a00000
DATA bfp4val<>+56(SB)/4, $0xc0c00000
DATA bfp4val<>+60(SB)/4, $0xc0e00000
GLOBL bfp4val<>(SB), RODATA|NOPTR, $64

// nibshift[L] = 4L, the right shift of quadword L.
DATA nibshift<>+0(SB)/8, $0
DATA nibshift<>+8(SB)/8, $4
DATA nibshift<>+16(SB)/8, $8
DATA nibshift<>+24(SB)/8, $12
DATA nibshift<>+32(SB)/8, $16
DATA nibshift<>+40(SB)/8, $20
DATA nibshift<>+48(SB)/8, $24
DATA nibshift<>+56(SB)/8, $28
GLOBL nibshift<>(SB), RODATA|NOPTR, $64

// lanecol[i] = i/2 + 8(i%2), the column lane i holds: loads column order
// into lane order.
DATA lanecol<>+0(SB)/4, $0
DATA lanecol<>+4(SB)/4, $8
DATA lanecol<>+8(SB)/4, $1
DATA lanecol<>+12(SB)/4, $9
DATA lanecol<>+16(SB)/4, $2
DATA lanecol<>+20(SB)/4, $10
DATA lanecol<>+24(SB)/4, $3
DATA lanecol<>+28(SB)/4, $11
DATA lanecol<>+32(SB)/4, $4
DATA lanecol<>+36(SB)/4, $12
DATA lanecol<>+40(SB)/4, $5
DATA lanecol<>+44(SB)/4, $13
DATA lanecol<>+48(SB)/4, $6
DATA lanecol<>+52(SB)/4, $14
DATA lanecol<>+56(SB)/4, $7
DATA lanecol<>+60(SB)/4, $15
GLOBL lanecol<>(SB), RODATA|NOPTR, $64

// collane[c] = 2(c%8) + c/8, the lane that holds column c: stores lane
// order back in column order.
DATA collane<>+0(SB)/4, $0
DATA collane<>+4(SB)/4, $2
DATA collane<>+8(SB)/4, $4
DATA collane<>+12(SB)/4, $6
DATA collane<>+16(SB)/4, $8
DATA collane<>+20(SB)/4, $10
DATA collane<>+24(SB)/4, $12
DATA collane<>+28(SB)/4, $14
DATA collane<>+32(SB)/4, $1
DATA collane<>+36(SB)/4, $3
DATA collane<>+40(SB)/4, $5
DATA collane<>+44(SB)/4, $7
DATA collane<>+48(SB)/4, $9
DATA collane<>+52(SB)/4, $11
DATA collane<>+56(SB)/4, $13
DATA collane<>+60(SB)/4, $15
GLOBL collane<>(SB), RODATA|NOPTR, $64

DATA bias4d<>+0(SB)/4, $2
GLOBL bias4d<>(SB), RODATA|NOPTR, $4

// XS4 computes x·s for the 16 groups whose exponents are the 16 bytes at
// off(SI)+16q of tile j, with the 16 inputs xr (x[0:16] for q = 0, 1,
// x[16:32] for q = 2, 3), into the scratch at R15 + 256j + 64q.
#define XS4(j, q, xr) \
	VPMOVZXBD     (576*j+16*q)(SI), Z16; \
	VPSUBD.BCST   bias4d<>(SB), Z16, Z16; \
	VPSLLD        $23, Z16, Z16; \
	VMULPS        xr, Z16, Z16; \
	VMOVUPS       Z16, (256*j+64*q)(R15)

// GROUP decodes the group row whose codes are at cofs(CX) in tile j and
// fuses it into accumulator acc with x·s from xofs(R8) of that tile.
#define GROUP(j, cofs, xofs, tmp, acc) \
	VPBROADCASTQ          (576*j+cofs)(CX), tmp; \
	VPSRLVQ               Z28, tmp, tmp; \
	VPERMPS               Z29, tmp, tmp; \
	VFMADD231PS.BCST      (256*j+xofs)(R8), tmp, acc

// ROW4 runs one tile row of the four tiles: the left group's codes at
// cofs, the right group's 128 bytes on; x·s at xofs and 64 bytes on.
#define ROW4(cofs, xofs) \
	GROUP(0, cofs, xofs, Z16, Z0); \
	GROUP(0, cofs+128, xofs+64, Z17, Z1); \
	GROUP(1, cofs, xofs, Z18, Z2); \
	GROUP(1, cofs+128, xofs+64, Z19, Z3); \
	GROUP(2, cofs, xofs, Z20, Z4); \
	GROUP(2, cofs+128, xofs+64, Z21, Z5); \
	GROUP(3, cofs, xofs, Z22, Z6); \
	GROUP(3, cofs+128, xofs+64, Z23, Z7)

// AHEAD sets reg to the address ahead bytes past the quad at SI or, when
// no more than tiles tiles are left (BX), to its place in the next run
// (R14 the gap between the runs): where the quad kernels prefetch. It uses
// R8.
#define AHEAD(ahead, tiles, reg) \
	LEAQ    ahead(SI), reg; \
	LEAQ    (reg)(R14*1), R8; \
	CMPQ    BX, $tiles; \
	CMOVQLE R8, reg

// func bfpRow4Quads(acc []float32, t []byte, n int, x *[32]float32, lo, width, next int, xs *[256]float32) int
//
// bfpRowGo(BFP4, ...) with 32 rows on the fast route, four tiles at a
// time: it runs the quads of tiles in order while every exponent E of the
// quad satisfies (E − lo) mod 256 ≤ width, and returns how many tiles it
// ran (a multiple of 4); the caller runs the quad it stopped at, and the
// last n%4 tiles, on another kernel. lo and width come from x as in
// bfpRow4AVX. xs is scratch for the quad's x·s.
//
// Two prefetch streams run ahead of the quad (in the next run, next bytes
// from t, once past this one): the next quad into L1 and the sixth quad
// on into L2, spread over the quad's steps (a line of each per row) rather
// than issued at once, since a burst of prefetches fills the core's
// line-fill buffers and stalls the arithmetic behind it. The far stream
// keeps the L2 streamer's requests in flight beyond those buffers (on
// BenchmarkMatVecCold, bw_frac 0.71 → 0.82 for BFP8 on one thread).
//
// Registers: DI acc of the quad, SI the quad's tiles, BX tiles left, R12
// tiles done, R14 the prefetch gap, R15 xs, R13 and R10 the next lines of
// the L1 and L2 prefetch streams; per row CX codes, R8 x·s, R9 rows left; Z0-Z7 accumulators (tile j's left and right group in
// Z(2j), Z(2j+1)), Z16-Z23 temporaries, Z24/Z25 x[0:16]/x[16:32], Z26 lo,
// Z27 width (bytes), Z28 shifts, Z29 the code table, Z30/Z31 the lane and
// column permutations.
TEXT ·bfpRow4Quads(SB), NOSPLIT, $0-104
	MOVQ     acc_base+0(FP), DI
	MOVQ     t_base+24(FP), SI
	MOVQ     n+48(FP), BX
	MOVQ     x+56(FP), DX
	MOVQ     xs+88(FP), R15
	XORQ     R12, R12
	MOVQ     next+80(FP), R14
	MOVQ     BX, AX
	IMULQ    $576, AX
	SUBQ     AX, R14           // gap: next run start − this run's end
	VMOVUPS  (DX), Z24
	VMOVUPS  64(DX), Z25
	MOVQ     lo+64(FP), AX
	VPBROADCASTB AX, Z26
	MOVQ     width+72(FP), AX
	VPBROADCASTB AX, Z27
	VMOVUPS  nibshift<>(SB), Z28
	VMOVUPS  bfp4val<>(SB), Z29
	VMOVUPS  lanecol<>(SB), Z30
	VMOVUPS  collane<>(SB), Z31

quad:
	CMPQ     BX, $4
	JLT      out
	// Every exponent of the four tiles in [lo, lo+width] (mod 256).
	KXNORQ   K2, K2, K2
	VMOVDQU8 (SI), Z16
	VPSUBB   Z26, Z16, Z16
	VPCMPUB  $2, Z27, Z16, K1
	KANDQ    K1, K2, K2
	VMOVDQU8 576(SI), Z16
	VPSUBB   Z26, Z16, Z16
	VPCMPUB  $2, Z27, Z16, K1
	KANDQ    K1, K2, K2
	VMOVDQU8 1152(SI), Z16
	VPSUBB   Z26, Z16, Z16
	VPCMPUB  $2, Z27, Z16, K1
	KANDQ    K1, K2, K2
	VMOVDQU8 1728(SI), Z16
	VPSUBB   Z26, Z16, Z16
	VPCMPUB  $2, Z27, Z16, K1
	KANDQ    K1, K2, K2
	KORTESTQ K2, K2
	JCC      out               // not all ones

	// Prefetch the next quad into L1 (R13) and the sixth one on into L2
	// (R10), or their places in the next run.
	AHEAD(2304, 4, R13)
	PREFETCHT0 2048(R13)
	PREFETCHT0 2112(R13)
	PREFETCHT0 2176(R13)
	PREFETCHT0 2240(R13)
	AHEAD(13824, 24, R10)
	PREFETCHT1 2048(R10)
	PREFETCHT1 2112(R10)
	PREFETCHT1 2176(R10)
	PREFETCHT1 2240(R10)

	// x·s of the 64 groups of each tile: groups 0-15 and 16-31 are the
	// left and right groups of rows 0-15, 32-47 and 48-63 of rows 16-31.
	XS4(0, 0, Z24)
	XS4(0, 1, Z24)
	XS4(0, 2, Z25)
	XS4(0, 3, Z25)
	XS4(1, 0, Z24)
	XS4(1, 1, Z24)
	XS4(1, 2, Z25)
	XS4(1, 3, Z25)
	XS4(2, 0, Z24)
	XS4(2, 1, Z24)
	XS4(2, 2, Z25)
	XS4(2, 3, Z25)
	XS4(3, 0, Z24)
	XS4(3, 1, Z24)
	XS4(3, 2, Z25)
	XS4(3, 3, Z25)

	// Accumulators into lane order.
	VPERMPS  (DI), Z30, Z0
	VPERMPS  64(DI), Z30, Z1
	VPERMPS  128(DI), Z30, Z2
	VPERMPS  192(DI), Z30, Z3
	VPERMPS  256(DI), Z30, Z4
	VPERMPS  320(DI), Z30, Z5
	VPERMPS  384(DI), Z30, Z6
	VPERMPS  448(DI), Z30, Z7

	// Rows 0-15: left group r (codes at 64+8r), right group r+16; rows
	// 16-31: left group r+16 (codes at 320+8(r−16)), right r+32. x·s of
	// group g at 4g.
	MOVQ     SI, CX
	MOVQ     R15, R8
	MOVQ     $16, R9
top:
	ROW4(64, 0)
	PREFETCHT0 (R13)
	ADDQ     $64, R13
	PREFETCHT1 (R10)
	ADDQ     $64, R10
	ADDQ     $8, CX
	ADDQ     $4, R8
	DECQ     R9
	JNZ      top
	MOVQ     SI, CX
	MOVQ     R15, R8
	MOVQ     $16, R9
bottom:
	ROW4(320, 128)
	PREFETCHT0 (R13)
	ADDQ     $64, R13
	PREFETCHT1 (R10)
	ADDQ     $64, R10
	ADDQ     $8, CX
	ADDQ     $4, R8
	DECQ     R9
	JNZ      bottom

	// Accumulators back into column order.
	VPERMPS  Z0, Z31, Z0
	VPERMPS  Z1, Z31, Z1
	VPERMPS  Z2, Z31, Z2
	VPERMPS  Z3, Z31, Z3
	VPERMPS  Z4, Z31, Z4
	VPERMPS  Z5, Z31, Z5
	VPERMPS  Z6, Z31, Z6
	VPERMPS  Z7, Z31, Z7
	VMOVUPS  Z0, (DI)
	VMOVUPS  Z1, 64(DI)
	VMOVUPS  Z2, 128(DI)
	VMOVUPS  Z3, 192(DI)
	VMOVUPS  Z4, 256(DI)
	VMOVUPS  Z5, 320(DI)
	VMOVUPS  Z6, 384(DI)
	VMOVUPS  Z7, 448(DI)

	ADDQ     $512, DI
	ADDQ     $2304, SI
	SUBQ     $4, BX
	ADDQ     $4, R12
	JMP      quad

out:
	MOVQ     R12, ret+96(FP)
	VZEROUPPER
	RET

// The BFP8 row kernel for CPUs with AVX-512 (F and BW), fast route only,
// four tiles at a time like bfpRow4Quads. A code byte (sign bit 7, 7-bit
// magnitude) becomes the signed byte ±q (0x80 gives 0) for four rows' 64
// codes at once (mask off the sign, negate where it was set), is parked in
// the scratch, and is widened and converted 16 at a time; the columns stay
// in order.

DATA bias8d<>+0(SB)/4, $6
GLOBL bias8d<>(SB), RODATA|NOPTR, $4

DATA bytes80<>+0(SB)/4, $0x80808080
GLOBL bytes80<>(SB), RODATA|NOPTR, $4

// XS8 is XS4 for BFP8 tiles (1088 bytes, step 2^(E−133)).
#define XS8(j, q, xr) \
	VPMOVZXBD     (1088*j+16*q)(SI), Z16; \
	VPSUBD.BCST   bias8d<>(SB), Z16, Z16; \
	VPSLLD        $23, Z16, Z16; \
	VMULPS        xr, Z16, Z16; \
	VMOVUPS       Z16, (256*j+64*q)(R15)

// SIGN8 turns the 64 codes at cofs(CX) of tile j into signed bytes ±q at
// sofs(R11): a negative code 0x80|q becomes 0x80 − code = −q (mod 256).
// Z28 holds 0x80 in every byte.
#define SIGN8(j, cofs, sofs, tmp, kk) \
	VMOVDQU8   (1088*j+cofs)(CX), tmp; \
	VPMOVB2M   tmp, kk; \
	VPSUBB     tmp, Z28, kk, tmp; \
	VMOVDQU64  tmp, sofs(R11)

// FMA8 widens the 16 signed bytes at sofs(R11), converts them and fuses
// them into acc with the x·s at xofs(R8) of tile j.
#define FMA8(j, sofs, xofs, tmp, acc) \
	VPMOVSXBD         sofs(R11), tmp; \
	VCVTDQ2PS         tmp, tmp; \
	VFMADD231PS.BCST  (256*j+xofs)(R8), tmp, acc

// SROW8 signs four tile rows of the four tiles, row i's left group codes
// at cofs+16i and the right group's 256 bytes on, into the scratch at
// sbase(R11).
#define SROW8(cofs, sbase) \
	SIGN8(0, cofs+0, sbase+0, Z16, K1); \
	SIGN8(0, cofs+256, sbase+64, Z17, K2); \
	SIGN8(1, cofs+0, sbase+128, Z18, K3); \
	SIGN8(1, cofs+256, sbase+192, Z19, K4); \
	SIGN8(2, cofs+0, sbase+256, Z20, K5); \
	SIGN8(2, cofs+256, sbase+320, Z21, K6); \
	SIGN8(3, cofs+0, sbase+384, Z22, K7); \
	SIGN8(3, cofs+256, sbase+448, Z23, K1)

// FROW8 runs the four tile rows SROW8 signed into sbase(R11) with the x·s
// at xofs(R8) (row i's at xofs+4i, the right group's 64 bytes on).
#define FROW8(sbase, xofs) \
	FMA8(0, sbase+0, xofs+0, Z16, Z0); \
	FMA8(0, sbase+64, xofs+64, Z17, Z1); \
	FMA8(1, sbase+128, xofs+0, Z18, Z2); \
	FMA8(1, sbase+192, xofs+64, Z19, Z3); \
	FMA8(2, sbase+256, xofs+0, Z20, Z4); \
	FMA8(2, sbase+320, xofs+64, Z21, Z5); \
	FMA8(3, sbase+384, xofs+0, Z22, Z6); \
	FMA8(3, sbase+448, xofs+64, Z23, Z7); \
	FMA8(0, sbase+16, xofs+4, Z16, Z0); \
	FMA8(0, sbase+80, xofs+68, Z17, Z1); \
	FMA8(1, sbase+144, xofs+4, Z18, Z2); \
	FMA8(1, sbase+208, xofs+68, Z19, Z3); \
	FMA8(2, sbase+272, xofs+4, Z20, Z4); \
	FMA8(2, sbase+336, xofs+68, Z21, Z5); \
	FMA8(3, sbase+400, xofs+4, Z22, Z6); \
	FMA8(3, sbase+464, xofs+68, Z23, Z7); \
	FMA8(0, sbase+32, xofs+8, Z16, Z0); \
	FMA8(0, sbase+96, xofs+72, Z17, Z1); \
	FMA8(1, sbase+160, xofs+8, Z18, Z2); \
	FMA8(1, sbase+224, xofs+72, Z19, Z3); \
	FMA8(2, sbase+288, xofs+8, Z20, Z4); \
	FMA8(2, sbase+352, xofs+72, Z21, Z5); \
	FMA8(3, sbase+416, xofs+8, Z22, Z6); \
	FMA8(3, sbase+480, xofs+72, Z23, Z7); \
	FMA8(0, sbase+48, xofs+12, Z16, Z0); \
	FMA8(0, sbase+112, xofs+76, Z17, Z1); \
	FMA8(1, sbase+176, xofs+12, Z18, Z2); \
	FMA8(1, sbase+240, xofs+76, Z19, Z3); \
	FMA8(2, sbase+304, xofs+12, Z20, Z4); \
	FMA8(2, sbase+368, xofs+76, Z21, Z5); \
	FMA8(3, sbase+432, xofs+12, Z22, Z6); \
	FMA8(3, sbase+496, xofs+76, Z23, Z7)

// func bfpRow8Quads(acc []float32, t []byte, n int, x *[32]float32, lo, width, next int, xs *[512]float32) int
//
// bfpRow4Quads for BFP8 tiles: lo and width come from x as in
// bfpRow8AVX; xs is scratch for the quad's x·s (1 KiB) and two halves of
// signed codes (512 bytes each, one being written while the other is
// read). Prefetching as in bfpRow4Quads, nine lines of each stream per
// step.
//
// Registers as in bfpRow4Quads, and R11 the signed codes' scratch; Z28
// 0x80 bytes.
TEXT ·bfpRow8Quads(SB), NOSPLIT, $0-104
	MOVQ     acc_base+0(FP), DI
	MOVQ     t_base+24(FP), SI
	MOVQ     n+48(FP), BX
	MOVQ     x+56(FP), DX
	MOVQ     xs+88(FP), R15
	LEAQ     1024(R15), R11
	XORQ     R12, R12
	MOVQ     next+80(FP), R14
	MOVQ     BX, AX
	IMULQ    $1088, AX
	SUBQ     AX, R14           // gap: next run start − this run's end
	VMOVUPS  (DX), Z24
	VMOVUPS  64(DX), Z25
	MOVQ     lo+64(FP), AX
	VPBROADCASTB AX, Z26
	MOVQ     width+72(FP), AX
	VPBROADCASTB AX, Z27
	VPBROADCASTD bytes80<>(SB), Z28

quad8:
	CMPQ     BX, $4
	JLT      out8
	KXNORQ   K2, K2, K2
	VMOVDQU8 (SI), Z16
	VPSUBB   Z26, Z16, Z16
	VPCMPUB  $2, Z27, Z16, K1
	KANDQ    K1, K2, K2
	VMOVDQU8 1088(SI), Z16
	VPSUBB   Z26, Z16, Z16
	VPCMPUB  $2, Z27, Z16, K1
	KANDQ    K1, K2, K2
	VMOVDQU8 2176(SI), Z16
	VPSUBB   Z26, Z16, Z16
	VPCMPUB  $2, Z27, Z16, K1
	KANDQ    K1, K2, K2
	VMOVDQU8 3264(SI), Z16
	VPSUBB   Z26, Z16, Z16
	VPCMPUB  $2, Z27, Z16, K1
	KANDQ    K1, K2, K2
	KORTESTQ K2, K2
	JCC      out8

	// Prefetch the next quad into L1 (R13) and the sixth one on into L2
	// (R10), or their places in the next run.
	AHEAD(4352, 4, R13)
	AHEAD(26112, 24, R10)

	XS8(0, 0, Z24)
	XS8(0, 1, Z24)
	XS8(0, 2, Z25)
	XS8(0, 3, Z25)
	XS8(1, 0, Z24)
	XS8(1, 1, Z24)
	XS8(1, 2, Z25)
	XS8(1, 3, Z25)
	XS8(2, 0, Z24)
	XS8(2, 1, Z24)
	XS8(2, 2, Z25)
	XS8(2, 3, Z25)
	XS8(3, 0, Z24)
	XS8(3, 1, Z24)
	XS8(3, 2, Z25)
	XS8(3, 3, Z25)

	VMOVUPS  0(DI), Z0
	VMOVUPS  64(DI), Z1
	VMOVUPS  128(DI), Z2
	VMOVUPS  192(DI), Z3
	VMOVUPS  256(DI), Z4
	VMOVUPS  320(DI), Z5
	VMOVUPS  384(DI), Z6
	VMOVUPS  448(DI), Z7

	// Eight steps of four tile rows each: rows 4i..4i+3 of every tile,
	// codes of row block i at cofs = 64+64i (top faces, i < 4) or
	// 576+64(i−4) (bottom faces), x·s at xofs = 16i or 128+16(i−4).
	// Step i signs row block i+1's codes into the scratch half the next
	// step reads, so that the reloads come long after the stores.
	MOVQ     SI, CX
	MOVQ     R15, R8
	SROW8(64, 0)
	SROW8(128, 512)
	FROW8(0, 0)
	PREFETCHT0 0(R13)
	PREFETCHT0 64(R13)
	PREFETCHT0 128(R13)
	PREFETCHT0 192(R13)
	PREFETCHT0 256(R13)
	PREFETCHT0 320(R13)
	PREFETCHT0 384(R13)
	PREFETCHT0 448(R13)
	PREFETCHT0 512(R13)
	ADDQ     $576, R13
	PREFETCHT1 0(R10)
	PREFETCHT1 64(R10)
	PREFETCHT1 128(R10)
	PREFETCHT1 192(R10)
	PREFETCHT1 256(R10)
	PREFETCHT1 320(R10)
	PREFETCHT1 384(R10)
	PREFETCHT1 448(R10)
	PREFETCHT1 512(R10)
	ADDQ     $576, R10
	SROW8(192, 0)
	FROW8(512, 16)
	PREFETCHT0 0(R13)
	PREFETCHT0 64(R13)
	PREFETCHT0 128(R13)
	PREFETCHT0 192(R13)
	PREFETCHT0 256(R13)
	PREFETCHT0 320(R13)
	PREFETCHT0 384(R13)
	PREFETCHT0 448(R13)
	PREFETCHT0 512(R13)
	ADDQ     $576, R13
	PREFETCHT1 0(R10)
	PREFETCHT1 64(R10)
	PREFETCHT1 128(R10)
	PREFETCHT1 192(R10)
	PREFETCHT1 256(R10)
	PREFETCHT1 320(R10)
	PREFETCHT1 384(R10)
	PREFETCHT1 448(R10)
	PREFETCHT1 512(R10)
	ADDQ     $576, R10
	SROW8(256, 512)
	FROW8(0, 32)
	PREFETCHT0 0(R13)
	PREFETCHT0 64(R13)
	PREFETCHT0 128(R13)
	PREFETCHT0 192(R13)
	PREFETCHT0 256(R13)
	PREFETCHT0 320(R13)
	PREFETCHT0 384(R13)
	PREFETCHT0 448(R13)
	PREFETCHT0 512(R13)
	ADDQ     $576, R13
	PREFETCHT1 0(R10)
	PREFETCHT1 64(R10)
	PREFETCHT1 128(R10)
	PREFETCHT1 192(R10)
	PREFETCHT1 256(R10)
	PREFETCHT1 320(R10)
	PREFETCHT1 384(R10)
	PREFETCHT1 448(R10)
	PREFETCHT1 512(R10)
	ADDQ     $576, R10
	SROW8(576, 0)
	FROW8(512, 48)
	PREFETCHT0 0(R13)
	PREFETCHT0 64(R13)
	PREFETCHT0 128(R13)
	PREFETCHT0 192(R13)
	PREFETCHT0 256(R13)
	PREFETCHT0 320(R13)
	PREFETCHT0 384(R13)
	PREFETCHT0 448(R13)
	PREFETCHT0 512(R13)
	ADDQ     $576, R13
	PREFETCHT1 0(R10)
	PREFETCHT1 64(R10)
	PREFETCHT1 128(R10)
	PREFETCHT1 192(R10)
	PREFETCHT1 256(R10)
	PREFETCHT1 320(R10)
	PREFETCHT1 384(R10)
	PREFETCHT1 448(R10)
	PREFETCHT1 512(R10)
	ADDQ     $576, R10
	SROW8(640, 512)
	FROW8(0, 128)
	PREFETCHT0 0(R13)
	PREFETCHT0 64(R13)
	PREFETCHT0 128(R13)
	PREFETCHT0 192(R13)
	PREFETCHT0 256(R13)
	PREFETCHT0 320(R13)
	PREFETCHT0 384(R13)
	PREFETCHT0 448(R13)
	PREFETCHT0 512(R13)
	ADDQ     $576, R13
	PREFETCHT1 0(R10)
	PREFETCHT1 64(R10)
	PREFETCHT1 128(R10)
	PREFETCHT1 192(R10)
	PREFETCHT1 256(R10)
	PREFETCHT1 320(R10)
	PREFETCHT1 384(R10)
	PREFETCHT1 448(R10)
	PREFETCHT1 512(R10)
	ADDQ     $576, R10
	SROW8(704, 0)
	FROW8(512, 144)
	PREFETCHT0 0(R13)
	PREFETCHT0 64(R13)
	PREFETCHT0 128(R13)
	PREFETCHT0 192(R13)
	PREFETCHT0 256(R13)
	PREFETCHT0 320(R13)
	PREFETCHT0 384(R13)
	PREFETCHT0 448(R13)
	PREFETCHT0 512(R13)
	ADDQ     $576, R13
	PREFETCHT1 0(R10)
	PREFETCHT1 64(R10)
	PREFETCHT1 128(R10)
	PREFETCHT1 192(R10)
	PREFETCHT1 256(R10)
	PREFETCHT1 320(R10)
	PREFETCHT1 384(R10)
	PREFETCHT1 448(R10)
	PREFETCHT1 512(R10)
	ADDQ     $576, R10
	SROW8(768, 512)
	FROW8(0, 160)
	PREFETCHT0 0(R13)
	PREFETCHT0 64(R13)
	PREFETCHT0 128(R13)
	PREFETCHT0 192(R13)
	PREFETCHT0 256(R13)
	PREFETCHT0 320(R13)
	PREFETCHT0 384(R13)
	PREFETCHT0 448(R13)
	PREFETCHT0 512(R13)
	ADDQ     $576, R13
	PREFETCHT1 0(R10)
	PREFETCHT1 64(R10)
	PREFETCHT1 128(R10)
	PREFETCHT1 192(R10)
	PREFETCHT1 256(R10)
	PREFETCHT1 320(R10)
	PREFETCHT1 384(R10)
	PREFETCHT1 448(R10)
	PREFETCHT1 512(R10)
	ADDQ     $576, R10
	FROW8(512, 176)
	PREFETCHT0 0(R13)
	PREFETCHT0 64(R13)
	PREFETCHT0 128(R13)
	PREFETCHT0 192(R13)
	PREFETCHT0 256(R13)
	PREFETCHT0 320(R13)
	PREFETCHT0 384(R13)
	PREFETCHT0 448(R13)
	PREFETCHT0 512(R13)
	ADDQ     $576, R13
	PREFETCHT1 0(R10)
	PREFETCHT1 64(R10)
	PREFETCHT1 128(R10)
	PREFETCHT1 192(R10)
	PREFETCHT1 256(R10)
	PREFETCHT1 320(R10)
	PREFETCHT1 384(R10)
	PREFETCHT1 448(R10)
	PREFETCHT1 512(R10)
	ADDQ     $576, R10

	VMOVUPS  Z0, 0(DI)
	VMOVUPS  Z1, 64(DI)
	VMOVUPS  Z2, 128(DI)
	VMOVUPS  Z3, 192(DI)
	VMOVUPS  Z4, 256(DI)
	VMOVUPS  Z5, 320(DI)
	VMOVUPS  Z6, 384(DI)
	VMOVUPS  Z7, 448(DI)

	ADDQ     $512, DI
	ADDQ     $4352, SI
	SUBQ     $4, BX
	ADDQ     $4, R12
	JMP      quad8

out8:
	MOVQ     R12, ret+96(FP)
	VZEROUPPER
	RET

// func tileBitsZ(x *float32, n int, bits *[2]uint32)
//
// For each of n runs of 32 float32 at x: bits[2i] is the largest magnitude
// (the bits without the sign) and bits[2i+1] the least magnitude minus one
// as an unsigned integer, so that zeros (magnitude 0, minus one the
// largest) are never the least (fastRange's emax and emin, from tileBits).
TEXT ·tileBitsZ(SB), NOSPLIT, $0-24
	MOVQ          x+0(FP), SI
	MOVQ          n+8(FP), CX
	MOVQ          bits+16(FP), DI
	MOVL          $0x7fffffff, AX
	VPBROADCASTD  AX, Z31
	VPTERNLOGD    $0xff, Z30, Z30, Z30 // every lane −1
	TESTQ         CX, CX
	JLE           bitsdone

bitsloop:
	VPANDD        (SI), Z31, Z0
	VPANDD        64(SI), Z31, Z1
	VPMAXUD       Z0, Z1, Z2
	VPADDD        Z30, Z0, Z0
	VPADDD        Z30, Z1, Z1
	VPMINUD       Z0, Z1, Z3
	VEXTRACTI64X4 $1, Z2, Y4
	VPMAXUD       Y4, Y2, Y2
	VEXTRACTI64X4 $1, Z3, Y5
	VPMINUD       Y5, Y3, Y3
	VEXTRACTI128  $1, Y2, X4
	VPMAXUD       X4, X2, X2
	VEXTRACTI128  $1, Y3, X5
	VPMINUD       X5, X3, X3
	VPSHUFD       $0x4e, X2, X4
	VPMAXUD       X4, X2, X2
	VPSHUFD       $0x4e, X3, X5
	VPMINUD       X5, X3, X3
	VPSHUFD       $0xb1, X2, X4
	VPMAXUD       X4, X2, X2
	VPSHUFD       $0xb1, X3, X5
	VPMINUD       X5, X3, X3
	VMOVD         X2, (DI)
	VMOVD         X3, 4(DI)
	ADDQ          $128, SI
	ADDQ          $8, DI
	DECQ          CX
	JNZ           bitsloop

bitsdone:
	VZEROUPPER
	RET
