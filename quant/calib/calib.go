package calib

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
)

// Options selects the calibration windows.
type Options struct {
	// Seqs is the number of windows to use (≥ 1).
	Seqs int
	// Len is the length of the windows cut from text and chat records
	// (≥ 2); records that carry input_ids are windows as they are.
	Len int
	// Seed drives the choice of windows when there are more than Seqs.
	Seed uint64
}

// Set is a calibration set: the token windows the model is run on.
type Set struct {
	// Windows are the chosen windows in the order of the file: records
	// given as input_ids first, then the windows cut from the stream.
	Windows [][]int
	// Digest is the sha256 (hex) of the chosen windows' token ids, each as
	// a uint32 little-endian, in order (docs/gptq.md §3).
	Digest string
	// FileSHA256 is the sha256 of the calibration file's bytes.
	FileSHA256 string
	// Available is the number of windows the file yields; Given of them
	// came as input_ids records.
	Available, Given int
	// Tokens is the number of tokens in the chosen windows.
	Tokens int
	// MaxLen is the longest chosen window.
	MaxLen int
}

// TooFewError reports a calibration file that yields fewer windows than
// asked for.
type TooFewError struct {
	File            string
	Available, Want int
	Len             int
}

func (e *TooFewError) Error() string {
	return fmt.Sprintf("calib: %s yields %d windows (text cut into windows of %d tokens), fewer than the %d asked for", e.File, e.Available, e.Len, e.Want)
}

// Load reads the calibration file at path (see readRecords for the formats)
// and chooses its windows (docs/gptq.md §3):
//
//   - a record with input_ids is one window, used exactly as given;
//   - the other records' token sequences (each starting with its BOS, the
//     document separator) are concatenated into one stream, and window i of
//     it is BOS followed by the next Len−1 stream tokens (a short tail is
//     dropped);
//   - when there are more windows than opts.Seqs, a seeded shuffle picks
//     Seqs of them, which are then kept in file order, so using every
//     window gives the same set (and digest) for any seed.
func Load(path string, enc *Encoder, opts Options) (*Set, error) {
	if opts.Seqs < 1 {
		return nil, fmt.Errorf("calib: %d windows asked for; need at least 1", opts.Seqs)
	}
	if opts.Len < 2 {
		return nil, fmt.Errorf("calib: window length %d; need at least 2", opts.Len)
	}
	recs, sum, err := readRecords(path, enc)
	if err != nil {
		return nil, err
	}
	var windows [][]int
	var stream []int
	for _, r := range recs {
		if r.Given {
			windows = append(windows, r.IDs)
		} else {
			stream = append(stream, r.IDs...)
		}
	}
	given := len(windows)
	if len(stream) > 0 {
		bos, ok := enc.BOS()
		if !ok {
			return nil, fmt.Errorf("calib: %s: cutting text into windows needs a BOS token, and the tokenizer has none", path)
		}
		step := opts.Len - 1
		for i := 0; (i+1)*step <= len(stream); i++ {
			w := make([]int, 0, opts.Len)
			w = append(w, bos)
			windows = append(windows, append(w, stream[i*step:(i+1)*step]...))
		}
	}
	if len(windows) < opts.Seqs {
		return nil, &TooFewError{File: path, Available: len(windows), Want: opts.Seqs, Len: opts.Len}
	}
	chosen := choose(len(windows), opts.Seqs, opts.Seed)
	set := &Set{FileSHA256: sum, Available: len(windows), Given: given}
	h := sha256.New()
	var buf [4]byte
	for _, i := range chosen {
		w := windows[i]
		set.Windows = append(set.Windows, w)
		set.Tokens += len(w)
		set.MaxLen = max(set.MaxLen, len(w))
		for _, id := range w {
			binary.LittleEndian.PutUint32(buf[:], uint32(id))
			h.Write(buf[:])
		}
	}
	set.Digest = hex.EncodeToString(h.Sum(nil))
	return set, nil
}

// choose returns k of the indices 0..n−1, ascending: all of them when
// k = n, else the first k of a Fisher–Yates shuffle driven by SplitMix64
// from seed. The generator is written out here, not taken from math/rand,
// so the choice can never change with the Go version.
func choose(n, k int, seed uint64) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	if k < n {
		s := seed
		for i := n - 1; i > 0; i-- {
			j := int(bounded(&s, uint64(i+1)))
			idx[i], idx[j] = idx[j], idx[i]
		}
		idx = idx[:k]
		slices.Sort(idx)
	}
	return idx
}

// splitmix64 advances s and returns the next output of SplitMix64.
func splitmix64(s *uint64) uint64 {
	*s += 0x9E3779B97F4A7C15
	z := *s
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// bounded returns a uniform value in [0, n) by rejection (no modulo bias).
func bounded(s *uint64, n uint64) uint64 {
	limit := -n % n // 2^64 mod n: values below it would bias the modulo
	for {
		v := splitmix64(s)
		if v >= limit {
			return v % n
		}
	}
}
