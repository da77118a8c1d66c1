// The transposing add tree of the AVX-512 attention score kernels
// (attntile_amd64.s, attn4_amd64.s), shared so that both sum a dot
// product's 16 lanes in exactly reduce16's order.

// SUM16X16 sums the 16 lanes of each of Z0–Z15 with reduce16's additions
// (lanes j and j+8, then j+4, j+2, j+1), four accumulators' worth per
// instruction, leaving the sum of accumulator 4m+k in lane 4k+m of Z0
// (scores16Perm puts them back in accumulator order). Z20 and Z21 are
// scratch; Z1–Z15 are clobbered.
#define SUM16X16 \
	VSHUFF32X4 $0x44, Z1, Z0, Z20; \
	VSHUFF32X4 $0xEE, Z1, Z0, Z21; \
	VADDPS     Z21, Z20, Z0; \
	VSHUFF32X4 $0x44, Z3, Z2, Z20; \
	VSHUFF32X4 $0xEE, Z3, Z2, Z21; \
	VADDPS     Z21, Z20, Z1; \
	VSHUFF32X4 $0x44, Z5, Z4, Z20; \
	VSHUFF32X4 $0xEE, Z5, Z4, Z21; \
	VADDPS     Z21, Z20, Z2; \
	VSHUFF32X4 $0x44, Z7, Z6, Z20; \
	VSHUFF32X4 $0xEE, Z7, Z6, Z21; \
	VADDPS     Z21, Z20, Z3; \
	VSHUFF32X4 $0x44, Z9, Z8, Z20; \
	VSHUFF32X4 $0xEE, Z9, Z8, Z21; \
	VADDPS     Z21, Z20, Z4; \
	VSHUFF32X4 $0x44, Z11, Z10, Z20; \
	VSHUFF32X4 $0xEE, Z11, Z10, Z21; \
	VADDPS     Z21, Z20, Z5; \
	VSHUFF32X4 $0x44, Z13, Z12, Z20; \
	VSHUFF32X4 $0xEE, Z13, Z12, Z21; \
	VADDPS     Z21, Z20, Z6; \
	VSHUFF32X4 $0x44, Z15, Z14, Z20; \
	VSHUFF32X4 $0xEE, Z15, Z14, Z21; \
	VADDPS     Z21, Z20, Z7; \
	VSHUFF32X4 $0x88, Z1, Z0, Z20; \
	VSHUFF32X4 $0xDD, Z1, Z0, Z21; \
	VADDPS     Z21, Z20, Z0; \
	VSHUFF32X4 $0x88, Z3, Z2, Z20; \
	VSHUFF32X4 $0xDD, Z3, Z2, Z21; \
	VADDPS     Z21, Z20, Z1; \
	VSHUFF32X4 $0x88, Z5, Z4, Z20; \
	VSHUFF32X4 $0xDD, Z5, Z4, Z21; \
	VADDPS     Z21, Z20, Z2; \
	VSHUFF32X4 $0x88, Z7, Z6, Z20; \
	VSHUFF32X4 $0xDD, Z7, Z6, Z21; \
	VADDPS     Z21, Z20, Z3; \
	VSHUFPS    $0x44, Z1, Z0, Z20; \
	VSHUFPS    $0xEE, Z1, Z0, Z21; \
	VADDPS     Z21, Z20, Z0; \
	VSHUFPS    $0x44, Z3, Z2, Z20; \
	VSHUFPS    $0xEE, Z3, Z2, Z21; \
	VADDPS     Z21, Z20, Z1; \
	VSHUFPS    $0x88, Z1, Z0, Z20; \
	VSHUFPS    $0xDD, Z1, Z0, Z21; \
	VADDPS     Z21, Z20, Z0
