package draft

import (
	"fmt"
	"math"
	"slices"

	"github.com/lfmq/lfmq/engine/kernels"
	"github.com/lfmq/lfmq/engine/kv"
	"github.com/lfmq/lfmq/engine/model"
)

// Block is what one Propose call drafted for N sequences, B rows each;
// row i of sequence s is index s·B+i.
type Block struct {
	N, B int
	// Tokens holds the drafts, [N·B]: row i proposes the token i+1
	// positions after the sequence's pending token.
	Tokens []int
	// Confidence holds each draft's logit of surviving verification given
	// that the drafts before it did, [N·B] (0 without a confidence head).
	Confidence []float32
	// Hidden is the block rows after the drafter's final norm, [N·B, H];
	// Logits their logits after the Markov head, [N·B, V]. Kept only when
	// Propose is asked to (tests, diagnostics).
	Hidden, Logits []float32
}

// Draft returns sequence s's drafts.
func (b *Block) Draft(s int) []int { return b.Tokens[s*b.B : (s+1)*b.B] }

// Conf returns sequence s's confidence logits.
func (b *Block) Conf(s int) []float32 { return b.Confidence[s*b.B : (s+1)*b.B] }

// InputError is a Propose call that cannot run.
type InputError struct{ Msg string }

// Error implements error.
func (e *InputError) Error() string { return "drafter: " + e.Msg }

// Propose drafts a block for each sequence: seqs[s] holds the target's
// tokens so far (and so the drafter's context), pending[s] is the token
// sampled after them that the target has not yet processed. The block is
// [pending, mask, …] at positions Len, Len+1, …; it attends to all the
// context and, both ways, to its own rows (docs/drafting.md §2). Each
// sequence's drafts depend on its own state only, never on the batch.
// keep asks for the block's hidden rows and logits in the result.
func (d *Drafter) Propose(seqs []*model.Sequence, pending []int, keep bool) (*Block, error) {
	c := d.Config
	N, B, H := len(seqs), c.BlockSize, c.HiddenSize
	if len(pending) != N {
		return nil, &InputError{fmt.Sprintf("%d sequences but %d pending tokens", N, len(pending))}
	}
	for s, sq := range seqs {
		sh := sq.Shape()
		switch {
		case sh.DraftLayers != c.NumLayers || sh.DraftKVDim != c.NumKVHeads*c.HeadDim:
			return nil, &InputError{fmt.Sprintf("sequence %d was not made by the drafter's target (it keeps no drafter context)", s)}
		case sq.Len() == 0:
			return nil, &InputError{fmt.Sprintf("sequence %d is empty: a block drafts from the context of the tokens processed", s)}
		case !sq.DraftWhole():
			return nil, &InputError{fmt.Sprintf("sequence %d gave up part of its drafter context (model.ForwardOptions.DropDraft): it cannot draft", s)}
		case pending[s] < 0 || pending[s] >= c.VocabSize:
			return nil, &InputError{fmt.Sprintf("pending token %d of sequence %d is outside the vocabulary", pending[s], s)}
		}
	}
	if N == 0 {
		return &Block{B: B}, nil
	}
	// The context of the rows the target processed since the last pass
	// is computed now, every sequence's in one product (model.Drafter).
	d.target.FlushDraft(seqs)
	pool := d.target.Pool()
	R := N * B
	ids := make([]int, R)
	pos := make([]int, R)
	for s, sq := range seqs {
		for i := range B {
			ids[s*B+i], pos[s*B+i] = c.MaskTokenID, sq.Len()+i
		}
		ids[s*B] = pending[s]
	}
	Hq, Hkv, dh := c.NumHeads, c.NumKVHeads, c.HeadDim
	pb := d.getBufs(R, N)
	defer d.bufs.Put(pb)
	x, xn, q, kb, vb, o, t, g, u := pb.x, pb.xn, pb.q, pb.kb, pb.vb, pb.o, pb.t, pb.g, pb.u
	d.target.EmbedRows(ids, x)
	for j, ly := range d.layers {
		rmsRows(xn, x, ly.inNorm, R, H, c.NormEps)
		pool.MatMulAll([]kernels.MulJob{{M: ly.q, Y: q, X: xn, Batch: R}, {M: ly.k, Y: kb, X: xn, Batch: R}, {M: ly.v, Y: vb, X: xn, Batch: R}})
		for r, p := range pos {
			for h := range Hq {
				z := q[(r*Hq+h)*dh:][:dh]
				kernels.RMSNorm(z, z, ly.qNorm, c.NormEps)
				d.rotate(z, p)
			}
			for h := range Hkv {
				z := kb[(r*Hkv+h)*dh:][:dh]
				kernels.RMSNorm(z, z, ly.kNorm, c.NormEps)
				d.rotate(z, p)
			}
		}
		d.attend(pool, seqs, j, q, kb, vb, o)
		pool.MatMul(ly.o, t, o, R)
		addInto(x, t)
		rmsRows(xn, x, ly.postNorm, R, H, c.NormEps)
		pool.MatMulAll([]kernels.MulJob{{M: ly.gate, Y: g, X: xn, Batch: R}, {M: ly.up, Y: u, X: xn, Batch: R}})
		kernels.SwiGLU(g, g, u)
		pool.MatMul(ly.down, t, g, R)
		addInto(x, t)
	}
	hid := xn
	rmsRows(hid, x, d.norm, R, H, c.NormEps)
	z := pb.z
	d.target.HeadRows(z, hid, R)
	blk := &Block{N: N, B: B, Tokens: make([]int, R), Confidence: make([]float32, R)}
	d.markov(pool, blk, z, hid, pending, pb)
	if keep {
		// The buffers go back to the pool: the caller's copy is its own.
		blk.Hidden, blk.Logits = slices.Clone(hid), slices.Clone(z)
	}
	return blk, nil
}

// passBufs is one pass's activations, kept between passes (Drafter.bufs):
// a pass over 16 sequences of a released drafter holds 40 MB of logits.
type passBufs struct {
	x, xn, q, kb, vb, o, t, g, u, z []float32 // the block's rows
	emb, add                        []float32 // the Markov head's, per sequence
}

// getBufs returns buffers for a pass of R rows over N sequences.
func (d *Drafter) getBufs(R, N int) *passBufs {
	c := d.Config
	pb, _ := d.bufs.Get().(*passBufs)
	if pb == nil {
		pb = &passBufs{}
	}
	grow := func(b *[]float32, n int) {
		if cap(*b) < n {
			*b = make([]float32, n)
		}
		*b = (*b)[:n]
	}
	H, F, V := c.HiddenSize, c.IntermediateSize, c.VocabSize
	grow(&pb.x, R*H)
	grow(&pb.xn, R*H)
	grow(&pb.t, R*H)
	grow(&pb.q, R*c.NumHeads*c.HeadDim)
	grow(&pb.o, R*c.NumHeads*c.HeadDim)
	grow(&pb.kb, R*c.NumKVHeads*c.HeadDim)
	grow(&pb.vb, R*c.NumKVHeads*c.HeadDim)
	grow(&pb.g, R*F)
	grow(&pb.u, R*F)
	grow(&pb.z, R*V)
	grow(&pb.emb, N*c.MarkovRank)
	grow(&pb.add, N*V)
	return pb
}

// markov drafts each sequence's rows left to right: row i's logits gain
// markov_w2·markov_w1[prev] (prev the pending token, then the previous
// row's draft), its draft is their argmax (ties to the lowest id), and its
// confidence proj·[h_i; markov_w1[prev]] + bias. Row i of every sequence
// is one product.
func (d *Drafter) markov(pool *kernels.Pool, blk *Block, z, hid []float32, pending []int, pb *passBufs) {
	c := d.Config
	N, B, H, V, r := blk.N, blk.B, c.HiddenSize, c.VocabSize, c.MarkovRank
	prev := append([]int(nil), pending...)
	emb, add := pb.emb, pb.add
	for i := range B {
		for s, p := range prev {
			d.markov1.Row(p, emb[s*r:(s+1)*r])
		}
		pool.MatMul(d.markov2, add, emb, N)
		for s := range N {
			row := s*B + i
			l := z[row*V : (row+1)*V]
			addInto(l, add[s*V:(s+1)*V])
			best := 0
			for id, v := range l {
				if v > l[best] {
					best = id
				}
			}
			blk.Tokens[row] = best
			if d.confW != nil {
				h := hid[row*H : (row+1)*H]
				conf := kernels.Dot(d.confW[:H], h)
				if len(d.confW) > H {
					conf += kernels.Dot(d.confW[H:], emb[s*r:(s+1)*r])
				}
				blk.Confidence[row] = conf + d.confB
			}
			prev[s] = best
		}
	}
}

// attend is the block's attention in drafter layer dl: each of a
// sequence's B query rows attends to its context (positions [0, Len) of
// layer dl's keys and values, Sequence.DraftRows) and to all B rows of its
// own block, as an online softmax over blocks of kv.PageTokens positions,
// then the block's rows, in that order. Work is shared out by (sequence,
// KV head); a row's bits depend on its own sequence alone.
func (d *Drafter) attend(pool *kernels.Pool, seqs []*model.Sequence, dl int, q, kb, vb, o []float32) {
	c := d.Config
	B, Hq, Hkv, dh := c.BlockSize, c.NumHeads, c.NumKVHeads, c.HeadDim
	G := Hq / Hkv
	kvd := Hkv * dh
	scale := float32(1 / math.Sqrt(float64(dh)))
	pool.Run(len(seqs)*Hkv, func(lo, hi int) {
		kbuf := make([]float32, kv.PageTokens*dh)
		vbuf := make([]float32, kv.PageTokens*dh)
		sc := make([]float32, max(kv.PageTokens, B))
		n := B * G
		M, Lsum, acc := make([]float32, n), make([]float32, n), make([]float32, n*dh)
		for w := lo; w < hi; w++ {
			s, hk := w/Hkv, w%Hkv
			sq := seqs[s]
			dt, T := sq.Shape().DType, sq.Len()
			for i := range n {
				M[i], Lsum[i] = negInf, 0
			}
			clear(acc)
			for b0 := 0; b0 < T; b0 += kv.PageTokens {
				cnt := min(kv.PageTokens, T-b0)
				// A CPU sequence's page or a device sequence's host rows
				// (model.Sequence.DraftRows): the same values either way.
				kr, vr, at := sq.DraftRows(dl, b0)
				keys, ks := kr.Block(dt, kvd, hk*dh, dh, at, cnt, kbuf)
				vals, vs := vr.Block(dt, kvd, hk*dh, dh, at, cnt, vbuf)
				for i := range B {
					for gq := range G {
						row := s*B + i
						qv := q[(row*Hq+hk*G+gq)*dh:][:dh]
						j := i*G + gq
						reduce(qv, keys, ks, vals, vs, cnt, scale, sc, &M[j], &Lsum[j], acc[j*dh:(j+1)*dh])
					}
				}
			}
			keys, vals := kb[(s*B*Hkv+hk)*dh:], vb[(s*B*Hkv+hk)*dh:]
			for i := range B {
				for gq := range G {
					row := s*B + i
					qv := q[(row*Hq+hk*G+gq)*dh:][:dh]
					j := i*G + gq
					reduce(qv, keys, kvd, vals, kvd, B, scale, sc, &M[j], &Lsum[j], acc[j*dh:(j+1)*dh])
					out := o[(row*Hq+hk*G+gq)*dh:][:dh]
					inv := 1 / Lsum[j]
					for e, a := range acc[j*dh : (j+1)*dh] {
						out[e] = a * inv
					}
				}
			}
		}
	})
}

// reduce adds cnt keys and values (float32 rows ks and vs apart) to one
// query's online softmax state (m, l, acc).
func reduce(q, keys []float32, ks int, vals []float32, vs, cnt int, scale float32, sc []float32, m, l *float32, acc []float32) {
	dh := len(q)
	mx := negInf
	for j := range cnt {
		s := kernels.Dot(q, keys[j*ks:][:dh]) * scale
		sc[j] = s
		mx = max(mx, s)
	}
	m2 := max(*m, mx)
	if alpha := kernels.Exp(*m - m2); alpha != 1 {
		*l *= alpha
		kernels.Scale(alpha, acc)
	}
	var sum float32
	for j := range cnt {
		e := kernels.Exp(sc[j] - m2)
		sum += e
		kernels.Axpy(e, vals[j*vs:][:dh], acc)
	}
	*l += sum
	*m = m2
}

func rmsRows(y, x, w []float32, R, H int, eps float32) {
	for r := range R {
		kernels.RMSNorm(y[r*H:(r+1)*H], x[r*H:(r+1)*H], w, eps)
	}
}

func addInto(x, y []float32) {
	for i, v := range y {
		x[i] += v
	}
}
