package validationfile

import (
	"context"
	"fmt"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// expansion computes what zed lists for a permission in the validation section: the
// permission's recursive expansion (every subject set met is expanded in turn) folded
// into found subjects.
//
// The engine's Expand gives the shape of each expansion: which relations, arrows and
// set operations are evaluated, on which objects. Its tree carries no caveats, which
// zed shows (`[user:tom[...]]`), so each leaf's relationships, and each arrow's
// tupleset, are read again from the same reader, in the same key order the engine
// read them in, to recover them.
type expansion struct {
	eng *engine.Engine
	s   *ir.Schema
	r   store.Reader
	// done remembers finished expansions by "type:id#relation", so that a group
	// reached along many paths is expanded once. Sets are never changed once built
	// (every operation makes new ones), so sharing them is safe.
	done map[string]trackingSet
}

func newExpansion(eng *engine.Engine, s *ir.Schema, r store.Reader) *expansion {
	return &expansion{eng: eng, s: s, r: r, done: map[string]trackingSet{}}
}

// subjects expands relation on obj. depth bounds the chain of subject sets, as
// SpiceDB's dispatch depth does: cyclic data exceeds it.
func (x *expansion) subjects(ctx context.Context, obj rel.ObjectRef, relation string, depth int) (trackingSet, error) {
	key := obj.String() + "#" + relation
	if set, ok := x.done[key]; ok {
		return set, nil
	}
	if depth <= 0 {
		return nil, engine.ErrMaxDepth
	}
	node, err := x.eng.Expand(ctx, x.s, x.r, obj, relation, engine.ExpandPermissionNodes())
	if err != nil {
		return nil, err
	}
	set, err := x.relation(ctx, node, x.s.Definition(obj.Type).Relation(relation), depth)
	if err == nil {
		x.done[key] = set
	}
	return set, err
}

// relation follows n, the engine's node for rl. A permission whose rewrite is a single
// operand has a node of its own (ExpandPermissionNodes) around the operand's.
func (x *expansion) relation(ctx context.Context, n *engine.ExpandNode, rl *ir.Relation, depth int) (trackingSet, error) {
	if !rl.IsPermission() {
		return x.leaf(ctx, n, depth)
	}
	switch rl.Rewrite.Kind {
	case ir.Union, ir.Intersection, ir.Exclusion:
	default:
		if len(n.Children) != 1 {
			return nil, errShape(n)
		}
		n = n.Children[0]
	}
	return x.expr(ctx, n, rl, rl.Rewrite, depth)
}

// expr follows n, which the engine built for e, one of rl's rewrite expressions.
func (x *expansion) expr(ctx context.Context, n *engine.ExpandNode, rl *ir.Relation, e *ir.Expr, depth int) (trackingSet, error) {
	switch e.Kind {
	case ir.Ref:
		return x.relation(ctx, n, rl.Def.Relation(e.Name), depth)
	case ir.Nil:
		return trackingSet{}, nil
	case ir.Arrow:
		return x.arrow(ctx, n, e, depth)
	}
	if len(n.Children) != len(e.Children) {
		return nil, errShape(n)
	}
	var out trackingSet
	for i, c := range e.Children {
		set, err := x.expr(ctx, n.Children[i], rl, c, depth)
		if err != nil {
			return nil, err
		}
		out = combine(e.Kind, i, out, set)
	}
	return out, nil
}

// combine folds operand i of a set operation into acc.
func combine(k ir.ExprKind, i int, acc, set trackingSet) trackingSet {
	switch {
	case i == 0:
		out := trackingSet{}
		out.union(set)
		return out
	case k == ir.Intersection:
		return acc.intersect(set)
	case k == ir.Exclusion:
		return acc.exclude(set)
	}
	acc.union(set)
	return acc
}

// leaf reads the relationships of the relation n expanded: each subject is found
// through that relation, and a subject set is expanded in turn, conditioned on the
// relationship's caveat.
func (x *expansion) leaf(ctx context.Context, n *engine.ExpandNode, depth int) (trackingSet, error) {
	out := trackingSet{}
	resource := n.Object.String() + "#" + n.Relation
	f := store.Filter{ResourceType: n.Object.Type, ResourceIDs: []string{n.Object.ID}, Relation: n.Relation}
	var sets []rel.Relationship
	for item, err := range x.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		r := item.Relationship
		out.set(subjectKey(r.Subject.Object.Type, r.Subject.Relation)).add(&found{
			id: r.Subject.Object.ID, caveated: r.Caveat != nil, resources: map[string]struct{}{resource: {}},
		})
		if r.Subject.Relation != "" {
			sets = append(sets, r)
		}
	}
	for _, r := range sets {
		set, err := x.subjects(ctx, r.Subject.Object, r.Subject.Relation, depth-1)
		if err != nil {
			return nil, err
		}
		if r.Caveat != nil {
			set = set.withCaveat()
		}
		out.union(set)
	}
	return out, nil
}

// arrow unites (or, for `.all()`, intersects) the target's expansion on every object
// of the tupleset, each conditioned on its tupleset relationship's caveat. The engine
// made one child per tupleset relationship, in query order: an empty leaf where the
// object's type lacks the target, which empties an `.all()` as it does in SpiceDB.
func (x *expansion) arrow(ctx context.Context, n *engine.ExpandNode, e *ir.Expr, depth int) (trackingSet, error) {
	f := store.Filter{ResourceType: n.Object.Type, ResourceIDs: []string{n.Object.ID}, Relation: e.Tupleset}
	var out trackingSet
	i := 0
	for item, err := range x.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		if i >= len(n.Children) {
			return nil, errShape(n)
		}
		r := item.Relationship
		set := trackingSet{}
		if target := x.s.Definition(r.Subject.Object.Type).Relation(e.Target); target != nil {
			if n.Children[i].Object != r.Subject.Object {
				return nil, errShape(n)
			}
			if set, err = x.relation(ctx, n.Children[i], target, depth); err != nil {
				return nil, err
			}
		}
		if r.Caveat != nil {
			set = set.withCaveat()
		}
		kind := ir.Union
		if e.ArrowKind == ir.ArrowAll {
			kind = ir.Intersection
		}
		out = combine(kind, i, out, set)
		i++
	}
	if i != len(n.Children) {
		return nil, errShape(n)
	}
	if out == nil {
		out = trackingSet{}
	}
	return out, nil
}

// errShape reports an expansion tree that does not match the schema it was built
// from, which would be a bug in the engine or in this walk, never in the file.
func errShape(n *engine.ExpandNode) error {
	return fmt.Errorf("internal error: the expansion of %s#%s does not follow its schema", n.Object, n.Relation)
}
