# The float64 exponential that swiglu.py and expshift.py both unroll: eight
# groups of eight lanes, t in Z0–Z7 on entry, exp(t) rounded to float32 in
# Y16–Y23 on exit (the upper halves still to be joined by the caller). c
# points (in R8) at the constant table both kernels share: log2e, ln2hi,
# ln2lo, the clamp bounds 89 and −104, then the polynomial's 13 coefficients.
# s1 and s2 are the two scratch registers the caller can spare; the products
# are formed in the same order whatever they are, so the bits do not depend on
# them.


def emit_exp(w, s1, s2):
    w('	// Clamp t to [−104, 89] (a NaN becomes 89).')
    for j in range(8):
        w(f'	VMINPD.BCST   24(R8), Z{j}, Z{j}')
        w(f'	VMAXPD.BCST   32(R8), Z{j}, Z{j}')
    w('	// k = RoundToEven(t·log2e).')
    for j in range(8):
        w(f'	VMULPD.BCST   0(R8), Z{j}, Z{8+j}')
    for j in range(8):
        w(f'	VRNDSCALEPD   $0, Z{8+j}, Z{8+j}')
    w('	// r = (t − k·ln2hi) − k·ln2lo.')
    for j in range(8):
        w(f'	VMULPD.BCST   8(R8), Z{8+j}, {s1}')
        w(f'	VSUBPD        {s1}, Z{j}, Z{j}')
    for j in range(8):
        w(f'	VMULPD.BCST   16(R8), Z{8+j}, {s2}')
        w(f'	VSUBPD        {s2}, Z{j}, Z{j}')
    w('	// p = (…(c5·r + c6)·r + …)·r + c17, then p·2^k.')
    for j in range(8):
        w(f'	VBROADCASTSD  40(R8), Z{16+j}')
    for i in range(1, 13):
        for j in range(8):
            w(f'	VMULPD        Z{j}, Z{16+j}, Z{16+j}')
        for j in range(8):
            w(f'	VADDPD.BCST   {40+8*i}(R8), Z{16+j}, Z{16+j}')
    for j in range(8):
        w(f'	VSCALEFPD     Z{8+j}, Z{16+j}, Z{16+j}')
    for j in range(8):
        w(f'	VCVTPD2PS     Z{16+j}, Y{16+j}')
