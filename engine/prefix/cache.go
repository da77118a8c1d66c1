package prefix

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"

	"github.com/lfmq/lfmq/engine/kv"
)

// BlockSize is the tokens of one cached block.
const BlockSize = 64

// Key identifies a block: sha256(parent key ‖ the block's token ids as
// little-endian uint32 ‖ model identity ‖ cache salt, for the first block
// only), so equal keys mean equal tokens from the start of the sequence on
// the same model.
type Key [sha256.Size]byte

// Keys returns the chain keys of the first n full blocks of ids under a
// model identity and a request's cache salt; keys of a longer sequence
// extend those of its prefix, so a caller can continue a chain with Next.
func Keys(identity, salt string, ids []int, n int) []Key {
	keys := make([]Key, 0, n)
	var parent *Key
	for b := range n {
		k := Next(parent, identity, salt, ids[b*BlockSize:(b+1)*BlockSize])
		keys = append(keys, k)
		parent = &keys[b]
	}
	return keys
}

// Next returns the key of the block after parent (nil for the first block)
// holding ids.
func Next(parent *Key, identity, salt string, ids []int) Key {
	h := sha256.New()
	if parent != nil {
		h.Write(parent[:])
	}
	var b [4]byte
	for _, id := range ids {
		binary.LittleEndian.PutUint32(b[:], uint32(id))
		h.Write(b[:])
	}
	h.Write([]byte(identity))
	if parent == nil {
		h.Write([]byte(salt))
	}
	var k Key
	h.Sum(k[:0])
	return k
}

// Cache holds blocks, least recently used first out. A block is a span
// of one KV page, which the cache holds by reference (kv.Span): a
// block that running sequences also hold is in memory once, and evicting
// a block gives its page back to the pool when nobody else holds it. It is
// not safe for concurrent use: the scheduler's loop owns it.
type Cache struct {
	blocks map[Key]*list.Element // of *entry
	lru    list.List             // front: most recently used
	tokens int
	bytes  int
}

type entry struct {
	key  Key
	span *kv.Span
}

// New returns an empty cache.
func New() *Cache { return &Cache{blocks: map[Key]*list.Element{}} }

// Tokens returns the tokens the cache holds.
func (c *Cache) Tokens() int { return c.tokens }

// Bytes returns the state the cached blocks' positions take
// (kv.Span.Bytes), pages shared with sequences included.
func (c *Cache) Bytes() int { return c.bytes }

// Blocks returns the number of blocks the cache holds.
func (c *Cache) Blocks() int { return len(c.blocks) }

// Has reports whether a block is cached (without touching its recency).
func (c *Cache) Has(k Key) bool { _, ok := c.blocks[k]; return ok }

// Wants reports whether Insert would keep a span of block k whose
// drafter context is whole (or, with whole false, given up: see
// kv.Span.DraftGone), without touching its recency: when the block is not
// cached, or cached without its drafter context and this one has it. A
// caller asks before it copies a span.
func (c *Cache) Wants(k Key, whole bool) bool {
	el, ok := c.blocks[k]
	return !ok || (whole && el.Value.(*entry).span.DraftGone())
}

// Lookup returns the spans of the longest run of keys, from the first,
// that are all cached, and marks them used.
func (c *Cache) Lookup(keys []Key) []*kv.Span {
	var out []*kv.Span
	for _, k := range keys {
		el, ok := c.blocks[k]
		if !ok {
			break
		}
		c.lru.MoveToFront(el)
		out = append(out, el.Value.(*entry).span)
	}
	return out
}

// Insert caches a block (a span of BlockSize tokens) unless it is there,
// and takes the span over: the cache frees it when it evicts it, or at
// once when the block was already cached. A cached block whose drafter
// context was given up (kv.Span.DraftGone) is replaced by one whose
// context is whole (Wants), so that sequences resumed from it draft again.
func (c *Cache) Insert(k Key, span *kv.Span) {
	if el, ok := c.blocks[k]; ok {
		if !c.Wants(k, !span.DraftGone()) {
			c.lru.MoveToFront(el)
			span.Free()
			return
		}
		c.evict(el)
	}
	c.blocks[k] = c.lru.PushFront(&entry{key: k, span: span})
	c.tokens += span.End() - span.Start()
	c.bytes += span.Bytes()
}

// Shrink evicts least recently used blocks until the cache holds at most
// limit tokens, and reports whether it got there.
func (c *Cache) Shrink(limit int) bool {
	for c.tokens > limit {
		el := c.lru.Back()
		if el == nil {
			return false
		}
		c.evict(el)
	}
	return true
}

// Reclaim evicts the least recently used block that no running sequence
// shares, so that its page goes back to the pool, and reports whether
// there was one. A KV pool out of pages calls it (model.KVPool.SetReclaim):
// blocks in use by sequences stay, since evicting them would free nothing.
func (c *Cache) Reclaim() bool {
	for el := c.lru.Back(); el != nil; el = el.Prev() {
		if !el.Value.(*entry).span.Shared() {
			c.evict(el)
			return true
		}
	}
	return false
}

// Clear evicts every block.
func (c *Cache) Clear() { c.Shrink(0) }

func (c *Cache) evict(el *list.Element) {
	e := c.lru.Remove(el).(*entry)
	delete(c.blocks, e.key)
	c.tokens -= e.span.End() - e.span.Start()
	c.bytes -= e.span.Bytes()
	e.span.Free()
}
