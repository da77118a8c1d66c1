//go:build amd64 && !purego

#include "textflag.h"

// func axpyAVX(a float32, x, y []float32)
//
// y[i] = fma(a, x[i], y[i]): elementwise, so the width of each step does
// not matter for the result; 32, then 8, then 1 element at a time.
TEXT ·axpyAVX(SB), NOSPLIT, $0-56
	VBROADCASTSS a+0(FP), Y0
	MOVQ         x_base+8(FP), SI
	MOVQ         x_len+16(FP), CX
	MOVQ         y_base+32(FP), DI
	MOVQ         CX, BX
	ANDQ         $-32, BX
	XORQ         AX, AX
	JMP          check32

loop32:
	VMOVUPS     (DI)(AX*4), Y1
	VMOVUPS     32(DI)(AX*4), Y2
	VMOVUPS     64(DI)(AX*4), Y3
	VMOVUPS     96(DI)(AX*4), Y4
	VFMADD231PS (SI)(AX*4), Y0, Y1
	VFMADD231PS 32(SI)(AX*4), Y0, Y2
	VFMADD231PS 64(SI)(AX*4), Y0, Y3
	VFMADD231PS 96(SI)(AX*4), Y0, Y4
	VMOVUPS     Y1, (DI)(AX*4)
	VMOVUPS     Y2, 32(DI)(AX*4)
	VMOVUPS     Y3, 64(DI)(AX*4)
	VMOVUPS     Y4, 96(DI)(AX*4)
	ADDQ        $32, AX

check32:
	CMPQ AX, BX
	JB   loop32
	MOVQ CX, BX
	ANDQ $-8, BX
	JMP  check8

loop8:
	VMOVUPS     (DI)(AX*4), Y1
	VFMADD231PS (SI)(AX*4), Y0, Y1
	VMOVUPS     Y1, (DI)(AX*4)
	ADDQ        $8, AX

check8:
	CMPQ AX, BX
	JB   loop8
	JMP  check1

loop1:
	VMOVSS      (DI)(AX*4), X1
	VFMADD231SS (SI)(AX*4), X0, X1
	VMOVSS      X1, (DI)(AX*4)
	INCQ        AX

check1:
	CMPQ       AX, CX
	JB         loop1
	VZEROUPPER
	RET
