package model

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

// verified is the integrity of a checkpoint that needs no background hash:
// a Hugging Face checkpoint (it has no manifest) or one hashed up front.
func verified() *integrity {
	v := &integrity{done: make(chan struct{}), cancel: func() {}}
	close(v.done)
	return v
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

// failed returns the mismatch found so far, without waiting.
func (v *integrity) failed() error {
	select {
	case <-v.done:
		return v.err
	default:
		return nil
	}
}

// stop ends the hashing and waits for it.
func (v *integrity) stop() {
	v.cancel()
	v.wg.Wait()
}

// Verified waits until the checkpoint's files are hashed (or ctx ends) and
// returns what the hash found: nil when every file matches the manifest,
// the joined *lfmq1.MismatchError findings otherwise. It returns nil at
// once for a Hugging Face checkpoint and for one hashed when loaded.
func (m *Model) Verified(ctx context.Context) error {
	select {
	case <-m.integrity.done:
		return m.integrity.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// VerifyDone returns a channel closed once Verified would not block.
func (m *Model) VerifyDone() <-chan struct{} { return m.integrity.done }
