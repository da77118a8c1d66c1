package tokenizer

import (
	"testing"
)

// BenchmarkEncode encodes whole corpora (MB/s of text) with the hand
// splitter, the same without the piece cache, and with the regexp2
// splitter running the file's pattern.
func BenchmarkEncode(b *testing.B) {
	base := loadFixture(b)
	noCache := *base
	noCache.bpe = &bpeModel{byteID: base.bpe.byteID, merges: base.bpe.merges}
	withRegexp2 := noCache
	withRegexp2.splitter = regexp2Llama3
	variants := []struct {
		name string
		tok  *Tokenizer
	}{
		{"hand", base},
		{"hand-nocache", &noCache},
		{"regexp2-nocache", &withRegexp2},
	}
	for _, name := range []string{"book", "code", "chat"} {
		recs := loadCorpus(b, name)
		n := 0
		for _, r := range recs {
			n += len(r.Text)
		}
		for _, v := range variants {
			b.Run(name+"/"+v.name, func(b *testing.B) {
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					for _, r := range recs {
						v.tok.EncodeSpecialSplit(r.Text)
					}
				}
			})
		}
	}
}

// BenchmarkDecode decodes the book corpus, all at once and streamed.
func BenchmarkDecode(b *testing.B) {
	tok := loadFixture(b)
	var ids [][]int
	n := 0
	for _, r := range loadCorpus(b, "book") {
		ids = append(ids, tok.EncodeOrdinary(r.Text))
		n += len(r.Text)
	}
	b.Run("Decode", func(b *testing.B) {
		b.SetBytes(int64(n))
		for b.Loop() {
			for _, x := range ids {
				if _, err := tok.Decode(x); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("StreamDecoder", func(b *testing.B) {
		b.SetBytes(int64(n))
		for b.Loop() {
			for _, x := range ids {
				d := tok.NewStreamDecoder()
				for _, id := range x {
					if _, err := d.Add(id); err != nil {
						b.Fatal(err)
					}
				}
				d.Flush()
			}
		}
	})
}

func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		if _, err := Load(fixtureDir + "/model"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSplit measures pre-tokenization alone: the hand splitter
// against regexp2 running the same pattern.
func BenchmarkSplit(b *testing.B) {
	recs := loadCorpus(b, "book")
	n := 0
	for _, r := range recs {
		n += len(r.Text)
	}
	for _, v := range []struct {
		name string
		sp   splitter
	}{{"hand", handOnig}, {"regexp2", regexp2Llama3}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(n))
			var ends []int
			for b.Loop() {
				for _, r := range recs {
					ends = v.sp.split(ends[:0], r.Text)
				}
			}
		})
	}
}
