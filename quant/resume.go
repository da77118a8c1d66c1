package quant

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/durable"
	"github.com/lfmq/lfmq/format/lfmq1"
)

// The resume area (docs/gptq.md §9) lives inside the partial output
// directory, which lfmq1.Writer sweeps of it on commit:
//
//	.resume/progress.json   fingerprint + completed layers + the sha256
//	                        of both, rewritten atomically after each
//	                        layer (the commit point)
//	.resume/layer-NN.json   a completed layer's metrics
//
// The layer's experts file itself is already in the partial directory under
// its final name, written atomically by safetensors.Write.
const (
	resumeDir     = ".resume"
	progressFile  = "progress.json"
	resumeVersion = "lfmq-gptq-resume-2"
)

// progress is the content of progress.json.
type progress struct {
	// Fingerprint maps each input and setting to its value (digests for
	// files); two runs with equal fingerprints produce the same bytes.
	Fingerprint map[string]string `json:"fingerprint"`
	Layers      []doneLayer       `json:"layers"`
	// SHA256 is the sha256 of the record's canonical JSON without this
	// field. Damage that still parses (a digit of a layer number) would
	// otherwise send a resume to the wrong files.
	SHA256 string `json:"sha256,omitempty"`
}

// digest returns the sha256 of p without its SHA256 field.
func (p progress) digest() (string, error) {
	p.SHA256 = ""
	data, err := canonjson.Marshal(p)
	if err != nil {
		return "", err
	}
	return sha256Hex(data), nil
}

// doneLayer records one completed MoE layer.
type doneLayer struct {
	Layer int `json:"layer"`
	// Kind is "dense" for a layer's BFP8 dense tensors solved by GPTQ
	// (its layer file), empty for its experts.
	Kind         string `json:"kind,omitempty"`
	File         string `json:"file"`
	Size         int64  `json:"size"`
	SHA256       string `json:"sha256"`
	Record       string `json:"record"`
	RecordSHA256 string `json:"record_sha256"`
}

// layersDone counts the layers with a result kept: a layer whose dense
// tensors and experts are solved apart has two records, and is one layer.
func (p *progress) layersDone() int {
	seen := map[int]bool{}
	for _, d := range p.Layers {
		seen[d.Layer] = true
	}
	return len(seen)
}

// layerRecord is a completed layer's metrics as kept for a resume.
type layerRecord struct {
	Metrics LayerMetrics            `json:"metrics"`
	Tensors map[string]TensorMetric `json:"tensors"`
	// Dense holds a dense step's GPTQ metrics per tensor.
	Dense map[string]MatrixMetrics `json:"dense,omitempty"`
}

// ResumeMismatchError refuses to resume a partial run made from other
// inputs or settings; Field names the first difference.
type ResumeMismatchError struct {
	Partial  string
	Field    string
	Recorded string
	Current  string
}

func (e *ResumeMismatchError) Error() string {
	return fmt.Sprintf("quant: cannot resume %s: %s was %q in the interrupted run and is %q now; rerun without --resume after removing it", e.Partial, e.Field, e.Recorded, e.Current)
}

// ResumeDamagedError refuses to resume a partial run whose progress record
// is damaged: without it no stored layer can be trusted, so the run is the
// user's to remove. (A damaged layer file is not refused: that layer is
// computed again.)
type ResumeDamagedError struct {
	Partial string
	File    string // the damaged file
	Problem string // what is wrong with it
}

func (e *ResumeDamagedError) Error() string {
	return fmt.Sprintf("quant: cannot resume %s: %s is damaged (%s); remove %s and run again without --resume", e.Partial, e.File, e.Problem, e.Partial)
}

// PartialError wraps the error that stopped a GPTQ run after some layers
// were completed: their results stay in Partial, and a run with the same
// inputs and settings and Resume set continues from there.
type PartialError struct {
	Partial string
	Layers  int // decoder layers with a result kept
	Err     error
}

func (e *PartialError) Error() string {
	return fmt.Sprintf("%v (%d layers are done and kept in %s; rerun with --resume to continue)", e.Err, e.Layers, e.Partial)
}

func (e *PartialError) Unwrap() error { return e.Err }

// fingerprint flattens the run's identity into named fields: the lfmq
// version, the source checkpoint, and every setting (calibration digest and
// disjointness included).
func fingerprint(source any, settings any) (map[string]string, error) {
	fp := map[string]string{"resume_format": resumeVersion}
	for prefix, v := range map[string]any{"source": source, "settings": settings} {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("quant: fingerprint: %w", err)
		}
		var generic any
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.UseNumber()
		if err := dec.Decode(&generic); err != nil {
			return nil, fmt.Errorf("quant: fingerprint: %w", err)
		}
		flatten(fp, prefix, generic)
	}
	return fp, nil
}

func flatten(dst map[string]string, key string, v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			flatten(dst, key+"."+k, e)
		}
	case []any:
		dst[key+".len"] = fmt.Sprint(len(x))
		for i, e := range x {
			flatten(dst, fmt.Sprintf("%s[%d]", key, i), e)
		}
	case nil:
		dst[key] = "null"
	default:
		dst[key] = fmt.Sprint(x)
	}
}

// compareFingerprints returns the first field (in sorted order) that
// differs, or "".
func compareFingerprints(rec, cur map[string]string) (field, a, b string) {
	keys := map[string]bool{}
	for k := range rec {
		keys[k] = true
	}
	for k := range cur {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		x, okx := rec[k]
		y, oky := cur[k]
		if !okx {
			x = "(absent)"
		}
		if !oky {
			y = "(absent)"
		}
		if x != y {
			return k, x, y
		}
	}
	return "", "", ""
}

// resumeState manages the resume area of a partial directory.
type resumeState struct {
	dir  string // the partial directory
	prog progress
}

// openResume reads the resume area of a reused partial directory, or
// starts an empty one. A recorded fingerprint that differs from fp is a
// *ResumeMismatchError. A directory without progress (a run stopped before
// its first layer) is started afresh.
func openResume(dir string, fp map[string]string, resumed bool) (*resumeState, error) {
	rs := &resumeState{dir: dir, prog: progress{Fingerprint: fp}}
	if err := os.MkdirAll(filepath.Join(dir, resumeDir), 0o755); err != nil {
		return nil, fmt.Errorf("quant: %w", err)
	}
	if !resumed {
		return rs, rs.save()
	}
	path := filepath.Join(dir, resumeDir, progressFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return rs, rs.save()
	}
	if err != nil {
		return nil, fmt.Errorf("quant: %w", err)
	}
	damaged := func(problem string) error { return &ResumeDamagedError{Partial: dir, File: path, Problem: problem} }
	var rec progress
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, damaged(fmt.Sprintf("not a progress record: %v", err))
	}
	if v := rec.Fingerprint["resume_format"]; rec.SHA256 == "" && v != resumeVersion {
		// A record without a checksum is from an older lfmq.
		return nil, &ResumeMismatchError{Partial: dir, Field: "resume_format", Recorded: v, Current: resumeVersion}
	}
	sum, err := rec.digest()
	if err != nil {
		return nil, err
	}
	if sum != rec.SHA256 {
		return nil, damaged(fmt.Sprintf("its content has sha256 %s, it records %s", sum, rec.SHA256))
	}
	if f, a, b := compareFingerprints(rec.Fingerprint, fp); f != "" {
		return nil, &ResumeMismatchError{Partial: dir, Field: f, Recorded: a, Current: b}
	}
	rs.prog.Layers = rec.Layers
	return rs, nil
}

// save writes progress.json atomically.
func (rs *resumeState) save() error {
	sum, err := rs.prog.digest()
	if err != nil {
		return err
	}
	rs.prog.SHA256 = sum
	data, err := canonjson.Marshal(rs.prog)
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(rs.dir, resumeDir, progressFile), data)
}

// done returns the record of a completed layer, if any.
func (rs *resumeState) done(layer int) (doneLayer, bool) {
	return rs.doneKind(layer, "")
}

// doneKind returns the record of a completed step of kind of a layer.
func (rs *resumeState) doneKind(layer int, kind string) (doneLayer, bool) {
	for _, d := range rs.prog.Layers {
		if d.Layer == layer && d.Kind == kind {
			return d, true
		}
	}
	return doneLayer{}, false
}

// load returns a completed layer's record after checking its experts file
// and record against their digests. When either fails, problem names the
// file and what is wrong with it, and the layer and every later one are
// forgotten, to be computed again.
func (rs *resumeState) load(d doneLayer) (rec *layerRecord, problem string) {
	problem = checkFile(filepath.Join(rs.dir, d.File), d.Size, d.SHA256)
	recPath := filepath.Join(rs.dir, resumeDir, d.Record)
	var data []byte
	if problem == "" {
		var err error
		data, err = os.ReadFile(recPath)
		switch {
		case errors.Is(err, os.ErrNotExist):
			problem = recPath + " is missing"
		case err != nil:
			problem = err.Error()
		case sha256Hex(data) != d.RecordSHA256:
			problem = fmt.Sprintf("%s has sha256 %s, the interrupted run wrote %s", recPath, sha256Hex(data), d.RecordSHA256)
		}
	}
	if problem == "" {
		rec = new(layerRecord)
		if err := json.Unmarshal(data, rec); err != nil {
			problem = fmt.Sprintf("%s is not a layer record: %v", recPath, err)
		}
	}
	if problem != "" {
		for i, x := range rs.prog.Layers {
			if x.Layer == d.Layer && x.Kind == d.Kind {
				rs.prog.Layers = rs.prog.Layers[:i]
				break
			}
		}
		return nil, problem
	}
	return rec, ""
}

// checkFile compares the file at path with the size and sha256 the
// interrupted run recorded; it returns what differs, or "".
func checkFile(path string, size int64, sum string) string {
	got, n, err := lfmq1.HashFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return path + " is missing"
	case err != nil:
		return err.Error()
	case n != size:
		return fmt.Sprintf("%s has %d bytes, the interrupted run wrote %d", path, n, size)
	case got != sum:
		return fmt.Sprintf("%s has sha256 %s, the interrupted run wrote %s", path, got, sum)
	}
	return ""
}

// complete records a finished layer: its metrics record, then the progress
// record that makes it count.
func (rs *resumeState) complete(layer int, file string, rec *layerRecord) error {
	return rs.completeKind(layer, "", file, rec)
}

// completeKind records a finished step of kind of a layer.
func (rs *resumeState) completeKind(layer int, kind, file string, rec *layerRecord) error {
	data, err := canonjson.Marshal(rec)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("layer-%02d.json", layer)
	if kind != "" {
		name = fmt.Sprintf("%s-%02d.json", kind, layer)
	}
	if err := writeAtomic(filepath.Join(rs.dir, resumeDir, name), data); err != nil {
		return err
	}
	sum, size, err := lfmq1.HashFile(filepath.Join(rs.dir, file))
	if err != nil {
		return err
	}
	rs.prog.Layers = append(rs.prog.Layers, doneLayer{Layer: layer, Kind: kind, File: file, Size: size, SHA256: sum,
		Record: name, RecordSHA256: sha256Hex(data)})
	return rs.save()
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// writeAtomic writes data to path through a synced temporary file and a
// rename, so a crash leaves the old or the new content, never a mix.
func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("quant: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("quant: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("quant: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("quant: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("quant: %w", err)
	}
	// The rename is durable only once the directory is synced.
	if err := durable.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("quant: %w", err)
	}
	return nil
}
