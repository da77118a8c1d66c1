package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/lfmq/lfmq/evidence"
	"github.com/lfmq/lfmq/format/canonjson"
	"github.com/lfmq/lfmq/format/durable"
)

// Schema names the layout of a File; docs/bench.md describes it.
const Schema = "lfmq-bench/1"

// File is what lfmq bench --out writes: the Result with receipts of how
// and where it was measured.
type File struct {
	Schema   string   `json:"schema"`
	Receipts Receipts `json:"receipts"`
	Result
}

// Receipts say which client measured, on what machine, when, with what
// command line. The server's identity is Result.Server.Models.
type Receipts struct {
	LfmqVersion  string           `json:"lfmq_version"`
	BinarySHA256 string           `json:"binary_sha256"`
	Command      string           `json:"command"`
	Machine      evidence.Machine `json:"machine"`
	// Started and Finished are UTC times in RFC 3339.
	Started  string `json:"started"`
	Finished string `json:"finished"`
	// LoadStart and LoadEnd are the client machine's one-minute load
	// average when the run started and ended (0 where the system does
	// not say): a server on the same machine shares its cores with
	// whatever else runs.
	LoadStart float64 `json:"load_average_start"`
	LoadEnd   float64 `json:"load_average_end"`
}

// LoadAverage returns the one-minute load average from /proc/loadavg;
// 0 where there is none (not Linux).
func LoadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return v
}

// Write writes f to path as canonical JSON, atomically.
func Write(path string, f *File) error {
	data, err := canonjson.Marshal(f)
	if err != nil {
		return fmt.Errorf("bench: %s: %w", path, err)
	}
	return durable.WriteFile(path, data)
}

// Read reads a File written by Write, refusing another schema.
func Read(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", path, err)
	}
	if f.Schema != Schema {
		return nil, fmt.Errorf("bench: %s: schema %q, want %q", path, f.Schema, Schema)
	}
	return &f, nil
}
