package memory

import "math/bits"

// exactIndex maps each relationship key to its newest version. Records carry their
// key, so the index needs to hold only record indexes: an open-addressing table of
// uint32 slots with linear probing, kept at most three quarters full, costs 7 to 13
// bytes per key where a Go map from a 64-bit key hash cost about 20. Beside each slot
// a byte of its key's hash (hashTag) lets a probe pass keys that cannot match without
// reading their record, a cache miss each; a probe whose tag matches is verified
// against the record's key, so hash collisions cost time, never correctness.
type exactIndex struct {
	slots    []uint32              // record index; emptySlot or deadSlot otherwise; length a power of 2
	tags     []uint8               // by slot: hashTag of its key's hash
	used     int                   // slots holding a record index
	dead     int                   // slots holding deadSlot
	weakHash func(exactKey) uint64 // tests set this to force collisions; nil: hash
}

const (
	emptySlot = 0 // record 0 is never used, so 0 can mark a never-filled slot
	// deadSlot marks a slot whose key was deleted: probes continue past it. Record
	// indexes never reach it (that would take 4 billion records).
	deadSlot = ^uint32(0)
)

func (x *exactIndex) hash(k exactKey) uint64 {
	if x.weakHash != nil {
		return x.weakHash(k)
	}
	return k.hash()
}

func newExactIndex() exactIndex { return exactIndex{} }

// tableFull reports whether an open-addressing table of size slots, filled (live or
// dead) ones, must be rebuilt before one more key goes in: past three quarters full,
// linear probing's runs grow long.
func tableFull(filled, size int) bool { return (filled+1)*4 > size*3 }

// tableSize is the size of a rebuilt table holding used keys: the least power of two
// at most half full after one more key, so that many inserts pass before the next
// rebuild.
func tableSize(used int) int {
	n := 16
	for n < (used+1)*2 {
		n *= 2
	}
	return n
}

// hash mixes the six symbols of a key.
func (k exactKey) hash() uint64 {
	a := uint64(k.resType)<<32 | uint64(k.resID)
	b := uint64(k.relation)<<32 | uint64(k.subjType)
	c := uint64(k.subjID)<<32 | uint64(k.subjRel)
	h := a*0x9E3779B97F4A7C15 ^ bits.RotateLeft64(b*0xC2B2AE3D27D4EB4F, 31) ^ bits.RotateLeft64(c*0x165667B19E3779F9, 17)
	h ^= h >> 33
	h *= 0xFF51AFD7ED558CCD
	return h ^ h>>33
}

// find returns the slot holding k, or -1.
func (x *exactIndex) find(recs *recordPages, k exactKey) int {
	if len(x.slots) == 0 {
		return -1
	}
	h := x.hash(k)
	tag, mask := hashTag(h), len(x.slots)-1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch v := x.slots[i]; v {
		case emptySlot:
			return -1
		case deadSlot:
		default:
			if x.tags[i] == tag && recs.exactKey(recs.at(v)) == k {
				return i
			}
		}
	}
}

// get returns the newest version of k, or 0.
func (x *exactIndex) get(recs *recordPages, k exactKey) uint32 {
	v, _ := x.lookup(recs, k)
	return v
}

// lookup returns the newest version of k and the slot holding it, or 0 and slot -1,
// for setAt: an update then probes the table once.
func (x *exactIndex) lookup(recs *recordPages, k exactKey) (uint32, int) {
	if i := x.find(recs, k); i >= 0 {
		return x.slots[i], i
	}
	return 0, -1
}

// set makes idx the newest version of k. The record at idx need not be written yet;
// every record the index already holds must be.
func (x *exactIndex) set(recs *recordPages, k exactKey, idx uint32) {
	x.setAt(recs, k, x.find(recs, k), idx)
}

// setAt makes idx the newest version of k, whose slot lookup returned (-1: k has none)
// with no change to the index since.
func (x *exactIndex) setAt(recs *recordPages, k exactKey, i int, idx uint32) {
	if i >= 0 {
		x.slots[i] = idx
		return
	}
	if tableFull(x.used+x.dead, len(x.slots)) {
		x.resize(recs)
	}
	x.place(x.hash(k), idx)
	x.used++
}

// place puts idx in the first free slot from h's home slot on, reusing a dead one.
func (x *exactIndex) place(h uint64, idx uint32) {
	mask := len(x.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch x.slots[i] {
		case deadSlot:
			x.dead--
			fallthrough
		case emptySlot:
			x.slots[i], x.tags[i] = idx, hashTag(h)
			return
		}
	}
}

// resize rebuilds the table without dead slots, at its tableSize.
func (x *exactIndex) resize(recs *recordPages) {
	live := x.slots[:0] // the old table, gathered in place
	for _, v := range x.slots {
		if v != emptySlot && v != deadSlot {
			live = append(live, v)
		}
	}
	n := tableSize(x.used)
	x.slots, x.tags, x.dead = make([]uint32, n), make([]uint8, n), 0
	rehashInOrder(live, x.slots[:len(live)],
		func(v uint32) uint32 { return v },
		func(v uint32) uint64 { return x.hash(recs.exactKey(recs.at(v))) },
		x.place)
}

// rehashInOrder places the live entries of a table being rebuilt (each leading to the
// record head returns), rehashed from their records' keys. It reads the records in
// index order, where they stream through memory (in slot order each read would be a
// cache miss), and hashes a group of entries before placing them. scratch, as long as
// live, is the new table's first slots: the sort's buffer, zeroed again after it.
func rehashInOrder[T any](live, scratch []T, head func(T) uint32, hash func(T) uint64, place func(uint64, T)) {
	// A radix sort, a byte of the head at a time: four passes, each back and forth
	// between live and scratch, so that the result ends in live.
	for shift := 0; shift < 32; shift += 8 {
		var start [257]int
		for _, v := range live {
			start[(head(v)>>shift)&0xff+1]++
		}
		for i := 1; i < len(start); i++ {
			start[i] += start[i-1]
		}
		for _, v := range live {
			d := (head(v) >> shift) & 0xff
			scratch[start[d]] = v
			start[d]++
		}
		live, scratch = scratch, live
	}
	clear(scratch)
	var hs [1024]uint64
	for len(live) > 0 {
		group := live[:min(len(live), len(hs))]
		live = live[len(group):]
		for i, v := range group {
			hs[i] = hash(v)
		}
		for i, v := range group {
			place(hs[i], v)
		}
	}
}

// del forgets k.
func (x *exactIndex) del(recs *recordPages, k exactKey) {
	if i := x.find(recs, k); i >= 0 {
		x.slots[i] = deadSlot
		x.used--
		x.dead++
	}
}

// heads returns every record index the table holds, for invariant checks.
func (x *exactIndex) heads() []uint32 {
	out := make([]uint32, 0, x.used)
	for _, v := range x.slots {
		if v != emptySlot && v != deadSlot {
			out = append(out, v)
		}
	}
	return out
}
