package memory

import (
	"hash/maphash"
	"unsafe"
)

// sym is an interned string: a type name, relation name, object id or caveat name.
// Symbol 0 is the empty string (the ellipsis subject relation) and is never freed.
type sym = uint32

const (
	// arenaChunk is the size of the byte chunks strings are copied into. A string handed
	// to a caller points into its chunk, so a chunk stays alive while any such string
	// does; small chunks bound what one long-lived string can pin.
	arenaChunk = 64 << 10
	// compactMinDead is how many bytes of freed strings the arena tolerates before
	// it is rewritten without them.
	compactMinDead = 1 << 20
)

// strLoc says where a symbol's bytes are. It holds no pointers, so the slice of
// locations costs the garbage collector nothing to scan.
type strLoc struct {
	chunk, off, len uint32
}

// interner maps strings to symbols and back. Strings live in append-only byte chunks
// and are looked up through an open-addressing table of symbols (verified against
// their strings, so hash collisions cost time only), so the interner holds one
// pointer per 64 KiB chunk instead of one per string, and 7 to 13 bytes of table per
// string (at most three quarters full, see tableFull) instead of a Go map entry.
// Beside each slot a byte of its string's hash lets a probe skip strings that cannot
// match: reading one costs two cache misses (its location, its bytes), and at three
// quarters full a lookup of a string that is not there passes eight slots on average.
// Symbols are reference counted by the records that use them and reused once free.
//
// Mutating methods need the store's write lock; lookup and str need at least its read
// lock. Strings returned by str stay valid forever: chunk bytes are never rewritten.
type interner struct {
	seed      maphash.Seed
	weakHash  func(string) uint64 // tests set this to force collisions; nil: maphash
	table     []sym               // symbol; emptySlot or deadSlot otherwise; length a power of 2
	tags      []uint8             // by table slot: hashTag of the slot's string
	used      int                 // table slots holding a symbol
	deadSlots int                 // table slots holding deadSlot
	locs      []strLoc            // indexed by symbol
	refs      []uint32            // indexed by symbol; 0 for a free symbol
	free      []sym
	chunks    [][]byte
	live      int // bytes of strings in use
	dead      int // bytes of freed strings still in chunks
	minDead   int // dead bytes tolerated before compaction
}

func newInterner() *interner {
	in := &interner{seed: maphash.MakeSeed(), minDead: compactMinDead}
	in.locs = append(in.locs, strLoc{})
	in.refs = append(in.refs, 1)
	return in
}

func (in *interner) hash(s string) uint64 {
	if in.weakHash != nil {
		return in.weakHash(s)
	}
	return maphash.String(in.seed, s)
}

// str returns the string of a symbol without copying it.
func (in *interner) str(s sym) string {
	l := in.locs[s]
	if l.len == 0 {
		return ""
	}
	return unsafe.String(&in.chunks[l.chunk][l.off], int(l.len))
}

// lookup returns the symbol of s, if s is interned.
func (in *interner) lookup(s string) (sym, bool) {
	if s == "" {
		return 0, true
	}
	if i := in.find(s); i >= 0 {
		return in.table[i], true
	}
	return 0, false
}

// find returns the table slot holding s, or -1.
func (in *interner) find(s string) int {
	if len(in.table) == 0 {
		return -1
	}
	h := in.hash(s)
	tag, mask := hashTag(h), len(in.table)-1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch id := in.table[i]; id {
		case emptySlot:
			return -1
		case deadSlot:
		default:
			if in.tags[i] == tag && in.str(id) == s {
				return i
			}
		}
	}
}

// hashTag is the byte of a string's hash kept beside its table slot: the top bits,
// which do not choose the slot.
func hashTag(h uint64) uint8 { return uint8(h >> 56) }

// insert adds symbol id, whose string is s and not yet in the table.
func (in *interner) insert(s string, id sym) {
	if tableFull(in.used+in.deadSlots, len(in.table)) {
		old, n := in.table, tableSize(in.used)
		in.table, in.tags, in.deadSlots = make([]sym, n), make([]uint8, n), 0
		for _, v := range old {
			if v != emptySlot && v != deadSlot {
				in.placeSym(in.str(v), v)
			}
		}
	}
	in.placeSym(s, id)
	in.used++
}

// placeSym puts id in the first free slot from s's home slot on.
func (in *interner) placeSym(s string, id sym) {
	h := in.hash(s)
	mask := len(in.table) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch in.table[i] {
		case deadSlot:
			in.deadSlots--
			fallthrough
		case emptySlot:
			in.table[i], in.tags[i] = id, hashTag(h)
			return
		}
	}
}

// intern returns the symbol of s, adding s if needed, and takes a reference to it.
func (in *interner) intern(s string) sym {
	if s == "" {
		return 0
	}
	if i := in.find(s); i >= 0 {
		id := in.table[i]
		in.refs[id]++
		return id
	}
	id := in.add(s)
	in.insert(in.str(id), id)
	return id
}

// add copies s into the arena under a new or recycled symbol with one reference.
func (in *interner) add(s string) sym {
	loc := in.place(s)
	in.live += len(s)
	if n := len(in.free); n > 0 {
		id := in.free[n-1]
		in.free = in.free[:n-1]
		in.locs[id], in.refs[id] = loc, 1
		return id
	}
	in.locs = append(in.locs, loc)
	in.refs = append(in.refs, 1)
	return sym(len(in.locs) - 1)
}

// place appends s's bytes to the arena. Long strings get a chunk of their own so that
// they do not waste the rest of a shared one.
func (in *interner) place(s string) strLoc {
	if len(s) > arenaChunk/4 {
		in.chunks = append(in.chunks, []byte(s))
		return strLoc{chunk: uint32(len(in.chunks) - 1), len: uint32(len(s))}
	}
	last := len(in.chunks) - 1
	if last < 0 || cap(in.chunks[last])-len(in.chunks[last]) < len(s) || cap(in.chunks[last]) != arenaChunk {
		in.chunks = append(in.chunks, make([]byte, 0, arenaChunk))
		last++
	}
	off := len(in.chunks[last])
	in.chunks[last] = append(in.chunks[last], s...)
	return strLoc{chunk: uint32(last), off: uint32(off), len: uint32(len(s))}
}

// release drops one reference and reports whether the symbol became unused. An unused
// symbol keeps its string until reclaim, so that callers may still read it.
func (in *interner) release(s sym) bool {
	if s == 0 {
		return false
	}
	in.refs[s]--
	return in.refs[s] == 0
}

// reclaim frees symbols whose last reference was released, after every index entry
// naming them has been removed.
func (in *interner) reclaim(syms []sym) {
	for _, id := range syms {
		if in.refs[id] != 0 || in.locs[id] == (strLoc{}) {
			continue // referenced again since it was released, or listed twice
		}
		s := in.str(id)
		if i := in.find(s); i >= 0 && in.table[i] == id {
			in.table[i] = deadSlot
			in.used--
			in.deadSlots++
		}
		in.live -= len(s)
		in.dead += len(s)
		in.locs[id] = strLoc{}
		in.refs[id] = 0
		in.free = append(in.free, id)
	}
	if in.dead > in.minDead && in.dead > in.live {
		in.compact()
	}
}

// compact copies live strings into fresh chunks. Strings already handed out keep the
// old chunks alive until they are dropped.
func (in *interner) compact() {
	old := in.chunks
	in.chunks = nil
	for id := 1; id < len(in.locs); id++ {
		l := in.locs[id]
		if in.refs[id] == 0 || l.len == 0 {
			continue
		}
		in.locs[id] = in.place(unsafe.String(&old[l.chunk][l.off], int(l.len)))
	}
	in.dead = 0
}

// count is the number of symbols in use, the empty string included.
func (in *interner) count() int { return len(in.locs) - len(in.free) }
