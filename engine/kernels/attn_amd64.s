//go:build amd64 && !purego

#include "textflag.h"

// func accRowsAVX(acc, p, v []float32, stride int)
//
// acc[i] = fma(p[j], v[j·stride+i], acc[i]) for j = 0, 1, … len(p)−1 in
// that order, for every i < len(acc) (a multiple of 32). Each element is
// its own chain, so the kernel may walk the columns 32 at a time: it keeps
// 32 accumulators in four registers and runs the whole chain over j for
// them before the next 32. Columns go 64 at a time while 64 remain: eight
// independent chains hide the fused multiply-add's latency, where four
// leave half the FMA units idle.
TEXT ·accRowsAVX(SB), NOSPLIT, $0-80
	MOVQ acc_base+0(FP), DI
	MOVQ acc_len+8(FP), CX
	MOVQ p_base+24(FP), SI
	MOVQ p_len+32(FP), DX
	MOVQ v_base+48(FP), R8
	MOVQ stride+72(FP), R9
	SHLQ $2, R9            // stride in bytes
	SHRQ $5, CX            // column groups of 32
	JEQ  done

cols64:
	CMPQ    CX, $2
	JB      cols
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS 128(DI), Y5
	VMOVUPS 160(DI), Y6
	VMOVUPS 192(DI), Y7
	VMOVUPS 224(DI), Y8
	MOVQ    R8, R10
	XORQ    AX, AX
	JMP     check64

rows64:
	VBROADCASTSS (SI)(AX*4), Y4
	VFMADD231PS  (R10), Y4, Y0
	VFMADD231PS  32(R10), Y4, Y1
	VFMADD231PS  64(R10), Y4, Y2
	VFMADD231PS  96(R10), Y4, Y3
	VFMADD231PS  128(R10), Y4, Y5
	VFMADD231PS  160(R10), Y4, Y6
	VFMADD231PS  192(R10), Y4, Y7
	VFMADD231PS  224(R10), Y4, Y8
	ADDQ         R9, R10
	INCQ         AX

check64:
	CMPQ    AX, DX
	JB      rows64
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y5, 128(DI)
	VMOVUPS Y6, 160(DI)
	VMOVUPS Y7, 192(DI)
	VMOVUPS Y8, 224(DI)
	ADDQ    $256, DI
	ADDQ    $256, R8
	SUBQ    $2, CX
	JNE     cols64
	JMP     done

cols:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	MOVQ    R8, R10        // v row j, this column group
	XORQ    AX, AX
	JMP     check

rows:
	VBROADCASTSS (SI)(AX*4), Y4
	VFMADD231PS  (R10), Y4, Y0
	VFMADD231PS  32(R10), Y4, Y1
	VFMADD231PS  64(R10), Y4, Y2
	VFMADD231PS  96(R10), Y4, Y3
	ADDQ         R9, R10
	INCQ         AX

check:
	CMPQ AX, DX
	JB   rows
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, DI
	ADDQ    $128, R8
	DECQ    CX
	JNE     cols

done:
	VZEROUPPER
	RET

// func maxAVX(x []float32) (m float32, nan int)
//
// The largest of x's elements (len(x) a multiple of 8, at least 8) by
// VMAXPS, 8 lanes and then a tree, and nan = the mask of lanes that met a
// NaN (VMAXPS alone would drop one).
TEXT ·maxAVX(SB), NOSPLIT, $0-40
	MOVQ    x_base+0(FP), SI
	MOVQ    x_len+8(FP), CX
	VMOVUPS (SI), Y0
	VCMPPS  $3, Y0, Y0, Y2     // unordered: NaN lanes
	MOVQ    $8, AX
	JMP     mcheck

mloop:
	VMOVUPS (SI)(AX*4), Y3
	VMAXPS  Y3, Y0, Y0
	VCMPPS  $3, Y3, Y3, Y4
	VORPS   Y4, Y2, Y2
	ADDQ    $8, AX

mcheck:
	CMPQ         AX, CX
	JB           mloop
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VMAXPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VMAXSS       X1, X0, X0
	VMOVMSKPS    Y2, AX
	VMOVSS       X0, m+24(FP)
	MOVQ         AX, nan+32(FP)
	VZEROUPPER
	RET
