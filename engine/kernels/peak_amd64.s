//go:build amd64 && !purego

#include "textflag.h"

// The fp32 FMA peak probes of BenchmarkFMAPeak: n iterations of a loop of
// independent VFMADD231PS chains on registers only, enough of them (16
// zmm, 12 ymm) to cover the FMA latency (4 to 5 cycles) times the FMA
// ports (two on the cores lfmq targets), so that the loop runs at the
// core's FMA throughput and nothing else. The operands are zero, so no
// chain ever meets a subnormal or an infinity that could slow it.

// func fmaPeakZ(n int)
//
// n × 16 VFMADD231PS on 512-bit registers: 512·n flops.
TEXT ·fmaPeakZ(SB), NOSPLIT, $0-8
	MOVQ   n+0(FP), CX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
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
	TESTQ  CX, CX
	JEQ    zdone

zloop:
	VFMADD231PS Z16, Z17, Z0
	VFMADD231PS Z16, Z17, Z1
	VFMADD231PS Z16, Z17, Z2
	VFMADD231PS Z16, Z17, Z3
	VFMADD231PS Z16, Z17, Z4
	VFMADD231PS Z16, Z17, Z5
	VFMADD231PS Z16, Z17, Z6
	VFMADD231PS Z16, Z17, Z7
	VFMADD231PS Z16, Z17, Z8
	VFMADD231PS Z16, Z17, Z9
	VFMADD231PS Z16, Z17, Z10
	VFMADD231PS Z16, Z17, Z11
	VFMADD231PS Z16, Z17, Z12
	VFMADD231PS Z16, Z17, Z13
	VFMADD231PS Z16, Z17, Z14
	VFMADD231PS Z16, Z17, Z15
	DECQ        CX
	JNE         zloop

zdone:
	VZEROUPPER
	RET

// func fmaPeakY(n int)
//
// n × 12 VFMADD231PS on 256-bit registers: 192·n flops.
TEXT ·fmaPeakY(SB), NOSPLIT, $0-8
	MOVQ  n+0(FP), CX
	VPXOR Y12, Y12, Y12
	VPXOR Y13, Y13, Y13
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	TESTQ CX, CX
	JEQ   ydone

yloop:
	VFMADD231PS Y12, Y13, Y0
	VFMADD231PS Y12, Y13, Y1
	VFMADD231PS Y12, Y13, Y2
	VFMADD231PS Y12, Y13, Y3
	VFMADD231PS Y12, Y13, Y4
	VFMADD231PS Y12, Y13, Y5
	VFMADD231PS Y12, Y13, Y6
	VFMADD231PS Y12, Y13, Y7
	VFMADD231PS Y12, Y13, Y8
	VFMADD231PS Y12, Y13, Y9
	VFMADD231PS Y12, Y13, Y10
	VFMADD231PS Y12, Y13, Y11
	DECQ        CX
	JNE         yloop

ydone:
	VZEROUPPER
	RET

// func mulAddPeakZ(n int)
//
// n × 8 pairs of VMULPD and VADDPD on 512-bit registers, eight independent
// chains of float64 x·y then acc + that, the unfused form of a product-sum
// that keeps a multiply's rounding (quant/gptq's kernels): 128·n flops.
// Where the adds share the multiplies' ports, it runs at half the rate of
// as many float64 FMAs.
TEXT ·mulAddPeakZ(SB), NOSPLIT, $0-8
	MOVQ   n+0(FP), CX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	TESTQ  CX, CX
	JEQ    mdone

mloop:
	VMULPD Z16, Z17, Z8
	VMULPD Z16, Z17, Z9
	VMULPD Z16, Z17, Z10
	VMULPD Z16, Z17, Z11
	VMULPD Z16, Z17, Z12
	VMULPD Z16, Z17, Z13
	VMULPD Z16, Z17, Z14
	VMULPD Z16, Z17, Z15
	VADDPD Z8, Z0, Z0
	VADDPD Z9, Z1, Z1
	VADDPD Z10, Z2, Z2
	VADDPD Z11, Z3, Z3
	VADDPD Z12, Z4, Z4
	VADDPD Z13, Z5, Z5
	VADDPD Z14, Z6, Z6
	VADDPD Z15, Z7, Z7
	DECQ   CX
	JNE    mloop

mdone:
	VZEROUPPER
	RET
