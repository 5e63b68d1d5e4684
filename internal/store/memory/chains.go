package memory

// chainIndex maps chain keys (forward or reverse) to the head and length of their
// chain. A chain's head record carries its key, so the table holds only the chain: an
// open-addressing table of 8-byte slots with linear probing, kept at most three
// quarters full, where a Go map slot also held the 12- or 16-byte key. As in
// exactIndex, a byte of each key's hash beside its slot spares probes the head records
// of keys that cannot match; the rest are verified against the head record's key.
type chainIndex[K comparable] struct {
	slots []chain // head 0: never filled; head deadSlot: deleted; length a power of 2
	tags  []uint8 // by slot: hashTag of its key's hash
	used  int
	dead  int
	keyOf func(*recordPages, *record) K
	hash  func(K) uint64
}

func newChainIndex[K comparable](keyOf func(*recordPages, *record) K, hash func(K) uint64) chainIndex[K] {
	return chainIndex[K]{keyOf: keyOf, hash: hash}
}

func (x *chainIndex[K]) find(recs *recordPages, k K) int {
	if len(x.slots) == 0 {
		return -1
	}
	h := x.hash(k)
	tag, mask := hashTag(h), len(x.slots)-1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch head := x.slots[i].head; head {
		case emptySlot:
			return -1
		case deadSlot:
		default:
			if x.tags[i] == tag && x.keyOf(recs, recs.at(head)) == k {
				return i
			}
		}
	}
}

// get returns the chain of k; ok is false when k has none.
func (x *chainIndex[K]) get(recs *recordPages, k K) (c chain, ok bool) {
	if i := x.find(recs, k); i >= 0 {
		return x.slots[i], true
	}
	return chain{}, false
}

// set makes c the chain of k. The record at c.head and every head the index already
// holds must carry their keys.
func (x *chainIndex[K]) set(recs *recordPages, k K, c chain) {
	x.setAt(recs, k, x.find(recs, k), c)
}

// lookup returns the chain of k and the slot holding it, or slot -1 when k has none,
// for setAt: an update then probes the table once.
func (x *chainIndex[K]) lookup(recs *recordPages, k K) (chain, int) {
	if i := x.find(recs, k); i >= 0 {
		return x.slots[i], i
	}
	return chain{}, -1
}

// setAt makes c the chain of k, whose slot lookup returned (-1: k has none) with no
// change to the index since. A new key's head record must be written already.
func (x *chainIndex[K]) setAt(recs *recordPages, k K, i int, c chain) {
	if i >= 0 {
		x.slots[i] = c
		return
	}
	if tableFull(x.used+x.dead, len(x.slots)) {
		x.resize(recs)
	}
	x.place(x.hash(k), c)
	x.used++
}

func (x *chainIndex[K]) place(h uint64, c chain) {
	mask := len(x.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch x.slots[i].head {
		case deadSlot:
			x.dead--
			fallthrough
		case emptySlot:
			x.slots[i], x.tags[i] = c, hashTag(h)
			return
		}
	}
}

// resize rebuilds the table without dead slots, at its tableSize.
func (x *chainIndex[K]) resize(recs *recordPages) {
	live := x.slots[:0] // the old table, gathered in place
	for _, c := range x.slots {
		if c.head != emptySlot && c.head != deadSlot {
			live = append(live, c)
		}
	}
	n := tableSize(x.used)
	x.slots, x.tags, x.dead = make([]chain, n), make([]uint8, n), 0
	rehashInOrder(live, x.slots[:len(live)],
		func(c chain) uint32 { return c.head },
		func(c chain) uint64 { return x.hash(x.keyOf(recs, recs.at(c.head))) },
		x.place)
}

// del forgets k's chain.
func (x *chainIndex[K]) del(recs *recordPages, k K) {
	if i := x.find(recs, k); i >= 0 {
		x.slots[i] = chain{head: deadSlot}
		x.used--
		x.dead++
	}
}

// all returns every chain with its key, for invariant checks.
func (x *chainIndex[K]) all(recs *recordPages) map[K]chain {
	out := make(map[K]chain, x.used)
	for _, c := range x.slots {
		if c.head != emptySlot && c.head != deadSlot {
			out[x.keyOf(recs, recs.at(c.head))] = c
		}
	}
	return out
}

func mix64(a, b uint64) uint64 {
	h := a*0x9E3779B97F4A7C15 ^ (b*0xC2B2AE3D27D4EB4F)<<31 ^ (b*0xC2B2AE3D27D4EB4F)>>33
	h ^= h >> 33
	h *= 0xFF51AFD7ED558CCD
	return h ^ h>>33
}

func (k fwdKey) hash() uint64 {
	return mix64(mix64(uint64(k.resType)<<32|uint64(k.resID), uint64(k.relation)<<32|uint64(k.subjType)), uint64(k.subjRel))
}

func (k revKey) hash() uint64 {
	return mix64(uint64(k.subjType)<<32|uint64(k.subjID), uint64(k.resType)<<32|uint64(k.relation))
}
