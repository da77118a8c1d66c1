package spec

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/lfmq/lfmq/format/durable"
	"github.com/lfmq/lfmq/internal/bounded"
)

// CostHeader says what a verify cost table was measured for: a table
// measured for other weights, another drafter, another thread count or
// machine, or another build is not this one's.
type CostHeader struct {
	Model   string `json:"model"`   // the target checkpoint's identity
	Drafter string `json:"drafter"` // the drafter's identity
	KV      string `json:"kv_cache_dtype"`
	Threads int    `json:"threads"`
	CPU     string `json:"cpu"` // the processor's model name and core count
	Runtime string `json:"runtime"`
}

type costFile struct {
	Format string     `json:"format"`
	Header CostHeader `json:"measured_for"`
	Cells  []Cell     `json:"cells"`
}

const costFormat = "lfmq-draft-costs-1"

// StaleCostsError is a cost file measured for something else than what
// is served now: Field says what differs.
type StaleCostsError struct {
	Path, Field, Have, Want string
}

// Error implements error.
func (e *StaleCostsError) Error() string {
	return fmt.Sprintf("%s was measured for %s %q, this server runs %q", e.Path, e.Field, e.Have, e.Want)
}

// SaveTable writes t's cells to path with h (atomically: a temporary
// name, fsync, rename).
func SaveTable(path string, h CostHeader, t *Table) error {
	b, err := json.MarshalIndent(costFile{Format: costFormat, Header: h, Cells: t.Cells()}, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFile(path, append(b, '\n'))
}

// maxCostFile bounds a cost file read.
const maxCostFile = 1 << 20

// LoadTable reads a table SaveTable wrote for h. A file for another
// header is a *StaleCostsError; one that is not a cost file says so.
func LoadTable(path string, h CostHeader) (*Table, error) {
	b, err := bounded.ReadRegularFile(path, maxCostFile)
	if err != nil {
		return nil, err
	}
	var f costFile
	if err := json.Unmarshal(b, &f); err != nil || f.Format != costFormat {
		return nil, fmt.Errorf("%s is not a drafter cost file (%s)", path, costFormat)
	}
	for _, c := range []struct{ field, have, want string }{
		{"model", f.Header.Model, h.Model}, {"drafter", f.Header.Drafter, h.Drafter}, {"kv_cache_dtype", f.Header.KV, h.KV},
		{"threads", fmt.Sprint(f.Header.Threads), fmt.Sprint(h.Threads)}, {"cpu", f.Header.CPU, h.CPU}, {"runtime", f.Header.Runtime, h.Runtime},
	} {
		if c.have != c.want {
			return nil, &StaleCostsError{Path: path, Field: c.field, Have: c.have, Want: c.want}
		}
	}
	t := NewTable()
	for _, c := range f.Cells {
		if c.Seqs < 1 || c.Rows < 0 || !(c.Seconds > 0) || c.Seconds > 3600 {
			return nil, fmt.Errorf("%s: cell %+v is out of range", path, c)
		}
	}
	t.SetCells(f.Cells)
	return t, nil
}

// CPUName is the processor's model name (from /proc/cpuinfo where there
// is one) and the logical cores the process may use.
func CPUName(cores int) string {
	name := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				name = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s × %d", name, cores)
}
