package pebble

import (
	"bytes"
	"container/heap"
)

// The reverse plan answers filters that name the subjects (type and ids). The reverse
// index holds, for each subject, its relationships ordered by resource type, relation,
// resource id and subject relation, so each (subject, resource type, relation) run is
// already in forward key order. The plan finds the runs the filter allows, reads each
// in small growing chunks, and merges them: results come out in key order without
// reading everything first, which keeps limits and cursors cheap on subjects with
// millions of relationships.

// The chunk sizes of a run: small first, since a query with a limit may need few
// results from each run; then growing. Variables so that tests can shrink them.
var (
	firstChunk = 4
	maxChunk   = 256
)

// stream is one run of the reverse index.
type stream struct {
	hi        []byte // end of the run (exclusive)
	next      []byte // where the next chunk starts
	exhausted bool
	chunk     int
	buf       []entry
	pos       int
	arena     []byte // backing store of buf's keys and values, reused per chunk
}

// entry is a visible version: its forward logical key and its value's body.
type entry struct{ fwd, body []byte }

func (st *stream) head() []byte { return st.buf[st.pos].fwd }

// streamHeap orders streams by their current entry.
type streamHeap []*stream

func (h streamHeap) Len() int           { return len(h) }
func (h streamHeap) Less(i, j int) bool { return bytes.Compare(h[i].head(), h[j].head()) < 0 }
func (h streamHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *streamHeap) Push(x any)        { *h = append(*h, x.(*stream)) }
func (h *streamHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// runReverse merges the runs of every listed subject.
func (q *query) runReverse() {
	var h streamHeap
	for _, sid := range q.sidsBy {
		base := append(append(append(append([]byte{tagReverse}, q.f.Subject.Type...), 0), sid...), 0)
		for _, p := range q.runs(base) {
			st := q.newStream(p)
			if q.refill(st); q.done {
				return
			}
			if len(st.buf) > 0 {
				h = append(h, st)
			}
		}
		if q.done {
			return
		}
	}
	heap.Init(&h)
	for len(h) > 0 && !q.done {
		st := h[0]
		e := st.buf[st.pos]
		fs, ok := parseLogical(e.fwd[1:])
		if !ok {
			q.fail(errCorrupt)
			return
		}
		q.emitBody(&fs, e.body)
		if st.pos++; st.pos == len(st.buf) {
			if q.refill(st); len(st.buf) == 0 {
				heap.Pop(&h)
				continue
			}
		}
		heap.Fix(&h, 0)
	}
}

// runs returns the prefixes of the runs under a subject's prefix that the filter's
// resource type and relation allow, skipping from one run to the next.
func (q *query) runs(subject []byte) [][]byte {
	rt, relation := q.f.ResourceType, q.f.Relation
	within := subject
	if rt != "" {
		within = append(append(bytes.Clone(subject), rt...), 0)
		if relation != "" {
			return [][]byte{append(within, append([]byte(relation), 0)...)}
		}
	}
	var out [][]byte
	seek := within
	for !q.done && q.it.SeekGE(seek) && bytes.HasPrefix(q.it.Key(), within) {
		if err := q.tick(); err != nil {
			q.fail(err)
			break
		}
		fs, _, ok := parseVersioned(q.it.Key())
		if !ok {
			q.fail(errCorrupt)
			break
		}
		ofType := append(append(bytes.Clone(subject), fs[fResType]...), 0)
		switch r := string(fs[fRelation]); {
		case relation != "" && r < relation:
			seek = append(append(ofType, relation...), 0)
		case relation != "" && r > relation:
			seek = append(ofType[:len(ofType)-1], 1) // the next resource type
		default:
			run := append(append(ofType, r...), 0)
			out = append(out, run)
			seek = append(bytes.Clone(run[:len(run)-1]), 1)
		}
	}
	if err := q.it.Error(); err != nil {
		q.fail(err)
	}
	return out
}

// tick counts a step and reports a cancelled context every ctxCheckSteps steps.
func (q *query) tick() error {
	if q.steps++; q.steps%ctxCheckSteps == 0 {
		return q.ctx.Err()
	}
	return nil
}

// newStream starts a run at its beginning, or at the cursor when the cursor falls
// inside the run's resource type.
func (q *query) newStream(prefix []byte) *stream {
	lo := append(bytes.Clone(prefix), q.f.ResourceIDPrefix...)
	st := &stream{hi: prefixEnd(lo), next: lo, chunk: firstChunk}
	if q.after == nil {
		return st
	}
	afs, ok := parseLogical(q.after[1:])
	if !ok {
		return st
	}
	switch c := bytes.Compare(runType(prefix), afs[fResType]); {
	case c < 0: // the whole run sorts before the cursor
		st.exhausted = true
	case c == 0:
		if at := append(append(bytes.Clone(prefix), afs[fResID]...), 0); bytes.Compare(at, lo) > 0 {
			st.next = at
		}
	}
	return st
}

// runType returns the resource type field of a run prefix.
func runType(prefix []byte) []byte {
	fs := bytes.SplitN(prefix[1:], []byte{0}, 4)
	if len(fs) < 3 {
		return nil
	}
	return fs[2]
}

// refill reads the stream's next chunk of visible, matching versions after the cursor.
func (q *query) refill(st *stream) {
	st.buf, st.pos, st.arena = st.buf[:0], 0, st.arena[:0]
	if st.exhausted {
		return
	}
	valid := q.it.SeekGE(st.next)
	for ; valid && !q.done; valid = q.it.Next() {
		k := q.it.Key()
		if st.hi != nil && bytes.Compare(k, st.hi) >= 0 {
			break
		}
		if len(st.buf) == st.chunk {
			// Resume after every version of the last relationship decided (this
			// chunk decided at least one, so q.last is this stream's).
			st.next = append(bytes.Clone(q.last), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
			st.chunk = min(st.chunk*2, maxChunk)
			return
		}
		fs, ok := q.candidate(k)
		if !ok || !q.match(&fs) {
			continue
		}
		v, err := q.it.ValueAndErr()
		if err != nil {
			q.fail(err)
			return
		}
		body, ok := q.visible(v)
		if !ok {
			continue
		}
		fwd := fieldPrefix(&fs, 6)
		if q.after != nil && bytes.Compare(fwd, q.after) <= 0 {
			continue
		}
		st.addEntry(fwd, body)
	}
	if err := q.it.Error(); err != nil {
		q.fail(err)
	}
	st.exhausted = true
}

// addEntry copies an entry into the stream's arena.
func (st *stream) addEntry(fwd, body []byte) {
	at := len(st.arena)
	st.arena = append(append(st.arena, fwd...), body...)
	st.buf = append(st.buf, entry{fwd: st.arena[at : at+len(fwd) : at+len(fwd)], body: st.arena[at+len(fwd) : len(st.arena) : len(st.arena)]})
}
