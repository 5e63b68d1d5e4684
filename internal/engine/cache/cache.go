// Package cache is a fixed-memory cache of definite check and subproblem answers,
// keyed by 128-bit hashes. All of its memory is one array allocated up front, so the byte limit it is
// given is what it costs — no per-entry allocations, no pointers for the garbage
// collector to scan, no allocator size-class surprises. Entries live in 4-way
// set-associative buckets of one cache line; a full bucket evicts round-robin.
package cache

import (
	"sync"
	"sync/atomic"
)

// Key identifies one answer; build it with a hash of everything the answer depends on.
type Key struct{ Hi, Lo uint64 }

// Value is a cached answer: a small non-zero code chosen by the caller.
type Value uint8

const (
	ways      = 4
	entrySize = 16 // Hi, then Lo with the value in its low byte
	shards    = 64
)

type bucket struct {
	entries [ways][2]uint64
	next    uint8 // round-robin victim
}

type shard struct {
	mu      sync.Mutex
	buckets []bucket
}

// Cache is safe for concurrent use. The zero value is not usable; call New.
type Cache struct {
	shards               [shards]shard
	bucketsPerShard      uint64
	bytes                int64
	hits, misses, evicts atomic.Uint64
}

// bucketSize is the memory of one bucket, padding included.
const bucketSize = ways*entrySize + 8

// New returns a cache that uses at most maxBytes (and at least one bucket per shard).
func New(maxBytes int64) *Cache {
	per := max(uint64(maxBytes)/bucketSize/shards, 1)
	c := &Cache{bucketsPerShard: per, bytes: int64(per * shards * bucketSize)}
	for i := range c.shards {
		c.shards[i].buckets = make([]bucket, per)
	}
	return c
}

// locate picks the shard and bucket of k and the tag stored for it: Lo with its low
// byte cleared for the value, and never zero (zero marks an empty slot).
func (c *Cache) locate(k Key) (*shard, *bucket, uint64) {
	s := &c.shards[k.Hi%shards]
	b := &s.buckets[(k.Hi/shards)%c.bucketsPerShard]
	return s, b, k.Lo&^0xff | 0x100
}

// Get returns the value stored for k.
func (c *Cache) Get(k Key) (Value, bool) {
	s, b, tag := c.locate(k)
	s.mu.Lock()
	for i := range b.entries {
		if e := b.entries[i]; e[0] == k.Hi && e[1]&^0xff == tag {
			s.mu.Unlock()
			c.hits.Add(1)
			return Value(e[1] & 0xff), true
		}
	}
	s.mu.Unlock()
	c.misses.Add(1)
	return 0, false
}

// Put stores v (non-zero) for k, evicting the bucket's oldest entry when it is full.
func (c *Cache) Put(k Key, v Value) {
	s, b, tag := c.locate(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	slot := -1
	for i := range b.entries {
		e := b.entries[i]
		if e[0] == k.Hi && e[1]&^0xff == tag || e[1] == 0 {
			slot = i
			break
		}
	}
	if slot < 0 {
		slot = int(b.next % ways)
		b.next++
		c.evicts.Add(1)
	}
	b.entries[slot] = [2]uint64{k.Hi, tag | uint64(v)}
}

// Stats are the cache's counters since New.
type Stats struct {
	Hits, Misses, Evictions uint64
	Bytes                   int64 // memory held, fixed at New
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evicts.Load(), Bytes: c.bytes}
}
