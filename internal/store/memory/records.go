package memory

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/latch-authz/latch/internal/rel"
)

// liveOff is the deleted revision offset of a record that has not been deleted.
const liveOff = math.MaxUint32

// revisionSpan bounds how far a record's revisions may lie above the store's revBase:
// offsets below it fit in 32 bits and never reach liveOff. A variable so that tests
// can make rebasing frequent.
var revisionSpan uint64 = liveOff - 1

// record is one version of one relationship. Records hold no pointers: ids are
// symbols, types and relations slots of the name table (recordPages.name), the caveat
// and expiration are in a side table by record index and the index links are record
// indexes, so a million records cost the garbage collector nothing to scan. Record 0
// is never used, which lets 0 end every list.
type record struct {
	resID, subjID sym
	// Types and relations are few: 16-bit name slots where a symbol takes 32 bits.
	// subjRel's top bit (sideBit) is not part of its slot: it says that the record has
	// a caveat or an expiration, in Store.side.
	resType, relation, subjType, subjRel nameSlot

	fwdNext uint32 // next record of the same forward chain
	revNext uint32 // next record of the same reverse chain
	// A record's previous version of the same key is in Store.olders: few records
	// have one, and a field for it would make every record an eighth larger.

	// The revisions that wrote and ended this version, as offsets from Store.revBase:
	// 32 bits where whole revisions take 64. created 0 marks a free slot; deleted is
	// liveOff while the version is current.
	created, deleted uint32
}

// visibleAt reports whether a reader at revision offset off sees the record.
func (r *record) visibleAt(off uint32) bool {
	return r.created <= off && off < r.deleted
}

// hasSide reports whether the record has a caveat or an expiration.
func (r *record) hasSide() bool { return r.subjRel&sideBit != 0 }

// expiresLocked returns the encoded expiration of record idx (r); 0: never.
func (s *Store) expiresLocked(idx uint32, r *record) int64 {
	if !r.hasSide() {
		return 0
	}
	return s.side.expires(idx)
}

// expiredAtLocked reports whether record idx's (r's) expiration is at or before now
// (unix ns).
func (s *Store) expiredAtLocked(idx uint32, r *record, now int64) bool {
	x := s.expiresLocked(idx, r)
	return x != 0 && x <= now
}

const (
	pageBits = 14 // 16384 records, 512 KiB, per page
	pageSize = 1 << pageBits
	pageMask = pageSize - 1
)

// recordPages is the record array, allocated a page at a time: growing never copies
// the records already written (which would stall everyone behind the write lock)
// and wastes at most one page, where a doubling slice would waste up to half.
type recordPages struct {
	pages [][]record
	n     uint32 // slots handed out; slot 0 is reserved

	names     []sym            // by name slot: the type and relation symbols records use
	slotOf    map[sym]nameSlot // inverse of names, for the slots in use
	freeNames []nameSlot       // slots no record uses any more, for reuse
	// recent holds, for each name field of a record (nameField), the slot the last
	// insert used there: writes mostly repeat a few types and relations.
	recent [numNameFields]struct {
		n  nameSlot
		ok bool
	}
}

// nameField is a record field that holds a name slot.
type nameField int

const (
	resTypeField nameField = iota
	relationField
	subjTypeField
	subjRelField
	numNameFields
)

// nameSlot is a type's or a relation's slot in recordPages.names. A slot stays bound to
// its symbol while any record uses it, which also keeps the symbol's string; once the
// last such record is freed the slot is freed with the symbol, so that a long-running
// store whose names come and go does not run out of slots.
type nameSlot uint16

// sideBit is the bit of a record's subjRel that is a flag (record.hasSide), not part of
// the slot.
const sideBit nameSlot = 1 << 15

// maxNames is how many distinct type and relation names a store can hold: the slots
// below sideBit.
const maxNames = int(sideBit)

// name is the symbol of a name slot (of a record's subjRel, without its flag).
func (rp *recordPages) name(n nameSlot) sym { return rp.names[n&^sideBit] }

// slot returns the name slot of symbol s, handing out a new one if needed; writers
// have checked with checkNamesLocked that one is left.
func (rp *recordPages) slot(s sym) nameSlot {
	if n, ok := rp.slotOf[s]; ok {
		return n
	}
	if rp.slotOf == nil {
		rp.slotOf = map[sym]nameSlot{}
	}
	var n nameSlot
	if k := len(rp.freeNames); k > 0 {
		n = rp.freeNames[k-1]
		rp.freeNames = rp.freeNames[:k-1]
		rp.names[n] = s
	} else {
		n = nameSlot(len(rp.names))
		rp.names = append(rp.names, s)
	}
	rp.slotOf[s] = n
	return n
}

// internName interns name, a type or relation in field f of a new record, and returns
// its name slot. When the last insert had the same name there, it spares the interner's
// probe and the slotOf lookup.
func (rp *recordPages) internName(in *interner, name string, f nameField) nameSlot {
	if r := &rp.recent[f]; r.ok && in.str(rp.names[r.n]) == name {
		if s := rp.names[r.n]; s != 0 {
			in.refs[s]++ // as intern does; the empty string has no count
		}
		return r.n
	}
	n := rp.slot(in.intern(name))
	rp.recent[f].n, rp.recent[f].ok = n, true
	return n
}

// dropName frees the name slot of symbol s, if it has one; no record may use s.
func (rp *recordPages) dropName(s sym) {
	if n, ok := rp.slotOf[s]; ok {
		delete(rp.slotOf, s)
		rp.names[n] = 0
		rp.freeNames = append(rp.freeNames, n)
		for f := range rp.recent {
			if rp.recent[f].n == n {
				rp.recent[f].ok = false
			}
		}
	}
}

// namesInUse is the number of name slots records use.
func (rp *recordPages) namesInUse() int { return len(rp.names) - len(rp.freeNames) }

func (rp *recordPages) at(idx uint32) *record { return &rp.pages[idx>>pageBits][idx&pageMask] }

// len is the number of slots handed out, including the reserved slot 0.
func (rp *recordPages) len() int { return max(int(rp.n), 1) }

// grow hands out a new slot.
func (rp *recordPages) grow() uint32 {
	if rp.n == 0 {
		rp.n = 1 // slot 0 ends every list
	}
	if int(rp.n>>pageBits) == len(rp.pages) {
		rp.pages = append(rp.pages, make([]record, pageSize))
	}
	rp.n++
	return rp.n - 1
}

// fwdKey selects a forward chain: every version of the relationships of one resource
// through one relation to subjects of one type and subject relation (one subject
// kind). Checks read these, many resource ids at a time. Split by subject kind, a read
// of a group's nested groups (its group#member sets) passes its users by, where one
// chain per relation made it read every member.
type fwdKey struct{ resType, resID, relation, subjType, subjRel sym }

// groupKey selects the relationships of one resource through one relation: the
// forward chains of every subject kind the relation has.
type groupKey struct{ resType, resID, relation sym }

// revKey selects a reverse chain: every version of the relationships from one subject
// object to resources of one type through one relation, whatever the subject relation.
// Lookups walk these.
type revKey struct{ subjType, subjID, resType, relation sym }

// exactKey is a full relationship key; the exact index maps it to the newest version.
type exactKey struct {
	resType, resID, relation  sym
	subjType, subjID, subjRel sym
}

// chain is the head of an intrusive list of records and its length, which query
// planning uses as a cost.
type chain struct{ head, n uint32 }

func (rp *recordPages) fwdKey(r *record) fwdKey {
	return fwdKey{rp.name(r.resType), r.resID, rp.name(r.relation), rp.name(r.subjType), rp.name(r.subjRel)}
}

func (rp *recordPages) revKey(r *record) revKey {
	return revKey{rp.name(r.subjType), r.subjID, rp.name(r.resType), rp.name(r.relation)}
}

func (rp *recordPages) exactKey(r *record) exactKey {
	return exactKey{rp.name(r.resType), r.resID, rp.name(r.relation), rp.name(r.subjType), r.subjID, rp.name(r.subjRel)}
}

// symCount is a symbol with the number of records using it in some role.
type symCount struct {
	s sym
	n uint32
}

// typeInfo is what the store knows of one object type. The slices are sorted by
// string so that queries can walk them in key order.
type typeInfo struct {
	rels  []symCount // relations of records whose resource has this type
	srels []symCount // subject relations of records whose subject has this type
	// kinds are the subject kinds of each relation of records whose resource has this
	// type, in no order: a group's forward chains are one per kind.
	kinds []kindCount
	ids   idList // ids of resources of this type that have records
}

// kindCount is the number of records of one relation with one subject kind.
type kindCount struct {
	relation, subjType, subjRel sym
	n                           uint32
}

// addKind counts one more record of k's relation and subject kind in list.
func addKind(list []kindCount, k fwdKey) []kindCount {
	for i := range list {
		if c := &list[i]; c.relation == k.relation && c.subjType == k.subjType && c.subjRel == k.subjRel {
			c.n++
			return list
		}
	}
	return append(list, kindCount{k.relation, k.subjType, k.subjRel, 1})
}

// dropKind counts one less record of k's relation and subject kind, removing it at zero.
func dropKind(list []kindCount, k exactKey) []kindCount {
	for i := range list {
		if c := &list[i]; c.relation == k.relation && c.subjType == k.subjType && c.subjRel == k.subjRel {
			if c.n--; c.n == 0 {
				return slices.Delete(list, i, i+1)
			}
			return list
		}
	}
	return list
}

func (t *typeInfo) empty() bool { return len(t.rels) == 0 && len(t.srels) == 0 && t.ids.len() == 0 }

// addCount counts one more use of s in list, keeping list sorted by string.
func addCount(in *interner, list []symCount, s sym) []symCount {
	for i := range list {
		if list[i].s == s {
			list[i].n++
			return list
		}
	}
	i, _ := slices.BinarySearchFunc(list, in.str(s), func(c symCount, t string) int {
		return strings.Compare(in.str(c.s), t)
	})
	return slices.Insert(list, i, symCount{s, 1})
}

// dropCount counts one less use of s in list, removing it at zero.
func dropCount(list []symCount, s sym) []symCount {
	for i := range list {
		if list[i].s == s {
			if list[i].n--; list[i].n == 0 {
				return slices.Delete(list, i, i+1)
			}
			return list
		}
	}
	return list
}

// syms returns the symbols of list.
func syms(list []symCount) []sym {
	out := make([]sym, len(list))
	for i, c := range list {
		out[i] = c.s
	}
	return out
}

// encodeExpiration turns an expiration into the record's form. An expiration at the
// Unix epoch itself moves by a nanosecond, since 0 means "never".
func encodeExpiration(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	switch {
	case t.Before(minTime):
		return math.MinInt64
	case t.After(maxTime):
		return math.MaxInt64
	}
	if n := t.UnixNano(); n != 0 {
		return n
	}
	return 1
}

var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// materializeLocked builds the relationship record idx stores. Strings point into the
// interner's arena; the caveat context is copied so callers may keep or change it.
func (s *Store) materializeLocked(idx uint32) rel.Relationship {
	in, rp := s.in, &s.recs
	r := rp.at(idx)
	out := rel.Relationship{
		Resource: rel.ObjectRef{Type: in.str(rp.name(r.resType)), ID: in.str(r.resID)},
		Relation: in.str(rp.name(r.relation)),
		Subject: rel.SubjectRef{
			Object:   rel.ObjectRef{Type: in.str(rp.name(r.subjType)), ID: in.str(r.subjID)},
			Relation: in.str(rp.name(r.subjRel)),
		},
	}
	if r.hasSide() {
		out.Caveat = s.side.caveat(idx)
		if x := s.side.expires(idx); x != 0 {
			t := time.Unix(0, x).UTC()
			out.Expiration = &t
		}
	}
	return out
}

// keyLocked is the key of record idx.
func (s *Store) keyLocked(idx uint32) rel.Key {
	in, rp := s.in, &s.recs
	r := rp.at(idx)
	return rel.Key{
		ResourceType: in.str(rp.name(r.resType)), ResourceID: in.str(r.resID), Relation: in.str(rp.name(r.relation)),
		SubjectType: in.str(rp.name(r.subjType)), SubjectID: in.str(r.subjID), SubjectRelation: in.str(rp.name(r.subjRel)),
	}
}

// resolveKey finds the symbols of k without interning anything; ok is false when
// some part of k was never stored, so no record can have that key.
func (s *Store) resolveKey(k rel.Key) (exactKey, bool) {
	var e exactKey
	parts := [6]struct {
		str string
		dst *sym
	}{
		{k.ResourceType, &e.resType},
		{k.ResourceID, &e.resID},
		{k.Relation, &e.relation},
		{k.SubjectType, &e.subjType},
		{k.SubjectID, &e.subjID},
		{k.SubjectRelation, &e.subjRel},
	}
	for _, p := range parts {
		id, ok := s.in.lookup(p.str)
		if !ok {
			return e, false
		}
		*p.dst = id
	}
	return e, true
}

// currentLocked returns the live record with key k, or 0.
func (s *Store) currentLocked(k rel.Key) uint32 {
	e, ok := s.resolveKey(k)
	if !ok {
		return 0
	}
	if idx := s.exact.get(&s.recs, e); idx != 0 && s.recs.at(idx).deleted == liveOff {
		return idx
	}
	return 0
}

// versionAtLocked returns the version of key e visible at rev, or 0.
func (s *Store) versionAtLocked(e exactKey, rev uint64) uint32 {
	off := s.offLocked(rev)
	for idx := s.exact.get(&s.recs, e); idx != 0; idx = s.olders[idx] {
		r := s.recs.at(idx)
		if r.created <= off {
			if off < r.deleted {
				return idx
			}
			return 0
		}
	}
	return 0
}

// insertLocked adds a live version of x written at rev and returns its record. The
// key's previous version, if any, must already have been ended (a bulk load ends
// none: it rolls back when it finds one live).
func (s *Store) insertLocked(x rel.Relationship, rev uint64) uint32 {
	in, rp := s.in, &s.recs
	r := record{
		resType: rp.internName(in, x.Resource.Type, resTypeField), resID: in.intern(x.Resource.ID),
		relation: rp.internName(in, x.Relation, relationField),
		subjType: rp.internName(in, x.Subject.Object.Type, subjTypeField), subjID: in.intern(x.Subject.Object.ID),
		subjRel: rp.internName(in, x.Subject.Relation, subjRelField),
		created: s.offLocked(rev), deleted: liveOff,
	}
	expires := encodeExpiration(x.Expiration)
	idx := s.allocLocked()
	if s.side.add(idx, x.Caveat, expires) {
		r.subjRel |= sideBit
	}
	ek := rp.exactKey(&r)
	older, ei := s.exact.lookup(&s.recs, ek)
	fk := rp.fwdKey(&r)
	fc, fi := s.fwd.lookup(&s.recs, fk)
	r.fwdNext = fc.head
	rk := rp.revKey(&r)
	rc, ri := s.rev.lookup(&s.recs, rk)
	r.revNext = rc.head
	*s.recs.at(idx) = r // the indexes read a key from the record it leads to
	s.setOlder(idx, older)
	s.exact.setAt(&s.recs, ek, ei, idx)
	s.fwd.setAt(&s.recs, fk, fi, chain{idx, fc.n + 1})
	s.rev.setAt(&s.recs, rk, ri, chain{idx, rc.n + 1})

	s.countLocked(&r, fc.n == 0)
	if expires != 0 {
		s.expiring.push(expiry{at: expires, rec: idx})
	}
	s.live++
	return idx
}

// countLocked records the relation, subject relation and (for a new forward chain)
// resource id of a new record in the type catalogue.
func (s *Store) countLocked(r *record, newChain bool) {
	rp := &s.recs
	rt := s.typeLocked(rp.name(r.resType))
	fk := rp.fwdKey(r)
	if newChain && !s.hasOtherChainLocked(rt, fk) {
		rt.ids.insert(s.in, r.resID)
	}
	rt.rels = addCount(s.in, rt.rels, rp.name(r.relation))
	rt.kinds = addKind(rt.kinds, fk)
	st := s.typeLocked(rp.name(r.subjType))
	st.srels = addCount(s.in, st.srels, rp.name(r.subjRel))
}

// hasOtherChainLocked reports whether the resource of chain k (whose type is t) has
// records in a forward chain other than k's.
func (s *Store) hasOtherChainLocked(t *typeInfo, k fwdKey) bool {
	for _, c := range t.kinds {
		if c.relation == k.relation && c.subjType == k.subjType && c.subjRel == k.subjRel {
			continue
		}
		if _, ok := s.fwd.get(&s.recs, fwdKey{k.resType, k.resID, c.relation, c.subjType, c.subjRel}); ok {
			return true
		}
	}
	return false
}

func (s *Store) typeLocked(typ sym) *typeInfo {
	t := s.types[typ]
	if t == nil {
		t = &typeInfo{}
		s.types[typ] = t
	}
	return t
}

// allocLocked returns a free record slot, reusing those garbage collection freed.
func (s *Store) allocLocked() uint32 {
	if n := len(s.freeRecs); n > 0 {
		idx := s.freeRecs[n-1]
		s.freeRecs = s.freeRecs[:n-1]
		return idx
	}
	return s.recs.grow()
}

// endLocked ends a live record at rev; it stays readable at older revisions until
// garbage collection frees it.
func (s *Store) endLocked(idx uint32, rev uint64) {
	s.recs.at(idx).deleted = s.offLocked(rev)
	s.ended = append(s.ended, idx)
	s.live--
}
