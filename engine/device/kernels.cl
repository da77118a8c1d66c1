// lfmq's device kernels: the forward pass of an LFM2 or LFM3 model at the
// exact level. Every kernel replays the CPU engine's order of operations
// (engine/kernels), so that logits are bit-identical to the CPU's on any
// device. The rules that make that true:
//
//  - no contraction (the pragma below; clang for PTX also gets
//    -ffp-contract=off): a*b+c is two roundings unless written fma();
//  - fma() where the CPU fuses, which OpenCL requires to round once;
//  - float division and sqrt correctly rounded (the OpenCL build passes
//    -cl-fp32-correctly-rounded-divide-sqrt; PTX gets div.rn/sqrt.rn);
//  - the CPU's reduction layouts: dot products in 16 lanes summed by a
//    fixed tree, then the tail; BFP products as one chain over k;
//  - exp computed in double with basic operations only, as the CPU does;
//  - the RoPE and BFP scale tables come from the host, never recomputed.
//
// Local arrays are sized statically: a __local pointer argument would
// become a parameter the CUDA driver cannot fill. Every kernel checks its
// global id against the size it is passed.

#pragma OPENCL FP_CONTRACT OFF
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

// ---- scalar helpers -------------------------------------------------

// bf16 widens a bfloat16 bit pattern exactly.
inline float bf16(ushort b) { return as_float(((uint)b) << 16); }

// reduce16 sums 16 lanes as engine/kernels' reduce16: j and j+8, then j
// and j+4, then j and j+2, then the last two.
inline float reduce16(const float *a) {
	float s8[8];
	for (int j = 0; j < 8; j++) s8[j] = a[j] + a[j + 8];
	float s40 = s8[0] + s8[4], s41 = s8[1] + s8[5], s42 = s8[2] + s8[6], s43 = s8[3] + s8[7];
	float s20 = s40 + s42, s21 = s41 + s43;
	return s20 + s21;
}

// exp64 is engine/kernels.exp64: e^t = 2^k·e^r, a degree-12 Taylor
// polynomial, each step rounded.
inline double exp64(double t) {
	const double log2e = 1.44269504088896338700e+00;
	const double ln2hi = 6.93147180369123816490e-01;
	const double ln2lo = 1.90821492927058770002e-10;
	double k = rint(t * log2e);
	double r = t - k * ln2hi;
	r = r - k * ln2lo;
	const double c[13] = {1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320,
		1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, 1};
	double p = c[0];
	for (int i = 1; i < 13; i++) p = p * r + c[i];
	return ldexp(p, (int)k);
}

// expf32 is engine/kernels.Exp.
inline float expf32(float x) {
	if (isnan(x)) return x;
	if (x > 89.0f) return INFINITY;
	if (x < -104.0f) return 0.0f;
	return (float)exp64((double)x);
}

inline float sigmoid32(float x) { return 1.0f / (1.0f + expf32(-x)); }
inline float silu32(float x) { return x / (1.0f + expf32(-x)); }

// gomax is Go's max for floats: NaN if either is NaN, +0 over −0.
inline float gomax(float m, float v) {
	if (isnan(m) || isnan(v)) return NAN;
	if (v > m || (v == m && signbit(m))) return v;
	return m;
}

// ---- elementwise ----------------------------------------------------

// embed_bf16 writes row ids[r] of a BF16 table [V, H] into h[r].
__kernel void embed_bf16(__global float *h, __global const ushort *table, __global const int *ids, int H, int rows) {
	long g = get_global_id(0);
	if (g >= (long)rows * H) return;
	int r = g / H, i = g % H;
	h[g] = bf16(table[(long)ids[r] * H + i]);
}

// embed_f32 is embed_bf16 for an F32 table.
__kernel void embed_f32(__global float *h, __global const float *table, __global const int *ids, int H, int rows) {
	long g = get_global_id(0);
	if (g >= (long)rows * H) return;
	int r = g / H, i = g % H;
	h[g] = table[(long)ids[r] * H + i];
}

// add_into sets h += x.
__kernel void add_into(__global float *h, __global const float *x, int n) {
	int g = get_global_id(0);
	if (g < n) h[g] += x[g];
}

// add_bias adds b [m] to every row of x [rows, m].
__kernel void add_bias(__global float *x, __global const float *b, int m, int n) {
	int g = get_global_id(0);
	if (g < n) x[g] += b[g % m];
}

// swiglu sets y = SiLU(g)·u.
__kernel void swiglu(__global float *y, __global const float *gt, __global const float *u, int n) {
	int g = get_global_id(0);
	if (g < n) y[g] = silu32(gt[g]) * u[g];
}

// gather copies rows idx[i] of x [*, m] to y [i, m].
__kernel void gather_rows(__global float *y, __global const float *x, __global const int *idx, int m, int n) {
	int g = get_global_id(0);
	if (g >= n * m) return;
	int i = g / m, j = g % m;
	y[g] = x[(long)idx[i] * m + j];
}

// rmsnorm normalises nvec contiguous vectors of n floats with weight w [n]:
// y = w·(x·r), r = 1/sqrt(Σx²/n + eps), Σx² in the CPU's dot order
// (16 fused lanes, reduce16, then the tail). Work-groups of 16
// items, one vector each: item l is the CPU's lane l.
__kernel void rmsnorm(__global float *y, __global const float *x, __global const float *w, int n, int nvec, float eps) {
	__local float lanes[16];
	__local float scale;
	int v = get_group_id(0), l = get_local_id(0);
	if (v >= nvec) return; // whole group
	__global const float *xv = x + (long)v * n;
	__global float *yv = y + (long)v * n;
	int m = n & ~15;
	float acc = 0.0f;
	for (int i = l; i < m; i += 16) acc = fma(xv[i], xv[i], acc);
	lanes[l] = acc;
	barrier(CLK_LOCAL_MEM_FENCE);
	if (l == 0) {
		float a[16];
		for (int j = 0; j < 16; j++) a[j] = lanes[j];
		float s = reduce16(a);
		for (int i = m; i < n; i++) s = fma(xv[i], xv[i], s);
		float mean = s / (float)n;
		scale = n == 0 ? 0.0f : 1.0f / (float)sqrt((double)(mean + eps));
	}
	barrier(CLK_LOCAL_MEM_FENCE);
	float r = scale;
	for (int i = l; i < n; i += 16) {
		float t = xv[i] * r;
		yv[i] = w[i] * t;
	}
}

// ---- products -------------------------------------------------------
//
// y[b][o] = Σ_k W[o][k]·x[b][k] for b < B. With sel set (experts), batch
// row b uses the matrix at element offset sel[b]·stride of w and the
// input row b/xdiv (the token of slot b); otherwise offset 0 and row b.

inline long wbase(__global const int *sel, int usesel, int b, long stride) {
	return usesel ? (long)sel[b] * stride : 0;
}

// mm_f32 and mm_bf16: work-groups of 64 items, 16 lanes for each of 4
// outputs; item l of an output is the CPU's lane l.
__kernel void mm_f32(__global float *y, __global const float *w, __global const float *x, int In, int Out, int B,
		__global const int *sel, int usesel, int stride, int xdiv) {
	__local float part[64];
	int g = get_global_id(0), l = get_local_id(0);
	int lane = g & 15, out = g >> 4; // out = b·Out + o
	int b = out / Out, o = out % Out;
	int live = out < B * Out;
	float acc = 0.0f;
	int m = In & ~15;
	__global const float *wr = 0;
	__global const float *xr = 0;
	if (live) {
		wr = w + wbase(sel, usesel, b, stride) + (long)o * In;
		xr = x + (long)(b / xdiv) * In;
		for (int i = lane; i < m; i += 16) acc = fma(wr[i], xr[i], acc);
	}
	part[l] = acc;
	barrier(CLK_LOCAL_MEM_FENCE);
	if (live && lane == 0) {
		float a[16];
		for (int j = 0; j < 16; j++) a[j] = part[l + j];
		float s = reduce16(a);
		for (int i = m; i < In; i++) s = fma(wr[i], xr[i], s);
		y[(long)b * Out + o] = s;
	}
}

__kernel void mm_bf16(__global float *y, __global const ushort *w, __global const float *x, int In, int Out, int B,
		__global const int *sel, int usesel, int stride, int xdiv) {
	__local float part[64];
	int g = get_global_id(0), l = get_local_id(0);
	int lane = g & 15, out = g >> 4;
	int b = out / Out, o = out % Out;
	int live = out < B * Out;
	float acc = 0.0f;
	int m = In & ~15;
	__global const ushort *wr = 0;
	__global const float *xr = 0;
	if (live) {
		wr = w + wbase(sel, usesel, b, stride) + (long)o * In;
		xr = x + (long)(b / xdiv) * In;
		for (int i = lane; i < m; i += 16) acc = fma(bf16(wr[i]), xr[i], acc);
	}
	part[l] = acc;
	barrier(CLK_LOCAL_MEM_FENCE);
	if (live && lane == 0) {
		float a[16];
		for (int j = 0; j < 16; j++) a[j] = part[l + j];
		float s = reduce16(a);
		for (int i = m; i < In; i++) s = fma(bf16(wr[i]), xr[i], s);
		y[(long)b * Out + o] = s;
	}
}

// BFP products: one chain over k = 0..In−1 per output, acc = fma(x[k],
// w(k, n), acc), with w decoded exactly: q·scale[E], the sign applied
// unless q = 0 (docs/bfp.md). The layout is Wᵀ [In, Out] in 32×32 tiles,
// row-major tile order; in tile row r, columns 0..15 are group
// (r/16)·32 + r%16 and columns 16..31 that group + 16. bits is 8 (BFP8,
// 1088-byte tiles) or 4 (BFP4, 576-byte tiles).

inline float bfp_at(__global const uchar *t, int r, int c, __global const float *scale, int bits) {
	int grp = (r + (r & 16)) + (c & 16);
	int j = c & 15;
	uchar q, neg;
	if (bits == 8) {
		uchar code = t[64 + 16 * grp + j];
		q = code & 0x7f;
		neg = code & 0x80;
	} else {
		uchar code = t[64 + 8 * grp + (j >> 1)];
		uchar nib = (j & 1) ? (code >> 4) : (code & 15);
		q = nib & 7;
		neg = nib & 8;
	}
	float v = (float)q * scale[t[grp]];
	return (neg && q != 0) ? -v : v;
}

inline long tile_bytes(int bits) { return bits == 8 ? 1088 : 576; }

// mm_bfp: one item per output; with sel set (experts), row b's matrix is
// expert sel[b]'s.
__kernel void mm_bfp(__global float *y, __global const uchar *w, __global const float *x, int In, int Out, int B,
		__global const int *sel, int usesel, int stride, int xdiv, __global const float *scale, int bits) {
	int g = get_global_id(0);
	if (g >= B * Out) return;
	int b = g / Out, n = g % Out;
	int nt = n >> 5, c = n & 31, nTiles = (Out + 31) >> 5, kTiles = (In + 31) >> 5;
	__global const uchar *base = w + wbase(sel, usesel, b, stride);
	__global const float *xr = x + (long)(b / xdiv) * In;
	long tb = tile_bytes(bits);
	float acc = 0.0f;
	for (int kt = 0; kt < kTiles; kt++) {
		__global const uchar *t = base + ((long)kt * nTiles + nt) * tb;
		int rows = min(32, In - kt * 32);
		for (int r = 0; r < rows; r++) acc = fma(xr[kt * 32 + r], bfp_at(t, r, c, scale, bits), acc);
	}
	y[(long)b * Out + n] = acc;
}

// mm_bfp_rows is mm_bfp without expert selection for many rows (prefill,
// batched decode): one item per output column and block of up to ROWS
// rows, each weight decoded once for the block; every output is still its
// own chain over k in order.
#define ROWS 8

__kernel void mm_bfp_rows(__global float *y, __global const uchar *w, __global const float *x, int In, int Out, int B,
		__global const float *scale, int bits) {
	int g = get_global_id(0);
	int blocks = (B + ROWS - 1) / ROWS;
	if (g >= blocks * Out) return;
	int rb = g / Out, n = g % Out;
	int b0 = rb * ROWS, nb = min(ROWS, B - b0);
	int nt = n >> 5, c = n & 31, nTiles = (Out + 31) >> 5, kTiles = (In + 31) >> 5;
	long tb = tile_bytes(bits);
	float acc[ROWS];
	for (int i = 0; i < ROWS; i++) acc[i] = 0.0f;
	for (int kt = 0; kt < kTiles; kt++) {
		__global const uchar *t = w + ((long)kt * nTiles + nt) * tb;
		int rows = min(32, In - kt * 32);
		for (int r = 0; r < rows; r++) {
			float v = bfp_at(t, r, c, scale, bits);
			long k = kt * 32 + r;
			for (int i = 0; i < nb; i++) acc[i] = fma(x[(long)(b0 + i) * In + k], v, acc[i]);
		}
	}
	for (int i = 0; i < nb; i++) y[(long)(b0 + i) * Out + n] = acc[i];
}

// ---- short conv (lfm2-moe.md §4.4) ------------------------------------

// conv_bx sets u = B ⊙ x from the in-projection rows [B | C | x].
__kernel void conv_bx(__global float *u, __global const float *proj, int H, int rows) {
	int g = get_global_id(0);
	if (g >= rows * H) return;
	int r = g / H, ch = g % H;
	__global const float *p = proj + (long)r * 3 * H;
	u[g] = p[ch] * p[2 * H + ch];
}

// conv_cy sets y = C ⊙ v.
__kernel void conv_cy(__global float *y, __global const float *proj, __global const float *v, int H, int rows) {
	int g = get_global_id(0);
	if (g >= rows * H) return;
	int r = g / H, ch = g % H;
	y[g] = proj[(long)r * 3 * H + H + ch] * v[g];
}

// causal_conv is engine/kernels.CausalConv over rows [row0, row0+T) of u
// and v, one item per channel, updating that channel's state [H][K−1].
__kernel void causal_conv(__global float *v, __global const float *u, __global float *state, __global const float *w,
		__global const float *bias, int hasbias, int T, int H, int K, int row0) {
	int c = get_global_id(0);
	if (c >= H) return;
	int h = K - 1;
	__global float *st = state + (long)c * h;
	__global const float *wc = w + (long)c * K;
	for (int t = 0; t < T; t++) {
		float acc = 0.0f;
		for (int j = 0; j < K; j++) {
			int i = t - h + j;
			float in = i >= 0 ? u[(long)(row0 + i) * H + c] : st[h + i];
			acc = fma(wc[j], in, acc);
		}
		if (hasbias) acc += bias[c];
		v[(long)(row0 + t) * H + c] = acc;
	}
	if (T >= h) {
		for (int j = 0; j < h; j++) st[j] = u[(long)(row0 + T - h + j) * H + c];
	} else {
		for (int j = 0; j < h - T; j++) st[j] = st[j + T];
		for (int j = 0; j < T; j++) st[h - T + j] = u[(long)(row0 + j) * H + c];
	}
}

// conv_snap writes the conv state after token t of a segment (the last K−1
// u vectors up to t, reaching back into before, the state at the
// segment's start) into dst [H][K−1].
__kernel void conv_snap(__global float *dst, __global const float *before, __global const float *u, int H, int h, int t, int row0) {
	int g = get_global_id(0);
	if (g >= H * h) return;
	int ch = g / h, j = g % h;
	int i = t - h + 1 + j;
	dst[g] = i >= 0 ? u[(long)(row0 + i) * H + ch] : before[(long)ch * h + h + i];
}

// ---- attention (lfm2-moe.md §4.5) --------------------------------------

// rope rotates nvec head vectors of d values (heads per row, pos[row] the
// row's position) with the host's tables cos/sin [positions, d/2]:
// lo' = lo·c − hi·s, hi' = hi·c + lo·s, each product rounded.
__kernel void rope(__global float *z, __global const float *cosT, __global const float *sinT, __global const int *pos,
		int d, int heads, int nvec) {
	int hv = d / 2;
	int g = get_global_id(0);
	if (g >= nvec * hv) return;
	int vec = g / hv, j = g % hv;
	int row = vec / heads;
	long tp = (long)pos[row] * hv + j;
	float c = cosT[tp], s = sinT[tp];
	__global float *zv = z + (long)vec * d;
	float a = zv[j], b = zv[j + hv];
	float ac = a * c, bs = b * s, bc = b * c, as = a * s;
	zv[j] = ac - bs;
	zv[j + hv] = bc + as;
}

// attn_gate is LFM3's attention output gate (docs/lfm3.md): each head's d
// outputs of o [rows, Hq·d] multiplied by sigmoid(gate[row·Hq + head]),
// engine/kernels.Sigmoid's arithmetic, one rounding per product as
// engine/kernels.Scale.
__kernel void attn_gate(__global float *o, __global const float *gate, int d, int n) {
	int g = get_global_id(0);
	if (g >= n) return;
	o[g] = o[g] * sigmoid32(gate[g / d]);
}

// ---- the KV cache (engine/model/kvcache.go) ------------------------------
//
// A sequence's keys and values are stored in its model's format, fmt =
// model.KVDType: 0 float32, 1 bfloat16 (ushort), 2 BFP8 (bfloat8_b over 16
// values of the head dimension: per group an exponent byte, then 16
// sign-magnitude codes, 17 bytes). Each value is rounded once, when
// written, by the Go codecs' integer rules (dtype.Float32ToBF16,
// bfp.QuantizeGroup), and widened exactly when read; the decode is integer
// work too, so no device's denormal handling can change a value.

// to_bf16 is dtype.Float32ToBF16: to nearest, ties to even; a NaN keeps its
// sign and top payload and comes back quiet.
inline ushort to_bf16(float f) {
	uint x = as_uint(f);
	if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x0040u);
	x += 0x7fffu + ((x >> 16) & 1u);
	return (ushort)(x >> 16);
}

// bfp8_code is bfp's code8 (bfp.md §3) for a value x whose group's shared
// exponent E is at least its own: flush a zero exponent, shift the
// significand right by E − e(x) (nothing left from 32 on, as Go's shift
// gives; OpenCL would take the count mod 32), round half to even to 7
// bits, saturate at 127, never a negative zero.
inline uchar bfp8_code(uint x, uint E) {
	uint ex = (x >> 23) & 0xffu;
	uint a = ((x & 0x7fffffu) | 0x800000u) & (0u - ((ex + 0xffu) >> 8));
	uint sh = E - ex;
	a = sh >= 32u ? 0u : a >> sh;
	uint q = min((a + 0xffffu + ((a >> 17) & 1u)) >> 17, 127u);
	return (uchar)((((x >> 31) & ((q + 127u) >> 7)) << 7) | q);
}

// bfp8_value is bfp.DecodeValue for BFP8: ±q·2^(e−133), built from its
// bit fields. With e = 255 and q ≥ 64 the exponent field comes out 255 and
// the fraction (q − 64)·2^17: ±Inf or a NaN, as DecodeValue renormalises.
inline float bfp8_value(uint e, uint c) {
	uint q = c & 0x7fu, sign = (c & 0x80u) << 24;
	if (q == 0u) return as_float(sign);
	int p = 31 - (int)clz(q); // q's top bit
	int be = (int)e - 6 + p;  // the biased exponent of q·2^(e−133)
	uint bits = be >= 1 ? ((uint)be << 23) | ((q << (23 - p)) & 0x7fffffu) : q << (e + 16);
	return as_float(bits | sign);
}

// kv_at is value i of cached position j (rows of kvd values) in format fmt.
inline float kv_at(__global const uchar *c, int fmt, long j, int kvd, int i) {
	if (fmt == 0) return ((__global const float *)c)[j * kvd + i];
	if (fmt == 1) return bf16(((__global const ushort *)c)[j * kvd + i]);
	__global const uchar *g = c + j * (kvd / 16 * 17) + (i >> 4) * 17;
	return bfp8_value(g[0], g[1 + (i & 15)]);
}

// kv_store_bf16 rounds n rows of kvd floats (step rows row0…) into a
// bfloat16 cache at positions start….
__kernel void kv_store_bf16(__global ushort *c, __global const float *x, int kvd, int row0, int start, int n) {
	long g = get_global_id(0);
	if (g >= (long)n * kvd) return;
	c[(long)start * kvd + g] = to_bf16(x[(long)row0 * kvd + g]);
}

// kv_store_bfp8 encodes n rows of kvd floats (step rows row0…) into a BFP8
// cache at positions start…: one work item per group of 16, its shared
// exponent the largest exponent field among them (bfp.SharedExponent).
__kernel void kv_store_bfp8(__global uchar *c, __global const float *x, int kvd, int row0, int start, int n) {
	int G = kvd / 16;
	long g = get_global_id(0);
	if (g >= (long)n * G) return;
	long t = g / G;
	int grp = g % G;
	__global const uint *src = (__global const uint *)x + ((long)row0 + t) * kvd + grp * 16;
	uint E = 0;
	for (int j = 0; j < 16; j++) E = max(E, (src[j] >> 23) & 0xffu);
	__global uchar *dst = c + ((long)start + t) * (G * 17) + grp * 17;
	dst[0] = (uchar)E;
	for (int j = 0; j < 16; j++) dst[1 + j] = bfp8_code(src[j], E);
}

// A sliding-window layer (LFM3, window W > 0) gives the query at position
// p the keys from ws = max(0, p−W+1) to p; W = 0 means every earlier
// position. The blocks of 64 and splits of 1024 stay on the grid of
// absolute positions: the first block a query reads starts at ws (inside
// its grid block), and the blocks and splits wholly before ws are not
// read, as in engine/model's attention.go.
inline int win_start(int p, int W) { return W > 0 ? max(0, p - W + 1) : 0; }

// attn_scores writes, for tokens t in [t0, t0+nt) of a segment starting at
// position start (step rows row0+t) and query heads hd, the scaled scores
// against cached positions win_start(start+t, W) ≤ j ≤ start+t:
// sc[((t−t0)·Hq + hd)·L + j], L = start+t0+nt. The dot product is the CPU's order (16 fused lanes, the
// reduce16 tree, then the tail fused in one by one), the keys widened
// from the cache's format fmt.
__kernel void attn_scores(__global float *sc, __global const float *q, __global const uchar *kc, int fmt, int d, int Hq, int group,
		int kvd, int row0, int start, int t0, int nt, float scale, int W) {
	int L = start + t0 + nt;
	long g = get_global_id(0);
	if (g >= (long)nt * Hq * L) return;
	int j = g % L;
	int th = g / L;
	int hd = th % Hq, tt = th / Hq;
	int t = t0 + tt;
	if (j > start + t || j < win_start(start + t, W)) return;
	__global const float *qv = q + (long)(row0 + t) * Hq * d + hd * d;
	int off = (hd / group) * d;
	float acc[16];
	for (int l = 0; l < 16; l++) acc[l] = 0.0f;
	int m = d & ~15;
	for (int i = 0; i < m; i += 16)
		for (int l = 0; l < 16; l++) acc[l] = fma(qv[i + l], kv_at(kc, fmt, j, kvd, off + i + l), acc[l]);
	float s = reduce16(acc);
	for (int i = m; i < d; i++) s = fma(qv[i], kv_at(kc, fmt, j, kvd, off + i), s);
	sc[g] = s * scale;
}

// attn_block_max is the first half of engine/model's blocked attention
// for tokens t in [t0, t0+nt) and query heads hd: one work item per
// (token, head, split of 1024 positions) walks its blocks of 64 positions
// in order, keeping the running maximum M of the split's scores (from
// −Inf): for each block, M = max(M, the block's maximum), written to
// bm[((t−t0)·Hq + hd)·nb + block], and the block's scores replaced by
// Exp(s − M). nb = ceil(L/64), L = start+t0+nt. Within window W, a split
// starts at the window's start if that falls inside it, and one wholly
// before it is skipped.
__kernel void attn_block_max(__global float *sc, __global float *bm, int Hq, int start, int t0, int nt, int W) {
	int L = start + t0 + nt;
	int nb = (L + 63) / 64, ns = (L + 1023) / 1024;
	int g = get_global_id(0);
	if (g >= nt * Hq * ns) return;
	int sp = g % ns, th = g / ns;
	int t = t0 + th / Hq;
	int n = start + t + 1;
	int lo = sp * 1024;
	if (lo >= n) return;
	int hi = min(lo + 1024, n);
	lo = max(lo, win_start(n - 1, W));
	if (lo >= hi) return;
	__global float *x = sc + (long)th * L;
	float M = -INFINITY;
	for (int b0 = lo; b0 < hi; b0 = b0 - b0 % 64 + 64) {
		int b1 = min(b0 - b0 % 64 + 64, hi);
		float m = x[b0];
		for (int j = b0 + 1; j < b1; j++) m = gomax(m, x[j]);
		M = gomax(M, m);
		bm[(long)th * nb + b0 / 64] = M;
		for (int j = b0; j < b1; j++) x[j] = expf32(x[j] - M);
	}
}

// attn_split_out is the second half: per output value, each split's online
// softmax over its blocks (α = Exp(M − M'), L = L·α + Σ e in order, acc =
// acc·α then fused e_j·v_j in order), the splits merged in order (a =
// Exp(M − M'), b = Exp(M_s − M'), L = L·a + L_s·b, acc = fma(b, acc_s,
// acc·a)), then o = acc / L: engine/model's attention, operation for
// operation, the values widened from the cache's format fmt; from the
// split and block holding the window's start (W > 0), the first block
// read from that start.
__kernel void attn_split_out(__global float *o, __global const float *sc, __global const float *bm, __global const uchar *vc,
		int fmt, int d, int Hq, int group, int kvd, int row0, int start, int t0, int nt, int W) {
	int L = start + t0 + nt;
	int nb = (L + 63) / 64;
	int g = get_global_id(0);
	if (g >= nt * Hq * d) return;
	int i = g % d;
	int th = g / d;
	int hd = th % Hq, t = t0 + th / Hq;
	int n = start + t + 1;
	__global const float *p = sc + (long)th * L;
	__global const float *bmax = bm + (long)th * nb;
	int vi = (hd / group) * d + i;
	float M = -INFINITY, Lsum = 0.0f, acc = 0.0f;
	int ws = win_start(n - 1, W);
	for (int lo = ws - ws % 1024; lo < n; lo += 1024) {
		int hi = min(lo + 1024, n);
		float Ms = -INFINITY, Ls = 0.0f, as = 0.0f;
		for (int b0 = max(lo, ws); b0 < hi; b0 = b0 - b0 % 64 + 64) {
			int b1 = min(b0 - b0 % 64 + 64, hi);
			float Mn = bmax[b0 / 64];
			float alpha = expf32(Ms - Mn);
			float tsum = 0.0f;
			for (int j = b0; j < b1; j++) tsum += p[j];
			float la = Ls * alpha;
			Ls = la + tsum;
			as = as * alpha;
			for (int j = b0; j < b1; j++) as = fma(p[j], kv_at(vc, fmt, j, kvd, vi), as);
			Ms = Mn;
		}
		float Mn = gomax(M, Ms);
		float a = expf32(M - Mn), b = expf32(Ms - Mn);
		float la = Lsum * a, lb = Ls * b;
		Lsum = la + lb;
		acc = fma(b, as, acc * a);
		M = Mn;
	}
	o[(long)(row0 + t) * Hq * d + hd * d + i] = acc / Lsum;
}

// ---- mixture of experts (lfm2-moe.md §4.7) ------------------------------

// route selects each row's k experts from its router logits [rows, E]:
// the largest sigmoid + bias, ties to the lower id, NaN never first;
// weights are the unbiased sigmoids, renormalised (sum + 1e-6) when norm
// is set, then scaled. sel and wts get k entries per row in selection
// order.
__kernel void route(__global int *sel, __global float *wts, __global const float *logits, __global const float *bias,
		int hasbias, int E, int k, int norm, float scale, int rows) {
	int r = get_global_id(0);
	if (r >= rows) return;
	__global const float *lr = logits + (long)r * E;
	__global int *sr = sel + r * k;
	__global float *wr = wts + r * k;
	for (int i = 0; i < k; i++) {
		int best = -1;
		float bb = 0.0f;
		for (int e = 0; e < E; e++) {
			float s = sigmoid32(lr[e]);
			float b = hasbias ? s + bias[e] : s;
			if (isnan(b)) continue;
			int taken = 0;
			for (int j = 0; j < i; j++) taken |= sr[j] == e;
			if (taken) continue;
			if (best < 0 || b > bb) {
				best = e;
				bb = b;
			}
		}
		if (best < 0) {
			for (int e = 0; best < 0; e++) {
				int taken = 0;
				for (int j = 0; j < i; j++) taken |= sr[j] == e;
				if (!taken) best = e;
			}
		}
		sr[i] = best;
		wr[i] = sigmoid32(lr[best]);
	}
	if (norm) {
		float sum = 0.0f;
		for (int i = 0; i < k; i++) sum += wr[i];
		float den = sum + 1e-6f;
		for (int i = 0; i < k; i++) wr[i] = wr[i] / den;
	}
	for (int i = 0; i < k; i++) wr[i] = wr[i] * scale;
}

// moe_combine sets out[r] = Σ over row r's experts in ascending id of
// wts·y (y [rows·k, H], slot-major), one fused chain from +0.
__kernel void moe_combine(__global float *out, __global const float *y, __global const int *sel, __global const float *wts,
		int k, int H, int rows) {
	int g = get_global_id(0);
	if (g >= rows * H) return;
	int r = g / H, ch = g % H;
	__global const int *sr = sel + r * k;
	float acc = 0.0f;
	int prev = -1;
	for (int n = 0; n < k; n++) {
		int bi = -1;
		for (int i = 0; i < k; i++)
			if (sr[i] > prev && (bi < 0 || sr[i] < sr[bi])) bi = i;
		prev = sr[bi];
		acc = fma(wts[r * k + bi], y[((long)r * k + bi) * H + ch], acc);
	}
	out[g] = acc;
}
