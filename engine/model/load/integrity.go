package load

import (
	"context"
	"sync"

	"github.com/lfmq/lfmq/format/lfmq1"
)

// integrity is the background hash of an lfmq-1 checkpoint's files.
//
// The policy: Load checks the manifest, every file's size and every
// tensor's place up front, which costs the same whatever the checkpoint's
// size, and hashes the files concurrently with the work that follows. A
// mismatch found fails every later Forward with the *lfmq1.MismatchError,
// and a command calls Verified before it reports success, so a changed
// byte is never served or printed past the moment it is known and never
// ends in exit status 0.
type integrity struct {
	done   chan struct{}
	err    error // set before done is closed
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// hashInBackground starts hashing c's files.
func hashInBackground(c *lfmq1.Checkpoint) *integrity {
	ctx, cancel := context.WithCancel(context.Background())
	v := &integrity{done: make(chan struct{}), cancel: cancel}
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		v.err = c.HashFiles(ctx)
		close(v.done)
	}()
	return v
}

// Done is closed once the hash has ended.
func (v *integrity) Done() <-chan struct{} { return v.done }

// Err is what the hash found, once Done is closed.
func (v *integrity) Err() error { return v.err }

// stop ends the hashing and waits for it.
func (v *integrity) stop() {
	v.cancel()
	v.wg.Wait()
}
