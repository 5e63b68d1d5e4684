package cache

import (
	"runtime"
	"testing"
)

func TestGetPutEvict(t *testing.T) {
	c := New(shards * bucketSize)                                                      // one bucket per shard: 4 entries each
	k := func(i uint64) Key { return Key{Hi: i * shards, Lo: i * 0x9e3779b97f4a7c15} } // all in shard 0, bucket 0
	if _, ok := c.Get(k(1)); ok {
		t.Fatal("hit in an empty cache")
	}
	for i := uint64(1); i <= ways; i++ {
		c.Put(k(i), Value(i))
	}
	for i := uint64(1); i <= ways; i++ {
		if v, ok := c.Get(k(i)); !ok || v != Value(i) {
			t.Errorf("Get(%d) = %d, %v", i, v, ok)
		}
	}
	c.Put(k(2), 9) // overwrite in place, no eviction
	if v, _ := c.Get(k(2)); v != 9 {
		t.Errorf("overwritten value %d", v)
	}
	c.Put(k(ways+1), 1) // evicts the oldest
	if _, ok := c.Get(k(1)); ok {
		t.Error("the oldest entry survived a full bucket's eviction")
	}
	if v, ok := c.Get(k(ways + 1)); !ok || v != 1 {
		t.Error("the new entry is missing")
	}
	st := c.Stats()
	if st.Evictions != 1 || st.Hits == 0 || st.Misses != 2 || st.Bytes != shards*bucketSize {
		t.Errorf("stats %+v", st)
	}
}

// TestCostIsHeapGrowth: the bytes the cache reports are the heap it adds, filled.
func TestCostIsHeapGrowth(t *testing.T) {
	const limit = 16 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := New(limit)
	for i := uint64(0); i < 2*limit/entrySize; i++ {
		c.Put(Key{Hi: i * 0x9e3779b97f4a7c15, Lo: i}, 1)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	reported := c.Stats().Bytes
	t.Logf("limit %d, reported %d, heap growth %d (%.2f%%)", limit, reported, growth, 100*float64(growth-reported)/float64(reported))
	if reported > limit {
		t.Errorf("reported %d bytes, over the limit %d", reported, limit)
	}
	if diff := growth - reported; diff < -reported/20 || diff > reported/20 {
		t.Errorf("heap grew %d bytes for a cache reporting %d: more than 5%% apart", growth, reported)
	}
	runtime.KeepAlive(c)
}

func TestHitAllocatesNothing(t *testing.T) {
	c := New(1 << 20)
	k := Key{Hi: 7, Lo: 11}
	c.Put(k, 2)
	if n := testing.AllocsPerRun(1000, func() { c.Get(k) }); n != 0 {
		t.Errorf("Get allocates %v times", n)
	}
}

func BenchmarkGetHit(b *testing.B) {
	c := New(64 << 20)
	k := Key{Hi: 7, Lo: 11}
	c.Put(k, 2)
	for b.Loop() {
		c.Get(k)
	}
}
