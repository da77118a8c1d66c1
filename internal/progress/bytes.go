package progress

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/lfmq/lfmq/format/units"
)

// Bytes is a progress bar of bytes (a verification's hashing, as
// verify.Progress) on a terminal's error stream; it is cleared when done.
// A nil *Bytes does nothing, so a caller off a terminal need not check.
type Bytes struct {
	w    io.Writer
	desc string
	mu   sync.Mutex
	bar  *progressbar.ProgressBar
}

// NewBytes returns a bar described by desc, drawn on w (a terminal) once
// Start gives its total.
func NewBytes(w io.Writer, desc string) *Bytes { return &Bytes{w: w, desc: desc} }

// Start draws the bar of total bytes.
func (p *Bytes) Start(total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bar = progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(p.desc),
		progressbar.OptionShowBytes(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond),
	)
}

// Add moves the bar by n bytes.
func (p *Bytes) Add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Add64(n)
	}
}

// Finish clears the bar.
func (p *Bytes) Finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Finish()
	}
}

// Uploads shows files as they are sent (a publish): on a terminal a bar
// of bytes whose total grows as each file starts, cleared when done;
// elsewhere one line per file as it ends, with its outcome and size.
type Uploads struct {
	w     io.Writer
	tty   bool
	mu    sync.Mutex
	bar   *progressbar.ProgressBar
	total int64
	sizes map[string]int64
}

// NewUploads returns the progress of uploads written to w, a bar when tty.
func NewUploads(w io.Writer, tty bool) *Uploads {
	return &Uploads{w: w, tty: tty, sizes: map[string]int64{}}
}

// Started counts a file of size bytes that starts on its way.
func (p *Uploads) Started(path string, size int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sizes[path] = size
	if !p.tty {
		return
	}
	p.total += size
	if p.bar == nil {
		p.bar = progressbar.NewOptions64(p.total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription("uploading"),
			progressbar.OptionShowBytes(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond))
	} else {
		p.bar.ChangeMax64(p.total)
	}
}

// Add moves the bar by n bytes sent.
func (p *Uploads) Add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Add64(n)
	}
}

// Done writes, off a terminal, the line of a file that has ended with
// outcome (what became of it: uploaded, unchanged, ...).
func (p *Uploads) Done(path string, outcome fmt.Stringer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		return
	}
	if size, ok := p.sizes[path]; ok {
		fmt.Fprintf(p.w, "%-9s %s (%s)\n", outcome, path, units.Bytes(size))
	} else {
		fmt.Fprintf(p.w, "%-9s %s\n", outcome, path)
	}
}

// Finish clears the bar.
func (p *Uploads) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Finish()
	}
}
