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
// and are looked up through a map keyed by their 64-bit hash, so the interner holds one
// pointer per 64 KiB chunk instead of one per string. Symbols are reference counted by
// the records that use them and reused once free.
//
// Mutating methods need the store's write lock; lookup and str need at least its read
// lock. Strings returned by str stay valid forever: chunk bytes are never rewritten.
type interner struct {
	seed     maphash.Seed
	weakHash func(string) uint64 // tests set this to force collisions; nil: maphash
	byHash   map[uint64]sym
	overflow map[string]sym // strings whose hash collides with another live string's
	locs     []strLoc       // indexed by symbol
	refs     []uint32       // indexed by symbol; 0 for a free symbol
	free     []sym
	chunks   [][]byte
	live     int // bytes of strings in use
	dead     int // bytes of freed strings still in chunks
	minDead  int // dead bytes tolerated before compaction
}

func newInterner() *interner {
	in := &interner{seed: maphash.MakeSeed(), byHash: map[uint64]sym{}, minDead: compactMinDead}
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
	if id, ok := in.byHash[in.hash(s)]; ok && in.str(id) == s {
		return id, true
	}
	if in.overflow != nil {
		id, ok := in.overflow[s]
		return id, ok
	}
	return 0, false
}

// intern returns the symbol of s, adding s if needed, and takes a reference to it.
func (in *interner) intern(s string) sym {
	if s == "" {
		return 0
	}
	h := in.hash(s)
	id, ok := in.byHash[h]
	if ok && in.str(id) == s {
		in.refs[id]++
		return id
	}
	if id, found := in.overflow[s]; found {
		in.refs[id]++
		return id
	}
	id = in.add(s)
	if ok {
		if in.overflow == nil {
			in.overflow = map[string]sym{}
		}
		in.overflow[string([]byte(s))] = id
	} else {
		in.byHash[h] = id
	}
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
		h := in.hash(s)
		if cur, ok := in.byHash[h]; ok && cur == id {
			delete(in.byHash, h)
		} else {
			delete(in.overflow, s)
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
