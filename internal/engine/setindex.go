package engine

import (
	"context"
	"slices"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// SetIndex is an index of nested sets kept beside the datastore (package
// materialize, wired in by the server): for the relations it holds, it can tell
// whether a subject is in a set at a revision without walking the sets in between.
// Its answers must be exactly the evaluation's, or none: answers are the same with an
// index or without.
type SetIndex interface {
	// Indexes reports whether the index holds relation r.
	Indexes(r *ir.Relation) bool
	// View returns what the index knows of subject's sets at rev, or nil when it
	// cannot answer at rev.
	View(ctx context.Context, rev store.Revision, subject rel.SubjectRef) SetView
	// Sets returns the ids of the objects whose relation r holds subject at rev,
	// directly or through nested sets, exactly as a lookup's walk back would find them
	// (each granted, none conditional), each with the fewest set edges between it and
	// a set holding the subject directly; or false when the index cannot say so.
	Sets(ctx context.Context, rev store.Revision, subject rel.SubjectRef, r *ir.Relation) (ids []string, hops []uint8, known bool)
	// Descendants returns, in id order, the ids of the sets of relation r (whose
	// subject sets are all of r) nested in r on id at rev at any depth, exactly as the
	// reads of subject sets of a walk down from it would reach them (none caveated or
	// expiring), with the set edges of the longest chain down from it and whether a
	// cycle is reachable from it; or false when the index cannot say so. Asked of the
	// tupleset r of a chain arrow (ir.Relation.ChainArrow), it answers likewise the
	// objects the arrow reaches from id through r at any depth.
	Descendants(ctx context.Context, rev store.Revision, r *ir.Relation, id string) (ids []string, longest int, cyclic, known bool)
}

// SetView is a SetIndex's answers for one subject at one revision, used by one
// request at a time: whether the subject has relation r on object id, reached with
// depth hops left, as evaluation would answer; known is false when the index cannot
// say. (A function type, so that an index need not import the engine to be one.)
type SetView = func(r *ir.Relation, id string, depth int) (yes, known bool)

// indexed asks the engine's index about subproblem r on id, which it answers when
// known is true.
func (ev *evaluator) indexed(ctx context.Context, r *ir.Relation, id string, depth int) (o outcome, known bool) {
	if !ev.index.Indexes(r) {
		return outcome{}, false
	}
	if !ev.viewKnown {
		ev.view, ev.viewKnown = ev.index.View(ctx, ev.r.Revision(), ev.subject), true
	}
	if ev.view == nil {
		return outcome{}, false
	}
	yes, known := ev.view(r, id, depth)
	if yes {
		return outHas, known
	}
	return outNo, known
}

// nestsOnlyItself reports whether r is a relation the index may answer a lookup's walk
// through: indexed, and naming no subject set but its own.
func (ev *evaluator) nestsOnlyItself(r *ir.Relation) bool {
	if ev.index == nil || r.IsPermission() || !ev.index.Indexes(r) {
		return false
	}
	for _, a := range r.Allowed {
		if a.Relation != "" && !a.Wildcard && a.Rel != r {
			return false
		}
	}
	return true
}

// indexedDescendants returns, when the engine's index can say, the sets of r nested in
// r on id (r nesting only itself) at any depth, in id order: what a subject lookup's
// walk down through r's subject sets reaches, each unconditional; with the edges of
// the longest chain down and whether the walk would meet a cycle.
func (ev *evaluator) indexedDescendants(ctx context.Context, r *ir.Relation, id string) (ids []string, longest int, cyclic, known bool) {
	if !ev.nestsOnlyItself(r) {
		return nil, 0, false, false
	}
	return ev.index.Descendants(ctx, ev.r.Revision(), r, id)
}

// indexedSets returns, when the engine's index can say, the objects whose relation r
// holds the subject (each granted), by the fewest set edges from a set holding it
// directly: what a lookup's walk back finds in each round of its fixpoint. It answers
// only a relation whose subject sets are its own (nested groups): the walk back of one
// that names other relations' sets would reach them, in rounds of their own.
func (ev *evaluator) indexedSets(ctx context.Context, r *ir.Relation) ([][]string, bool) {
	if !ev.nestsOnlyItself(r) {
		return nil, false
	}
	ids, hops, known := ev.index.Sets(ctx, ev.r.Revision(), ev.subject, r)
	if !known {
		return nil, false
	}
	var levels [][]string
	for i, id := range ids {
		for int(hops[i]) >= len(levels) {
			levels = append(levels, nil)
		}
		levels[hops[i]] = append(levels[hops[i]], id)
	}
	return levels, true
}

// chained answers permission r over ids through the index where r follows a chain of
// objects of its own type back into itself (ir.Relation.ChainArrow, folders in
// folders): r holds on an object exactly when one of its other operands holds on the
// object or on an object the chain reaches from it, so they are evaluated once, over
// all of those objects, at the depth evaluation reaches the farthest with. The ids it
// leaves (rest) are evaluated as usual: those the index cannot answer for or whose
// chain meets a cycle, and those no object grants where some operand's answer is
// neither yes nor no (a caveat, an error, the depth limit), which the order of
// evaluation's branches decides. Without an index, or traced, it leaves every id.
func (ev *evaluator) chained(ctx context.Context, r *ir.Relation, ids []string, depth int) (out results, rest []string, err error) {
	if ev.index == nil || ev.tr != nil || (ev.subject.Relation == r.Name && ev.subject.Object.Type == r.Def.Name) {
		return nil, ids, nil
	}
	arrow := r.ChainArrow()
	if arrow == nil {
		return nil, ids, nil
	}
	// all holds each answered id followed by the objects its chain reaches, at
	// spans[i] for ids[i] (empty when left).
	all := make([]string, 0, 8*len(ids))
	spans := make([][2]int, len(ids))
	longest := 0
	for i, id := range ids {
		reached, l, cyclic, known := ev.index.Descendants(ctx, ev.r.Revision(), arrow.TuplesetRel, id)
		if !known || cyclic {
			rest = append(rest, id)
			continue
		}
		spans[i] = [2]int{len(all), len(all) + 1 + len(reached)}
		all = append(append(all, id), reached...)
		longest = max(longest, l)
	}
	// Every object is asked with the depth left at the farthest, the least any is
	// reached with: an answer found there without meeting the depth limit is the
	// answer at any greater depth.
	if len(all) == 0 || depth-longest <= 0 {
		return nil, ids, nil
	}
	acc := results{}
	pending := dedupe(slices.Clone(all))
	for _, c := range r.Rewrite.Children {
		if c == arrow || len(pending) == 0 {
			continue
		}
		res, err := ev.expr(ctx, r.Def, c, pending, depth-longest)
		if err != nil {
			return nil, nil, err
		}
		for _, id := range pending {
			acc.put(id, or(acc.get(id), res.get(id)))
		}
		pending = slices.DeleteFunc(pending, func(id string) bool { return acc.get(id).st == has })
	}
	out = make(results, len(ids))
	for i, id := range ids {
		sp := spans[i]
		if sp[1] == 0 {
			continue
		}
		granted, unsure := false, false
		for _, a := range all[sp[0]:sp[1]] {
			switch acc.get(a).st {
			case has:
				granted = true
			case no:
			default:
				unsure = true
			}
			if granted {
				break
			}
		}
		switch {
		case granted:
			out.put(id, outHas)
		case unsure:
			rest = append(rest, id)
		}
	}
	return out, rest, nil
}
