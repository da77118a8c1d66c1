package refcache

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/durable"
	"github.com/lfmq/lfmq/internal/strictjson"
)

// Format is the value of Header.Format.
const Format = "lfmq-refcache-1"

const magic = Format + "\n"

// Bounds on what a file may declare, checked before anything is allocated.
const (
	maxHeaderBytes = 16 << 20
	// MaxVocab bounds vocab_size (LFM2's padded vocabularies are 65,536 and
	// 128,000).
	MaxVocab = 1 << 20
	// MaxCtx bounds ctx.
	MaxCtx     = 1 << 17
	maxCorpora = 1 << 12
)

// Level is the pinned zstd level: changing it changes the bytes of every
// cache file.
const Level = zstd.SpeedDefault

// Header identifies what a cache holds.
type Header struct {
	Format string `json:"format"`
	// Reference is the reference checkpoint's identity (evidence.Checkpoint
	// Identity: manifest sha256 or the hash of its source files).
	Reference       string   `json:"reference"`
	TokenizerSHA256 string   `json:"tokenizer_sha256"`
	Ctx             int      `json:"ctx"`
	VocabSize       int      `json:"vocab_size"`
	WindowRule      string   `json:"window_rule"`
	Corpora         []Corpus `json:"corpora"`
}

// Corpus is one corpus of the cache: its identity and its counts.
type Corpus struct {
	Name    string `json:"name"`
	SHA256  string `json:"sha256"`
	Records int    `json:"records"`
	Windows int    `json:"windows"`
	Tokens  int    `json:"tokens"`
}

// Window is one window's stored content.
type Window struct {
	Record int
	Tokens []int
	First  int
	// Rows holds one row per scored position First … len(Tokens)−1.
	Rows []Row
}

// Row is the stored reference at one scored position.
type Row struct {
	Target int
	// NLL is the exact reference NLL of the target (float64).
	NLL float64
	// Argmax is the reference's argmax (ties to the lowest id).
	Argmax int
	// LogProbs holds the binary16 bits of the full log-prob row.
	LogProbs []uint16
}

// Widen writes the row's log-probs as float64 to dst (len vocab_size).
func (r *Row) Widen(dst []float64) {
	dst = dst[:len(r.LogProbs)]
	for v, h := range r.LogProbs {
		dst[v] = ToFloat64(h)
	}
}

// FormatError reports a cache file whose content is malformed.
type FormatError struct {
	Path  string
	Where string // "header", "window 12", "window 12 row 3" …
	Msg   string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("refcache: %s: %s: %s", e.Path, e.Where, e.Msg)
}

// MismatchError reports a cache that does not belong to the current run:
// a file whose sha256 differs from the recorded one (Field "sha256"), or a
// header field that differs from what the run expects.
type MismatchError struct {
	Path  string
	Field string
	Want  string
	Got   string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("refcache: %s: %s mismatch: expected %s, the cache has %s", e.Path, e.Field, e.Want, e.Got)
}

// Check compares the header of a cache (got) with the one the current run
// would write (want) and returns a *MismatchError naming the first field
// that differs.
func Check(path string, want, got *Header) error {
	mm := func(field string, w, g any) error {
		return &MismatchError{Path: path, Field: field, Want: fmt.Sprint(w), Got: fmt.Sprint(g)}
	}
	switch {
	case want.Format != got.Format:
		return mm("format", want.Format, got.Format)
	case want.Reference != got.Reference:
		return mm("reference", want.Reference, got.Reference)
	case want.TokenizerSHA256 != got.TokenizerSHA256:
		return mm("tokenizer_sha256", want.TokenizerSHA256, got.TokenizerSHA256)
	case want.Ctx != got.Ctx:
		return mm("ctx", want.Ctx, got.Ctx)
	case want.VocabSize != got.VocabSize:
		return mm("vocab_size", want.VocabSize, got.VocabSize)
	case want.WindowRule != got.WindowRule:
		return mm("window_rule", want.WindowRule, got.WindowRule)
	case len(want.Corpora) != len(got.Corpora):
		return mm("corpora", corpusNames(want.Corpora), corpusNames(got.Corpora))
	}
	for i, w := range want.Corpora {
		g := got.Corpora[i]
		f := fmt.Sprintf("corpora[%d].", i)
		switch {
		case w.Name != g.Name:
			return mm(f+"name", w.Name, g.Name)
		case w.SHA256 != g.SHA256:
			return mm(f+"sha256", w.SHA256, g.SHA256)
		case w.Records != g.Records:
			return mm(f+"records", w.Records, g.Records)
		case w.Windows != g.Windows:
			return mm(f+"windows", w.Windows, g.Windows)
		case w.Tokens != g.Tokens:
			return mm(f+"tokens", w.Tokens, g.Tokens)
		}
	}
	return nil
}

func corpusNames(cs []Corpus) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return "[" + strings.Join(names, " ") + "]"
}

func validateHeader(h *Header) string {
	switch {
	case h.Format != Format:
		return fmt.Sprintf("format %q, want %q", h.Format, Format)
	case h.Ctx < 2 || h.Ctx > MaxCtx:
		return fmt.Sprintf("ctx %d outside [2, %d]", h.Ctx, MaxCtx)
	case h.VocabSize < 1 || h.VocabSize > MaxVocab:
		return fmt.Sprintf("vocab_size %d outside [1, %d]", h.VocabSize, MaxVocab)
	case len(h.Corpora) == 0 || len(h.Corpora) > maxCorpora:
		return fmt.Sprintf("%d corpora, want 1 to %d", len(h.Corpora), maxCorpora)
	}
	for i, c := range h.Corpora {
		if c.Records < 0 || c.Windows < 0 || c.Tokens < 0 || c.Windows > c.Tokens {
			return fmt.Sprintf("corpora[%d] (%q): impossible counts %d records, %d windows, %d tokens", i, c.Name, c.Records, c.Windows, c.Tokens)
		}
	}
	return ""
}

// Writer writes a cache file. Windows must be written in order, exactly as
// many per corpus as the header says.
type Writer struct {
	path   string
	h      Header
	file   *durable.File
	hash   hash.Hash
	size   int64
	zw     *zstd.Encoder
	bw     *bufio.Writer
	corpus int // current corpus
	wins   int // windows written of the current corpus
	toks   int // tokens written of the current corpus
	buf    []byte
	err    error
}

// countingWriter feeds the compressed bytes to the file and the hash.
type countingWriter struct{ w *Writer }

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.file.Write(p)
	c.w.hash.Write(p[:n])
	c.w.size += int64(n)
	return n, err
}

// Create starts the cache file path (written atomically: it appears when
// Close succeeds) with header h; h.Format is set.
func Create(path string, h Header) (*Writer, error) {
	h.Format = Format
	if msg := validateHeader(&h); msg != "" {
		return nil, &FormatError{Path: path, Where: "header", Msg: msg}
	}
	hdr, err := canonjson.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("refcache: %w", err)
	}
	f, err := durable.Create(path)
	if err != nil {
		return nil, err
	}
	w := &Writer{path: path, h: h, file: f, hash: sha256.New()}
	w.zw, err = zstd.NewWriter(countingWriter{w}, zstd.WithEncoderLevel(Level), zstd.WithEncoderConcurrency(1))
	if err != nil {
		f.Abort()
		return nil, fmt.Errorf("refcache: %w", err)
	}
	w.bw = bufio.NewWriterSize(w.zw, 1<<20)
	w.bw.WriteString(magic)
	w.u32(uint32(len(hdr)))
	w.bw.Write(hdr)
	w.skipEmpty()
	return w, nil
}

func (w *Writer) u32(x uint32) {
	w.buf = binary.LittleEndian.AppendUint32(w.buf[:0], x)
	w.bw.Write(w.buf)
}

// skipEmpty advances past corpora whose windows are all written.
func (w *Writer) skipEmpty() {
	for w.corpus < len(w.h.Corpora) && w.wins == w.h.Corpora[w.corpus].Windows {
		if w.toks != w.h.Corpora[w.corpus].Tokens && w.err == nil {
			w.err = &FormatError{Path: w.path, Where: "corpus " + w.h.Corpora[w.corpus].Name, Msg: fmt.Sprintf("%d tokens written, header says %d", w.toks, w.h.Corpora[w.corpus].Tokens)}
		}
		w.corpus, w.wins, w.toks = w.corpus+1, 0, 0
	}
}

// WriteWindow appends one window.
func (w *Writer) WriteWindow(win *Window) error {
	if w.err != nil {
		return w.err
	}
	fail := func(msg string) error {
		w.err = &FormatError{Path: w.path, Where: "writing", Msg: msg}
		return w.err
	}
	n := len(win.Tokens)
	switch {
	case w.corpus >= len(w.h.Corpora):
		return fail("more windows than the header declares")
	case n < 2 || n > w.h.Ctx || win.First < 1 || win.First >= n:
		return fail(fmt.Sprintf("window of %d tokens, first target %d (ctx %d)", n, win.First, w.h.Ctx))
	case len(win.Rows) != n-win.First:
		return fail(fmt.Sprintf("%d rows for %d targets", len(win.Rows), n-win.First))
	}
	w.u32(uint32(win.Record))
	w.u32(uint32(n))
	w.u32(uint32(win.First))
	for _, id := range win.Tokens {
		w.u32(uint32(id))
	}
	for i := range win.Rows {
		r := &win.Rows[i]
		if len(r.LogProbs) != w.h.VocabSize {
			return fail(fmt.Sprintf("row of %d log-probs, vocab_size %d", len(r.LogProbs), w.h.VocabSize))
		}
		w.u32(uint32(r.Target))
		w.buf = binary.LittleEndian.AppendUint64(w.buf[:0], math.Float64bits(r.NLL))
		w.bw.Write(w.buf)
		w.u32(uint32(r.Argmax))
		w.buf = w.buf[:0]
		for _, h := range r.LogProbs {
			w.buf = binary.LittleEndian.AppendUint16(w.buf, h)
		}
		if _, err := w.bw.Write(w.buf); err != nil {
			w.err = fmt.Errorf("refcache: writing %s: %w", w.path, err)
			return w.err
		}
	}
	w.wins++
	w.toks += n - win.First
	w.skipEmpty()
	return w.err
}

// Close finishes the file, makes it appear under its name, writes
// path.sha256 beside it and returns the file's sha256 and size. After an
// error the file is discarded.
func (w *Writer) Close() (sum string, size int64, err error) {
	if w.err == nil && w.corpus < len(w.h.Corpora) {
		w.err = &FormatError{Path: w.path, Where: "corpus " + w.h.Corpora[w.corpus].Name, Msg: fmt.Sprintf("%d of %d windows written", w.wins, w.h.Corpora[w.corpus].Windows)}
	}
	if w.err == nil {
		if err := w.bw.Flush(); err != nil {
			w.err = fmt.Errorf("refcache: writing %s: %w", w.path, err)
		}
	}
	if cerr := w.zw.Close(); w.err == nil && cerr != nil {
		w.err = fmt.Errorf("refcache: writing %s: %w", w.path, cerr)
	}
	if w.err != nil {
		w.file.Abort()
		return "", 0, w.err
	}
	if err := w.file.Commit(); err != nil {
		return "", 0, err
	}
	sum = hex.EncodeToString(w.hash.Sum(nil))
	side := fmt.Sprintf("%s  %s\n", sum, filepath.Base(w.path))
	if err := durable.WriteFile(SumPath(w.path), []byte(side)); err != nil {
		return "", 0, err
	}
	return sum, w.size, nil
}

// Abort discards the file being written.
func (w *Writer) Abort() {
	w.zw.Close()
	w.file.Abort()
}

// SumPath returns the path of the sha256 file written beside a cache.
func SumPath(path string) string { return path + ".sha256" }

// ReadSum reads the sha256 recorded in path.sha256.
func ReadSum(path string) (string, error) {
	data, err := os.ReadFile(SumPath(path))
	if err != nil {
		return "", fmt.Errorf("refcache: %s: the recorded sha256 is needed to verify the cache: %w", path, err)
	}
	f := strings.Fields(string(data))
	if len(f) == 0 || len(f[0]) != 64 {
		return "", &FormatError{Path: SumPath(path), Where: "sha256 file", Msg: "no sha256 in sha256sum format"}
	}
	if _, err := hex.DecodeString(f[0]); err != nil {
		return "", &FormatError{Path: SumPath(path), Where: "sha256 file", Msg: "not hex"}
	}
	return strings.ToLower(f[0]), nil
}

// Reader reads a cache file window by window.
type Reader struct {
	path string
	h    Header
	f    *os.File
	zr   *zstd.Decoder
	d    *decoder
}

// Open verifies the sha256 of the cache file at path against want (the
// content of path.sha256 when want is empty) and reads its header. A hash
// that differs gives a *MismatchError with Field "sha256".
func Open(path, want string) (*Reader, error) {
	if want == "" {
		var err error
		if want, err = ReadSum(path); err != nil {
			return nil, err
		}
	}
	got, _, err := evidence.HashFile(path)
	if err != nil {
		return nil, err
	}
	if !strings.EqualFold(got, want) {
		return nil, &MismatchError{Path: path, Field: "sha256", Want: want, Got: got}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("refcache: %w", err)
	}
	r, err := newReader(path, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.f = f
	return r, nil
}

// NewReader reads a cache from the compressed stream src; path names it in
// errors. It does not verify a hash.
func NewReader(path string, src io.Reader) (*Reader, error) {
	return newReader(path, src)
}

func newReader(path string, src io.Reader) (*Reader, error) {
	zr, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30), zstd.WithDecoderMaxWindow(64<<20))
	if err != nil {
		return nil, fmt.Errorf("refcache: %s: %w", path, err)
	}
	d, err := newDecoder(path, bufio.NewReaderSize(zr, 1<<20))
	if err != nil {
		zr.Close()
		return nil, err
	}
	return &Reader{path: path, h: d.h, zr: zr, d: d}, nil
}

// Header returns the cache's header.
func (r *Reader) Header() Header { return r.h }

// Next returns the next window, or io.EOF after the last one once the
// stream is checked to end there.
func (r *Reader) Next() (*Window, error) { return r.d.next() }

// Close releases the reader.
func (r *Reader) Close() error {
	r.zr.Close()
	if r.f != nil {
		return r.f.Close()
	}
	return nil
}

// decoder parses the decompressed content with every length bounded.
type decoder struct {
	path   string
	r      *bufio.Reader
	h      Header
	corpus int
	wins   int
	toks   int
	lastRc int
	count  int // windows read in all
	buf    []byte
}

func newDecoder(path string, r *bufio.Reader) (*decoder, error) {
	d := &decoder{path: path, r: r, lastRc: -1}
	bad := func(msg string) error { return &FormatError{Path: path, Where: "header", Msg: msg} }
	m := make([]byte, len(magic))
	if _, err := io.ReadFull(r, m); err != nil {
		return nil, bad(fmt.Sprintf("reading the magic: %v", noEOF(err)))
	}
	if string(m) != magic {
		return nil, bad(fmt.Sprintf("magic %q, want %q", m, magic))
	}
	n, err := d.u32()
	if err != nil {
		return nil, bad(fmt.Sprintf("reading the header length: %v", noEOF(err)))
	}
	if n > maxHeaderBytes {
		return nil, bad(fmt.Sprintf("header of %d bytes, over the %d-byte limit", n, maxHeaderBytes))
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, bad(fmt.Sprintf("reading %d header bytes: %v", n, noEOF(err)))
	}
	if err := strictjson.Unmarshal(hdr, maxHeaderBytes, &d.h); err != nil {
		return nil, bad(err.Error())
	}
	if msg := validateHeader(&d.h); msg != "" {
		return nil, bad(msg)
	}
	d.skipEmpty()
	return d, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (d *decoder) u32() (uint32, error) {
	var b [4]byte
	if _, err := io.ReadFull(d.r, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

func (d *decoder) skipEmpty() {
	for d.corpus < len(d.h.Corpora) && d.wins == d.h.Corpora[d.corpus].Windows {
		d.corpus, d.wins, d.toks, d.lastRc = d.corpus+1, 0, 0, -1
	}
}

func (d *decoder) next() (*Window, error) {
	where := fmt.Sprintf("window %d", d.count)
	bad := func(msg string) error { return &FormatError{Path: d.path, Where: where, Msg: msg} }
	if d.corpus >= len(d.h.Corpora) {
		if _, err := d.r.ReadByte(); err != io.EOF {
			if err != nil {
				return nil, bad(err.Error())
			}
			return nil, bad("data after the last window the header declares")
		}
		return nil, io.EOF
	}
	c := &d.h.Corpora[d.corpus]
	var hd [3]uint32
	for i := range hd {
		x, err := d.u32()
		if err != nil {
			return nil, bad(fmt.Sprintf("reading the window header: %v", noEOF(err)))
		}
		hd[i] = x
	}
	rec, n, first := int(hd[0]), int(hd[1]), int(hd[2])
	switch {
	case rec >= c.Records || rec < d.lastRc:
		return nil, bad(fmt.Sprintf("record %d out of order or beyond the %d records of corpus %q", rec, c.Records, c.Name))
	case n < 2 || n > d.h.Ctx:
		return nil, bad(fmt.Sprintf("%d tokens, want 2 to ctx %d", n, d.h.Ctx))
	case first < 1 || first >= n:
		return nil, bad(fmt.Sprintf("first target %d outside [1, %d)", first, n))
	case d.toks+n-first > c.Tokens:
		return nil, bad(fmt.Sprintf("corpus %q holds more than the %d tokens its header declares", c.Name, c.Tokens))
	}
	V := d.h.VocabSize
	w := &Window{Record: rec, First: first, Tokens: make([]int, n)}
	for i := range w.Tokens {
		x, err := d.u32()
		if err != nil {
			return nil, bad(fmt.Sprintf("reading token %d: %v", i, noEOF(err)))
		}
		if int64(x) >= int64(V) {
			return nil, bad(fmt.Sprintf("token %d is id %d, vocab_size %d", i, x, V))
		}
		w.Tokens[i] = int(x)
	}
	rowBytes := 16 + 2*V
	if cap(d.buf) < rowBytes {
		d.buf = make([]byte, rowBytes)
	}
	buf := d.buf[:rowBytes]
	w.Rows = make([]Row, 0, n-first)
	for p := first; p < n; p++ {
		if _, err := io.ReadFull(d.r, buf); err != nil {
			return nil, bad(fmt.Sprintf("reading row %d: %v", p-first, noEOF(err)))
		}
		tgt := binary.LittleEndian.Uint32(buf[0:])
		nll := math.Float64frombits(binary.LittleEndian.Uint64(buf[4:]))
		am := binary.LittleEndian.Uint32(buf[12:])
		switch {
		case int64(tgt) != int64(w.Tokens[p]):
			return nil, bad(fmt.Sprintf("row %d: target %d, but token %d is %d", p-first, tgt, p, w.Tokens[p]))
		case math.IsNaN(nll) || math.IsInf(nll, 0):
			return nil, bad(fmt.Sprintf("row %d: NLL %v", p-first, nll))
		case int64(am) >= int64(V):
			return nil, bad(fmt.Sprintf("row %d: argmax %d, vocab_size %d", p-first, am, V))
		}
		lp := make([]uint16, V)
		for v := range lp {
			lp[v] = binary.LittleEndian.Uint16(buf[16+2*v:])
		}
		w.Rows = append(w.Rows, Row{Target: int(tgt), NLL: nll, Argmax: int(am), LogProbs: lp})
	}
	d.lastRc = rec
	d.count++
	d.wins++
	d.toks += n - first
	if d.wins == c.Windows && d.toks != c.Tokens {
		return nil, bad(fmt.Sprintf("corpus %q: %d tokens, its header declares %d", c.Name, d.toks, c.Tokens))
	}
	d.skipEmpty()
	return w, nil
}
