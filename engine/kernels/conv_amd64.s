//go:build amd64 && !purego

#include "textflag.h"

// The short convolution's decode step (one token) with AVX-512 (F), 16
// channels at a time: causalConv for T = 1. A channel's taps and state are
// K and K−1 floats apart (w[c·K+j], state[c·(K−1)+j]), so each tap of 16
// channels is a gather; each multiply-add is one fused multiply-add, as
// fma32 rounds it, in tap order j = 0, 1, …, K−1.

DATA convlanes<>+0(SB)/4, $0
DATA convlanes<>+4(SB)/4, $1
DATA convlanes<>+8(SB)/4, $2
DATA convlanes<>+12(SB)/4, $3
DATA convlanes<>+16(SB)/4, $4
DATA convlanes<>+20(SB)/4, $5
DATA convlanes<>+24(SB)/4, $6
DATA convlanes<>+28(SB)/4, $7
DATA convlanes<>+32(SB)/4, $8
DATA convlanes<>+36(SB)/4, $9
DATA convlanes<>+40(SB)/4, $10
DATA convlanes<>+44(SB)/4, $11
DATA convlanes<>+48(SB)/4, $12
DATA convlanes<>+52(SB)/4, $13
DATA convlanes<>+56(SB)/4, $14
DATA convlanes<>+60(SB)/4, $15
GLOBL convlanes<>(SB), RODATA|NOPTR, $64

// func causalConv1Z(v, u, st, w, bias *float32, n, k int)
//
// v[c] = Σ_j fma over the window (st[c·h+0 … h−1], then u[c]) with
// w[c·k+j], plus bias[c] when bias is not nil; then the state moves on one
// token: st[c·h+j] = st[c·h+j+1], st[c·h+h−1] = u[c] (h = k−1 ≥ 1). n is
// a positive multiple of 16.
//
// Registers: DI v, SI u, R8 state, R9 w, R10 bias, CX channels left, R11
// k, R12 h, R13/R14 the bytes of w and state a group of 16 channels
// spans; per group AX/BX the tap's w and state, DX the tap; Z0 the sums,
// Z29/Z28 the lane offsets c·k and c·h.
TEXT ·causalConv1Z(SB), NOSPLIT, $0-56
	MOVQ         v+0(FP), DI
	MOVQ         u+8(FP), SI
	MOVQ         st+16(FP), R8
	MOVQ         w+24(FP), R9
	MOVQ         bias+32(FP), R10
	MOVQ         n+40(FP), CX
	MOVQ         k+48(FP), R11
	LEAQ         -1(R11), R12
	VMOVDQU32    convlanes<>(SB), Z30
	VPBROADCASTD R11, Z29
	VPMULLD      Z30, Z29, Z29
	VPBROADCASTD R12, Z28
	VPMULLD      Z30, Z28, Z28
	MOVQ         R11, R13
	SHLQ         $6, R13
	MOVQ         R12, R14
	SHLQ         $6, R14

group:
	VXORPS       Z0, Z0, Z0
	MOVQ         R9, AX
	MOVQ         R8, BX
	XORQ         DX, DX

tap:
	KXNORW       K1, K1, K1
	VGATHERDPS   (AX)(Z29*4), K1, Z1
	KXNORW       K2, K2, K2
	VGATHERDPS   (BX)(Z28*4), K2, Z2
	VFMADD231PS  Z2, Z1, Z0
	TESTQ        DX, DX
	JZ           first
	// The state moves on: this tap's input one place down.
	KXNORW       K3, K3, K3
	VSCATTERDPS  Z2, K3, -4(BX)(Z28*4)

first:
	ADDQ         $4, AX
	ADDQ         $4, BX
	INCQ         DX
	CMPQ         DX, R12
	JLT          tap

	// The last tap reads the token's own input, which ends the state.
	KXNORW       K1, K1, K1
	VGATHERDPS   (AX)(Z29*4), K1, Z1
	VMOVUPS      (SI), Z3
	VFMADD231PS  Z3, Z1, Z0
	KXNORW       K3, K3, K3
	VSCATTERDPS  Z3, K3, -4(BX)(Z28*4)
	TESTQ        R10, R10
	JZ           store
	VADDPS       (R10), Z0, Z0
	ADDQ         $64, R10

store:
	VMOVUPS      Z0, (DI)
	ADDQ         $64, DI
	ADDQ         $64, SI
	ADDQ         R13, R9
	ADDQ         R14, R8
	SUBQ         $16, CX
	JNZ          group
	VZEROUPPER
	RET
