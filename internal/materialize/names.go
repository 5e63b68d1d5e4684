package materialize

import (
	"bytes"
	"hash/maphash"
)

// names interns the names of the index's nodes (sets and subjects, "type:id#relation")
// as dense ids, in flat arrays the garbage collector does not scan and whose size is
// known to the byte. Its owner guards it: one writer, readers under a read lock.
type names struct {
	seed  maphash.Seed
	slots []uint32 // id+1 of the name hashed there, 0 when empty; a power of two long
	arena []byte   // the names, one after another
	ends  []uint32 // ends[id]: where name id ends in arena (it starts where id-1 ends)
}

func newNames() names {
	return names{seed: maphash.MakeSeed(), slots: make([]uint32, 1024)}
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
	mask := uint64(len(t.slots) - 1)
	for i := maphash.Bytes(t.seed, name) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0, false
		}
		if bytes.Equal(t.name(s-1), name) {
			return s - 1, true
		}
	}
}

// intern returns the id of name, adding it when new (new reports so).
func (t *names) intern(name []byte) (id uint32, isNew bool) {
	if id, ok := t.lookup(name); ok {
		return id, false
	}
	if (len(t.ends)+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	id = uint32(len(t.ends))
	t.arena = append(t.arena, name...)
	t.ends = append(t.ends, uint32(len(t.arena)))
	t.place(id)
	return id, true
}

// place puts id in its slot.
func (t *names) place(id uint32) {
	mask := uint64(len(t.slots) - 1)
	i := maphash.Bytes(t.seed, t.name(id)) & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = id + 1
}

// grow doubles the slots and places every name again.
func (t *names) grow() {
	t.slots = make([]uint32, len(t.slots)*2)
	for id := range uint32(len(t.ends)) {
		t.place(id)
	}
}

// bytes is the memory the table holds.
func (t *names) bytes() int64 {
	return sizeClass(int64(cap(t.slots))*4) + sizeClass(int64(cap(t.arena))) + sizeClass(int64(cap(t.ends))*4)
}
