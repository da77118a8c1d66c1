//go:build amd64 && !purego

#include "textflag.h"
#include "attn512_amd64.h"

// The tile kernels of attention with AVX-512 (F): attntile.go.

// tnNaN is the default NaN that colMaxZ returns for a column with one.
DATA tnNaN<>+0(SB)/4, $0x7fc00000
GLOBL tnNaN<>(SB), RODATA|NOPTR, $4

// func attnScores16Z(sc []float32, scStride int, keys []float32, keyStride, cnt int, q []float32, d int, scale float32, perm *[16]int32)
//
// For each of cnt keys: Z0–Z15 run the 16 lanes of dotF32Go for the 16
// queries (lane i%16 of query l takes fma(k[i], q_l[i], ·) in increasing
// i), one key chunk loaded once for all of them; then a transposing add
// tree sums every query's lanes with reduce16's additions (j+8, then j+4,
// j+2, j+1), four queries' worth per instruction; VPERMPS puts the 16 sums
// in query order, and they are multiplied by scale and stored as one row.
TEXT ·attnScores16Z(SB), NOSPLIT, $0-120
	MOVQ         sc_base+0(FP), DI
	MOVQ         scStride+24(FP), R12
	SHLQ         $2, R12
	MOVQ         keys_base+32(FP), SI
	MOVQ         keyStride+56(FP), R9
	SHLQ         $2, R9
	MOVQ         cnt+64(FP), CX
	MOVQ         q_base+72(FP), R8
	MOVQ         d+96(FP), DX
	SHRQ         $4, DX            // chunks of 16 values
	VBROADCASTSS scale+104(FP), Z17
	MOVQ         perm+112(FP), AX
	VMOVDQU32    (AX), Z16

key:
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
	MOVQ   SI, AX
	MOVQ   R8, R10
	MOVQ   DX, BX

chunk:
	VMOVUPS (AX), Z18
	VFMADD231PS 0(R10), Z18, Z0
	VFMADD231PS 64(R10), Z18, Z1
	VFMADD231PS 128(R10), Z18, Z2
	VFMADD231PS 192(R10), Z18, Z3
	VFMADD231PS 256(R10), Z18, Z4
	VFMADD231PS 320(R10), Z18, Z5
	VFMADD231PS 384(R10), Z18, Z6
	VFMADD231PS 448(R10), Z18, Z7
	VFMADD231PS 512(R10), Z18, Z8
	VFMADD231PS 576(R10), Z18, Z9
	VFMADD231PS 640(R10), Z18, Z10
	VFMADD231PS 704(R10), Z18, Z11
	VFMADD231PS 768(R10), Z18, Z12
	VFMADD231PS 832(R10), Z18, Z13
	VFMADD231PS 896(R10), Z18, Z14
	VFMADD231PS 960(R10), Z18, Z15
	ADDQ    $64, AX
	ADDQ    $1024, R10
	DECQ    BX
	JNE     chunk
	SUM16X16
	VPERMPS Z0, Z16, Z0
	VMULPS  Z17, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ    R12, DI
	ADDQ    R9, SI
	DECQ    CX
	JNE     key
	VZEROUPPER
	RET

// func colMaxZ(m, x []float32, stride, rows int)
//
// m[c] = VMAXPS down column c of rows rows (stride floats apart), four
// groups of 16 columns at a time while four remain; a column that met a
// NaN (K1–K4 collect them) gets tnNaN.
TEXT ·colMaxZ(SB), NOSPLIT, $0-64
	MOVQ m_base+0(FP), DI
	MOVQ m_len+8(FP), CX
	SHRQ $4, CX               // groups of 16 columns
	MOVQ x_base+24(FP), SI
	MOVQ stride+48(FP), R9
	SHLQ $2, R9
	MOVQ rows+56(FP), DX

mgroup4:
	CMPQ    CX, $4
	JB      mgroup
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	VMOVUPS 128(SI), Z2
	VMOVUPS 192(SI), Z3
	VCMPPS  $3, Z0, Z0, K1
	VCMPPS  $3, Z1, Z1, K2
	VCMPPS  $3, Z2, Z2, K3
	VCMPPS  $3, Z3, Z3, K4
	LEAQ    (SI)(R9*1), AX
	MOVQ    DX, BX
	DECQ    BX
	JEQ     mdone4

mrow4:
	VMOVUPS (AX), Z4
	VMOVUPS 64(AX), Z5
	VMOVUPS 128(AX), Z6
	VMOVUPS 192(AX), Z7
	VMAXPS  Z4, Z0, Z0
	VMAXPS  Z5, Z1, Z1
	VMAXPS  Z6, Z2, Z2
	VMAXPS  Z7, Z3, Z3
	VCMPPS  $3, Z4, Z4, K5
	KORW    K5, K1, K1
	VCMPPS  $3, Z5, Z5, K5
	KORW    K5, K2, K2
	VCMPPS  $3, Z6, Z6, K5
	KORW    K5, K3, K3
	VCMPPS  $3, Z7, Z7, K5
	KORW    K5, K4, K4
	ADDQ    R9, AX
	DECQ    BX
	JNE     mrow4

mdone4:
	VBROADCASTSS tnNaN<>(SB), K1, Z0
	VBROADCASTSS tnNaN<>(SB), K2, Z1
	VBROADCASTSS tnNaN<>(SB), K3, Z2
	VBROADCASTSS tnNaN<>(SB), K4, Z3
	VMOVUPS      Z0, (DI)
	VMOVUPS      Z1, 64(DI)
	VMOVUPS      Z2, 128(DI)
	VMOVUPS      Z3, 192(DI)
	ADDQ         $256, DI
	ADDQ         $256, SI
	SUBQ         $4, CX
	JMP          mgroup4

mgroup:
	TESTQ   CX, CX
	JEQ     mend
	VMOVUPS (SI), Z0
	VCMPPS  $3, Z0, Z0, K1
	LEAQ    (SI)(R9*1), AX
	MOVQ    DX, BX
	DECQ    BX
	JEQ     mdone

mrow:
	VMOVUPS (AX), Z4
	VMAXPS  Z4, Z0, Z0
	VCMPPS  $3, Z4, Z4, K5
	KORW    K5, K1, K1
	ADDQ    R9, AX
	DECQ    BX
	JNE     mrow

mdone:
	VBROADCASTSS tnNaN<>(SB), K1, Z0
	VMOVUPS      Z0, (DI)
	ADDQ         $64, DI
	ADDQ         $64, SI
	DECQ         CX
	JMP          mgroup

mend:
	VZEROUPPER
	RET

// func subColsZ(x []float32, stride, rows int, m []float32)
//
// x[r·stride+c] −= m[c] for r < rows, 16 columns at a time.
TEXT ·subColsZ(SB), NOSPLIT, $0-64
	MOVQ x_base+0(FP), SI
	MOVQ stride+24(FP), R9
	SHLQ $2, R9
	MOVQ rows+32(FP), DX
	MOVQ m_base+40(FP), DI
	MOVQ m_len+48(FP), CX
	SHRQ $4, CX

sgroup:
	VMOVUPS (DI), Z0
	MOVQ    SI, AX
	MOVQ    DX, BX

srow:
	VMOVUPS (AX), Z1
	VSUBPS  Z0, Z1, Z1
	VMOVUPS Z1, (AX)
	ADDQ    R9, AX
	DECQ    BX
	JNE     srow
	ADDQ    $64, DI
	ADDQ    $64, SI
	DECQ    CX
	JNE     sgroup
	VZEROUPPER
	RET

// func colSumZ(t, x []float32, stride, rows int)
//
// t[c] = ((+0 + x[0][c]) + x[1][c]) + … down each column, one chain per
// column; four groups of 16 columns run side by side while four remain, so
// that four chains of additions overlap.
TEXT ·colSumZ(SB), NOSPLIT, $0-64
	MOVQ t_base+0(FP), DI
	MOVQ t_len+8(FP), CX
	SHRQ $4, CX
	MOVQ x_base+24(FP), SI
	MOVQ stride+48(FP), R9
	SHLQ $2, R9
	MOVQ rows+56(FP), DX

tgroup4:
	CMPQ   CX, $4
	JB     tgroup
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ   SI, AX
	MOVQ   DX, BX

trow4:
	VADDPS  (AX), Z0, Z0
	VADDPS  64(AX), Z1, Z1
	VADDPS  128(AX), Z2, Z2
	VADDPS  192(AX), Z3, Z3
	ADDQ    R9, AX
	DECQ    BX
	JNE     trow4
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	ADDQ    $256, DI
	ADDQ    $256, SI
	SUBQ    $4, CX
	JMP     tgroup4

tgroup:
	TESTQ  CX, CX
	JEQ    tend
	VPXORD Z0, Z0, Z0
	MOVQ   SI, AX
	MOVQ   DX, BX

trow:
	VADDPS  (AX), Z0, Z0
	ADDQ    R9, AX
	DECQ    BX
	JNE     trow
	VMOVUPS Z0, (DI)
	ADDQ    $64, DI
	ADDQ    $64, SI
	DECQ    CX
	JMP     tgroup

tend:
	VZEROUPPER
	RET

// func accRows4x64Z(acc []float32, alpha *[4]float32, p []float32, pStride int, v []float32, vStride, cnt int)
//
// Four accumulators of 64 values in Z0–Z15, each multiplied by its alpha
// (by 1 exactly where AccumRowsN would skip it); for j = 0 … cnt−1 the value
// row is loaded once (Z16–Z19) and fused into each accumulator with its
// weight p[j·pStride+q] broadcast: acc = fma(p, v, acc) in j order.
TEXT ·accRows4x64Z(SB), NOSPLIT, $0-104
	MOVQ acc_base+0(FP), DI
	MOVQ alpha+24(FP), AX
	MOVQ p_base+32(FP), DX
	MOVQ pStride+56(FP), R8
	SHLQ $2, R8
	MOVQ v_base+64(FP), SI
	MOVQ vStride+88(FP), R9
	SHLQ $2, R9
	MOVQ cnt+96(FP), CX
	VMOVUPS 0(DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	VMOVUPS 256(DI), Z4
	VMOVUPS 320(DI), Z5
	VMOVUPS 384(DI), Z6
	VMOVUPS 448(DI), Z7
	VMOVUPS 512(DI), Z8
	VMOVUPS 576(DI), Z9
	VMOVUPS 640(DI), Z10
	VMOVUPS 704(DI), Z11
	VMOVUPS 768(DI), Z12
	VMOVUPS 832(DI), Z13
	VMOVUPS 896(DI), Z14
	VMOVUPS 960(DI), Z15
	VBROADCASTSS 0(AX), Z20
	VBROADCASTSS 4(AX), Z21
	VBROADCASTSS 8(AX), Z22
	VBROADCASTSS 12(AX), Z23
	VMULPS Z20, Z0, Z0
	VMULPS Z20, Z1, Z1
	VMULPS Z20, Z2, Z2
	VMULPS Z20, Z3, Z3
	VMULPS Z21, Z4, Z4
	VMULPS Z21, Z5, Z5
	VMULPS Z21, Z6, Z6
	VMULPS Z21, Z7, Z7
	VMULPS Z22, Z8, Z8
	VMULPS Z22, Z9, Z9
	VMULPS Z22, Z10, Z10
	VMULPS Z22, Z11, Z11
	VMULPS Z23, Z12, Z12
	VMULPS Z23, Z13, Z13
	VMULPS Z23, Z14, Z14
	VMULPS Z23, Z15, Z15

arow:
	VMOVUPS      (SI), Z16
	VMOVUPS      64(SI), Z17
	VMOVUPS      128(SI), Z18
	VMOVUPS      192(SI), Z19
	VBROADCASTSS (DX), Z20
	VBROADCASTSS 4(DX), Z21
	VBROADCASTSS 8(DX), Z22
	VBROADCASTSS 12(DX), Z23
	VFMADD231PS Z16, Z20, Z0
	VFMADD231PS Z17, Z20, Z1
	VFMADD231PS Z18, Z20, Z2
	VFMADD231PS Z19, Z20, Z3
	VFMADD231PS Z16, Z21, Z4
	VFMADD231PS Z17, Z21, Z5
	VFMADD231PS Z18, Z21, Z6
	VFMADD231PS Z19, Z21, Z7
	VFMADD231PS Z16, Z22, Z8
	VFMADD231PS Z17, Z22, Z9
	VFMADD231PS Z18, Z22, Z10
	VFMADD231PS Z19, Z22, Z11
	VFMADD231PS Z16, Z23, Z12
	VFMADD231PS Z17, Z23, Z13
	VFMADD231PS Z18, Z23, Z14
	VFMADD231PS Z19, Z23, Z15
	ADDQ         R8, DX
	ADDQ         R9, SI
	DECQ         CX
	JNE          arow
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
