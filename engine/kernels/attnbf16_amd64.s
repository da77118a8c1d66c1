//go:build amd64 && !purego

#include "textflag.h"
#include "attn512_amd64.h"

// The bfloat16 decode attention kernels with AVX-512 (F, BW): attnbf16.go.
// Each bfloat16 is widened exactly in a register (zero-extended to 32 bits
// and shifted into the float's high half), so the sums are those of the
// float32 kernels on widened rows.

// func attnScores4BF16Z(sc []float32, scStride int, keys []uint16, keyStride, cnt int, q []float32, scale float32, perm *[16]int32, pfa, pfb []uint16)
//
// Four keys at a time (cnt a multiple of 4, d = len(q)/4 a multiple of
// 16): Z(4g+k) runs the 16 lanes of dotF32Go for key k and query head g
// (lane i%16 takes fma(k[i], q_g[i], ·) in increasing i), each 16-value
// chunk of a key widened once and each chunk of a head loaded once for the
// four keys. SUM16X16 then sums every accumulator's lanes in reduce16's
// order, VPERMPS (perm is &scores16Perm) puts head g's four scores in lanes
// 4g…4g+3, and they are multiplied by scale and stored at sc[g·scStride+j].
// Before each four keys' sums it prefetches the first 128 bytes of the same
// four rows of pfa and pfb (rows keyStride apart, like the keys): memory the
// caller reads next, fetched while these sums run.
TEXT ·attnScores4BF16Z(SB), NOSPLIT, $8-160
	MOVQ         sc_base+0(FP), DI
	MOVQ         scStride+24(FP), R12
	SHLQ         $2, R12           // scores stride in bytes
	MOVQ         keys_base+32(FP), SI
	MOVQ         keyStride+56(FP), R13
	SHLQ         $1, R13           // key stride in bytes
	LEAQ         (R13)(R13*2), R9  // three key strides
	MOVQ         cnt+64(FP), CX
	SHRQ         $2, CX            // groups of four keys
	MOVQ         q_base+72(FP), R8
	MOVQ         q_len+80(FP), DX
	SHRQ         $2, DX            // d
	MOVQ         DX, R11
	SHLQ         $2, R11           // one head's query in bytes
	LEAQ         (R11)(R11*2), R10 // three heads'
	SHRQ         $4, DX            // chunks of 16 values
	VBROADCASTSS scale+96(FP), Z17
	MOVQ         perm+104(FP), AX
	VMOVDQU32    (AX), Z16
	MOVQ         pfa_base+112(FP), R15
	SUBQ         SI, R15           // pfa's distance from the keys
	MOVQ         pfb_base+136(FP), AX
	SUBQ         SI, AX
	MOVQ         AX, pfb-8(SP)     // pfb's

group:
	LEAQ       (SI)(R15*1), AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	PREFETCHT0 (AX)(R13*1)
	PREFETCHT0 64(AX)(R13*1)
	PREFETCHT0 (AX)(R13*2)
	PREFETCHT0 64(AX)(R13*2)
	PREFETCHT0 (AX)(R9*1)
	PREFETCHT0 64(AX)(R9*1)
	MOVQ       pfb-8(SP), AX
	ADDQ       SI, AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	PREFETCHT0 (AX)(R13*1)
	PREFETCHT0 64(AX)(R13*1)
	PREFETCHT0 (AX)(R13*2)
	PREFETCHT0 64(AX)(R13*2)
	PREFETCHT0 (AX)(R9*1)
	PREFETCHT0 64(AX)(R9*1)
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
	MOVQ   SI, R14             // the four keys' chunk
	MOVQ   R8, BX              // the four heads' chunk
	MOVQ   DX, AX

chunk:
	VPMOVZXWD (R14), Z18
	VPMOVZXWD (R14)(R13*1), Z19
	VPMOVZXWD (R14)(R13*2), Z22
	VPMOVZXWD (R14)(R9*1), Z23
	VPSLLD    $16, Z18, Z18
	VPSLLD    $16, Z19, Z19
	VPSLLD    $16, Z22, Z22
	VPSLLD    $16, Z23, Z23
	VMOVUPS   (BX), Z24
	VFMADD231PS Z24, Z18, Z0
	VFMADD231PS Z24, Z19, Z1
	VFMADD231PS Z24, Z22, Z2
	VFMADD231PS Z24, Z23, Z3
	VMOVUPS   (BX)(R11*1), Z24
	VFMADD231PS Z24, Z18, Z4
	VFMADD231PS Z24, Z19, Z5
	VFMADD231PS Z24, Z22, Z6
	VFMADD231PS Z24, Z23, Z7
	VMOVUPS   (BX)(R11*2), Z24
	VFMADD231PS Z24, Z18, Z8
	VFMADD231PS Z24, Z19, Z9
	VFMADD231PS Z24, Z22, Z10
	VFMADD231PS Z24, Z23, Z11
	VMOVUPS   (BX)(R10*1), Z24
	VFMADD231PS Z24, Z18, Z12
	VFMADD231PS Z24, Z19, Z13
	VFMADD231PS Z24, Z22, Z14
	VFMADD231PS Z24, Z23, Z15
	ADDQ      $32, R14
	ADDQ      $64, BX
	DECQ      AX
	JNE       chunk
	SUM16X16
	VPERMPS       Z0, Z16, Z0
	VMULPS        Z17, Z0, Z0
	LEAQ          (DI)(R12*2), AX
	VMOVUPS       X0, (DI)
	VEXTRACTF32X4 $1, Z0, X1
	VMOVUPS       X1, (DI)(R12*1)
	VEXTRACTF32X4 $2, Z0, X1
	VMOVUPS       X1, (AX)
	VEXTRACTF32X4 $3, Z0, X1
	VMOVUPS       X1, (AX)(R12*1)
	ADDQ          $16, DI
	LEAQ          (SI)(R13*4), SI
	DECQ          CX
	JNE           group
	VZEROUPPER
	RET

// func accRows4BF16Z(acc []float32, accStride int, alpha *[4]float32, p []float32, pStride int, v []uint16, vStride, cnt int)
//
// 64 columns of four accumulators accStride floats apart, in Z(4g)…Z(4g+3)
// for head g, each multiplied by its alpha (by 1 exactly where
// AccumRows4BF16's reference skips it); for j = 0 … cnt−1 (cnt ≥ 1) the
// value row's 64 bfloat16 values are widened once (Z16–Z19) and fused into
// each accumulator with its weight p[g·pStride+j] broadcast: acc = fma(p, v,
// acc) in j order.
TEXT ·accRows4BF16Z(SB), NOSPLIT, $0-112
	MOVQ acc_base+0(FP), DI
	MOVQ accStride+24(FP), BX
	SHLQ $2, BX                // accumulator stride in bytes
	LEAQ (BX)(BX*2), R11       // three strides
	MOVQ alpha+32(FP), AX
	MOVQ p_base+40(FP), DX
	MOVQ pStride+64(FP), R8
	SHLQ $2, R8                // weights stride in bytes
	LEAQ (R8)(R8*2), R10       // three strides
	MOVQ v_base+72(FP), SI
	MOVQ vStride+96(FP), R9
	SHLQ $1, R9                // value row stride in bytes
	MOVQ cnt+104(FP), CX
	VMOVUPS (DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	VMOVUPS (DI)(BX*1), Z4
	VMOVUPS 64(DI)(BX*1), Z5
	VMOVUPS 128(DI)(BX*1), Z6
	VMOVUPS 192(DI)(BX*1), Z7
	VMOVUPS (DI)(BX*2), Z8
	VMOVUPS 64(DI)(BX*2), Z9
	VMOVUPS 128(DI)(BX*2), Z10
	VMOVUPS 192(DI)(BX*2), Z11
	VMOVUPS (DI)(R11*1), Z12
	VMOVUPS 64(DI)(R11*1), Z13
	VMOVUPS 128(DI)(R11*1), Z14
	VMOVUPS 192(DI)(R11*1), Z15
	VBROADCASTSS (AX), Z20
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
	VPMOVZXWD (SI), Z16
	VPMOVZXWD 32(SI), Z17
	VPMOVZXWD 64(SI), Z18
	VPMOVZXWD 96(SI), Z19
	VPSLLD    $16, Z16, Z16
	VPSLLD    $16, Z17, Z17
	VPSLLD    $16, Z18, Z18
	VPSLLD    $16, Z19, Z19
	VBROADCASTSS (DX), Z20
	VBROADCASTSS (DX)(R8*1), Z21
	VBROADCASTSS (DX)(R8*2), Z22
	VBROADCASTSS (DX)(R10*1), Z23
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
	ADDQ $4, DX
	ADDQ R9, SI
	DECQ CX
	JNE  arow
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, (DI)(BX*1)
	VMOVUPS Z5, 64(DI)(BX*1)
	VMOVUPS Z6, 128(DI)(BX*1)
	VMOVUPS Z7, 192(DI)(BX*1)
	VMOVUPS Z8, (DI)(BX*2)
	VMOVUPS Z9, 64(DI)(BX*2)
	VMOVUPS Z10, 128(DI)(BX*2)
	VMOVUPS Z11, 192(DI)(BX*2)
	VMOVUPS Z12, (DI)(R11*1)
	VMOVUPS Z13, 64(DI)(R11*1)
	VMOVUPS Z14, 128(DI)(R11*1)
	VMOVUPS Z15, 192(DI)(R11*1)
	VZEROUPPER
	RET
