package lfmq_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lfmq/lfmq/quant"
)

// TestDocsWorkedTile: the worked example of docs/lfmq-1.md (the header
// length of global.safetensors for the RTN-quantized test model, and the
// exponent and code bytes of lm_head.weight's tile 0) is what lfmq
// quantize --method rtn writes.
func TestDocsWorkedTile(t *testing.T) {
	doc, err := os.ReadFile("docs/lfmq-1.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(doc)), " ")
	m := regexp.MustCompile(`quantized with ` + "`--method rtn`" + `, is (\d+) bytes long`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("docs/lfmq-1.md no longer states the header length of global.safetensors")
	}
	wantHeader, _ := strconv.Atoi(m[1])
	// "| exponent of group 0 | 0 | `7D` …" and "| codes of group 0 | 64 … 79 | `00 0D …` |"
	rows := regexp.MustCompile("(?m)^\\| (?:exponent|codes) of group \\d+ \\| (\\d+)(?: … \\d+)? \\| `([0-9A-F ]+)`").FindAllStringSubmatch(string(doc), -1)
	if len(rows) != 4 {
		t.Fatalf("docs/lfmq-1.md: %d rows of tile bytes, want 4 (two exponents, two code groups)", len(rows))
	}

	dir := filepath.Join(t.TempDir(), "rtn")
	if _, err := quant.Quantize(t.Context(), quant.Options{ModelDir: "testdata/tiny-lfm2-moe/model", OutDir: dir, Method: quant.RTN, CreatedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "global.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	header := int(binary.LittleEndian.Uint64(data))
	if header != wantHeader {
		t.Errorf("global.safetensors header is %d bytes; docs/lfmq-1.md says %d", header, wantHeader)
	}
	if !strings.Contains(string(data[8:8+header]), `"lm_head.weight":{"dtype":"U8","shape":[1024,1088],"data_offsets":[0,`) {
		t.Fatalf("lm_head.weight is not the first tensor of global.safetensors at offset 0: %s", data[8:8+header])
	}
	tile := data[8+header:]
	for _, r := range rows {
		off, _ := strconv.Atoi(r[1])
		for i, hex := range strings.Fields(r[2]) {
			want, _ := strconv.ParseUint(hex, 16, 8)
			if got := tile[off+i]; got != byte(want) {
				t.Errorf("tile byte %d is %02X; docs/lfmq-1.md says %s", off+i, got, hex)
			}
		}
	}
}
