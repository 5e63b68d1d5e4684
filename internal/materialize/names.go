package materialize

import (
	"bytes"
	"hash/maphash"
)

// names interns the names of the index's nodes (sets and subjects, "type:id#relation")
// as dense ids, in flat arrays the garbage collector does not scan and whose size is
// known to the byte. Its owner guards it: one writer, readers under a read lock.
type names struct {
	seed maphash.Seed
	// slots are 1<<bits long; each holds 0 when empty, else id+1 of the name hashed
	// there in its low bits and the high bits of the name's hash above them (a tag,
	// which spares most probes a comparison of names). A table at most 3/4 full has
	// ids below 1<<bits, so the tag costs no memory.
	slots []uint32
	bits  uint8
	arena []byte   // the names, one after another
	ends  []uint32 // ends[id]: where name id ends in arena (it starts where id-1 ends)
	held  int64    // the memory the table holds, measured when an array grows
}

func newNames() names {
	t := names{seed: maphash.MakeSeed(), slots: make([]uint32, 1<<10), bits: 10}
	t.held = t.measure()
	return t
}

// len returns how many names there are.
func (t *names) len() int { return len(t.ends) }

// name returns name id.
func (t *names) name(id uint32) []byte {
	start := uint32(0)
	if id > 0 {
		start = t.ends[id-1]
	}
	return t.arena[start:t.ends[id]]
}

// lookup returns the id of name.
func (t *names) lookup(name []byte) (uint32, bool) {
	id, _, ok := t.find(name)
	return id, ok
}

// hash returns the hash of name.
func (t *names) hash(name []byte) uint64 { return maphash.Bytes(t.seed, name) }

// find returns the id of name, and its hash for add when the table does not hold it.
func (t *names) find(name []byte) (id uint32, hash uint64, ok bool) {
	hash = t.hash(name)
	mask, ids := uint64(len(t.slots)-1), uint32(1)<<t.bits-1
	tag := t.tag(hash)
	for i := hash & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0, hash, false
		}
		if s&^ids == tag && bytes.Equal(t.name(s&ids-1), name) {
			return s&ids - 1, hash, true
		}
	}
}

// tag returns the bits of hash a slot keeps above its id.
func (t *names) tag(hash uint64) uint32 { return uint32(hash>>32) &^ (uint32(1)<<t.bits - 1) }

// add adds name, which the table does not hold, of hash hash (from find), and returns
// its id and the bytes the table grew by.
func (t *names) add(name []byte, hash uint64) (id uint32, grown int64) {
	arena, ends := cap(t.arena), cap(t.ends)
	resized := (len(t.ends)+1)*4 > len(t.slots)*3
	if resized {
		t.grow()
	}
	id = uint32(len(t.ends))
	t.arena = append(t.arena, name...)
	t.ends = append(t.ends, uint32(len(t.arena)))
	t.place(id, hash)
	if resized || cap(t.arena) != arena || cap(t.ends) != ends {
		before := t.held
		t.held = t.measure()
		grown = t.held - before
	}
	return id, grown
}

// place puts id, of hash hash, in its slot.
func (t *names) place(id uint32, hash uint64) {
	mask := uint64(len(t.slots) - 1)
	i := hash & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = id + 1 | t.tag(hash)
}

// grow doubles the slots and places every name again.
func (t *names) grow() {
	t.slots = make([]uint32, len(t.slots)*2)
	t.bits++
	for id := range uint32(len(t.ends)) {
		t.place(id, t.hash(t.name(id)))
	}
}

// bytes is the memory the table holds.
func (t *names) bytes() int64 { return t.held }

func (t *names) measure() int64 {
	return sizeClass(int64(cap(t.slots))*4) + sizeClass(int64(cap(t.arena))) + sizeClass(int64(cap(t.ends))*4)
}
