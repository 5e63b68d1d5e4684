package engine

import (
	"context"
	"errors"
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
	// After, for a lookup SubjectsOrdered answers in order, starts the answer after
	// this subject id.
	After string
}

// FoundSubject is one LookupSubjects result. A wildcard (ID "*") lists in Excluded the
// subjects it does not cover, each with how surely it is excluded.
type FoundSubject struct {
	ID       string
	Result   Result
	Excluded []FoundSubject
}

// LookupSubjects finds the subjects of the requested type that have the permission on
// the resource. Where no relation on the way allows a wildcard or a caveat
// (SubjectsOrdered), it streams them in id order after req.After, holding no more of
// the answer than the subjects in flight (subjectstream.go). Otherwise it expands the
// permission forwards from the resource into the set of subjects, with set algebra
// over wildcards: a wildcard minus some subjects is reported as "*" with those
// subjects excluded. A subject is then yielded as soon as the walk proves it granted
// (see emitPath); the other concrete subjects follow in id order once the whole set
// is known, then the wildcard if any. The order is the same for the same revision
// and request, so a caller can page by counting.
func (e *Engine) LookupSubjects(ctx context.Context, s *ir.Schema, r store.Reader, req LookupSubjectsRequest, yield func(FoundSubject) error) error {
	target, err := subjectsTarget(s, req)
	if err != nil {
		return err
	}
	if ordered, _ := orderedSubjects(target, req.SubjectType, req.SubjectRelation); ordered {
		return e.lookupSubjectsOrdered(ctx, s, r, req, target, yield)
	}
	if req.After != "" {
		return errors.New("LookupSubjects: After is for lookups answered in order")
	}
	return e.lookupSubjectSets(ctx, s, r, req, target, yield)
}

// lookupSubjectSets is LookupSubjects by set algebra.
func (e *Engine) lookupSubjectSets(ctx context.Context, s *ir.Schema, r store.Reader, req LookupSubjectsRequest, target *ir.Relation, yield func(FoundSubject) error) error {
	l := &subjectLookup{
		ev: newEvaluator(s, r, rel.SubjectRef{}, req.Context, shared{}), typ: req.SubjectType, subjRel: req.SubjectRelation,
		sets: newDepthMemo[*subjectSet](), yield: yield, sent: map[string]bool{},
	}
	set, err := l.relation(ctx, target, req.Resource.ID, e.maxDepth, &emitPath{})
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(set.concrete))
	for id := range set.concrete {
		if !l.sent[id] {
			ids = append(ids, id)
		}
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

// subjectLookup computes subject sets per (relation, object), memoized under the depth
// limit (depthMemo).
type subjectLookup struct {
	ev      *evaluator // for caveats
	typ     string
	subjRel string
	sets    depthMemo[*subjectSet]
	// yield is the caller's; sent holds the subjects already given to it.
	yield func(FoundSubject) error
	sent  map[string]bool
}

// depthMemo memoizes a walk forwards from the resource per (relation, object) under
// the depth limit: like SpiceDB's, such a walk fails with ErrMaxDepth on a chain of
// relations longer than the limit or on a cycle in the data (which a full traversal
// would follow until the limit), rather than costing time and memory in proportion to
// the data.
type depthMemo[T any] struct {
	memo map[memoKey]T
	// need is the depth each memoized value took: reused with less depth left, it
	// fails as computing it again would.
	need    map[memoKey]int
	onStack map[memoKey]bool
	// low is the least depth left at which the current computation reached a value.
	low int
}

func newDepthMemo[T any]() depthMemo[T] {
	return depthMemo[T]{memo: map[memoKey]T{}, need: map[memoKey]int{}, onStack: map[memoKey]bool{}}
}

// get returns the value of k with depth left, from the memo or from compute.
func (m *depthMemo[T]) get(ctx context.Context, k memoKey, depth int, compute func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	if v, ok := m.memo[k]; ok {
		if m.need[k] > depth {
			return zero, ErrMaxDepth
		}
		m.low = min(m.low, depth-m.need[k]+1)
		return v, nil
	}
	if depth <= 0 || m.onStack[k] {
		return zero, ErrMaxDepth
	}
	m.onStack[k] = true
	defer delete(m.onStack, k)
	outer := m.low
	m.low = depth
	v, err := compute()
	if err != nil {
		return zero, err
	}
	m.memo[k], m.need[k] = v, depth-m.low+1
	m.low = min(outer, m.low)
	return v, nil
}

// emitPath is how the walk reached a set from the looked-up permission, when a
// subject granted there without condition is granted in the whole answer as long as
// the filters admit it: the path runs through unions, references, relationships
// without caveats and arrows to any (each keeps such a subject granted), and through
// the first operand of intersections and exclusions, whose other operands are
// computed first and become filters. A nil path is one through anything else (a
// caveat, an arrow to all), where a subject found proves nothing yet.
type emitPath struct {
	filters []pathFilter
}

// pathFilter is the other operands of an intersection (in: a subject must be granted
// by them) or of an exclusion (a subject must have nothing there), as one set each.
type pathFilter struct {
	set *subjectSet
	in  bool
}

// through is p continued into the first operand of an intersection (in) or exclusion
// whose other operand is set.
func (p *emitPath) through(set *subjectSet, in bool) *emitPath {
	if p == nil {
		return nil
	}
	return &emitPath{filters: append(slices.Clip(p.filters), pathFilter{set, in})}
}

// unless is p, or nil when the relationship it continues through has caveat c.
func (p *emitPath) unless(c outcome) *emitPath {
	if c.st != has {
		return nil
	}
	return p
}

// found yields subject id, granted at the end of path p, when the filters show it is
// granted in the whole answer and it has not been yielded yet.
func (l *subjectLookup) found(p *emitPath, id string) error {
	if p == nil || l.sent[id] {
		return nil
	}
	for _, f := range p.filters {
		if m := f.set.member(id).st; f.in && m != has || !f.in && m != no {
			return nil
		}
	}
	l.sent[id] = true
	return l.yield(FoundSubject{ID: id, Result: Result{Membership: HasPermission}})
}

func (l *subjectLookup) relation(ctx context.Context, r *ir.Relation, id string, depth int, p *emitPath) (*subjectSet, error) {
	return l.sets.get(ctx, memoKey{r, id}, depth, func() (*subjectSet, error) {
		var set *subjectSet
		var err error
		if r.IsPermission() {
			if set, err = l.expr(ctx, r.Def, r.Rewrite, id, depth, p); err == nil && set.parts != nil {
				set = set.clone() // merged: a rewrite reports one set
			}
		} else {
			set, err = l.direct(ctx, r, id, depth, p)
		}
		if err != nil {
			return nil, err
		}
		if l.subjRel != "" && r.Def.Name == l.typ && r.Name == l.subjRel {
			parts := set.parts
			set = set.clone()
			set.parts = parts
			set.concrete.put(id, outHas) // a subject set is a member of itself
			if err := l.found(p, id); err != nil {
				return nil, err
			}
		}
		return set, nil
	})
}

// direct is the subjects of relation r on id: those its relationships name (named)
// and the members of the subject sets they name (out), united, and apart as parts
// (subjectSet) when subject sets contributed.
func (l *subjectLookup) direct(ctx context.Context, r *ir.Relation, id string, depth int, p *emitPath) (*subjectSet, error) {
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
				if err := l.found(p.unless(c), s.Object.ID); err != nil {
					return nil, err
				}
			}
		}
		if s.Relation == "" || s.Object.ID == rel.Wildcard {
			continue
		}
		sdef := l.ev.s.Definition(s.Object.Type)
		sub, err := l.relation(ctx, sdef.Relation(s.Relation), s.Object.ID, depth-1, p.unless(c))
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

func (l *subjectLookup) expr(ctx context.Context, def *ir.Definition, x *ir.Expr, id string, depth int, p *emitPath) (*subjectSet, error) {
	switch x.Kind {
	case ir.Ref:
		return l.relation(ctx, x.Rel, id, depth-1, p)
	case ir.Union:
		acc, err := l.expr(ctx, def, x.Children[0], id, depth, p)
		if err != nil {
			return nil, err
		}
		for _, c := range x.Children[1:] {
			next, err := l.expr(ctx, def, c, id, depth, p)
			if err != nil {
				return nil, err
			}
			acc = unionSets(acc, next)
		}
		return acc, nil
	case ir.Intersection, ir.Exclusion:
		// The other operands first: they filter what the first one yields.
		in := x.Kind == ir.Intersection
		rest := make([]*subjectSet, len(x.Children)-1)
		for i, c := range x.Children[1:] {
			next, err := l.expr(ctx, def, c, id, depth, nil)
			if err != nil {
				return nil, err
			}
			rest[i], p = next, p.through(next, in)
		}
		acc, err := l.expr(ctx, def, x.Children[0], id, depth, p)
		if err != nil {
			return nil, err
		}
		for _, next := range rest {
			if in {
				acc = intersectSets(acc, next)
			} else {
				acc = excludeSets(acc, next)
			}
		}
		return acc, nil
	case ir.Arrow:
		return l.arrow(ctx, def, x, id, depth, p)
	}
	return newSubjectSet(), nil
}

func (l *subjectLookup) arrow(ctx context.Context, def *ir.Definition, x *ir.Expr, id string, depth int, p *emitPath) (*subjectSet, error) {
	if x.ArrowKind == ir.ArrowAll {
		p = nil // each target's subjects are intersected
	}
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
			if sub, err = l.relation(ctx, target, s.Object.ID, depth-1, p.unless(c)); err != nil {
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
