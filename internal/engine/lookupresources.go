package engine

import (
	"context"
	"errors"
	"iter"
	"slices"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// LookupResourcesRequest asks for every resource of ResourceType on which Subject has
// Permission.
type LookupResourcesRequest struct {
	ResourceType string
	Permission   string
	Subject      rel.SubjectRef
	Context      map[string]any
	// Ordered asks for the results in ascending id order, conditional ones in their
	// place, and only those whose id sorts after After: a caller pages by passing the
	// last id it was given, and the lookup checks no candidate at or before it.
	Ordered bool
	After   string
}

// FoundResource is one LookupResources result: HasPermission or Conditional.
type FoundResource struct {
	ID     string
	Result Result
}

// LookupResources walks the graph in reverse, from the subject towards resources of the
// requested type, following the schema: direct relationships, subject sets, arrows and
// unions are walked backwards through the store's reverse index, and only what an
// intersection or exclusion needs is checked forwards. Results are yielded as they
// become final, in an order that is the same for the same revision and request, so a
// caller can page by counting. A granted resource is yielded once; conditional ones
// come last. A resource whose check would fail on a caveat that cannot be evaluated
// fails the lookup, with the error of the least such id, once the granted ones are
// yielded: it can be neither listed nor left out. yield returning an error stops the
// lookup with that error.
func (e *Engine) LookupResources(ctx context.Context, s *ir.Schema, r store.Reader, req LookupResourcesRequest, yield func(FoundResource) error) error {
	target, err := resourcesTarget(s, req, e.sem)
	if err != nil {
		return err
	}
	ev := e.evaluatorFor(s, r, req.Subject, req.Context)
	l := newReverseLookup(e, ev, ev.r)
	if req.Ordered {
		return l.ordered(ctx, target, req, yield)
	}
	emitted := &emittedIDs{}
	l.emit = func(rl *ir.Relation, res results) error {
		if rl != target {
			return nil
		}
		return emitFinal(res, emitted, yield)
	}
	var res results
	if target.IsPermission() && !dependsOn(target, target) {
		// Not recursive: its rewrite is evaluated here, granting results as they come.
		if l.ev.isSubject(target, req.Subject.Object.ID) {
			if err := emitFinal(results{req.Subject.Object.ID: outHas}, emitted, yield); err != nil {
				return err
			}
		} else if target.Rewrite.Kind != ir.Union {
			// One stream, which grants each object once: nothing to remember.
			emitted = nil
		}
		res, err = l.stream(ctx, target.Def, target.Rewrite, func(r results) error { return emitFinal(r, emitted, yield) })
	} else {
		res, err = l.relation(ctx, target)
	}
	if err != nil {
		return err
	}
	var open []string
	for id, o := range res {
		if o.st == cond || o.st == evalErr {
			open = append(open, id)
		}
	}
	rel.SortIDs(open)
	var conds []string
	failed := "" // the least id whose check fails on a caveat: the lookup fails with it
	for _, id := range open {
		switch o := res[id]; {
		case emitted != nil && emitted.has(id):
		case o.st == cond:
			conds = append(conds, id)
		case o.st == evalErr && failed == "":
			failed = id
		}
	}
	if failed != "" {
		return res[failed].err()
	}
	for _, id := range conds {
		if err := yield(FoundResource{ID: id, Result: Result{Membership: Conditional, Missing: res[id].missing()}}); err != nil {
			return err
		}
	}
	return nil
}

// emitFinal yields, in id order, the granted resources of res not yielded before (as
// emitted records, unless it is nil).
func emitFinal(res results, emitted *emittedIDs, yield func(FoundResource) error) error {
	var ids []string
	for id, o := range res {
		if o.st == has {
			ids = append(ids, id)
		}
	}
	rel.SortIDs(ids)
	if emitted != nil {
		ids = slices.DeleteFunc(ids, emitted.has)
		emitted.add(ids)
	}
	for _, id := range ids {
		if err := yield(FoundResource{ID: id, Result: Result{Membership: HasPermission}}); err != nil {
			return err
		}
	}
	return nil
}

// emittedIDs records the ids a lookup has yielded, as runs of ids in order: the
// batches emitFinal yields are each in order, and mostly follow one another (a branch
// of a union streams its objects in id order), so a run grows by appending, and ids
// asked about in order are found by walking forward in each run, where a map would
// hash each id twice and grow by copying.
type emittedIDs struct {
	runs [][]string
	// at is, for each run, where the id asked last would be; last is that id, from
	// which a smaller one sends them back by binary search.
	at   []int
	last string
}

// has reports whether id was yielded.
func (e *emittedIDs) has(id string) bool {
	back := id < e.last
	e.last = id
	found := false
	for i, run := range e.runs {
		j := e.at[i]
		if back {
			j, _ = slices.BinarySearch(run, id)
		}
		for j < len(run) && run[j] < id {
			j++
		}
		e.at[i] = j
		found = found || j < len(run) && run[j] == id
	}
	return found
}

// add records ids, in order and none yielded before.
func (e *emittedIDs) add(ids []string) {
	if len(ids) == 0 {
		return
	}
	if n := len(e.runs); n > 0 && e.runs[n-1][len(e.runs[n-1])-1] < ids[0] {
		e.runs[n-1] = append(e.runs[n-1], ids...)
		return
	}
	e.runs = append(e.runs, slices.Clone(ids))
	e.at = append(e.at, 0)
	if len(e.runs) > maxEmittedRuns {
		// Batches out of order (the rounds of a recursive permission's fixpoint): one
		// run again, so that has walks a few.
		all := slices.Concat(e.runs...)
		rel.SortIDs(all)
		e.runs, e.at = [][]string{all}, e.at[:1]
	}
	for i, run := range e.runs {
		e.at[i], _ = slices.BinarySearch(run, e.last)
	}
}

// maxEmittedRuns bounds the runs of an emittedIDs.
const maxEmittedRuns = 8

// lookupChunk is how many candidates of an intersection or exclusion are checked at
// once when their results are streamed: the first results leave after one chunk.
const lookupChunk = 1000

// stream evaluates x (the rewrite of the looked-up permission, or a branch of it whose
// grants are final for it) and passes granted results to emit a chunk of objects at a
// time, in id order: as they are read for a relation of direct subjects, as they are
// checked for an intersection or exclusion (operand by operand of a union it narrows),
// and once all are known for any other branch of a union. It returns the undecided
// results: the granted ones have gone to emit, and keeping them would hold the whole
// answer in memory.
func (l *reverseLookup) stream(ctx context.Context, def *ir.Definition, x *ir.Expr, emit func(results) error) (results, error) {
	switch x.Kind {
	case ir.Union:
		acc := results{}
		for _, c := range x.Children {
			res, err := l.stream(ctx, def, c, emit)
			if err != nil {
				return nil, err
			}
			mergeOr(acc, res)
		}
		return acc, nil
	case ir.Intersection, ir.Exclusion:
		acc := results{}
		f := func(o outcome) outcome { return o }
		if x.Kind == ir.Exclusion {
			f = not
		}
		chunk := func(part results) error {
			var err error
			for _, c := range x.Children[1:] {
				if part, err = l.narrow(ctx, def, c, part, and, f); err != nil {
					return err
				}
			}
			// The chunk's forward checks are its own: forgetting them keeps the memory
			// of a lookup from growing with its candidates.
			l.ev.forget()
			if err := emit(part); err != nil {
				return err
			}
			for id, o := range part {
				if o.st == has {
					delete(acc, id) // conditional from an earlier operand of a union
				}
			}
			mergeOr(acc, undecided(part))
			return nil
		}
		// The candidates are the first operand's; of a union, each of its operands'
		// in turn ((a + b) - c is (a - c) + (b - c)), so that the first results leave
		// after one chunk of the first operand instead of after the whole union.
		// A candidate an earlier operand granted is granted or not already; one it
		// found conditional is checked again, since a later operand may grant it.
		bases := []*ir.Expr{x.Children[0]}
		var granted map[string]bool
		if x.Children[0].Kind == ir.Union {
			bases, granted = x.Children[0].Children, map[string]bool{}
		}
		each := func(part results) error {
			if granted != nil {
				for id, o := range part {
					if granted[id] {
						delete(part, id)
					} else if o.st == has {
						granted[id] = true
					}
				}
			}
			return chunk(part)
		}
		for _, b := range bases {
			if err := l.chunks(ctx, def, b, each); err != nil {
				return nil, err
			}
		}
		return acc, nil
	}
	acc := results{}
	return acc, l.chunks(ctx, def, x, func(part results) error {
		mergeOr(acc, undecided(part))
		return emit(part)
	})
}

// chunks passes the objects on which the subject may hold x to fn a chunk at a time,
// in id order.
func (l *reverseLookup) chunks(ctx context.Context, def *ir.Definition, x *ir.Expr, fn func(results) error) error {
	if each, err := l.inOrder(ctx, def, x); err != nil || each != nil {
		if err != nil {
			return err
		}
		// The lookup never holds them all.
		return inChunks(each, fn)
	}
	res, err := l.expr(ctx, def, x)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(res))
	for id := range res {
		ids = append(ids, id)
	}
	rel.SortIDs(ids)
	for ids := range slices.Chunk(ids, lookupChunk) {
		if err := fn(restrict(res, ids)); err != nil {
			return err
		}
	}
	return nil
}

// inOrder returns a source of the objects of def on which the subject may hold x, in
// id order from store queries in key order, when x is: a relation read by one query
// (readable); one whose subject sets' objects are known (directInOrder); or an arrow
// through one type, whose tupleset is read from the target's objects in one query.
// Else nil.
func (l *reverseLookup) inOrder(ctx context.Context, def *ir.Definition, x *ir.Expr) (source, error) {
	if r := l.readable(x); r != nil {
		return func(fn func(string, outcome) error) error { return l.directEach(ctx, r, fn) }, nil
	}
	if each, err := l.directInOrder(ctx, x); err != nil || each != nil {
		return each, err
	}
	if types := arrowTypes(x); x.ArrowKind == ir.ArrowAny && len(types) == 1 {
		a := types[0]
		sub, err := l.relation(ctx, x.TargetOn(a.Def))
		if err != nil {
			return nil, err
		}
		sf := &store.SubjectFilter{Type: a.Type}
		return func(fn func(string, outcome) error) error {
			return l.walkBackEach(ctx, def.Name, x.TuplesetRel.Name, sf, sub, true, fn)
		}, nil
	}
	return nil, nil
}

// undecided returns the results of res that are neither granted nor denied: the
// conditional ones and those whose caveats failed to evaluate.
func undecided(res results) results {
	out := results{}
	for id, o := range res {
		if o.st == cond || o.st == evalErr {
			out[id] = o
		}
	}
	return out
}

// ordered answers an Ordered lookup. The candidates of a permission that is not
// recursive are found by walking back without the forward checks of intersections,
// exclusions and .all() arrows; those checks are then made a chunk of candidates at a
// time, in id order, from the first after req.After. So a resumed lookup checks none of
// the candidates of the pages before it, and one that yield stops checks none beyond
// the chunk it stopped in.
func (l *reverseLookup) ordered(ctx context.Context, target *ir.Relation, req LookupResourcesRequest, yield func(FoundResource) error) error {
	if each, err := l.unionInOrder(ctx, target); err != nil || each != nil {
		if err != nil {
			return err
		}
		return yieldInOrder(each, req.After, yield)
	}
	w := walked{}
	var cands results
	var err error
	recursive := !target.IsPermission() || dependsOn(target, target)
	if recursive {
		cands, err = l.relation(ctx, target)
	} else {
		cands, err = l.candidates(ctx, target.Def, target.Rewrite, w)
	}
	if err != nil {
		return err
	}
	self := ""
	if subj := req.Subject.Object.ID; l.ev.isSubject(target, subj) {
		self = subj
		cands.put(subj, outHas)
	}
	ids := make([]string, 0, len(cands))
	for id := range cands {
		if id > req.After {
			ids = append(ids, id)
		}
	}
	rel.SortIDs(ids)
	for chunk := range slices.Chunk(ids, lookupChunk) {
		part := restrict(cands, chunk)
		if !recursive {
			// A subject set holds itself, which no rewrite says: its rewrite is not
			// checked (it could only fail at the depth limit, as the unordered lookup,
			// which grants it outright, does not).
			checked := chunk
			i, in := slices.BinarySearch(chunk, self)
			if in {
				checked = slices.Delete(slices.Clone(chunk), i, i+1)
			}
			if part, err = l.onChunk(ctx, target.Def, target.Rewrite, w, checked); err != nil {
				return err
			}
			if in {
				part.put(self, outHas)
			}
		}
		for _, id := range chunk {
			f := FoundResource{ID: id}
			switch o := part.get(id); o.st {
			case has:
				f.Result = Result{Membership: HasPermission}
			case cond:
				f.Result = Result{Membership: Conditional, Missing: o.missing()}
			case evalErr:
				// The first resource in id order whose check fails fails the lookup,
				// as in the unordered lookup.
				return o.err()
			default:
				continue
			}
			if err := yield(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// unionInOrder returns, for a permission that is not recursive, of which the subject
// is not itself a subject set, and that is a union of operands each of which inOrder
// streams (or one such operand), a source of its objects in id order: the operands'
// sources merged. So an ordered lookup of such a permission (documents of their
// owners, of nested groups and of folders) yields its first page once the queries
// reach it, instead of once every candidate is gathered and sorted. Else nil.
func (l *reverseLookup) unionInOrder(ctx context.Context, target *ir.Relation) (source, error) {
	if !target.IsPermission() || dependsOn(target, target) || l.ev.isSubject(target, l.ev.subject.Object.ID) {
		return nil, nil
	}
	operands := []*ir.Expr{target.Rewrite}
	if target.Rewrite.Kind == ir.Union {
		operands = target.Rewrite.Children
	}
	var srcs []source
	for _, x := range operands {
		src, err := l.inOrder(ctx, target.Def, x)
		if err != nil || src == nil {
			return nil, err
		}
		srcs = append(srcs, src)
	}
	return func(fn func(string, outcome) error) error { return mergeSources(srcs, fn) }, nil
}

// yieldInOrder yields the objects each finds (in id order, an object's outcomes one
// after another, ORed) after after, as an ordered lookup does: granted or conditional
// in their place, the first whose caveat fails failing the lookup.
func yieldInOrder(each source, after string, yield func(FoundResource) error) error {
	var id string
	var o outcome
	found := false
	flush := func() error {
		if !found || id <= after {
			return nil
		}
		switch o.st {
		case has:
			return yield(FoundResource{ID: id, Result: Result{Membership: HasPermission}})
		case cond:
			return yield(FoundResource{ID: id, Result: Result{Membership: Conditional, Missing: o.missing()}})
		case evalErr:
			return o.err()
		}
		return nil
	}
	err := each(func(next string, more outcome) error {
		if found && next == id {
			o = or(o, more)
			return nil
		}
		if err := flush(); err != nil {
			return err
		}
		id, o, found = next, more, true
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// walked holds what an ordered lookup found walking back: for each subexpression
// answered without forward checks (and each .all() arrow), its objects.
type walked map[*ir.Expr]results

// candidates finds the objects of def on which the subject may hold x, as expr does
// but without the forward checks: of an intersection or exclusion it takes the first
// operand, of a .all() arrow the objects any tupleset subject reaches. It records
// in w what onChunk needs to answer x exactly.
func (l *reverseLookup) candidates(ctx context.Context, def *ir.Definition, x *ir.Expr, w walked) (results, error) {
	switch {
	case x.Kind == ir.Union:
		acc := results{}
		for _, c := range x.Children {
			res, err := l.candidates(ctx, def, c, w)
			if err != nil {
				return nil, err
			}
			mergeOr(acc, res)
		}
		return acc, nil
	case x.Kind == ir.Intersection || x.Kind == ir.Exclusion:
		return l.candidates(ctx, def, x.Children[0], w)
	case x.Kind == ir.Arrow && x.ArrowKind != ir.ArrowAny:
		res, err := l.arrowAny(ctx, def, x)
		w[x] = res
		return res, err
	}
	res, err := l.expr(ctx, def, x)
	w[x] = res
	return res, err
}

// onChunk answers x for the objects in chunk, ids of candidates found for it, as expr
// answers it for every object: from what candidates walked, and forward checks of
// the objects in chunk alone.
func (l *reverseLookup) onChunk(ctx context.Context, def *ir.Definition, x *ir.Expr, w walked, chunk []string) (results, error) {
	same := func(o outcome) outcome { return o }
	switch {
	case x.Kind == ir.Union:
		acc := results{}
		for _, c := range x.Children {
			res, err := l.onChunk(ctx, def, c, w, chunk)
			if err != nil {
				return nil, err
			}
			mergeOr(acc, res)
		}
		return acc, nil
	case x.Kind == ir.Intersection:
		acc, err := l.onChunk(ctx, def, x.Children[0], w, chunk)
		for _, c := range x.Children[1:] {
			if err != nil {
				break
			}
			acc, err = l.narrow(ctx, def, c, acc, and, same)
		}
		return acc, err
	case x.Kind == ir.Exclusion:
		base, err := l.onChunk(ctx, def, x.Children[0], w, chunk)
		if err != nil {
			return nil, err
		}
		return l.narrow(ctx, def, x.Children[1], base, and, not)
	case x.Kind == ir.Arrow && x.ArrowKind != ir.ArrowAny:
		return l.narrow(ctx, def, x, restrict(w[x], chunk), func(_, b outcome) outcome { return b }, same)
	}
	return restrict(w[x], chunk), nil
}

// restrict returns the results of res for the ids in chunk.
func restrict(res results, chunk []string) results {
	out := make(results, len(chunk))
	for _, id := range chunk {
		out.put(id, res.get(id))
	}
	return out
}

// dependsOn reports whether evaluating r needs the answers of target: whether target
// is reachable from r through the rewrites, arrows and subject sets of the schema.
func dependsOn(r, target *ir.Relation) bool {
	seen := map[*ir.Relation]bool{}
	var visit func(*ir.Relation) bool
	var walk func(*ir.Expr) bool
	visit = func(r *ir.Relation) bool {
		if seen[r] {
			return false
		}
		seen[r] = true
		if r.IsPermission() {
			return walk(r.Rewrite)
		}
		for _, a := range r.Allowed {
			if a.Relation != "" && !a.Wildcard && (a.Rel == target || visit(a.Rel)) {
				return true
			}
		}
		return false
	}
	walk = func(x *ir.Expr) bool {
		switch x.Kind {
		case ir.Ref:
			return x.Rel == target || visit(x.Rel)
		case ir.Arrow:
			for _, a := range x.TuplesetRel.Allowed {
				if a.Wildcard {
					continue
				}
				if t := x.TargetOn(a.Def); t != nil && (t == target || visit(t)) {
					return true
				}
			}
		}
		for _, c := range x.Children {
			if walk(c) {
				return true
			}
		}
		return false
	}
	return visit(r)
}

// reverseLookup computes, for relations and permissions, the set of objects on which
// the subject holds them. Recursive schemas make these sets depend on themselves: they
// are least fixpoints (see fixpoint). Every step only adds or upgrades results
// (intersections and exclusions narrow by forward checks, which do not depend on these
// sets), so the iteration converges to the exact answer.
type reverseLookup struct {
	e    *Engine
	ev   *evaluator
	r    store.Reader // reads of the walk back: the evaluator's, or a budgeted one
	sets *fixpoint[*ir.Relation, results]
	emit func(*ir.Relation, results) error
	// walkedBack holds, for each narrowing operand met (the subtracted one of an
	// exclusion, the others of an intersection), the objects on which the subject
	// holds it, when walking back found them within reverseBudget; nil when it did not.
	walkedBack map[*ir.Expr]results
	walked     map[walkKey]*walkMemo // see walkBack
}

func newReverseLookup(e *Engine, ev *evaluator, r store.Reader) *reverseLookup {
	return &reverseLookup{
		e: e, ev: ev, r: r,
		sets: newFixpoint[*ir.Relation](func() results { return results{} }, func(known, round results) (results, bool) {
			return known, mergeOr(known, round)
		}),
		emit:       func(*ir.Relation, results) error { return nil },
		walkedBack: map[*ir.Expr]results{},
		walked:     map[walkKey]*walkMemo{},
	}
}

func (l *reverseLookup) relation(ctx context.Context, r *ir.Relation) (results, error) {
	if levels, ok := l.ev.indexedSets(ctx, r); ok {
		return l.indexedRelation(ctx, r, levels)
	}
	return l.sets.get(ctx, r, func() (results, error) {
		var res results
		var err error
		if r.IsPermission() {
			res, err = l.expr(ctx, r.Def, r.Rewrite)
		} else {
			res, err = l.direct(ctx, r)
		}
		if err == nil {
			// A subject set holds itself, whether it names a relation or a permission
			// (doc:d0#read has doc:d0#read), and so reaches whatever it is granted.
			if subj := l.ev.subject; l.ev.isSubject(r, subj.Object.ID) {
				res.put(subj.Object.ID, outHas)
			}
		}
		return res, err
	}, func(v results) error { return l.emit(r, v) })
}

// indexedRelation is relation for a relation the index answers: the subject's sets
// and their ancestors at once, with no walk. It yields what the walk back would, as
// it would: round i of its fixpoint adds the sets i set edges above those holding the
// subject directly (the subject set itself in the first), and the lookup gives up
// with ErrMaxDepth after the same number of rounds.
func (l *reverseLookup) indexedRelation(ctx context.Context, r *ir.Relation, levels [][]string) (results, error) {
	all := results{}
	for _, ids := range levels {
		for _, id := range ids {
			all.put(id, outHas)
		}
	}
	if subj := l.ev.subject; l.ev.isSubject(r, subj.Object.ID) {
		all.put(subj.Object.ID, outHas)
		if len(levels) == 0 {
			levels = [][]string{nil}
		}
		levels[0] = append(levels[0], subj.Object.ID)
	}
	rounds := func(v results) error {
		so := results{}
		for i, ids := range levels {
			if i == maxFixpointRounds {
				return ErrMaxDepth
			}
			for _, id := range ids {
				so.put(id, outHas)
			}
			if err := l.emit(r, so); err != nil {
				return err
			}
		}
		if len(levels) >= maxFixpointRounds {
			return ErrMaxDepth
		}
		return nil
	}
	return l.sets.get(ctx, r, func() (results, error) { return all, nil }, rounds)
}

// mergeOr ORs src into dst and reports whether dst changed.
func mergeOr(dst, src results) bool {
	changed := false
	for id, o := range src {
		old := dst.get(id)
		n := or(old, o)
		if n.st != old.st || !slices.Equal(n.missing(), old.missing()) || n.err() != old.err() {
			dst.put(id, n)
			changed = true
		}
	}
	return changed
}

// expr computes the objects of def on which the subject holds expression x.
func (l *reverseLookup) expr(ctx context.Context, def *ir.Definition, x *ir.Expr) (results, error) {
	switch x.Kind {
	case ir.Ref:
		res, err := l.relation(ctx, x.Rel)
		return clone(res), err
	case ir.Union:
		acc := results{}
		for _, c := range x.Children {
			res, err := l.expr(ctx, def, c)
			if err != nil {
				return nil, err
			}
			mergeOr(acc, res)
		}
		return acc, nil
	case ir.Intersection:
		acc, err := l.expr(ctx, def, x.Children[0])
		if err != nil {
			return nil, err
		}
		for _, c := range x.Children[1:] {
			if acc, err = l.narrow(ctx, def, c, acc, and, func(o outcome) outcome { return o }); err != nil {
				return nil, err
			}
		}
		return acc, nil
	case ir.Exclusion:
		base, err := l.expr(ctx, def, x.Children[0])
		if err != nil {
			return nil, err
		}
		return l.narrow(ctx, def, x.Children[1], base, and, not)
	case ir.Arrow:
		cand, err := l.arrowAny(ctx, def, x)
		if err != nil || x.ArrowKind == ir.ArrowAny {
			return cand, err
		}
		// .all(): every tupleset subject must grant; walking back from one of them finds
		// the candidates, a check decides.
		return l.narrow(ctx, def, x, cand, func(_, b outcome) outcome { return b }, func(o outcome) outcome { return o })
	}
	return results{}, nil
}

// narrow decides expression c on the candidates in acc and combines: from the objects
// on which the subject holds c, when walking back from the subject finds them within
// reverseBudget (an exclusion of the few resources whose owner blocked the subject
// costs two small reads, where checking it forwards costs reads for every candidate);
// else by checking c forwards on each candidate.
func (l *reverseLookup) narrow(ctx context.Context, def *ir.Definition, c *ir.Expr, acc results,
	op func(a, b outcome) outcome, f func(outcome) outcome,
) (results, error) {
	held, err := l.reached(ctx, def, c)
	if err != nil {
		return nil, err
	}
	if held != nil {
		out := make(results, len(acc))
		for id, o := range acc {
			out.put(id, op(o, f(held.get(id))))
		}
		return out, nil
	}
	out, err := l.ev.narrow(ctx, def, c, acc, l.e.maxDepth, op, f)
	if err != nil {
		return nil, err
	}
	for _, o := range out {
		if o.st == depthErr {
			return nil, ErrMaxDepth
		}
	}
	return out, nil
}

// reverseBudget bounds the store reads (queries and the relationships they return)
// that finding a narrowing operand's objects by walking back may take: about what
// checking one chunk of candidates forwards takes.
const reverseBudget = lookupChunk

// maxReversibleDepth bounds the relations a narrowing operand may pass through to be
// walked back: a forward check of a deeper one could exceed the depth limit, which
// walking back would not report.
const maxReversibleDepth = 8

// errOverBudget stops a walk back that needs more than reverseBudget reads.
var errOverBudget = errors.New("walking back takes more reads than checking forwards")

// reached returns the objects of def on which the subject holds c, found by walking
// back from the subject within reverseBudget reads, or nil when c cannot be walked
// back (see reversible) or needs more. Each operand is tried once per lookup.
func (l *reverseLookup) reached(ctx context.Context, def *ir.Definition, c *ir.Expr) (results, error) {
	if held, ok := l.walkedBack[c]; ok {
		return held, nil
	}
	var held results
	if reversible(c, map[*ir.Relation]bool{}, 0) {
		// A lookup of its own, so that a walk given up leaves nothing half-done here.
		sub := newReverseLookup(l.e, l.ev, &budgetReader{Reader: l.r, left: reverseBudget})
		res, err := sub.expr(ctx, def, c)
		switch {
		case err == nil:
			held = res
		case !errors.Is(err, errOverBudget):
			return nil, err
		}
	}
	l.walkedBack[c] = held
	return held, nil
}

// reversible reports whether walking back finds the objects on which the subject holds
// x exactly, with no forward check and no recursion: x is made of unions, relations
// (their subject sets included), permissions and arrows (not .all()), each relation met
// once on the way (path), at most maxReversibleDepth deep.
func reversible(x *ir.Expr, path map[*ir.Relation]bool, depth int) bool {
	switch x.Kind {
	case ir.Nil:
		return true
	case ir.Union:
		for _, c := range x.Children {
			if !reversible(c, path, depth) {
				return false
			}
		}
		return true
	case ir.Ref:
		return reversibleRelation(x.Rel, path, depth)
	case ir.Arrow:
		if x.ArrowKind != ir.ArrowAny {
			return false
		}
		for _, a := range x.TuplesetRel.Allowed {
			if t := x.TargetOn(a.Def); !a.Wildcard && t != nil && !reversibleRelation(t, path, depth) {
				return false
			}
		}
		return true
	}
	return false
}

func reversibleRelation(r *ir.Relation, path map[*ir.Relation]bool, depth int) bool {
	if path[r] || depth == maxReversibleDepth {
		return false
	}
	path[r] = true
	defer delete(path, r)
	if r.IsPermission() {
		return reversible(r.Rewrite, path, depth+1)
	}
	for _, a := range r.Allowed {
		if a.Relation != "" && !a.Wildcard && !reversibleRelation(a.Rel, path, depth+1) {
			return false
		}
	}
	return true
}

// budgetReader is a reader that fails with errOverBudget once its queries and the
// relationships they return pass left.
type budgetReader struct {
	store.Reader
	left int
}

func (b *budgetReader) Query(ctx context.Context, f store.Filter, opts store.QueryOptions) iter.Seq2[store.Item, error] {
	return func(yield func(store.Item, error) bool) {
		if b.left--; b.left < 0 {
			yield(store.Item{}, errOverBudget)
			return
		}
		for item, err := range b.Reader.Query(ctx, f, opts) {
			if err == nil {
				if b.left--; b.left < 0 {
					yield(store.Item{}, errOverBudget)
					return
				}
			}
			if !yield(item, err) {
				return
			}
		}
	}
}

// arrowAny finds the objects of def whose tupleset relation points to an object on
// which the subject holds the arrow's target.
func (l *reverseLookup) arrowAny(ctx context.Context, def *ir.Definition, x *ir.Expr) (results, error) {
	out := results{}
	for _, a := range arrowTypes(x) {
		target := x.TargetOn(a.Def)
		sub, err := l.relation(ctx, target)
		if err != nil {
			return nil, err
		}
		if err := l.walkBack(ctx, target, def.Name, x.TuplesetRel.Name, &store.SubjectFilter{Type: a.Type}, sub, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readable returns the relation x names when its objects for the subject are read by
// one query, with nothing else to add: a relation (not a permission) that allows no
// subject set, of which the subject is not itself a subject set. Else nil.
func (l *reverseLookup) readable(x *ir.Expr) *ir.Relation {
	if x.Kind != ir.Ref || x.Rel.IsPermission() || l.ev.isSubject(x.Rel, l.ev.subject.Object.ID) {
		return nil
	}
	for _, a := range x.Rel.Allowed {
		if a.Relation != "" && !a.Wildcard {
			return nil
		}
	}
	return x.Rel
}

// arrowTypes returns the subject types of x's tupleset (an arrow's) through which x
// reaches objects, each once: those, wildcards aside, on whose definition its target
// exists.
func arrowTypes(x *ir.Expr) []*ir.AllowedSubject {
	if x.Kind != ir.Arrow {
		return nil
	}
	var out []*ir.AllowedSubject
	for i := range x.TuplesetRel.Allowed {
		a := &x.TuplesetRel.Allowed[i]
		if !a.Wildcard && x.TargetOn(a.Def) != nil && !slices.ContainsFunc(out, func(b *ir.AllowedSubject) bool { return b.Type == a.Type }) {
			out = append(out, a)
		}
	}
	return out
}

// inChunks passes the objects each finds (in id order, an object's relationships one
// after another) to fn at least lookupChunk at a time, never splitting one object's
// relationships.
func inChunks(each func(func(id string, o outcome) error) error, fn func(results) error) error {
	// The first chunk grows as it fills (a stream of a few objects yields them at once);
	// the others are sized for a chunk.
	part := results{}
	last := ""
	err := each(func(id string, o outcome) error {
		if id != last && len(part) >= lookupChunk {
			if err := fn(part); err != nil {
				return err
			}
			part = make(results, lookupChunk)
		}
		last = id
		part.put(id, or(part.get(id), o))
		return nil
	})
	if err != nil || len(part) == 0 {
		return err
	}
	return fn(part)
}

// source passes objects to fn in id order, an object's outcomes one after another.
type source = func(fn func(id string, o outcome) error) error

// directInOrder returns, when x names a relation of which the subject is not itself a
// subject set, that is not recursive and whose subject sets' objects are known, a
// source of the objects direct would find for it: one query for the subject and one
// per kind of subject set, each in key order, merged. So a lookup streams the objects
// of such a relation (documents shared with nested groups) a chunk at a time instead
// of gathering, copying and sorting all of them. Else nil.
func (l *reverseLookup) directInOrder(ctx context.Context, x *ir.Expr) (source, error) {
	if x.Kind != ir.Ref || x.Rel.IsPermission() || l.ev.isSubject(x.Rel, l.ev.subject.Object.ID) || dependsOn(x.Rel, x.Rel) {
		return nil, nil
	}
	r := x.Rel
	srcs := []source{func(fn func(string, outcome) error) error { return l.directEach(ctx, r, fn) }}
	for _, a := range subjectSetKinds(r) {
		sub, err := l.relation(ctx, a.Rel)
		if err != nil {
			return nil, err
		}
		if !l.sets.done(a.Rel) {
			return nil, nil
		}
		ids := make([]string, 0, len(sub))
		for id := range sub {
			ids = append(ids, id)
		}
		sf := &store.SubjectFilter{Type: a.Type, Relation: a.Relation, RelationSet: true}
		srcs = append(srcs, func(fn func(string, outcome) error) error {
			return l.walkBackFrom(ctx, r.Def.Name, r.Name, sf, ids, sub, true, fn)
		})
	}
	return func(fn func(string, outcome) error) error { return mergeSources(srcs, fn) }, nil
}

// errMergeDone stops a source mergeSources no longer reads.
var errMergeDone = errors.New("merge done")

// mergeSources passes the objects of srcs, each in id order, to fn in id order, an
// object's outcomes one after another; it stops at the first error of fn or of a
// source.
func mergeSources(srcs []source, fn func(string, outcome) error) error {
	if len(srcs) == 1 {
		return srcs[0](fn)
	}
	type head struct {
		next func() (string, outcome, bool)
		id   string
		o    outcome
		ok   bool
	}
	errs := make([]error, len(srcs))
	heads := make([]head, len(srcs))
	for i, src := range srcs {
		next, stop := iter.Pull2(func(yield func(string, outcome) bool) {
			errs[i] = src(func(id string, o outcome) error {
				if !yield(id, o) {
					return errMergeDone
				}
				return nil
			})
		})
		defer stop()
		heads[i].next = next
		heads[i].id, heads[i].o, heads[i].ok = next()
		if errs[i] != nil {
			return errs[i]
		}
	}
	for {
		least := -1
		for i := range heads {
			if heads[i].ok && (least < 0 || heads[i].id < heads[least].id) {
				least = i
			}
		}
		if least < 0 {
			return nil
		}
		h := &heads[least]
		if err := fn(h.id, h.o); err != nil {
			return err
		}
		if h.id, h.o, h.ok = h.next(); errs[least] != nil {
			return errs[least]
		}
	}
}

// directEach passes to fn, in the store's key order, each object whose relation r
// names the subject or a wildcard of its type, with that relationship's outcome.
func (l *reverseLookup) directEach(ctx context.Context, r *ir.Relation, fn func(id string, o outcome) error) error {
	subj := l.ev.subject
	var ids []string
	for _, a := range r.Allowed {
		if a.Type != subj.Object.Type {
			continue
		}
		if a.Wildcard {
			ids = appendOnce(ids, rel.Wildcard)
		} else if a.Relation == subj.Relation {
			ids = appendOnce(ids, subj.Object.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	f := store.Filter{ResourceType: r.Def.Name, Relation: r.Name, Subject: &store.SubjectFilter{Type: subj.Object.Type, IDs: ids}}
	for item, err := range l.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return err
		}
		s := item.Relationship.Subject
		if s.Object.ID != rel.Wildcard && s.Relation != subj.Relation {
			continue
		}
		if err := fn(item.Relationship.Resource.ID, l.ev.caveat(item.Relationship.Caveat)); err != nil {
			return err
		}
	}
	return nil
}

// direct finds the objects whose relation r names the subject, a wildcard of its type,
// or a subject set the subject belongs to.
func (l *reverseLookup) direct(ctx context.Context, r *ir.Relation) (results, error) {
	out := results{}
	err := l.directEach(ctx, r, func(id string, o outcome) error {
		out.put(id, or(out.get(id), o))
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, a := range subjectSetKinds(r) {
		sub, err := l.relation(ctx, a.Rel)
		if err != nil {
			return nil, err
		}
		sf := &store.SubjectFilter{Type: a.Type, Relation: a.Relation, RelationSet: true}
		if err := l.walkBack(ctx, a.Rel, r.Def.Name, r.Name, sf, sub, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// subjectSetKinds returns the subject sets r allows, each type and relation once.
func subjectSetKinds(r *ir.Relation) []ir.AllowedSubject {
	var out []ir.AllowedSubject
	for _, a := range r.Allowed {
		if a.Relation != "" && !a.Wildcard && !slices.ContainsFunc(out, func(b ir.AllowedSubject) bool { return b.Type == a.Type && b.Relation == a.Relation }) {
			out = append(out, a)
		}
	}
	return out
}

// walkBack reads the relationships of resType#relation whose subjects are among the
// objects in sub, relation from's objects so far (narrowed by sf), and ORs into out
// each resource's outcome: the relationship's caveat AND the subject object's outcome.
// While from's objects are still being found (sub is what a round of its fixpoint
// knows so far, and the next round walks again from more), the subjects granted in an
// earlier walk of the same relationships from the same relation are not read again:
// what they gave is ORed in from the walk's memo. A relation's objects only gain or
// upgrade their outcomes during a lookup, and granted is the most they reach, so what a
// granted subject's relationships give never changes.
func (l *reverseLookup) walkBack(ctx context.Context, from *ir.Relation, resType, relation string, sf *store.SubjectFilter, sub results, out results) error {
	into := func(dst results) func(string, outcome) error {
		return func(id string, o outcome) error {
			dst.put(id, or(dst.get(id), o))
			return nil
		}
	}
	if l.sets.done(from) {
		// from's objects are final: no round walks again from more of them.
		return l.walkBackEach(ctx, resType, relation, sf, sub, false, into(out))
	}
	k := walkKey{from, resType, relation, sf.Type, sf.Relation, sf.RelationSet}
	m := l.walked[k]
	if m == nil {
		m = &walkMemo{done: map[string]bool{}}
		l.walked[k] = m
	}
	var granted, other []string
	for id, o := range sub {
		switch {
		case o.st != has:
			other = append(other, id)
		case !m.done[id]:
			granted = append(granted, id)
		}
	}
	found := results{}
	if err := l.walkBackFrom(ctx, resType, relation, sf, granted, sub, false, into(found)); err != nil {
		return err
	}
	if err := l.walkBackFrom(ctx, resType, relation, sf, other, sub, false, into(out)); err != nil {
		return err
	}
	for _, id := range granted {
		m.done[id] = true
	}
	if len(m.found) == 0 {
		m.found = found
	} else {
		mergeOr(m.found, found)
	}
	mergeOr(out, m.found)
	return nil
}

// walkKey names the walks back of one kind of relationship from one relation's objects.
type walkKey struct {
	from              *ir.Relation
	resType, relation string
	subjType, subjRel string
	subjRelationSet   bool
}

// walkMemo is what a kind of walk back has read: the subjects it read back from once
// granted, and the outcomes their relationships gave.
type walkMemo struct {
	done  map[string]bool
	found results
}

// walkBackEach passes to fn the resource of each relationship of resType#relation
// whose subject is among the objects in sub (narrowed by sf), with the relationship's
// caveat AND the subject object's outcome: in the store's key order when ordered,
// else in whatever order the store finds them cheapest.
func (l *reverseLookup) walkBackEach(ctx context.Context, resType, relation string, sf *store.SubjectFilter, sub results, ordered bool, fn func(id string, o outcome) error) error {
	ids := make([]string, 0, len(sub))
	for id := range sub {
		ids = append(ids, id)
	}
	return l.walkBackFrom(ctx, resType, relation, sf, ids, sub, ordered, fn)
}

// walkBackFrom is walkBackEach from the objects ids of sub alone.
func (l *reverseLookup) walkBackFrom(ctx context.Context, resType, relation string, sf *store.SubjectFilter, ids []string, sub results, ordered bool, fn func(id string, o outcome) error) error {
	if len(ids) == 0 {
		return nil
	}
	rel.SortIDs(ids)
	f := store.Filter{ResourceType: resType, Relation: relation, Subject: &store.SubjectFilter{
		Type: sf.Type, IDs: ids, Relation: sf.Relation, RelationSet: sf.RelationSet,
	}}
	for item, err := range l.r.Query(ctx, f, store.QueryOptions{Unordered: !ordered}) {
		if err != nil {
			return err
		}
		x := item.Relationship
		o := sub.get(x.Subject.Object.ID)
		if x.Caveat != nil {
			o = and(l.ev.caveat(x.Caveat), o)
		}
		if err := fn(x.Resource.ID, o); err != nil {
			return err
		}
	}
	return nil
}

func clone(r results) results {
	out := make(results, len(r))
	for k, v := range r {
		out[k] = v
	}
	return out
}
