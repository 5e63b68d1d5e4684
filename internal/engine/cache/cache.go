// Package cache is a fixed-memory cache of definite check and subproblem answers,
// keyed by 128-bit hashes. All of its memory is one array allocated up front, so the byte limit it is
// given is what it costs — no per-entry allocations, no pointers for the garbage
// collector to scan, no allocator size-class surprises. Entries live in 4-way
// set-associative buckets of one cache line; a full bucket evicts in turn.
package cache

import "sync"

// Key identifies one answer; build it with a hash of everything the answer depends on.
type Key struct{ Hi, Lo uint64 }

// Value is a cached answer: a small non-zero code chosen by the caller.
type Value uint8

const (
	ways      = 4
	entrySize = 16 // Hi, then Lo with the value in its low byte
	shards    = 64
)

// bucket is one cache line of entries, and nothing else: a bucket straddling two lines
// would cost a lookup two misses.
type bucket [ways][2]uint64

// shard is a lock and the counters it guards: counters shared by all shards would be
// one cache line bouncing between cores on every lookup.
type shard struct {
	mu                   sync.Mutex
	next                 uint8 // round-robin victim of a full bucket
	hits, misses, evicts uint64
	buckets              []bucket
	_                    [64]byte // keeps neighbouring shards' locks off this line
}

// Cache is safe for concurrent use. The zero value is not usable; call New.
type Cache struct {
	shards          [shards]shard
	bucketsPerShard uint64
	bytes           int64
}

// bucketSize is the memory of one bucket.
const bucketSize = ways * entrySize

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
	defer s.mu.Unlock()
	for _, e := range b {
		if e[0] == k.Hi && e[1]&^0xff == tag {
			s.hits++
			return Value(e[1] & 0xff), true
		}
	}
	s.misses++
	return 0, false
}

// Put stores v (non-zero) for k, evicting an entry of a full bucket in turn.
func (c *Cache) Put(k Key, v Value) {
	s, b, tag := c.locate(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	slot := -1
	for i, e := range b {
		if e[0] == k.Hi && e[1]&^0xff == tag || e[1] == 0 {
			slot = i
			break
		}
	}
	if slot < 0 {
		slot = int(s.next % ways)
		s.next++
		s.evicts++
	}
	b[slot] = [2]uint64{k.Hi, tag | uint64(v)}
}

// Stats are the cache's counters since New.
type Stats struct {
	Hits, Misses, Evictions uint64
	Bytes                   int64 // memory held, fixed at New
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	st := Stats{Bytes: c.bytes}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		st.Hits, st.Misses, st.Evictions = st.Hits+s.hits, st.Misses+s.misses, st.Evictions+s.evicts
		s.mu.Unlock()
	}
	return st
}
