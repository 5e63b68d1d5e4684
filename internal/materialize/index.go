// Package materialize owns latch's Leopard-style index of nested sets: for the
// recursive subject-set relations of the schema (`group#member` admitting
// `group#member`), which subjects each set holds directly (Leopard's MEMBER2GROUP) and
// the transitive closure of sets within sets (its GROUP2GROUP, kept as each set's
// ancestors), built from the store at a revision and kept current from the store's
// change feed in revision order. Every value is a short chain of versions by revision,
// so a read at any revision the index has applied and still keeps sees exactly the
// state at that revision; a read it cannot answer exactly is left to evaluation.
// It answers the engine's question "is this subject in set T:id#rel" (engine.SetIndex,
// which the server adapts it to); the engine does not import it.
package materialize

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// Defaults of Config.
const (
	DefaultMaxBytes = 1 << 30
	DefaultRetain   = 10 * time.Second
	DefaultWait     = 20 * time.Millisecond
)

// DefaultCheckpointEvery is how often an idle store's watch reports by default that
// nothing changed, which lets the index serve revisions that changed nothing.
const DefaultCheckpointEvery = 2 * time.Millisecond

// Config configures an Index.
type Config struct {
	// Store is the datastore indexed; it must be a store.Watcher.
	Store store.Store
	// SchemaAt returns the compiled schema in force at a revision (nil when none).
	SchemaAt func(ctx context.Context, rev store.Revision) (*ir.Schema, error)
	// MaxBytes bounds the index's memory; past it, subjects' memberships and sets'
	// ancestors are dropped and reads of them are evaluated. The sets' own edges and
	// summaries are always held: when they alone pass it, the index turns itself off.
	MaxBytes int64
	// Budget, if not nil, is the bound instead of MaxBytes, shared with other indexes:
	// past it together, each drops what MaxBytes would have it drop, and the one whose
	// sets' edges and summaries no longer fit beside the others' turns itself off.
	Budget *Budget
	// Retain is how long a superseded revision stays readable through the index
	// (reads of older revisions are evaluated): at least the longest a server may go
	// on choosing a revision after it stops being the newest.
	Retain time.Duration
	// Wait bounds how long a read of a revision the index has not yet applied waits
	// for it before it is evaluated instead (negative: not at all). A store whose
	// change feed is pushed to the index as it commits needs only a moment; one whose
	// feed is polled would make reads wait for nothing.
	Wait time.Duration
	// CheckpointEvery is how often the store's watch, idle, reports its head, which
	// lets the index serve revisions that changed nothing (0: the default). A store
	// whose feed is polled is asked that often.
	CheckpointEvery time.Duration
	// Logger receives the build and rebuild lines.
	Logger *slog.Logger
}

// Index is the materialized index of one datastore. Run keeps it; View reads it.
type Index struct {
	cfg       Config
	cur       atomic.Pointer[state] // nil while (re)building
	off       atomic.Bool           // past its memory bound, the index turned itself off
	builds    atomic.Int64
	fallbacks atomic.Int64 // reads the index could not answer
	answers   atomic.Int64 // reads the index answered
}

// New returns an index that holds nothing until Run has built it.
func New(cfg Config) *Index {
	if cfg.Budget == nil {
		cfg.Budget = NewBudget(cfg.MaxBytes)
	}
	if cfg.Retain <= 0 {
		cfg.Retain = DefaultRetain
	}
	if cfg.Wait == 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = DefaultCheckpointEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Index{cfg: cfg}
}

// errBreaking ends a build's life: the schema changed what the index holds.
var errBreaking = errors.New("a schema change changed the indexed relations")

// Run builds the index and keeps it current until ctx ends. A breaking schema change
// rebuilds it at once, a failure after a pause; reads are evaluated meanwhile.
func (x *Index) Run(ctx context.Context) {
	w, ok := x.cfg.Store.(store.Watcher)
	if !ok {
		x.cfg.Logger.Warn("materialize: the datastore has no change feed; the index is off")
		return
	}
	for {
		err := x.follow(ctx, w)
		x.cur.Store(nil)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errBreaking) {
			x.cfg.Logger.Info("materialize: schema change; rebuilding the index")
			continue
		}
		if errors.Is(err, errTooBig) {
			x.cfg.Logger.Error("materialize: the index is off; raise its memory bound to turn it on", "err", err)
			x.off.Store(true)
			return
		}
		x.cfg.Logger.Warn("materialize: index stopped; rebuilding", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// follow builds the index at the head and applies the store's changes after it.
func (x *Index) follow(ctx context.Context, w store.Watcher) error {
	rev, err := x.cfg.Store.HeadRevision(ctx)
	if err != nil {
		return err
	}
	s, err := x.cfg.SchemaAt(ctx, rev)
	if err != nil {
		return err
	}
	p := planFor(s)
	st, err := x.build(ctx, p, rev)
	if err != nil {
		return err
	}
	defer st.release() // Run lets it go when this returns
	x.cur.Store(st)
	for ch, err := range w.Watch(ctx, rev, store.WatchOptions{CheckpointInterval: x.cfg.CheckpointEvery}) {
		if err != nil {
			return err
		}
		if ch.Checkpoint {
			if uint64(ch.Revision) > st.applied.Load() {
				st.publish(ch.Revision)
			}
			continue
		}
		if ch.SchemaChanged {
			s, err := x.cfg.SchemaAt(ctx, ch.Revision)
			if err != nil {
				return err
			}
			if planFor(s).sig != p.sig {
				return errBreaking
			}
		}
		if err := st.apply(ch); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// apply applies one committed revision.
func (st *state) apply(ch store.Change) error {
	for i := range ch.Updates {
		u := &ch.Updates[i]
		if st.plan.holds(u.Relationship.Resource.Type, u.Relationship.Relation) {
			st.change(&u.Relationship, u.Op == store.ChangeDelete)
		}
	}
	return st.finish(ch.Revision)
}

// build reads every relationship of the plan's relations at rev. The state it returns
// holds its budget until released.
func (x *Index) build(ctx context.Context, p *plan, rev store.Revision) (_ *state, err error) {
	start := time.Now()
	st := newState(p, rev, x.cfg.Budget, x.cfg.Retain)
	defer func() {
		if err != nil {
			st.release()
		}
	}()
	r, err := x.cfg.Store.Reader(ctx, rev)
	if err != nil {
		return nil, err
	}
	keys := make([]relKey, 0, len(p.rels)+len(p.chains))
	for k := range p.rels {
		keys = append(keys, k)
	}
	for k := range p.chains {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b relKey) int { return cmpKey(a, b) })
	edges := 0
	var ld loader
	batches, done := readBatches(ctx, r, keys)
	defer done()
	for b := range batches {
		if b.err != nil {
			return nil, b.err
		}
		st.mu.Lock()
		for i := range b.rels {
			st.loadLocked(&ld, &b.rels[i])
		}
		st.mu.Unlock()
		edges += len(b.rels)
		b.free()
	}
	if err := ctx.Err(); err != nil {
		// The reads stopped short without a word.
		return nil, err
	}
	st.place(&ld, rev)
	if err := st.finish(rev); err != nil {
		return nil, err
	}
	x.builds.Add(1)
	took := time.Since(start)
	if !p.empty() {
		x.cfg.Logger.Info("materialize: index built", "revision", rev, "relations", len(keys),
			"edges", edges, "nodes", st.names.len(), "entries", st.entries.Load(), "bytes", st.bytes.Load(),
			"took", took, "edges_per_second", int64(float64(edges)/max(took.Seconds(), 1e-9)))
	}
	return st, nil
}

// readBatch is how many relationships a build reads before it indexes them.
const readBatch = 4096

// batch is a run of relationships a build read, or the error that ended its reads;
// free gives its array back for the next.
type batch struct {
	rels []rel.Relationship
	err  error
	free func()
}

// readBatches reads every relationship of the relations keys at r, in a goroutine of
// its own so that reading the store and indexing what it read overlap, and sends them
// a batch at a time. done stops the reads and waits for them to end. The reads take
// the relationships in whatever order the store finds them (a build sorts what it
// gathers), which spares the store its sorts.
func readBatches(ctx context.Context, r store.Reader, keys []relKey) (<-chan batch, func()) {
	ctx, cancel := context.WithCancel(ctx)
	b := &batcher{ctx: ctx, out: make(chan batch, 2), spare: make(chan []rel.Relationship, 3)}
	go func() {
		defer close(b.out)
		b.buf = make([]rel.Relationship, 0, readBatch)
		for _, k := range keys {
			f := store.Filter{ResourceType: k.def, Relation: k.rel, IncludeExpired: true}
			if err := store.Each(ctx, r, f, store.QueryOptions{Unordered: true}, b); err != nil {
				b.send(batch{err: fmt.Errorf("reading %s#%s at revision %d: %w", k.def, k.rel, r.Revision(), err)})
				return
			}
			if b.stopped {
				return
			}
		}
		if len(b.buf) > 0 {
			b.full()
		}
	}()
	return b.out, func() {
		cancel()
		for range b.out {
		}
	}
}

// batcher gathers a build's reads into batches (a store.Visitor, which spares the
// closures of an iterator) and sends each when full.
type batcher struct {
	ctx     context.Context
	out     chan batch
	spare   chan []rel.Relationship // arrays given back, for the next batches
	buf     []rel.Relationship
	stopped bool // ctx ended: the reads stop
}

// Visit takes one relationship read, and sends the batch when it is full.
func (b *batcher) Visit(it store.Item) bool {
	b.buf = append(b.buf, it.Relationship)
	return len(b.buf) < readBatch || b.full()
}

// send sends x, or reports false when ctx ends first.
func (b *batcher) send(x batch) bool {
	select {
	case b.out <- x:
		return true
	case <-b.ctx.Done():
		b.stopped = true
		return false
	}
}

// full sends the batch gathered and starts the next in a spare array.
func (b *batcher) full() bool {
	rels := b.buf
	if !b.send(batch{rels: rels, free: func() {
		select {
		case b.spare <- rels[:0]:
		default:
		}
	}}) {
		return false
	}
	select {
	case b.buf = <-b.spare:
	default:
		b.buf = make([]rel.Relationship, 0, readBatch)
	}
	return true
}

func cmpKey(a, b relKey) int {
	if a.def != b.def {
		if a.def < b.def {
			return -1
		}
		return 1
	}
	switch {
	case a.rel < b.rel:
		return -1
	case a.rel > b.rel:
		return 1
	}
	return 0
}

// Indexes reports whether the index holds relation r.
func (x *Index) Indexes(r *ir.Relation) bool {
	st := x.cur.Load()
	return st != nil && st.plan.indexes(r.Def.Name, r.Name)
}

// View returns what the index knows of subject's sets at rev, or nil when it cannot
// answer there: it is building, rev is older than it keeps, or it has not reached rev
// within Config.Wait (or before ctx ends).
func (x *Index) View(ctx context.Context, rev store.Revision, subject rel.SubjectRef) func(r *ir.Relation, id string, depth int) (yes, known bool) {
	st := x.cur.Load()
	if st == nil || st.plan.empty() {
		return nil
	}
	if !x.readable(ctx, st, rev) {
		return nil
	}
	v := st.view(rev, subject)
	if v == nil {
		x.fallbacks.Add(1)
		return nil
	}
	v.fallbacks, v.answers = &x.fallbacks, &x.answers
	return v.member
}

// Sets returns the ids of the objects whose relation r holds subject at rev,
// directly or through nested sets, as a lookup's walk back would find them, each with
// the fewest set edges between it and a set holding the subject directly; or false
// when the index cannot say so exactly: when it cannot read rev (see View), when a
// caveated or expiring relationship of the indexed relations holds the subject or one
// of those sets at rev, or when any names a subject set the index does not hold (a
// walk back would cross it, the index cannot).
// The subject itself is not among them unless a cycle leads back to it.
func (x *Index) Sets(ctx context.Context, rev store.Revision, subject rel.SubjectRef, r *ir.Relation) (ids []string, hops []uint8, known bool) {
	st := x.cur.Load()
	if st == nil || !st.plan.indexes(r.Def.Name, r.Name) {
		return nil, nil, false
	}
	if !x.readable(ctx, st, rev) {
		return nil, nil, false
	}
	t, ok := st.tainted.at(rev)
	if !ok || t != nil && t.opaque {
		x.fallbacks.Add(1)
		return nil, nil, false
	}
	v := st.view(rev, subject)
	if v == nil || t.crossed(v.subjects[:v.nsubjects], v.reach) {
		x.fallbacks.Add(1)
		return nil, nil, false
	}
	in := idsIn{r: r, ends: make([]int, 0, len(v.reach))}
	hops = make([]uint8, 0, len(v.reach))
	st.mu.RLock()
	for _, e := range v.reach {
		if in.add(st.names.name(uint32(e >> 8))) {
			hops = append(hops, uint8(e))
		}
	}
	st.mu.RUnlock()
	x.answers.Add(1)
	return in.ids(), hops, true
}

// Descendants returns the ids of the sets of relation r nested in set r.Def:id#r at
// rev at any depth, as a lookup's reads of subject sets would reach them from it (each
// unconditional), in id order, with the set edges of the longest chain down from it
// and whether a cycle is reachable from it (a walk would follow it round until its
// depth limit); or false when the index cannot say so exactly: it cannot read rev
// (see View), a relationship on the set or below it is caveated, expiring or names
// a subject set the index does not hold, or it is a chain's set that reaches a cycle
// (evaluated: see clean). Only a
// relation whose subject sets are all of itself is asked, or a chain (plan), whose
// descendants on id are the objects its arrow reaches from id: the sets nested in it
// are all of it.
func (x *Index) Descendants(ctx context.Context, rev store.Revision, r *ir.Relation, id string) (ids []string, longest int, cyclic, known bool) {
	st := x.cur.Load()
	if st == nil || !st.plan.holds(r.Def.Name, r.Name) {
		return nil, 0, false, false
	}
	if !x.readable(ctx, st, rev) {
		return nil, 0, false, false
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	var name [64]byte
	root, n := st.lookup(setName(name[:0], r.Def.Name, id, r.Name))
	if n == nil {
		x.answers.Add(1)
		return nil, 0, false, true
	}
	if !st.clean(root, rev) {
		x.fallbacks.Add(1)
		return nil, 0, false, false
	}
	d := descent{st: st, rev: rev}
	d.sets, d.heights = d.setsArr[:0], d.heightsArr[:0]
	h, known := d.walk(root)
	if !known {
		x.fallbacks.Add(1)
		return nil, 0, false, false
	}
	if d.cyclic {
		x.answers.Add(1)
		return nil, 0, true, true
	}
	size := 0
	for _, c := range d.sets {
		size += len(st.names.name(c))
	}
	in := idsIn{r: r, buf: make([]byte, 0, size), ends: make([]int, 0, len(d.sets)-1)}
	for _, c := range d.sets {
		if c != root && !in.add(st.names.name(c)) {
			// A set of another relation: the index cannot say what the reads would.
			x.fallbacks.Add(1)
			return nil, 0, false, false
		}
	}
	ids = in.ids()
	rel.SortIDs(ids)
	x.answers.Add(1)
	return ids, int(h), false, true
}

// clean reports whether every relationship on set id or below it at rev is
// unconditional, so that the sets nested in it are all its descendants in the set
// graph: by its summary, or for a nested set that reaches a cycle (whose summary
// cannot tell), by no relationship of the nested-set relations being caveated or
// expiring (a chain's set that reaches a cycle is not said to be). The caller holds
// mu.
func (st *state) clean(id uint32, rev store.Revision) bool {
	sn := st.setOf(id)
	if sn == nil {
		return false
	}
	s, ok := sn.sum.at(rev)
	if !ok {
		return false
	}
	if s.height != inf {
		return s.taint == absent
	}
	if st.chainSet(id) {
		return false
	}
	t, ok := st.tainted.at(rev)
	return ok && t == nil
}

// descent is one walk down the set graph at a revision, under the state's read lock:
// the sets met, in the order met, each with its height (the edges of the longest chain
// down from it) once known, onPath while the walk is below it (a cycle leads back to
// such a set). A walk meets a few sets (a folder's ancestors), which a scan of sets
// finds faster than a map would; past descentScan of them a map indexes them.
type descent struct {
	st      *state
	rev     store.Revision
	sets    []uint32
	heights []int32
	at      map[uint32]int // by set: its place in sets, once there are many
	cyclic  bool
	// Storage for sets and heights while they are few, as they mostly are.
	setsArr    [8]uint32
	heightsArr [8]int32
}

// descentScan is how many sets a descent scans before it indexes them in a map.
const descentScan = 32

// height returns set id's entry, if the walk has met it.
func (d *descent) height(id uint32) (int32, bool) {
	if d.at != nil {
		i, ok := d.at[id]
		if !ok {
			return 0, false
		}
		return d.heights[i], true
	}
	if i := slices.Index(d.sets, id); i >= 0 {
		return d.heights[i], true
	}
	return 0, false
}

// meet records that the walk met set id (onPath).
func (d *descent) meet(id uint32) {
	d.sets, d.heights = append(d.sets, id), append(d.heights, onPath)
	switch {
	case d.at != nil:
		d.at[id] = len(d.sets) - 1
	case len(d.sets) > descentScan:
		d.at = make(map[uint32]int, 16*len(d.sets)) // a walk past a few dozen sets goes on
		for i, s := range d.sets {
			d.at[s] = i
		}
	}
}

// settle records set id's height, the walk below it done.
func (d *descent) settle(id uint32, h int32) {
	if d.at != nil {
		d.heights[d.at[id]] = h
		return
	}
	d.heights[slices.Index(d.sets, id)] = h
}

const onPath = -1

// walk returns the height of set id, or false when its children at the revision are
// no longer held. It stops at the first cycle, setting cyclic.
func (d *descent) walk(id uint32) (int32, bool) {
	if h, ok := d.height(id); ok {
		d.cyclic = h == onPath
		return h, true
	}
	sn := d.st.setOf(id)
	if sn == nil {
		return 0, false
	}
	cs, ok := sn.children.at(d.rev)
	if !ok {
		return 0, false
	}
	d.meet(id)
	h := int32(0)
	for _, c := range cs {
		ch, ok := d.walk(c)
		if !ok || d.cyclic {
			return 0, ok
		}
		h = max(h, ch+1)
	}
	d.settle(id, h)
	return h, true
}

// idsIn gathers the object ids of sets of one relation into one allocation.
type idsIn struct {
	r    *ir.Relation
	buf  []byte
	ends []int
}

// add adds the object id of set name ("type:id#relation") when it is a set of the
// relation, and reports whether it is.
func (in *idsIn) add(name []byte) bool {
	typ, rest, ok := bytes.Cut(name, []byte{':'})
	if !ok || string(typ) != in.r.Def.Name {
		return false
	}
	id, relation, ok := bytes.Cut(rest, []byte{'#'})
	if !ok || len(id) == 0 || string(relation) != in.r.Name {
		return false
	}
	in.buf = append(in.buf, id...)
	in.ends = append(in.ends, len(in.buf))
	return true
}

// ids returns the ids added, in order, sharing one string.
func (in *idsIn) ids() []string {
	all := string(in.buf)
	out := make([]string, len(in.ends))
	start := 0
	for i, end := range in.ends {
		out[i], start = all[start:end], end
	}
	return out
}

// readable reports whether st can be read at rev: it has applied rev, waiting at most
// Config.Wait for it, and still keeps it. A read it cannot serve counts as a fallback.
func (x *Index) readable(ctx context.Context, st *state, rev store.Revision) bool {
	if !st.reached(ctx, rev, x.cfg.Wait) || uint64(rev) < st.horizon.Load() {
		x.fallbacks.Add(1)
		return false
	}
	return true
}

// reached waits, at most wait, for the index to have applied rev.
func (st *state) reached(ctx context.Context, rev store.Revision, wait time.Duration) bool {
	if st.applied.Load() >= uint64(rev) {
		return true
	}
	if wait < 0 {
		return false
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		st.wakeMu.Lock()
		w := st.wake
		st.wakeMu.Unlock()
		if st.applied.Load() >= uint64(rev) {
			return true
		}
		select {
		case <-w:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// view answers for one subject at one revision. It is not safe for concurrent use.
type view struct {
	st  *state
	rev store.Revision
	// reach holds each set holding the subject, directly or through nested sets, with
	// the fewest hops from it to a set holding the subject directly (set<<8 | hops), in
	// order: sorted, a few dozen entries cost less than a map's.
	reach []uint64
	// subjects are the subject's node and its type's wildcard's, those the index has.
	subjects           [2]uint32
	nsubjects          int
	buf                []byte
	fallbacks, answers *atomic.Int64
	// Storage for buf and reach while they are small: a view is allocated anyway,
	// and most subjects are in a few sets with a few ancestors each.
	bufArr   [48]byte
	reachArr [16]uint64
}

// view gathers subject's sets at rev: the sets holding it or its type's wildcard
// directly, and their ancestors. Nil when a slot it needs was dropped or pruned.
func (st *state) view(rev store.Revision, subject rel.SubjectRef) *view {
	v := &view{st: st, rev: rev}
	v.buf, v.reach = v.bufArr[:0], v.reachArr[:0]
	st.mu.RLock()
	defer st.mu.RUnlock()
	for i := range 2 {
		if i == 0 {
			v.buf = setName(v.buf[:0], subject.Object.Type, subject.Object.ID, subject.Relation)
		} else {
			v.buf = setName(v.buf[:0], subject.Object.Type, rel.Wildcard, "")
		}
		id, n := st.lookup(v.buf)
		if n == nil {
			continue
		}
		v.subjects[v.nsubjects] = id
		v.nsubjects++
		ps, ok := n.parents.at(rev)
		if !ok {
			return nil
		}
		for _, g := range ps {
			sn := st.setOf(g)
			if sn == nil {
				return nil
			}
			anc, ok := sn.anc.at(rev)
			if !ok {
				return nil
			}
			// An ancestor's entry is its set and its hops from g, as reach's are.
			v.reach = append(append(v.reach, uint64(g)<<8), anc...)
		}
	}
	// Sorted, a set's fewest hops come first: keep those.
	slices.Sort(v.reach)
	v.reach = slices.CompactFunc(v.reach, func(a, b uint64) bool { return a>>8 == b>>8 })
	return v
}

// find returns the fewest hops from set to a set holding the subject directly, or
// false when set does not hold it.
func (v *view) find(set uint32) (uint8, bool) {
	i, _ := slices.BinarySearch(v.reach, uint64(set)<<8)
	if i < len(v.reach) && uint32(v.reach[i]>>8) == set {
		return uint8(v.reach[i]), true
	}
	return 0, false
}

// member answers whether the subject is in relation r of the object id, reached with
// depth hops left (depth > 0), as evaluation would answer: known is false when the
// index cannot say. It says yes when the subject is reached from the set within depth
// hops through unconditional relationships, and no set below it holds a caveated
// relationship (whose evaluation could fail); no when moreover nothing below the set
// is caveated or expiring and no chain below it is depth hops long, so that
// evaluation would reach every set below and find the subject in none.
func (v *view) member(r *ir.Relation, id string, depth int) (yes, known bool) {
	st := v.st
	if !st.plan.indexes(r.Def.Name, r.Name) {
		return false, false
	}
	v.buf = setName(v.buf[:0], r.Def.Name, id, r.Name)
	st.mu.RLock()
	nid, n := st.lookup(v.buf)
	var sn *setSlots
	if n != nil {
		sn = st.setOf(nid)
	}
	st.mu.RUnlock()
	if n == nil {
		// No relationship has ever named the set: it holds nothing.
		v.answers.Add(1)
		return false, true
	}
	if sn == nil {
		v.fallbacks.Add(1)
		return false, false
	}
	s, ok := sn.sum.at(v.rev)
	if !ok || s.height == inf || s.taint == conditional {
		v.fallbacks.Add(1)
		return false, false
	}
	if d, in := v.find(nid); in && int(d) < depth {
		v.answers.Add(1)
		return true, true
	} else if in || s.taint != absent || int(s.height) >= depth {
		v.fallbacks.Add(1)
		return false, false
	}
	v.answers.Add(1)
	return false, true
}

// Stats describes the index.
type Stats struct {
	// Ready: the index is built and following the store. Off: it turned itself off,
	// the sets' edges alone passing its memory bound.
	Ready, Off bool
	// Applied is the newest revision applied; Horizon the oldest still read.
	Applied, Horizon store.Revision
	// Entries counts (subject, set) and (set, ancestor) entries; Bytes the memory held.
	Entries, Bytes int64
	// Builds counts builds; Answers the reads the index answered and Fallbacks those
	// it left to evaluation.
	Builds, Answers, Fallbacks int64
}

// Stats returns the index's figures now.
func (x *Index) Stats() Stats {
	out := Stats{Off: x.off.Load(), Builds: x.builds.Load(), Answers: x.answers.Load(), Fallbacks: x.fallbacks.Load()}
	if st := x.cur.Load(); st != nil {
		out.Ready = true
		out.Applied, out.Horizon = store.Revision(st.applied.Load()), store.Revision(st.horizon.Load())
		out.Entries, out.Bytes = st.entries.Load(), st.bytes.Load()
	}
	return out
}
