package calib

import (
	"fmt"
	"slices"
)

// OverlapWindow is the length of the token windows compared by the
// disjointness check (docs/gptq.md §3).
const OverlapWindow = 32

// Corpus is an evaluation corpus as token ids, for the disjointness check.
type Corpus struct {
	Name    string
	SHA256  string
	Records []Record
}

// LoadCorpus reads an evaluation corpus (JSONL records as for calibration;
// records with input_ids are used as given).
func LoadCorpus(name, path string, enc *Encoder) (*Corpus, error) {
	recs, sum, err := readRecords(path, enc)
	if err != nil {
		return nil, err
	}
	return &Corpus{Name: name, SHA256: sum, Records: recs}, nil
}

// CorpusCheck is the disjointness check's view of one corpus.
type CorpusCheck struct {
	Name    string `json:"name"`
	SHA256  string `json:"sha256"`
	Records int    `json:"records"`
	Tokens  int    `json:"tokens"`
	// Windows is the number of distinct 32-token windows without a
	// control token.
	Windows int `json:"windows"`
}

// Disjointness is the record of the check that no calibration window
// shares a 32-token window with an evaluation corpus, as the manifest
// keeps it.
type Disjointness struct {
	Checked bool          `json:"checked"`
	Window  int           `json:"window"`
	Corpora []CorpusCheck `json:"corpora"`
	// EvalWindows is the number of distinct eval windows over all corpora,
	// CalibWindows the number of calibration windows compared with them.
	EvalWindows  int `json:"eval_windows"`
	CalibWindows int `json:"calib_windows"`
	// Shared is the number of shared windows: 0 whenever a checkpoint is
	// written, since any sharing refuses the calibration set.
	Shared int    `json:"shared"`
	Result string `json:"result"`
}

// OverlapError refuses a calibration set that shares a window with an
// evaluation corpus: the 32 tokens at Offset of record Record of corpus
// Corpus are also at CalibOffset of calibration window CalibWindow.
type OverlapError struct {
	Corpus      string
	Record      string
	Offset      int
	CalibWindow int
	CalibOffset int
}

func (e *OverlapError) Error() string {
	return fmt.Sprintf("calib: calibration window %d shares the %d tokens at its offset %d with eval corpus %s, record %s, offset %d; calibration and evaluation data must be disjoint",
		e.CalibWindow, OverlapWindow, e.CalibOffset, e.Corpus, e.Record, e.Offset)
}

type windowLoc struct {
	corpus, record, offset int
}

// CheckDisjoint hashes every 32-token window (stride 1) of every record of
// the corpora and refuses (with an *OverlapError naming the first hit) a
// calibration set with a window among them. Windows containing a control
// token are skipped on both sides, so shared chat-template boilerplate
// alone never triggers it; shared text does. Hash hits are confirmed token
// by token, so a hash collision never refuses a set. With no corpora the
// result says the check was not run.
func CheckDisjoint(set *Set, corpora []*Corpus, isControl func(int) bool) (*Disjointness, error) {
	d := &Disjointness{Window: OverlapWindow, Corpora: []CorpusCheck{}, Result: "not_checked"}
	if len(corpora) == 0 {
		return d, nil
	}
	d.Checked = true
	index := map[uint64][]windowLoc{}
	for ci, c := range corpora {
		cc := CorpusCheck{Name: c.Name, SHA256: c.SHA256, Records: len(c.Records)}
		for ri, r := range c.Records {
			cc.Tokens += len(r.IDs)
			eachWindow(r.IDs, isControl, func(off int, h uint64) {
				ids := r.IDs[off : off+OverlapWindow]
				for _, l := range index[h] {
					if l.corpus == ci && slices.Equal(corpora[l.corpus].Records[l.record].IDs[l.offset:l.offset+OverlapWindow], ids) {
						return // already counted for this corpus
					}
				}
				index[h] = append(index[h], windowLoc{ci, ri, off})
				cc.Windows++
			})
		}
		d.Corpora = append(d.Corpora, cc)
	}
	for _, locs := range index {
		d.EvalWindows += distinct(corpora, locs)
	}
	var hit *OverlapError
	for wi, w := range set.Windows {
		eachWindow(w, isControl, func(off int, h uint64) {
			d.CalibWindows++
			if hit != nil {
				return
			}
			for _, l := range index[h] {
				rec := corpora[l.corpus].Records[l.record]
				if slices.Equal(rec.IDs[l.offset:l.offset+OverlapWindow], w[off:off+OverlapWindow]) {
					hit = &OverlapError{Corpus: corpora[l.corpus].Name, Record: rec.ID, Offset: l.offset, CalibWindow: wi, CalibOffset: off}
					return
				}
			}
		})
	}
	if hit != nil {
		return nil, hit
	}
	d.Result = "disjoint"
	return d, nil
}

// distinct counts the different token windows among locations that share
// a hash (almost always one).
func distinct(corpora []*Corpus, locs []windowLoc) int {
	n := 0
	for i, l := range locs {
		a := corpora[l.corpus].Records[l.record].IDs[l.offset : l.offset+OverlapWindow]
		dup := false
		for _, m := range locs[:i] {
			if slices.Equal(a, corpora[m.corpus].Records[m.record].IDs[m.offset:m.offset+OverlapWindow]) {
				dup = true
				break
			}
		}
		if !dup {
			n++
		}
	}
	return n
}

// eachWindow calls fn with the offset and hash of every 32-token window of
// ids that holds no control token.
func eachWindow(ids []int, isControl func(int) bool, fn func(off int, h uint64)) {
	// lastCtl is the last position of a control token seen so far; a window
	// starting after it is clean.
	lastCtl := -1
	for i := 0; i < len(ids) && i < OverlapWindow-1; i++ {
		if isControl(ids[i]) {
			lastCtl = i
		}
	}
	for off := 0; off+OverlapWindow <= len(ids); off++ {
		end := off + OverlapWindow - 1
		if isControl(ids[end]) {
			lastCtl = end
		}
		if lastCtl >= off {
			continue
		}
		fn(off, hashWindow(ids[off:off+OverlapWindow]))
	}
}

// hashWindow is FNV-1a over the ids as 32-bit values, finished with a
// 64-bit mixer so that nearby windows spread over the map.
func hashWindow(ids []int) uint64 {
	h := uint64(14695981039346656037)
	for _, id := range ids {
		h ^= uint64(uint32(id))
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}
