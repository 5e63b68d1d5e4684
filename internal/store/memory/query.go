package memory

import (
	"context"
	"iter"
	"slices"
	"strings"
	"sync"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

const (
	// batchItems is how many results a query gathers under one hold of the read lock
	// before it lets go and yields them; the lock is never held while the caller runs.
	batchItems = 256
	// batchGroups bounds the index lookups made under one hold of the read lock, so
	// a scan that finds little does not keep writers waiting.
	batchGroups = 1024
)

// Query yields the relationships matching f at the reader's revision, in key order.
func (r *reader) Query(ctx context.Context, f store.Filter, opts store.QueryOptions) iter.Seq2[store.Item, error] {
	return store.Iterate(ctx, r, f, opts)
}

// QueryEach hands the relationships matching f at the reader's revision to v, in key
// order.
func (r *reader) QueryEach(ctx context.Context, f store.Filter, opts store.QueryOptions, v store.Visitor) error {
	q := queryPool.Get().(*query)
	defer q.free()
	if err := q.start(ctx, r.s, r.rev, f, opts); err != nil {
		return err
	}
	return q.run(ctx, v)
}

// queryPool recycles queries: a check makes several small ones, and a query is larger
// than most of what they return.
var queryPool = sync.Pool{New: func() any { return new(query) }}

// query is one Query call: its filter resolved to symbols and the plan that walks the
// indexes. Symbol slices named *ByStr are sorted by string (key order); those named
// *Set are sorted by symbol, for membership tests.
type query struct {
	s     *Store
	rev   uint64
	now   int64 // the clock (unix ns), read at the first record that expires; 0 before
	f     store.Filter
	limit int
	// unordered: the caller takes the matches in any order, so groups and reverse
	// walks hand them over unsorted.
	unordered bool
	codec     store.LazyCursorCodec
	after     *rel.Key // resume strictly after this key; nil once passed

	planned   bool  // the filter is resolved and the plan chosen (at the first batch)
	empty     bool  // the filter names a string never stored: nothing matches
	types     []sym // resource types to visit, by string
	ridsByStr []sym // resource ids by string; nil: any id
	ridSet    []sym
	relation  sym
	anyRel    bool
	subj      bool // a subject filter is given
	st        sym
	anySt     bool
	sidsByStr []sym
	sidSet    []sym
	srels     []sym // subject relations to try in exact lookups, by string
	srel      sym
	anySrel   bool
	exact     bool // the exact index can answer groups: subject type and ids are given

	plan interface {
		fill(q *query, out *[]rel.Relationship, max int) (done bool)
	}

	// Storage for the common small cases, so that a typical check allocates little.
	group    groupPlan
	afterBuf rel.Key
	typeBuf  [1]sym
	relBuf   [1]sym
	srelBuf  [4]sym
	revBuf   [4]revKey
	batch    []rel.Relationship // the batch being yielded
	batchBuf [4]rel.Relationship
	idBufs   [2][]sym // resolveIDs' storage (resource, subject ids), kept while small
	chainBuf []chain  // chainsLocked's storage, kept

	visited int64 // records read, matching or not: added to the store's count at the end
}

// start decodes the cursor and readies q for its first batch, which resolves the
// filter and chooses a plan under the same hold of the read lock.
func (q *query) start(ctx context.Context, s *Store, rev uint64, f store.Filter, opts store.QueryOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.s, q.rev, q.f, q.limit, q.unordered = s, rev, f, max(opts.Limit, 0), opts.Unordered
	if opts.After != "" {
		k, err := q.codec.Of(&q.f).Decode(opts.After)
		if err != nil {
			return err
		}
		q.afterBuf = k
		q.after = &q.afterBuf
	}
	return nil
}

// free adds q's reads to its store's count and returns q to the pool, keeping only its
// small buffers.
func (q *query) free() {
	if q.s != nil && q.visited > 0 {
		q.s.visited.Add(q.visited)
	}
	bufs, chains := q.idBufs, q.chainBuf
	*q = query{chainBuf: chains[:0]}
	for i, b := range bufs {
		if cap(b) <= 64 {
			q.idBufs[i] = b[:0]
		}
	}
	queryPool.Put(q)
}

// run gathers batches under the read lock and hands them to v without it.
func (q *query) run(ctx context.Context, v store.Visitor) error {
	q.batch = q.batchBuf[:0]
	emitted := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		q.batch = q.batch[:0]
		done, err := q.fill(&q.batch, emitted)
		if err != nil {
			return err
		}
		for _, x := range q.batch {
			if !v.Visit(store.NewItem(x, q.codec.Of(&q.f))) {
				return nil
			}
			if emitted++; emitted == q.limit {
				return nil
			}
		}
		if done {
			return nil
		}
	}
}

// fill runs the plan for one batch under the read lock; the first batch resolves the
// filter and chooses the plan under the same hold.
func (q *query) fill(out *[]rel.Relationship, emitted int) (bool, error) {
	q.s.mu.RLock()
	defer q.s.mu.RUnlock()
	if q.rev < q.s.oldest {
		// Garbage collection passed this revision (while the caller was consuming, if
		// this is not the first batch).
		return true, store.ErrRevisionGone
	}
	if !q.planned {
		q.planned = true
		if q.resolveLocked(); !q.empty {
			q.planLocked()
		}
	}
	if q.empty {
		return true, nil
	}
	want := batchItems
	if q.limit > 0 {
		want = min(want, q.limit-emitted)
	}
	return q.plan.fill(q, out, want), nil
}

// resolveLocked turns the filter's strings into symbols, noting when one was never
// stored (then nothing can match).
func (q *query) resolveLocked() {
	in := q.s.in
	f := q.f
	var ok bool
	if f.ResourceType != "" {
		var rt sym
		if rt, ok = in.lookup(f.ResourceType); !ok || q.s.types[rt] == nil {
			q.empty = true
			return
		}
		q.typeBuf[0] = rt
		q.types = q.typeBuf[:]
	} else {
		q.types = q.s.resourceTypesLocked()
	}
	if len(f.ResourceIDs) > 0 {
		q.ridsByStr, q.ridSet = q.resolveIDs(f.ResourceIDs, &q.idBufs[0])
	}
	q.anyRel = f.Relation == ""
	if !q.anyRel {
		if q.relation, ok = in.lookup(f.Relation); !ok {
			q.empty = true
		}
	}
	q.anySt, q.anySrel = true, true
	if sf := f.Subject; sf != nil && !q.empty {
		q.resolveSubject(sf)
	}
}

// resolveSubject resolves the subject part of the filter.
func (q *query) resolveSubject(sf *store.SubjectFilter) {
	in := q.s.in
	var ok bool
	q.subj = true
	if sf.Type != "" {
		q.anySt = false
		if q.st, ok = in.lookup(sf.Type); !ok {
			q.empty = true
			return
		}
	}
	if len(sf.IDs) > 0 {
		q.sidsByStr, q.sidSet = q.resolveIDs(sf.IDs, &q.idBufs[1])
	}
	if sf.RelationSet {
		q.anySrel = false
		if q.srel, ok = in.lookup(sf.Relation); !ok {
			q.empty = true
			return
		}
	}
	if q.anySt || q.sidsByStr == nil {
		return
	}
	q.exact = true
	q.srels = q.srelBuf[:0]
	if !q.anySrel {
		q.srels = append(q.srels, q.srel)
	} else if t := q.s.types[q.st]; t != nil {
		for _, c := range t.srels {
			q.srels = append(q.srels, c.s)
		}
	}
}

// resolveIDs returns the stored ids among ids, by string and by symbol, in storage
// from *into. When none was ever stored the query is empty. Ids already sorted and
// distinct (a lookup's thousands of sets) keep their order, sparing a sort by string.
func (q *query) resolveIDs(ids []string, into *[]sym) (byStr, set []sym) {
	buf := slices.Grow((*into)[:0], 2*len(ids))[:len(ids)]
	*into = buf
	n := 0
	for _, id := range ids {
		if s, ok := q.s.in.lookup(id); ok {
			buf[n] = s
			n++
		}
	}
	byStr = append(buf[len(ids):len(ids)], buf[:n]...)
	set = buf[:n]
	slices.Sort(set)
	set = slices.Compact(set)
	if len(set) == 0 {
		q.empty = true
		return nil, nil
	}
	if len(set) < n || !slices.IsSorted(ids) {
		byStr = append(byStr[:0], set...)
		q.s.sortByString(byStr)
	}
	return byStr, set
}

// resourceTypesLocked returns the types that have relationships as resources, by string.
func (s *Store) resourceTypesLocked() []sym {
	out := make([]sym, 0, len(s.types))
	for t, info := range s.types {
		if len(info.rels) > 0 {
			out = append(out, t)
		}
	}
	s.sortByString(out)
	return out
}

func (s *Store) sortByString(list []sym) {
	slices.SortFunc(list, func(a, b sym) int { return strings.Compare(s.in.str(a), s.in.str(b)) })
}

// relationsLocked returns the relations of type t to visit, by string.
func (q *query) relationsLocked(t sym) []sym {
	info := q.s.types[t]
	if info == nil {
		return nil
	}
	if !q.anyRel {
		for _, c := range info.rels {
			if c.s == q.relation {
				q.relBuf[0] = q.relation
				return q.relBuf[:]
			}
		}
		return nil
	}
	return syms(info.rels)
}

// planLocked chooses between walking resources (forward chains or exact lookups, group
// by group) and walking subjects (reverse chains), by the number of records each
// would visit.
func (q *query) planLocked() {
	if q.after != nil {
		// Types before the cursor's hold nothing to resume with.
		q.types = slices.DeleteFunc(q.types, func(t sym) bool { return q.s.in.str(t) < q.after.ResourceType })
	}
	q.plan = &q.group
	if q.anySt || q.sidsByStr == nil || q.fewKeys() {
		return
	}
	keys, revCost := q.reverseKeysLocked()
	if revCost < q.forwardCostLocked(revCost) {
		q.plan = &reversePlan{keys: keys}
	}
}

// fewKeysMax bounds the keys a filter may name for exact lookups of each to be taken
// without weighing the reverse walk: that walk costs a lookup per subject and more.
const fewKeysMax = 4

// fewKeys reports whether the filter names at most fewKeysMax possible keys, each
// looked up in the exact index (a check's usual query names one).
func (q *query) fewKeys() bool {
	return q.exact && q.ridsByStr != nil && !q.anyRel &&
		len(q.types)*len(q.ridsByStr)*len(q.sidsByStr)*len(q.srels) <= fewKeysMax
}

// reverseKeysLocked lists the reverse chains that hold every match, and their total length.
func (q *query) reverseKeysLocked() ([]revKey, int) {
	keys := q.revBuf[:0]
	cost := 0
	for _, t := range q.types {
		for _, r := range q.relationsLocked(t) {
			for _, sid := range q.sidsByStr {
				k := revKey{q.st, sid, t, r}
				if c, ok := q.s.rev.get(&q.s.recs, k); ok {
					keys = append(keys, k)
					cost += int(c.n)
				}
			}
		}
	}
	return keys, cost
}

// forwardCostLocked estimates the records the group plan visits, stopping once the
// estimate passes limit. Without listed resource ids the plan visits every group of
// the filter's types, one lookup each even where the group holds no match (a filter
// naming subjects whose kind no record of the relation has still walks them all).
func (q *query) forwardCostLocked(limit int) int {
	if q.ridsByStr == nil {
		cost := 0
		for _, t := range q.types {
			cost += q.s.types[t].ids.len() * len(q.relationsLocked(t))
			for _, c := range q.s.types[t].kinds {
				if (q.anyRel || c.relation == q.relation) && (q.anySt || c.subjType == q.st) && (q.anySrel || c.subjRel == q.srel) {
					cost += int(c.n)
				}
			}
		}
		return cost
	}
	exactCost := len(q.sidsByStr) * len(q.srels)
	cost := 0
	for _, t := range q.types {
		for _, r := range q.relationsLocked(t) {
			for _, id := range q.ridsByStr {
				_, n := q.chainsLocked(groupKey{t, id, r})
				cost += 1 + min(exactCost, n)
				if cost > limit {
					return cost
				}
			}
		}
	}
	return cost
}

// expiredLocked reports whether record idx (r) has expired at the query's time.
func (q *query) expiredLocked(idx uint32, r *record) bool {
	x := q.s.expiresLocked(idx, r)
	if x == 0 {
		return false
	}
	if q.now == 0 {
		q.now = q.s.opts.Now().UnixNano()
	}
	return x <= q.now
}

// matchLocked reports whether record idx, which a forward chain or an exact lookup
// found (so its resource's type, id and relation are the filter's), is in the query's
// result.
func (q *query) matchLocked(idx uint32) bool {
	rp := &q.s.recs
	r := rp.at(idx)
	if !q.liveLocked(idx, r) {
		return false
	}
	if !q.subj {
		return true
	}
	return (q.anySt || rp.name(r.subjType) == q.st) && (q.sidSet == nil || hasSym(q.sidSet, r.subjID)) &&
		(q.anySrel || rp.name(r.subjRel) == q.srel)
}

// matchReverseLocked reports whether record r (idx), which a reverse chain of the
// reverse plan's keys found (so its subject's type and id, its resource's type and its
// relation are the filter's), is in the query's result.
func (q *query) matchReverseLocked(idx uint32, r *record) bool {
	return q.liveLocked(idx, r) &&
		(q.ridSet == nil || hasSym(q.ridSet, r.resID)) &&
		(q.f.ResourceIDPrefix == "" || strings.HasPrefix(q.s.in.str(r.resID), q.f.ResourceIDPrefix)) &&
		(q.anySrel || q.s.recs.name(r.subjRel) == q.srel)
}

// liveLocked reports whether record r (idx) is visible at the query's revision and,
// unless the filter includes them, not expired.
func (q *query) liveLocked(idx uint32, r *record) bool {
	return r.visibleAt(q.s.offLocked(q.rev)) && (q.f.IncludeExpired || !q.expiredLocked(idx, r))
}

// hasSym reports whether the sorted set holds s.
func hasSym(set []sym, s sym) bool {
	if len(set) <= 8 {
		return slices.Contains(set, s)
	}
	_, ok := slices.BinarySearch(set, s)
	return ok
}

// afterCursor reports whether k comes strictly after the query's cursor, and forgets
// the cursor once a key passes it (every later key does too).
func (q *query) afterCursor(k rel.Key) bool {
	if q.after == nil {
		return true
	}
	if store.CompareKeys(k, *q.after) > 0 {
		q.after = nil
		return true
	}
	return false
}
