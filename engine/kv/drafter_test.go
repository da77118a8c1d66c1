package kv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/engine/config"
)

// Layer kinds as a Shape spells them.
var (
	attn = string(rune('0' + config.Attention))
	conv = string(rune('0' + config.Conv))
)

// draftShape is a model of a conv, an attention and a conv layer (KV rows
// of 16 values) with a drafter of two layers of 32 values: the drafter's
// width differs from the model's, so a slot read with the other's width
// shows.
func draftShape(dt DType) Shape {
	return Shape{Layers: 3, Hidden: 4, ConvK: 3, KVDim: 16, Kinds: conv + attn + conv, DType: dt, DraftLayers: 2, DraftKVDim: 32}
}

// val is the value i of position pos's keys (or values) in layer slot l,
// distinct for every slot, position, index and kind; seed tells writes
// apart.
func val(seed, l, pos, i int, value bool) float32 {
	x := float32(seed*7919+l*613+pos*31+i) * 0.0137
	if value {
		x = -x + 0.5
	}
	return float32(math.Sin(float64(x))) * 3
}

// rowOf is position pos's keys (or values) of slot l.
func rowOf(sh Shape, seed, l, pos int, value bool) []float32 {
	x := make([]float32, sh.Dim(l))
	for i := range x {
		x[i] = val(seed, l, pos, i, value)
	}
	return x
}

// encoded is the row x as the cache's format stores it (rounded once),
// made independently of any page.
func encoded(dt DType, x []float32) []byte {
	r := MakeRows(dt, len(x), 1)
	r.Set(dt, len(x), 0, x)
	return r.AppendRaw(nil, dt, len(x), 0, 1)
}

// writeAll writes positions [from, to) of every KV slot of t with seed.
func writeAll(t *Table, sh Shape, seed, from, to int) {
	for l := range sh.KVLayers() {
		if !sh.HasKV(l) {
			continue
		}
		var k, v []float32
		for pos := from; pos < to; pos++ {
			k = append(k, rowOf(sh, seed, l, pos, false)...)
			v = append(v, rowOf(sh, seed, l, pos, true)...)
		}
		t.Write(l, from, k, v)
	}
}

// checkRows reports the first position of [from, to) of some slot whose
// stored keys or values are not seed's.
func checkRows(t *testing.T, what string, pages []*Page, sh Shape, seed, from, to int) {
	t.Helper()
	for l := range sh.KVLayers() {
		if !sh.HasKV(l) {
			continue
		}
		for pos := from; pos < to; pos++ {
			checkRow(t, what, pages[pos/PageTokens], sh, seed, l, pos)
		}
	}
}

// checkRow reports it when slot l's keys or values at position pos, in its
// page pg, are not seed's, or when pg was given back.
func checkRow(t *testing.T, what string, pg *Page, sh Shape, seed, l, pos int) {
	t.Helper()
	if pg == nil {
		t.Fatalf("%s: slot %d position %d: its page was given back", what, l, pos)
	}
	at := pos % PageTokens
	for _, value := range []bool{false, true} {
		r := pg.K(l)
		if value {
			r = pg.V(l)
		}
		if got, want := r.AppendRaw(nil, sh.DType, sh.Dim(l), at, 1), encoded(sh.DType, rowOf(sh, seed, l, pos, value)); !bytes.Equal(got, want) {
			t.Fatalf("%s: slot %d position %d (value %v): not what seed %d wrote", what, l, pos, value, seed)
		}
	}
}

// TestDraftLayerPages: a page holds the drafter's layer slots after the
// model's, at the drafter's width; the pool's bytes count them.
func TestDraftLayerPages(t *testing.T) {
	for _, dt := range DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			sh := draftShape(dt)
			if sh.KVLayers() != 5 {
				t.Fatalf("KVLayers %d, want 3 + 2", sh.KVLayers())
			}
			// One attention layer of 16, two drafter layers of 32: keys
			// and values of each.
			want := 2*dt.RowBytes(16) + 2*2*dt.RowBytes(32)
			if got := sh.BytesPerToken(); got != want {
				t.Errorf("BytesPerToken %d, want %d", got, want)
			}
			p := NewPool(sh, 0)
			if got := p.PageBytes(); got != PageTokens*want {
				t.Errorf("PageBytes %d, want %d", got, PageTokens*want)
			}
			tb := NewTable(p)
			if err := tb.Grow(0, 1); err != nil {
				t.Fatal(err)
			}
			pg := tb.Pages()[0]
			for l, want := range []int{0, 16, 0, 32, 32} {
				for _, r := range []*Rows{pg.K(l), pg.V(l)} {
					switch {
					case want == 0 && !r.Empty():
						t.Errorf("slot %d: rows made for a conv layer", l)
					case want > 0 && len(r.Bytes()) != PageTokens*dt.RowBytes(want):
						t.Errorf("slot %d: %d bytes, want %d positions of %d values", l, len(r.Bytes()), PageTokens, want)
					}
				}
			}
		})
	}
}

// TestDraftLayerCopyOnWrite: the drafter's slots are written like the
// model's, and a clone that grows into a shared page copies them too
// (copy on write) before either side writes there.
func TestDraftLayerCopyOnWrite(t *testing.T) {
	for _, dt := range DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			sh := draftShape(dt)
			p := NewPool(sh, 0)
			a := NewTable(p)
			if err := a.Grow(0, 100); err != nil {
				t.Fatal(err)
			}
			writeAll(&a, sh, 1, 0, 100)
			checkRows(t, "written", a.Pages(), sh, 1, 0, 100)

			b := a.Clone()
			if st := p.Stats(); st.Shared != 2 {
				t.Fatalf("after Clone %d pages shared, want 2", st.Shared)
			}
			// b writes position 100, in the shared second page: it
			// copies that page, drafter slots included, first.
			if err := b.Grow(100, 101); err != nil {
				t.Fatal(err)
			}
			if b.Pages()[1] == a.Pages()[1] || b.Pages()[0] != a.Pages()[0] {
				t.Fatal("Grow into a shared page did not copy it (or copied the first)")
			}
			writeAll(&b, sh, 2, 100, 101)
			checkRows(t, "clone's copied page", b.Pages(), sh, 1, 64, 100)
			checkRows(t, "clone's new row", b.Pages(), sh, 2, 100, 101)
			// a writes its own position 100 with other values: its page
			// is no longer shared, so it writes in place, and b keeps
			// its own row.
			if err := a.Grow(100, 101); err != nil {
				t.Fatal(err)
			}
			writeAll(&a, sh, 3, 100, 101)
			checkRows(t, "original", a.Pages(), sh, 1, 0, 100)
			checkRows(t, "original's new row", a.Pages(), sh, 3, 100, 101)
			checkRows(t, "clone after the original wrote", b.Pages(), sh, 2, 100, 101)
		})
	}
}

// handSpan encodes a span by the documented layout (span.go), written
// here independently of MarshalBinary: the magic, the header (layers,
// hidden, conv K, KV width, start, end, then for version 3 the drafter's
// layers and width) as little-endian uint64, the kinds, the KV format,
// then per layer slot its keys and values (F32 only here) or its conv
// state.
func handSpan(sh Shape, start, end int, seed int, convState func(l int) []float32) []byte {
	magic, head := "lfmq-span-2\x00", []int{sh.Layers, sh.Hidden, sh.ConvK, sh.KVDim, start, end}
	if sh.DraftLayers > 0 {
		magic, head = "lfmq-span-3\x00", append(head, sh.DraftLayers, sh.DraftKVDim)
	}
	b := []byte(magic)
	for _, v := range head {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	b = append(b, byte(len(sh.Kinds)))
	b = append(b, sh.Kinds...)
	b = append(b, byte(sh.DType))
	for l := range sh.KVLayers() {
		if !sh.HasKV(l) {
			for _, f := range convState(l) {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
			}
			continue
		}
		for _, value := range []bool{false, true} {
			for pos := start; pos < end; pos++ {
				for _, f := range rowOf(sh, seed, l, pos, value) {
					b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
				}
			}
		}
	}
	return b
}

// convOf is a conv state of shape sh after n tokens, distinct per layer.
func convOf(sh Shape, n int) *ConvState {
	c := NewConvState(sh, n)
	for l := range sh.Layers {
		for i := range c.Layer(l) {
			c.Layer(l)[i] = float32(l*100+i) + 0.25
		}
	}
	return c
}

// TestDraftSpanFormat: a span of a shape with a drafter is version 3,
// byte for byte the documented layout; it decodes (into a pool's pages or
// rows of its own) to the same rows, re-marshals to the same bytes and
// extends a sequence with them. A version-2 span (no drafter) still
// decodes.
func TestDraftSpanFormat(t *testing.T) {
	for _, sh := range []Shape{draftShape(F32), {Layers: 3, Hidden: 4, ConvK: 3, KVDim: 16, Kinds: conv + attn + conv}} {
		name := "v3"
		if sh.DraftLayers == 0 {
			name = "v2"
		}
		t.Run(name, func(t *testing.T) {
			p := NewPool(sh, 0)
			a := NewTable(p)
			if err := a.Grow(0, 130); err != nil {
				t.Fatal(err)
			}
			writeAll(&a, sh, 5, 0, 130)
			cs := convOf(sh, 130)
			want := handSpan(sh, 10, 130, 5, cs.Layer)
			sp, err := a.Span(10, 130, cs)
			if err != nil {
				t.Fatal(err)
			}
			data, err := sp.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, want) {
				t.Fatalf("MarshalBinary: %d bytes, %.12q…; the documented layout: %d bytes, %.12q…", len(data), data, len(want), want)
			}
			for _, store := range []struct {
				name string
				s    Store
			}{{"pages", NewPool(sh, 0).Store}, {"rows", RowStore}, {"same pool", p.Store}} {
				got, err := DecodeSpan(want, sh, 4096, store.s)
				if err != nil {
					t.Fatalf("%s: %v", store.name, err)
				}
				if got.Start() != 10 || got.End() != 130 || got.Shape() != sh {
					t.Fatalf("%s: [%d, %d) %+v", store.name, got.Start(), got.End(), got.Shape())
				}
				again, _ := got.MarshalBinary()
				if !bytes.Equal(again, want) {
					t.Fatalf("%s: re-marshalled span differs", store.name)
				}
				// A sequence extended with the span at position 10 (after
				// writing positions 0..9 itself) reads every slot back.
				b := NewTable(NewPool(sh, 0))
				if err := b.Grow(0, 10); err != nil {
					t.Fatal(err)
				}
				writeAll(&b, sh, 5, 0, 10)
				if err := b.Extend(10, got); err != nil {
					t.Fatal(err)
				}
				checkRows(t, store.name+": extended", b.Pages(), sh, 5, 0, 130)
				for l := range sh.Layers {
					if !slicesEqual(got.Conv().Layer(l), cs.Layer(l)) {
						t.Errorf("%s: conv layer %d differs", store.name, l)
					}
				}
				got.Free()
			}
			sp.Free()
		})
	}
}

func slicesEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestDraftSpanRefused: a span kept with another drafter, with none, or
// without one for a model that has one is a *DecodeError that says what
// each holds, never a misread.
func TestDraftSpanRefused(t *testing.T) {
	base := draftShape(F32)
	noDrafter := base
	noDrafter.DraftLayers, noDrafter.DraftKVDim = 0, 0
	moreLayers, wider := base, base
	moreLayers.DraftLayers = 3
	wider.DraftKVDim = 64
	span := func(sh Shape) []byte {
		return handSpan(sh, 0, 20, 1, convOf(sh, 20).Layer)
	}
	for _, c := range []struct {
		name      string
		span, sh  Shape
		want      string
		wantModel string
	}{
		{"v3 span, model without drafter", base, noDrafter, "the span holds a drafter's context of 2 layers of 32 values a position", "hold no drafter context"},
		{"v2 span, model with drafter", noDrafter, base, "the span holds no drafter context", "hold a drafter's context of 2 layers of 32 values"},
		{"another drafter depth", base, moreLayers, "2 layers of 32", "3 layers of 32"},
		{"another drafter width", base, wider, "2 layers of 32", "2 layers of 64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeSpan(span(c.span), c.sh, 4096, RowStore)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("%v, want a *DecodeError", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) || !strings.Contains(msg, c.wantModel) || !strings.Contains(msg, "drafter") {
				t.Errorf("%q does not say %q and %q", msg, c.want, c.wantModel)
			}
		})
	}
	// The spans themselves are sound: each decodes for its own shape.
	for _, sh := range []Shape{base, noDrafter, moreLayers, wider} {
		if _, err := DecodeSpan(span(sh), sh, 4096, RowStore); err != nil {
			t.Errorf("%+v: %v", sh, err)
		}
	}
}

// TestDraftSpanRoundTrip: in every KV format, a span of a shape with a
// drafter re-marshals byte for byte after decoding, and one starting at
// position 0 extends a sequence of the same pool by sharing its pages,
// drafter slots and all.
func TestDraftSpanRoundTrip(t *testing.T) {
	for _, dt := range DTypes {
		t.Run(dt.String(), func(t *testing.T) {
			sh := draftShape(dt)
			p := NewPool(sh, 0)
			a := NewTable(p)
			if err := a.Grow(0, 130); err != nil {
				t.Fatal(err)
			}
			writeAll(&a, sh, 9, 0, 130)
			sp, err := a.Span(0, 130, convOf(sh, 130))
			if err != nil {
				t.Fatal(err)
			}
			defer sp.Free()
			data, _ := sp.MarshalBinary()
			if !bytes.HasPrefix(data, []byte("lfmq-span-3\x00")) {
				t.Fatalf("magic %q, want lfmq-span-3", data[:12])
			}
			got, err := DecodeSpan(data, sh, 4096, p.Store)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Free()
			if again, _ := got.MarshalBinary(); !bytes.Equal(again, data) {
				t.Fatal("re-marshalled span differs")
			}
			b := NewTable(p)
			if err := b.Extend(0, got); err != nil {
				t.Fatal(err)
			}
			if b.Pages()[0] != got.pages[0] {
				t.Fatal("a span at position 0 of the same pool was copied, not shared")
			}
			checkRows(t, "extended", b.Pages(), sh, 9, 0, 130)
		})
	}
}
