package materialize

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// summary is what a set's descendants say about the answers it can give: height, the
// longest chain of set edges below it (inf: a cycle is reachable), and taint, the worst
// class of relationship on it or below it: absent when all are unconditional (members),
// expiring or conditional otherwise.
type summary struct {
	height uint8
	taint  class
}

// inf is the height of a set that reaches a cycle.
const inf = 255

const (
	chunkBits = 12
	chunkSize = 1 << chunkBits
)

// node is one name of the index: a set (`group:eng#member`) or a subject (`user:u`,
// `user:*`), or both (a set is a subject of the sets holding it). What only a set has
// is in a setSlots of its own, so that a subject, most names, costs a third as much.
type node struct {
	// parents are the sets holding the node through an unconditional relationship:
	// Leopard's MEMBER2GROUP for a subject, and the set graph's edges for a set.
	parents chain[[]uint32]
	// set is 1 + the index of a set's setSlots, 0 for a name that is not a set.
	// Written before a reader can find the node (under the state's lock).
	set uint32
	// dropped (writer only): past the memory bound, the node's droppable slot (a
	// subject's parents, a set's ancestors) is no longer held; reads of it fall back.
	dropped bool
}

// isSet reports whether the node is a set.
func (n *node) isSet() bool { return n.set != 0 }

// setSlots is what a set has beyond a node.
type setSlots struct {
	// anc are a set's ancestors through unconditional set edges, each packed as
	// set<<8 | the fewest hops from it (capped at 255), sorted by set.
	anc chain[[]uint64]
	sum chain[summary]
	// children are the sets this set holds through an unconditional relationship,
	// sorted: the set graph's edges downwards.
	children chain[[]uint32]

	// Writer only.
	cond, exp int32 // its conditional and expiring relationships
}

// selfTaint is the worst class of the set's own relationships, absent when they are
// all unconditional.
func (n *setSlots) selfTaint() class {
	switch {
	case n.cond > 0:
		return conditional
	case n.exp > 0:
		return expiring
	}
	return absent
}

// pair is one relationship of an indexed relation: the set and its subject.
type pair struct{ set, subject uint32 }

// delta is what a revision changes in a node's parents and children.
type delta struct {
	addParents, delParents   []uint32
	addChildren, delChildren []uint32
}

// slotKind names a chain of a node, for the prune queue.
type slotKind uint8

const (
	slotParents slotKind = iota
	slotAnc
	slotSum
	slotChildren
)

type pruneItem struct {
	rev  store.Revision
	id   uint32
	slot slotKind
}

type revAt struct {
	rev store.Revision
	at  time.Time
}

// state is one build of the index, for one plan, and what it has applied since.
// One writer (the goroutine following the store) changes it; readers read at
// revisions it has published.
type state struct {
	plan   *plan
	from   store.Revision
	budget *Budget // bounds bytes, with the other indexes' that draw on it
	retain time.Duration

	applied atomic.Uint64 // the newest revision wholly applied
	horizon atomic.Uint64 // the oldest revision reads may ask for

	mu        sync.RWMutex // guards names, chunks and setChunks (the writer changes them under it)
	names     names
	chunks    [][]node
	setChunks [][]setSlots
	nsets     uint32 // the setNodes in setChunks

	bytes   atomic.Int64 // the memory the index holds (add changes it)
	entries atomic.Int64 // (subject, set) and (set, ancestor) entries held
	// tainted says which walks back through the nested-set relations (the chains
	// aside, whose sets hold none of theirs) cross a conditional or expiring
	// relationship: a subject's sets are exactly its parents and their ancestors,
	// which a lookup can take whole, unless the subject or one of them is below one.
	// Nil when no relationship is conditional or expiring.
	tainted chain[*taint]

	wakeMu sync.Mutex
	wake   chan struct{} // guarded by wakeMu; closed and replaced when applied advances

	// Writer only.
	conds map[pair]class // the conditional and expiring relationships
	// condSubjects counts, by subject, the conds of the nested-set relations (the
	// chains aside); opaqueConds those of them whose subject is a subject set the index
	// does not hold; taintMoved says either changed in this revision.
	condSubjects map[uint32]int32
	opaqueConds  int
	taintMoved   bool
	pending      map[uint32]*delta
	downs        []uint32 // sets whose ancestors may have changed this revision
	ups          []uint32 // sets whose summaries may have changed this revision
	queue        []pruneItem
	published    []revAt
	buf          []byte
	scratch      scratch
	// scratchBytes is what scratch held when last counted in bytes.
	scratchBytes int64
	// droppable is the part of bytes the memory bound may drop (grow).
	droppable int64
	// droppedParents and droppedAnc are the state's tombstones, each the head of
	// every chain of its kind the state dropped (chain.drop): unknown from its first
	// revision, without older versions, never changed, and counted in no chain's
	// bytes (a dropped slot is never pushed to or walked again).
	droppedParents *version[[]uint32]
	droppedAnc     *version[[]uint64]
}

// keptPending bounds the nodes a revision may have changed and its map of changes
// still be reused by the next.
const keptPending = 4096

// condBytes is what one conditional or expiring relationship costs in the state's
// maps of them (a key, a class and the map's share of slots and control bytes; and at
// most an entry of condSubjects, a key and a count).
const condBytes = 36

// scratch is the writer's working memory for walks over the set graph, stamped with
// an epoch so that it needs no clearing.
type scratch struct {
	epoch  uint32
	mark   []uint32
	state  []uint8
	tmp    []summary
	queue  []uint32
	queueD []uint8
}

func newState(p *plan, from store.Revision, budget *Budget, retain time.Duration) *state {
	st := &state{
		plan: p, from: from, budget: budget, retain: retain,
		names: newNames(), wake: make(chan struct{}),
		conds: map[pair]class{}, condSubjects: map[uint32]int32{}, pending: map[uint32]*delta{},
		droppedParents: &version[[]uint32]{rev: from, unknown: true},
		droppedAnc:     &version[[]uint64]{rev: from, unknown: true},
	}
	st.applied.Store(uint64(from))
	st.horizon.Store(uint64(from))
	st.add(st.names.bytes())
	return st
}

// add counts delta more bytes held, in the state and in its budget.
func (st *state) add(delta int64) {
	st.bytes.Add(delta)
	st.budget.used.Add(delta)
}

// release gives what the state holds back to its budget, when it is let go.
func (st *state) release() { st.add(-st.bytes.Load()) }

// fits reports whether the budget holds delta bytes more.
func (st *state) fits(delta int64) bool { return st.budget.used.Load()+delta <= st.budget.max }

// node returns node id. Readers call it under mu.
func (st *state) node(id uint32) *node { return &st.chunks[id>>chunkBits][id&(chunkSize-1)] }

// setOf returns set id's setSlots, nil when id is not a set. Readers call it under mu.
func (st *state) setOf(id uint32) *setSlots {
	i := st.node(id).set
	if i == 0 {
		return nil
	}
	i--
	return &st.setChunks[i>>chunkBits][i&(chunkSize-1)]
}

// lookup returns the node named name, or nil. Readers call it under mu.
func (st *state) lookup(name []byte) (uint32, *node) {
	id, ok := st.names.lookup(name)
	if !ok {
		return 0, nil
	}
	return id, st.node(id)
}

// intern returns the id of name, adding a node (a set when set) when it is new.
func (st *state) intern(name []byte, set bool) uint32 {
	id, hash, ok := st.names.find(name)
	if ok {
		return id
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.addLocked(name, hash, set)
}

// internLocked is intern for a caller holding mu.
func (st *state) internLocked(name []byte, set bool) uint32 {
	id, hash, ok := st.names.find(name)
	if ok {
		return id
	}
	return st.addLocked(name, hash, set)
}

// addLocked adds a node named name, of hash hash, which the names do not hold.
func (st *state) addLocked(name []byte, hash uint64, set bool) uint32 {
	id, grown := st.names.add(name, hash)
	if int(id>>chunkBits) >= len(st.chunks) {
		st.chunks = append(st.chunks, make([]node, chunkSize))
		grown += sizeClass(int64(unsafe.Sizeof(node{})) * chunkSize)
	}
	if set {
		if int(st.nsets>>chunkBits) >= len(st.setChunks) {
			st.setChunks = append(st.setChunks, make([]setSlots, chunkSize))
			grown += sizeClass(int64(unsafe.Sizeof(setSlots{})) * chunkSize)
		}
		st.nsets++
		st.node(id).set = st.nsets
	}
	if grown != 0 {
		st.add(grown)
	}
	return id
}

// change applies one relationship of an indexed relation: written (touched), or
// deleted when del. A revision names each relationship at most once, so the state
// before the revision says what the relationship was.
func (st *state) change(x *rel.Relationship, del bool) {
	c, isSet := st.plan.classify(x)
	if del {
		c = absent
	}
	st.buf = setName(st.buf[:0], x.Resource.Type, x.Resource.ID, x.Relation)
	p := st.intern(st.buf, true)
	st.buf = st.plan.subjectName(st.buf[:0], x)
	k := pair{p, st.intern(st.buf, isSet)}
	old, ok := st.conds[k]
	if !ok && st.holds(k) {
		old = member
	}
	if old == c {
		return
	}
	st.account(k, isSet, old, -1)
	st.account(k, isSet, c, +1)
}

// loader is what a build gathers before it places the unconditional relationships
// at once: each subject's sets, sorted once, instead of merged in one at a time.
type loader struct {
	parents  []uint64 // subject<<32 | set
	children []uint64 // set<<32 | subject set
	// res#relation is the set of the relationship loaded last (when named), set its id.
	res      rel.ObjectRef
	relation string
	set      uint32
	named    bool
}

// loadLocked adds relationship x of an indexed relation to a state being built, which
// holds nothing of it yet: a conditional or expiring one at once, an unconditional one
// in ld until place. The caller holds mu, once for many (no reader can wait on it yet:
// the state is not published).
func (st *state) loadLocked(ld *loader, x *rel.Relationship) {
	c, isSet := st.plan.classify(x)
	if !ld.named || x.Resource != ld.res || x.Relation != ld.relation {
		// A set's relationships come one after another: its name is looked up once.
		st.buf = setName(st.buf[:0], x.Resource.Type, x.Resource.ID, x.Relation)
		ld.set, ld.named = st.internLocked(st.buf, true), true
		ld.res, ld.relation = x.Resource, x.Relation
	}
	st.buf = st.plan.subjectName(st.buf[:0], x)
	k := pair{ld.set, st.internLocked(st.buf, isSet)}
	if c != member {
		st.account(k, isSet, c, +1)
		return
	}
	ld.parents = append(ld.parents, uint64(k.subject)<<32|uint64(k.set))
	if isSet {
		ld.children = append(ld.children, uint64(k.set)<<32|uint64(k.subject))
	}
}

// place writes the subjects' parents and the sets' children ld gathered, from rev,
// and marks the sets whose ancestors and summaries finish computes.
func (st *state) place(ld *loader, rev store.Revision) {
	runs := func(pairs []uint64, each func(key uint32, vals []uint32)) {
		slices.Sort(pairs)
		for i := 0; i < len(pairs); {
			key := uint32(pairs[i] >> 32)
			j := i
			for j < len(pairs) && uint32(pairs[j]>>32) == key {
				j++
			}
			vals := make([]uint32, j-i)
			for k := range vals {
				vals[k] = uint32(pairs[i+k])
			}
			each(key, vals)
			i = j
		}
	}
	runs(ld.parents, func(id uint32, sets []uint32) { st.pushParents(id, st.node(id), sets, rev) })
	runs(ld.children, func(id uint32, children []uint32) {
		st.pushChildren(id, st.setOf(id), children, rev)
		st.ups = append(st.ups, id)
		st.downs = append(st.downs, children...)
	})
}

// holds reports whether k's subject has k's set among its parents (before this
// revision). A dropped subject is taken to, which makes removing it a no-op.
func (st *state) holds(k pair) bool {
	ps, ok := st.node(k.subject).parents.current()
	if !ok {
		return true
	}
	_, found := slices.BinarySearch(ps, k.set)
	return found
}

// account adds (sign +1) or removes (-1) relationship k of class c.
func (st *state) account(k pair, isSet bool, c class, sign int32) {
	p := st.setOf(k.set)
	switch c {
	case absent:
		return
	case member:
		d := st.delta(k.subject)
		if sign > 0 {
			d.addParents = append(d.addParents, k.set)
		} else {
			d.delParents = append(d.delParents, k.set)
		}
		if isSet {
			dp := st.delta(k.set)
			if sign > 0 {
				dp.addChildren = append(dp.addChildren, k.subject)
			} else {
				dp.delChildren = append(dp.delChildren, k.subject)
			}
			st.ups = append(st.ups, k.set)
			st.downs = append(st.downs, k.subject)
		}
		return
	case conditional:
		p.cond += sign
	case expiring:
		p.exp += sign
	}
	st.ups = append(st.ups, k.set)
	if !st.chainSet(k.set) {
		st.countCond(k.subject, sign)
	}
	if sign > 0 {
		st.conds[k] = c
		st.add(condBytes)
	} else {
		delete(st.conds, k)
		st.add(-condBytes)
	}
}

// countCond counts a cond of the nested-set relations whose subject is node subject,
// in or out (sign).
func (st *state) countCond(subject uint32, sign int32) {
	n := st.condSubjects[subject] + sign
	if n == 0 {
		delete(st.condSubjects, subject)
	} else {
		st.condSubjects[subject] = n
	}
	if n == 0 || n == sign {
		st.taintMoved = true
	}
	if bytes.IndexByte(st.names.name(subject), '#') >= 0 && st.setOf(subject) == nil {
		// A subject set the index does not hold: walks back reach it unseen.
		st.opaqueConds += int(sign)
		st.taintMoved = true
	}
}

// taint is what walks back through the nested-set relations cross: with opaque, a
// relationship to a subject set the index does not hold, which any may cross; else
// a conditional or expiring relationship from each of subjects (sorted), which a walk
// from a subject reaching one of them crosses.
type taint struct {
	opaque   bool
	subjects []uint32
}

// maxTaintSubjects bounds the subjects a taint lists; past it, it is opaque.
const maxTaintSubjects = 4096

// crossed reports whether a walk back from subjects (the subject and its wildcard) or
// through the sets of reach (view's) crosses a relationship of t.
func (t *taint) crossed(subjects []uint32, reach []uint64) bool {
	if t == nil {
		return false
	}
	if t.opaque {
		return true
	}
	for _, s := range subjects {
		if _, in := slices.BinarySearch(t.subjects, s); in {
			return true
		}
	}
	for _, e := range reach {
		if _, in := slices.BinarySearch(t.subjects, uint32(e>>8)); in {
			return true
		}
	}
	return false
}

func taintBytes(t *taint) int64 {
	if t == nil {
		return 0
	}
	return sizeClass(int64(unsafe.Sizeof(*t))) + noscanBytes(4*int64(cap(t.subjects)))
}

// chainSet reports whether set id is a chain's (plan). The caller is the writer, or
// holds mu.
func (st *state) chainSet(id uint32) bool {
	typ, rest, _ := bytes.Cut(st.names.name(id), []byte{':'})
	i := bytes.LastIndexByte(rest, '#')
	return i >= 0 && st.plan.chains[relKey{string(typ), string(rest[i+1:])}]
}

func (st *state) delta(id uint32) *delta {
	d := st.pending[id]
	if d == nil {
		d = &delta{}
		st.pending[id] = d
	}
	return d
}

// errTooBig: what the index cannot drop passes its memory bound.
var errTooBig = errors.New("the nested sets alone (their edges and summaries) need more memory than the index may hold")

// finish completes revision rev: it writes the new parents and children, recomputes
// the ancestors and summaries the revision may have changed, and publishes rev. It
// fails with errTooBig, publishing nothing, when what it cannot drop passes the bound.
func (st *state) finish(rev store.Revision) error {
	for id, d := range st.pending {
		n := st.node(id)
		if len(d.addParents)+len(d.delParents) > 0 && (n.isSet() || !n.dropped) {
			cur, _ := n.parents.current()
			st.pushParents(id, n, merge(cur, d.addParents, d.delParents), rev)
		}
		if len(d.addChildren)+len(d.delChildren) > 0 {
			sn := st.setOf(id)
			cur, _ := sn.children.current()
			st.pushChildren(id, sn, merge(cur, d.addChildren, d.delChildren), rev)
		}
	}
	if len(st.pending) > keptPending {
		// A map keeps its size when cleared: a build's would stay behind.
		st.pending = map[uint32]*delta{}
	} else {
		clear(st.pending)
	}
	st.updateAncestors(st.closure(st.downs, true), rev)
	st.summarize(st.closure(st.ups, false), rev)
	st.downs, st.ups = nil, nil
	if st.taintMoved {
		var t *taint
		switch {
		case st.opaqueConds > 0 || len(st.condSubjects) > maxTaintSubjects:
			t = &taint{opaque: true}
		case len(st.condSubjects) > 0:
			t = &taint{subjects: slices.Sorted(maps.Keys(st.condSubjects))}
		}
		delta, _ := st.tainted.push(rev, t, false, taintBytes)
		st.add(delta)
		st.taintMoved = false
	}
	sb := st.scratch.bytes()
	st.add(sb - st.scratchBytes)
	st.scratchBytes = sb
	st.shed(rev)
	if held := st.budget.used.Load() - st.droppable; held > st.budget.max {
		return fmt.Errorf("%w: %d bytes, bound %d", errTooBig, held, st.budget.max)
	}
	st.publish(rev)
	return nil
}

// pushParents makes ps node id's parents from rev, or drops them past the memory bound
// (a set's are the graph itself and are always held).
func (st *state) pushParents(id uint32, n *node, ps []uint32, rev store.Revision) {
	cur, _ := n.parents.current()
	if !n.isSet() && !st.fits(ids32Bytes(ps)) {
		st.entries.Add(-int64(len(cur)))
		st.drop(id, n)
		return
	}
	st.entries.Add(int64(len(ps) - len(cur)))
	delta, superseded := n.parents.push(rev, ps, false, ids32Bytes)
	st.grow(delta, !n.isSet())
	if superseded {
		st.queue = append(st.queue, pruneItem{rev, id, slotParents})
	}
}

// pushChildren makes cs set id's children from rev.
func (st *state) pushChildren(id uint32, n *setSlots, cs []uint32, rev store.Revision) {
	delta, superseded := n.children.push(rev, cs, false, ids32Bytes)
	st.add(delta)
	if superseded {
		st.queue = append(st.queue, pruneItem{rev, id, slotChildren})
	}
}

// grow counts delta more bytes held; droppable says they are a subject's parents or
// a set's ancestors, which the memory bound may drop.
func (st *state) grow(delta int64, droppable bool) {
	st.add(delta)
	if droppable {
		st.droppable += delta
	}
}

// shed drops droppable slots when the budget holds more than it bounds: a build's
// revision passes it by the sets' summaries and the scratch it counts after it placed
// members and ancestors while they fitted, a later one by the sets, summaries and
// conditions it adds. Subjects' parents go first, the largest first (a subject's reads
// alone then evaluate, where a set's ancestors serve every subject below it), then
// sets' ancestors. A build sheds down to the bound; a later revision a 64th of it
// further, so that the revisions after it do not each walk every node again. Each
// drop frees all its slot held (chain.drop).
func (st *state) shed(rev store.Revision) {
	if st.budget.used.Load() <= st.budget.max {
		return
	}
	target := st.budget.max
	if rev != st.from {
		target -= st.budget.max / 64
	}
	type slot struct {
		id   uint32
		set  bool
		held int // entries; within a kind, more entries take more bytes
	}
	var slots []slot
	for id := range uint32(st.names.len()) {
		n := st.node(id)
		switch {
		case n.dropped:
		case n.isSet():
			anc, _ := st.setOf(id).anc.current()
			slots = append(slots, slot{id, true, len(anc)})
		default:
			ps, _ := n.parents.current()
			slots = append(slots, slot{id, false, len(ps)})
		}
	}
	slices.SortFunc(slots, func(a, b slot) int {
		if a.set != b.set {
			if a.set {
				return 1
			}
			return -1
		}
		return cmp.Compare(b.held, a.held)
	})
	for _, sl := range slots {
		if st.budget.used.Load() <= target {
			return
		}
		st.entries.Add(-int64(sl.held))
		st.drop(sl.id, st.node(sl.id))
	}
}

// drop stops holding node id's droppable slot, at every revision.
func (st *state) drop(id uint32, n *node) {
	n.dropped = true
	if n.isSet() {
		st.grow(st.setOf(id).anc.drop(st.droppedAnc, ids64Bytes), true)
	} else {
		st.grow(n.parents.drop(st.droppedParents, ids32Bytes), true)
	}
}

// closure returns the sets reachable from start (down: through children; up: through
// parents), start included, each once.
func (st *state) closure(start []uint32, down bool) []uint32 {
	if len(start) == 0 {
		return nil
	}
	sc := st.begin()
	var out []uint32
	for _, id := range start {
		if sc.mark[id] != sc.epoch {
			sc.mark[id] = sc.epoch
			out = append(out, id)
		}
	}
	for i := 0; i < len(out); i++ {
		var next []uint32
		if down {
			next, _ = st.setOf(out[i]).children.current()
		} else {
			next, _ = st.node(out[i]).parents.current()
		}
		for _, c := range next {
			if sc.mark[c] != sc.epoch {
				sc.mark[c] = sc.epoch
				out = append(out, c)
			}
		}
	}
	return out
}

// summarize recomputes the summaries of the sets in region (closed upwards: every
// set above one of them is in it) and pushes those that changed.
func (st *state) summarize(region []uint32, rev store.Revision) {
	if len(region) == 0 {
		return
	}
	sc := st.begin()
	for _, id := range region {
		sc.mark[id], sc.state[id] = sc.epoch, 0
	}
	const onStack, done = 1, 2
	var visit func(id uint32) summary
	visit = func(id uint32) summary {
		n := st.setOf(id)
		if sc.mark[id] != sc.epoch {
			s, _ := n.sum.current()
			return s
		}
		switch sc.state[id] {
		case onStack:
			return summary{height: inf}
		case done:
			return sc.tmp[id]
		}
		sc.state[id] = onStack
		s := summary{taint: n.selfTaint()}
		children, _ := n.children.current()
		for _, c := range children {
			cs := visit(c)
			h := cs.height
			if h < inf-1 {
				h++
			} else {
				h = inf
			}
			s.height, s.taint = max(s.height, h), max(s.taint, cs.taint)
		}
		if s.height == inf {
			// A set reaching a cycle is evaluated whatever its taint, which a walk
			// that meets the cycle half-way round would not know whole: say so.
			s.taint = conditional
		}
		sc.state[id], sc.tmp[id] = done, s
		return s
	}
	for _, id := range region {
		s := visit(id)
		n := st.setOf(id)
		if cur, _ := n.sum.current(); cur == s {
			continue
		}
		delta, superseded := n.sum.push(rev, s, false, summaryBytes)
		st.add(delta)
		if superseded {
			st.queue = append(st.queue, pruneItem{rev, id, slotSum})
		}
	}
}

// begin starts a walk: a new epoch, and scratch as long as the nodes.
func (st *state) begin() *scratch {
	sc := &st.scratch
	if n := st.names.len(); len(sc.mark) < n {
		grown := max(n, 2*len(sc.mark))
		sc.mark = make([]uint32, grown)
		sc.state = make([]uint8, grown)
		sc.tmp = make([]summary, grown)
		sc.epoch = 0
	}
	sc.epoch++
	return sc
}

func (sc *scratch) bytes() int64 {
	return sizeClass(int64(cap(sc.mark))*4) + sizeClass(int64(cap(sc.state))) + sizeClass(int64(cap(sc.tmp))*2) +
		sizeClass(int64(cap(sc.queue))*4) + sizeClass(int64(cap(sc.queueD)))
}

// publish makes rev readable, moves the horizon (the oldest revision still served)
// and prunes what no read at or past it needs.
func (st *state) publish(rev store.Revision) {
	now := time.Now()
	st.published = append(st.published, revAt{rev, now})
	i := 0
	for i+1 < len(st.published) && now.Sub(st.published[i+1].at) >= st.retain {
		i++
	}
	st.published = st.published[i:]
	horizon := max(st.published[0].rev, st.from)
	st.horizon.Store(uint64(horizon))
	st.prune(horizon)
	st.applied.Store(uint64(rev))
	st.wakeMu.Lock()
	close(st.wake)
	st.wake = make(chan struct{})
	st.wakeMu.Unlock()
}

// prune cuts the versions of slots superseded at or below horizon.
func (st *state) prune(horizon store.Revision) {
	i := 0
	for ; i < len(st.queue) && st.queue[i].rev <= horizon; i++ {
		it := st.queue[i]
		if it.slot == slotParents {
			n := st.node(it.id)
			st.grow(-n.parents.prune(horizon, ids32Bytes), !n.isSet())
			continue
		}
		sn := st.setOf(it.id)
		switch it.slot {
		case slotAnc:
			st.grow(-sn.anc.prune(horizon, ids64Bytes), true)
		case slotChildren:
			st.add(-sn.children.prune(horizon, ids32Bytes))
		default:
			st.add(-sn.sum.prune(horizon, summaryBytes))
		}
	}
	st.queue = append(st.queue[:0], st.queue[i:]...)
	st.add(-st.tainted.prune(horizon, taintBytes))
}

// merge returns the sorted union of cur and add less del, in a new slice (cur is a
// published version and never changes). add and del are sorted in place.
func merge(cur, add, del []uint32) []uint32 {
	slices.Sort(add)
	slices.Sort(del)
	out := make([]uint32, 0, len(cur)+len(add))
	i, j := 0, 0
	for i < len(cur) || j < len(add) {
		var x uint32
		switch {
		case j == len(add) || (i < len(cur) && cur[i] < add[j]):
			x = cur[i]
			i++
		case i == len(cur) || add[j] < cur[i]:
			x = add[j]
			j++
		default:
			x = cur[i]
			i, j = i+1, j+1
		}
		if _, found := slices.BinarySearch(del, x); !found {
			out = append(out, x)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
