package safetensors

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

// checkHeader verifies what every accepted header must satisfy: names
// sorted, unique and indexed, each span matching its shape and dtype, and
// the spans tiling the data section exactly.
func checkHeader(t testing.TB, h *Header) {
	t.Helper()
	type span struct{ b, e int64 }
	var spans []span
	for i, ti := range h.Tensors {
		if i > 0 && h.Tensors[i-1].Name >= ti.Name {
			t.Fatalf("tensors not strictly sorted at %q", ti.Name)
		}
		if got, ok := h.Tensor(ti.Name); !ok || got.Name != ti.Name {
			t.Fatalf("Tensor(%q) not indexed", ti.Name)
		}
		if ti.Name == "" || ti.Name == metadataKey {
			t.Fatalf("bad name %q accepted", ti.Name)
		}
		n := ti.NumElements()
		if n < 0 || n*int64(ti.DType.Size()) != ti.End-ti.Begin || ti.DType.Size() == 0 {
			t.Fatalf("%q: %d elements of %s in [%d,%d)", ti.Name, n, ti.DType, ti.Begin, ti.End)
		}
		spans = append(spans, span{ti.Begin, ti.End})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmpInt64(a.b, b.b)*2 + cmpInt64(a.e, b.e) })
	var pos int64
	for _, s := range spans {
		if s.b != pos {
			t.Fatalf("spans do not tile: [%d,%d) at %d", s.b, s.e, pos)
		}
		pos = s.e
	}
	if pos != h.DataLen {
		t.Fatalf("spans end at %d, data at %d", pos, h.DataLen)
	}
}

func TestTruncatedFixture(t *testing.T) {
	for _, src := range []string{calibPath, modelPath} {
		raw, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		hlen := int(binary.LittleEndian.Uint64(raw))
		cuts := []int{0, 1, 7, 8, 9, 100, 8 + hlen - 1, 8 + hlen, 8 + hlen + 1, len(raw) / 2, len(raw) - 2, len(raw) - 1}
		for _, cut := range cuts {
			path := writeTemp(t, "cut.safetensors", raw[:cut])
			f, err := Open(path)
			if err == nil {
				f.Close()
				t.Fatalf("%s cut at %d: Open succeeded", src, cut)
			}
			var fe *FormatError
			if !errors.As(err, &fe) || fe.File != path {
				t.Fatalf("%s cut at %d: %v", src, cut, err)
			}
		}
		// One byte too many is as wrong as one too few.
		path := writeTemp(t, "long.safetensors", append(slices.Clone(raw), 0))
		var fe *FormatError
		if _, err := Open(path); !errors.As(err, &fe) || fe.Field != FieldData {
			t.Fatalf("%s plus a byte: %v", src, err)
		}
	}
}

// TestFlippedFixture flips bytes of real headers. A flip may leave a valid
// header (inside a name, say); otherwise it must be a FormatError, never a
// panic.
func TestFlippedFixture(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, src := range allFixtures {
		header, dataLen := headerOf(t, src)
		// Every byte of small headers; a sample of big ones, sized so that
		// each file costs about as much parsing.
		var positions []int
		if len(header) <= 600 {
			for i := range header {
				positions = append(positions, i)
			}
		} else {
			for range max(50, min(600, 2_000_000/len(header))) {
				positions = append(positions, r.IntN(len(header)))
			}
		}
		accepted := 0
		for _, pos := range positions {
			for _, mask := range []byte{0x01, 0x20, 0x80, byte(1 + r.IntN(255))} {
				h := slices.Clone(header)
				h[pos] ^= mask
				got, err := ParseHeader(h, dataLen)
				if err != nil {
					var fe *FormatError
					if !errors.As(err, &fe) {
						t.Fatalf("%s byte %d ^ %#x: %v is not a FormatError", src, pos, mask, err)
					}
					continue
				}
				accepted++
				checkHeader(t, got)
			}
		}
		t.Logf("%s: %d of %d flips still valid", src, accepted, 4*len(positions))
	}

	// Through Open, on a copy, including the length prefix and the data.
	raw, err := os.ReadFile(calibPath)
	if err != nil {
		t.Fatal(err)
	}
	hlen := int(binary.LittleEndian.Uint64(raw))
	for _, pos := range []int{0, 1, 3, 7, 8, 20, 8 + hlen - 1, 8 + hlen, len(raw) - 1} {
		b := slices.Clone(raw)
		b[pos] ^= 0x10
		path := writeTemp(t, "flip.safetensors", b)
		f, err := Open(path)
		if pos >= 8+hlen-1 { // trailing padding space and data bytes
			if pos == 8+hlen-1 {
				// A space turned into '0' after the object is an error.
				if err == nil {
					f.Close()
					t.Fatalf("flip in padding at %d accepted", pos)
				}
				continue
			}
			if err != nil {
				t.Fatalf("flip in data at %d: %v", pos, err)
			}
			d, _ := f.Bytes("input_ids")
			if d[pos-8-hlen] != b[pos] {
				t.Errorf("Bytes do not show the flipped byte")
			}
			f.Close()
			continue
		}
		if err == nil {
			f.Close()
			t.Fatalf("flip at %d accepted", pos)
		}
		if !strings.HasPrefix(err.Error(), "safetensors: ") {
			t.Errorf("flip at %d: %v", pos, err)
		}
	}
}
