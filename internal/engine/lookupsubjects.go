package engine

import (
	"context"
	"reflect"
	"slices"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// LookupSubjectsRequest asks for every subject of SubjectType (with SubjectRelation,
// "" for plain objects) that has Permission on Resource.
type LookupSubjectsRequest struct {
	Resource        rel.ObjectRef
	Permission      string
	SubjectType     string
	SubjectRelation string
	Context         map[string]any
}

// FoundSubject is one LookupSubjects result. A wildcard (ID "*") lists in Excluded the
// subjects it does not cover, each with how surely it is excluded.
type FoundSubject struct {
	ID       string
	Result   Result
	Excluded []FoundSubject
}

// LookupSubjects expands the permission forwards from the resource into the set of
// subjects of the requested type, with set algebra over wildcards: a wildcard minus
// some subjects is reported as "*" with those subjects excluded. Concrete subjects are
// yielded in id order, then the wildcard if any.
func (e *Engine) LookupSubjects(ctx context.Context, s *ir.Schema, r store.Reader, req LookupSubjectsRequest, yield func(FoundSubject) error) error {
	target, err := subjectsTarget(s, req)
	if err != nil {
		return err
	}
	l := &subjectLookup{
		ev: newEvaluator(s, r, rel.SubjectRef{}, req.Context, shared{}), typ: req.SubjectType, subjRel: req.SubjectRelation,
		memo: map[memoKey]*subjectSet{}, need: map[memoKey]int{}, onStack: map[memoKey]bool{},
	}
	set, err := l.relation(ctx, target, req.Resource.ID, e.maxDepth)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(set.concrete))
	for id := range set.concrete {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		// A concrete subject is reported with its own answer, beside the wildcard, as
		// SpiceDB reports it: a subject found conditionally next to an unconditional
		// wildcard is listed as conditional, and the wildcard says the rest.
		res, err := toResult(set.concrete[id])
		if err != nil {
			return err
		}
		if res.Membership == NoPermission {
			continue
		}
		if err := yield(FoundSubject{ID: id, Result: res}); err != nil {
			return err
		}
	}
	// The wildcard of each part, as SpiceDB sends them; the same one twice says nothing
	// more.
	var sent []FoundSubject
	for _, p := range partsOf(set) {
		if p.wild.st == no {
			continue
		}
		found, err := foundWildcard(p)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(sent, func(f FoundSubject) bool { return reflect.DeepEqual(f, found) }) {
			continue
		}
		sent = append(sent, found)
		if err := yield(found); err != nil {
			return err
		}
	}
	return nil
}

// foundWildcard is the wildcard of s with its exclusions, in id order.
func foundWildcard(s *subjectSet) (FoundSubject, error) {
	res, err := toResult(s.wild)
	if err != nil {
		return FoundSubject{}, err
	}
	found := FoundSubject{ID: rel.Wildcard, Result: res}
	ex := make([]string, 0, len(s.excluded))
	for id := range s.excluded {
		ex = append(ex, id)
	}
	slices.Sort(ex)
	for _, id := range ex {
		r, err := toResult(s.excluded[id])
		if err != nil {
			return FoundSubject{}, err
		}
		found.Excluded = append(found.Excluded, FoundSubject{ID: id, Result: r})
	}
	return found, nil
}

// subjectLookup computes subject sets per (relation, object), memoized. Like SpiceDB's,
// the walk is bounded by the depth limit: a chain of relations longer than the limit,
// or a cycle in the data (which a full traversal would follow until the limit), fails
// the lookup with ErrMaxDepth rather than costing time and memory in proportion to the
// data.
type subjectLookup struct {
	ev      *evaluator // for caveats
	typ     string
	subjRel string
	memo    map[memoKey]*subjectSet
	// need is the depth each memoized set took: reused with less depth left, it fails
	// as computing it again would.
	need    map[memoKey]int
	onStack map[memoKey]bool
	// low is the least depth left at which the current computation reached a set.
	low int
}

func (l *subjectLookup) relation(ctx context.Context, r *ir.Relation, id string, depth int) (*subjectSet, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k := memoKey{r, id}
	if set, ok := l.memo[k]; ok {
		if l.need[k] > depth {
			return nil, ErrMaxDepth
		}
		l.low = min(l.low, depth-l.need[k]+1)
		return set, nil
	}
	if depth <= 0 || l.onStack[k] {
		return nil, ErrMaxDepth
	}
	l.onStack[k] = true
	defer delete(l.onStack, k)
	outer := l.low
	l.low = depth
	var set *subjectSet
	var err error
	if r.IsPermission() {
		if set, err = l.expr(ctx, r.Def, r.Rewrite, id, depth); err == nil && set.parts != nil {
			set = set.clone() // merged: a rewrite reports one set
		}
	} else {
		set, err = l.direct(ctx, r, id, depth)
	}
	if err != nil {
		return nil, err
	}
	if l.subjRel != "" && r.Def.Name == l.typ && r.Name == l.subjRel {
		parts := set.parts
		set = set.clone()
		set.parts = parts
		set.concrete.put(id, outHas) // a subject set is a member of itself
	}
	l.memo[k], l.need[k] = set, depth-l.low+1
	l.low = min(outer, l.low)
	return set, nil
}

// direct is the subjects of relation r on id: those its relationships name (named)
// and the members of the subject sets they name (out), united, and apart as parts
// (subjectSet) when subject sets contributed.
func (l *subjectLookup) direct(ctx context.Context, r *ir.Relation, id string, depth int) (*subjectSet, error) {
	named, out := newSubjectSet(), newSubjectSet()
	var parts []*subjectSet
	f := store.Filter{ResourceType: r.Def.Name, ResourceIDs: []string{id}, Relation: r.Name}
	for item, err := range l.ev.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		x := item.Relationship
		c, err := l.ev.caveat(x.Caveat)
		if err != nil {
			return nil, err
		}
		s := x.Subject
		if s.Object.Type == l.typ && s.Relation == l.subjRel {
			if s.Object.ID == rel.Wildcard {
				named.wild = or(named.wild, c)
			} else {
				named.concrete.put(s.Object.ID, or(named.concrete.get(s.Object.ID), c))
			}
		}
		if s.Relation == "" || s.Object.ID == rel.Wildcard {
			continue
		}
		sdef := l.ev.s.Definition(s.Object.Type)
		sub, err := l.relation(ctx, sdef.Relation(s.Relation), s.Object.ID, depth-1)
		if err != nil {
			return nil, err
		}
		sub = withCaveat(sub, c)
		out = unionSets(out, sub)
		for _, p := range partsOf(sub) {
			if !p.empty() {
				parts = append(parts, p)
			}
		}
	}
	set := unionSets(named, out)
	if len(parts) > 0 {
		if !named.empty() {
			parts = append(parts, named)
		}
		set.parts = parts
	}
	return set, nil
}

func (l *subjectLookup) expr(ctx context.Context, def *ir.Definition, x *ir.Expr, id string, depth int) (*subjectSet, error) {
	switch x.Kind {
	case ir.Ref:
		return l.relation(ctx, x.Rel, id, depth-1)
	case ir.Union, ir.Intersection, ir.Exclusion:
		acc, err := l.expr(ctx, def, x.Children[0], id, depth)
		if err != nil {
			return nil, err
		}
		for _, c := range x.Children[1:] {
			next, err := l.expr(ctx, def, c, id, depth)
			if err != nil {
				return nil, err
			}
			switch x.Kind {
			case ir.Union:
				acc = unionSets(acc, next)
			case ir.Intersection:
				acc = intersectSets(acc, next)
			default:
				acc = excludeSets(acc, next)
			}
		}
		return acc, nil
	case ir.Arrow:
		return l.arrow(ctx, def, x, id, depth)
	}
	return newSubjectSet(), nil
}

func (l *subjectLookup) arrow(ctx context.Context, def *ir.Definition, x *ir.Expr, id string, depth int) (*subjectSet, error) {
	f := store.Filter{ResourceType: def.Name, ResourceIDs: []string{id}, Relation: x.Tupleset}
	var acc *subjectSet
	for item, err := range l.ev.r.Query(ctx, f, store.QueryOptions{}) {
		if err != nil {
			return nil, err
		}
		s := item.Relationship.Subject
		target := x.TargetOn(l.ev.s.Definition(s.Object.Type))
		sub := newSubjectSet()
		if target == nil {
			if x.ArrowKind == ir.ArrowAny {
				continue
			}
		} else {
			c, err := l.ev.caveat(item.Relationship.Caveat)
			if err != nil {
				return nil, err
			}
			if sub, err = l.relation(ctx, target, s.Object.ID, depth-1); err != nil {
				return nil, err
			}
			sub = withCaveat(sub, c)
		}
		switch {
		case acc == nil:
			acc = sub
		case x.ArrowKind == ir.ArrowAll:
			acc = intersectSets(acc, sub)
		default:
			acc = unionSets(acc, sub)
		}
	}
	if acc == nil {
		return newSubjectSet(), nil
	}
	return acc, nil
}
