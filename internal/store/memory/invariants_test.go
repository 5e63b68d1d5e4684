package memory

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/latch-authz/latch/internal/store"
)

// checkInvariants verifies that every index agrees with the records: each record is in
// exactly the chains its fields name, chain lengths and catalogue counts are exact, the
// sorted runs kept are sorted, the id lists hold exactly the resources with chains, and
// symbol reference counts equal the records' uses.
func checkInvariants(t *testing.T, s *Store) {
	t.Helper()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.invariantsLocked(); err != nil {
		t.Fatal(err)
	}
}

func (s *Store) invariantsLocked() error {
	free := map[uint32]bool{}
	for _, idx := range s.freeRecs {
		if *s.recs.at(idx) != (record{}) {
			return fmt.Errorf("free slot %d is not zeroed", idx)
		}
		free[idx] = true
	}
	inUse := func(idx uint32) bool { return idx != 0 && !free[idx] }
	seenFwd, seenRev, seenVer := map[uint32]int{}, map[uint32]int{}, map[uint32]int{}
	if err := s.checkFwdLocked(seenFwd); err != nil {
		return err
	}
	if f, r := len(s.fwd.all(&s.recs)), len(s.rev.all(&s.recs)); f != s.fwd.used || r != s.rev.used {
		return fmt.Errorf("chain indexes hold %d forward and %d reverse keys, say %d and %d", f, r, s.fwd.used, s.rev.used)
	}
	for k, c := range s.rev.all(&s.recs) {
		n := uint32(0)
		for idx := c.head; idx != 0; idx = s.recs.at(idx).revNext {
			if !inUse(idx) || s.recs.revKey(s.recs.at(idx)) != k {
				return fmt.Errorf("reverse chain %v holds record %d (%+v)", k, idx, *s.recs.at(idx))
			}
			seenRev[idx]++
			n++
		}
		if n != c.n || n == 0 {
			return fmt.Errorf("reverse chain %v has %d records, says %d", k, n, c.n)
		}
	}
	if err := s.checkRunsLocked(); err != nil {
		return err
	}
	heads := s.exact.heads()
	if len(heads) != s.exact.used {
		return fmt.Errorf("exact index holds %d keys, says %d", len(heads), s.exact.used)
	}
	for _, head := range heads {
		k := s.recs.exactKey(s.recs.at(head))
		if s.exact.get(&s.recs, k) != head {
			return fmt.Errorf("exact index maps key %v to %d, holds %d", k, s.exact.get(&s.recs, k), head)
		}
		prevCreated := uint32(liveOff)
		for idx := head; idx != 0; idx = s.olders[idx] {
			r := *s.recs.at(uint32(idx))
			if !inUse(idx) || s.recs.exactKey(&r) != k || r.created >= prevCreated && prevCreated != liveOff || r.deleted > prevCreated && prevCreated != liveOff {
				return fmt.Errorf("version chain %v holds record %d (%+v) out of order", k, idx, r)
			}
			prevCreated = r.created
			seenVer[idx]++
		}
	}
	for idx, older := range s.olders {
		if older == 0 || !inUse(idx) || seenVer[idx] != 1 {
			return fmt.Errorf("record %d, in use %v, names %d as its older version but is in no version chain", idx, inUse(idx), older)
		}
	}
	for idx := range s.side.entries {
		if !inUse(idx) || !s.recs.at(idx).hasSide() {
			return fmt.Errorf("record %d, in use %v, has a side entry but no side flag", idx, inUse(idx))
		}
	}
	live := 0
	refs := make([]uint32, len(s.in.refs))
	refs[0] = 1
	for idx := 1; idx < s.recs.len(); idx++ {
		if free[uint32(idx)] {
			continue
		}
		r := *s.recs.at(uint32(idx))
		if seenFwd[uint32(idx)] != 1 || seenRev[uint32(idx)] != 1 || seenVer[uint32(idx)] != 1 {
			return fmt.Errorf("record %d (%+v) is in %d forward, %d reverse, %d version chains; want 1 each",
				idx, r, seenFwd[uint32(idx)], seenRev[uint32(idx)], seenVer[uint32(idx)])
		}
		if r.deleted == liveOff {
			live++
		}
		if _, ok := s.side.entries[uint32(idx)]; ok != r.hasSide() {
			return fmt.Errorf("record %d has a side entry %v, side flag %v", idx, ok, r.hasSide())
		}
		k := s.recs.exactKey(&r)
		for _, x := range [...]sym{k.resType, k.resID, k.relation, k.subjType, k.subjID, k.subjRel} {
			if x != 0 {
				refs[x]++
			}
		}
	}
	if live != s.live {
		return fmt.Errorf("%d live records, store counts %d", live, s.live)
	}
	if !slices.Equal(refs, s.in.refs) {
		return fmt.Errorf("symbol reference counts disagree with the records")
	}
	if err := s.checkNameSlotsLocked(); err != nil {
		return err
	}
	return s.checkCatalogueLocked()
}

// checkNameSlotsLocked checks that every record's name slots are bound to the symbols
// the slot table says, and that a slot no record uses is free.
func (s *Store) checkNameSlotsLocked() error {
	rp := &s.recs
	if len(rp.slotOf)+len(rp.freeNames) != len(rp.names) {
		return fmt.Errorf("%d name slots: %d bound and %d free", len(rp.names), len(rp.slotOf), len(rp.freeNames))
	}
	used := map[nameSlot]bool{}
	for idx := 1; idx < rp.len(); idx++ {
		r := rp.at(uint32(idx))
		if r.created == 0 {
			continue
		}
		for _, n := range [...]nameSlot{r.resType, r.relation, r.subjType, r.subjRel &^ sideBit} {
			if b, ok := rp.slotOf[rp.name(n)]; !ok || b != n {
				return fmt.Errorf("record %d uses name slot %d, which is not bound to its symbol", idx, n)
			}
			used[n] = true
		}
	}
	for sy, n := range rp.slotOf {
		if rp.names[n] != sy || !used[n] {
			return fmt.Errorf("name slot %d holds symbol %d (%q) that no record uses", n, sy, s.in.str(sy))
		}
	}
	return nil
}

// checkFwdLocked checks the forward chains and counts each record's appearances.
func (s *Store) checkFwdLocked(seen map[uint32]int) error {
	for k, c := range s.fwd.all(&s.recs) {
		n := uint32(0)
		for idx := c.head; idx != 0; idx = s.recs.at(idx).fwdNext {
			if s.recs.fwdKey(s.recs.at(idx)) != k || s.recs.at(idx).created == 0 {
				return fmt.Errorf("forward chain %v holds record %d (%+v)", k, idx, *s.recs.at(idx))
			}
			seen[idx]++
			n++
		}
		if n != c.n || n == 0 {
			return fmt.Errorf("forward chain %v has %d records, says %d", k, n, c.n)
		}
	}
	return nil
}

// checkCatalogueLocked recomputes the type catalogue from the records and compares.
func (s *Store) checkCatalogueLocked() error {
	rels := map[[2]sym]uint32{}
	srels := map[[2]sym]uint32{}
	kinds := map[[4]sym]uint32{}
	ids := map[sym]map[sym]bool{}
	for idx := 1; idx < s.recs.len(); idx++ {
		r := s.recs.at(uint32(idx))
		if r.created == 0 {
			continue
		}
		k := s.recs.exactKey(r)
		rels[[2]sym{k.resType, k.relation}]++
		srels[[2]sym{k.subjType, k.subjRel}]++
		kinds[[4]sym{k.resType, k.relation, k.subjType, k.subjRel}]++
		if ids[k.resType] == nil {
			ids[k.resType] = map[sym]bool{}
		}
		ids[k.resType][k.resID] = true
	}
	for typ, info := range s.types {
		if info.empty() {
			return fmt.Errorf("type %q has an empty catalogue entry", s.in.str(typ))
		}
		if err := s.checkCounts(typ, info.rels, rels); err != nil {
			return err
		}
		if err := s.checkCounts(typ, info.srels, srels); err != nil {
			return err
		}
		for _, c := range info.kinds {
			if k := [4]sym{typ, c.relation, c.subjType, c.subjRel}; kinds[k] != c.n {
				return fmt.Errorf("type %q relation %q subject kind %q#%q counted %d, records have %d", s.in.str(typ),
					s.in.str(c.relation), s.in.str(c.subjType), s.in.str(c.subjRel), c.n, kinds[k])
			}
		}
		var list []string
		for _, ch := range info.ids.chunks {
			if len(ch) == 0 || len(ch) > chunkMax {
				return fmt.Errorf("type %q has an id chunk of %d", s.in.str(typ), len(ch))
			}
			for _, id := range ch {
				list = append(list, s.in.str(id))
				if !ids[typ][id] {
					return fmt.Errorf("type %q lists id %q without records", s.in.str(typ), s.in.str(id))
				}
			}
		}
		if len(list) != len(ids[typ]) || len(list) != info.ids.len() || !slices.IsSorted(list) {
			return fmt.Errorf("type %q lists ids %q; records have %d", s.in.str(typ), list, len(ids[typ]))
		}
	}
	if len(rels) != countEntries(s.types, func(t *typeInfo) int { return len(t.rels) }) ||
		len(srels) != countEntries(s.types, func(t *typeInfo) int { return len(t.srels) }) ||
		len(kinds) != countEntries(s.types, func(t *typeInfo) int { return len(t.kinds) }) {
		return fmt.Errorf("catalogue misses relations the records use")
	}
	return nil
}

func (s *Store) checkCounts(typ sym, list []symCount, want map[[2]sym]uint32) error {
	if !slices.IsSortedFunc(list, func(a, b symCount) int { return strings.Compare(s.in.str(a.s), s.in.str(b.s)) }) {
		return fmt.Errorf("type %q relations are not sorted", s.in.str(typ))
	}
	for _, c := range list {
		if want[[2]sym{typ, c.s}] != c.n {
			return fmt.Errorf("type %q relation %q counted %d, records have %d", s.in.str(typ), s.in.str(c.s), c.n, want[[2]sym{typ, c.s}])
		}
	}
	return nil
}

func countEntries(types map[sym]*typeInfo, f func(*typeInfo) int) int {
	n := 0
	for _, t := range types {
		n += f(t)
	}
	return n
}

// checkRunsLocked checks that every kept run of a chain that has not changed since it
// was sorted holds the chain's records in key order, and that the runs' bytes are
// counted.
func (s *Store) checkRunsLocked() error {
	bytes := 0
	for k, r := range s.runs.runs {
		bytes += sliceBytes(r.idxs)
		c, ok := s.rev.get(&s.recs, k)
		if !ok {
			return fmt.Errorf("a run is kept for reverse chain %v, which is gone", k)
		}
		if c != r.chain {
			continue // stale: the next ordered read of k sorts it again
		}
		var want []uint32
		for idx := r.head; idx != 0; idx = s.recs.at(idx).revNext {
			want = append(want, idx)
		}
		slices.SortFunc(want, func(a, b uint32) int { return store.CompareKeys(s.keyLocked(a), s.keyLocked(b)) })
		if !slices.Equal(r.idxs, want) {
			return fmt.Errorf("the run of reverse chain %v is not its records in key order", k)
		}
	}
	if got := s.runs.bytes.Load(); got != int64(bytes) {
		return fmt.Errorf("runs take %d bytes, counted %d", bytes, got)
	}
	return nil
}
