package memory

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// gcChunk bounds the records freed under one hold of the lock, so that collecting a
// day of deletions does not stall readers.
const gcChunk = 8192

// GC frees what no retained revision can read as of time now and returns the number
// of record versions it freed. A revision stays retained until the write that
// superseded it is older than the GC window; relationships that expired longer ago
// than the window are freed too (reads hide them already; only a reader asking for
// expired relationships could tell). The background collector calls this; tests call
// it with a chosen time.
func (s *Store) GC(now time.Time) int {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	nowNs := now.UnixNano()
	cutoff := nowNs - int64(s.opts.GCWindow)
	s.mu.Lock()
	s.advanceOldestLocked(cutoff)
	s.mu.Unlock()
	freed := 0
	for {
		s.mu.Lock()
		n := s.collectChunkLocked(cutoff)
		s.mu.Unlock()
		freed += n
		if n < gcChunk {
			return freed
		}
	}
}

// collectChunkLocked frees up to gcChunk records (see victimsLocked) and returns how
// many it freed.
func (s *Store) collectChunkLocked(cutoff int64) int {
	victims := s.victimsLocked(cutoff)
	if len(victims) > 0 {
		s.unlinkLocked(victims)
		s.freeLocked(victims)
	}
	return len(victims)
}

// offLocked is rev as an offset from revBase; rev must not be older than oldest.
func (s *Store) offLocked(rev uint64) uint32 { return uint32(rev - s.revBase) }

// absLocked is the revision at offset off (not liveOff).
func (s *Store) absLocked(off uint32) uint64 { return s.revBase + uint64(off) }

// rebaseLocked raises revBase to just below the oldest retained revision, so that a
// new head revision has an offset below revisionSpan. It first collects what garbage
// collection may (with the write lock held, in one go): afterwards every ended record
// ends after the oldest retained revision, and a record created before it reads the
// same at every retained revision as one created at it. It fails, changing nothing a
// reader can see, when more revisions are retained than offsets can tell apart.
func (s *Store) rebaseLocked() error {
	cutoff := s.opts.Now().UnixNano() - int64(s.opts.GCWindow)
	s.advanceOldestLocked(cutoff)
	for s.collectChunkLocked(cutoff) == gcChunk {
	}
	base := s.oldest - 1
	if s.head+1-base >= revisionSpan {
		return fmt.Errorf("memory store: %d revisions are retained, more than it can address (%d): shorten the GC window",
			s.head+1-s.oldest, revisionSpan-1)
	}
	shift := uint32(base - s.revBase)
	for idx := uint32(1); int(idx) < s.recs.len(); idx++ {
		r := s.recs.at(idx)
		if r.created == 0 {
			continue // a free slot
		}
		r.created = max(r.created, shift+1) - shift
		if r.deleted != liveOff {
			r.deleted -= shift
		}
	}
	s.revBase = base
	return nil
}

// advanceOldestLocked moves the oldest retained revision to the first one still
// current after cutoff, and drops history older than it.
func (s *Store) advanceOldestLocked(cutoff int64) {
	// Revision oldest+i is retained when it is the head or its successor, committed at
	// commits[i+1], is younger than the cutoff.
	n := int(s.head - s.oldest)
	i := sort.Search(n, func(i int) bool { return s.commits[i+1] > cutoff })
	if i == 0 {
		return
	}
	s.oldest += uint64(i)
	s.commits = slices.Clone(s.commits[i:])
	j := 0
	for j+1 < len(s.schemas) && s.schemas[j+1].rev <= s.oldest {
		j++
	}
	s.schemas = slices.Clone(s.schemas[j:])
}

// victimsLocked picks up to gcChunk records to free and marks them (created = 0):
// versions ended at or before the oldest retained revision, and live relationships
// that expired at or before cutoff.
func (s *Store) victimsLocked(cutoff int64) []uint32 {
	var victims []uint32
	n := 0
	for ; n < len(s.ended) && len(victims) < gcChunk; n++ {
		idx := s.ended[n]
		if s.absLocked(s.recs.at(idx).deleted) > s.oldest {
			break
		}
		s.recs.at(idx).created = 0
		victims = append(victims, idx)
	}
	s.ended = s.ended[n:]
	for len(s.expiring) > 0 && s.expiring[0].at <= cutoff && len(victims) < gcChunk {
		e := s.expiring.pop()
		r := s.recs.at(e.rec)
		// Skip entries whose record was deleted (its slot may even hold another record).
		if r.created != 0 && r.deleted == liveOff && s.expiresLocked(e.rec, r) == e.at {
			r.created = 0
			s.live--
			victims = append(victims, e.rec)
		}
	}
	return victims
}

// unlinkLocked removes marked records from every chain that holds them.
func (s *Store) unlinkLocked(victims []uint32) {
	fkeys := map[fwdKey]struct{}{}
	rkeys := map[revKey]struct{}{}
	ekeys := map[exactKey]struct{}{}
	for _, idx := range victims {
		r := s.recs.at(idx)
		fkeys[s.recs.fwdKey(r)] = struct{}{}
		rkeys[s.recs.revKey(r)] = struct{}{}
		ekeys[s.recs.exactKey(r)] = struct{}{}
	}
	for k := range fkeys {
		old, _ := s.fwd.get(&s.recs, k)
		c := s.relink(old.head, func(i uint32) uint32 { return s.recs.at(i).fwdNext }, func(i, to uint32) { s.recs.at(i).fwdNext = to })
		if c.n == 0 {
			s.fwd.del(&s.recs, k)
			if t := s.types[k.resType]; t != nil && !s.hasOtherChainLocked(t, k) {
				t.ids.remove(s.in, k.resID)
			}
		} else {
			s.fwd.set(&s.recs, k, c)
		}
	}
	for k := range rkeys {
		s.runs.drop(k)
		old, _ := s.rev.get(&s.recs, k)
		if c := s.relink(old.head, func(i uint32) uint32 { return s.recs.at(i).revNext }, func(i, to uint32) { s.recs.at(i).revNext = to }); c.n == 0 {
			s.rev.del(&s.recs, k)
		} else {
			s.rev.set(&s.recs, k, c)
		}
	}
	for k := range ekeys {
		if c := s.relink(s.exact.get(&s.recs, k), func(i uint32) uint32 { return s.olders[i] }, s.setOlder); c.n == 0 {
			s.exact.del(&s.recs, k)
		} else {
			s.exact.set(&s.recs, k, c.head)
		}
	}
}

// setOlder makes older the previous version of record idx's key (0: none).
func (s *Store) setOlder(idx, older uint32) {
	if older == 0 {
		delete(s.olders, idx)
	} else {
		s.olders[idx] = older
	}
}

// relink rebuilds the list starting at head without its marked records, following
// the links next reads and rewriting them with setNext, and returns the new head and
// length.
func (s *Store) relink(head uint32, next func(idx uint32) uint32, setNext func(idx, to uint32)) chain {
	var out chain
	var prev uint32
	for idx := head; idx != 0; {
		following := next(idx)
		if s.recs.at(idx).created != 0 {
			if prev == 0 {
				out.head = idx
			} else {
				setNext(prev, idx)
			}
			prev = idx
			out.n++
		}
		idx = following
	}
	if prev != 0 {
		setNext(prev, 0)
	}
	return out
}

// freeLocked drops the marked records from the type catalogue, releases their symbols,
// name slots and caveats, and puts their slots up for reuse.
func (s *Store) freeLocked(victims []uint32) {
	var unused []sym
	touched := map[sym]struct{}{}
	for _, idx := range victims {
		r := s.recs.at(idx)
		k := s.recs.exactKey(r)
		if t := s.types[k.resType]; t != nil {
			t.rels = dropCount(t.rels, k.relation)
			t.kinds = dropKind(t.kinds, k)
		}
		if t := s.types[k.subjType]; t != nil {
			t.srels = dropCount(t.srels, k.subjRel)
		}
		touched[k.resType], touched[k.subjType] = struct{}{}, struct{}{}
		for _, x := range [...]sym{k.resType, k.resID, k.relation, k.subjType, k.subjID, k.subjRel} {
			if s.in.release(x) {
				unused = append(unused, x)
			}
		}
		if r.hasSide() {
			s.side.release(idx)
		}
		*r = record{}
		delete(s.olders, idx)
		s.freeRecs = append(s.freeRecs, idx)
	}
	for t := range touched {
		if info := s.types[t]; info != nil && info.empty() {
			delete(s.types, t)
		}
	}
	for _, x := range unused {
		s.recs.dropName(x)
	}
	s.in.reclaim(unused)
}
