package progress

import (
	"bytes"
	"testing"
)

type outcome string

func (o outcome) String() string { return string(o) }

// TestUploadsLines: off a terminal each file gets one line as it ends,
// with its size when it was started; no bar is drawn.
func TestUploadsLines(t *testing.T) {
	var b bytes.Buffer
	p := NewUploads(&b, false)
	p.Started("model.safetensors", 3<<20)
	p.Add(1 << 20)
	p.Done("model.safetensors", outcome("uploaded"))
	p.Done("README.md", outcome("unchanged"))
	p.Finish()
	want := "uploaded  model.safetensors (3.15 MB)\nunchanged README.md\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// TestBytesNil: a nil bar, the one a caller off a terminal has, finishes
// without drawing.
func TestBytesNil(t *testing.T) {
	var p *Bytes
	p.Finish()
	var b bytes.Buffer
	q := NewBytes(&b, "verifying")
	q.Add(1) // before Start: nothing to move
	q.Finish()
	if b.Len() != 0 {
		t.Errorf("drew %q before Start", b.String())
	}
}
