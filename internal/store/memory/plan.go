package memory

import (
	"slices"
	"sort"
	"strings"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// groupPlan walks (resource type, resource id, relation) groups in key order: the
// filter's resource ids when it lists some, otherwise every id of each type from the
// type's sorted id list. Each group is answered from its forward chain or, when the
// filter names few subjects, by exact lookups of each possible key. The walk resumes
// by string, not by position, so writes between batches cannot derail it.
type groupPlan struct {
	ti     int   // index into query.types
	inType bool  // rels and the first resource of the current type are set
	rels   []sym // relations of the current type to visit, by string
	li     int   // index into rels of the next group's relation

	ri int // listed ids: index into query.ridsByStr

	rid    sym // scanned ids: the current resource
	ridStr string
	c, i   int  // its position in the type's idList, valid while posOK
	posOK  bool // false after the lock was released: positions may have moved

	// pending is the rest of a group larger than the batch that sorted it, in key
	// order, handed over by the batches after it: a large group costs the memory of
	// its record indexes, not of its relationships, and its first ones leave at once.
	pending    []uint32
	scratch    []uint32
	scratchBuf [16]uint32
}

func (p *groupPlan) fill(q *query, out *[]rel.Relationship, want int) bool {
	p.posOK = false
	if p.scratch == nil {
		p.scratch = p.scratchBuf[:0]
	}
	p.pending = q.handOverLocked(p.pending, out, want)
	for groups := 0; groups < batchGroups && len(*out) < want; groups++ {
		k, ok := p.next(q)
		if !ok {
			return true
		}
		p.scratch = q.collectGroupLocked(k, p.scratch)
		p.pending = q.handOverLocked(p.scratch, out, want)
	}
	return false
}

// handOverLocked appends the relationships of idxs (a group's matches in key order)
// after the cursor to out until it holds want, and returns the indexes left over.
func (q *query) handOverLocked(idxs []uint32, out *[]rel.Relationship, want int) []uint32 {
	for i, idx := range idxs {
		if len(*out) == want {
			return idxs[i:]
		}
		if x := q.s.materializeLocked(idx); q.afterCursor(x.Key()) {
			*out = append(*out, x)
		}
	}
	return nil
}

// next returns the next group to visit.
func (p *groupPlan) next(q *query) (groupKey, bool) {
	for p.ti < len(q.types) {
		t := q.types[p.ti]
		ok := true
		switch {
		case !p.inType:
			ok = p.enterType(q, t)
		case p.li >= len(p.rels):
			ok = p.nextResource(q, t)
			p.li = 0
		}
		if !ok {
			p.ti++
			p.inType = false
			continue
		}
		p.li++
		return groupKey{t, p.resource(q), p.rels[p.li-1]}, true
	}
	return groupKey{}, false
}

func (p *groupPlan) enterType(q *query, t sym) bool {
	p.rels = q.relationsLocked(t)
	if len(p.rels) == 0 {
		return false
	}
	p.inType, p.li = true, 0
	if q.ridsByStr != nil {
		p.ri = -1
		return p.nextResource(q, t)
	}
	start := q.f.ResourceIDPrefix
	if a := q.after; a != nil && a.ResourceType == q.s.in.str(t) && a.ResourceID > start {
		start = a.ResourceID
	}
	info := q.s.types[t]
	p.c, p.i = info.ids.seek(q.s.in, start)
	p.posOK = true
	return p.settle(q, info)
}

// nextResource moves to the type's next resource id that the filter allows.
func (p *groupPlan) nextResource(q *query, t sym) bool {
	if q.ridsByStr != nil {
		for p.ri++; p.ri < len(q.ridsByStr); p.ri++ {
			if strings.HasPrefix(q.s.in.str(q.ridsByStr[p.ri]), q.f.ResourceIDPrefix) {
				return true
			}
		}
		return false
	}
	info := q.s.types[t]
	if info == nil {
		return false
	}
	if !p.posOK {
		p.c, p.i = info.ids.seek(q.s.in, p.ridStr)
		p.posOK = true
		if id, ok := info.ids.at(p.c, p.i); !ok || id != p.rid {
			return p.settle(q, info) // rid itself was removed: this is already the next one
		}
	}
	p.c, p.i = info.ids.step(p.c, p.i)
	return p.settle(q, info)
}

// settle makes the id at the current position the current resource, if it is there
// and has the filter's prefix.
func (p *groupPlan) settle(q *query, info *typeInfo) bool {
	id, ok := info.ids.at(p.c, p.i)
	if !ok || !info.ids.hasPrefix(q.s.in, p.c, p.i, q.f.ResourceIDPrefix) {
		return false
	}
	p.rid, p.ridStr = id, q.s.in.str(id)
	return true
}

func (p *groupPlan) resource(q *query) sym {
	if q.ridsByStr != nil {
		return q.ridsByStr[p.ri]
	}
	return p.rid
}

// collectGroupLocked returns the group's matches in key order, in scratch's storage;
// none when the group is before the cursor.
func (q *query) collectGroupLocked(k groupKey, scratch []uint32) []uint32 {
	s := q.s
	if q.after != nil {
		c := compareGroup(s.in, k, q.after)
		if c < 0 {
			return scratch[:0]
		}
		if c > 0 {
			q.after = nil
		}
	}
	idxs := scratch[:0]
	if q.exact && len(q.sidsByStr)*len(q.srels) == 1 {
		// One key to look up costs no more than finding the group's chain.
		return q.exactGroupLocked(k, idxs)
	}
	chains, n := q.chainsLocked(k)
	if n == 0 {
		return idxs
	}
	if q.exact && len(q.sidsByStr)*len(q.srels) < n {
		return q.exactGroupLocked(k, idxs)
	}
	for _, ch := range chains {
		for idx := ch.head; idx != 0; idx = s.recs.at(idx).fwdNext {
			q.visited++
			if q.matchLocked(idx) {
				idxs = append(idxs, idx)
			}
		}
	}
	if len(idxs) > 1 && !q.unordered {
		slices.SortFunc(idxs, s.compareSubjects)
	}
	return idxs
}

// chainsLocked returns the forward chains of group k whose subject kind the filter
// selects, in q's storage, and the records they hold.
func (q *query) chainsLocked(k groupKey) ([]chain, int) {
	t := q.s.types[k.resType]
	if t == nil {
		return nil, 0
	}
	chains, n := q.chainBuf[:0], 0
	for _, c := range t.kinds {
		if c.relation != k.relation || !q.anySt && c.subjType != q.st || !q.anySrel && c.subjRel != q.srel {
			continue
		}
		if ch, ok := q.s.fwd.get(&q.s.recs, fwdKey{k.resType, k.resID, c.relation, c.subjType, c.subjRel}); ok {
			chains = append(chains, ch)
			n += int(ch.n)
		}
	}
	q.chainBuf = chains[:0]
	return chains, n
}

// exactGroupLocked looks up every key the group could hold for the filter's subjects,
// in key order.
func (q *query) exactGroupLocked(k groupKey, idxs []uint32) []uint32 {
	for _, sid := range q.sidsByStr {
		for _, srel := range q.srels {
			e := exactKey{k.resType, k.resID, k.relation, q.st, sid, srel}
			q.visited++
			if idx := q.s.versionAtLocked(e, q.rev); idx != 0 && q.matchLocked(idx) {
				idxs = append(idxs, idx)
			}
		}
	}
	return idxs
}

// compareSubjects orders two records of one group by subject type, id and relation.
func (s *Store) compareSubjects(a, b uint32) int {
	ra, rb := s.recs.at(a), s.recs.at(b)
	if c := s.compareSyms(s.recs.name(ra.subjType), s.recs.name(rb.subjType)); c != 0 {
		return c
	}
	if c := s.compareSyms(ra.subjID, rb.subjID); c != 0 {
		return c
	}
	return s.compareSyms(s.recs.name(ra.subjRel), s.recs.name(rb.subjRel))
}

// compareSyms orders two symbols by their strings; the same symbol needs no lookup.
func (s *Store) compareSyms(a, b sym) int {
	if a == b {
		return 0
	}
	return strings.Compare(s.in.str(a), s.in.str(b))
}

// compareGroup compares a group with the resource part of a cursor key.
func compareGroup(in *interner, k groupKey, after *rel.Key) int {
	if c := strings.Compare(in.str(k.resType), after.ResourceType); c != 0 {
		return c
	}
	if c := strings.Compare(in.str(k.resID), after.ResourceID); c != 0 {
		return c
	}
	return strings.Compare(in.str(k.relation), after.Relation)
}

// reversePlan walks the reverse chains of the filter's subjects. Their records come in
// no useful order: an unordered query takes each hold's matches as they are; an ordered
// one merges the chains' sorted runs (runCache), each started after the cursor, and
// hands over the matches a batch at a time, building only the relationships handed
// over: a reader that stops after a page builds a page. The records stay while the
// query's revision is kept, which fill checks at every hold.
type reversePlan struct {
	keys   []revKey
	ki     int
	merge  runHeap // ordered: the runs of keys[:ki] still to hand over
	merged bool    // every key's run is in merge
}

// reverseBatch bounds the records visited under one hold of the read lock.
const reverseBatch = 4096

func (p *reversePlan) fill(q *query, out *[]rel.Relationship, want int) bool {
	s := q.s
	if q.unordered {
		for visited := 0; p.ki < len(p.keys) && visited < reverseBatch; p.ki++ {
			c, _ := s.rev.get(&s.recs, p.keys[p.ki])
			for idx := c.head; idx != 0; idx = s.recs.at(idx).revNext {
				visited++
				q.visited++
				if q.matchReverseLocked(idx, s.recs.at(idx)) {
					*out = append(*out, s.materializeLocked(idx))
				}
			}
		}
		return p.ki == len(p.keys)
	}
	if !p.merged {
		p.merge.s = s
		for visited := int64(0); p.ki < len(p.keys) && visited < reverseBatch; p.ki++ {
			c, _ := s.rev.get(&s.recs, p.keys[p.ki])
			idxs, read := s.runs.sortedLocked(s, p.keys[p.ki], c)
			visited += 1 + int64(read)
			q.visited += int64(read)
			if q.after != nil {
				idxs = idxs[sort.Search(len(idxs), func(i int) bool { return s.afterLocked(idxs[i], q.after) }):]
			}
			if idxs = q.nextMatchLocked(idxs); len(idxs) > 0 {
				p.merge.entries = append(p.merge.entries, p.merge.entry(idxs))
			}
		}
		if p.ki < len(p.keys) {
			return false
		}
		p.merged, q.after = true, nil // every run starts after it
		p.merge.init()
	}
	h := &p.merge
	for len(*out) < want && len(h.entries) > 0 {
		top := h.entries[0].idxs
		*out = append(*out, s.materializeLocked(top[0]))
		h.advance(q.nextMatchLocked(top[1:]))
	}
	return len(h.entries) == 0
}

// nextMatchLocked drops the records of a reverse chain's run (idxs) up to its next
// match.
func (q *query) nextMatchLocked(idxs []uint32) []uint32 {
	for i, idx := range idxs {
		q.visited++
		if q.matchReverseLocked(idx, q.s.recs.at(idx)) {
			return idxs[i:]
		}
	}
	return nil
}

// afterLocked reports whether record idx comes after key k, comparing the whole key
// only where the resource's type and id tie.
func (s *Store) afterLocked(idx uint32, k *rel.Key) bool {
	r := s.recs.at(idx)
	if c := strings.Compare(s.in.str(s.recs.name(r.resType)), k.ResourceType); c != 0 {
		return c > 0
	}
	if c := strings.Compare(s.in.str(r.resID), k.ResourceID); c != 0 {
		return c > 0
	}
	return store.CompareKeys(s.keyLocked(idx), *k) > 0
}
