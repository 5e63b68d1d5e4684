package memory

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/latch-authz/latch/internal/rel"
)

// runCache keeps reverse chains sorted in key order, for the reads that must hand a
// subject's relationships over in that order: a paged LookupResources, or a relation
// streamed from thousands of the subject's groups. A chain holds its records in the
// order they were written, so without its sorted run such a read gathers and sorts
// every record of every chain before its first row; with them it merges the runs and
// pays for the rows it hands over.
//
// A run stays valid while its chain has the head and length it was sorted at: a write
// puts its record at the head of its chain (so a run whose chain grew needs only the
// new records sorted and merged in), and garbage collection, the only thing that takes
// records out of a chain, drops the runs of the chains it relinks. A record is in one
// chain, so the runs take at most 4 bytes per record besides their entries.
type runCache struct {
	// mu guards runs among readers, which share the store's read lock; a writer or the
	// collector, holding the store's lock alone, needs no more.
	mu    sync.Mutex
	runs  map[revKey]run
	bytes atomic.Int64 // of the runs' records, for TableBytes
}

// run is a reverse chain's records in key order, sorted when the chain had its head
// and length.
type run struct {
	chain
	idxs []uint32
}

// runKeepMin is the shortest chain whose run is kept: a shorter one costs little to
// sort at each read, and its entry more than its records.
const runKeepMin = 8

// sortedLocked returns the records of chain c (key k) in key order: its kept run if the
// chain has not changed since; else the chain sorted now, kept if long enough. A chain
// that only grew since its run was sorted has its new records at its head: those are
// sorted and merged with the run. read is how many records it read to sort them.
func (x *runCache) sortedLocked(s *Store, k revKey, c chain) (idxs []uint32, read int) {
	var kept run
	keep := c.n >= runKeepMin
	if keep {
		x.mu.Lock()
		kept = x.runs[k]
		x.mu.Unlock()
		if kept.chain == c {
			return kept.idxs, 0
		}
	}
	if kept.head != 0 && kept.n < c.n {
		if fresh, next := s.sortChainLocked(c.head, c.n-kept.n); next == kept.head {
			idxs, read = s.mergeRunsLocked(fresh, kept.idxs), len(fresh)
		}
	}
	if idxs == nil {
		idxs, _ = s.sortChainLocked(c.head, c.n)
		read = len(idxs)
	}
	if keep {
		x.mu.Lock()
		if x.runs == nil {
			x.runs = map[revKey]run{}
		}
		x.bytes.Add(int64(sliceBytes(idxs) - sliceBytes(x.runs[k].idxs)))
		x.runs[k] = run{c, idxs}
		x.mu.Unlock()
	}
	return idxs, read
}

// sortChainLocked returns the n records of a chain from head in key order, and the
// record after them.
func (s *Store) sortChainLocked(head, n uint32) (idxs []uint32, next uint32) {
	idxs, rids := make([]uint32, 0, n), make([]sym, 0, n)
	for next = head; next != 0 && len(idxs) < int(n); next = s.recs.at(next).revNext {
		idxs, rids = append(idxs, next), append(rids, s.recs.at(next).resID)
	}
	s.sortRunLocked(idxs, rids)
	return idxs, next
}

// mergeRunsLocked merges two runs of one chain into a new one.
func (s *Store) mergeRunsLocked(a, b []uint32) []uint32 {
	out := make([]uint32, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if s.compareKeys(a[0], b[0]) < 0 {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// drop forgets the run of chain k, which the collector is changing.
func (x *runCache) drop(k revKey) {
	if r, ok := x.runs[k]; ok {
		x.bytes.Add(-int64(sliceBytes(r.idxs)))
		delete(x.runs, k)
	}
}

// sortRunLocked sorts the records of one reverse chain in key order, given their
// resource ids (rids): by resource id (rel.SortBy when many), and by key where those
// tie.
func (s *Store) sortRunLocked(idxs []uint32, rids []sym) {
	if len(idxs) < rel.OrderMin {
		slices.SortFunc(idxs, s.compareKeys)
		return
	}
	rel.SortBy(idxs, func(i int) string { return s.in.str(rids[i]) }, func(a, b int) int { return s.compareKeys(idxs[a], idxs[b]) })
}

// compareKeys orders two records by key.
func (s *Store) compareKeys(a, b uint32) int {
	rp := &s.recs
	ra, rb := rp.at(a), rp.at(b)
	if c := s.compareSyms(rp.name(ra.resType), rp.name(rb.resType)); c != 0 {
		return c
	}
	if c := s.compareSyms(ra.resID, rb.resID); c != 0 {
		return c
	}
	if c := s.compareSyms(rp.name(ra.relation), rp.name(rb.relation)); c != 0 {
		return c
	}
	return s.compareSubjects(a, b)
}

// runHeap merges sorted runs: each entry is the rest of a run, led by its next record,
// and the entry whose record comes first by key is at the top. An entry keeps its
// record's resource type and id, which order most of the merge's comparisons.
type runHeap struct {
	s       *Store
	entries []runEntry
}

type runEntry struct {
	typ, id string // of the record idxs[0]
	idxs    []uint32
}

// entry makes a run (not empty) an entry.
func (h *runHeap) entry(idxs []uint32) runEntry {
	s := h.s
	r := s.recs.at(idxs[0])
	return runEntry{s.in.str(s.recs.name(r.resType)), s.in.str(r.resID), idxs}
}

func (h *runHeap) less(i, j int) bool {
	a, b := &h.entries[i], &h.entries[j]
	if a.typ != b.typ {
		return a.typ < b.typ
	}
	if a.id != b.id {
		return a.id < b.id
	}
	return h.s.compareKeys(a.idxs[0], b.idxs[0]) < 0
}

func (h *runHeap) init() {
	for i := len(h.entries)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// advance moves the top entry on to the rest of its run (idxs), removing it when that
// is empty, and restores the order.
func (h *runHeap) advance(idxs []uint32) {
	if len(idxs) > 0 {
		h.entries[0] = h.entry(idxs)
	} else {
		last := len(h.entries) - 1
		h.entries[0] = h.entries[last]
		h.entries = h.entries[:last]
	}
	h.down(0)
}

func (h *runHeap) down(i int) {
	n := len(h.entries)
	for {
		least := i
		if l := 2*i + 1; l < n && h.less(l, least) {
			least = l
		}
		if r := 2*i + 2; r < n && h.less(r, least) {
			least = r
		}
		if least == i {
			return
		}
		h.entries[i], h.entries[least] = h.entries[least], h.entries[i]
		i = least
	}
}
