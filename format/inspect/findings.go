package inspect

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/lfmq/lfmq/format/lfmq1"
	"github.com/lfmq/lfmq/format/safetensors"
	"github.com/lfmq/lfmq/internal/jsonnull"
)

// FindingMalformed is the Kind of a finding that is not a comparison with
// the manifest: a safetensors file whose header does not parse, say.
const FindingMalformed = "malformed"

// Finding is one way an lfmq-1 checkpoint differs from its manifest.
//
// Its JSON has the keys of a finding in `lfmq verify --json` (kind, path,
// expected/actual sha256 and size, authority, detail), plus the tensor, so
// one reader handles both reports.
type Finding struct {
	// Kind is lfmq1.MismatchError's Kind ("hash", "size", "missing",
	// "extra", "dtype", "shape", "metadata", "file") or FindingMalformed.
	Kind string
	// Path is the file, relative to the checkpoint directory.
	Path string
	// Tensor is empty for a finding about a whole file.
	Tensor string
	// WantSHA256 and GotSHA256 are set for a "hash" finding.
	WantSHA256, GotSHA256 string
	// WantSize and GotSize are set for a "size" finding, -1 otherwise.
	WantSize, GotSize int64
	// Detail says what differs when the fields above cannot.
	Detail string
}

// MarshalJSON writes the finding with null for what does not apply.
func (f Finding) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Kind           string  `json:"kind"`
		Path           string  `json:"path"`
		Tensor         string  `json:"tensor,omitempty"`
		ExpectedSHA256 *string `json:"expected_sha256"`
		ActualSHA256   *string `json:"actual_sha256"`
		ExpectedSize   *int64  `json:"expected_size"`
		ActualSize     *int64  `json:"actual_size"`
		Authority      string  `json:"authority"`
		Detail         string  `json:"detail,omitempty"`
	}{f.Kind, f.Path, f.Tensor, jsonnull.String(f.WantSHA256), jsonnull.String(f.GotSHA256), jsonnull.Size(f.WantSize), jsonnull.Size(f.GotSize), lfmq1.ManifestFile, f.Detail})
}

// findings turns the error of lfmq1.Open into one Finding per joined error.
func findings(dir string, err error) []Finding {
	var out []Finding
	for _, e := range lfmq1.Findings(err) {
		out = append(out, finding(dir, e))
	}
	return out
}

func finding(dir string, err error) Finding {
	f := Finding{WantSize: -1, GotSize: -1}
	var mm *lfmq1.MismatchError
	var me *lfmq1.ManifestError
	if errors.As(err, &me) {
		f.Kind, f.Path, f.Detail = FindingMalformed, relPath(dir, me.Path), me.Msg
		if me.Missing {
			f.Kind = "missing"
		}
		return f
	}
	if !errors.As(err, &mm) {
		f.Kind, f.Detail = FindingMalformed, err.Error()
		var fe *safetensors.FormatError
		if errors.As(err, &fe) {
			f.Path, f.Tensor = relPath(dir, fe.File), fe.Tensor
		}
		return f
	}
	f.Kind, f.Path, f.Tensor = mm.Kind, mm.Path, mm.Tensor
	if mm.Kind == "header" {
		f.Kind = FindingMalformed // a safetensors header lfmq cannot read
	}
	switch {
	case mm.Kind == "hash":
		f.WantSHA256, f.GotSHA256 = mm.Want, mm.Got
	case mm.Kind == "size" && sizeParses(mm.Want) && sizeParses(mm.Got):
		f.WantSize, _ = strconv.ParseInt(mm.Want, 10, 64)
		f.GotSize, _ = strconv.ParseInt(mm.Got, 10, 64)
	case mm.Want != "":
		f.Detail = fmt.Sprintf("manifest says %s, found %s", mm.Want, mm.Got)
	default:
		f.Detail = mm.Got
	}
	return f
}

func sizeParses(s string) bool {
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}

func relPath(dir, path string) string {
	if rel, err := filepath.Rel(dir, path); err == nil {
		return filepath.ToSlash(rel)
	}
	return path
}
