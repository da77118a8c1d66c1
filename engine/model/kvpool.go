package model

import (
	"fmt"

	"github.com/lfmq/lfmq/engine/kv"
)

// KVPool is a kv.Pool of the model's KV shape, bound to the model so that
// it makes sequences and decodes spans: the server's pool is one, sized by
// --kv-pool-tokens; the model's own (KVPool) has no bound. See kv.Pool for
// how pages are shared and reclaimed. A KVPool is safe for concurrent use.
type KVPool struct {
	*kv.Pool
	m *Model
}

// NewKVPool returns an empty pool of the model's KV format that holds at
// most tokens positions, rounded up to whole pages; tokens 0 means no
// bound.
func (m *Model) NewKVPool(tokens int) *KVPool {
	return &KVPool{Pool: kv.NewPool(m.seqShape(), tokens), m: m}
}

// KVPool returns the model's own pool, which NewSequence and UnmarshalSpan
// use: unbounded, growing on demand.
func (m *Model) KVPool() *KVPool { return m.kvPool }

// KVCacheDType returns the number format of the model's KV caches.
func (m *Model) KVCacheDType() kv.DType { return m.kvDType }

// KVBytesPerToken returns the bytes one position's keys and values take in
// the model's KV cache, over all its attention layers and an attached
// drafter's.
func (m *Model) KVBytesPerToken() int { return m.seqShape().BytesPerToken() }

// ParseKVDType reads a KV cache format's flag name (kv.DType.String).
func ParseKVDType(s string) (kv.DType, error) {
	for _, t := range kv.DTypes {
		if s == t.String() {
			return t, nil
		}
	}
	return 0, &InputError{What: "KV cache dtype", Msg: fmt.Sprintf("%q is not one of f32, bf16, bfp8", s)}
}
